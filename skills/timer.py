"""Built-in timer skills: set, ask about, change, add to and cancel timers people name.

``set_timer`` runs in the background: it starts the timer, confirms it at once ("10-minute tea
timer."; a generator's first ``yield`` is the call's result) and, when the time is up, its
result enters the conversation and the robot says so, also when the user is silent. The other
skills act on the running timers (``ctx.timers``, :class:`~agent.state.timers.TimerBook`): how
long is left on one ("the tea timer") or all, a new length for the one just set ("make it five
minutes"), more time ("add two minutes"), a cancel. A timer keeps the name the user gave it
(``label``: "tea", "pasta timer", "a timer called tea") and is announced, listed and cancelled
by it; a name no running timer has is said plainly ("There is no pasta timer."), not asked about.

With a state store (``bolt-agent run``) a timer is written down when it starts, written again
when it changes and forgotten when it fires; a shutdown keeps it, and the next start re-arms it
(:mod:`agent.state.timers`). Without a timer book (a bare :class:`~agent.skills.SkillContext`)
a timer only waits, and nothing else can find it. Every result is a sentence written for
people (``as_written``).
"""

from typing import Annotated

from pydantic import Field

from agent.skills import SkillContext, skill
from agent.state.timers import (
    PendingTimer,
    TimerBook,
    done_message,
    set_message,
    spoken_duration,
    spoken_left,
    spoken_timers,
    timer_label,
)
from agent.state.timers import label_in as _label_in

LABEL = "the timer's name in the user's words (tea, pasta); timer when they gave none"
FROM_WORDS = {"label": _label_in}
"""Small models read the timer's name from the words (:func:`agent.state.timers.label_in`)."""


def _book(ctx: SkillContext) -> TimerBook:
    if ctx.timers is None:
        raise RuntimeError("No timer is running.")
    return ctx.timers


def _find(book: TimerBook, label: str) -> PendingTimer:
    try:
        return book.find(timer_label(label))
    except LookupError as e:
        raise RuntimeError(str(e)) from None


@skill(
    background=True,
    as_written=True,
    keywords=("timer", "remind", "countdown", "alarm"),
    ability="set timers",
    from_words=FROM_WORDS,
)
def set_timer(
    ctx: SkillContext,
    seconds: Annotated[float, Field(gt=0, le=86400, description="timer length in seconds")],
    label: Annotated[str, Field(max_length=40, description=LABEL)] = "timer",
):
    """Set a timer (one call per timer); the user is told when it is done."""
    label = timer_label(label)
    if ctx.timers is None:
        yield set_message(label, seconds)
        if ctx.shutdown.wait(seconds):
            return f"The {label} was cancelled because I am shutting down."
        return done_message(label, seconds)
    timer = ctx.timers.start(label, seconds)
    yield set_message(timer.label, timer.seconds)
    return ctx.timers.run(timer, ctx.shutdown)


@skill(
    keywords=("how long", "is left", "are left", "time left", "remaining", "running", "timer done"),
    side_effects=False,
    ability="",
    as_written=True,
    from_words=FROM_WORDS,
)
def timers_left(
    ctx: SkillContext, label: Annotated[str, Field(max_length=40, description=LABEL)] = "timer"
) -> str:
    """Say how long is left on a timer, or on all running timers.

    Raises:
        RuntimeError: no timer runs, or none has that name ("There is no pasta timer.").
    """
    book = _book(ctx)
    running = book.running()
    name = timer_label(label)
    if name != "timer" or len(running) == 1:
        timer = _find(book, name)
        return f"The {timer.label} has {spoken_left(book.left_s(timer))} left."
    if not running:
        raise RuntimeError("No timer is running.")
    each = [f"the {t.label} with {spoken_left(book.left_s(t))} left" for t in running]
    return f"{len(running)} timers are running: {', '.join(each[:-1])} and {each[-1]}."


@skill(keywords=("make it", "change", "instead"), ability="", as_written=True, from_words=FROM_WORDS)
def change_timer(
    ctx: SkillContext,
    seconds: Annotated[
        float, Field(gt=0, le=86400, description="the timer's new length in seconds, from now")
    ],
    label: Annotated[str, Field(max_length=40, description=LABEL + "; timer: the one set last")] = "timer",
) -> str:
    """Give a running timer a new length (the last one set, unless named).

    Raises:
        RuntimeError: no timer runs, or none has that name.
    """
    book = _book(ctx)
    timer = book.change(_find(book, label), seconds=seconds)
    return f"The {timer.label} is now set for {spoken_duration(seconds)}."


@skill(keywords=("add", "more", "extend", "longer"), ability="", as_written=True, from_words=FROM_WORDS)
def add_to_timer(
    ctx: SkillContext,
    seconds: Annotated[float, Field(gt=0, le=86400, description="time to add in seconds")],
    label: Annotated[str, Field(max_length=40, description=LABEL + "; timer: the one set last")] = "timer",
) -> str:
    """Add time to a running timer (the last one set, unless named).

    Raises:
        RuntimeError: no timer runs, or none has that name.
    """
    book = _book(ctx)
    timer = book.change(_find(book, label), add_s=seconds)
    return (
        f"I added {spoken_duration(seconds)}: the {timer.label} has {spoken_left(book.left_s(timer))} left."
    )


@skill(ability="cancel timers", as_written=True, from_words=FROM_WORDS)
def cancel_timer(
    ctx: SkillContext,
    label: Annotated[str, Field(max_length=40, description=LABEL)] = "timer",
    seconds: Annotated[float, Field(ge=0, description="its length in seconds, when several run")] = 0,
) -> str:
    """Cancel a running timer.

    Args:
        ctx: The timers (not shown to the model).
        label: Which timer, when several run ("tea"); the only one otherwise.
        seconds: Its length as set, when several run ("the ten minute one": 600); 0: by label.

    Raises:
        RuntimeError: no timer runs, the name is no running timer's ("There is no pasta timer."),
            or several run and neither ``label`` nor ``seconds`` picks one (the message names them
            and asks which).
    """
    book = _book(ctx)
    try:
        cancelled = book.cancel(timer_label(label), seconds or None)
    except LookupError as e:
        raise RuntimeError(str(e)) from None
    return f"I cancelled {spoken_timers(cancelled)}."
