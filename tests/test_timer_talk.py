"""Timers people can talk about (issue 50, item 1), on the skills themselves with a real state store.

Asked about (one by name, or all), changed ("make it five minutes", "add two minutes"), several
set at once, named by the user and called by that name when announced, listed and cancelled,
confirmed as set ("10-minute tea timer."), a name no timer has said plainly ("There is no pasta
timer."), and a changed timer kept across a restart. The real skill registry, background calls
and SQLite files in tmp folders; the conversation on the stand-in model is in
``test_everyday.py``.
"""

from __future__ import annotations

import threading
import time

import pytest
from test_state import open_store
from waiting import wait_until

from agent.conversation.background import BackgroundCalls
from agent.conversation.small.argprior import length_unsaid, said_label
from agent.conversation.small.quantities import spoken_durations
from agent.skills import SkillContext, ToolOutcome, load_registry, skill
from agent.skills.registry import SkillRegistry
from agent.state import TimerBook
from agent.state.timers import rearm, set_message, spoken_left, timer_label
from hardware.config import RobotConfig
from hardware.factory import build_robot

TIMERS = ["set_timer", "timers_left", "change_timer", "add_to_timer", "cancel_timer"]


@pytest.fixture
def robot():
    robot, _ = build_robot(RobotConfig())
    yield robot
    robot.close()


@pytest.fixture
def registry():
    return load_registry([], True, TIMERS, 10.0, entry_points=False)


def set_timer(registry, ctx, background, seconds: float, label: str = "timer") -> ToolOutcome:
    return registry.call(
        "set_timer", {"seconds": seconds, "label": label}, ctx, background.callback("set_timer", f"c{label}")
    )


# --- words ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("tea", "tea timer"),
        ("Set a timer called tea", "tea timer"),
        ("pasta timer", "pasta timer"),
        ("the timer for the pasta", "pasta timer"),
        ("ten-minute", "timer"),
        ("timer", "timer"),
        ("a timer named pasta water", "pasta water timer"),
    ],
)
def test_a_timer_keeps_the_name_it_was_given(label, name):
    assert timer_label(label) == name


@pytest.mark.parametrize(
    ("said", "name"),
    [
        ("set a timer for ten minutes called tea", "tea"),
        ("how long is left on the tea timer?", "tea"),
        ("cancel the pasta timer", "pasta"),
        ("is my timer done?", None),
        ("set a ten minute timer", None),
        ("set a timer for five minutes", None),
    ],
)
def test_the_name_the_user_said_is_the_label(said, name):
    assert said_label(said, "timer") == name


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (250, "4 minutes and 10 seconds"),
        (0.4, "1 second"),
        (59.2, "1 minute"),
        (3900, "1 hour and 5 minutes"),
    ],
)
def test_time_left_is_said_in_words(seconds, said):
    assert spoken_left(seconds) == said


def test_a_timer_set_is_confirmed_with_its_length_and_name():
    assert set_message("tea timer", 600) == "10-minute tea timer."
    assert set_message("timer", 90) == "90-second timer."


def test_several_lengths_in_one_sentence_are_no_missing_length():
    """ "set a timer for 3 seconds and another one for 6 seconds" was refused "For how long?"."""
    schema = load_registry([], True, ["set_timer"], entry_points=False).skills["set_timer"].parameters
    text = "set a timer for 3 seconds and another one for 6 seconds"
    assert spoken_durations(text) and length_unsaid(text, schema) is None
    assert length_unsaid("set a timer", schema) == "seconds"


# --- the skills -----------------------------------------------------------------------------------
def test_a_named_timer_is_confirmed_asked_about_changed_and_cancelled_by_its_name(tmp_path, registry, robot):
    store, _ = open_store(tmp_path / "state.sqlite3")
    now = [1_000_000.0]  # the wall clock, moved by hand: the timers wait on it and never fire here
    ctx = SkillContext(robot=robot, timers=TimerBook(store, clock=lambda: now[0]))
    background = BackgroundCalls(registry)
    out = set_timer(registry, ctx, background, 600, "tea")
    assert out.ok and out.result == "10-minute tea timer.", out
    assert [(t.label, t.seconds) for t in store.timers()] == [("tea timer", 600.0)]
    assert set_timer(registry, ctx, background, 300, "pasta").result == "5-minute pasta timer."
    now[0] += 10

    left = registry.call("timers_left", {"label": "tea"}, ctx)
    assert left.ok and left.result == "The tea timer has 9 minutes and 50 seconds left.", left
    both = registry.call("timers_left", {}, ctx)
    assert both.result == (
        "2 timers are running: the pasta timer with 4 minutes and 50 seconds left and the tea timer with "
        "9 minutes and 50 seconds left."
    ), both

    # "make it ten minutes": the one set last (pasta), from now; the store has the new due time
    changed = registry.call("change_timer", {"seconds": 600}, ctx)
    assert changed.ok and changed.result == "The pasta timer is now set for 10 minutes.", changed
    pasta = next(t for t in store.timers() if t.label == "pasta timer")
    assert (pasta.seconds, pasta.due_utc) == (600, now[0] + 600)
    added = registry.call("add_to_timer", {"seconds": 120, "label": "tea"}, ctx)
    assert added.ok and added.result == "I added 2 minutes: the tea timer has 12 minutes left.", added
    assert next(t for t in store.timers() if t.label == "tea timer").seconds == 720

    none = registry.call("cancel_timer", {"label": "egg"}, ctx)
    assert not none.ok and none.raised == "There is no egg timer.", none  # not "which one?"
    asked = registry.call("timers_left", {"label": "egg"}, ctx)
    assert not asked.ok and asked.raised == "There is no egg timer."
    gone = registry.call("cancel_timer", {"label": "pasta timer"}, ctx)
    assert gone.ok and gone.result == "I cancelled the pasta timer for 10 minutes.", gone
    assert [t.label for t in store.timers()] == ["tea timer"]
    ctx.shutdown.set()


