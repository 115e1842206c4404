"""Built-in movement skills: wave, nod, dance, look, play_animation, stop, emergency_stop.

Movements start an animation on the robot and return at once, so the robot can speak
while it moves; ``stop`` cancels whatever is running and holds position. Results are short
first-person sentences: small models repeat them almost word for word.

``play_animation``'s ``name`` enum: at import it lists the packaged animations
(``hardware/animations``); after building the robot the agent calls
``install_play_animation(registry, robot.animations)`` so animations from the config's
folders are listed too (schemas come from signatures, so the enum is a ``Literal`` built at
load time by :func:`make_play_animation`).
"""

import dataclasses
from collections.abc import Callable, Iterable
from typing import Annotated, Literal

from pydantic import Field

from agent.skills import SkillContext, SkillRegistry, build_skill, skill


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
    yaw_deg: Annotated[
        float, Field(ge=-60, le=60, description="head turn in degrees, positive = left")
    ] = 0.0,
    pitch_deg: Annotated[
        float, Field(ge=-30, le=30, description="head tilt in degrees, positive = up")
    ] = 0.0,
) -> str:
    """Turn the head to look in a direction."""
    ctx.robot.move({"head_yaw": yaw_deg, "head_pitch": pitch_deg}, duration_ms=600)
    return f"I am looking {yaw_deg:g} degrees to the side and {pitch_deg:g} degrees up."


@skill(keywords=("stop", "halt", "freeze", "quiet", "enough"))
def stop(ctx: SkillContext) -> str:
    """Stop moving at once and hold still."""
    ctx.robot.stop()
    return "I stopped and I am holding still."


@skill(keywords=("emergency", "power off", "kill"))
def emergency_stop(ctx: SkillContext) -> str:
    """Emergency stop: cut motor power at once; motors stay off until a person clears it."""
    ctx.robot.estop()
    return "Emergency stop: my motors are off until someone clears it."


def _animation_names() -> tuple[str, ...]:
    from hardware.factory import BUILTIN_ANIMATIONS

    return tuple(sorted(p.stem for p in BUILTIN_ANIMATIONS.glob("*.json"))) or ("none",)


def make_play_animation(names: Iterable[str]) -> Callable[..., str]:
    """Build the ``play_animation`` skill whose ``name`` enum lists ``names``.

    Args:
        names: Animation names the robot has (``robot.animations``).

    Returns:
        A marked skill function; register it with ``registry.register(fn)``, or replace the
        packaged one with :func:`install_play_animation`.

    """
    choices = tuple(sorted(set(names))) or ("none",)
    Name = Literal[choices]  # type: ignore[valid-type]  # built at load time from the robot's files

    def play_animation(ctx: SkillContext, name: Name, loop: bool = False) -> str:  # type: ignore[valid-type]
        """Play one of the robot's keyframe animations (it blends from the current pose).

        Args:
            name: Which animation to play.
            loop: Repeat until stopped.

        """
        anim = ctx.robot.animations.get(name)
        if anim is None:
            raise ValueError(
                f"no animation {name!r}; known: {', '.join(sorted(ctx.robot.animations)) or 'none'}"
            )
        if loop:
            anim = dataclasses.replace(anim, loop=True)
        ctx.robot.play(anim)
        return f"I am playing the {name} animation{' in a loop' if loop else ''}."

    play_animation.__annotations__["name"] = Name
    return skill(keywords=("animation", "play", "perform", "show"))(play_animation)


def install_play_animation(registry: SkillRegistry, names: Iterable[str]) -> None:
    """Replace the registry's ``play_animation`` with one whose enum lists ``names`` (the robot's animations).

    Call after ``load_registry(...)`` and ``build_robot(...)``:
    ``install_play_animation(registry, robot.animations)``. Keeps the skill's position; does
    nothing when ``play_animation`` was not enabled.
    """
    if "play_animation" not in registry.skills:
        return
    sk = build_skill(make_play_animation(names), registry.skills["play_animation"].source)
    registry.skills["play_animation"] = sk


play_animation = make_play_animation(_animation_names())
