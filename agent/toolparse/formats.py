r"""The tool-call formats: their markers, how a call's body is decoded, and format detection.

Sources:

- ``bolt``: Gemma 4's native format, which Nemotron 3.5 Bolt E4B inherits. Read from the Gemma 4
  chat template shipped in the GGUF (``tokenizer.chat_template``) and summarised in ``docs/facts.md``:
  ``<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>``, thinking as
  ``<|channel>thought\n...<channel|>``; ``<turn|>``, ``<eos>`` and ``<|tool_response>`` end
  generation.
- ``hermes``: the Hermes 2 Pro / Qwen 2.5-3 format, ``<tool_call>{"name": ..., "arguments":
  {...}}</tool_call>``, thinking as ``<think>...</think>``; ``<|im_end|>`` ends the turn.
- ``llama3``: Llama 3.1 model card / prompt-format docs: ``<|python_tag|>{"name": ...,
  "parameters": {...}}`` ended by ``<|eom_id|>``/``<|eot_id|>`` (built-in tools as
  ``<|python_tag|>brave_search.call(query="...")``), or, for custom tools, a reply that is only
  a JSON object ``{"name": ..., "parameters": {...}}``.
- ``none``: no tool calls; thinking, special tokens and call markers are still removed.

Every format strips both thinking syntaxes, and the formats with tool calls accept all three
tagged call syntaxes (their own first), because models mix them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .outputs import ParsedToolCall, ToolCallError
from .values import GEMMA_QUOTE, loads_lenient, parse_gemma_call

FORMATS = ("bolt", "hermes", "llama3", "none")
"""Names accepted by ``make_parser`` and returned by ``detect_format``."""

THINK_OPEN = ("<|channel>", "<think>")
"""Markers that open a thinking block (Gemma 4 channel, Hermes/Qwen/DeepSeek think tag)."""
THINK_CLOSE = ("<channel|>", "</think>")
"""Markers that close a thinking block; either closes either kind."""

STOP_TOKENS = (
    # Gemma 4: end of turn / sequence, a (hallucinated) tool response, a new turn.
    "<turn|>",
    "<eos>",
    "<|tool_response>",
    "<|turn>",
    # ChatML (Hermes/Qwen).
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<tool_response>",
    # Llama 3.
    "<|eot_id|>",
    "<|eom_id|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
)
"""Special tokens that end a reply: they and everything after them are discarded."""

DROP_TOKENS = (
    # Gemma 4 control tokens that must never be spoken.
    "<bos>",
    "<pad>",
    "<unk>",
    "<mask>",
    "<|think|>",
    "<|tool>",
    "<tool|>",
    "<tool_response|>",
    "<|image|>",
    "<|audio|>",
    "<|video|>",
    "<|image>",
    "<|audio>",
    "<image|>",
    "<audio|>",
    # ChatML / Llama 3 leftovers.
    "</tool_response>",
    "<|begin_of_text|>",
    "<|end_header_id|>",
    # Gemma's string delimiter outside a call.
    GEMMA_QUOTE,
)
"""Special tokens removed wherever they appear (they do not end the reply)."""

BodyDecoder = Callable[[str, str], "list[ParsedToolCall | ToolCallError]"]
"""``decode(body, raw)``: the text between a call's markers, and the whole markup → events."""


@dataclass(frozen=True)
class CallSyntax:
    """One tagged tool-call syntax: ``open`` BODY ``close``.

    ``close`` None: the call runs to the end of the reply (or the next stop token), as Llama's
    ``<|python_tag|>`` does; otherwise a reply that ends before ``close`` gives a
    ``ToolCallError``. ``decode(body, raw)`` turns the body into calls or errors.
    """

    open: str
    close: str | None
    decode: BodyDecoder


@dataclass(frozen=True)
class FormatSpec:
    """Markers and decoding rules of one format, consumed by ``StreamParser``.

    ``calls``: the tagged call syntaxes recognised, the format's own first (formats with tool
    calls also accept each other's tagged syntaxes, because fine-tuned models mix them).
    ``bare_json``: a reply whose text starts with ``{`` may be whole-reply JSON calls (Llama 3).
    """

    name: str
    calls: tuple[CallSyntax, ...] = ()
    bare_json: bool = False


def _decode_bolt(body: str, raw: str) -> list[ParsedToolCall | ToolCallError]:
    try:
        name, args = parse_gemma_call(body)
    except ValueError as exc:
        return [ToolCallError(raw, f"malformed Gemma tool call: {exc}")]
    return [ParsedToolCall(name, args, raw)]


