"""``bolt-agent bench --accuracy``: does what the person said reach the robot, and does the reply fit?

Replays the spoken command fixtures (``commands/manifest.json``: file, text, ``intent``,
``expect_any``) through ASR and the model, each command as the first turn of a fresh
conversation so one miss cannot spill into the next, and counts a turn as right when a
called tool's name contains a word of ``expect_any`` (or, for chat turns with an empty list,
when no tool was called). It runs twice — with ASR biasing (skill names as hotwords) and
without — and reports the word error rate of the biased transcripts against the manifest's
text.

Every reply is checked too (:func:`reply_check`): a reply after a data skill (one whose
result is read back, ``@skill(follow_up=True)``: ``get_time``, ``describe_scene``) or a
background result (a timer that finished) carries that result (the clock time of
``get_time``, spoken forms allowed); a chat request ("Tell me a short joke") gets an answer,
not a refusal or a statement about the request; and no reply repeats the previous reply word
for word. One more pass, run first, plays the commands as **one conversation** (background
commands first, so a timer finishes on the way; then the ``skill`` and ``chat`` commands again,
after it): that is where a small model copies its previous reply.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent.config import Config
from agent.events import BackgroundDone, Event, Reply, ToolCall, ToolResult, Transcript

REPLAY_INTENTS = ("skill", "chat")
"""Manifest intents asked again at the end of the conversation pass, after the timer finished."""
REPEAT_MIN_WORDS = 3
"""Shorter replies ("Sure!", "On it.") may repeat: acknowledgements are meant to."""
BACKGROUND_WAIT_S = 20.0
"""Longest wait for a background call (the fixtures' timer) before the replayed commands."""

_REFUSAL = re.compile(
    r"^(no\b|nope\b|sorry\b|i can'?t\b|i cannot\b|i'?m not\b|i am not\b|i don'?t\b|i do not\b|you can\b)"
)
_META = re.compile(r"\b(i am|i'm) (telling|going to tell|giving|saying)\b|\bif you want\b|\bas an ai\b")
_CLOCK = re.compile(r"(?<![\d:])(?:[01]?\d|2[0-3]):[0-5]\d(?![\d:])")
_ERROR_PREFIX = re.compile(r"^\w+ failed: (?:\w+: )?")
_ASKING = frozenset("tell give say sing share make recite read".split())
"""First words of a request for something (its object must not be echoed in the reply)."""
_SIZES = frozenset("short long little quick small funny good nice new another".split())
_STOP = frozenset(
    "a an the is are was be to of and or in on at for with it its it's this that i you me my your we "
    "what do does did can could would will just now here there so not no yes please tell".split()
)


# --- reply checks (pure) ------------------------------------------------------------------------


def spoken_words(text: str) -> list[str]:
    """``text`` as the words a listener hears: numbers and times spelled out, lower case, no punctuation."""
    from agent.speech_text import clean_for_speech

    return re.findall(r"[a-z0-9']+", clean_for_speech(str(text)).lower().replace("-", " "))


def _contains(words: list[str], part: list[str]) -> bool:
    n = len(part)
    return n > 0 and any(words[i : i + n] == part for i in range(len(words) - n + 1))


def _stem(word: str) -> str:
    return word[:4]


def result_text(result: Any) -> str:
    """A tool result as plain text (JSON for dicts and lists)."""
    return result if isinstance(result, str) else json.dumps(result, default=str)


def carries_result(reply: str, result: Any) -> bool:
    """Whether ``reply`` passes on a tool result, spoken forms allowed.

    A clock time in the result (``HH:MM``) must be in the reply ("06:49", "6:49" and "six
    forty-nine" are the same); otherwise one of its numbers, not counting numbers inside a
    clock time of the reply ("10 seconds" is not carried by "10:59"); otherwise one of its
    content words (three letters or more, same first four letters: "see" for "I have no
    camera, so I cannot see"). An error result is judged by its message, without the
    ``NAME failed: SomeError:`` prefix.

    Args:
        reply: What the robot said.
        result: The tool's result (text, dict, ...), or its error message.
    """
    text = _ERROR_PREFIX.sub("", result_text(result))
    times = _CLOCK.findall(text)
    if times:
        said = spoken_words(reply)
        return any(_contains(said, spoken_words(t)) for t in times)
    said = spoken_words(_CLOCK.sub(" ", reply))
    numbers = re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]|\.\d)", text)
    if numbers:
        return any(_contains(said, spoken_words(n)) for n in numbers)
    content = {_stem(w) for w in spoken_words(text) if len(w) >= 3 and w not in _STOP}
    return bool(content & {_stem(w) for w in said})


