"""Built-in movement skills: wave, nod, dance, look, stop.

Movements start an animation on the robot and return at once, so the robot can speak
while it moves; ``stop`` cancels whatever is running and holds position.
"""

from typing import Annotated, Literal

from pydantic import Field

from agent.skills import SkillContext, skill


@skill
def wave(ctx: SkillContext, hand: Literal["left", "right"] = "right") -> str:
    """Wave hello with one hand.

    Args:
        hand: Which hand waves.
    """
    remap = {"right_arm": "left_arm"} if hand == "left" else None
    ctx.robot.play("wave", remap=remap)
    return f"waving the {hand} hand"


@skill
def nod(ctx: SkillContext) -> str:
    """Nod the head yes."""
    ctx.robot.play("nod")
    return "nodding"


@skill
def dance(ctx: SkillContext) -> str:
    """Do a short dance with arms and head."""
    ctx.robot.play("dance")
    return "dancing"


@skill(clamp=True)
def look(
    ctx: SkillContext,
    yaw_deg: Annotated[float, Field(ge=-60, le=60, description="head turn in degrees, positive = left")] = 0.0,
    pitch_deg: Annotated[float, Field(ge=-30, le=30, description="head tilt in degrees, positive = up")] = 0.0,
) -> str:
    """Turn the head to look in a direction."""
    ctx.robot.move({"head_yaw": yaw_deg, "head_pitch": pitch_deg}, duration_ms=600)
    return f"looking at yaw {yaw_deg:g} degrees, pitch {pitch_deg:g} degrees"


@skill
def stop(ctx: SkillContext) -> str:
    """Stop moving at once and hold still."""
    ctx.robot.stop()
    return "stopped"
