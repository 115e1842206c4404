"""What a person reads: the CLI's text lines for every public message, and JSON Lines for machines."""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import re
from pathlib import Path

import agent.events
from agent.cli.printer import EventPrinter
from agent.events import (
    BargeIn,
    DeviceState,
    Event,
    HistoryCut,
    PauseVerdict,
    Reply,
    RobotCommand,
    Timing,
    ToolCall,
    ToolResult,
    Transcript,
)

STEPS: list[Event] = [
    PauseVerdict(-1, 1, "turn left and then", False, "continuation", -1.0, 1.0, 600.0, 2.0),
    PauseVerdict(-1, 2, "turn left and then wave", True, "text", -1.0, -0.42, 610.0, 31.0),
    Transcript(3, "Turn left and then wave."),
    ToolCall(3, "wave", {"hand": "right"}, "t3r0c0"),
    ToolResult(3, "set_timer", True, {"status": "started", "seconds": 5}, "t3r0c1"),
    RobotCommand(3, "right_arm", 95.0, 20.0),
    Reply(3, "Sure!", None),
    Timing(
        3,
        asr_ms=610.0,
        llm_ttft_ms=41.0,
        llm_ms=312.0,
        turn_ms=1900.0,
        prompt_tokens=1,
        first_played_ms=820.0,
    ),
    BargeIn(4, "speech", 3.2),
    HistoryCut(4, "It is a", "fine day."),
    DeviceState(-1, "input", "pulse", "lost", message="no audio from 'pulse' for 3.1 s"),
]


def _text(verbose: bool) -> str:
    out = io.StringIO()
    printer = EventPrinter(out=out, verbose=verbose)
    for ev in STEPS:
        printer(ev)
    return out.getvalue()


def every_public_event() -> list[Event]:
    """One instance of every public message type, with its defaults."""
    import agent.events as events

    kinds = [
        cls
        for cls in vars(events).values()
        if isinstance(cls, type) and issubclass(cls, Event) and cls is not Event and cls.public
    ]
    return [cls(7) for cls in kinds]


def test_text_lines_are_for_people():
    text = _text(verbose=False)
    assert "you said: Turn left and then wave." in text and 'tool call  wave({"hand": "right"})' in text
    assert "robot moves: right_arm" in text and "95..95" not in text  # its range at the next line
    assert 'tool result set_timer: {"status": "started", "seconds": 5}' in text
    assert "timing: heard back after 0.82 s" in text and "prompt tokens" not in text
    assert "interrupted (you spoke over the robot)" in text
    assert "input device pulse: no audio from 'pulse' for 3.1 s" in text
    assert "pause" not in text and "remembers" not in text  # turn-taking detail only with --verbose
    for ev in every_public_event():  # no Python reprs for any message, known or not
        out = io.StringIO()
        EventPrinter(out=out, verbose=True)(ev)
        assert "{'" not in out.getvalue() and "': " not in out.getvalue(), (ev.name, out.getvalue())


def test_verbose_shows_each_pause_and_which_signal_decided():
    lines = [line.strip() for line in _text(verbose=True).splitlines()]
    assert 'pause 1: "turn left and then" -> wait for more (ends in a continuation)' in lines
    assert 'pause 2: "turn left and then wave" -> turn over (the words end a sentence; words -0.42)' in lines
    assert 'the robot remembers saying only: "It is a"' in lines


def test_verbose_says_what_confirmed_a_turn():
    from agent.events import TurnConfirmed

    out, quiet = io.StringIO(), io.StringIO()
    EventPrinter(out=out, verbose=True)(TurnConfirmed(-1, 3, 300, True))
    EventPrinter(out=out, verbose=True)(TurnConfirmed(-1, 4, 600, False))
    EventPrinter(out=quiet)(TurnConfirmed(-1, 3, 300, True))
    assert out.getvalue().splitlines() == [
        "  confirmed by 300 ms of silence (a clear command)",
        "  confirmed by 600 ms of silence",
    ]
    assert quiet.getvalue() == ""  # turn-taking detail only with --verbose


def test_verbose_says_when_unclear_words_wait_longer_for_the_silence():
    from agent.cli.printer import pause_line

    clear = PauseVerdict(-1, 1, "look up", True, "text", -1.0, -0.96, 90.0, 20.0, -0.11, False, 700)
    misheard = PauseVerdict(-1, 1, "come your way", True, "text", -1.0, -1.01, 90.0, 20.0, -0.54, True, 1400)
    assert pause_line(clear) == (
        '  pause 1: "look up" -> turn over (the words end a sentence; words -0.96) - heard after '
        "700 ms of silence"
    )
    assert pause_line(misheard) == (
        '  pause 1: "come your way" -> turn over (the words end a sentence; words -1.01, unclear words, '
        "logprob -0.54) - heard after 1400 ms of silence"
    )


