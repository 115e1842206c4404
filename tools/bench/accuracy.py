"""``bolt-agent bench --accuracy``: does what the person said reach the robot, and does the reply fit?

Replays the spoken command fixtures (``commands/manifest.json``: file, text, ``intent``,
``expect_any``) through ASR and the model, each command as the first turn of a fresh
conversation so one miss cannot spill into the next, and counts a turn as right when a
called tool's name contains a word of ``expect_any`` (or, for chat turns with an empty list,
when no tool was called) and every call's arguments follow the words
(:func:`~tools.bench.reply_checks.arguments_fit`: the side a direction names, the hand named, the
degrees and durations said); ``tool_name_accuracy`` counts names alone. It runs twice — with
ASR biasing (skill names as hotwords) and without — and reports the word error rate of the
biased transcripts against the manifest's text.

Every reply is checked too (:func:`tools.bench.reply_checks.reply_check`): a reply after a data
skill (one whose result is read back, ``@skill(follow_up=True)``: ``get_time``, ``describe_scene``) or a
background result (a timer that finished) carries that result (the clock time of
``get_time``, spoken forms allowed); a chat request ("Tell me a short joke") gets an answer,
not a refusal or a statement about the request; and no reply repeats the previous reply word
for word. One more pass, run first, plays the commands as **one conversation** (background
commands first, so a timer finishes on the way; then the ``skill`` and ``chat`` commands again,
after it): that is where a small model copies its previous reply.

Last, the typed set of everyday requests (:mod:`tools.bench.everyday`: timers named and asked
about, the time anywhere, names, what a body without a camera says), each typed into a fresh
conversation, with its tools, arguments and reply checked (``everyday_accuracy``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.config import Config
from agent.events import BackgroundDone, Event, Reply, ToolCall, ToolResult, Transcript
from tools.bench.reply_checks import arguments_fit, reply_check

if TYPE_CHECKING:
    from agent.pipeline import Pipeline
    from agent.pipeline.listener import Source
    from agent.stopper import Stopper

REPLAY_INTENTS = ("skill", "chat")
"""Manifest intents asked again at the end of the conversation pass, after the timer finished."""
BACKGROUND_WAIT_S = 20.0
"""Longest wait for a background call (the fixtures' timer) before the replayed commands."""


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


def _turn_rows(
    evs: list[Event], item: dict[str, Any] | None, data_tools: set[str], previous: str
) -> tuple[list[dict[str, Any]], str]:
    """Reply checks of every turn in one run's messages, in order; returns them and the last reply."""
    rows: list[dict[str, Any]] = []
    turn_ids = list(dict.fromkeys(e.turn_id for e in evs if isinstance(e, (Transcript, BackgroundDone))))
    for tid in turn_ids:
        mine = [e for e in evs if e.turn_id == tid]
        bg = next((e for e in mine if isinstance(e, BackgroundDone)), None)
        reply = next((e.text for e in mine if isinstance(e, Reply)), None)
        # A data call's result, or the reason it failed; a call the turn did not run has neither.
        results = [
            (e.tool, e.result if e.ok else e.reason)
            for e in mine
            if isinstance(e, ToolResult) and e.tool in data_tools and (e.ok or e.reason)
        ]
        if bg is not None:
            results.append((bg.tool, bg.result))
        chat = None
        if bg is None and item is not None and not item["expect_any"]:
            chat = " ".join(e.text for e in mine if isinstance(e, Transcript)) or item["text"]
        stop = bg is None and item is not None and item.get("intent") == "stop"
        ok, why = reply_check(reply, previous, results, chat, expect_reply=not stop)
        rows.append(
            {
                "turn": tid,
                "background": bg.tool if bg is not None else "",
                "tools": [e.tool for e in mine if isinstance(e, ToolCall)],
                "reply": reply or "",
                "reply_ok": ok,
                "reply_why": why,
            }
        )
        if reply:
            previous = reply
    return rows, previous


class _Runner:
    """Plays manifest commands through fresh pipelines on one loaded core.

    Args:
        cfg: The validated config.
        fixtures: Folder of the manifest's WAVs.
        stopper: The command's signal handling: it gets the robot as soon as it exists; a
            signal later stops the current pipeline (:meth:`stop`) and the next run raises
            :class:`~agent.stopper.Stopped`.
    """

    def __init__(self, cfg: Config, fixtures: Path, stopper: Stopper) -> None:
        from agent.pipeline import Bus, build_core
        from tools.bench.latency import EventLog

        self.fixtures = fixtures
        self.stopper = stopper
        self.log = EventLog()
        self.bus = Bus(self.log)
        with stopper.loading(self.bus.publish):
            self.core = build_core(cfg, self.bus.publish, on_robot=stopper.own)
            try:
                self.core.warmup()
            except BaseException:
                self.core.close()
                raise
        self.data_tools = {n for n, s in self.core.registry.skills.items() if getattr(s, "follow_up", True)}
        self._current: Pipeline | None = None

    def stop(self) -> None:
        """Stop the pipeline that is running (from the signal thread)."""
        p = self._current
        if p is not None:
            p.stop()

    def _run(self, source: Source, biased: bool = True, wait_background_s: float = 0.0) -> list[Event]:
        from agent.pipeline import NullSink, Pipeline
        from agent.pipeline.pipeline import run_to_end
        from agent.stopper import Stopped

        start = len(self.log.events)
        p = Pipeline(self.core, self.bus, source, NullSink(), speak=False, asr_bias=biased)
        self._current = p
        if self.stopper.stopped or not run_to_end(p, wait_background_s):  # before it started, or during it
            raise Stopped
        self.core.robot.stop()
        return self.log.events[start:]

    def play(self, item: dict[str, Any], biased: bool = True) -> list[Event]:
        """Run one command file as fast as possible; its messages."""
        from agent.pipeline import FileSource

        return self._run(FileSource([self.fixtures / item["file"]], False, self.bus.publish), biased)

    def type(self, lines: list[str]) -> list[Event]:
        """Run typed lines as ``chat`` does (one turn each, no speech synthesis); their messages."""
        from agent.pipeline import TextSource

        return self._run(TextSource(lines, publish=self.bus.publish))

    def wait_background(self, timeout_s: float) -> list[Event]:
        """Let running background calls finish and be spoken (at most ``timeout_s``); the messages."""
        from agent.pipeline import TextSource

        return self._run(TextSource([]), wait_background_s=timeout_s)


def run_accuracy(cfg: Config, fixtures: Path, stopper: Stopper | None = None) -> dict[str, Any]:
    """Measure tool-call accuracy and reply fit on spoken commands, with and without ASR biasing.

    Every command runs through the one pipeline (file source as fast as possible, no
    speech synthesis), as the first turn of a cleared conversation; before that, all of them
    once as one conversation (see the module docstring).

    Args:
        cfg: Robot config (models, skills, robot).
        fixtures: Folder with ``manifest.json`` and the WAVs it names.
        stopper: The command's signal handling (a signal while loading parks the robot and
            exits; later it stops the current pipeline).

    Returns:
        JSON-ready dict: ``tool_accuracy``, ``tool_accuracy_unbiased`` (names and arguments),
        ``tool_name_accuracy``, ``tool_name_accuracy_unbiased``, ``reply_check``,
        ``reply_check_unbiased``, ``reply_check_conversation``, ``everyday_accuracy``
        (fractions 0..1), ``turns``, ``asr_wer``, ``asr_wer_unbiased``, per-command
        ``details``, the conversation pass's ``conversation`` (one row per turn) and the typed
        requests' ``everyday`` (one row each).

    Raises:
        FileNotFoundError: no ``manifest.json`` in ``fixtures``.
        agent.stopper.Stopped: a signal stopped the runs (the robot is parked).
    """
    from agent.stopper import Stopper

    manifest = json.loads((fixtures / "manifest.json").read_text())
    stopper = stopper or Stopper()
    runner = _Runner(cfg, fixtures, stopper)
    details: list[dict[str, Any]] = []
    schemas = {name: sk.parameters for name, sk in runner.core.registry.skills.items()}
    sees = "camera" in cfg.devices()  # a body without a camera is offered no skill that looks
    try:
        with stopper.running(runner.stop):
            # First, so no timer of the single-command passes finishes inside the conversation.
            convo = _conversation(runner, manifest)
            everyday = _everyday(runner, cfg.devices())
            for biased in (True, False):
                for item in manifest:
                    runner.core.conversation.history.clear()
                    t0 = time.perf_counter()
                    evs = runner.play(item, biased)
                    heard = " ".join(e.text for e in evs if isinstance(e, Transcript))
                    calls = [e.tool for e in evs if isinstance(e, ToolCall)]
                    expect = item["expect_any"]
                    if item.get("intent") == "vision" and not sees:
                        expect = []  # no camera: no call, the robot says why
                    named = any(w in c for c in calls for w in expect) if expect else not calls
                    args_ok, args_why = arguments_fit(
                        item["text"], [(e.tool, e.arguments) for e in evs if isinstance(e, ToolCall)], schemas
                    )
                    ok = named and args_ok
                    # A timer of an earlier command may finish during this one: only its own turn counts.
                    user = [e for e in evs if not isinstance(e, BackgroundDone)]
                    rows, _ = _turn_rows(user, item, runner.data_tools, "")
                    first = rows[0] if rows else {"reply": "", "reply_ok": False, "reply_why": "no turn"}
                    details.append(
                        {
                            "file": item["file"],
                            "biased": biased,
                            "said": item["text"],
                            "heard": heard,
                            "tools": calls,
                            "ok": ok,
                            "tool_ok": named,
                            "args_why": args_why,
                            "reply": first["reply"],
                            "reply_ok": first["reply_ok"],
                            "reply_why": first["reply_why"],
                            "ms": round((time.perf_counter() - t0) * 1000.0),
                        }
                    )
    finally:
        runner.core.close()
    out: dict[str, Any] = {"turns": len(manifest)}
    for biased, key in ((True, ""), (False, "_unbiased")):
        rows = [d for d in details if d["biased"] is biased]
        out[f"tool_accuracy{key}"] = round(sum(d["ok"] for d in rows) / max(len(rows), 1), 3)
        out[f"tool_name_accuracy{key}"] = round(sum(d["tool_ok"] for d in rows) / max(len(rows), 1), 3)
        out[f"reply_check{key}"] = round(sum(d["reply_ok"] for d in rows) / max(len(rows), 1), 3)
        out[f"asr_wer{key}"] = round(
            word_error_rate([d["said"] for d in rows], [d["heard"] for d in rows]), 3
        )
    out["reply_check_conversation"] = round(sum(r["reply_ok"] for r in convo) / max(len(convo), 1), 3)
    out["everyday_accuracy"] = round(sum(r["ok"] for r in everyday) / max(len(everyday), 1), 3)
    out["details"] = details
    out["conversation"] = convo
    out["everyday"] = everyday
    return out


def _everyday(runner: _Runner, devices: frozenset[str]) -> list[dict[str, Any]]:
    """The typed everyday requests (:data:`~tools.bench.everyday.EVERYDAY`), each in a fresh conversation.

    Before each, the conversation is cleared, running timers cancelled, what the robot
    remembers of the user forgotten and the volume put back to 100 percent
    (:func:`~tools.bench.everyday.fresh`), so no request leans on another's.
    """
    from tools.bench.everyday import EVERYDAY, applies, check, fresh

    core = runner.core
    rows: list[dict[str, Any]] = []
    for req in (r for r in EVERYDAY if applies(r, devices)):
        fresh(core)
        evs = runner.type([*req.before, req.said])
        ok, why = check(req, evs)
        tid = max((e.turn_id for e in evs if isinstance(e, Transcript)), default=-1)
        reply = next((e.text for e in evs if isinstance(e, Reply) and e.turn_id == tid), "")
        tools = [e.tool for e in evs if isinstance(e, ToolCall) and e.turn_id == tid]
        rows.append({"said": req.said, "ok": ok, "why": why, "tools": tools, "reply": reply})
    return rows


def _conversation(runner: _Runner, manifest: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation pass: every command in one history, background ones first, some asked again."""
    conv = runner.core.conversation
    conv.history.clear()
    rows: list[dict[str, Any]] = []
    previous = ""

    def add(evs: list[Event], item: dict[str, Any] | None) -> None:
        nonlocal previous
        new, previous = _turn_rows(evs, item, runner.data_tools, previous)
        for r in new:
            r["file"] = item["file"] if item is not None and not r["background"] else ""
        rows.extend(new)

    for item in sorted(manifest, key=lambda it: it.get("intent") != "async"):
        add(runner.play(item), item)
    # Let a running timer finish and be spoken before the commands are asked again.
    if conv.background_running or conv.has_background():
        add(runner.wait_background(BACKGROUND_WAIT_S), None)
    for item in (it for it in manifest if it.get("intent") in REPLAY_INTENTS):
        add(runner.play(item), item)
    return rows


def format_accuracy(report: dict[str, Any]) -> str:
    """Human-readable table of :func:`run_accuracy`'s report."""
    lines = [f"{'file':<20} {'bias':<5} {'ok':<3} {'reply':<5} tools / heard / reply"]
    for d in report["details"]:
        lines.append(
            f"{d['file']:<20} {'on' if d['biased'] else 'off':<5} {'✓' if d['ok'] else '✗':<3} "
            f"{'✓' if d['reply_ok'] else '✗':<5} {','.join(d['tools']) or '-'} / {d['heard']!r} / "
            f"{d['reply']!r}{' (' + d['reply_why'] + ')' if d['reply_why'] else ''}"
            f"{' [arguments: ' + d['args_why'] + ']' if d.get('args_why') else ''}"
        )
    lines.append("one conversation (background commands first; skill and chat commands asked again):")
    for r in report["conversation"]:
        what = f"background {r['background']}" if r["background"] else r["file"]
        lines.append(
            f"  {what:<22} {'✓' if r['reply_ok'] else '✗'} {','.join(r['tools']) or '-':<18} {r['reply']!r}"
            f"{' (' + r['reply_why'] + ')' if r['reply_why'] else ''}"
        )
    lines.append("typed everyday requests (tools, arguments and reply checked):")
    for r in report.get("everyday", []):
        lines.append(
            f"  {'✓' if r['ok'] else '✗'} {r['said']!r}: {','.join(r['tools']) or '-'} / {r['reply']!r}"
            f"{' (' + r['why'] + ')' if r['why'] else ''}"
        )
    lines.append(
        f"tool accuracy (names and arguments): {report['tool_accuracy']:.0%} with ASR biasing, "
        f"{report['tool_accuracy_unbiased']:.0%} without ({report['turns']} turns; names alone "
        f"{report['tool_name_accuracy']:.0%} / {report['tool_name_accuracy_unbiased']:.0%}); "
        f"ASR WER {report['asr_wer']:.1%} biased, {report['asr_wer_unbiased']:.1%} unbiased"
    )
    lines.append(
        f"reply check: {report['reply_check']:.0%} with ASR biasing, {report['reply_check_unbiased']:.0%} "
        f"without, {report['reply_check_conversation']:.0%} in one conversation "
        f"({len(report['conversation'])} turns); typed everyday requests "
        f"{report.get('everyday_accuracy', 0.0):.0%} ({len(report.get('everyday', []))} requests)"
    )
    return "\n".join(lines)
