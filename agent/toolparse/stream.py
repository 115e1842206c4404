"""The streaming state machine shared by every format.

The parser is in one of four modes: TEXT (speakable), THINK (inside a thinking block), CALL
(collecting one tool call's markup; one mode per call syntax, since each has its own closing
marker) and STOP (after an end-of-generation token: input ignored).
Each mode watches a fixed set of markers, all of which start with ``<`` and none of which
contains another. A chunk is appended to a buffer; the buffer is searched for the earliest
complete marker of the current mode, the text before it goes to the mode's sink and the marker's
action switches modes. When no complete marker remains, only the longest buffer suffix that is
still a proper prefix of some marker (``<|tool_``, ``<``, ``</thi``) is held back; everything
before it is emitted at once, so speech can start after the first word.

Two extra hold-backs exist, both bounded by content rather than time:

- whitespace at the end of a text (or thinking) segment waits for the next non-space character,
  so no delta is ever whitespace-only and segment edges are trimmed;
- Llama 3 only: a reply whose text starts with ``{`` is buffered until it is clearly not a
  sequence of JSON tool calls (prose after a closed object, an object without the call shape) or
  the reply ends (see ``formats.decode_bare_llama3``).

The result does not depend on how the input is split into chunks: feeding a reply in one piece,
in two pieces at any index, or one character at a time gives the same events once adjacent
deltas are merged (``merge_deltas``).

Not thread-safe: one parser per reply, fed from one thread or task.
"""

from __future__ import annotations

import logging
import re

from .formats import (
    ALL_CALL_MARKERS,
    DROP_TOKENS,
    STOP_TOKENS,
    THINK_CLOSE,
    THINK_OPEN,
    CallSyntax,
    FormatSpec,
    bare_json_ruled_out,
    decode_bare_llama3,
)
from .outputs import ParseEvent, TextDelta, ThinkingDelta, ToolCallError

log = logging.getLogger(__name__)

TEXT, THINK, CALL, STOP = "text", "think", "call", "stop"
_HEADER = "thought"  # Gemma 4's channel name after <|channel>, followed by a newline.


def _text_and_think_actions(spec: FormatSpec) -> tuple[dict[str, str], dict[str, str]]:
    """The text and thinking modes' markers: dropped tokens, stray call ends, thinking's own tags."""
    text: dict[str, str] = {}
    think: dict[str, str] = {}
    for tok in DROP_TOKENS + THINK_CLOSE:
        text[tok] = "drop"
    for tok in DROP_TOKENS + THINK_OPEN:
        think[tok] = "drop"
    if not spec.calls:
        for tok in ALL_CALL_MARKERS:
            text[tok] = think[tok] = "drop"
    for syn in spec.calls:
        if syn.close:
            text[syn.close], think[syn.close] = "stray", "drop"
    for tok in THINK_OPEN:
        text[tok] = "think_open"
    for tok in THINK_CLOSE:
        think[tok] = "think_close"
    return text, think


def _call_actions(spec: FormatSpec, text: dict[str, str], think: dict[str, str]) -> dict[str, dict[str, str]]:
    """The tables of the call modes (``call0``…); a call's opening marker opens it from text and thinking."""
    tables: dict[str, dict[str, str]] = {}
    for i, syn in enumerate(spec.calls):
        call = tables[f"{CALL}{i}"] = {}
        for other in spec.calls:
            text[other.open] = think[other.open] = "call_open"
            call[other.open] = "call_reopen"
        if syn.close:
            call[syn.close] = "call_close"
    return tables


