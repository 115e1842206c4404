"""Tool calling for models without a native tool format: grammar-constrained JSON.

Small models such as the embedded SmolLM2-135M have no tool-call markup of their own. For
them the reply is constrained by a llama.cpp grammar built from the registered skills' JSON
schemas, so the output is always parseable and only names real tools::

    {"tool_calls": [{"name": "wave", "arguments": {"hand": "right"}}], "say": "Hello there!"}

``tool_calls`` comes first so the model decides on actions before it talks; ``say`` is
what the robot speaks. Measured here: with this grammar even the 135M model picks the right
tool for simple commands. The tools are described in the system prompt in a compact,
signature-like form (the template of such models has no tool slot).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.skills import Skill

MAX_CALLS_PER_ROUND = 3


def reply_schema(skills: list[Skill], allow_tools: bool = True) -> dict[str, Any]:
    """JSON schema of one grammar-constrained reply.

    Args:
        skills: Tools the model may call.
        allow_tools: False gives a speech-only schema (``{"say": ...}``), used on the last round.

    Returns:
        A JSON schema object for ``LlamaGrammar.from_json_schema``.
    """
    props: dict[str, Any] = {}
    if allow_tools and skills:
        variants = []
        for s in skills:
            args = {k: v for k, v in s.parameters.items() if k in ("type", "properties", "required")}
            args.setdefault("type", "object")
            variants.append({"type": "object", "properties": {"name": {"const": s.name}, "arguments": args},
                             "required": ["name", "arguments"]})
        props["tool_calls"] = {"type": "array", "items": {"anyOf": variants}, "maxItems": MAX_CALLS_PER_ROUND}
    props["say"] = {"type": "string"}
    return {"type": "object", "properties": props, "required": list(props)}


def _param_text(name: str, prop: dict[str, Any]) -> str:
    if "enum" in prop:
        kind = "|".join(json.dumps(v) for v in prop["enum"])
    else:
        kind = prop.get("type", "any")
        lo, hi = prop.get("minimum"), prop.get("maximum")
        if lo is not None and hi is not None:
            kind += f" {lo:g}..{hi:g}"
    desc = f" ({prop['description']})" if prop.get("description") else ""
    return f"{name}: {kind}{desc}"


def tools_prompt(skills: list[Skill]) -> str:
    """System-prompt text listing the tools and the reply format."""
    lines = ["You can call these tools:"]
    for s in skills:
        params = ", ".join(_param_text(k, v) for k, v in s.parameters.get("properties", {}).items())
        lines.append(f"- {s.name}({params}): {s.description}")
    lines.append('Answer with JSON: {"tool_calls": [{"name": TOOL, "arguments": {...}}], "say": TEXT}. '
                 "Call a tool only when the user asks for what it does; otherwise use an empty tool_calls "
                 'list. "say" is spoken aloud: one short sentence.')
    return "\n".join(lines)


_SAY = re.compile(r'"say"\s*:\s*"((?:[^"\\]|\\.)*)')


def parse_reply(text: str) -> tuple[str, list[dict[str, Any]], str]:
    """Parse a grammar-constrained reply.

    Args:
        text: The model output (normally complete JSON; may be cut off by ``max_tokens``).

    Returns:
        ``(say, calls, problem)``: the speech text, the calls as ``{"name", "arguments"}``
        dicts, and a message when the output was cut off or malformed (what could be
        recovered is still returned).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        m = _SAY.search(text)
        say = json.loads(f'"{m.group(1)}"') if m and not m.group(1).endswith("\\") else ""
        return say, [], "reply was cut off before it was complete JSON; tool calls in it were not run"
    if not isinstance(data, dict):
        return "", [], "reply was not a JSON object"
    calls = [c for c in data.get("tool_calls") or [] if isinstance(c, dict) and isinstance(c.get("name"), str)]
    say = data.get("say") if isinstance(data.get("say"), str) else ""
    return say.strip(), [{"name": c["name"], "arguments": c.get("arguments") or {}} for c in calls], ""


class SayStreamer:
    """Pull the ``say`` string out of a grammar-constrained reply while it is generated.

    ``feed(piece)`` returns the newly decoded characters of the ``say`` value (JSON escapes
    resolved), so speech can start before the JSON is complete. Works because the grammar
    fixes the key order and puts ``say`` last.
    """

    _KEY = re.compile(r'"say"\s*:\s*"')

    def __init__(self) -> None:
        self._buf = ""
        self._start = -1
        self._pos = 0
        self.done = False

    def feed(self, piece: str) -> str:
        """Add generated text; return the speech characters it completed (may be "")."""
        self._buf += piece
        if self._start < 0:
            m = self._KEY.search(self._buf)
            if not m:
                return ""
            self._start = self._pos = m.end()
        out = []
        while not self.done and self._pos < len(self._buf):
            ch = self._buf[self._pos]
            if ch == '"':
                self.done = True
                break
            if ch == "\\":
                if self._pos + 1 >= len(self._buf):
                    break
                nxt = self._buf[self._pos + 1]
                if nxt == "u":
                    if self._pos + 6 > len(self._buf):
                        break
                    try:
                        out.append(json.loads(f'"{self._buf[self._pos:self._pos + 6]}"'))
                    except json.JSONDecodeError:
                        pass
                    self._pos += 6
                    continue
                out.append({"n": " ", "t": " ", "r": " "}.get(nxt, nxt))
                self._pos += 2
                continue
            out.append(ch)
            self._pos += 1
        return "".join(out)
