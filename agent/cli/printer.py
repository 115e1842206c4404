"""Print events for people (one readable line per step) or machines (JSON Lines).

Text mode is for a person at a terminal: what was heard, what the robot did and said, how
long it took, and problems in words; no Python reprs. Per-sentence playback reports stay in
JSON mode. With ``verbose`` it also shows each pause's turn-taking decision (which signal
decided) and what a barge-in left in the history.
"""

from __future__ import annotations

import errno
import json
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from agent.events import (
    Backchannel,
    BackgroundDone,
    BargeIn,
    ContextTidied,
    DeviceState,
    Error,
    Event,
    Held,
    HistoryCut,
    InputStarted,
    Notice,
    PauseVerdict,
    PlaybackStarted,
    Ready,
    Reply,
    Resumed,
    RobotCommand,
    RobotParked,
    SceneDescribed,
    Skipped,
    Spoken,
    Standby,
    Timing,
    ToolCall,
    ToolResult,
    Transcript,
    TurnConfirmed,
    TurnDropped,
    Utterance,
)

BARGE_IN_REASONS = {
    "speech": "you spoke over the robot",
    "stop": "a stop phrase",
    "new_turn": "a new turn",
    "device": "the microphone was lost",
    "shutdown": "shutting down",
}


def pause_line(v: PauseVerdict) -> str:
    """One readable line for a judged pause, naming the signal that decided.

    Args:
        v: The verdict (``end_of_turn_check``).

    Returns:
        E.g. ``pause 2: "turn left and then" -> wait for more (ends in a continuation)``, or
        ``pause 1: "come your way" -> turn over (the words end a sentence; words -1.01, unclear
        words, logprob -0.54) - heard after 1400 ms of silence``.
    """
    signals = []
    if v.text_score <= 0:
        signals.append(f"words {v.text_score:.2f}")
    if v.smart_turn >= 0:
        signals.append(f"Smart Turn {v.smart_turn:.2f}")
    why = {
        "text": "the words end a sentence",
        "smart_turn": "Smart Turn hears an ending, the words allow it",
        "stop": "a stop phrase",
        "continuation": "ends in a continuation",
        "no_direction": "an amount of turn, no direction yet",
        "hesitation": "only a hesitation so far",
        "unsure": "an unsure guess at a hum or a noise",
        "address": "only the robot's name so far",
        "unfinished": "neither signal says finished",
        "empty": "nothing heard",
        "error": "the check failed: waiting for silence",
    }.get(v.rule, v.rule)
    decision = "turn over" if v.complete else "wait for more"
    if v.unclear:
        signals.append(f"unclear words, logprob {v.asr_logprob:.2f}")
    measured = f"; {', '.join(signals)}" if signals else ""
    heard = f" - heard after {v.confirm_ms} ms of silence" if v.confirm_ms > 0 else ""
    return f'  pause {v.pause_id}: "{v.text}" -> {decision} ({why}{measured}){heard}'


def timing_line(t: Timing) -> str:
    """One readable line of a turn's latency.

    Args:
        t: The turn's timing (ms).

    Returns:
        E.g. ``timing: heard back after 0.82 s | endpoint 210 ms, ASR 640 ms, first token 40 ms
        | model 310 ms | turn 1.9 s``; a typed turn or a background result's turn has no
        endpoint or ASR mark.
    """
    parts = []
    if t.first_played_ms >= 0:
        parts.append(f"heard back after {t.first_played_ms / 1000:.2f} s")
    # A typed turn, or a turn of the robot's own (a background result), has no endpoint and no ASR.
    unspoken = t.endpoint_rule == "typed" or (not t.endpoint_rule and t.asr_ms <= 0 and t.endpoint_ms <= 0)
    marks = [] if unspoken else [("endpoint", t.endpoint_ms), ("ASR", t.asr_ms)]
    marks.append(("first token", t.llm_ttft_ms))
    parts.append(", ".join(f"{name} {ms:.0f} ms" for name, ms in marks if ms >= 0))
    parts.append(f"model {t.llm_ms:.0f} ms")
    if t.tts_first_audio_ms:
        parts.append(f"first audio {t.tts_first_audio_ms:.0f} ms")
    parts.append(f"turn {t.turn_ms / 1000:.1f} s")
    return "  timing: " + " | ".join(parts)


