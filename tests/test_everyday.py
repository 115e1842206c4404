"""What people ask a household robot every day (issue 50), through ``chat`` on the stand-in model.

SmolLM2-135M, greedy, the embedded config (no camera), through the real pipeline as ``bolt-agent
chat`` runs it (:class:`rig.AgentRig`), and once as the real command (a subprocess): timers
asked about, changed, named and cancelled by name; the time in a city and dates relative to
today; the robot's name and the user's, kept across a restart of the agent; what a body
without a camera says when asked to look; the speaking volume set by voice, as the speaker
plays it. Each test starts a fresh conversation.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from rig import AgentRig

from agent.audio_io.fake import FakeBackend
from agent.config import load_config
from agent.events import BackgroundDone, Reply, Spoken, ToolCall, ToolResult
from tools.bench import everyday
from tools.bench.everyday import EVERYDAY, applies, check

pytestmark = pytest.mark.small_model

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def agent(greedy_agent):
    return greedy_agent


@pytest.fixture(autouse=True)
def fresh(agent):
    """A fresh conversation, no timer left running, nothing remembered, the volume at 100 percent."""
    everyday.fresh(agent.core)
    yield


def replies(evs) -> list[str]:
    return [e.text for e in evs.of(Reply)]


def calls(evs) -> list[tuple[str, dict]]:
    return [(c.tool, c.arguments) for c in evs.of(ToolCall)]


def test_timers_are_named_asked_about_changed_and_cancelled_by_name(agent):
    """A new user's chat: every question about a timer got "For how long?", names were lost, "make
    it ten seconds" started a second timer, and "cancel the pasta timer" asked which of the
    others to cancel."""
    evs = agent.text(
        "set a timer for ten minutes called tea",
        "how long is left on the tea timer?",
        "cancel the pasta timer",
        "make it five minutes",
        "add two minutes",
        "what timers are running?",
        "cancel the tea timer",
    )
    said = replies(evs)
    assert said[0] == "10-minute tea timer.", said
    assert re.fullmatch(
        r"The tea timer has 9 minutes and \d+ seconds left\.|The tea timer has 10 minutes left\.", said[1]
    )
    assert said[2] == "There is no pasta timer.", said
    assert said[3] == "The tea timer is now set for 5 minutes.", said
    assert re.fullmatch(
        r"I added 2 minutes: the tea timer has (7 minutes|6 minutes and \d+ seconds) left\.", said[4]
    )
    assert re.fullmatch(r"The tea timer has (7 minutes|6 minutes and \d+ seconds) left\.", said[5]), said
    assert said[6] == "I cancelled the tea timer for 7 minutes.", said
    ran = [r.tool for r in evs.of(ToolResult) if r.ok]
    assert ran.count("set_timer") == 1 and "change_timer" in ran and "add_to_timer" in ran, ran
    assert not agent.core.ctx.timers.running() and not evs.of(BackgroundDone)


def test_asking_with_no_timer_running_says_so(agent):
    """ "how long is left?" got an invented "It is 10 seconds left.", "is my timer done?" "For how
    long?"."""
    evs = agent.text("how long is left?", "is my timer done?")
    assert replies(evs) == ["No timer is running.", "No timer is running."], calls(evs)
    assert "set_timer" not in [c for c, _ in calls(evs)]


def test_two_timers_in_one_sentence_are_not_refused(agent):
    """ "set a timer for 3 seconds and another one for 6 seconds" was refused as "no length"."""
    evs = agent.text("set a timer for 1 second and another one for 2 seconds", wait_background=30.0)
    assert "For how long?" not in " ".join(replies(evs)), replies(evs)
    started = [r for r in evs.of(ToolResult) if r.tool == "set_timer" and r.ok]
    assert started and started[0].result.endswith("-second timer."), started
    assert [d.result.startswith("Time is up: the timer for") for d in evs.of(BackgroundDone)] == [True] * len(
        started
    )


