"""``bolt-agent bench --accuracy``: does what the person said reach the robot?

Replays the spoken command fixtures (``commands/manifest.json``: file, text, ``expect_any``)
through ASR and the model, each command as the first turn of a fresh conversation so one
miss cannot spill into the next, and counts a turn as right when a called tool's name
contains a word of ``expect_any`` (or, for chat turns with an empty list, when no tool was
called). It runs twice — with ASR biasing (skill names as hotwords) and without — and
reports the word error rate of the biased transcripts against the manifest's text.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from agent.config import Config
from agent.events import ToolCall, Transcript


def word_error_rate(refs: list[str], hyps: list[str]) -> float:
    """Word error rate of ``hyps`` against ``refs`` (0..1, can exceed 1), case and punctuation ignored.

    Args:
        refs: Reference transcripts, one per utterance.
        hyps: Recognized text, same length; an empty one counts as all words missed.

    Raises:
        ValueError: the lists differ in length (from jiwer).
    """
    import jiwer

    norm = jiwer.Compose(
        [
            jiwer.ToLowerCase(),
            jiwer.RemovePunctuation(),
            jiwer.RemoveMultipleSpaces(),
            jiwer.Strip(),
            jiwer.ReduceToListOfListOfWords(),
        ]
    )
    return float(
        jiwer.wer(refs, [h or "-" for h in hyps], reference_transform=norm, hypothesis_transform=norm)
    )


def run_accuracy(cfg: Config, fixtures: Path) -> dict[str, Any]:
    """Measure tool-call accuracy on spoken commands, with and without ASR biasing.

    Every command runs through the one pipeline (file source as fast as possible, no
    speech synthesis), as the first turn of a cleared conversation.

    Args:
        cfg: Robot config (models, skills, robot).
        fixtures: Folder with ``manifest.json`` and the WAVs it names.

    Returns:
        JSON-ready dict: ``tool_accuracy``, ``tool_accuracy_unbiased`` (fractions 0..1),
        ``turns``, ``asr_wer``, ``asr_wer_unbiased`` and per-turn ``details``.

    Raises:
        FileNotFoundError: no ``manifest.json`` in ``fixtures``.
    """
    from agent.bench import EventLog
    from agent.pipeline import Bus, FileSource, NullSink, Pipeline, build_core
    from agent.pipeline.pipeline import run_to_end

    manifest = json.loads((fixtures / "manifest.json").read_text())
    log = EventLog()
    bus = Bus(log)
    core = build_core(cfg, bus.publish)
    core.warmup()
    details: list[dict[str, Any]] = []
    try:
        for biased in (True, False):
            for item in manifest:
                core.conversation.history.clear()
                start = len(log.events)
                t0 = time.perf_counter()
                p = Pipeline(
                    core,
                    bus,
                    FileSource([fixtures / item["file"]], False, bus.publish),
                    NullSink(),
                    speak=False,
                    asr_bias=biased,
                )
                run_to_end(p)
                core.robot.stop()
                evs = log.events[start:]
                heard = " ".join(e.text for e in evs if isinstance(e, Transcript))
                calls = [e.tool for e in evs if isinstance(e, ToolCall)]
                expect = item["expect_any"]
                ok = any(w in c for c in calls for w in expect) if expect else not calls
                details.append(
                    {
                        "file": item["file"],
                        "biased": biased,
                        "said": item["text"],
                        "heard": heard,
                        "tools": calls,
                        "ok": ok,
                        "ms": round((time.perf_counter() - t0) * 1000.0),
                    }
                )
    finally:
        core.close()
    out: dict[str, Any] = {"turns": len(manifest)}
    for biased, key in ((True, ""), (False, "_unbiased")):
        rows = [d for d in details if d["biased"] is biased]
        out[f"tool_accuracy{key}"] = round(sum(d["ok"] for d in rows) / max(len(rows), 1), 3)
        out[f"asr_wer{key}"] = round(
            word_error_rate([d["said"] for d in rows], [d["heard"] for d in rows]), 3
        )
    out["details"] = details
    return out


def format_accuracy(report: dict[str, Any]) -> str:
    """Human-readable table of :func:`run_accuracy`'s report."""
    lines = [f"{'file':<20} {'bias':<5} {'ok':<3} tools / heard"]
    for d in report["details"]:
        lines.append(
            f"{d['file']:<20} {'on' if d['biased'] else 'off':<5} {'✓' if d['ok'] else '✗':<3} "
            f"{','.join(d['tools']) or '-'} / {d['heard']!r}"
        )
    lines.append(
        f"tool accuracy: {report['tool_accuracy']:.0%} with ASR biasing, "
        f"{report['tool_accuracy_unbiased']:.0%} without ({report['turns']} turns); "
        f"ASR WER {report['asr_wer']:.1%} biased, {report['asr_wer_unbiased']:.1%} unbiased"
    )
    return "\n".join(lines)
