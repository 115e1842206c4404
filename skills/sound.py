"""Built-in skills: the robot's speaking volume, set or changed by voice.

``set_volume`` sets a level ("set the volume to 60 percent", "mute yourself", "full volume");
``change_volume`` moves it ("louder", "a bit quieter", "volume up", "turn it down"). The level
runs from 0 (muted) to 100 percent and scales the speech in software before it reaches the sound
device (:class:`agent.state.volume.Volume`): it works on any output device, and no mixer is
touched. A level out of range is moved to the nearest end and the robot says so; each result is
the level in words ("Volume 60 percent."), said as written, at the new volume. With a state
store (``bolt-agent run``) the level is kept across restarts.

The numbers are read from the user's words for small models (``from_words``).
"""

import re
from typing import Annotated

from pydantic import Field

from agent.skills import Clamped, SkillContext, skill
from agent.state.volume import LOUDEST, MUTED, Volume

STEP = 20
"""How far "louder" or "quieter" moves the level, percent; "a bit" moves half of it."""

_NUMBER = re.compile(r"\b(\d{1,3})\s*(?:%|percent|per cent)?")
_WORDS = {"ten": 10, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70}
_WORDS |= {"eighty": 80, "ninety": 90, "hundred": 100, "half": 50}
_QUIETER = re.compile(r"\b(quieter|softer|lower|down|too loud|less loud|quietly|softly)\b", re.I)
_A_BIT = re.compile(r"\b(a (little )?bit|a little|slightly|a touch|a tad)\b", re.I)
_A_LOT = re.compile(r"\b(a lot|much|way|lots)\b", re.I)


def _volume(ctx: SkillContext) -> Volume:
    if ctx.volume is None:
        raise RuntimeError("I cannot change my volume here.")
    return ctx.volume


def said(level: int) -> str:
    """The level in words: "Volume 60 percent.", "Volume 0 percent: I am muted."."""
    return f"Volume {level} percent: I am muted." if level <= MUTED else f"Volume {level} percent."


def _number_in(text: str) -> int | None:
    m = _NUMBER.search(text)
    if m:
        return int(m.group(1))
    return next((n for w, n in _WORDS.items() if re.search(rf"\b{w}\b", text, re.I)), None)


def level_in(text: str) -> int:
    """``set_volume``'s level as the user said it ("to 60 percent": 60, "mute": 0, "full": 100).

    Raises:
        ValueError: no level said (the model's value stands).
    """
    if re.search(r"\b(mute|silent|silence)\b", text, re.I) and not re.search(r"\bunmute\b", text, re.I):
        return MUTED
    if re.search(r"\b(full|max|maximum|loudest|all the way up)\b", text, re.I):
        return LOUDEST
    level = _number_in(text)
    if level is None:
        raise ValueError("no level said")
    return level


def step_in(text: str) -> int:
    """``change_volume``'s step as the user said it.

    +20 for "louder", -20 "quieter", -10 "a bit quieter", +30 "much louder", -30 "down by 30
    percent".
    """
    if (size := _number_in(text)) is None:
        size = STEP // 2 if _A_BIT.search(text) else STEP + STEP // 2 if _A_LOT.search(text) else STEP
    return -size if _QUIETER.search(text) else size


@skill(
    clamp=True,
    keywords=("volume to", "volume at", "percent", "mute", "mute yourself", "full volume", "max volume"),
    ability="change my volume",
    as_written=True,
    from_words={"level": level_in},
)
def set_volume(
    ctx: SkillContext,
    level: Annotated[
        int,
        Field(ge=MUTED, le=LOUDEST, description="speaking volume in percent: 0 mutes, 100 is the loudest"),
        Clamped(
            "The lowest volume is {limit} percent, which is muted.", "The highest volume is {limit} percent."
        ),
    ],
) -> str:
    """Set your speaking volume."""
    return said(_volume(ctx).set(level))


@skill(
    keywords=(
        "louder",
        "quieter",
        "softer",
        "volume up",
        "volume down",
        "turn it up",
        "turn it down",
        "turn up the volume",
        "turn down the volume",
        "speak up",
        "too loud",
        "too quiet",
        "lower your voice",
    ),
    ability="",
    as_written=True,
    from_words={"step": step_in},
)
def change_volume(
    ctx: SkillContext,
    step: Annotated[
        int,
        Field(
            ge=-LOUDEST,
            le=LOUDEST,
            description=f"percent to change the volume by: {STEP} louder, -{STEP} quieter",
        ),
    ] = STEP,
) -> str:
    """Make your voice louder or quieter."""
    volume = _volume(ctx)
    before, wanted = volume.level, volume.level + step
    level = volume.set(wanted)
    if wanted > LOUDEST:
        end = "I am already as loud as I go" if before >= LOUDEST else "That is as loud as I go"
        return f"{end}: volume {level} percent."
    if wanted < MUTED:
        return "I am already muted." if before <= MUTED else "That is as quiet as I go: I am muted."
    return said(level)
