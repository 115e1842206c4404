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

:class:`ThinkingBudget` is the embedded engine's logits processor; :class:`ThinkWatch` follows
the block in a server's stream (the server enforces the token budget itself).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.engines.request import Thinking


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


class ThinkWatch:
    """Follows the thinking block in text streamed from a server: its tokens and time (stats, ms budget).

    Args:
        markers: The template's thinking markers.
        budget: The round's thinking budget.
        stats: Filled in as the stream runs.
        starts_inside: The prompt already opened the block.
    """

    def __init__(
        self, markers: ThinkingMarkers, budget: Thinking, stats: ThinkingStats, starts_inside: bool
    ) -> None:
        self.markers = markers
        self.max_tokens, self.max_ms = budget.max_tokens, budget.max_ms
        self.stats = stats
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
