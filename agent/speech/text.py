"""Turn a model reply into text a speech synthesizer can say, and cut it into sentences.

The LLM writes for a screen: markdown, emoji, links, code, tool-call and thinking markup,
digits. A voice must say none of the markup and must read numbers the way a person would.
:func:`clean_for_speech` is one pure function, applied in a fixed order (each step works on
the output of the one before, so the order is part of the contract):

1. Thinking and tool markup: ``<think>…</think>``, ``<|channel>…<channel|>``,
   ``<|tool_call>…<tool_call|>``, ``<tool_call>…</tool_call>``, ``<|tool_response>…``,
   ``<|tool>…<tool|>``. A block is dropped with its content; an opener with no closer drops
   the rest of the text (the model was cut off inside it); a closer with no opener drops
   everything before it (the opener was in the prompt). Then every other special token
   (``<|turn>model``, ``<turn|>``, ``<eos>``, ``<|im_end|>``, ``<|"|>`` …) and HTML tags.
2. Code: fenced blocks (an unclosed fence drops the rest) and inline code are removed.
3. Links and images: ``[text](url)`` keeps its text; images are dropped. Bare URLs become
   the words "a link" and e-mail addresses "an email address" (always those two phrases).
4. Markdown by line: headers, bullets, numbered-list markers, quotes and rules lose their
   markers; table rows become "cell, cell, cell."; a header, list item, table row or
   paragraph that ends without punctuation gets a full stop so the voice pauses there.
   Then bold / italic / strike-through markers.
5. Emoji, pictographs, dingbats, arrows and other symbols (``°`` is read as "degrees").
6. Numbers become words with num2words: currency (``$4.50`` → "four dollars and fifty
   cents"), percentages, clock times (``3:30 pm`` → "three thirty p m", ``14:05`` →
   "fourteen oh five"), ordinals, days after a month name, years where the context says
   year (``in 2024``, ``March 5, 2024``, ``1990s``), signs and decimals
   (``-3.5`` → "minus three point five"), units after a number (``5 km``), ISO dates, phone
   numbers digit by digit (:mod:`agent.speech.numbers`). Anything not recognised is left for
   the synthesizer's own reading (espeak reads digits too).
7. Leftover markup characters and whitespace are tidied. No letter or digit left → ``""``.

Cutting the result into sentences is :func:`agent.speech.sentences.split_sentences`. Everything here
is pure Python and thread-safe.
"""

from __future__ import annotations

import re
import unicodedata

from agent.speech.numbers import speak_numbers

__all__ = ["clean_for_speech"]

# --- 1. Markup that is never spoken ---------------------------------------------------------------

# (opener, closer) of blocks dropped with their content. Thinking blocks first.
_BLOCKS: list[tuple[re.Pattern[str], re.Pattern[str]]] = [
    (re.compile(o, re.I), re.compile(c, re.I))
    for o, c in [
        (r"<think>", r"</think>"),
        (r"<thinking>", r"</thinking>"),
        (r"<\|channel>", r"<channel\|>"),
        (r"<\|tool_call>", r"<tool_call\|>"),
        (r"<tool_call>", r"</tool_call>"),
        (r"<\|tool_response>", r"<tool_response\|>"),
        (r"<tool_response>", r"</tool_response>"),
        (r"<\|tool>", r"<tool\|>"),
    ]
]
_ROLE_TOKEN = re.compile(
    r"(?:<\|turn>|<\|im_start\|>|<start_of_turn>|<\|start_header_id\|>)\s*"
    r"(?:model|user|system|assistant|tool|developer)?(?:<\|end_header_id\|>)?",
    re.I,
)
_SPECIAL_TOKEN = re.compile(
    r"<\|[^<>\s]{0,40}?\|?>|<[^<>\s|/]{1,40}\|>|</?s>"
    r"|<(?:eos|bos|pad|unk|mask|start_of_turn|end_of_turn|end_of_text|endoftext)>",
    re.I,
)
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")


def _strip_block(text: str, opener: re.Pattern[str], closer: re.Pattern[str]) -> str:
    first_close, first_open = closer.search(text), opener.search(text)
    if first_close and (first_open is None or first_close.start() < first_open.start()):
        text = text[first_close.end() :]  # the opener was in the prompt: all before is inside
    parts, pos = [], 0
    while (m := opener.search(text, pos)) is not None:
        parts.append(text[pos : m.start()])
        end = closer.search(text, m.end())
        if end is None:  # cut off inside the block: nothing after it is speakable
            pos = len(text)
            break
        pos = end.end()
    parts.append(text[pos:])
    return closer.sub(" ", " ".join(parts))


def _strip_markup(text: str) -> str:
    for opener, closer in _BLOCKS:
        text = _strip_block(text, opener, closer)
    text = _ROLE_TOKEN.sub(" ", text)
    return _SPECIAL_TOKEN.sub(" ", text)


# --- 2-4. Code, links, markdown -------------------------------------------------------------------

_FENCE = re.compile(r"(```|~~~).*?(?:\1|\Z)", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_IMAGE = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)")
_LINK = re.compile(r"\[([^\]\n]+)\]\([^)\s]*(?:\s+\"[^\"\n]*\")?\)")
_REF_LINK = re.compile(r"\[([^\]\n]+)\]\[[^\]\n]*\]")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]\n]+\]:\s*\S+.*$", re.M)
_URL = re.compile(r"(?:\b(?:https?|ftp)://|\bwww\.)[^\s<>\"'\])]*[^\s<>\"'\]).,!?;:]", re.I)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_DOMAIN = re.compile(
    r"\b(?:[a-z0-9-]+\.)+(?:com|org|net|io|ai|dev|edu|gov|app|info|co\.uk)"
    r"(?:/[^\s]*[^\s.,!?;:)])?(?![\w.]*\w)",
    re.I,
)

