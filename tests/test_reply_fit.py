"""Replies that fit, on the embedded SmolLM2-135M: no copy of the previous reply, data passed on, a joke."""

from __future__ import annotations

import time
from datetime import datetime

import numpy as np
import pytest

from agent.conversation.results import carries_reason
from agent.conversation.small.acks import ACKNOWLEDGEMENTS
from agent.events import BackgroundDone, Reply, ToolCall, ToolResult
from tools.bench.reply_checks import carries_result, reply_check, tail_after_data

pytestmark = pytest.mark.small_model


@pytest.fixture(scope="module")
def agent(greedy_agent):
    return greedy_agent


def _reply(evs, turn_id=None) -> str:
    return next((e.text for e in evs.of(Reply, turn_id)), "")


def test_after_a_finished_timer_a_joke_is_told_and_the_time_is_read_from_get_time(agent):
    agent.core.conversation.history.clear()
    evs = agent.text("Set a timer for 1 second.", wait_background=60.0)
    done = evs.of(BackgroundDone)
    assert len(done) == 1 and done[0].ok, [type(e).__name__ for e in evs]
    previous = _reply(evs, done[0].turn_id)
    assert carries_result(previous, done[0].result), previous  # the robot said the timer is done

    # The joke comes before the clock time: a prompt with a clock time in it changes every
    # minute, and the 135M model's joke with it (even greedy).
    evs = agent.text("Tell me a short joke.")
    assert not evs.of(ToolCall)
    joke = _reply(evs)
    # An answer: not a refusal, not "I am telling you a joke", not a statement about jokes.
    assert reply_check(joke, previous, chat_request="Tell me a short joke.") == (True, ""), joke

    evs = agent.text("What time is it?")
    assert [c.tool for c in evs.of(ToolCall)] == ["get_time"]
    result = evs.of(ToolResult)[0].result
    reply = _reply(evs)
    # The reply carries the clock time of get_time's result and is not the joke again.
    assert reply_check(reply, joke, [("get_time", result)]) == (True, ""), (joke, result, reply)


def test_a_finished_timer_is_said_after_turns_that_failed(agent):
    """Two failed camera calls before the timer: the background turn still says the result.

    A new user's ``chat`` (measured): "what do you see", "look at me" (no camera: both fail),
    "set a timer for 3 seconds", then the timer's turn said "I am done with the task. I will
    tell you when it is finished." instead of "Time is up: ...".
    """
    agent.core.conversation.history.clear()
    evs = agent.text("what do you see", "look at me", "set a timer for 3 seconds", wait_background=30.0)
    [done] = evs.of(BackgroundDone)
    assert done.ok and done.result.startswith("Time is up"), done
    reply = _reply(evs, done.turn_id)
    assert carries_result(reply, done.result) and tail_after_data(reply, [done.result]) == "", reply


LOOKS = [("what do you see",), ("who is in front of you?",), ("look at me", "what do you see")]


@pytest.mark.parametrize("asks", LOOKS, ids=[" / ".join(a) for a in LOOKS])
def test_a_look_without_a_camera_says_why(agent, asks):
    """A look asked of a body without a camera is answered with the reason alone.

    No camera configured (the embedded config). Measured before (greedy): "Let me look. Why did
    the robot...?", "Let me look. I am not in front of you.", and "All right! Let me look." after
    a failed ``look_at``; then the reason ``describe_scene`` raised was said after the model's
    words. Since issue 50 the camera skills are not offered without a camera, and words that ask
    only for them are answered "I have no camera, so I cannot see." with no call and no round
    (without it SmolLM2-135M told a joke).
    """
    agent.core.conversation.history.clear()
    evs = agent.text(*asks)
    last = max(e.turn_id for e in evs.of(Reply))
    assert not evs.of(ToolCall, last), evs.of(ToolCall, last)
    assert _reply(evs, last) == "I have no camera, so I cannot see."
    assert "describe_scene" not in agent.core.registry.skills and "look_at" not in agent.core.registry.skills


