"""Helpers for skill arguments: descriptions from docstrings, schema tidying, clamping and
the messages the model sees when arguments are wrong (they name the unit)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

if TYPE_CHECKING:
    from agent.skills import Skill


def doc_params(doc: str) -> dict[str, str]:
    """Parameter descriptions from a Google-style ``Args:`` section."""
    out: dict[str, str] = {}
    m = re.search(r"^\s*Args:\s*\n(.*?)(?:\n\s*\n|\Z)", doc, re.S | re.M)
    if not m:
        return out
    for line in m.group(1).splitlines():
        pm = re.match(r"\s*(\w+)(?:\s*\([^)]*\))?:\s*(.+)", line)
        if pm:
            out[pm.group(1)] = pm.group(2).strip()
    return out


def strip_titles(schema: Any) -> Any:
    """A JSON schema without pydantic's ``title`` keys (tokens the model does not need)."""
    if isinstance(schema, dict):
        return {k: strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [strip_titles(v) for v in schema]
    return schema


def clamp_args(sk: Skill, args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Clamp numeric arguments into ``[minimum, maximum]``; return the notes for the model."""
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