def _value(value: Any) -> str:
    """A tool's result as text: a string as it is, anything else as JSON (never a Python repr)."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _plain(fields: dict[str, Any]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in fields.items() if k not in ("event", "turn_id"))


log = logging.getLogger(__name__)


class EventPrinter:
    """Callable event sink for the CLI.

    In JSON mode every event is one line on stdout (whole lines even when events come from
    several threads). In text mode joint commands are summarized per turn (the player sends
    50 per second) and printed with the timing line.

    Args:
        json_mode: JSON Lines instead of text.
        out: Stream for events (stdout); notes and errors in text mode also go here.
        verbose: Text mode: also each pause's turn-taking decision, each history cut and what
            was tidied between turns.
    """

    def __init__(self, json_mode: bool = False, out: TextIO | None = None, verbose: bool = False) -> None:
        self.json_mode = json_mode
        self.verbose = verbose
        self.out = out or sys.stdout
        self.errors = 0
        self.lost_lines = 0
        self._failing = False
        self._robot: dict[int, dict[str, tuple[float, float, int]]] = {}  # turn → joint → lo, hi, n
        self._started: set[int] = set()  # turns whose timing line named their gesture's joints
        self._lock = threading.Lock()

    def _line(self, text: str) -> None:
        with self._lock:  # robot events arrive from the animation thread
            try:
                self.out.write(text + "\n")
                self.out.flush()
            except OSError as e:  # stdout on a full disk, a closed pipe: the agent goes on
                self._unwritable(e)
                return
            if self.lost_lines and self._failing:
                self._failing = False
                log.warning("writing events again; %d lines were lost", self.lost_lines)

    def _unwritable(self, e: OSError) -> None:
        """One log line per episode of failed writes (the line is lost; the next one is tried again)."""
        self.lost_lines += 1
        if not self._failing:
            self._failing = True
            name = getattr(self.out, "name", "the output")
            code = errno.errorcode.get(e.errno or 0, "?")
            log.error(
                "cannot write events to %s: %s (%s); lines are lost until it works again",
                name,
                code,
                e.strerror,
            )

    def note(self, text: str) -> None:
        """A human note (suppressed in JSON mode so stdout stays pure JSON Lines)."""
        if not self.json_mode:
            self._line(text)

    def __call__(self, ev: Event) -> None:
        """Print one event."""
        if isinstance(ev, Error):
            self.errors += 1
        if self.json_mode:
            self._line(json.dumps(ev.to_json(), default=str))
            return
        line = self._text(ev)
        if line is not None:
            self._line(line)

    def _moves(self, turn_id: int | None) -> list[str]:
        """Lines of the robot's joint commands, per turn, at a turn's timing line or at the park.

        A gesture outlives the turn that starts it: a typed turn's timing comes a moment after
        its wave began, so its own line names the joints only ("robot moves: right_arm"), and
        the whole gesture (its range and commands, from its first command) is shown at the next
        such line ("turn 3's gesture: right_arm 0..140 deg, 89 commands"), then forgotten. It read
        "robot moved: right_arm 1..1 deg (1 cmds)" while the wave appeared under later turns.
        Commands of no turn (-1: a move between turns, the park) are shown at a timing line and
        left out at the park (``turn_id`` None), whose own line says it.
        """
        lines = []
        for tid in sorted(self._robot):  # commands arrive from the motion thread meanwhile: copies
            joints = dict(self._robot[tid])
            if tid == turn_id:
                lines.append(f"  robot moves: {', '.join(joints)}")
                self._started.add(tid)
                continue  # its whole gesture is shown at the next line
            if turn_id is not None and tid > turn_id:
                continue  # a later turn's, whose timing line has not come yet: kept for it
            whole = ", ".join(
                f"{j} {lo:.0f}..{hi:.0f} deg, {n} command{'s' if n != 1 else ''}"
                for j, (lo, hi, n) in joints.items()
            )
            if tid >= 0:
                lines.append(f"  turn {tid}'s gesture: {whole}")
            elif turn_id is not None:
                lines.append(f"  robot moved between turns: {whole}")
            self._robot.pop(tid, None)
            self._started.discard(tid)
        return lines

    def _text(self, ev: Event) -> str | None:
        """The text-mode line of ``ev``, or None when people need not see it."""
        if isinstance(ev, (Utterance, Spoken, PlaybackStarted)):
            return None  # per-sentence detail: JSON mode only
        if isinstance(ev, (RobotCommand, Timing, RobotParked)):
            return self._robot_text(ev)
        if isinstance(ev, (PauseVerdict, TurnConfirmed, HistoryCut, ContextTidied)):
            return _verbose_line(ev) if self.verbose else None
        line = next((f for cls, f in LINES.items() if isinstance(ev, cls)), None)
        return line(ev) if line is not None else f"  {ev.name.replace('_', ' ')}: {_plain(ev.to_json())}"

    def _robot_text(self, ev: RobotCommand | Timing | RobotParked) -> str | None:
        """Joint commands are gathered into the turn's ``robot moved`` line, printed with its timing."""
        if isinstance(ev, RobotCommand):
            moved = self._robot.setdefault(ev.turn_id, {})
            lo, hi, n = moved.get(ev.joint, (ev.deg, ev.deg, 0))
            moved[ev.joint] = (min(lo, ev.deg), max(hi, ev.deg), n + 1)
            return None
        if isinstance(ev, Timing):
            return "\n".join([*self._moves(ev.turn_id), timing_line(ev)])
        # The last turn's gesture went on after its timing line.
        return "\n".join([*self._moves(None), parked_line(ev)])


