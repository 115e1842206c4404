"""What a turn produced (:class:`TurnResult`) and what tidying between turns did (:class:`Tidied`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.skills import ToolOutcome


@dataclass(frozen=True)
class Tidied:
    """What :meth:`~agent.conversation.Conversation.tidy` did between turns.

    Attributes:
        dropped: Old turns compacted into the summary line.
        evaluated: Prompt tokens evaluated into the KV cache.
        complete: The evaluation ran to the end (False: stopped early; the rest is left for later).
    """

    dropped: int
    evaluated: int
    complete: bool


@dataclass
class TurnResult:
    """What one turn produced.

    Attributes:
        text: The full reply text to speak (no markup).
        calls: ``(name, arguments, outcome)`` per tool call, in order.
        ttft_ms: First round's time to first token, ms.
        llm_ms: Time spent in the model over all rounds, ms.
        prompt_tokens: Prompt tokens evaluated over all rounds (KV-cache reuse excluded).
        rounds: Model rounds run.
        problems: Messages about malformed output or stopped loops.
        thinking_tokens: Tokens spent thinking over all rounds.
        thinking_forced: The thinking budget ran out and the runtime closed the block.
        tokens_per_s: Decoding speed of the turn's longest round, tokens/s (0 when no round made
            more than one token).
        draft_tokens: Tokens proposed by a draft model over all rounds (server engines).
        draft_accepted: Of those, tokens the model accepted.
    """

    text: str = ""
    calls: list[tuple[str, dict[str, Any], ToolOutcome]] = field(default_factory=list)
    ttft_ms: float = 0.0
    llm_ms: float = 0.0
    prompt_tokens: int = 0
    rounds: int = 0
    problems: list[str] = field(default_factory=list)
    thinking_tokens: int = 0
    thinking_forced: bool = False
    tokens_per_s: float = 0.0
    draft_tokens: int = 0
    draft_accepted: int = 0
    _longest: int = field(default=0, repr=False)

    @property
    def draft_acceptance(self) -> float | None:
        """Accepted share of drafted tokens, 0..1; None without a drafter."""
        return self.draft_accepted / self.draft_tokens if self.draft_tokens else None
