"""Built-in movement skills: wave, nod, dance, look, stop.

Movements start an animation on the robot and return at once, so the robot can speak
while it moves; ``stop`` cancels whatever is running and holds position. Results are short
first-person sentences: small models repeat them almost word for word.
"""

from typing import Annotated, Literal

from pydantic import Field

from agent.skills import SkillContext, skill


@skill(keywords=("wave", "waving", "hello", "hi", "bye", "goodbye"))
def wave(ctx: SkillContext, hand: Literal["left", "right"] = "right") -> str:
    """Wave hello with one hand.

    Args:
        hand: Which hand waves.
    """
    remap = {"right_arm": "left_arm"} if hand == "left" else None
    ctx.robot.play("wave", remap=remap)
    return f"I am waving my {hand} hand."


@skill(keywords=("nod", "nodding", "yes", "agree"))
def nod(ctx: SkillContext) -> str:
    """Nod the head yes."""
    ctx.robot.play("nod")
    return "I am nodding my head."


@skill(keywords=("dance", "dancing", "boogie"))
def dance(ctx: SkillContext) -> str:
    """Do a short dance with arms and head."""
    ctx.robot.play("dance")
    return "I am dancing for you."


@skill(clamp=True, keywords=("look", "turn", "face", "glance"))
def look(
    ctx: SkillContext,
    yaw_deg: Annotated[float, Field(ge=-60, le=60, description="head turn in degrees, positive = left")] = 0.0,
    pitch_deg: Annotated[float, Field(ge=-30, le=30, description="head tilt in degrees, positive = up")] = 0.0,
) -> str:
    """Turn the head to look in a direction."""
    ctx.robot.move({"head_yaw": yaw_deg, "head_pitch": pitch_deg}, duration_ms=600)
    return f"I am looking {yaw_deg:g} degrees to the side and {pitch_deg:g} degrees up."


@skill(keywords=("stop", "halt", "freeze", "quiet", "enough"))
def stop(ctx: SkillContext) -> str:
    """Stop moving at once and hold still."""
    ctx.robot.stop()
    return "I stopped and I am holding still."
