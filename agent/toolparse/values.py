"""Value syntax of tool-call arguments: lenient JSON and Gemma 4's native argument notation.

One small recursive-descent parser reads both, with a switch for Gemma's string delimiter.

Gemma 4 (and so Bolt) writes a call as ``call:NAME{key:value,...}`` (see the ``format_argument``
macro of the Gemma 4 chat template in the GGUF, and ``docs/facts.md``):

- strings are wrapped in the ``<|"|>`` token, with no escaping: ``<|"|>say "hi", {ok}<|"|>``;
- keys are bare (``city:``) or, in declarations, ``<|"|>``-wrapped;
- numbers as Python prints them (``3``, ``-2.5``, ``1e-05``), ``true``/``false``, and ``None``
  (Jinja prints Python's None that way) or ``null``;
- objects ``{...}`` and arrays ``[...]``, nested freely.

The lenient JSON dialect accepts strict JSON plus the repairs that are unambiguous: single-quoted
strings, trailing commas, Python ``True``/``False``/``None``, and bare identifier keys. Anything
else (a bare word as a value, a missing bracket, text after the value) is a ``ValueError`` whose
message names the problem and its character offset. In Gemma mode the JSON forms are accepted as
well, since they cannot be confused with Gemma's own.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from typing import Any

GEMMA_QUOTE = '<|"|>'
"""Gemma 4's string delimiter token."""

_WS = re.compile(r"\s*")
_BARE = re.compile(r"""[^\s,:{}\[\]<"']+""")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_KEY = re.compile(r"[A-Za-z_$][\w$.\-]*")
_CALL_HEAD = re.compile(r"\s*call\s*:\s*([A-Za-z_][\w.\-]*)\s*")
_LITERALS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
}
_MAX_DEPTH = 64


class _Parser:
    """Recursive-descent reader over ``text``; ``gemma`` enables ``<|"|>`` strings."""

    def __init__(self, text: str, *, gemma: bool) -> None:
        self.text = text
        self.pos = 0
        self.gemma = gemma

    def fail(self, message: str, pos: int | None = None) -> ValueError:
        """Build a ValueError that names ``message``, the offset and the text around it."""
        pos = self.pos if pos is None else pos
        near = self.text[max(0, pos - 12) : pos + 20]
        where = "at end of input" if pos >= len(self.text) else f"at offset {pos}"
        return ValueError(f"{message} {where} (near {near!r})")

    def skip_ws(self) -> None:
        """Advance past whitespace."""
        self.pos = _WS.match(self.text, self.pos).end()

    def startswith(self, s: str) -> bool:
        """Whether the unread text starts with ``s``."""
        return self.text.startswith(s, self.pos)

    def document(self) -> Any:
        """Parse one value that must span the whole text (surrounding whitespace allowed)."""
        self.skip_ws()
        value = self.value(0)
        self.skip_ws()
        if self.pos != len(self.text):
            raise self.fail("unexpected text after the value")
        return value

    def value(self, depth: int) -> Any:
        """Parse the value at the current position."""
        if depth > _MAX_DEPTH:
            raise self.fail(f"nesting deeper than {_MAX_DEPTH}")
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.fail("expected a value")
        ch = self.text[self.pos]
        if ch == "{":
            return self.obj(depth)
        if ch == "[":
            return self.array(depth)
        if ch in "\"'" or (self.gemma and self.startswith(GEMMA_QUOTE)):
            return self.string()
        m = _BARE.match(self.text, self.pos)
        if not m:
            raise self.fail(f"unexpected {ch!r} where a value was expected")
        word = m.group()
        if word in _LITERALS:
            self.pos = m.end()
            return _LITERALS[word]
        if _NUMBER.fullmatch(word):
            self.pos = m.end()
            if any(c in word for c in ".eE"):
                return float(word)
            return int(word)
        hint = f"; strings must be wrapped in {GEMMA_QUOTE}" if self.gemma else "; strings must be quoted"
        raise self.fail(f"unknown value syntax {word!r}{hint}")

    def string(self) -> str:
        """Parse a ``<|"|>``, double- or single-quoted string."""
        start = self.pos
        if self.gemma and self.startswith(GEMMA_QUOTE):
            end = self.text.find(GEMMA_QUOTE, start + len(GEMMA_QUOTE))
            if end < 0:
                raise self.fail(f"unterminated {GEMMA_QUOTE} string", start)
            self.pos = end + len(GEMMA_QUOTE)
            return self.text[start + len(GEMMA_QUOTE) : end]
        quote = self.text[start]
        i = start + 1
        while i < len(self.text) and self.text[i] != quote:
            i += 2 if self.text[i] == "\\" else 1
        if i >= len(self.text):
            raise self.fail(f"unterminated {quote} string", start)
        body = self.text[start + 1 : i]
        if quote == "'":
            body = _single_to_double(body)
        try:
            value, _ = scanstring('"' + body + '"', 1, False)
        except json.JSONDecodeError as exc:
            raise self.fail(f"bad escape in string ({exc.msg})", start) from None
        self.pos = i + 1
        return value

    def key(self) -> str:
        """Parse an object key: quoted, ``<|"|>``-wrapped, or a bare identifier."""
        if self.text[self.pos] in "\"'" or (self.gemma and self.startswith(GEMMA_QUOTE)):
            return self.string()
        m = (_BARE if self.gemma else _KEY).match(self.text, self.pos)
        if not m:
            raise self.fail("expected a key")
        self.pos = m.end()
        return m.group()

    def obj(self, depth: int) -> dict[str, Any]:
        """Parse ``{key: value, ...}`` (trailing comma allowed)."""
        self.pos += 1
        out: dict[str, Any] = {}
        while True:
            self.skip_ws()
            if self.startswith("}"):
                self.pos += 1
                return out
            if self.pos >= len(self.text):
                raise self.fail("unclosed object: expected '}'")
            key = self.key()
            self.skip_ws()
            if not self.startswith(":"):
                raise self.fail(f"expected ':' after key {key!r}")
            self.pos += 1
            out[key] = self.value(depth + 1)
            self.skip_ws()
            if self.startswith(","):
                self.pos += 1
            elif self.pos >= len(self.text):
                raise self.fail("unclosed object: expected '}'")
            elif not self.startswith("}"):
                raise self.fail("expected ',' or '}' in object")

    def array(self, depth: int) -> list[Any]:
        """Parse ``[value, ...]`` (trailing comma allowed)."""
        self.pos += 1
        out: list[Any] = []
        while True:
            self.skip_ws()
            if self.startswith("]"):
                self.pos += 1
                return out
            if self.pos >= len(self.text):
                raise self.fail("unclosed array: expected ']'")
            out.append(self.value(depth + 1))
            self.skip_ws()
            if self.startswith(","):
                self.pos += 1
            elif self.pos >= len(self.text):
                raise self.fail("unclosed array: expected ']'")
            elif not self.startswith("]"):
                raise self.fail("expected ',' or ']' in array")


