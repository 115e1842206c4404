"""Built-in background skill: a timer.

``set_timer`` is asynchronous: the call returns at once ("started"), the robot keeps
talking, and when the time is up the result enters the conversation and the robot says
so — also when the user is silent.
"""

from typing import Annotated

from pydantic import Field

from agent.skills import SkillContext, skill


@skill(background=True, keywords=("timer", "remind", "countdown", "alarm"))
def set_timer(
    ctx: SkillContext,
    seconds: Annotated[float, Field(gt=0, le=86400, description="timer length in seconds")],
    label: str = "timer",
) -> str:
    """Set a timer; the robot tells the user when it is done."""
    if ctx.shutdown.wait(seconds):
        return f"The {label} was cancelled because I am shutting down."
    return f"Time is up: the {label} for {seconds:g} seconds is done."