def _verbose_line(ev: PauseVerdict | TurnConfirmed | HistoryCut | ContextTidied) -> str | None:
    """The lines only ``--verbose`` shows: turn-taking verdicts, what a barge-in kept, tidying."""
    if isinstance(ev, PauseVerdict):
        return pause_line(ev)
    if isinstance(ev, TurnConfirmed):
        why = " (a clear command)" if ev.command else ""
        return f"  confirmed by {ev.silence_ms} ms of silence{why}"
    if isinstance(ev, HistoryCut):
        return f'  the robot remembers saying only: "{ev.kept}"'
    if not (ev.dropped or ev.evaluated):
        return None
    left = "" if ev.complete else " (stopped: the rest when the floor is free again)"
    return (
        f"  between turns: {ev.dropped} old turns compacted, {ev.evaluated} prompt tokens"
        f" read ahead in {ev.took_ms / 1000:.1f} s{left}"
    )


def _dropped_line(ev: TurnDropped) -> str:
    if ev.continued:
        return f"  [turn {ev.turn_id}] you went on with the same sentence: it is answered whole"
    return f"  [turn {ev.turn_id}] you went on: the reply prepared for this is dropped"


def _reply_line(ev: Reply) -> str:
    return f"  robot says: {ev.text or '(nothing)'}" + (f"\n  reply audio: {ev.audio}" if ev.audio else "")


def _barge_in_line(ev: BargeIn) -> str:
    why = BARGE_IN_REASONS.get(ev.reason, ev.reason)
    return f"  [turn {ev.turn_id}] interrupted ({why}); speaker silent in {ev.stop_ms:.0f} ms"


def _background_line(ev: BackgroundDone) -> str:
    return f"[turn {ev.turn_id}] background {ev.tool} {'finished' if ev.ok else 'FAILED'}: {ev.result}"


def _standby_line(ev: Standby) -> str:
    if ev.state == "awake":
        return f"awake: heard {ev.wake_word!r} (score {ev.score:.2f}); listening"
    why = {"start": "", "quiet": ": nobody spoke", "asked": f": asked ({ev.text})" if ev.text else ": asked"}
    return f"standby{why.get(ev.reason, ': ' + ev.reason)}; say {ev.wake_word!r} to wake it"


LINES: dict[type[Any], Callable[[Any], str]] = {
    Ready: lambda ev: (
        f"ready (models loaded and warmed in {ev.load_ms / 1000:.1f} s"
        + (f"; model profile {ev.profile}, {ev.tool_format} tool calls)" if ev.profile else ")")
    ),
    InputStarted: lambda ev: f"\n>>> playing {ev.source}",
    Transcript: lambda ev: f"[turn {ev.turn_id}] you said: {ev.text}",
    TurnDropped: _dropped_line,
    ToolCall: lambda ev: f"  tool call  {ev.tool}({json.dumps(ev.arguments)})",
    ToolResult: lambda ev: f"  tool {'result' if ev.ok else 'ERROR '} {ev.tool}: {_value(ev.result)}",
    Reply: _reply_line,
    BargeIn: _barge_in_line,
    Held: lambda ev: f"  [turn {ev.turn_id}] the robot paused: you may be interrupting ({ev.reason})",
    Resumed: lambda ev: (
        f"  [turn {ev.turn_id}] the robot goes on ({ev.reason}; paused {ev.held_ms / 1000:.1f} s)"
    ),
    Backchannel: lambda ev: f"  heard over the robot: {ev.text or '(a sound)'} ({ev.kind}: no turn)",
    BackgroundDone: _background_line,
    DeviceState: lambda ev: f"{ev.kind} device {ev.device}: {ev.message or ev.state}",
    SceneDescribed: lambda ev: f"  the robot sees ({ev.trigger}, {ev.took_ms / 1000:.1f} s): {ev.text}",
    Notice: lambda ev: f"note: {ev.message}",
    Standby: _standby_line,
    Skipped: lambda ev: f"  skipped: {ev.reason}",
    Error: lambda ev: f"  problem: {ev.message}",
}
"""Events whose text-mode line depends on the event alone, by type (any other event: its fields)."""


PARKED_POSES = {
    "neutral": "at neutral",
    "sleep": "in its sleep pose",
    "held": "where it stood (it did not move)",
    "elsewhere": "short of its rest pose",
}


def parked_line(ev: RobotParked) -> str:
    """``robot parked in its sleep pose, motors off (read back from the robot)``: what the body reported."""
    where = PARKED_POSES.get(ev.pose, ev.pose)
    motors = "motors ON" if ev.torque else "motors off"
    return f"robot parked {where}, {motors}" + (" (read back from the robot)" if ev.read_back else "")