def test_a_move_refused_by_the_e_stop_says_why(agent):
    """A movement that fails says the reason its skill raised, as a data skill's does.

    A new user's ``chat`` after "emergency stop": "wave" got "Sure! You can't clear the
    emergency stop, it's a bug in your code.", "nod your head" "All right! Why did the robot
    need to recharge?" (nothing said why the robot stood still). "play the dance animation" got
    "Sure! My emergency stop is on, ... My emergency stop is on, ..." (``play_animation`` needs
    no joint, and its ``dance`` call after it failed too).
    """
    agent.core.conversation.history.clear()
    robot = agent.core.robot
    robot.estop()
    try:
        evs = agent.text(
            "wave your right hand", "nod your head", "look to the left", "play the dance animation"
        )
    finally:
        robot.clear_estop()
    failed = [r for r in evs.of(ToolResult) if not r.ok]
    assert len({r.turn_id for r in failed}) == 4, [(r.tool, r.result) for r in evs.of(ToolResult)]
    assert "play_animation" in {r.tool for r in failed}
    for r in failed:
        reply = _reply(evs, r.turn_id)
        assert carries_reason(reply, r.result), (r.tool, reply)
        # Not "Sure! My emergency stop is on, ..." (a new user's chat): no acknowledgement first.
        assert reply == "My emergency stop is on, so I cannot move until a person clears it.", reply


def test_an_emergency_stop_is_confirmed_as_its_skill_wrote_it(agent):
    """A data round says its data first and whole: the e-stop's confirmation was answered "I'm
    sorry, I can't help you. You're not allowed to use the emergency stop." (a new user's chat)
    and "The robot needs to recharge, so it's off until someone clears it. It was a joke."."""
    agent.core.conversation.history.clear()
    try:
        evs = agent.text("emergency stop")
        assert [c.tool for c in evs.of(ToolCall)] == ["emergency_stop"]
        written = evs.of(ToolResult)[0].result
        assert written.startswith("Emergency stop: my motors are off.") and "a person can clear it" in written
        assert _reply(evs) == written
    finally:
        agent.core.robot.clear_estop()


def test_a_question_about_the_emergency_stop_does_not_latch_it(agent):
    """A new user's "what does the emergency stop do?" latched it: only a person clears it."""
    agent.core.conversation.history.clear()
    try:
        evs = agent.text("What does the emergency stop do?")
        assert "emergency_stop" not in [c.tool for c in evs.of(ToolCall)]
        assert not agent.core.robot.estopped and _reply(evs)
    finally:
        agent.core.robot.clear_estop()


def test_a_side_alone_goes_on_the_last_movement(agent):
    """A new user's chat: "and now to the right" after "look to the left" got "Sorry, I didn't
    get that." (no tool named, and a claim left out); it turns the head the other way now."""
    agent.core.conversation.history.clear()
    evs = agent.text("look to the left", "and now to the right")
    calls = evs.of(ToolCall)
    assert [c.tool for c in calls] == ["look", "look"], calls
    assert calls[0].arguments["yaw_deg"] > 0 > calls[1].arguments["yaw_deg"], calls


def test_a_timer_without_a_length_asks_for_one_and_the_length_next_sets_it(agent):
    """A new user's ``chat``: "set a timer" ran ``set_timer(seconds 10)`` (before the argument
    prior, 1 s), a length nobody said, and the robot said "Okay!"."""
    agent.core.conversation.history.clear()
    evs = agent.text("set a timer")
    assert not [r for r in evs.of(ToolResult) if r.ok], evs.of(ToolResult)  # nothing started
    assert _reply(evs) == "For how long?"
    evs = agent.text("three seconds", wait_background=30.0)
    assert [(c.tool, c.arguments.get("seconds")) for c in evs.of(ToolCall)] == [("set_timer", 3.0)]
    [done] = evs.of(BackgroundDone)
    assert done.ok and done.result == "Time is up: the timer for 3 seconds is done.", done


def test_a_cancelled_timer_never_goes_off(agent):
    """A new user's ``chat``: "cancel the timer" started another timer (``set_timer``, whose
    keyword "timer" it says), and the first one went off anyway."""
    agent.core.conversation.history.clear()
    t0 = time.monotonic()
    # 30 s: on a busy 2-core machine the two turns took more than 5 s, and a 5 s timer went off first
    evs = agent.text("set a timer for thirty seconds", "cancel the timer", wait_background=40.0)
    assert [c.tool for c in evs.of(ToolCall)] == ["set_timer", "cancel_timer"], evs.of(ToolCall)
    cancelled = [r for r in evs.of(ToolResult) if r.tool == "cancel_timer"]
    assert cancelled[0].ok and cancelled[0].result == "I cancelled the timer for 30 seconds.", cancelled
    assert _reply(evs, cancelled[0].turn_id) == "I cancelled the timer for 30 seconds."
    assert time.monotonic() - t0 < 30.0  # the background wait ended with the cancel, not at 30 s
    assert not evs.of(BackgroundDone)  # nothing went off, nothing was announced