def test_the_time_in_a_city_and_dates_relative_to_today(agent):
    """ "what time is it in Tokyo?" and "what day is it tomorrow?" got today's local time."""
    evs = agent.text(
        "what time is it in Tokyo?",
        "what time is it in Atlantis?",
        "what day is it tomorrow?",
        "what time is it?",
    )
    tokyo, atlantis, tomorrow, here = replies(evs)
    now = datetime.now(ZoneInfo("Asia/Tokyo"))
    clocks = {f"{t:%H:%M}" for t in (now - timedelta(minutes=1), now)}
    m = re.fullmatch(r"In Tokyo it is (\d\d:\d\d) on \w+ \d+ \w+\.", tokyo)
    assert m and m.group(1) in clocks, tokyo
    assert atlantis == "I don't know the time zone of Atlantis.", atlantis
    day = datetime.now() + timedelta(days=1)
    assert tomorrow == f"Tomorrow is {day:%A} {day.day} {day:%B}.", tomorrow
    assert here.startswith("It is ") and " in " not in here, here  # plain "what time is it?": here


def test_the_robots_name_and_the_users(agent):
    """ "what's your name?" never got "Bolt"; "my name is Sam" … "what is my name?" got "I am a
    person named Sarah"."""
    evs = agent.text(
        "what's your name?",
        "my name is Sam",
        "what is my name?",
        "remember that I like jazz",
        "forget my name",
        "what is my name?",
    )
    assert replies(evs) == [
        "My name is Bolt.",
        "Nice to meet you, Sam. I will remember your name.",
        "Your name is Sam.",
        "Okay, I will remember that you like jazz.",
        "I forgot that your name is Sam.",
        "I don't know your name yet. You can tell me.",
    ], calls(evs)
    # what is remembered reaches the model with each user message (the state line)
    users = [m["content"] for m in agent.core.conversation.history if m["role"] == "user"]
    assert "the user's name is Sam" in users[2] and "the user told you: I like jazz" in users[4]


def test_without_a_camera_a_look_is_refused_in_words_and_not_promised(agent):
    evs = agent.text("what do you see right now?", "what can you do?")
    assert not evs.of(ToolCall)[:1] or evs.of(ToolCall)[0].tool == "abilities", calls(evs)
    cannot, can = replies(evs)
    assert cannot == "I have no camera, so I cannot see.", cannot
    assert can.startswith("I can ") and "see" not in can and "look at people" not in can, can


def test_names_and_timers_survive_a_restart_of_the_agent(tmp_path):
    cfg = load_config()
    cfg = cfg.model_copy(
        update={
            "llm": cfg.llm.model_copy(update={"temperature": 0.0}),
            "state": cfg.state.model_copy(update={"path": tmp_path / "state.sqlite3"}),
        }
    )
    first = AgentRig(cfg, state=True)
    try:
        evs = first.text("my name is Sam", "set a timer for ten minutes called tea")
        assert replies(evs) == ["Nice to meet you, Sam. I will remember your name.", "10-minute tea timer."]
    finally:
        first.close()
    again = AgentRig(cfg, state=True)  # the next start, on the same state file
    try:
        again.core.conversation.history.clear()  # not the restored tail: the store alone answers
        evs = again.text("what is my name?", "how long is left on the tea timer?", "cancel the tea timer")
        said = replies(evs)
        assert said[0] == "Your name is Sam.", said
        assert re.fullmatch(r"The tea timer has (9 minutes and \d+ seconds|10 minutes) left\.", said[1]), said
        assert said[2] == "I cancelled the tea timer for 10 minutes.", said
    finally:
        again.close()


