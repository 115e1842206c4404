"""What the tool-call parsers emit: four small frozen dataclasses.

A reply from the chat model becomes an ordered list of these. Only :class:`TextDelta` is ever
spoken; :class:`ThinkingDelta` is reasoning for logs, :class:`ParsedToolCall` goes to the skill
dispatcher, and :class:`ToolCallError` is malformed markup, reported (to the log and back to the
model as a structured error) but never spoken and never raised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union


@dataclass(frozen=True)
class TextDelta:
    """Speakable text from outside any markup.

    ``text`` is never empty or whitespace-only and never contains a marker or special token of
    the parser's format. Whitespace at the edges of a text segment (at the start of the reply,
    next to a thinking block or a tool call, at the end) is dropped; whitespace inside a segment
    is kept, so concatenating consecutive deltas gives the segment's text.
    """

    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    """Reasoning text from a thinking block (``<|channel>thought ... <channel|>`` or ``<think>...</think>``).

    Never spoken. The Gemma 4 channel header (``thought`` and its newline) is not part of ``text``.
    """

    text: str


@dataclass(frozen=True)
class ParsedToolCall:
    """One well-formed tool call.

    ``name``: the function name as the model wrote it. ``arguments``: the decoded arguments,
    a dict of JSON-like values (str, int, float, bool, None, list, dict). ``raw``: the exact
    markup it came from, markers included (for logs and for putting the call back into history).
    ``id``: the call's id where the server gave one (an OpenAI-compatible ``chat`` api), else "".
    """

    name: str
    arguments: dict[str, Any]
    raw: str
    id: str = ""


@dataclass(frozen=True)
class ToolCallError:
    """Tool-call markup that could not be turned into a call.

    ``raw``: the exact markup (markers included; for an unclosed call, what arrived before the
    end). ``message``: a one-line reason naming what was wrong and where, suitable for sending
    back to the model.
    """

    raw: str
    message: str


ParseEvent = Union[TextDelta, ThinkingDelta, ParsedToolCall, ToolCallError]
"""Any of the four things a parser emits."""
