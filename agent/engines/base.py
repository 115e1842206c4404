"""What every chat engine shares: the error type, a generation's statistics, ``complete`` and ``warmup``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


class LLMError(Exception):
    """The model file could not be loaded or its template rendered; the message says why."""


@dataclass
class Generation:
    """Statistics of one generation, filled in while streaming.

    Attributes:
        prompt_tokens: Prompt tokens evaluated (not reused from the KV cache).
        completion_tokens: Tokens generated.
        ttft_ms: Time from the call to the first generated piece, ms.
        total_ms: Whole generation, ms.
        text: Everything generated.
        cancelled: Stopped early by the cancel event.
        finish_reason: ``stop`` (end of turn or a stop string), ``length`` (token cap), or "".
        tokens_per_s: Decoding speed, tokens/s: generated tokens after the first over the time
            since the first (the server engines report llama-server's own ``predicted_per_second``).
        draft_tokens: Tokens proposed by a draft model (speculative decoding; server engines).
        draft_accepted: Of those, tokens the model accepted.
        extra: Per-round details (``thinking``: :class:`agent.engines.thinking.ThinkingStats`,
            ``dropped_turns``).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    text: str = ""
    cancelled: bool = False
    finish_reason: str = ""
    tokens_per_s: float = 0.0
    draft_tokens: int = 0
    draft_accepted: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def draft_acceptance(self) -> float | None:
        """Accepted share of drafted tokens, 0..1; None without a drafter."""
        return self.draft_accepted / self.draft_tokens if self.draft_tokens else None


class Completions:
    """``complete`` and ``warmup`` for any model with a ``stream(prompt, gen, **kwargs)`` (every engine)."""

    def stream(self, prompt: str, gen: Generation, **kwargs: Any) -> Iterator[str]:
        """Generate text pieces for ``prompt``, filling ``gen`` (each engine implements it)."""
        raise NotImplementedError

    def complete(self, prompt: str, **kwargs: Any) -> Generation:
        """Run :meth:`stream` to the end and return its :class:`Generation` (``.text`` holds the output)."""
        gen = Generation()
        for _ in self.stream(prompt, gen, **kwargs):
            pass
        return gen

    def prefill(self, prompt: str, prefix: str = "") -> int:
        """Evaluate ``prompt`` and the known output ``prefix`` into the KV cache ahead of a turn, if it can.

        The default does nothing and returns 0 (tokens evaluated): engines without a local
        KV cache gain nothing from it.
        """
        return 0

    def hold(self, on: bool) -> None:
        """Pause (True) or resume (False) generation between tokens; the default does nothing.

        Only an engine that decodes on this machine's CPU gains from it (it gives the CPU to
        speech synthesis while the speaker waits for the turn's first audio).
        """

    def warmup(self, prompt: str) -> float:
        """Evaluate a representative prompt once (fills the KV cache, pays first-batch costs); returns ms."""
        t0 = time.perf_counter()
        self.complete(prompt, max_tokens=2)
        return (time.perf_counter() - t0) * 1000.0