def test_the_other_hand_is_the_one_the_last_wave_did_not_take(agent):
    """A new user's chat: "now the other hand" after a right-hand wave named no tool and no side."""
    agent.core.conversation.history.clear()
    evs = agent.text("wave your right hand", "now the other hand")
    calls = evs.of(ToolCall)
    assert [(c.tool, c.arguments.get("hand")) for c in calls] == [("wave", "right"), ("wave", "left")], calls


@pytest.mark.parametrize(
    "ask,tool,told",
    [
        ("nod ten times", "nod", "I can nod at most 5 times in a row."),
        (
            "turn your head 200 degrees to the left",
            "look",
            "I can turn my head at most 60 degrees to the left.",
        ),
    ],
)
def test_a_movement_held_to_its_range_says_so(agent, ask, tool, told):
    """A new user's chat: "nod ten times" nodded five times and "turn your head 200 degrees to
    the left" turned 60, each answered "Sure!" only: the robot did less than asked without a word."""
    agent.core.conversation.history.clear()
    evs = agent.text(ask)
    assert [c.tool for c in evs.of(ToolCall)] == [tool], evs.of(ToolCall)
    [result] = evs.of(ToolResult)
    assert result.ok and "clamped to" in result.result["note"], result
    reply = _reply(evs)
    assert reply.endswith(told) and reply.count(told) == 1, reply


def test_what_can_you_do_lists_the_robots_abilities(agent):
    """A new user's chat: "what can you do?" was answered with a joke ("Why did the robot do it?")."""
    agent.core.conversation.history.clear()
    evs = agent.text("what can you do?")
    assert [c.tool for c in evs.of(ToolCall)] == ["abilities"], evs.of(ToolCall)
    [result] = evs.of(ToolResult)
    assert result.ok and result.result.startswith(
        "I can tell the time anywhere, remember what you tell me, wave, nod, dance, look around"
    ), result
    assert "see" not in result.result  # no camera configured: not promised (issue 50)
    assert _reply(evs).endswith(result.result), _reply(evs)


def test_a_list_written_for_people_is_said_as_written_after_any_history(agent):
    """A new user's chat: after the time, a wave and "nod your head and tell me the time", the
    model's round garbled the list ("What I see and look at people. I can tell the time, ...")."""
    from agent.events import Timing

    agent.core.conversation.history.clear()
    evs = agent.text(
        "what time is it?", "wave your right hand", "nod your head and tell me the time", "what can you do?"
    )
    last = max(e.turn_id for e in evs.of(Reply))
    # SmolLM2-135M calls get_time first since the skills of issue 50 joined; it is not run (the
    # words ask for abilities), and the round after calls abilities
    [result] = [r for r in evs.of(ToolResult, last) if r.ok]
    assert result.tool == "abilities", result
    assert _reply(evs, last) == result.result
    assert evs.of(Timing, last)[0].llm_rounds == len(evs.of(ToolCall, last))  # no round to read it back
    times = [r for r in evs.of(ToolResult) if r.tool == "get_time" and r.ok]
    assert len(times) == 2 and all(_reply(evs, r.turn_id).endswith(r.result) for r in times), times


@pytest.mark.parametrize("first", ["what time is it?", "what can you do?"])
def test_the_last_turns_reading_is_not_repeated_for_another_request(agent, first):
    """A new user's chat: "can you dance for me?" after "what time is it?" called get_time again,
    then dance, and the robot read the time out instead of dancing quietly."""
    agent.core.conversation.history.clear()
    evs = agent.text(first, "can you dance for me?")
    turns = sorted({e.turn_id for e in evs.of(Reply)})
    ran = [r.tool for r in evs.of(ToolResult, turns[-1]) if r.ok]
    assert ran == ["dance"], evs.of(ToolResult, turns[-1])
    first_result = [r for r in evs.of(ToolResult, turns[0]) if r.ok][0].result
    assert not carries_result(_reply(evs, turns[-1]), first_result), _reply(evs, turns[-1])


def test_a_call_not_run_gets_no_acknowledgement(agent):
    """``bench --accuracy``'s one conversation: "what do you see right now?" after "please look to
    the left" had the model write ``look`` again; it was not run, yet the robot said "On it! Let
    me look. I have no camera, so I cannot see." and did not turn."""
    agent.core.conversation.history.clear()
    evs = agent.text("wave your right hand", "please look to the left", "what do you see right now?")
    last = max(e.turn_id for e in evs.of(Reply))
    ran = [r.tool for r in evs.of(ToolResult, last) if r.ok]
    assert "look" not in ran, evs.of(ToolResult, last)
    reply = _reply(evs, last)
    assert not any(reply.startswith(ack) for ack in ACKNOWLEDGEMENTS), reply
    assert reply.endswith("I have no camera, so I cannot see."), reply