def repeats(reply: str, previous: str) -> bool:
    """``reply`` says the same words as ``previous`` (case, punctuation and number forms ignored)."""
    a = spoken_words(reply)
    return bool(a) and a == spoken_words(previous)


def answers_chat(request: str, reply: str) -> bool:
    """Whether ``reply`` answers a chat request rather than refusing or talking about it.

    "Tell me a short joke" answered with "I am telling you a joke", "It is not a joke", "It's
    a joke about the moon" or "No, no, no!" fails. The reply must have three words or more,
    must not open with a refusal ("no", "sorry", "I can't", "I'm not"...) or announce itself
    ("I am telling you..."); and when the request asks for something ("tell me a joke", "sing
    a song"), the reply must not say what it is or is not ("I'm a joke", "it is not a joke"),
    talk about telling it ("tell you a joke") or describe it ("a joke about ...").

    Args:
        request: What the user asked.
        reply: What the robot said.
    """
    words = spoken_words(reply)
    low = " ".join(words)
    if len(words) < 3 or _REFUSAL.match(low) or _META.search(low):
        return False
    asked = spoken_words(request)
    if not asked or asked[0] not in _ASKING:
        return True
    wanted = [w for w in asked[1:] if len(w) >= 3 and w not in _STOP and w not in _SIZES]
    for thing in wanted:
        t = re.escape(thing)
        about = (
            rf"\b(i am|i'm|it is|it's|this is|that is|that's|here is|here's)( not)?( a| an| the| my)? {t}"
            rf"|\b(tell|telling|told|tells)( you| me)?( a| an| the)? {t}|\b{t}s? about\b"
        )
        if re.search(about, low):
            return False
    return True


def reply_check(
    reply: str | None,
    previous: str,
    results: Iterable[tuple[str, Any]] = (),
    chat_request: str | None = None,
    expect_reply: bool = True,
) -> tuple[bool, str]:
    """Check one turn's reply.

    A repeat of the previous reply fails unless it is a short acknowledgement (under
    :data:`REPEAT_MIN_WORDS` words: "Sure!" twice is fine) or carries this turn's results (the
    same clock time asked twice in a minute).

    Args:
        reply: The reply text; None when the turn had no reply (the stop fast path).
        previous: The reply before it in the conversation ("" for a first turn).
        results: ``(tool, result)`` of the data skills and background calls the reply must pass on.
        chat_request: The user's words when the turn is a chat request (no tool expected).
        expect_reply: False when silence is right (a stop command).

    Returns:
        ``(ok, why)``: ``why`` names the first failed check ("" when ok).
    """
    if not reply:
        return (not expect_reply, "" if not expect_reply else "no reply")
    results = list(results)
    missing = [tool for tool, result in results if not carries_result(reply, result)]
    copied = previous and repeats(reply, previous) and len(spoken_words(reply)) >= REPEAT_MIN_WORDS
    if copied and (missing or not results):
        return False, "repeats the previous reply"
    if missing:
        return False, f"does not carry the result of {missing[0]}"
    if chat_request is not None and not answers_chat(chat_request, reply):
        return False, "does not answer the chat request"
    return True, ""