def _single_to_double(body: str) -> str:
    """Rewrite the inside of a single-quoted string as the inside of a JSON double-quoted one."""
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append("'" if nxt == "'" else c + nxt)
            i += 2
            continue
        out.append('\\"' if c == '"' else c)
        i += 1
    return "".join(out)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a valid argument value")


def loads_lenient(text: str) -> Any:
    """Decode JSON, repairing near-JSON where the repair is unambiguous.

    Accepts strict JSON, plus single-quoted strings, trailing commas, Python ``True``/``False``/
    ``None`` and bare identifier keys (``{city: 'Paris',}`` → ``{"city": "Paris"}``).
    ``NaN``/``Infinity`` are refused. Returns the decoded value (dict, list, str, number, bool,
    None). Raises ``ValueError`` with a message naming the problem and its offset, e.g.
    ``unknown value syntax 'Paris'; strings must be quoted at offset 7 (near ...)``.
    """
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        pass
    return _Parser(text, gemma=False).document()


def parse_gemma_value(text: str) -> Any:
    """Decode one value written in Gemma 4's argument notation (e.g. ``{a:<|"|>x<|"|>,b:[1,2]}``).

    Raises ``ValueError`` naming the problem and its offset.
    """
    return _Parser(text, gemma=True).document()


def parse_gemma_call(body: str) -> tuple[str, dict[str, Any]]:
    """Decode the inside of one Gemma 4 tool call: ``call:NAME{key:value,...}``.

    ``body`` is the text between ``<|tool_call>`` and ``<tool_call|>``. Returns ``(name,
    arguments)``. Raises ``ValueError`` when the ``call:NAME`` head is missing, the arguments
    are not one ``{...}`` object, or any value is malformed.
    """
    m = _CALL_HEAD.match(body)
    if not m:
        raise ValueError(f"expected 'call:NAME{{...}}', got {body[:40]!r}")
    p = _Parser(body, gemma=True)
    p.pos = m.end()
    if not p.startswith("{"):
        raise p.fail(f"expected '{{' after function name {m.group(1)!r}")
    args = p.obj(0)
    p.skip_ws()
    if p.pos != len(body):
        raise p.fail("unexpected text after the arguments")
    return m.group(1), args
