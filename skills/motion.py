"""Built-in movement skills: wave, nod, dance, look, play_animation, stop, emergency_stop.

Movements start an animation on the robot and return at once, so the robot can speak
while it moves (a skill only starts a gesture; the robot's motion loop sends the poses);
each names the joints it ``needs``, so a body without arms is never offered ``wave``;
``stop`` cancels whatever is running and holds position. They are ``follow_up=False``:
the model says its words in the same round as the call, while the arm starts to move, and
no second round reads the result back. Results are short first-person sentences (the model
sees them in the history). Gestures a turn asks for play one after another, each to its end
(:meth:`hardware.robot.Robot.play` queues them). ``emergency_stop``'s result is said as written:
what the motors do (read back from the hardware where it can tell) and how a person clears it;
called while latched ("clear the emergency stop" latched it again) it does nothing again and says
so, with how to clear it: the robot never clears its own e-stop. A number out of range is moved
to the limit (``clamp=True``) and the robot says so in the words of the parameter's
:class:`~agent.skills.Clamped` ("nod ten times": "I can nod at most 5 times in a row.").

``play_animation``'s ``name`` enum lists the robot's animations: the parameter is
``Annotated[str, Choices(ANIMATIONS, ...)]``, and the registry turns it into a ``Literal``
of the names it was handed (``load_registry(..., animations=robot.animations)``, which
includes animations from the config's folders). Without names it lists the packaged
animations (``hardware/animations``).
"""

import dataclasses
from typing import Annotated, Literal

from pydantic import Field

from agent.skills import ANIMATIONS, Choices, Clamped, SkillContext, skill
from hardware.factory import BUILTIN_ANIMATIONS


@skill(
    follow_up=False,
    clamp=True,
    keywords=("wave", "waving", "hello", "hi", "bye", "goodbye"),
    ability="wave",
    needs=("left_arm", "right_arm"),
)
def wave(
    ctx: SkillContext,
    hand: Literal["left", "right"] = "right",
    times: Annotated[
        int,
        Field(ge=1, le=5, description="how many times to wave"),
        Clamped("I wave at least once.", "I can wave at most {limit} times in a row."),
    ] = 1,
) -> str:
    """Wave hello with one hand.

    Args:
        ctx: The robot (not shown to the model).
        hand: Which hand waves.
        times: How many waves, one after the other (1-5; more is clamped to 5, and said).

    """
    remap = {"right_arm": "left_arm"} if hand == "left" else None
    ctx.robot.play("wave", remap=remap)
    for _ in range(times - 1):
        ctx.robot.play("wave", remap=remap, queue=True)
    return f"I am waving my {hand} hand." if times == 1 else f"I am waving my {hand} hand {times} times."


@skill(
    follow_up=False,
    clamp=True,
    keywords=("nod", "nodding", "yes", "agree"),
    needs=("head_pitch",),
    ability="nod",
)
def nod(
    ctx: SkillContext,
    times: Annotated[
        int,
        Field(ge=1, le=5, description="how many times to nod"),
        Clamped("I nod at least once.", "I can nod at most {limit} times in a row."),
    ] = 1,
) -> str:
    """Nod the head yes.

    Args:
        ctx: The robot (not shown to the model).
        times: How many nods, one after the other (1-5; more is clamped to 5, and said).

    """
    ctx.robot.play("nod")
    for _ in range(times - 1):
        ctx.robot.play("nod", queue=True)
    return "I am nodding my head." if times == 1 else f"I am nodding my head {times} times."


@skill(
    follow_up=False,
    keywords=("dance", "dancing", "boogie"),
    needs=("left_arm", "right_arm", "head_yaw"),
    ability="dance",
)
def dance(ctx: SkillContext) -> str:
    """Do a short dance with arms and head."""
    ctx.robot.play("dance")
    return "I am dancing for you."


@skill(
    clamp=True,
    follow_up=False,
    keywords=("look", "turn", "face", "glance"),
    needs=("head_yaw", "head_pitch"),
    ability="look around",
)
def look(
    ctx: SkillContext,
    yaw_deg: Annotated[
        float,
        Field(ge=-60, le=60, description="head turn in degrees, positive = left"),
        Clamped(
            "I can turn my head at most {limit} degrees to the right.",
            "I can turn my head at most {limit} degrees to the left.",
        ),
    ] = 0.0,
    pitch_deg: Annotated[
        float,
        Field(ge=-30, le=30, description="head tilt in degrees, positive = up"),
        Clamped(
            "I can tilt my head at most {limit} degrees down.",
            "I can tilt my head at most {limit} degrees up.",
        ),
    ] = 0.0,
) -> str:
    """Turn the head to look in a direction."""
    ctx.robot.move({"head_yaw": yaw_deg, "head_pitch": pitch_deg}, duration_ms=600)
    return f"I am looking {where_i_look(yaw_deg, pitch_deg)}."


def where_i_look(yaw_deg: float, pitch_deg: float) -> str:
    """A head pose as said: "30 degrees to the left and 10 degrees down", "straight ahead".

    A sign is a side, never said as a minus ("-45 degrees to the side" was a result a new user read).

    Args:
        yaw_deg: Head turn, degrees, positive = left.
        pitch_deg: Head tilt, degrees, positive = up.
    """
    parts = []
    if round(yaw_deg):
        parts.append(f"{abs(yaw_deg):.0f} degrees to the {'left' if yaw_deg > 0 else 'right'}")
    if round(pitch_deg):
        parts.append(f"{abs(pitch_deg):.0f} degrees {'up' if pitch_deg > 0 else 'down'}")
    return " and ".join(parts) or "straight ahead"


# Its result is what the robot says, as written: an acknowledgement ("Here I go!") was wrong for a stop.
@skill(as_written=True, keywords=("stop", "halt", "freeze", "quiet", "enough"), ability="")
def stop(ctx: SkillContext) -> str:
    """Stop moving at once and hold still."""
    ctx.robot.stop()
    return "I stopped and I am holding still."


CLEARED_BY = (
    "Only a person can clear it: the Clear button on my web console, "
    "or the command bolt-agent estop clear on my computer."
)
"""How the e-stop is cleared, said with every e-stop sentence (never by asking the robot)."""


# Said as written: what the motors do is the body's report, word for word (a model round dropped it).
@skill(as_written=True, keywords=("emergency", "power off", "kill"), ability="")
def emergency_stop(ctx: SkillContext) -> str:
    """Emergency stop: stop every motion at once; nothing moves until a person clears it."""
    report = ctx.robot.estop()  # latched already: nothing is done again
    return f"{report.says()} {CLEARED_BY}"


PACKAGED_ANIMATIONS = tuple(sorted(p.stem for p in BUILTIN_ANIMATIONS.glob("*.json")))


@skill(
    follow_up=False, keywords=("animation", "play", "perform", "show"), moves=True, ability="play animations"
)
def play_animation(
    ctx: SkillContext,
    name: Annotated[str, Choices(ANIMATIONS, default=PACKAGED_ANIMATIONS)],
    loop: bool = False,
) -> str:
    """Play one of the robot's keyframe animations (it blends from the current pose).

    Args:
        ctx: The robot (not shown to the model).
        name: Which animation to play.
        loop: Repeat until stopped.

    """
    anim = ctx.robot.animations.get(name)
    if anim is None:
        raise ValueError(f"no animation {name!r}; known: {', '.join(sorted(ctx.robot.animations)) or 'none'}")
    if loop:
        anim = dataclasses.replace(anim, loop=True)
    ctx.robot.play(anim)
    return f"I am playing the {name} animation{' in a loop' if loop else ''}."
