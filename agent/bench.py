"""``bolt-agent bench``: voice-to-voice latency of the pipeline against its sequential mode.

Each command WAV is played in real time by a :class:`~agent.pipeline.sources.FileSource`
into the one pipeline (real models throughout) and its reply is played by a
:class:`~agent.pipeline.sinks.SpeakerSink` on an in-process speaker that consumes audio in
real time (:mod:`agent.live.fake`, the OS boundary). Per turn the pipeline's own
:class:`~agent.events.Timing` gives every stage in ms from the end of user speech.

The same file then goes through the same pipeline in **sequential mode**
(``streaming=False``: whole transcript → whole reply → whole synthesis → play), on the same
models and speaker. The history is cleared before every run so both see the same prompt.

Reported (ms, p50/p95 over turns): every stage, ``voice_to_voice_ms`` (speech end → first
audio played), ``baseline_voice_to_voice_ms``, ``speedup_vs_sequential`` (baseline p50 /
streaming p50; also for multi-sentence replies only), ``floor_ratio`` (median over turns of
voice-to-voice / (endpoint + ASR + model time to first sentence + synthesis of the first
sentence)), ``turns_per_file`` (user turns each command file became; one is right), the
model's decoding speed ``tokens_per_s`` and, with a drafter (``[llm.server] draft_model``), the
mean ``draft_acceptance``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agent.config import Config
from agent.events import Event, Spoken, Timing, Transcript

STAGES = (
    "endpoint_ms",
    "asr_done_ms",
    "first_token_ms",
    "first_sentence_ms",
    "first_audio_ms",
    "first_played_ms",
    "asr_ms",
    "llm_ttft_ms",
    "tts_first_audio_ms",
)


class EventLog:
    """Thread-safe message list with waiting (the benchmark's and the tests' sink)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._cv = threading.Condition()

    def __call__(self, ev: Event) -> None:
        """Record one message."""
        with self._cv:
            self.events.append(ev)
            self._cv.notify_all()

    def wait_for(self, pred: Callable[[Event], bool], start: int, timeout: float) -> Event | None:
        """The first message from index ``start`` on that satisfies ``pred``; None after ``timeout`` s."""
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
    return {
        "p50": round(float(np.percentile(values, 50)), 1),
        "p95": round(float(np.percentile(values, 95)), 1),
    }


def _mean(values: list[float]) -> float | None:
    return round(float(np.mean(values)), 3) if values else None


def run_bench(cfg: Config, folder: Path, runs: int = 1, limit: int = 0) -> dict[str, Any]:
    """Replay every WAV in ``folder`` ``runs`` times; return the report (see the module docstring).

    Raises:
        agent.models.ModelNotFoundError, agent.llm.LLMError, agent.tts.TTSError: a model cannot load.
    """
    from agent.live.fake import FakeBackend
    from agent.live.speaker import Speaker
    from agent.pipeline import Bus, FileSource, Pipeline, SpeakerSink, build_core
    from agent.pipeline.pipeline import run_to_end

    files = sorted(Path(folder).glob("*.wav"))[: limit or None]
    log = EventLog()
    bus = Bus(log)
    core = build_core(cfg, bus.publish)
    core.warmup()
    speaker = Speaker(cfg.audio, FakeBackend())
    speaker.open()
    live_t: list[Timing] = []
    multi: list[bool] = []
    base: list[float] = []
    turns: list[int] = []

    def one(path: Path, streaming: bool) -> tuple[list[Event], Timing | None]:
        core.conversation.history.clear()
        start = len(log.events)
        p = Pipeline(
            core, bus, FileSource([path], True, bus.publish), SpeakerSink(speaker), streaming=streaming
        )
        run_to_end(p)
        core.robot.stop()
        evs = log.events[start:]
        timings = [e for e in evs if isinstance(e, Timing) and e.first_played_ms >= 0]
        return evs, (timings[0] if timings else None)

    try:
        for _ in range(runs):
            for f in files:
                evs, t = one(f, True)
                turns.append(sum(isinstance(e, Transcript) for e in evs))
                if t is None:
                    continue
                live_t.append(t)
                multi.append(sum(isinstance(e, Spoken) and e.turn_id == t.turn_id for e in evs) > 1)
                _, b = one(f, False)
                base.append(b.first_played_ms if b is not None else -1.0)
    finally:
        speaker.close()
        core.close()
    return _report(live_t, base, multi, turns)


def _report(live_t: list[Timing], base: list[float], multi: list[bool], turns: list[int]) -> dict[str, Any]:
    v2v = [t.first_played_ms for t in live_t]
    ok = [i for i, b in enumerate(base) if b >= 0]
    floors = [
        t.endpoint_ms + t.asr_ms + (t.first_sentence_ms - t.asr_done_ms) + t.tts_first_audio_ms
        for t in live_t
    ]
    ratio = [v / f for v, f in zip(v2v, floors, strict=True) if f > 0]
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
        "turns_per_file": turns,
        "tokens_per_s": _pct([t.tokens_per_s for t in live_t if t.tokens_per_s > 0]),
        "draft_acceptance": _mean([t.draft_acceptance for t in live_t if t.draft_acceptance >= 0]),
        "stages": {s: _pct([getattr(t, s) for t in live_t if getattr(t, s) >= 0]) for s in STAGES},
    }


def format_report(r: dict[str, Any]) -> str:
    """The report as a few readable lines."""
    lines = [
        f"turns: {r['turns']} (user turns per file: {r['turns_per_file']})",
        f"voice-to-voice   p50 {r['voice_to_voice_ms']['p50']:.0f} ms  "
        f"p95 {r['voice_to_voice_ms']['p95']:.0f} ms",
        f"sequential       p50 {r['baseline_voice_to_voice_ms']['p50']:.0f} ms  "
        f"p95 {r['baseline_voice_to_voice_ms']['p95']:.0f} ms",
        f"speedup vs sequential: {r['speedup_vs_sequential']} (multi-sentence replies: "
        f"{r['speedup_multi_sentence']}, {r['multi_sentence_turns']} turns)",
        f"floor ratio: {r['floor_ratio']}",
        f"model decoding: p50 {r['tokens_per_s']['p50']:.0f} tokens/s; drafter acceptance: "
        f"{r['draft_acceptance'] if r['draft_acceptance'] is not None else 'no drafter'}",
        "stages (ms from end of speech / durations):",
    ]
    lines += [f"  {k:20s} p50 {v['p50']:7.0f}  p95 {v['p95']:7.0f}" for k, v in r["stages"].items()]
    return "\n".join(lines)