class StreamParser:
    r"""Incremental parser of one model reply: ``feed(chunk)`` then ``close()``.

    Build it with ``make_parser(fmt)``. ``feed`` takes any piece of the reply's text (a token's
    text, a few characters, everything) and returns the events that are certain so far;
    ``close`` flushes what was held back and returns the last events. Malformed markup becomes a
    ``ToolCallError``; nothing here raises on model output.

    ``thinking_forced_open``: True when the prompt ended inside an open thinking block (the
    template pre-filled ``<|channel>thought\n`` or ``<think>``), so the reply starts as thinking;
    False (the low-latency default) when it starts as text, a stray closing tag then being
    dropped; None when unknown: the start of the reply is held back until the first thinking tag
    decides (an opening tag → it started as text; a lone closing tag → everything before it was
    thinking) or the reply ends.
    """

    def __init__(self, spec: FormatSpec, *, thinking_forced_open: bool | None = False) -> None:
        self.spec = spec
        self._undecided = thinking_forced_open is None
        self._undecided_raw = ""
        self._mode = THINK if thinking_forced_open else TEXT
        self._buf = ""
        self._events: list[ParseEvent] = []
        self._closed = False
        self._text_start, self._text_ws, self._spoke = True, "", False
        self._think_start, self._think_ws, self._need_header = True, "", False
        self._call_raw: list[str] = []
        self._json_pending: str | None = None
        self._actions = self._build_actions(spec)
        self._regex = {m: _alternation(a) for m, a in self._actions.items()}
        self._prefixes = {m: {k[:i] for k in a for i in range(1, len(k))} for m, a in self._actions.items()}
        self._longest = max(len(k) for a in self._actions.values() for k in a)
        self._decider = _alternation(THINK_OPEN + THINK_CLOSE)
        self._decider_from = 0  # the undecided text before this index holds no thinking tag
        self._longest_tag = max(len(t) for t in THINK_OPEN + THINK_CLOSE)
        self._call_mode = {syn.open: f"{CALL}{i}" for i, syn in enumerate(spec.calls)}

    @staticmethod
    def _build_actions(spec: FormatSpec) -> dict[str, dict[str, str]]:
        """Marker → action name, per mode (``call0``, ``call1``…: inside a call of ``spec.calls[i]``).

        Raises:
            ValueError: a marker does not start with ``<`` or occurs inside another marker.
        """
        text, think = _text_and_think_actions(spec)
        tables = {TEXT: text, THINK: think, **_call_actions(spec, text, think)}
        for table in tables.values():
            for tok in STOP_TOKENS:
                table[tok] = "stop"
        markers = {k for table in tables.values() for k in table}
        for a in markers:
            if not a.startswith("<") or any(a != b and a in b for b in markers):
                raise ValueError(f"marker {a!r} must start with '<' and not occur inside another marker")
        return tables

    # ------------------------------------------------------------------ public API

    def feed(self, chunk: str) -> list[ParseEvent]:
        """Add the next piece of the reply; return the events it completes (possibly none).

        Raises ``RuntimeError`` if called after ``close()``.
        """
        if self._closed:
            raise RuntimeError("feed() after close()")
        if self._undecided:
            self._undecided_raw += chunk
            m = self._decider.search(self._undecided_raw, self._decider_from)
            if m is None:
                self._decider_from = max(0, len(self._undecided_raw) - self._longest_tag + 1)
                return []
            self._decide(forced_open=m.group() in THINK_CLOSE)
        else:
            self._buf += chunk
        self._process()
        return self._take()

    def close(self) -> list[ParseEvent]:
        """End of the reply: flush held-back text and finish any open block.

        An unclosed tool call becomes a ``ToolCallError`` (Llama's ``<|python_tag|>`` call, which
        has no closing marker, is decoded instead); an unclosed thinking block stays thinking.
        Calling ``close()`` again returns ``[]``.
        """
        if self._closed:
            return []
        if self._undecided:
            self._decide(forced_open=False)
            self._process()
        if self._mode == THINK and self._need_header and _HEADER.startswith(self._buf):
            self._buf = ""
        self._sink(self._buf)
        self._buf = ""
        self._finish_mode()
        self._mode = STOP
        self._closed = True
        return self._take()

    # ------------------------------------------------------------------ machine

    def _decide(self, *, forced_open: bool) -> None:
        self._undecided = False
        self._mode = THINK if forced_open else TEXT
        self._buf, self._undecided_raw = self._undecided_raw, ""

    def _take(self) -> list[ParseEvent]:
        out, self._events = self._events, []
        return out

    def _process(self) -> None:
        while self._buf and self._mode != STOP:
            if self._mode == THINK and self._need_header and not self._strip_header():
                return
            m = self._regex[self._mode].search(self._buf)
            if m is None:
                cut = self._holdback(self._buf)
                self._sink(self._buf[:cut])
                self._buf = self._buf[cut:]
                return
            self._sink(self._buf[: m.start()])
            self._buf = self._buf[m.end() :]
            self._act(self._actions[self._mode][m.group()], m.group())

    def _holdback(self, buf: str) -> int:
        """Index where the longest suffix that may still grow into a marker starts."""
        prefixes = self._prefixes[self._mode]
        i = buf.find("<", max(0, len(buf) - self._longest + 1))
        while i != -1:
            if buf[i:] in prefixes:
                return i
            i = buf.find("<", i + 1)
        return len(buf)

    def _strip_header(self) -> bool:
        """Drop Gemma's ``thought`` channel name; False while it cannot be decided yet."""
        b = self._buf
        if b.startswith(_HEADER) and len(b) > len(_HEADER):
            if b[len(_HEADER)].isspace() or b[len(_HEADER)] == "<":
                self._buf = b[len(_HEADER) :]
        elif _HEADER.startswith(b):
            return False
        self._need_header = False
        return True

    def _act(self, action: str, marker: str) -> None:
        if action == "drop":
            return
        if action == "stray":
            self._events.append(ToolCallError(marker, f"{marker} without its opening marker; ignored"))
        elif action == "think_open":
            self._finish_mode()
            self._mode, self._need_header = THINK, marker == "<|channel>"
        elif action == "think_close":
            self._finish_mode()
            self._mode = TEXT
        elif action in ("call_open", "call_reopen"):
            self._finish_mode(reopened_by=marker)
            self._mode, self._call_raw = self._call_mode[marker], [marker]
        elif action == "call_close":
            syntax = self._syntax()
            body = "".join(self._call_raw[1:])
            raw = "".join(self._call_raw) + marker
            self._events.extend(syntax.decode(body, raw))
            self._mode, self._call_raw = TEXT, []
        elif action == "stop":
            self._finish_mode()
            self._mode = STOP

    def _syntax(self) -> CallSyntax:
        return self.spec.calls[int(self._mode[len(CALL) :])]

    def _finish_mode(self, reopened_by: str | None = None) -> None:
        """Close the current segment at a marker, a stop token or the end of the reply."""
        if self._mode == TEXT:
            self._finish_text()
        elif self._mode == THINK:
            self._think_start, self._think_ws, self._need_header = True, "", False
        elif self._mode.startswith(CALL):
            syntax = self._syntax()
            raw = "".join(self._call_raw)
            if syntax.close is None:
                self._events.extend(syntax.decode(raw[len(syntax.open) :], raw))
            elif reopened_by:
                self._events.append(
                    ToolCallError(raw, f"unclosed tool call: {reopened_by} began before {syntax.close}")
                )
            else:
                self._events.append(
                    ToolCallError(raw, f"unclosed tool call: the reply ended before {syntax.close}")
                )
            self._call_raw = []

    # ------------------------------------------------------------------ sinks

    def _sink(self, s: str) -> None:
        if not s:
            return
        if self._mode == TEXT:
            self._text_out(s)
        elif self._mode == THINK:
            self._think_out(s)
        elif self._mode != STOP:
            self._call_raw.append(s)

    def _text_out(self, s: str) -> None:
        if self._text_start:
            s = s.lstrip()
            if not s:
                return
            self._text_start = False
            if self.spec.bare_json and not self._spoke and s.startswith("{"):
                self._json_pending = ""
        if self._json_pending is not None:
            self._json_pending += s
            if bare_json_ruled_out(self._json_pending):
                pending, self._json_pending = self._json_pending, None
                self._say(pending)
            return
        self._say(s)

    def _say(self, s: str) -> None:
        s = self._text_ws + s
        body = s.rstrip()
        self._text_ws = s[len(body) :]
        if body:
            self._events.append(TextDelta(body))
            self._spoke = True

    def _finish_text(self) -> None:
        if self._json_pending is not None:
            pending, self._json_pending = self._json_pending, None
            calls = decode_bare_llama3(pending)
            if calls is None:
                self._say(pending)
            else:
                log.debug("whole-reply JSON decoded as %d tool call(s)", len(calls))
                self._events.extend(calls)
        self._text_start, self._text_ws = True, ""

    def _think_out(self, s: str) -> None:
        if self._think_start:
            s = s.lstrip()
            if not s:
                return
            self._think_start = False
        s = self._think_ws + s
        body = s.rstrip()
        self._think_ws = s[len(body) :]
        if body:
            self._events.append(ThinkingDelta(body))


def _alternation(markers: dict[str, str] | tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(m) for m in sorted(markers, key=len, reverse=True)))
