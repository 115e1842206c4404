"""``bolt-agent bench --vision``: describe time per frame and a "what do you see" turn, voice to voice.

Needs a config with ``[vision] describer = "vlm"`` and a camera. Two measurements:

* **Describe time per frame**: ``frames`` descriptions of the camera's newest frame(s), each of a
  new capture, through the configured engine (``[vision.vlm] engine``): wall time of each (image
  encode + generation, ms), the image and prompt tokens it took, its length. A still source
  (one picture) gives the same frame again, whose image the KV cache already holds: use a live
  camera, a video or a folder of several pictures (the prompt tokens then include the image's).
* **A "what do you see" turn**: a spoken question (a WAV; the fixtures' ``what_see.wav`` by
  default) played through the pipeline ``runs`` times. ``first audio`` is voice-to-voice to the
  first sound (the skill's "Let me look."); ``answer audio`` is voice-to-voice to the first
  sentence after it, said once the description is back: what a person waits for the answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.config import Config
from agent.events import PlaybackStarted, SceneDescribed, Timing, ToolCall, Transcript
from tools.bench.latency import EventLog, percentiles


class VisionBenchError(Exception):
    """The config cannot be benchmarked for vision (no VLM, no camera); the message says what to set."""


def run_vision_bench(cfg: Config, question: Path | None, frames: int = 5, runs: int = 3) -> dict[str, Any]:
    """Measure the vision-language layer of ``cfg``; returns the report (see the module docstring).

    Args:
        cfg: A config with ``[vision] describer = "vlm"`` and a ``[camera] source``.
        question: The spoken question (WAV), or None to skip the turn measurement.
        frames: Descriptions timed, one after the other.
        runs: Times the question is asked.

    Raises:
        VisionBenchError: no VLM describer or no camera in the config, or it did not start
            (the notice that said why is in the message).
        agent.models.ModelNotFoundError, agent.engines.LLMError: a model cannot load.
    """
    from agent.audio_io.fake import FakeBackend
    from agent.audio_io.speaker import Speaker
    from agent.pipeline import Bus, FileSource, Pipeline, SpeakerSink, build_core
    from agent.pipeline.pipeline import run_to_end

    if cfg.vision.describer != "vlm":
        raise VisionBenchError('bench --vision needs [vision] describer = "vlm" (and [vision.vlm])')
    if not cfg.camera.source:
        raise VisionBenchError("bench --vision needs a camera: set [camera] source (device, video, folder)")
    log = EventLog()
    bus = Bus(log)
    core = build_core(cfg, bus.publish)
    try:
        if core.narrator is None:
            said = "; ".join(getattr(e, "message", "") for e in log.events if getattr(e, "message", ""))
            raise VisionBenchError(f"the vision-language layer did not start: {said or 'no reason given'}")
        core.warmup()
        narrator = core.narrator
        narrator.describe_now()  # loads the projector, pays first-call costs: not counted
        described = []
        for _ in range(frames):
            _new_frame(core.vision, wait_s=5.0)  # a frame the KV cache has not seen
            described.append(narrator.describe_now())
        turns: list[dict[str, Any]] = []
        speaker = Speaker(cfg.audio, FakeBackend())  # a real-time speaker on a fake device
        speaker.open()
        try:
            for _ in range(runs if question is not None else 0):
                core.conversation.history.clear()
                start = len(log.events)
                source = FileSource([question], True, bus.publish)
                run_to_end(Pipeline(core, bus, source, SpeakerSink(speaker)))
                turns.append(_turn(log.events[start:]))
        finally:
            speaker.close()
    finally:
        core.close()
    took = [d.took_ms for d in described]
    return {
        "engine": cfg.vision.vlm.engine,
        "image_size": narrator.describer.image_size,
        "describe": {
            "frames": len(described),
            "ms": percentiles(took),
            "image_tokens": described[-1].image_tokens,
            "prompt_tokens": round(sum(d.prompt_tokens for d in described) / len(described), 1),
            "words": round(sum(len(d.text.split()) for d in described) / len(described), 1),
            "example": described[-1].text,
        },
        "turns": turns,
        "first_audio_ms": percentiles([t["first_audio_ms"] for t in turns if t["first_audio_ms"] >= 0]),
        "answer_audio_ms": percentiles([t["answer_audio_ms"] for t in turns if t["answer_audio_ms"] >= 0]),
    }


def _new_frame(vision: Any, wait_s: float) -> bool:
    """Wait up to ``wait_s`` for the camera's next capture; True when one came.

    A live camera, a video or a folder of several pictures gives a different picture.
    """
    import time

    camera = vision.camera
    got = camera.latest() if camera is not None else None
    before = got[1] if got is not None else None
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        got = camera.latest() if camera is not None else None
        if got is not None and got[1] != before:
            return True
        time.sleep(0.05)
    return False


def _turn(evs: list[Any]) -> dict[str, Any]:
    """One question's figures from its events (marks from the end of the user's speech, ms)."""
    timing = next((e for e in evs if isinstance(e, Timing)), None)
    said = [e for e in evs if isinstance(e, PlaybackStarted)]
    first = timing.first_played_ms if timing is not None else -1.0
    answer = -1.0
    if timing is not None and len(said) > 1 and first >= 0:
        speech_end = said[0].t - first / 1000.0
        answer = (said[1].t - speech_end) * 1000.0
    return {
        "transcript": next((e.text for e in evs if isinstance(e, Transcript)), ""),
        "tools": [e.tool for e in evs if isinstance(e, ToolCall)],
        "looked": any(isinstance(e, SceneDescribed) and e.trigger == "asked" for e in evs),
        "first_audio_ms": round(first, 1),
        "answer_audio_ms": round(answer, 1),
        "said": [e.text for e in said],
    }


def format_vision(r: dict[str, Any]) -> str:
    """The report for people."""
    d = r["describe"]
    ms = d["ms"]
    lines = [
        f"vision engine: {r['engine']}, frames sent at {r['image_size']} px (longer side)",
        f"describe time per frame: p50 {ms.get('p50', 0):.0f} ms, p95 {ms.get('p95', 0):.0f} ms over "
        f"{d['frames']} frames; {d['image_tokens']} image tokens, {d['prompt_tokens']} prompt tokens "
        f"evaluated, "
        f"{d['words']} words",
        f'  e.g. "{d["example"]}"',
    ]
    for i, t in enumerate(r["turns"]):
        looked = "looked" if t["looked"] else "did not look"
        lines.append(
            f'turn {i}: "{t["transcript"]}" -> {", ".join(t["tools"]) or "no tool"} ({looked}); '
            f"first audio {t['first_audio_ms']:.0f} ms, answer audio {t['answer_audio_ms']:.0f} ms"
        )
    if r["turns"]:
        fa, aa = r["first_audio_ms"], r["answer_audio_ms"]
        lines.append(
            f"what-do-you-see voice-to-voice: first audio p50 {fa.get('p50', -1):.0f} ms, "
            f"answer audio p50 {aa.get('p50', -1):.0f} ms / p95 {aa.get('p95', -1):.0f} ms"
        )
    return "\n".join(lines)
