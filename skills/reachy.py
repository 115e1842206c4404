"""A Reachy Mini's own skills: Pollen's dances and recorded emotions, head moves, sleep.

They are offered only on a body with a Reachy Mini's antennas and head (``needs``), and
``dance``/``play_emotion`` list what is installed: the enums come from the robot's libraries
(``robot.libraries``: the 20 dances of ``reachy-mini-dances-library``; the emotions of the
dataset ``bolt-agent models pull`` downloads — without it, ``play_emotion`` is left out).
Like every movement skill they only start a gesture and return (``follow_up=False``: the
robot talks while it moves); the motion loop sends the poses through the safety layer, one
gesture after another in the order asked for. ``go_to_sleep`` rests in the SDK's sleep pose;
talking wakes it (:meth:`hardware.robot.Robot.wake`, wired to the user's speech), as does
``wake_up``: back to neutral, antennas up.
"""

from typing import Annotated, Literal

from agent.skills import DANCES, EMOTIONS, Choices, SkillContext, skill

REACHY_HEAD = ("head_roll", "head_pitch", "head_yaw", "left_antenna", "right_antenna")
"""The joints only a Reachy Mini has among our bodies: its skills need them."""
HEAD_DIRECTIONS = {
    "left": {"head_yaw": 35.0, "head_pitch": 0.0, "head_roll": 0.0},
    "right": {"head_yaw": -35.0, "head_pitch": 0.0, "head_roll": 0.0},
    "up": {"head_yaw": 0.0, "head_pitch": 20.0, "head_roll": 0.0},
    "down": {"head_yaw": 0.0, "head_pitch": -20.0, "head_roll": 0.0},
    "front": {"head_yaw": 0.0, "head_pitch": 0.0, "head_roll": 0.0},
}
"""Head targets of ``move_head``, degrees (yaw + = left, pitch + = up), as Pollen's conversation app."""


def _play(ctx: SkillContext, kind: str, name: str) -> None:
    gesture = ctx.robot.libraries.get(kind, {}).get(name)
    if gesture is None:
        known = ", ".join(sorted(ctx.robot.libraries.get(kind, {}))) or "none"
        raise ValueError(f"no {kind[:-1]} {name!r}; known: {known}")
    ctx.robot.play(gesture)


@skill(follow_up=False, keywords=("dance", "dancing", "groove", "boogie"), needs=REACHY_HEAD, ability="dance")
def dance(ctx: SkillContext, name: Annotated[str, Choices(DANCES)] = "groovy_sway_and_roll") -> str:
    """Dance one of the robot's dances (head, antennas and body move to a beat), ending where it began.

    Args:
        ctx: The robot (not shown to the model).
        name: Which dance.

    """
    _play(ctx, DANCES, name)
    return f"I am dancing the {name.replace('_', ' ')}."


@skill(
    follow_up=False,
    keywords=("emotion", "feel", "happy", "sad", "surprised", "angry", "curious", "tired", "excited"),
    needs=REACHY_HEAD,
    ability="show emotions",
)
def play_emotion(ctx: SkillContext, name: Annotated[str, Choices(EMOTIONS)]) -> str:
    """Show an emotion with the head and antennas (a move recorded by Pollen Robotics).

    Args:
        ctx: The robot (not shown to the model).
        name: Which emotion.

    """
    _play(ctx, EMOTIONS, name)
    return f"I am showing {name}."


@skill(
    follow_up=False, keywords=("head", "look", "turn", "up", "down"), needs=REACHY_HEAD, ability="look around"
)
def move_head(ctx: SkillContext, direction: Literal["left", "right", "up", "down", "front"]) -> str:
    """Move the head to look left, right, up, down or to the front.

    Args:
        ctx: The robot (not shown to the model).
        direction: Where to look.

    """
    body = ctx.robot.positions().get("body_yaw", 0.0)
    target = dict(HEAD_DIRECTIONS[direction])
    target["head_yaw"] += body  # relative to where the body faces
    ctx.robot.move(target, duration_ms=700)
    return f"I am looking {direction}."


@skill(keywords=("sleep", "rest", "good night", "bedtime"), needs=REACHY_HEAD, ability="go to sleep")
def go_to_sleep(ctx: SkillContext) -> str:
    """Go to sleep: head down, antennas folded, until someone talks to me again."""
    from hardware.reachy_mini.driver import sleep_pose

    ctx.robot.rest(sleep_pose(), 2000)
    return "I am going to sleep. Talk to me to wake me up."


@skill(keywords=("wake", "awake", "morning"), needs=REACHY_HEAD, ability="wake up")
def wake_up(ctx: SkillContext) -> str:
    """Wake up: head back to neutral and antennas up."""
    if not ctx.robot.wake():  # awake already: back to neutral all the same
        ctx.robot.move({n: j.neutral_deg for n, j in ctx.robot.joints.items()}, duration_ms=1500)
    return "I am awake."
