"""Tool calling for models without a native tool format: grammar-constrained JSON.

Models with no tool-call markup of their own (the embedded stand-in SmolLM2-135M) reply in JSON
held to a llama.cpp grammar built from the registered skills' JSON schemas, so the output is
always parseable and only names real tools::

    {"call": {"tool": "wave", "arguments": {"hand": "right"}}, "say": "Hello there!"}

The call comes first so the model decides on an action before it talks; ``say`` is what the
robot speaks, in a reply that calls nothing (``"tool": "none"``). A tool reply is the call
alone, and the call runs as soon as its object is complete (:class:`CallStreamer`), while the
round still streams; :class:`ToolNameSpotter` sees the tool's name as soon as it is written (a
skill's ``preamble``, and the small-model profile's acknowledgements, are said then). The tools
are described in the system prompt in a compact, signature-like form (such templates have no
tool slot). The small-model profile biases the choice of tool (:mod:`agent.conversation.small`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.skills import Skill

NO_TOOL = "none"
SAY_MAX_CHARS = 160


def written_parameters(skill: Skill, read_from_words: bool) -> dict[str, Any]:
    """The JSON schema of what the model writes for ``skill``.

    With ``read_from_words`` (the small-model profile) the skill's ``from_words`` parameters are
    left out (:attr:`~agent.skills.Skill.grammar_parameters`): they are read from the user's
    words. Otherwise every parameter.
    """
    return skill.grammar_parameters if read_from_words else skill.parameters


def reply_schema(
    skills: list[Skill], allow_tools: bool = True, read_from_words: bool = False
) -> dict[str, Any]:
    """JSON schema of one grammar-constrained reply: a tool call, or speech.

    ``{"call": {"tool": NAME, "arguments": {...}}}`` calls a skill. For a skill with follow-up
    (``get_time``) the next round speaks about the result, so what the robot says is grounded
    in it (a small model otherwise announces a made-up time before ``get_time`` has answered);
    for one without (``wave``) the turn loop says an acknowledgement as soon as the name is
    written. ``{"call": {"tool": "none"}, "say": TEXT}`` only speaks. One call per round keeps
    the choice simple; a multi-step request ("turn, then wave") takes several rounds.

    Args:
        skills: Tools the model may call.
        allow_tools: False gives the speech-only variant, used on the last round.
        read_from_words: Parameters read from the user's words are not written (:func:`written_parameters`).

    Returns:
        A JSON schema object for ``LlamaGrammar.from_json_schema``.
    """
    say = {"type": "string", "minLength": 2, **({"maxLength": SAY_MAX_CHARS} if SAY_MAX_CHARS else {})}
    variants: list[dict[str, Any]] = []
    for s in skills if allow_tools else []:
        args = {
            k: v
            for k, v in written_parameters(s, read_from_words).items()
            if k in ("type", "properties", "required")
        }
        args.setdefault("type", "object")
        call = {
            "type": "object",
            "properties": {"tool": {"const": s.name}, "arguments": args},
            "required": ["tool", "arguments"],
        }
        variants.append({"type": "object", "properties": {"call": call}, "required": ["call"]})
    speak = {"type": "object", "properties": {"tool": {"const": NO_TOOL}}, "required": ["tool"]}
    variants.append(
        {"type": "object", "properties": {"call": speak, "say": say}, "required": ["call", "say"]}
    )
    return variants[0] if len(variants) == 1 else {"anyOf": variants}


def _param_text(name: str, prop: dict[str, Any]) -> str:
    # Compact on purpose: the grammar enforces types and ranges; the prompt only has to
    # tell the model what exists (a 512-token context must still hold every tool).
    if "enum" in prop:
        return f"{name}={'|'.join(str(v) for v in prop['enum'])}"
    lo, hi = prop.get("minimum"), prop.get("maximum")
    if lo is not None and hi is not None:
        return f"{name} {lo:g}..{hi:g}"
    return name


def tools_prompt(skills: list[Skill], read_from_words: bool = False) -> str:
    """System-prompt text listing the tools (one compact line each) and the reply format.

    ``read_from_words``: parameters read from the user's words are not listed (:func:`written_parameters`).
    """
    lines = ["Tools:"]
    for s in skills:
        props = written_parameters(s, read_from_words).get("properties", {})
        params = ", ".join(_param_text(k, v) for k, v in props.items())
        lines.append(f"- {s.name}({params}): {s.description}")
    lines.append(f"- {NO_TOOL}: just talk.")
    lines.append(
        'Reply in JSON: {"call": {"tool": TOOL, "arguments": {...}}} to act, or '
        f'{{"call": {{"tool": "{NO_TOOL}"}}, "say": TEXT}} to speak aloud. After a tool result, tell '
        "the user about it in one short sentence."
    )
    return "\n".join(lines)


_SAY = re.compile(r'"say"\s*:\s*"((?:[^"\\]|\\.)*)')


def parse_reply(text: str) -> tuple[str, list[dict[str, Any]], str]:
    """Parse a grammar-constrained reply.

    Args:
        text: The model output (normally complete JSON; may be cut off by ``max_tokens``).

    Returns:
        ``(say, calls, problem)``: the speech text, the calls as ``{"name", "arguments"}``
        dicts (empty for ``"none"``), and a message when the output was cut off or
        malformed (what could be recovered is still returned).
    """
    try:
        # strict=False: llama.cpp's JSON-schema grammar lets raw control characters (a newline)
        # into strings (its ``char ::= [^"\\]``), which strict JSON refuses.
        data = json.loads(text, strict=False)
    except json.JSONDecodeError:
        m = _SAY.search(text)
        say = ""
        if m:
            try:
                say = json.loads(f'"{m.group(1)}"', strict=False)
            except json.JSONDecodeError:
                say = ""
        return say.strip(), [], "reply was cut off before it was complete JSON; its tool call was not run"
    if not isinstance(data, dict):
        return "", [], "reply was not a JSON object"
    say = data.get("say") if isinstance(data.get("say"), str) else ""
    call = _call_of(data.get("call"))
    return say.strip(), [call] if call else [], ""


def _call_of(obj: Any) -> dict[str, Any] | None:
    """The ``{"name", "arguments"}`` call of a reply's ``call`` object (None for ``"none"``)."""
    if not isinstance(obj, dict):
        return None
    name = obj.get("tool")
    if not isinstance(name, str) or name == NO_TOOL:
        return None
    args = obj.get("arguments") if isinstance(obj.get("arguments"), dict) else {}
    return {"name": name, "arguments": args}


