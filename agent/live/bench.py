"""``bolt-agent bench``: voice-to-voice latency of the live pipeline against a sequential baseline.

Each command WAV is fed in real time into a fake microphone (:mod:`.fake`; everything above
the OS boundary is the real live pipeline with the real models) and the reply is played
into a fake speaker that consumes audio in real time. Per turn the pipeline's own
:class:`~agent.events.LiveTiming` gives every stage in ms from the end of user speech.

The same turn is then run through a **sequential baseline**: whole transcript → whole reply
(no streaming) → whole synthesis → play, on the same models and speaker; its voice-to-voice
is the live turn's endpoint delay plus that chain. The conversation history is cleared
before every turn so both see the same prompt.

Reported (ms, p50/p95 over turns): every stage, ``voice_to_voice_ms`` (speech end → first
audio played), ``baseline_voice_to_voice_ms``, ``speedup_vs_sequential`` (baseline p50 /
streaming p50; also for multi-sentence replies only) and ``floor_ratio`` (median over turns of
voice-to-voice / (endpoint + ASR + model time to first sentence + synthesis of the first
sentence)): 1.0 means the pipeline adds nothing to the unavoidable chain.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from agent.audio import decode_file
from agent.config import Config
from agent.events import Event, LiveTiming, Skipped, Spoken
from agent.live.fake import FakeBackend
from agent.live.speaker import PlayItem, Speaker

STAGES = ("endpoint_ms", "asr_done_ms", "first_token_ms", "first_sentence_ms", "first_audio_ms", "first_played_ms",
          "asr_ms", "llm_ttft_ms", "tts_first_audio_ms")


class EventLog:
    """Thread-safe event list with waiting."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._cv = threading.Condition()

    def __call__(self, ev: Event) -> None:
        """Record one event."""
        with self._cv:
            self.events.append(ev)
            self._cv.notify_all()

    def wait_for(self, pred: Any, start: int, timeout: float) -> Event | None:
        """The first event from index ``start`` on for which ``pred(ev)`` is true, or None after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for ev in self.events[start:]:
                    if pred(ev):
                        return ev
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(left)


def _pct(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": -1.0, "p95": -1.0}
    return {"p50": round(float(np.percentile(values, 50)), 1), "p95": round(float(np.percentile(values, 95)), 1)}


def _sequential(agent: Any, speaker: Speaker, audio: np.ndarray) -> float:
    """Time from the end of the utterance to the first sample played, the sequential way, ms."""
    from agent.vad import split_utterances

    segs = split_utterances(audio, agent.cfg.vad)
    speech = np.concatenate([s.audio for s in segs]) if segs else audio
    t0 = time.perf_counter()
    text = agent.asr.transcribe(speech).text
    reply = agent.conversation.turn(text, -2).text if text else ""
    chunks = list(agent.tts.synthesize(reply)) if reply else []
    if not chunks:
        return -1.0
    whole = np.concatenate([c.audio for c in chunks])
    while not speaker.reports.empty():
        speaker.reports.get_nowait()
    speaker.enqueue(PlayItem(-2, reply), whole, chunks[0].sample_rate)
    while True:
        r = speaker.reports.get(timeout=10)
        if r.kind == "started":
            return (r.t - t0) * 1000
        if time.perf_counter() - t0 > 60:
            return -1.0


def run_bench(cfg: Config, folder: Path, runs: int = 1, limit: int = 0) -> dict[str, Any]:
    """Replay every WAV in ``folder`` ``runs`` times; return the report (see the module docstring).

    Raises:
        agent.models.ModelNotFoundError, agent.llm.LLMError, agent.tts.TTSError: a model cannot load.

    """
    from agent.live.live import LiveAgent
    from agent.pipeline import VoiceAgent

    files = sorted(Path(folder).glob("*.wav"))[: limit or None]
    log = EventLog()
    backend = FakeBackend()
    agent = VoiceAgent(cfg, log, Path("out"))
    live = LiveAgent(agent, log, backend)
    agent.warmup()
    live.open_devices()
    listener = threading.Thread(target=live.run, name="listener", daemon=True)
    listener.start()
    base_speaker = Speaker(cfg.audio, backend)
    base_speaker.open()
    live_t: list[LiveTiming] = []
    multi: list[bool] = []
    base: list[float] = []
    try:
        for _ in range(runs):
            for f in files:
                audio = decode_file(f)
                agent.conversation.history.clear()
                start = len(log.events)
                backend.feed(np.concatenate([audio, np.zeros(16000, dtype=np.float32)]))
                ev = log.wait_for(lambda e: isinstance(e, (LiveTiming, Skipped)), start, 90)
                while live.speaker.busy or not backend.mic_idle:
                    time.sleep(0.05)
                if not isinstance(ev, LiveTiming) or ev.first_played_ms < 0:
                    continue
                live_t.append(ev)
                multi.append(sum(isinstance(e, Spoken) and e.turn_id == ev.turn_id for e in log.events[start:]) > 1)
                agent.conversation.history.clear()
                seq = _sequential(agent, base_speaker, audio)
                base.append(ev.endpoint_ms + seq if seq >= 0 else -1.0)
                while base_speaker.busy:
                    time.sleep(0.05)
    finally:
        live.stop()
        listener.join(5)
        base_speaker.close()
        agent.close()
    return _report(live_t, base, multi)


def _report(live_t: list[LiveTiming], base: list[float], multi: list[bool]) -> dict[str, Any]:
    v2v = [t.first_played_ms for t in live_t]
    ok = [i for i, b in enumerate(base) if b >= 0]
    floors = [t.endpoint_ms + t.asr_ms + (t.first_sentence_ms - t.asr_done_ms) + t.tts_first_audio_ms
              for t in live_t]
    ratio = [v / f for v, f in zip(v2v, floors) if f > 0]
    bp, vp = _pct([base[i] for i in ok]), _pct([v2v[i] for i in ok])
    mi = [i for i in ok if multi[i]]
    bm, vm = _pct([base[i] for i in mi]), _pct([v2v[i] for i in mi])
    return {
        "turns": len(live_t),
        "voice_to_voice_ms": _pct(v2v),
        "baseline_voice_to_voice_ms": bp,
        "speedup_vs_sequential": round(bp["p50"] / vp["p50"], 2) if ok and vp["p50"] > 0 else None,
        "speedup_multi_sentence": round(bm["p50"] / vm["p50"], 2) if mi and vm["p50"] > 0 else None,
        "multi_sentence_turns": len(mi),
        "floor_ratio": round(float(np.median(ratio)), 3) if ratio else None,
        "stages": {s: _pct([getattr(t, s) for t in live_t if getattr(t, s) >= 0]) for s in STAGES},
    }


def format_report(r: dict[str, Any]) -> str:
    """The report as a few readable lines."""
    lines = [f"turns: {r['turns']}",
             f"voice-to-voice   p50 {r['voice_to_voice_ms']['p50']:.0f} ms  p95 {r['voice_to_voice_ms']['p95']:.0f} ms",
             f"sequential       p50 {r['baseline_voice_to_voice_ms']['p50']:.0f} ms  "
             f"p95 {r['baseline_voice_to_voice_ms']['p95']:.0f} ms",
             f"speedup vs sequential: {r['speedup_vs_sequential']} (multi-sentence replies: "
             f"{r['speedup_multi_sentence']}, {r['multi_sentence_turns']} turns; target >= 2)",
             f"floor ratio: {r['floor_ratio']} (target <= 1.10)", "stages (ms from end of speech / durations):"]
    lines += [f"  {k:20s} p50 {v['p50']:7.0f}  p95 {v['p95']:7.0f}" for k, v in r["stages"].items()]
    return "\n".join(lines)
