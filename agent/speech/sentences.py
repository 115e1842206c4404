"""The one sentence splitter: finished text, the model's text stream, and the reply-sentence cap.

Three consumers need to agree on where a sentence ends: the synthesizer (one piper call per
sentence), the streaming chunker (speak the first sentence while the model writes the second)
and conversational mode's cap (stop the model after ``max_reply_sentences``). All of them use
:func:`_boundaries` here, so ``3.5``, ``8:00``, ``$49.95``, ``Dr.``, ``e.g.``, ``1. 2.`` list
markers and URLs end a sentence for none of them.

**Why pysbd.** pysbd (a port of the Golden Rules sentence segmenter, well kept and pure
Python) knows English abbreviations, decimals, times, initials and numbers; a regex does not.
Its answer is taken as candidate boundaries (start offsets of sentences in the original text),
then small, documented rules fix what it gets wrong for a voice, or decides from text far
ahead (which a stream cannot wait for):

* pysbd sees quotes, brackets and ``--`` masked (it pairs them over any distance and keeps
  everything between whole) and ``1.``-``99.`` / ``a.``-``z.`` words as ``Q:`` (it makes them
  list markers when the next number or letter follows, anywhere later); such a word ends a
  sentence when a capital follows (``Count to 10. Then stop.``);
* a boundary must follow white space: pysbd splits ``https://a.com/x?y=1`` at the ``?`` and
  ``The end." Next`` before the quote (a closing quote or bracket is moved to the sentence
  before);
* it must follow ``. ! ? …`` (closing quotes or brackets allowed) or a line break, and never a
  colon: inline list items (``1. first 2. second``) and ``Steps:`` stay whole;
* an ellipsis (``...`` or ``…``) is a pause, not an end (pysbd disagrees with itself here);
* a list marker (``2.``, ``Steps: 1.``) does not end a sentence;
* ``!`` / ``?`` runs followed by a capital do (pysbd misses ``Wow!!! Great.``), followed by a
  lowercase word they do not (``"Why?" he asked.``);
* a piece with no letter or digit (``! ?``) joins the sentence before it.

**Streaming.** :class:`SentenceStream` re-segments the text it holds each time a delta
brings white space. pysbd decides a boundary from the text up to the end of the word after
it (``p.m. Then``, ``3. 5``, ``1. Open it. 2.``), so a boundary is *final* once the word after
it is complete (white space follows it) and letters or digits follow it; the sentences before
the last final boundary are released, the rest waits. Joined, the pieces are the input up to
white space, and equal :func:`split_sentences` of the whole text. :class:`SentenceCap` uses
the same test to count sentences as the model writes them; it forwards text as soon as it is
certainly within the cap and holds back at most one word: one that may begin the next sentence
(after ``. ! ?`` or a line break) while the cap has no room for it.

**Clauses.** A sentence longer than the limit is cut at the last clause boundary (after
``, ; : — –`` or a spaced hyphen) that leaves a piece within the limit, else at the last space,
else inside the word. The decision needs only the first ``limit + 1`` characters, so a stream
can cut a long first sentence as soon as it holds that much of it, exactly where
:func:`split_sentences` would.

Pure Python. The functions are thread-safe (a pysbd ``Segmenter`` keeps per-call state on
itself, so each call makes its own; it costs microseconds). A :class:`SentenceStream` or
:class:`SentenceCap` object belongs to one feeding thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agent.control import StopSignal

__all__ = ["split_sentences", "limit_sentences", "SentenceStream", "SentenceCap"]

_CLOSERS = "\"'”’)\\]»"
_LEADING_CLOSERS = re.compile(rf"[{_CLOSERS}]+\s+(?=\S)")
_TERMINAL_END = re.compile(rf"[.!?…][{_CLOSERS}]*$")
_ELLIPSIS_END = re.compile(rf"(?:\.\.\.|…)[{_CLOSERS}]*$")
_LIST_MARKER_END = re.compile(r"(?:^|:\s+)\(?(?:\d{1,2}|[a-z])[.)]$")
_ASKED_END = re.compile(rf"[!?][{_CLOSERS}]*$")
_BANG_BREAK = re.compile(rf"[!?]+[{_CLOSERS}]*\s+(?=[A-Z])")
_FALLBACK_BREAK = re.compile(rf"[.!?…]+[{_CLOSERS}]*\s+(?=\S)")
_CLAUSE_END = re.compile(r"[,;:—–](?=\s)|(?<=\s)-(?=\s)|[—–](?=\w)")
_WORD_END = re.compile(r"\S(?=\s)")
_WORD_START = re.compile(r"(?<!\S)\S")
_LAST_WORD = re.compile(r"\S+$")
# Quotes, brackets and "--": pysbd pairs them over any distance and keeps sentences inside a
# pair whole, so a boundary would depend on text far ahead; it sees them masked.
# A word "1." to "99." or "a." to "z.": pysbd makes it a list marker when the next number or
# letter follows, anywhere later; it sees "Q:" instead, and _MARKER_BREAK decides from the
# next word alone (a capital: the sentence ends, as in "Count to 10. Then stop.").
_MARKER = r"(?<![^\s\-⁃])(?:\d{1,2}|[a-z])\."
_MARKER_DOT = re.compile(_MARKER + r"(?=\s|$)")
_MARKER_BREAK = re.compile(_MARKER + r"\s+(?=[A-Z])")
_PAIRED = re.compile(r"[\"“”«»()\[\]‘’]|--|(?<![^\W_])'|'(?![^\W_])")


def _has_word(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _pysbd_starts(text: str) -> list[int] | None:
    """Start offsets of pysbd's sentences after the first, or None when pysbd failed or lost words.

    pysbd drops some punctuation runs (``"see.?!"`` → ``["see."]``); only offsets are used, so
    such a run simply stays with the sentence before it.
    """
    import pysbd

    text = _PAIRED.sub(lambda m: "|" * len(m.group()), text)  # same offsets, nothing to pair
    text = _MARKER_DOT.sub(lambda m: "Q" * (len(m.group()) - 1) + ":", text)
    try:
        segments = pysbd.Segmenter(language="en", clean=False).segment(text)
    except Exception:  # pysbd has crashed on odd inputs; the caller falls back
        return None
    starts, pos = [], 0
    for seg in (s.strip() for s in segments):
        if not seg:
            continue
        at = text.find(seg, pos)
        if at < 0 or _has_word(text[pos:at]):  # changed, reordered or dropped words
            return None
        starts.append(at)
        pos = at + len(seg)
    return None if _has_word(text[pos:]) else starts[1:]


def _boundaries(text: str, final: bool = True) -> list[int]:
    """Offsets where sentences after the first begin, pysbd's answer corrected (module docstring).

    With ``final`` False the text may still grow: a trailing piece without a letter or digit
    keeps its boundary (more text may follow it) instead of joining the sentence before.
    """
    starts = _pysbd_starts(text)
    if starts is None:
        starts = [m.end() for m in _FALLBACK_BREAK.finditer(text)]
    starts += [m.end() for pattern in (_BANG_BREAK, _MARKER_BREAK) for m in pattern.finditer(text)]
    candidates = set()
    for b in starts:
        if 0 < b < len(text) and not text[b - 1].isspace():
            m = _LEADING_CLOSERS.match(text, b)  # `end." Next`: the quote belongs before
            if m is None:
                continue  # inside a word (URL, "a.b?c")
            b = m.end()
        candidates.add(b)
    kept: list[int] = []
    prev = 0
    for b in sorted(candidates):
        if b <= prev or b >= len(text):
            continue
        head = text[:b].rstrip()
        newline = "\n" in text[len(head) : b]
        if head.endswith(":") or not (newline or _TERMINAL_END.search(head)):
            continue
        if not newline and (_ELLIPSIS_END.search(head) or (_ASKED_END.search(head) and text[b].islower())):
            continue
        if _LIST_MARKER_END.search(text[prev:b].strip()):
            continue
        if not _has_word(text[prev:b]):  # a piece of stray punctuation
            if kept:
                kept[-1] = b  # joins the sentence before it
                prev = b
            continue  # (at the start it joins the sentence after it)
        kept.append(b)
        prev = b
    if final and kept and not _has_word(text[kept[-1] :]):
        kept.pop()
    return kept


def _cut(text: str, max_chars: int) -> int:
    """Where to cut ``text`` (no leading space, longer than ``max_chars``): the first piece's end.

    Looks only at ``text[: max_chars + 1]``: the last clause end leaving a piece of at most
    ``max_chars`` characters with a letter or digit, else the last word end, else ``max_chars``.
    """
    window = text[: max_chars + 1]
    for pattern in (_CLAUSE_END, _WORD_END):
        ends = [m.end() for m in pattern.finditer(window) if m.end() <= max_chars]
        ends = [end for end in ends if _has_word(text[:end])]
        if ends:
            return ends[-1]
    return max_chars


def _split_long(sentence: str, max_chars: int) -> list[str]:
    pieces = []
    rest = sentence.strip()
    while max_chars and len(rest) > max_chars:
        at = _cut(rest, max_chars)
        pieces.append(rest[:at].strip())
        rest = rest[at:].lstrip()
    return [*pieces, rest] if rest else pieces


def _spans(text: str, bounds: list[int]) -> list[str]:
    return [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=True)]


def split_sentences(text: str, max_chars: int = 0) -> list[str]:
    """Cut finished text into sentences, none longer than ``max_chars``.

    Sentences are found as the module docstring describes (pysbd plus a few rules). A sentence
    longer than ``max_chars`` is cut at the last clause boundary (after ``,`` ``;`` ``:``, a
    dash or a spaced hyphen) that keeps the piece within the limit, failing that at the last
    space, and a single word longer than the limit is cut inside it.

    Args:
        text: Plain or raw model text.
        max_chars: Longest piece in characters; 0 means no limit.

    Returns:
        Stripped, non-empty pieces in order; ``[]`` for empty or blank text. Their non-space
        characters, joined, are those of ``text``. A run of punctuation between sentences
        belongs to the sentence before it.

    Raises:
        ValueError: ``max_chars`` < 0.

    """
    if max_chars < 0:
        raise ValueError(f"max_chars must be >= 0 (0 = no limit), got {max_chars}")
    text = text.strip()
    if not text:
        return []
    return [piece for s in _spans(text, _boundaries(text)) for piece in _split_long(s, max_chars)]


def limit_sentences(text: str, n: int) -> str:
    """Keep at most the first ``n`` sentences of ``text``.

    Args:
        text: Plain text (sentences found as in :func:`split_sentences`, long ones not cut).
        n: Most sentences to keep; 0 keeps everything.

    Returns:
        The kept sentences joined by single spaces (``text`` stripped when ``n`` is 0 or the
        text has no more than ``n`` sentences).

    Raises:
        ValueError: ``n`` < 0.

    """
    if n < 0:
        raise ValueError(f"n must be >= 0 (0 = no limit), got {n}")
    sentences = split_sentences(text) if n else []
    return text.strip() if len(sentences) <= n else " ".join(sentences[:n])


def _may_start(buf: str, at: int) -> bool:
    """Whether a sentence may begin at word start ``at``: only after ``. ! ? …`` or a line break."""
    head = buf[:at].rstrip()
    return bool(head) and (_TERMINAL_END.search(head) is not None or "\n" in buf[len(head) : at])


def _settled(buf: str) -> tuple[list[int], int]:
    """Find the final boundaries of growing text, and how far its pending sentence certainly reaches.

    Returns:
        ``(bounds, safe)``: the boundaries that more text cannot move (each followed by a
        complete word and by a letter or digit before the last, unfinished word), and the
        offset up to which the text after the last of them certainly belongs to one sentence
        (the unfinished word too, unless a sentence may begin with it).

    """
    last = _LAST_WORD.search(buf)
    open_from = last.start() if last else len(buf)  # the unfinished word, if any
    bounds, safe = [], open_from if last and _may_start(buf, open_from) else len(buf)
    for b in _boundaries(buf, final=False):
        if b < open_from and _has_word(buf[b:open_from]):
            bounds.append(b)
        else:
            safe = min(safe, b)
            break
    return bounds, safe


def sentence_boundaries(text: str) -> list[int]:
    """Where sentences after the first begin in complete ``text`` (what :func:`split_sentences` cuts at).

    Args:
        text: A whole reply, or a stream's text once it has ended.

    Returns:
        Offsets, in order.
    """
    return _boundaries(text)


def settled_boundaries(text: str) -> list[int]:
    """Sentence ends in growing ``text`` that more text cannot move (each followed by a complete word).

    Args:
        text: Model text so far (a stream's prefix).

    Returns:
        Offsets where a sentence ends, in order (see :class:`SentenceStream`).
    """
    return _settled(text)[0]


class SentenceStream:
    """Cut a stream of model text deltas into sentences (and clauses of long ones), early.

    A sentence is released once the next one has certainly begun (see the module docstring),
    so its pieces lag the model by about one word; a sentence longer than ``clause_chars``
    is cut at a clause as soon as its first ``clause_chars + 1`` characters are known. Pieces
    are raw model text, stripped; the synthesizer cleans them for speech. Fed the same text
    in any deltas, it returns ``split_sentences(text, clause_chars)`` (for text with a
    letter or digit).

    Args:
        clause_chars: A sentence longer than this many characters is cut at a clause;
            0 never cuts.

    Raises:
        ValueError: ``clause_chars`` < 0.

    """

    def __init__(self, clause_chars: int = 120) -> None:
        if clause_chars < 0:
            raise ValueError(f"clause_chars must be >= 0 (0 = never cut), got {clause_chars}")
        self.clause_chars = clause_chars
        self._buf = ""  # the text from the start of the pending sentence on
        self._done = 0  # characters of _buf already released as clauses of a long sentence

    def feed(self, delta: str) -> list[str]:
        """Add model text; return the pieces it completed, in order (often none).

        Args:
            delta: The next piece of the model's text, any length.

        Returns:
            Stripped, non-empty pieces, each at most ``clause_chars`` long (when set).

        """
        self._buf += delta
        if not any(ch.isspace() for ch in delta):
            return []  # nothing settles until a word is complete
        if not self._done:
            self._buf = self._buf.lstrip()
        bounds, safe = _settled(self._buf)
        out: list[str] = []
        if bounds:
            for i, sentence in enumerate(_spans(self._buf[: bounds[-1]], bounds[:-1])):
                out += _split_long(sentence[self._done :] if i == 0 else sentence, self.clause_chars)
            self._buf, self._done, safe = self._buf[bounds[-1] :], 0, safe - bounds[-1]
        # The pending sentence keeps its released clauses in _buf: pysbd and the list-marker
        # rule must see it from its start, as split_sentences does.
        while self.clause_chars:
            pending = self._buf[self._done :]
            self._done += len(pending) - len(pending.lstrip())
            if len(self._buf[self._done : safe].rstrip()) <= self.clause_chars:
                break
            at = _cut(self._buf[self._done :], self.clause_chars)
            out.append(self._buf[self._done : self._done + at].strip())
            self._done += at
        return out

    def flush(self) -> list[str]:
        """End of the text (a model round): release everything held.

        Returns:
            The remaining pieces, as :meth:`feed` would cut them; ``[]`` when what is held has
            no letter or digit. The stream is empty afterwards and may be reused.

        """
        text, done = self._buf.rstrip(), self._done
        self._buf, self._done = "", 0
        if not _has_word(text):  # (a word already released as a clause of this sentence counts)
            return []
        bounds = [b for b in _boundaries(text) if b > done]
        spans = _spans(text[done:], [b - done for b in bounds])
        return [piece for sentence in spans for piece in _split_long(sentence, self.clause_chars)]


class SentenceCap:
    """Conversational mode's limit on spoken sentences, enforced on the text stream.

    Forwards speech deltas until ``limit`` sentences (counted as :func:`split_sentences`
    counts them, over all rounds of a turn) have ended, then forwards nothing more and sets
    :attr:`cancel` so the model stops (the rest would never be spoken). Text is forwarded
    as soon as it is certainly within the cap; an unfinished word after ``. ! ?`` or a line
    break that would begin a sentence past the cap waits until the word after it shows
    whether it does ("3 p.m. today" or "3 p.m. Then"). :meth:`flush` at the end of each
    model round forwards such a word when it turns out to be within the cap. Trailing white
    space is forwarded with the next word. ``limit`` 0 forwards every delta at once and holds
    nothing.

    Args:
        limit: Sentences to let through; 0 = no limit.
        on_text: Downstream receiver of speech deltas (or None).
        stop: The caller's stop signal (barge-in); :attr:`cancel` is set by it too, and by the cap.

    Raises:
        ValueError: ``limit`` < 0.

    """

    def __init__(self, limit: int, on_text: Callable[[str], None] | None, stop: StopSignal | None) -> None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0 (0 = no limit), got {limit}")
        self.limit = limit
        self.downstream = on_text
        self.user_cancel = stop
        self.cancel = StopSignal(stop) if stop is not None else StopSignal()
        """Set when the cap is reached (no more speech wanted) or the caller stopped."""
        self.sentences = 0  # sentences ended so far, over all rounds
        self._buf = ""  # this round's text from the start of the pending sentence
        self._sent = 0  # characters of _buf already forwarded

    def user_cancelled(self) -> bool:
        """Whether the caller (not the cap) asked to stop."""
        return self.user_cancel is not None and self.user_cancel.is_set()

    def feed(self, delta: str) -> None:
        """Forward one speech delta, or the part of it certainly within the cap.

        Args:
            delta: The next piece of the model's speech text.

        """
        if not self.limit:
            self._forward(delta)
            return
        if self.sentences >= self.limit:
            self.cancel.set("reply cap")
            return
        self._buf += delta
        bounds, safe = _settled(self._buf)
        if self._count(bounds):
            return
        if bounds:  # the sentences ended so far are all within the cap
            self._forward_to(bounds[-1])
            self._buf, self._sent, safe = self._buf[bounds[-1] :], self._sent - bounds[-1], safe - bounds[-1]
        # Each word start from `safe` on that may begin a sentence counts as one more: forward it all
        # only if that still fits. Trailing white space waits for the next word.
        unsure = sum(_may_start(self._buf, m.start()) for m in _WORD_START.finditer(self._buf, safe))
        end = len(self._buf) if self.sentences + 1 + unsure <= self.limit else safe
        self._forward_to(len(self._buf[:end].rstrip()))

    def flush(self) -> None:
        """End of a model round: forward the held text that is within the cap; the next round starts anew.

        Sets :attr:`cancel` when the cap is reached here. Call it after every round (also one
        that failed), before the turn ends; without it a held word (see the class docstring)
        is never forwarded, and the next round's text would continue this round's sentence.
        """
        text = self._buf.rstrip()
        if self.limit and self.sentences < self.limit and not self._count(_boundaries(text)):
            self._forward_to(len(text))
            if _has_word(text):
                self.sentences += 1
                if self.sentences >= self.limit:
                    self.cancel.set("reply cap")
        self._buf, self._sent = "", 0

    close = flush

    def _count(self, bounds: list[int]) -> bool:
        """Count the sentences ending at ``bounds``; at the limit forward up to it, stop, return True."""
        for b in bounds:
            self.sentences += 1
            if self.sentences >= self.limit:
                self._forward_to(len(self._buf[:b].rstrip()))
                self._buf, self._sent = "", 0
                self.cancel.set("reply cap")
                return True
        return False

    def _forward_to(self, end: int) -> None:
        if end > self._sent:
            self._forward(self._buf[self._sent : end])
            self._sent = end

    def _forward(self, text: str) -> None:
        if text and self.downstream is not None:
            self.downstream(text)
