"""``bolt-agent bench``: voice-to-voice latency of the pipeline against its sequential mode.

Each command WAV is played in real time by a :class:`~agent.pipeline.sources.FileSource`
into the one pipeline (real models throughout) and its reply is played by a
:class:`~agent.pipeline.sinks.SpeakerSink` on an in-process speaker that consumes audio in
real time (:mod:`agent.audio_io.fake`, the OS boundary). Per turn the pipeline's own
:class:`~agent.events.Timing` gives every stage in ms from the end of user speech.

The same file then goes through the same pipeline in **sequential mode**
(``streaming=False``: whole transcript → whole reply → whole synthesis → play), on the same
models and speaker. The history is cleared before every run so both see the same prompt.

Before the runs the model's raw speeds are measured on the same loaded model
(:func:`measure_model_speed`, about two seconds): unconstrained decoding (no grammar) and
prompt evaluation (prefill), best of three. The **floor** of a turn is what the work that
cannot be avoided costs at those speeds (:func:`turn_floor`): the endpoint rule's minimum
silence (:func:`endpoint_min_silence_ms`) + ASR of the final transcript (``asr_ms``: with
semantic end-of-turn it runs after the short silence, before the endpoint) + prefill of the
turn's new prompt tokens + the first spoken sentence's tokens at raw decode speed + piper's
first chunk of that sentence (synthesized again after the run, on a quiet machine).
Tool rounds, grammar overhead and scheduling are not in it.

Reported (ms, p50/p95 over turns):

- ``voice_to_voice_ms`` (speech end → first audio played), ``baseline_voice_to_voice_ms``,
  ``speedup_vs_sequential`` (baseline p50 / streaming p50), ``speedup_multi_sentence`` and
  ``multi_sentence_turns`` (the same for replies of more than one sentence);
- ``floor_ms`` (p50/p95), ``floor_parts_ms`` (p50 of each part: ``min_silence``,
  ``asr_tail``, ``prefill``, ``first_sentence``, ``tts_first_chunk``), ``floor_ratio``
  (median over turns of voice-to-voice / floor);
- ``model_speed``: ``decode_tokens_per_s`` and ``prefill_tokens_per_s`` (the probes);
- ``per_turn``: per turn ``file``, ``voice_to_voice_ms``, ``floor_ms``, ``floor_ratio``,
  ``new_tokens``, ``sentence_tokens``, ``first_sentence`` and the floor's parts;
- ``turns_per_file`` (user turns each command file became; one is right), ``tokens_per_s``
  (the model's decoding speed in the turns, grammar included) and, over turns that drafted
  (a ``[llm.server] draft_model``, or an embedded model reading a tool result back), the mean
  ``draft_acceptance``;
- ``stages``: every :class:`~agent.events.Timing` mark.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from agent.config import Config
from agent.engines import ChatEngine, Decoding, Generation
from agent.events import Event, Spoken, Timing, Transcript, TurnDropped
from agent.speech.tts import TextToSpeech

if TYPE_CHECKING:
    from agent.stopper import Stopper

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
FLOOR_PARTS = ("min_silence", "asr_tail", "prefill", "first_sentence", "tts_first_chunk")


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


# --- the floor -----------------------------------------------------------------------------------


def endpoint_min_silence_ms(cfg: Config) -> float:
    """The silence after which the final transcript starts, ms (the floor's ``min_silence``).

    With semantic end-of-turn (``[turn] end_of_turn = "semantic"``) the utterance is transcribed
    after ``[turn] early_asr_ms`` and judged at ``short_silence_ms`` (the shorter of the two
    while early ASR is off); with silence-only endpointing it is ``[vad] min_silence_ms``. With
    early ASR the floor's silence + ASR is still over ``short_silence_ms`` (Whisper alone takes
    longer than the difference), so the floor never undercuts the judgement.
    """
    turn = getattr(cfg, "turn", None)
    if turn is not None and getattr(turn, "end_of_turn", "silence") == "semantic":
        early = getattr(turn, "early_asr_ms", 0)
        return float(early or turn.short_silence_ms)
    return float(cfg.vad.min_silence_ms)


@dataclass(frozen=True)
class ModelSpeed:
    """The chat model's raw speeds, measured on the loaded model.

    Attributes:
        decode_tokens_per_s: Unconstrained generation (no grammar, no tools), tokens/s.
        prefill_tokens_per_s: Prompt evaluation of uncached tokens, tokens/s.
        probe_ms: Time the probes took, ms.
    """

    decode_tokens_per_s: float
    prefill_tokens_per_s: float
    probe_ms: float = 0.0


def measure_model_speed(
    model: ChatEngine, decode_tokens: int = 64, prefill_tokens: int = 96, repeats: int = 3
) -> ModelSpeed:
    """Measure unconstrained decode and prefill speed; best of ``repeats`` (others' load only slows).

    Each probe prompt starts with its own words, so the KV cache reuses none of it. Decoding
    is greedy and without a grammar; prefill is timed to the first token, less one decode
    step. The KV cache holds the probes afterwards: warm the conversation's prefix again.

    Args:
        model: The chat model (any engine: ``stream``, ``tokenize``).
        decode_tokens: Tokens generated per decode probe.
        prefill_tokens: Prompt length per prefill probe, tokens (a long user turn).
        repeats: Probes of each kind.

    Returns:
        The speeds (0 for a kind no probe could measure).
    """
    t0 = time.perf_counter()
    counting = ", ".join(str(i) for i in range(1, 300))
    decode = 0.0
    for k in range(repeats):
        gen = Generation()
        # Counting goes on for as long as asked: the probe never stops early at an end token.
        probe = Decoding(f"Speed probe {k}. Count: 1, 2, 3, 4, 5,", max_tokens=decode_tokens, temperature=0.0)
        for _ in model.stream(probe, gen):
            pass
        decode = max(decode, gen.tokens_per_s)
    prefill = 0.0
    for k in range(repeats):
        gen = Generation()
        text = f"Prefill probe {k}: {counting}"
        toks = model.tokenize(text)[:prefill_tokens]
        prompt = _detokenize(model, toks, text)
        for _ in model.stream(Decoding(prompt, max_tokens=1, temperature=0.0), gen):
            pass
        step_ms = 1000.0 / decode if decode > 0 else 0.0
        ms = gen.ttft_ms - step_ms
        if gen.prompt_tokens > 1 and ms > 0:
            prefill = max(prefill, gen.prompt_tokens * 1000.0 / ms)
    return ModelSpeed(round(decode, 1), round(prefill, 1), round((time.perf_counter() - t0) * 1000.0, 1))


def _detokenize(model: ChatEngine, toks: list[int], text: str) -> str:
    """``toks`` as text (the engine's detokenizer), or a same-length share of ``text`` where it has none."""
    out = model.detokenize(toks)
    if out:
        return out
    full = max(len(model.tokenize(text)), 1)
    return text[: max(1, len(text) * len(toks) // full)]


def turn_floor(
    min_silence_ms: float,
    asr_tail_ms: float,
    new_tokens: int,
    sentence_tokens: int,
    tts_first_chunk_ms: float,
    speed: ModelSpeed,
) -> dict[str, float]:
    """The floor of one turn: the unavoidable work at the model's raw speeds, ms.

    Args:
        min_silence_ms: The endpoint rule's minimum silence (:func:`endpoint_min_silence_ms`).
        asr_tail_ms: ASR of the final transcript after the minimum silence (``Timing.asr_ms``).
        new_tokens: Prompt tokens the turn adds (its user message, as rendered).
        sentence_tokens: Tokens of the first spoken sentence.
        tts_first_chunk_ms: Piper's time to the first audio of that sentence.
        speed: The measured raw speeds (a speed of 0 makes its part 0).

    Returns:
        ``min_silence``, ``asr_tail``, ``prefill``, ``first_sentence``, ``tts_first_chunk``
        and their sum ``floor``, ms.
    """
    parts = {
        "min_silence": float(min_silence_ms),
        "asr_tail": max(0.0, float(asr_tail_ms)),
        "prefill": 1000.0 * new_tokens / speed.prefill_tokens_per_s
        if speed.prefill_tokens_per_s > 0
        else 0.0,
        "first_sentence": 1000.0 * sentence_tokens / speed.decode_tokens_per_s
        if speed.decode_tokens_per_s > 0
        else 0.0,
        "tts_first_chunk": max(0.0, float(tts_first_chunk_ms)),
    }
    parts = {k: round(v, 1) for k, v in parts.items()}
    parts["floor"] = round(sum(parts.values()), 1)
    return parts


def floor_ratio(voice_to_voice_ms: float, floor_ms: float) -> float | None:
    """Voice-to-voice over the floor (1.0: nothing but unavoidable work); None without both."""
    if voice_to_voice_ms < 0 or floor_ms <= 0:
        return None
    return round(voice_to_voice_ms / floor_ms, 3)


def new_prompt_tokens(
    model: ChatEngine, render: Callable[[list[dict[str, Any]]], str], user: dict[str, Any]
) -> int:
    """Tokens a user message adds to a prompt whose system prefix is cached.

    The prompt with ``user`` is compared token by token with the same prompt for an empty
    user message; what follows the shared prefix (the message and the template's turn
    markup up to the generation prompt) is what the model must evaluate.

    Args:
        model: The chat model (``tokenize``).
        render: Renders a history (after the system prompt) to the prompt text.
        user: The user message (``role``, ``content``).
    """
    full = model.tokenize(render([user]))
    empty = model.tokenize(render([{"role": "user", "content": ""}]))
    common = 0
    for a, b in zip(full, empty, strict=False):
        if a != b:
            break
        common += 1
    return len(full) - common


def tts_first_chunk_ms(tts: TextToSpeech, text: str) -> float:
    """Time piper takes to the first audio chunk of ``text``, ms (-1 when nothing is speakable)."""
    t0 = time.perf_counter()
    for _ in tts.synthesize(text):
        return (time.perf_counter() - t0) * 1000.0
    return -1.0


# --- the run -------------------------------------------------------------------------------------


@dataclass
class _Turn:
    """One streaming turn with what its floor needs."""

    file: str
    timing: Timing
    first_sentence: str
    new_tokens: int
    multi: bool
    baseline_ms: float = -1.0
    sentence_tokens: int = 0
    tts_first_ms: float = -1.0


def percentiles(values: list[float]) -> dict[str, float]:
    """``{"p50": ..., "p95": ...}`` of ``values`` (rounded to 0.1; -1 for no values)."""
    if not values:
        return {"p50": -1.0, "p95": -1.0}
    return {
        "p50": round(float(np.percentile(values, 50)), 1),
        "p95": round(float(np.percentile(values, 95)), 1),
    }


def _mean(values: list[float]) -> float | None:
    return round(float(np.mean(values)), 3) if values else None


def run_bench(
    cfg: Config, folder: Path, runs: int = 1, limit: int = 0, stopper: Stopper | None = None
) -> dict[str, Any]:
    """Replay every WAV in ``folder`` ``runs`` times; return the report (see the module docstring).

    Args:
        cfg: The validated config.
        folder: Command WAVs.
        runs: Passes over them.
        limit: At most this many WAVs (0 = all).
        stopper: The command's signal handling (a signal while loading parks the robot and
            exits; during the runs it stops the current pipeline).

    Raises:
        agent.models.ModelNotFoundError, agent.engines.LLMError, agent.speech.tts.TTSError: a model
            cannot load.
        agent.stopper.Stopped: a signal stopped the runs (the robot is parked).
    """
    from agent.audio_io.fake import FakeBackend
    from agent.audio_io.speaker import Speaker
    from agent.pipeline import Bus, FileSource, Pipeline, SpeakerSink, build_core
    from agent.pipeline.pipeline import run_to_end
    from agent.stopper import Stopped, Stopper

    stopper = stopper or Stopper()
    files = sorted(Path(folder).glob("*.wav"))[: limit or None]
    log = EventLog()
    bus = Bus(log)
    with stopper.loading(bus.publish):
        core = build_core(cfg, bus.publish, on_robot=stopper.own)
        try:
            core.warmup()
            conv = core.conversation
            speed = measure_model_speed(core.model)
            conv.warmup()  # the probes replaced the cached prefix
        except BaseException:
            core.close()
            raise
    speaker = Speaker(cfg.audio, FakeBackend())
    speaker.open()
    done: list[_Turn] = []
    turns: list[int] = []
    current: list[Pipeline] = []

    def stop() -> None:
        for p in current:
            p.stop()

    def one(path: Path, streaming: bool) -> tuple[list[Event], Timing | None, int]:
        conv.history.clear()
        start = len(log.events)
        p = Pipeline(
            core, bus, FileSource([path], True, bus.publish), SpeakerSink(speaker), streaming=streaming
        )
        current[:] = [p]
        if stopper.stopped or not run_to_end(p):  # stopped before the run started, or during it
            raise Stopped
        core.robot.stop()
        evs = log.events[start:]
        timings = [e for e in evs if isinstance(e, Timing) and e.first_played_ms >= 0]
        user = next((m for m in conv.history if m["role"] == "user"), None)
        n_new = new_prompt_tokens(core.model, conv.prompter.render, user) if user is not None else 0
        return evs, (timings[0] if timings else None), n_new

    try:
        with stopper.running(stop):
            for _ in range(runs):
                for f in files:
                    evs, t, n_new = one(f, True)
                    dropped = {e.turn_id for e in evs if isinstance(e, TurnDropped)}  # the user went on
                    turns.append(sum(isinstance(e, Transcript) and e.turn_id not in dropped for e in evs))
                    if t is None:
                        continue
                    spoken = [e for e in evs if isinstance(e, Spoken) and e.turn_id == t.turn_id]
                    first = (spoken[0].piece or spoken[0].text) if spoken else ""
                    turn = _Turn(f.name, t, first, n_new, len(spoken) > 1)
                    _, b, _ = one(f, False)
                    turn.baseline_ms = b.first_played_ms if b is not None else -1.0
                    done.append(turn)
            # Measured after the runs, one sentence at a time: the floor's TTS part is piper alone.
            for turn in done:
                if stopper.stopped:
                    raise Stopped
                turn.sentence_tokens = (
                    core.model.count_tokens(turn.first_sentence) if turn.first_sentence else 0
                )
                turn.tts_first_ms = (
                    tts_first_chunk_ms(core.tts, turn.first_sentence) if turn.first_sentence else -1.0
                )
    finally:
        speaker.close()
        core.close()
    return _report(done, turns, speed, endpoint_min_silence_ms(cfg))


def _report(done: list[_Turn], turns: list[int], speed: ModelSpeed, min_silence_ms: float) -> dict[str, Any]:
    live_t = [d.timing for d in done]
    v2v = [t.first_played_ms for t in live_t]
    base = [d.baseline_ms for d in done]
    ok = [i for i, b in enumerate(base) if b >= 0]
    per_turn: list[dict[str, Any]] = []
    for d in done:
        t = d.timing
        # The transcript that ended the turn was made after the minimum silence: at the pause
        # (semantic end-of-turn, before the endpoint) or after it (silence only).
        tail = t.asr_ms
        parts = turn_floor(min_silence_ms, tail, d.new_tokens, d.sentence_tokens, d.tts_first_ms, speed)
        floor = parts.pop("floor")
        per_turn.append(
            {
                "file": d.file,
                "voice_to_voice_ms": round(t.first_played_ms, 1),
                "floor_ms": floor,
                "floor_ratio": floor_ratio(t.first_played_ms, floor),
                "new_tokens": d.new_tokens,
                "sentence_tokens": d.sentence_tokens,
                "first_sentence": d.first_sentence,
                "parts_ms": parts,
            }
        )
    ratios = [p["floor_ratio"] for p in per_turn if p["floor_ratio"] is not None]
    bp, vp = percentiles([base[i] for i in ok]), percentiles([v2v[i] for i in ok])
    mi = [i for i in ok if done[i].multi]
    bm, vm = percentiles([base[i] for i in mi]), percentiles([v2v[i] for i in mi])
    return {
        "turns": len(live_t),
        "voice_to_voice_ms": percentiles(v2v),
        "baseline_voice_to_voice_ms": bp,
        "speedup_vs_sequential": round(bp["p50"] / vp["p50"], 2) if ok and vp["p50"] > 0 else None,
        "speedup_multi_sentence": round(bm["p50"] / vm["p50"], 2) if mi and vm["p50"] > 0 else None,
        "multi_sentence_turns": len(mi),
        "floor_ms": percentiles([p["floor_ms"] for p in per_turn]),
        "floor_parts_ms": {k: percentiles([p["parts_ms"][k] for p in per_turn])["p50"] for k in FLOOR_PARTS},
        "floor_ratio": round(float(np.median(ratios)), 3) if ratios else None,
        "model_speed": {
            "decode_tokens_per_s": speed.decode_tokens_per_s,
            "prefill_tokens_per_s": speed.prefill_tokens_per_s,
            "probe_ms": speed.probe_ms,
        },
        "per_turn": per_turn,
        "turns_per_file": turns,
        "tokens_per_s": percentiles([t.tokens_per_s for t in live_t if t.tokens_per_s > 0]),
        "draft_acceptance": _mean([t.draft_acceptance for t in live_t if t.draft_acceptance >= 0]),
        "stages": {s: percentiles([getattr(t, s) for t in live_t if getattr(t, s) >= 0]) for s in STAGES},
    }


def format_report(r: dict[str, Any]) -> str:
    """The report as a few readable lines."""
    fp, ms = r["floor_parts_ms"], r["model_speed"]
    lines = [
        f"turns: {r['turns']} (user turns per file: {r['turns_per_file']})",
        f"voice-to-voice   p50 {r['voice_to_voice_ms']['p50']:.0f} ms  "
        f"p95 {r['voice_to_voice_ms']['p95']:.0f} ms",
        f"sequential       p50 {r['baseline_voice_to_voice_ms']['p50']:.0f} ms  "
        f"p95 {r['baseline_voice_to_voice_ms']['p95']:.0f} ms",
        f"speedup vs sequential: {r['speedup_vs_sequential']} (multi-sentence replies: "
        f"{r['speedup_multi_sentence']}, {r['multi_sentence_turns']} turns)",
        f"floor            p50 {r['floor_ms']['p50']:.0f} ms  p95 {r['floor_ms']['p95']:.0f} ms  = silence "
        f"{fp['min_silence']:.0f} + ASR tail {fp['asr_tail']:.0f} + prefill {fp['prefill']:.0f} + "
        f"first sentence {fp['first_sentence']:.0f} + TTS first chunk {fp['tts_first_chunk']:.0f} (p50s)",
        f"floor ratio (voice-to-voice / floor, median): {r['floor_ratio']}",
        f"model speed (unconstrained): decode {ms['decode_tokens_per_s']:.0f} tokens/s, prefill "
        f"{ms['prefill_tokens_per_s']:.0f} tokens/s ({ms['probe_ms'] / 1000:.1f} s of probes)",
        f"model decoding in turns: p50 {r['tokens_per_s']['p50']:.0f} tokens/s; drafter acceptance: "
        f"{r['draft_acceptance'] if r['draft_acceptance'] is not None else 'no drafter'}",
        "per turn (ms):",
    ]
    lines += [
        f"  {p['file']:<22} voice-to-voice {p['voice_to_voice_ms']:6.0f}  floor {p['floor_ms']:5.0f}  "
        f"ratio {p['floor_ratio'] if p['floor_ratio'] is not None else '-'}"
        for p in r["per_turn"]
    ]
    lines.append("stages (ms from end of speech / durations):")
    lines += [f"  {k:20s} p50 {v['p50']:7.0f}  p95 {v['p95']:7.0f}" for k, v in r["stages"].items()]
    return "\n".join(lines)
