"""Checking a call's arguments: clamping numbers into range, and the message for bad ones.

The registry validates arguments with the skill's pydantic model before the call. This
module holds what happens around that: :func:`clamp_args` for ``@skill(clamp=True)``
skills (a number outside ``[minimum, maximum]`` is moved to the bound, a note tells the
model and :func:`said_clamp` the person), :func:`validation_message`, the one line the
model sees when arguments are wrong (each bad argument with its description, which carries
the unit, and the value), and :func:`spoken_validation`, the same problem in words a person
hears.
Depends only on ``skill.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from pydantic import ValidationError

from agent.skills.skill import Skill

log = logging.getLogger(__name__)


def clamp_args(
    sk: Skill, args: dict[str, Any], asked: Collection[str] | None = None
) -> tuple[dict[str, Any], list[str], list[str]]:
    """Clamp numeric arguments into their schema's ``[minimum, maximum]``.

    Args:
        sk: The skill whose schema gives the ranges.
        args: Arguments from the model (not modified).
        asked: The arguments whose values the person said; a clamped value of another one was
            the model's own and is told to the model only. None: every one was asked.

    Returns:
        The arguments with out-of-range numbers clamped; one note per clamped value for the
        model (names the argument, the bound and the unit); and one sentence per clamped value
        the person asked for (:func:`said_clamp`: "nod ten times" nodded five times without a
        word).

    """
    notes, said = [], []
    out = dict(args)
    for key, prop in sk.parameters.get("properties", {}).items():
        v = out.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        lo, hi = prop.get("minimum"), prop.get("maximum")
        unit = f" ({prop['description']})" if prop.get("description") else ""
        if lo is not None and v < lo:
            out[key] = lo
            notes.append(f"{key}={v} is below the minimum {lo}{unit}; clamped to {lo}")
            if asked is None or key in asked:
                said.append(said_clamp(sk, key, v, lo, above=False))
        elif hi is not None and v > hi:
            out[key] = hi
            notes.append(f"{key}={v} is above the maximum {hi}{unit}; clamped to {hi}")
            if asked is None or key in asked:
                said.append(said_clamp(sk, key, v, hi, above=True))
    return out, notes, said


def said_clamp(sk: Skill, key: str, value: float, limit: float, above: bool) -> str:
    """The sentence a person hears when argument ``key`` was moved from ``value`` to ``limit``.

    The skill's :class:`~agent.skills.skill.Clamped` sentence for that side, with ``{limit}`` and
    ``{value}`` filled in unsigned ("I can turn my head at most 60 degrees to the left."), or
    one made from the parameter's description up to its first comma ("The most I can do for
    how many times to bow is 3."). A sentence with a placeholder it cannot fill is logged and
    the generic one said instead.

    Args:
        sk: The skill called.
        key: The argument's name.
        value: The value asked for.
        limit: The bound it was clamped to.
        above: ``value`` was over the maximum (else under the minimum).

    Returns:
        One spoken sentence.
    """
    sentences = sk.clamped.get(key)
    template = (sentences.above if above else sentences.below) if sentences else ""
    if template:
        try:
            return template.format(limit=_number(abs(limit)), value=_number(abs(value)))
        except (KeyError, IndexError, ValueError) as e:
            log.warning(
                "skill %s: its clamp sentence for %s cannot be filled (%s): %r", sk.name, key, e, template
            )
    desc = str(sk.parameters.get("properties", {}).get(key, {}).get("description") or "")
    what = desc.split(",")[0].strip() or key.replace("_", " ")
    return f"The {'most' if above else 'least'} I can do for {what} is {_number(limit)}."


def _number(x: float) -> str:
    """A number as said: no trailing ``.0`` ("60", "2.5")."""
    return f"{x:g}"


def validation_message(sk: Skill, err: ValidationError) -> str:
    """One line for the model: each bad argument, its description (with the unit) and the value given."""
    parts = []
    props = sk.parameters.get("properties", {})
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "arguments"
        desc = props.get(key, {}).get("description")
        unit = f" [{desc}]" if desc else ""
        got = f", got {e['input']!r}" if "input" in e and e["type"] != "missing" else ""
        parts.append(f"{key}{unit}: {e['msg']}{got}")
    return f"invalid arguments for {sk.name}: " + "; ".join(parts)


_SPOKEN_TYPES = frozenset(
    {"missing", "greater_than", "greater_than_equal", "less_than", "less_than_equal", "literal_error"}
)
"""pydantic error types a person can be told about (a range, a missing value, a choice)."""


def spoken_validation(sk: Skill, err: ValidationError) -> str:
    """Bad arguments in words a person hears, or "" when they are only the model's to mend.

    A raw validation error read back by the model tells a person nothing. A missing value, a
    number out of range or a choice not offered is told as what the skill needs: "I can't set a
    timer: the timer length in seconds should be greater than 0" (:func:`doing`). Other errors (a
    wrong type, an unknown argument) are the model's writing and say nothing.

    Args:
        sk: The skill called.
        err: pydantic's error for its arguments.

    Returns:
        One line without a full stop, or "".
    """
    props = sk.parameters.get("properties", {})
    parts = []
    for e in err.errors():
        if e["type"] not in _SPOKEN_TYPES:
            return ""
        key = ".".join(str(p) for p in e["loc"])
        what = props.get(key, {}).get("description") or key.replace("_", " ")
        if e["type"] == "missing":
            parts.append(f"I need the {what}")
        else:
            parts.append(f"the {what} {e['msg'].removeprefix('Input ')}")
    return f"I can't {doing(sk.name)}: " + "; ".join(parts) if parts else ""


_A_NEW_ONE = frozenset("set start make add create".split())
"""Verbs whose thing is a new one: "set a timer", not "set the timer"."""
_PREPOSITIONS = frozenset("at to on in up down off out of for with".split())


def doing(name: str) -> str:
    """A skill's name as the words after "I can't": ``set_timer`` → "set a timer".

    It read "I can't set timer"; ``cancel_timer`` → "cancel the timer", ``look_at`` → "look at",
    ``nod`` → "nod".

    Args:
        name: The skill's name, words joined by ``_``.
    """
    words = name.lower().split("_")
    if len(words) != 2 or words[1] in _PREPOSITIONS:
        return " ".join(words)
    verb, thing = words
    article = ("an" if thing[0] in "aeiou" else "a") if verb in _A_NEW_ONE else "the"
    return f"{verb} {article} {thing}"
