"""Built-in timer skills: ``set_timer`` (in the background) and ``cancel_timer``.

``set_timer`` is asynchronous: the call returns at once ("started"), the robot keeps
talking, and when the time is up the result enters the conversation and the robot says
so — also when the user is silent. Its immediate result ("started") holds nothing the model
did not write itself, so it is ``follow_up=False``: the confirmation is spoken in the round
that sets the timer; the real result gets a turn of its own.

With a state store (``ctx.timers``, ``bolt-agent run``) the timer is written down when it
starts and forgotten when it fires; a shutdown keeps it, and the next start re-arms it
(:mod:`agent.state.timers`). ``cancel_timer`` ends a running timer: its wait ends and the
timer reports nothing more. Without a timer book (a bare :class:`~agent.skills.SkillContext`)
timers cannot be cancelled.
"""

from typing import Annotated

from pydantic import Field

from agent.skills import SkillContext, skill
from agent.state.timers import done_message, spoken_timers, timer_label


@skill(
    background=True,
    follow_up=False,
    as_written=True,
    keywords=("timer", "remind", "countdown", "alarm"),
    ability="set timers",
)
def set_timer(
    ctx: SkillContext,
    seconds: Annotated[float, Field(gt=0, le=86400, description="timer length in seconds")],
    label: str = "timer",
) -> str:
    """Set a timer; the robot tells the user when it is done."""
    label = timer_label(label)
    if ctx.timers is not None:
        return ctx.timers.run(ctx.timers.start(label, seconds), ctx.shutdown)
    if ctx.shutdown.wait(seconds):
        return f"The {label} was cancelled because I am shutting down."
    return done_message(label, seconds)


@skill(ability="cancel timers")
def cancel_timer(
    ctx: SkillContext,
    label: str = "timer",
    seconds: Annotated[float, Field(ge=0, description="its length in seconds, when several run")] = 0,
) -> str:
    """Cancel a running timer.

    Args:
        ctx: The timers (not shown to the model).
        label: Which timer, when several run ("tea"); the only one otherwise.
        seconds: Its length as set, when several run ("the ten minute one": 600); 0: by label.

    Raises:
        RuntimeError: no timer runs, or several do and neither ``label`` nor ``seconds`` picks
            one (the message names them and asks which).
    """
    if ctx.timers is None:
        raise RuntimeError("no timer is set")
    try:
        cancelled = ctx.timers.cancel(timer_label(label), seconds or None)
    except LookupError as e:
        raise RuntimeError(str(e)) from None
    return f"I cancelled {spoken_timers(cancelled)}."
