"""LLM text deltas → speakable pieces, as early as possible.

:class:`SentenceChunker` collects the reply text as the model writes it and releases a piece
as soon as it is certainly complete: a sentence end (``.``, ``!``, ``?``, ``…``) followed by
white space (so ``3.5`` and ``e.g.`` mid-word never cut), not after a common abbreviation
(``Mr.``, ``Dr.``, ``e.g.`` …). A sentence longer than ``clause_chars`` is cut at the last
clause boundary (``,``, ``;``, ``:``, ``—``) before that length, so a long first sentence
does not hold back the voice. :meth:`SentenceChunker.flush` releases the rest at the end of
a model round. Pieces are raw model text; the synthesizer cleans them for speech.
Pure Python, not thread-safe (one LLM worker feeds one chunker).
"""

from __future__ import annotations

import re

_END = re.compile(r"[.!?…]+[\"')\]]*(?=\s)")
_CLAUSE = re.compile(r"[,;:—–](?=\s)")
_ABBREV = frozenset({"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "approx",
                     "no", "fig", "a.m", "p.m", "u.s"})


class SentenceChunker:
    """Cut a stream of text deltas into sentences and long-sentence clauses.

    Args:
        clause_chars: A sentence longer than this many characters is cut at a clause.
        min_chars: Pieces shorter than this are joined to the next one (``"Hi."``-sized
            pieces are fine; this only stops stray punctuation becoming a piece).

    """

    def __init__(self, clause_chars: int = 120, min_chars: int = 2) -> None:
        self.clause_chars = clause_chars
        self.min_chars = min_chars
        self._buf = ""

    def feed(self, delta: str) -> list[str]:
        """Add model text; return the pieces completed by it (possibly none)."""
        self._buf += delta
        out: list[str] = []
        while True:
            piece = self._take()
            if piece is None:
                return out
            out.append(piece)

    def _take(self) -> str | None:
        buf = self._buf
        for m in _END.finditer(buf):
            head = buf[: m.end()].strip()
            word = re.split(r"\s", buf[: m.start()])[-1].lower().rstrip(".")
            if word in _ABBREV or len(head) < self.min_chars or not re.search(r"\w", head):
                continue
            if len(head) > self.clause_chars:
                break
            self._buf = buf[m.end():]
            return head
        if len(buf.strip()) > self.clause_chars:
            cuts = [m.end() for m in _CLAUSE.finditer(buf) if m.end() <= self.clause_chars]
            if cuts:
                head = buf[: cuts[-1]].strip()
                self._buf = buf[cuts[-1]:]
                return head
            if len(buf) > 2 * self.clause_chars and " " in buf[: 2 * self.clause_chars]:
                cut = buf.rindex(" ", 0, 2 * self.clause_chars)
                head = buf[:cut].strip()
                self._buf = buf[cut:]
                return head
        return None

    def flush(self) -> list[str]:
        """End of a model round: release everything left (nothing when it has no word)."""
        rest = self.feed("")
        tail, self._buf = self._buf.strip(), ""
        if re.search(r"\w", tail):
            rest.append(tail)
        return rest
