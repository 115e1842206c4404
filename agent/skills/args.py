"""Checking a call's arguments: clamping numbers into range, and the message for bad ones.

The registry validates arguments with the skill's pydantic model before the call. This
module holds what happens around that: :func:`clamp_args` for ``@skill(clamp=True)``
skills (a number outside ``[minimum, maximum]`` is moved to the bound and a note tells the
model), :func:`validation_message`, the one line the model sees when arguments are
wrong (each bad argument with its description, which carries the unit, and the value), and
:func:`spoken_validation`, the same problem in words a person hears.
Depends only on ``skill.py``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from agent.skills.skill import Skill


def clamp_args(sk: Skill, args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Clamp numeric arguments into their schema's ``[minimum, maximum]``.

    Args:
        sk: The skill whose schema gives the ranges.
        args: Arguments from the model (not modified).

    Returns:
        The arguments with out-of-range numbers clamped, and one note per clamped value
        for the model (names the argument, the bound and the unit).

    """
    notes = []
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
        elif hi is not None and v > hi:
            out[key] = hi
            notes.append(f"{key}={v} is above the maximum {hi}{unit}; clamped to {hi}")
    return out, notes


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

    "cancel the timer" was written as ``set_timer(seconds 0)`` and the model read its error back:
    "Of course! Error: Invalid arguments for set_timer." (a new user's chat). A missing value, a
    number out of range or a choice not offered is told as what the skill needs: "I can't set
    timer: the timer length in seconds should be greater than 0". Other errors (a wrong type, an
    unknown argument) are the model's writing and say nothing.

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
    return f"I can't {sk.name.replace('_', ' ')}: " + "; ".join(parts) if parts else ""