def call_from_object(obj: Any, raw: str, *, keys: tuple[str, ...]) -> ParsedToolCall | ToolCallError:
    """Turn a decoded ``{"name": ..., <args key>: {...}}`` object into a call or an error.

    ``keys``: accepted names of the arguments field, in order of preference. A missing arguments
    field means no arguments; a JSON-encoded string is decoded (some models double-encode). A
    string ``id`` (a server's call id, :class:`~agent.engines.remote.chat_api.ChatDeltas`) is kept.
    """
    if not isinstance(obj, dict):
        return ToolCallError(raw, f"tool call must be a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return ToolCallError(raw, "tool call has no string 'name'")
    args: Any = {}
    for key in keys:
        if key in obj:
            args = obj[key]
            break
    if isinstance(args, str):
        try:
            args = loads_lenient(args) if args.strip() else {}
        except ValueError as exc:
            return ToolCallError(raw, f"arguments of {name!r} are a string that is not JSON: {exc}")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ToolCallError(raw, f"arguments of {name!r} must be an object, got {type(args).__name__}")
    call_id = obj.get("id")
    return ParsedToolCall(name, args, raw, call_id if isinstance(call_id, str) else "")


def _decode_hermes(body: str, raw: str) -> list[ParsedToolCall | ToolCallError]:
    try:
        obj = loads_lenient(body)
    except ValueError as exc:
        return [ToolCallError(raw, f"tool call is not valid JSON: {exc}")]
    items = obj if isinstance(obj, list) and obj else [obj]
    return [call_from_object(o, raw, keys=("arguments", "parameters")) for o in items]


def split_json_objects(text: str) -> list[str] | None:
    """Split ``{...}; {...}`` (separators: whitespace, ``;``, ``,``) into the objects' texts.

    Brackets inside double- or single-quoted strings are ignored. Returns None when ``text`` is
    not a sequence of balanced ``{...}`` objects (prose, an unclosed object, a stray character).
    """
    out: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and (text[i].isspace() or text[i] in ";,"):
            i += 1
        if i >= n:
            return out
        if text[i] != "{":
            return None
        end = _object_end(text, i)
        if end is None:
            return None
        out.append(text[i:end])
        i = end


def _object_end(text: str, start: int) -> int | None:
    """Index just past the ``}`` closing the object opened at ``start``, or None when unclosed."""
    depth = 0
    quote = ""
    i = start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


_BUILTIN_CALL = re.compile(r"\s*([A-Za-z_]\w*)\.call\((.*)\)\s*", re.S)
_LOOKS_LIKE_CALL = re.compile(r"""\s*\{\s*["']?name["']?\s*:""")  # a JSON object whose first key is name


def _decode_builtin(body: str, raw: str) -> ParsedToolCall | ToolCallError:
    """Decode Llama 3.1's built-in tool syntax ``name.call(key="value", ...)`` (literals only)."""
    m = _BUILTIN_CALL.fullmatch(body)
    name = m.group(1) if m else "?"
    try:
        call = ast.parse(f"f({m.group(2) if m else ''})", mode="eval").body
        if not isinstance(call, ast.Call) or call.args or any(kw.arg is None for kw in call.keywords):
            raise ValueError("only keyword arguments are allowed")
        args = {str(kw.arg): ast.literal_eval(kw.value) for kw in call.keywords}
    except (SyntaxError, ValueError, TypeError, RecursionError) as exc:
        return ToolCallError(raw, f"malformed built-in tool call {name}.call(...): {exc}")
    return ParsedToolCall(name, args, raw)


def _decode_llama3(body: str, raw: str) -> list[ParsedToolCall | ToolCallError]:
    if not body.strip():
        return [ToolCallError(raw, "<|python_tag|> with no call after it")]
    if _BUILTIN_CALL.fullmatch(body):
        return [_decode_builtin(body, raw)]
    parts = split_json_objects(body)
    if not parts:
        return [ToolCallError(raw, "text after <|python_tag|> is not a JSON tool call")]
    out: list[ParsedToolCall | ToolCallError] = []
    for part in parts:
        try:
            obj = loads_lenient(part)
        except ValueError as exc:
            out.append(ToolCallError(raw, f"tool call is not valid JSON: {exc}"))
            continue
        out.append(call_from_object(obj, raw, keys=("parameters", "arguments")))
    return out


def decode_bare_llama3(text: str) -> list[ParsedToolCall | ToolCallError] | None:
    """Decide whether a whole reply that starts with ``{`` is Llama 3 JSON tool call(s).

    Returns the calls (or errors) when ``text`` is one or more objects each shaped like
    ``{"name": str, "parameters"|"arguments": {...}}`` (optionally ``"type": "function"``),
    separated by ``;``; an error when it clearly tries to be one (starts with a ``name`` key)
    but does not decode; None when it is ordinary text that happens to be JSON.
    """
    parts = split_json_objects(text)
    if not parts:
        if _LOOKS_LIKE_CALL.match(text):
            return [ToolCallError(text.strip(), "reply looks like a JSON tool call but does not parse")]
        return None
    out: list[ParsedToolCall | ToolCallError] = []
    for part in parts:
        try:
            obj = loads_lenient(part)
        except ValueError as exc:
            if _LOOKS_LIKE_CALL.match(part):
                out.append(ToolCallError(part, f"tool call is not valid JSON: {exc}"))
                continue
            return None
        if not is_call_shaped(obj):
            return None
        out.append(call_from_object(obj, part, keys=("parameters", "arguments")))
    return out


def bare_json_ruled_out(text: str) -> bool:
    """Whether buffered reply text that starts with ``{`` can no longer be whole-reply JSON calls.

    True once a closed object is followed by something other than a separator and ``{``, or a
    closed object is not call-shaped (and does not start with a ``name`` key). Depends only on
    ``text`` and, once True, stays True as text is appended, which keeps streaming results
    independent of chunking.
    """
    i, n = 0, len(text)
    while True:
        while i < n and (text[i].isspace() or text[i] in ";,"):
            i += 1
        if i >= n:
            return False
        if text[i] != "{":
            return True
        end = _object_end(text, i)
        if end is None:
            return False
        part = text[i:end]
        try:
            obj = loads_lenient(part)
        except ValueError:
            if not _LOOKS_LIKE_CALL.match(part):
                return True
        else:
            if not is_call_shaped(obj):
                return True
        i = end


def is_call_shaped(obj: Any) -> bool:
    """Whether a decoded object has the shape of a Llama 3 JSON tool call."""
    return (
        isinstance(obj, dict)
        and "name" in obj
        and ("parameters" in obj or "arguments" in obj)
        and set(obj) <= {"name", "parameters", "arguments", "type"}
    )


BOLT_CALL = CallSyntax("<|tool_call>", "<tool_call|>", _decode_bolt)
HERMES_CALL = CallSyntax("<tool_call>", "</tool_call>", _decode_hermes)
LLAMA3_CALL = CallSyntax("<|python_tag|>", None, _decode_llama3)
ALL_CALL_MARKERS = ("<|tool_call>", "<tool_call|>", "<tool_call>", "</tool_call>", "<|python_tag|>")
"""Every tagged call marker; the ``none`` format drops them all from speech."""

SPECS: dict[str, FormatSpec] = {
    "bolt": FormatSpec("bolt", (BOLT_CALL, HERMES_CALL, LLAMA3_CALL)),
    "hermes": FormatSpec("hermes", (HERMES_CALL, BOLT_CALL, LLAMA3_CALL)),
    "llama3": FormatSpec("llama3", (LLAMA3_CALL, BOLT_CALL, HERMES_CALL), bare_json=True),
    "none": FormatSpec("none"),
}
"""Format name → its spec."""


def detect_format(chat_template: str | None, architecture: str | None) -> str:
    """Pick the tool-call format of a model from its GGUF metadata.

    ``chat_template``: ``tokenizer.chat_template``; ``architecture``: ``general.architecture``
    (either may be None). Rules, in order: a ``gemma4*`` architecture or a template containing
    ``<|tool_call>`` → ``"bolt"``; a template containing ``<tool_call>`` → ``"hermes"``; a
    template mentioning ``<|python_tag|>`` or ``ipython`` on a ``llama*`` (or unknown)
    architecture → ``"llama3"``; otherwise ``"none"``.
    """
    arch = (architecture or "").lower()
    tpl = chat_template or ""
    if arch.startswith("gemma4") or "<|tool_call>" in tpl:
        return "bolt"
    if "<tool_call>" in tpl:
        return "hermes"
    if ("<|python_tag|>" in tpl or "ipython" in tpl) and (not arch or arch.startswith("llama")):
        return "llama3"
    return "none"