def test_the_chat_command(tmp_path):
    """The same through ``bolt-agent chat`` itself, with the robot renamed in its config."""
    cfg = tmp_path / "robot.toml"
    cfg.write_text('[agent]\nname = "Robo"\n[llm]\ntemperature = 0.0\n')
    lines = "what's your name?\nwhat time is it in Tokyo?\nset a timer for 2 seconds called tea\n"
    r = subprocess.run(
        [sys.executable, "-m", "agent", "chat", "--json", "-c", cfg, "--wait-background", "30"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    evs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    said = [e["text"] for e in evs if e["event"] == "reply"]
    assert said[0] == "My name is Robo.", said
    assert said[1].startswith("In Tokyo it is "), said
    assert said[2] == "2-second tea timer.", said
    done = [e for e in evs if e["event"] == "background_done"]
    assert [d["result"] for d in done] == ["Time is up: the tea timer for 2 seconds is done."], done
    assert said[-1] == "Time is up: the tea timer for 2 seconds is done.", said


def test_the_volume_set_by_voice_is_the_volume_the_speaker_plays(agent):
    """ "set the volume to 25 percent" typed into ``bolt-agent run``'s live pipeline (the real speaker
    stage, a fake sound device at the OS boundary that records what it was given): the reply is
    played at a sixteenth of the amplitude the voice synthesizes it at ((25 / 100) ** 2)."""
    backend = FakeBackend(record=True)
    start = len(agent.events)
    with agent.live(backend) as pipeline:
        pipeline.submit_text("set the volume to 25 percent")
        reply = agent.log.wait_for(lambda e: isinstance(e, Reply), start, 120)
        turn = reply.turn_id
        spoken = agent.log.wait_for(lambda e: isinstance(e, Spoken) and e.turn_id == turn, start, 60)
        assert spoken is not None and spoken.completed, spoken
    assert reply.text == "Volume 25 percent.", reply
    assert agent.core.ctx.volume.level == 25
    synthesized = np.concatenate([c.audio for c in agent.core.tts.synthesize(reply.text)])
    played = np.abs(np.concatenate(backend.played)).max()
    assert played == pytest.approx(np.abs(synthesized).max() / 32768 / 16, rel=0.1), played


@pytest.mark.parametrize("request_", EVERYDAY, ids=[r.said for r in EVERYDAY])
def test_every_typed_everyday_request_of_bench_accuracy(agent, request_):
    """``bench --accuracy``'s typed set (:mod:`tools.bench.everyday`), checked as the bench checks
    it: every one greedy here."""
    if not applies(request_, agent.core.cfg.devices()):
        pytest.skip("the configured body has a device the request is not meant for")
    evs = agent.text(*request_.before, request_.said)
    assert check(request_, evs) == (True, ""), (calls(evs), replies(evs))


def test_the_everyday_check_finds_what_differs():
    """:func:`tools.bench.everyday.check` on messages made by hand: a wrong argument, a wrong reply."""
    from agent.events import Transcript

    req = EVERYDAY[0]  # "set a timer for ten minutes called tea"
    made = [Transcript(3, req.said), ToolCall(3, "set_timer", {"seconds": 600, "label": "Tea timer"}, "c")]
    assert check(req, [*made, Reply(3, "10-minute tea timer.")]) == (True, "")
    wrong = [Transcript(3, req.said), ToolCall(3, "set_timer", {"seconds": 60, "label": "tea timer"}, "c")]
    ok, why = check(req, [*wrong, Reply(3, "1-minute tea timer.")])
    assert not ok and why.startswith("set_timer arguments"), why
    ok, why = check(req, [*made, Reply(3, "Sure!")])
    assert not ok and why == "reply 'Sure!'", why
    ok, why = check(EVERYDAY[-1], [Transcript(4, "tell me a short joke"), ToolCall(4, "wave", {}, "c")])
    assert not ok and why == "tools wave, expected none", why


def test_bench_accuracy_runs_the_typed_set_and_reports_it(agent, monkeypatch):
    """``bench --accuracy``'s pass over the typed set (on two of its requests) and its report lines."""
    import tools.bench.everyday as everyday
    from tools.bench.accuracy import _everyday, format_accuracy

    monkeypatch.setattr(everyday, "EVERYDAY", (everyday.EVERYDAY[0], everyday.EVERYDAY[-1]))

    class Runner:  # the bench's runner, typed lines through the same pipeline as chat
        core = agent.core

        @staticmethod
        def type(lines):
            return list(agent.text(*lines))

    rows = _everyday(Runner, agent.core.cfg.devices())
    assert [(r["said"], r["ok"]) for r in rows] == [
        ("set a timer for ten minutes called tea", True),
        ("tell me a short joke", True),
    ], rows
    assert rows[0]["tools"] == ["set_timer"] and rows[0]["reply"] == "10-minute tea timer."
    report = {
        "details": [],
        "conversation": [],
        "everyday": rows,
        "everyday_accuracy": 1.0,
        "turns": 0,
        "tool_accuracy": 1.0,
        "tool_accuracy_unbiased": 1.0,
        "tool_name_accuracy": 1.0,
        "tool_name_accuracy_unbiased": 1.0,
        "asr_wer": 0.0,
        "asr_wer_unbiased": 0.0,
        "reply_check": 1.0,
        "reply_check_unbiased": 1.0,
        "reply_check_conversation": 1.0,
    }
    text = format_accuracy(report)
    assert "✓ 'set a timer for ten minutes called tea': set_timer / '10-minute tea timer.'" in text
    assert text.endswith("typed everyday requests 100% (2 requests)"), text