def test_json_lines_carry_every_field():
    out = io.StringIO()
    printer = EventPrinter(json_mode=True, out=out)
    for ev in STEPS:
        printer(ev)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["event"] for r in rows][:3] == ["end_of_turn_check", "end_of_turn_check", "transcript"]
    timing = next(r for r in rows if r["event"] == "timing")
    assert timing["prompt_tokens"] == 1 and timing["first_played_ms"] == 820.0
    assert rows[0] == {
        "event": "end_of_turn_check",
        **{k: v for k, v in dataclasses.asdict(STEPS[0]).items()},
    }


def test_the_docs_name_every_event_json_lines_print():
    """A machine reading ``--json`` learns the event names from the list in ``docs/command-line.md``."""
    public = {
        cls.name
        for _, cls in inspect.getmembers(agent.events, inspect.isclass)
        if issubclass(cls, Event) and cls is not Event and cls.public
    }
    page = (Path(__file__).resolve().parent.parent / "docs" / "command-line.md").read_text(encoding="utf-8")
    paragraph = page.split("`--json` prints JSON Lines on stdout", 1)[1].split("\n\n", 1)[0]
    listed = set(re.findall(r"`([a-z_]+)`", paragraph))
    assert len(public) >= 20
    assert sorted(public - listed) == []


def test_a_typed_turn_shows_no_endpoint_or_asr():
    """`chat` printed "endpoint 0 ms, ASR 0 ms" for typed turns (a new user's trial)."""
    from agent.cli.printer import timing_line

    typed = timing_line(
        Timing(1, llm_ttft_ms=100.0, llm_ms=476.0, turn_ms=500.0, endpoint_ms=0.0, endpoint_rule="typed")
    )
    assert typed == "  timing: first token 100 ms | model 476 ms | turn 0.5 s"
    background = timing_line(Timing(6, llm_ttft_ms=220.0, llm_ms=627.0, turn_ms=800.0, endpoint_ms=0.0))
    assert background == "  timing: first token 220 ms | model 627 ms | turn 0.8 s"  # a timer's turn
    spoken = timing_line(
        Timing(1, asr_ms=64.0, llm_ttft_ms=100.0, llm_ms=476.0, turn_ms=900.0, endpoint_ms=210.0)
    )
    assert "endpoint 210 ms, ASR 64 ms, first token 100 ms" in spoken


def test_a_gesture_that_outlives_the_last_turn_is_shown_before_the_park():
    """`chat` ended on "robot moved: head_yaw 0..0 deg": the turn's timing came 0.5 s into a
    0.6 s look, and the rest of it was never printed. Then a turn showed "robot moved: right_arm
    1..1 deg (1 cmds)" while its wave appeared under later turns (issue 50): the turn names the
    joints, and the whole gesture, from its first command, is shown once at the next line."""
    from agent.events import RobotParked

    out = io.StringIO()
    printer = EventPrinter(out=out)
    for ev in [
        RobotCommand(0, "head_yaw", 0.0, 0.0),
        Timing(0, llm_ms=400.0, turn_ms=500.0),
        RobotCommand(0, "head_yaw", 30.0, 600.0),
        RobotCommand(-1, "head_yaw", 0.0, 900.0),  # the park: nobody's gesture
        RobotParked(-1, torque=False),
    ]:
        printer(ev)
    lines = out.getvalue().splitlines()
    assert "  robot moves: head_yaw" in lines
    assert lines[-2:] == [
        "  turn 0's gesture: head_yaw 0..30 deg, 2 commands",
        "robot parked at neutral, motors off",
    ]


def test_a_wave_is_shown_whole_under_the_next_turn():
    out = io.StringIO()
    printer = EventPrinter(out=out)
    events = [RobotCommand(0, "right_arm", 1.0, 0.0), Timing(0, llm_ms=300.0, turn_ms=400.0)]
    events += [RobotCommand(0, "right_arm", float(d), 20.0 * d) for d in range(2, 141)]
    events += [RobotCommand(1, "head_yaw", 0.0, 0.0), Timing(1, llm_ms=300.0, turn_ms=400.0)]
    for ev in events:
        printer(ev)
    lines = [line for line in out.getvalue().splitlines() if "robot" in line or "gesture" in line]
    assert lines == [
        "  robot moves: right_arm",
        "  turn 0's gesture: right_arm 1..140 deg, 140 commands",
        "  robot moves: head_yaw",
    ], lines