_CODE_AND_LINKS = [
    (_FENCE, "\n"),
    (_INLINE_CODE, " "),
    (_HTML_TAG, " "),
    (_IMAGE, " "),
    (_LINK, r"\1"),
    (_REF_LINK, r"\1"),
    (_URL, "a link"),
    (_EMAIL, "an email address"),
    (_DOMAIN, "a link"),
]

_HEADER = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^\s{0,3}(?:>\s?)+")
_BULLET = re.compile(r"^\s*(?:[-*+•‣◦▪●]|\d{1,2}[.)])\s+(?:\[[ xX]\]\s+)?")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_ENDS_SENTENCE = re.compile(r"[.!?:;,]['\")\]]*$")

_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_ITALIC_UNDER = re.compile(r"(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)")
_STRIKE = re.compile(r"~~(.+?)~~")


def _full_stop(line: str) -> str:
    return line if not line or _ENDS_SENTENCE.search(line) else line + "."


def _markdown_lines(text: str) -> str:
    paragraphs: list[list[str]] = [[]]
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or _RULE.match(raw) or _TABLE_SEP.match(line) or _REF_DEF.match(raw):
            paragraphs.append([])  # blank lines, rules and table borders end a paragraph
            continue
        line = _QUOTE.sub("", line)
        if (h := _HEADER.match(line)) is not None:
            line = _full_stop(h.group(1))
        elif line.startswith("|") or line.count("|") >= 2:
            cells = [c.strip() for c in line.strip("|").split("|")]
            line = _full_stop(", ".join(c for c in cells if c))
        elif (b := _BULLET.match(line)) is not None:
            line = _full_stop(line[b.end() :])
        paragraphs[-1].append(line)
    return " ".join(_full_stop(_join_lines(p)) for p in paragraphs if p)


def _join_lines(lines: list[str]) -> str:
    """Join a paragraph's lines; a line followed by one starting with a capital ends a sentence."""
    ends = [nxt[:1].isupper() for nxt in lines[1:]] + [False]
    return " ".join(_full_stop(line) if end else line for line, end in zip(lines, ends, strict=True))


def _emphasis(text: str) -> str:
    for _ in range(2):  # nested markers (***x***) need a second pass
        text = _BOLD.sub(r"\2", text)
        text = _STRIKE.sub(r"\1", text)
        text = _ITALIC_STAR.sub(r"\1", text)
        text = _ITALIC_UNDER.sub(r"\1", text)
    return text


# --- 5. Emoji and symbols -------------------------------------------------------------------------

_DEGREES = re.compile(r"\s*°(?:\s*([CF])(?![A-Za-z]))?")
_DROP_RANGES = [
    (0x2190, 0x21FF),
    (0x2300, 0x23FF),
    (0x25A0, 0x27BF),
    (0x27F0, 0x2BFF),
    (0x1F000, 0x1FAFF),
    (0xE0000, 0xE007F),
]
_DROP_SINGLE = {0x200D, 0x20E3, 0xFE0E, 0xFE0F}


def _drop_symbol(ch: str) -> bool:
    cp = ord(ch)
    return cp >= 0x80 and (
        cp in _DROP_SINGLE
        or any(lo <= cp <= hi for lo, hi in _DROP_RANGES)
        or unicodedata.category(ch) in ("So", "Sk", "Co", "Cn", "Cs", "Cf")
    )


def _strip_symbols(text: str) -> str:
    text = _DEGREES.sub(
        lambda m: " degrees" + {"C": " Celsius", "F": " Fahrenheit"}.get(m.group(1) or "", ""), text
    )
    text = text.replace("\u00ad", "")  # soft hyphen: inside a word, not a break
    return "".join(" " if _drop_symbol(ch) else ch for ch in text)


# --- 7. Tidy --------------------------------------------------------------------------------------

_STRAY = re.compile(r"[*_#`|~^<>\[\]{}\\]+")
_EMPTY_BRACKETS = re.compile(r"\(\s*[,.;:]*\s*\)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.!?;:])")
_PUNCT_RUN = re.compile(r"([.!?])[.!?…]+|[,;:]+\s*(?=[.!?,;:])")
_LEADING_PUNCT = re.compile(r"^[\s,.;:!?\-–—]+")


def _tidy(text: str) -> str:
    text = text.replace("&", " and ").replace("…", ".")
    text = _STRAY.sub(" ", text)
    text = _EMPTY_BRACKETS.sub(" ", text)
    text = re.sub(r"\s+", " ", text)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    text = _PUNCT_RUN.sub(lambda m: m[1] or "", text)
    text = _LEADING_PUNCT.sub("", text).strip()
    return text if any(ch.isalnum() for ch in text) else ""


def clean_for_speech(text: str) -> str:
    """Return what a voice should say for ``text``: no markup, numbers as words.

    See the module docstring for the rules and their order. Deterministic and pure.

    Args:
        text: Raw model output (may hold markdown, emoji, tool/thinking markup, digits).

    Returns:
        One line of plain text, single-spaced, or ``""`` when nothing speakable is left
        (no letter or digit remains).

    """
    if not text:
        return ""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _strip_markup(text)
    for pattern, replacement in _CODE_AND_LINKS:
        text = pattern.sub(replacement, text)
    text = _markdown_lines(text)
    text = _emphasis(text)
    text = _strip_symbols(text)
    text = speak_numbers(text)
    return _tidy(text)