# --- the run --------------------------------------------------------------------------------------


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
        results = [(e.tool, e.result) for e in mine if isinstance(e, ToolResult) and e.tool in data_tools]
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
    """Plays manifest commands through fresh pipelines on one loaded core."""

    def __init__(self, cfg: Config, fixtures: Path) -> None:
        from agent.bench import EventLog
        from agent.pipeline import Bus, build_core

        self.fixtures = fixtures
        self.log = EventLog()
        self.bus = Bus(self.log)
        self.core = build_core(cfg, self.bus.publish)
        self.core.warmup()
        self.data_tools = {n for n, s in self.core.registry.skills.items() if getattr(s, "follow_up", True)}

    def _run(self, source: Any, biased: bool = True, wait_background_s: float = 0.0) -> list[Event]:
        from agent.pipeline import NullSink, Pipeline
        from agent.pipeline.pipeline import run_to_end

        start = len(self.log.events)
        p = Pipeline(self.core, self.bus, source, NullSink(), speak=False, asr_bias=biased)
        run_to_end(p, wait_background_s)
        self.core.robot.stop()
        return self.log.events[start:]

    def play(self, item: dict[str, Any], biased: bool = True) -> list[Event]:
        """Run one command file as fast as possible; its messages."""
        from agent.pipeline import FileSource

        return self._run(FileSource([self.fixtures / item["file"]], False, self.bus.publish), biased)

    def wait_background(self, timeout_s: float) -> list[Event]:
        """Let running background calls finish and be spoken (at most ``timeout_s``); the messages."""
        from agent.pipeline import TextSource

        return self._run(TextSource([]), wait_background_s=timeout_s)


def run_accuracy(cfg: Config, fixtures: Path) -> dict[str, Any]:
    """Measure tool-call accuracy and reply fit on spoken commands, with and without ASR biasing.

    Every command runs through the one pipeline (file source as fast as possible, no
    speech synthesis), as the first turn of a cleared conversation; before that, all of them
    once as one conversation (see the module docstring).

    Args:
        cfg: Robot config (models, skills, robot).
        fixtures: Folder with ``manifest.json`` and the WAVs it names.

    Returns:
        JSON-ready dict: ``tool_accuracy``, ``tool_accuracy_unbiased``, ``reply_check``,
        ``reply_check_unbiased``, ``reply_check_conversation`` (fractions 0..1), ``turns``,
        ``asr_wer``, ``asr_wer_unbiased``, per-command ``details`` and the conversation
        pass's ``conversation`` (one row per turn).

    Raises:
        FileNotFoundError: no ``manifest.json`` in ``fixtures``.
    """
    manifest = json.loads((fixtures / "manifest.json").read_text())
    runner = _Runner(cfg, fixtures)
    details: list[dict[str, Any]] = []
    try:
        # First, so no timer of the single-command passes finishes inside the conversation.
        convo = _conversation(runner, manifest)
        for biased in (True, False):
            for item in manifest:
                runner.core.conversation.history.clear()
                t0 = time.perf_counter()
                evs = runner.play(item, biased)
                heard = " ".join(e.text for e in evs if isinstance(e, Transcript))
                calls = [e.tool for e in evs if isinstance(e, ToolCall)]
                expect = item["expect_any"]
                ok = any(w in c for c in calls for w in expect) if expect else not calls
                # A timer of an earlier command may finish during this one: only the command's turn counts.
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
        out[f"reply_check{key}"] = round(sum(d["reply_ok"] for d in rows) / max(len(rows), 1), 3)
        out[f"asr_wer{key}"] = round(
            word_error_rate([d["said"] for d in rows], [d["heard"] for d in rows]), 3
        )
    out["reply_check_conversation"] = round(sum(r["reply_ok"] for r in convo) / max(len(convo), 1), 3)
    out["details"] = details
    out["conversation"] = convo
    return out


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
        )
    lines.append("one conversation (background commands first; skill and chat commands asked again):")
    for r in report["conversation"]:
        what = f"background {r['background']}" if r["background"] else r["file"]
        lines.append(
            f"  {what:<22} {'✓' if r['reply_ok'] else '✗'} {','.join(r['tools']) or '-':<18} {r['reply']!r}"
            f"{' (' + r['reply_why'] + ')' if r['reply_why'] else ''}"
        )
    lines.append(
        f"tool accuracy: {report['tool_accuracy']:.0%} with ASR biasing, "
        f"{report['tool_accuracy_unbiased']:.0%} without ({report['turns']} turns); "
        f"ASR WER {report['asr_wer']:.1%} biased, {report['asr_wer_unbiased']:.1%} unbiased"
    )
    lines.append(
        f"reply check: {report['reply_check']:.0%} with ASR biasing, {report['reply_check_unbiased']:.0%} "
        f"without, {report['reply_check_conversation']:.0%} in one conversation "
        f"({len(report['conversation'])} turns)"
    )
    return "\n".join(lines)