def test_a_timer_below_zero_is_refused_without_an_acknowledgement(agent):
    """A new user's chat: "set a timer for minus 5 seconds" started a 5 s timer ("All right!")."""
    agent.core.conversation.history.clear()
    evs = agent.text("set a timer for minus 5 seconds")
    [result] = evs.of(ToolResult)
    assert result.tool == "set_timer" and not result.ok, result
    reply = _reply(evs)
    assert reply.startswith("I can't set a timer") and "greater than 0" in reply, reply


def test_a_negated_movement_is_answered_as_one(agent):
    """A new user's chat: "don't wave" after a wave got "Sorry, I didn't get that. Could you say it
    another way?" (the model's "I am waving my right hand." left out); "don't dance" got "I'm
    holding still. Sorry, I can't do that."."""
    agent.core.conversation.history.clear()
    evs = agent.text("wave", "don't wave")
    turns = sorted({e.turn_id for e in evs.of(Reply)})
    assert [c.tool for c in evs.of(ToolCall, turns[-1])] == []
    assert _reply(evs, turns[-1]) == "Okay, I won't wave."


# Clock times SmolLM2-135M read back one minute late without the copy prior (greedy, measured
# here: 34 of 40 random times right without it, 40 of 40 with it).
MISREAD_TIMES = [(15, 25), (8, 58), (22, 55), (1, 51)]


@pytest.mark.parametrize("hh,mm", MISREAD_TIMES, ids=[f"{h:02d}:{m:02d}" for h, m in MISREAD_TIMES])
def test_the_time_is_read_back_as_get_time_wrote_it(agent, hh, mm):
    agent.core.conversation.history.clear()
    agent.core.conversation.ctx.now = lambda: datetime(2026, 12, 1, hh, mm)
    try:
        evs = agent.text("What time is it?")
    finally:
        agent.core.conversation.ctx.now = datetime.now
    assert [c.tool for c in evs.of(ToolCall)] == ["get_time"]
    assert f"{hh:02d}:{mm:02d}" in _reply(evs), _reply(evs)


def test_copy_prior_favours_what_continues_a_result():
    from agent.engines.priors import CopyPrior

    text = "It is 15:25 on Tuesday 01 December 2026."
    vocab = {c: i for i, c in enumerate(sorted(set(text + "xyz")))}  # one token per character
    prior = CopyPrior(
        lambda t: [vocab[c] for c in t],
        lambda ids: "".join(next(c for c, i in vocab.items() if i == t) for t in ids),
        n_prompt=0,
        sources=[text],
        bonus=3.0,
    )
    assert prior.continuation("The time: It is 15:2") == "5 on Tuesday"
    assert prior.continuation("xyz") == ""  # no match: nothing favoured
    assert prior.continuation("It") == ""  # under MIN_MATCH characters
    assert prior.continuation("Tuesday 01 December 2026.") == ""  # the end of the result
    scores = np.zeros(len(vocab), dtype=np.float32)
    out = prior([vocab[c] for c in "is 15:2"], scores)
    assert out[vocab["5"]] == 3.0 and np.count_nonzero(out) == 1


def test_another_joke_is_not_the_previous_one_word_for_word(agent):
    """The repeat guard: greedy, SmolLM2-135M otherwise tells the same joke again."""
    agent.core.conversation.history.clear()
    first = _reply(agent.text("Tell me a short joke."))
    second = _reply(agent.text("Tell me another joke."))
    assert first and second
    assert reply_check(second, first, chat_request="Tell me another joke.") == (True, ""), (first, second)


def test_the_same_time_twice_in_a_minute_is_no_repeat_to_avoid(agent):
    """A repeat that the tool result makes true is allowed: the guard skips a reply the result contains."""
    agent.core.conversation.history.clear()
    agent.core.conversation.ctx.now = lambda: datetime(2026, 12, 1, 9, 41)
    try:
        replies = [_reply(agent.text("What time is it?")) for _ in range(2)]
    finally:
        agent.core.conversation.ctx.now = datetime.now
    assert all("09:41" in r for r in replies), replies