class CallStreamer:
    """Spot the end of the ``call`` object in a grammar-constrained reply while it is generated.

    ``feed(piece)`` returns the call as ``{"name", "arguments"}`` once, on the piece that
    closes the ``call`` object, so the tool can run while the model still writes ``say``
    (the robot starts moving as it starts talking). ``"none"`` gives nothing. Works because
    the grammar puts ``call`` first: the first object nested in the reply is the call.
    """

    def __init__(self) -> None:
        self._buf = ""
        self._depth = 0
        self._in_str = False
        self._esc = False
        self._start = self._end = -1  # where the call object opens and closes in the reply
        self.done = False
        """The call object is complete (whether or not it named a tool)."""
        self.call: dict[str, Any] | None = None
        """The call once complete (None for ``"none"``): the reply then only closes its object."""

    def feed(self, piece: str) -> dict[str, Any] | None:
        """Add generated text; return the call when this piece completed it, else None."""
        if self.done:
            return None
        start = len(self._buf)
        self._buf += piece
        for i in range(start, len(self._buf)):
            ch = self._buf[i]
            if self._in_str:  # braces inside strings are text, not structure
                if self._esc:
                    self._esc = False
                elif ch == "\\":
                    self._esc = True
                elif ch == '"':
                    self._in_str = False
            elif ch == '"':
                self._in_str = True
            elif ch == "{":
                self._depth += 1
                if self._depth == 2 and self._start < 0:
                    self._start = i
            elif ch == "}":
                self._depth -= 1
                if self._depth == 1 and self._start >= 0:
                    self.done, self._end = True, i
                    try:
                        self.call = _call_of(json.loads(self._buf[self._start : i + 1], strict=False))
                    except json.JSONDecodeError:
                        return None
                    return self.call
        return None

    def closing(self, text: str) -> str:
        """The brace that closes a reply cut off after its call (``text``: the reply so far).

        The call is the reply's only nested object, so once it is complete the reply's own
        object is the one left open, and the grammar allows nothing but its ``}`` (and white
        space): generation can stop the moment the call is complete and the reply be finished
        here. ``""`` when ``text`` closed it already, or before the call is complete.
        """
        if not self.done:
            return ""
        return "" if "}" in text[self._end + 1 :] else "}"


class ToolNameSpotter:
    """Spot the tool's name in a grammar-constrained reply the moment its closing quote is written.

    ``feed(text)`` takes the reply so far and returns the name once (``"none"`` included), on
    the first call that sees ``"tool": "NAME"`` complete; None before and after.
    """

    _NAME = re.compile(r'"tool"\s*:\s*"((?:[^"\\]|\\.)*)"')

    def __init__(self) -> None:
        self.name: str | None = None

    def feed(self, text: str) -> str | None:
        """Look at the whole reply so far; the name when it has just become complete."""
        if self.name is not None:
            return None
        m = self._NAME.search(text)
        if m is None:
            return None
        self.name = m.group(1)
        return self.name


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
                        out.append(json.loads(f'"{self._buf[self._pos : self._pos + 6]}"'))
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


def as_grammar_messages(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """History in the JSON shape the grammar path's model produces; tool results as user text."""
    out: list[dict[str, Any]] = []
    for m in history:
        if m["role"] == "assistant":
            if m.get("raw"):  # exactly what was generated: the KV cache reuses it token for token
                out.append({"role": "assistant", "content": m["raw"]})
                continue
            if m.get("tool_calls"):
                fn = m["tool_calls"][0]["function"]
                reply = {"call": {"tool": fn["name"], "arguments": fn["arguments"]}}
                if m.get("content"):  # a call without follow-up speaks in the same reply
                    reply["say"] = m["content"]
            else:
                reply = {"call": {"tool": NO_TOOL}, "say": m["content"]}
            out.append({"role": "assistant", "content": json.dumps(reply)})
        elif m["role"] == "tool":
            line = f"Result of {m['name']}: {m['content']}"
            if out and out[-1]["role"] == "user" and out[-1]["content"].startswith("Result of "):
                out[-1] = {"role": "user", "content": out[-1]["content"] + "\n" + line}
            else:
                out.append({"role": "user", "content": line})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out