def test_with_no_timer_running_every_question_says_so(registry, robot):
    ctx = SkillContext(robot=robot, timers=TimerBook())
    for name in ("timers_left", "change_timer", "add_to_timer", "cancel_timer"):
        args = {"seconds": 60} if "change" in name or "add" in name else {}
        out = registry.call(name, args, ctx)
        assert not out.ok and out.raised == "No timer is running.", (name, out)


def test_two_timers_set_in_one_turn_both_run_and_fire_in_order(registry, robot):
    """What a capable model does for "a timer for 1 second and another one for 2 seconds"."""
    ctx = SkillContext(robot=robot, timers=TimerBook())
    background = BackgroundCalls(registry)
    assert set_timer(registry, ctx, background, 1.0).result == "1-second timer."
    assert set_timer(registry, ctx, background, 2.0).result == "2-second timer."
    assert len(ctx.timers.running()) == 2
    first, second = background.next(timeout=10), background.next(timeout=10)
    assert (first.result, second.result) == (
        "Time is up: the timer for 1 second is done.",
        "Time is up: the timer for 2 seconds is done.",
    )


def test_a_changed_timer_fires_at_its_new_time_and_says_its_new_length(registry, robot):
    ctx = SkillContext(robot=robot, timers=TimerBook())
    background = BackgroundCalls(registry)
    set_timer(registry, ctx, background, 600, "egg")
    t0 = time.monotonic()
    assert (
        registry.call("change_timer", {"seconds": 1}, ctx).result == "The egg timer is now set for 1 second."
    )
    done = background.next(timeout=10)
    assert done is not None and done.result == "Time is up: the egg timer for 1 second is done.", done
    assert time.monotonic() - t0 < 3


def test_a_changed_timer_survives_a_restart(tmp_path, registry, robot):
    path = tmp_path / "state.sqlite3"
    store, _ = open_store(path)
    ctx = SkillContext(robot=robot, timers=TimerBook(store))
    background = BackgroundCalls(registry)
    set_timer(registry, ctx, background, 600, "tea")
    registry.call("change_timer", {"seconds": 2}, ctx)
    ctx.shutdown.set()  # the agent stops: the timer stays in the store, changed
    assert background.next(timeout=5).result == "The tea timer is still set and will go on after I restart."
    store.close()

    store, _ = open_store(path)
    book, after = TimerBook(store), BackgroundCalls(registry)

    def report_as(name, call_id):
        done = after.callback(name, call_id, always=True)
        return lambda text: done(ToolOutcome(True, text))

    assert rearm(book, threading.Event(), report_as) == (0, 1)
    assert [t.label for t in book.running()] == ["tea timer"]  # found by its name after the restart
    done = after.next(timeout=10)
    assert done is not None and done.result == "Time is up: the tea timer for 2 seconds is done.", done
    assert store.timers() == []


# --- a background skill that confirms at once -------------------------------------------------------
@skill(background=True)
def brew(seconds: float):
    """Brew for a while."""
    if seconds < 0:
        raise ValueError("I cannot brew for less than nothing.")
    yield f"Brewing for {seconds:g} s."
    time.sleep(seconds)
    return "The tea is ready."


@skill(background=True)
def nothing_later():
    """Done at once."""
    return "done"
    yield  # a generator that never yields


def test_a_background_skill_written_as_a_generator_confirms_what_it_started():
    reg = SkillRegistry()
    reg.register(brew)
    reg.register(nothing_later)
    background = BackgroundCalls(reg)
    out = reg.call("brew", {"seconds": 0.2}, SkillContext(robot=None), background.callback("brew", "b1"))
    assert out.ok and out.result == "Brewing for 0.2 s.", out
    assert background.next(timeout=5).result == "The tea is ready."
    refused = reg.call("brew", {"seconds": -1}, SkillContext(robot=None), background.callback("brew", "b2"))
    assert not refused.ok and refused.raised == "I cannot brew for less than nothing.", refused
    background.not_started()  # what the conversation does for a refused call
    at_once = reg.call(
        "nothing_later", {}, SkillContext(robot=None), background.callback("nothing_later", "n")
    )
    assert at_once.ok and at_once.result == "done"
    assert wait_until(lambda: background.running == 0, 2) and background.next(timeout=0.2) is None