def test_repeat_guard_holds_back_the_token_that_would_go_on_copying():
    from agent.engines.priors import REPEAT_MIN_MATCH, CopyPrior

    previous = "Why did the robot go on holiday? It needed to recharge."
    vocab = {c: i for i, c in enumerate(sorted(set(previous + "xyz")))}
    guard = CopyPrior(
        lambda t: [vocab[c] for c in t],
        lambda ids: "".join(next(c for c, i in vocab.items() if i == t) for t in ids),
        n_prompt=0,
        sources=[previous],
        bonus=-8.0,
        min_match=REPEAT_MIN_MATCH,
    )
    assert guard.continuation("Why did the") == ""  # a shared opening is free
    assert guard.continuation("Why did the robot ") == "go on holida"
    out = guard([vocab[c] for c in "Why did the robot "], np.zeros(len(vocab), dtype=np.float32))
    assert out[vocab["g"]] == -8.0 and np.count_nonzero(out) == 1


def test_the_example_guard_holds_back_a_copy_whatever_its_case():
    """ "Because it needed to recharge." copies the prompt's "It needed to recharge." (seen greedy
    with flash attention on): the guards match regardless of case; the copy prior does not."""
    from agent.conversation.prompt import EXAMPLE_SAY
    from agent.engines.priors import EXAMPLE_MIN_MATCH, CopyPrior

    written = "Why did the robot have to do a 1-second task? Because it needed to "
    vocab = {c: i for i, c in enumerate(sorted(set(EXAMPLE_SAY + written)))}
    tok = lambda t: [vocab[c] for c in t]  # noqa: E731 - one character, one token
    detok = lambda ids: "".join(next(c for c, i in vocab.items() if i == t) for t in ids)  # noqa: E731
    guard = CopyPrior(tok, detok, 0, [EXAMPLE_SAY], -8.0, EXAMPLE_MIN_MATCH)
    assert guard.continuation(written) == "recharge."  # returned as the source writes it
    out = guard(tok(written), np.zeros(len(vocab), dtype=np.float32))
    assert out[vocab["r"]] == -8.0 and np.count_nonzero(out) == 1
    copy = CopyPrior(tok, detok, 0, [EXAMPLE_SAY], 8.0, EXAMPLE_MIN_MATCH)
    shouted = "BECAUSE IT NEEDED TO "
    assert guard.continuation(shouted) == "recharge."
    assert copy.continuation(shouted) == ""  # a bonus copies only what is written the same way
    assert copy.continuation(written) == "recharge."  # "t needed to " matches as written


def test_a_reply_after_get_time_ends_with_the_time(agent):
    """Nothing after the data: "It is 22:49 on Tuesday 1 December. It needs to recharge." was heard."""
    from tools.bench.reply_checks import copies_example

    agent.core.conversation.history.clear()
    joke = _reply(agent.text("Tell me a short joke."))
    assert joke and not copies_example(joke), joke
    for ask in ("What time is it?", "What time is it now?"):
        evs = agent.text(ask)
        reply = _reply(evs)
        results = [e.result for e in evs.of(ToolResult) if e.tool == "get_time"]
        assert results and not copies_example(reply), (ask, reply)
        assert carries_result(reply, results[0]) and tail_after_data(reply, results) == "", (ask, reply)


@pytest.mark.parametrize("ask", ["Nod your head and tell me the time.", "Tell me the time and then nod."])
def test_a_time_read_before_another_call_is_still_said(agent, ask):
    """get_time in one round and nod (with "Sure!") in the next: the time is read back after the nod.

    Without the read-back the reply was "Sure!" alone, or "Sure! I am not nodding." from a third
    round that read the latest result (greedy SmolLM2-135M, measured).
    """
    agent.core.conversation.history.clear()
    evs = agent.text(ask)
    assert sorted(c.tool for c in evs.of(ToolCall)) == ["get_time", "nod"]
    results = [e.result for e in evs.of(ToolResult) if e.tool == "get_time"]
    reply = _reply(evs)
    assert carries_result(reply, results[0]), (ask, reply)
    assert tail_after_data(reply, results) == "" and "not" not in reply.split(), (ask, reply)


def test_a_typed_stop_says_it_stopped_not_an_acknowledgement(agent):
    """A new user's chat: "stop" ran stop and the robot said "Here I go!"."""
    agent.core.conversation.history.clear()
    evs = agent.text("wave your right hand", "stop")
    last = max(e.turn_id for e in evs.of(Reply))
    assert [r.tool for r in evs.of(ToolResult, last)] == ["stop"]
    assert _reply(evs, last) == "I stopped and I am holding still."
