"""Logits processors turned into what a server takes: the thinking budget and the tool prior.

A logits processor (:mod:`agent.engines.thinking`, :mod:`agent.conversation.toolgrammar`) runs inside llama.cpp's
sampling loop and cannot cross HTTP. llama-server has its own reasoning budget (a sampler that
forces the end-of-thinking marker; request fields ``reasoning_budget_tokens``,
``reasoning_budget_start_tag``, ``reasoning_budget_end_tags``; ``tools/server/README.md`` of
llama-server 11434) and per-request ``logit_bias``: :func:`prior_logit_bias` maps the grammar-mode
tool prior onto a static bias, and :class:`ThinkWatch` follows the thinking block in the stream
for the statistics and the millisecond budget.
"""

from __future__ import annotations

import time
from collections import defaultdict

from agent.engines.thinking import ThinkingBudget, ThinkingStats


def prior_logit_bias(proc: object) -> dict[int, float] | None:
    """The ``logit_bias`` that stands in for a grammar-mode tool prior, or None for other processors.

    The prior is asked what it would add at the tool-name position, before and after the
    name's opening quote. A static bias applies at every position, so only pieces that the
    grammar lets appear almost only there are kept: pieces that open a JSON string (start with
    a quote), and name prefixes of 3 or more characters with no leading space (words in speech
    are spelled with a leading space). Measured on SmolLM2's vocabulary: "wave" and "wav" are
    kept, "w" and "wa" dropped.
    """
    from agent.engines.priors import ToolChoicePrior

    if not isinstance(proc, ToolChoicePrior):
        return None
    scores: defaultdict[int, float] = defaultdict(float)
    for tail in ('{"call": {"tool": ', '{"call": {"tool": "'):
        probe = ToolChoicePrior(proc.tokenize, lambda ids, t=tail: t, 0, proc.bonuses, proc.names)
        probe([0], scores)
    keep: dict[int, float] = {}
    for tok, bonus in scores.items():
        piece = proc.detokenize([tok])
        if (
            bonus
            and piece
            and (piece.lstrip().startswith('"') or (not piece[0].isspace() and len(piece) >= 3))
        ):
            keep[tok] = round(bonus, 3)
    return keep


class ThinkWatch:
    """Follows the thinking block in the streamed text: its tokens and time (stats, ms budget)."""

    def __init__(self, budget: ThinkingBudget, starts_inside: bool) -> None:
        self.markers = budget.markers
        self.max_tokens, self.max_ms = budget.max_tokens, budget.max_ms
        self.stats: ThinkingStats = budget.stats
        self.inside = starts_inside
        self.t0 = time.monotonic() if starts_inside else None
        self.done = False
        self.ended = False  # the millisecond budget has been enforced (or given up)
        self.attempts = 0
        self._pieces: list[str] = []

    def feed(self, piece: str) -> None:
        """A piece of raw output (``completions`` api); about one token each."""
        if self.done:
            return
        self._pieces = [*self._pieces[-15:], piece]
        text = "".join(self._pieces)
        if not self.inside:
            opener = self.markers.open.strip()
            if opener in text:
                self.inside, self.t0 = True, time.monotonic()
                self._pieces = [text.split(opener, 1)[1]]
            return
        at = text.rfind(self.markers.close)
        if at < 0:
            self.stats.tokens += 1
            self._update()
            return
        # The marker may span several pieces (tokens), already counted as thinking: take them back.
        k, covered = 0, 0
        while covered < len(text) - at and k < len(self._pieces):
            k += 1
            covered += len(self._pieces[-k])
        self.stats.tokens = max(0, self.stats.tokens - (k - 1))
        self.close()

    def reasoning(self) -> None:
        """One piece of reasoning the server split out (``chat`` api)."""
        if self.t0 is None:
            self.inside, self.t0 = True, time.monotonic()
        self.stats.tokens += 1
        self._update()

    def close(self) -> None:
        """The block ended (the model's marker, or the server's forced one)."""
        if not self.done:
            self.done = True
            self._update()
            self.stats.forced |= self.stats.tokens >= self.max_tokens

    def _update(self) -> None:
        if self.t0 is not None:
            self.stats.ms = (time.monotonic() - self.t0) * 1000.0

    def over_ms(self) -> bool:
        """Thinking has run past the millisecond budget and has not been ended yet."""
        return (
            self.inside
            and not self.done
            and not self.ended
            and self.max_ms > 0
            and self.stats.ms >= self.max_ms
        )
