"""Stream helpers between the model and the speech: the conversational-mode sentence cap."""

from __future__ import annotations

import threading
from collections.abc import Callable


class SentenceCap:
    """Conversational mode's limit on spoken sentences, enforced on the text stream.

    Forwards speech deltas until ``limit`` sentences have ended, then stops forwarding and
    ends generation (the rest would never be spoken). ``limit`` 0 forwards everything.

    Args:
        limit: Sentences to let through.
        on_text: Downstream receiver of speech deltas (or None).
        cancel: The caller's cancel event (barge-in), kept apart from the cap's own stop.
    """

    _END = (".", "!", "?")

    def __init__(self, limit: int, on_text: Callable[[str], None] | None, cancel: threading.Event | None) -> None:
        self.limit = limit
        self.downstream = on_text
        self.user_cancel = cancel
        self.cancel = _Either(threading.Event(), cancel)
        self._sentences = 0
        self._prev = ""

    def user_cancelled(self) -> bool:
        """Whether the caller (not the cap) asked to stop."""
        return self.user_cancel is not None and self.user_cancel.is_set()

    def feed(self, delta: str) -> None:
        """Forward one speech delta, counting sentence ends."""
        if self.limit and self._sentences >= self.limit:
            self.cancel.set()
            return
        out = []
        for ch in delta:
            out.append(ch)
            if ch in self._END and self._prev not in self._END:
                self._sentences += 1
                if self.limit and self._sentences >= self.limit:
                    self.cancel.set()
                    break
            self._prev = ch
        if out and self.downstream is not None:
            self.downstream("".join(out))


class _Either:
    """Event-like: set when the cap stopped generation or the caller cancelled (barge-in)."""

    def __init__(self, own: threading.Event, other: threading.Event | None) -> None:
        self.own = own
        self.other = other

    def set(self) -> None:
        self.own.set()

    def is_set(self) -> bool:
        return self.own.is_set() or (self.other is not None and self.other.is_set())
