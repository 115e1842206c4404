"""Streaming parsers that split a chat model's reply into speech, thinking and tool calls.

The chat model streams raw text in which tool calls and reasoning are marked up in a
model-specific way. This package turns that stream into typed events (``outputs``):
``TextDelta`` (the only thing the TTS may speak), ``ThinkingDelta``, ``ParsedToolCall`` and
``ToolCallError``. Markup is never spoken and a malformed call never raises.

Design:

- ``stream.StreamParser`` is one marker-driven state machine (text / thinking / call / stop)
  shared by all formats. Markers may be split anywhere between chunks; only the minimal suffix
  that could still become a marker is held back, so speech starts as soon as a word is certain.
- ``formats`` holds each format's markers and body decoder, and ``detect_format``:
  ``bolt`` (Gemma 4 native, Bolt E4B's own; from the Gemma 4 chat template, see ``docs/facts.md``),
  ``hermes`` (Hermes/Qwen ``<tool_call>`` JSON), ``llama3`` (Llama 3.1 ``<|python_tag|>`` and
  whole-reply JSON) and ``none``. All of them strip thinking in both syntaxes
  (``<|channel>thought ... <channel|>`` and ``<think>...</think>``) and model special tokens.
- ``values`` is a small recursive-descent parser for Gemma 4's argument notation and for
  near-JSON (``loads_lenient``).

Typical use::

    parser = make_parser(detect_format(template, arch))
    for piece in llm_stream:
        for event in parser.feed(piece):
            route(event)
    for event in parser.close():
        route(event)
"""

from __future__ import annotations

from collections.abc import Iterable

from .formats import FORMATS, SPECS, THINK_CLOSE, THINK_OPEN, detect_format
from .outputs import ParsedToolCall, ParseEvent, TextDelta, ThinkingDelta, ToolCallError
from .stream import StreamParser
from .values import loads_lenient, parse_gemma_call, parse_gemma_value

__all__ = [
    "FORMATS",
    "ParseEvent",
    "ParsedToolCall",
    "StreamParser",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallError",
    "detect_format",
    "loads_lenient",
    "make_parser",
    "merge_deltas",
    "parse_all",
    "parse_gemma_call",
    "parse_gemma_value",
    "prompt_ends_in_thinking",
]


def make_parser(fmt: str, *, thinking_forced_open: bool | None = False) -> StreamParser:
    """Create a streaming parser for one reply in format ``fmt`` (one of ``FORMATS``).

    ``thinking_forced_open``: whether the prompt ended inside an open thinking block (see
    ``prompt_ends_in_thinking``); None holds the reply's start back until a thinking tag or the
    end decides (see ``StreamParser``). Raises ``ValueError`` for an unknown format name.
    """
    try:
        spec = SPECS[fmt]
    except KeyError:
        raise ValueError(f"unknown tool-call format {fmt!r}; expected one of {', '.join(FORMATS)}") from None
    return StreamParser(spec, thinking_forced_open=thinking_forced_open)


def merge_deltas(events: Iterable[ParseEvent]) -> list[ParseEvent]:
    """Join adjacent ``TextDelta``s, and adjacent ``ThinkingDelta``s, into one each; keep order."""
    out: list[ParseEvent] = []
    for ev in events:
        if out and type(ev) is type(out[-1]) and isinstance(ev, (TextDelta, ThinkingDelta)):
            out[-1] = type(ev)(out[-1].text + ev.text)  # type: ignore[union-attr]
        else:
            out.append(ev)
    return out


def parse_all(fmt: str, text: str, *, thinking_forced_open: bool | None = None) -> list[ParseEvent]:
    """Parse a complete reply at once: ``feed(text)`` + ``close()``, adjacent deltas merged.

    Unlike ``make_parser``, ``thinking_forced_open`` defaults to None: with the whole reply at
    hand there is no latency cost, so a lone closing thinking tag (``<channel|>`` or
    ``</think>`` with no opening) marks everything before it as thinking.
    """
    parser = make_parser(fmt, thinking_forced_open=thinking_forced_open)
    return merge_deltas(parser.feed(text) + parser.close())


def prompt_ends_in_thinking(prompt: str) -> bool:
    r"""Whether a rendered prompt ends inside an open thinking block.

    True when the last thinking tag in ``prompt`` is an opening one (``<|channel>`` or
    ``<think>``), as when a template pre-fills the start of the reasoning; pass the result as
    ``thinking_forced_open``. Gemma 4's thinking-off prompt ends with the closed empty block
    ``<|channel>thought\n<channel|>`` and gives False.
    """
    last_open = max(prompt.rfind(t) for t in THINK_OPEN)
    last_close = max(prompt.rfind(t) for t in THINK_CLOSE)
    return last_open > last_close
