"""Reasoning on/off and the thinking budget, for models with native (non-grammar) output.

Bolt can think before it answers; on a robot that thinking is latency. The runtime gives
it a budget in tokens and in milliseconds. When either runs out, the runtime closes the
thinking block itself: a llama.cpp logits processor forces the end-of-thinking marker,
token by token, and the model goes on to answer in the same generation. This mirrors
llama.cpp server's reasoning-budget sampler (``docs/facts.md``); the Python bindings have none.

Markers follow the template: Gemma 4 / Bolt use ``<|channel>thought`` … ``<channel|>``; other
models ``<think>`` … ``</think>``. Templates that know ``enable_thinking`` get it as a
template variable; for the others the runtime pre-fills the opening marker after the
generation prompt, so any model can be run with a budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ThinkingMarkers:
    """Opening and closing text of a thinking block."""

    open: str
    close: str


GEMMA4 = ThinkingMarkers("<|channel>thought\n", "<channel|>")
THINK_TAGS = ThinkingMarkers("<think>\n", "</think>")


def markers_for(template: str) -> ThinkingMarkers:
    """The thinking markers a chat template uses (Gemma 4 channel tokens, else ``<think>``)."""
    return GEMMA4 if "<|channel>" in template else THINK_TAGS


def template_knows_thinking(template: str) -> bool:
    """Whether the template switches thinking itself through ``enable_thinking``."""
    return "enable_thinking" in template


@dataclass
class ThinkingStats:
    """What the budget saw in one generation.

    Attributes:
        tokens: Tokens generated inside the thinking block.
        ms: Time spent inside it, ms.
        forced: The runtime closed the block because the budget ran out.
    """

    tokens: int = 0
    ms: float = 0.0
    forced: bool = False


class ThinkingBudget:
    """llama.cpp logits processor that ends thinking after ``max_tokens`` tokens or ``max_ms`` ms.

    Args:
        tokenize: Text → token ids (special tokens parsed, no BOS).
        detokenize: Token ids → text (special tokens shown).
        n_prompt: Prompt length in tokens.
        markers: The template's thinking markers.
        starts_inside: The prompt already opened the block (pre-filled or template).
        max_tokens: Budget in generated thinking tokens (0: no thinking at all).
        max_ms: Budget in milliseconds of thinking.
        stats: Filled in as generation runs.
        clock: Monotonic clock in seconds (injected for tests).
    """

    def __init__(
        self,
        tokenize: Callable[[str], list[int]],
        detokenize: Callable[[list[int]], str],
        n_prompt: int,
        markers: ThinkingMarkers,
        starts_inside: bool,
        max_tokens: int,
        max_ms: float,
        stats: ThinkingStats | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.detokenize = detokenize
        self.n_prompt = n_prompt
        self.markers = markers
        self.inside = starts_inside
        self.max_tokens = max_tokens
        self.max_ms = max_ms
        self.stats = stats if stats is not None else ThinkingStats()
        self.clock = clock
        self._close_ids = tokenize(markers.close)
        self._open_at: int | None = 0 if starts_inside else None
        self._t0: float | None = clock() if starts_inside else None
        self._forcing: int | None = None  # index into _close_ids while forcing the close
        self._done = False

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Return ``scores`` (logits over the vocabulary), masked to the closing marker when over budget."""
        if self._done:
            return scores
        generated = list(input_ids[self.n_prompt :])
        if self._forcing is not None:
            if self._forcing >= len(self._close_ids):
                self._done = True
                return scores
            return self._force(scores)
        text = self.detokenize(generated)
        if not self.inside:
            at = text.find(self.markers.open.strip())
            if at < 0:
                return scores
            self.inside, self._open_at, self._t0 = True, len(generated), self.clock()
        if self.markers.close in text[-64:]:  # the model closed it itself
            self._done = True
            self._update(generated)
            return scores
        self._update(generated)
        if self.stats.tokens >= self.max_tokens or self.stats.ms >= self.max_ms:
            self.stats.forced = True
            self._forcing = 0
            return self._force(scores)
        return scores

    def _update(self, generated: list[int]) -> None:
        self.stats.tokens = len(generated) - (self._open_at or 0)
        self.stats.ms = (self.clock() - (self._t0 or self.clock())) * 1000.0

    def _force(self, scores: Any) -> Any:
        tok = self._close_ids[self._forcing]
        keep = scores[tok]
        scores[:] = -math.inf
        scores[tok] = keep if math.isfinite(keep) else 0.0
        self._forcing += 1
        return scores
