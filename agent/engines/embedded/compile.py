"""A :class:`~agent.engines.request.Decoding` compiled into what the embedded token loop runs.

The request is data; here it becomes code that runs between tokens:

* **logits processors** ``(input_ids, scores) -> scores``, in this order: the tool prior
  (:class:`~agent.engines.priors.ToolChoicePrior`, from ``tool_bonuses``), the copy prior and the
  repeat guard (:class:`~agent.engines.priors.CopyPrior` with a bonus or a penalty, from
  ``copy_from`` and ``avoid``), the thinking budget
  (:class:`~agent.engines.thinking.ThinkingBudget`, from ``thinking``);
* **jump-forward** (:func:`jump_forward`, from ``forced``): text the output cannot avoid is
  evaluated in one batch instead of one decode step per token (SGLang's compressed finite-state
  machine does the same for grammars);
* **drafting** (:func:`draft_from`, from ``copy_from`` when ``draft``): the continuation of a tool
  result the reply is reading back, checked in one batch (prompt-lookup decoding, Saxena 2023).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agent.engines.priors import (
    EXAMPLE_MIN_MATCH,
    LOOKBACK,
    REPEAT_MIN_MATCH,
    CopyPrior,
    ProcessorChain,
    ToolChoicePrior,
    continuation,
)
from agent.engines.request import Decoding
from agent.engines.thinking import ThinkingBudget, ThinkingMarkers, ThinkingStats

DRAFT_CHARS = 60
"""Characters of a tool result drafted at a time (the model checks at most
:data:`agent.engines.embedded.model.DRAFT_MAX_TOKENS` of them per batch)."""

Processor = Callable[[Any, Any], Any]


class Vocabulary(Protocol):
    """Text ↔ tokens of the model (:class:`~agent.engines.embedded.model.ChatModel`)."""

    def plain_tokens(self, text: str) -> list[int]:
        """Tokens of output text (no BOS, special tokens not parsed)."""
        ...

    def plain_text(self, tokens: list[int]) -> str:
        """Text of output tokens (special tokens hidden)."""
        ...

    def special_tokens(self, text: str) -> list[int]:
        """Tokens of text with special tokens parsed (thinking markers)."""
        ...

    def special_text(self, tokens: list[int]) -> str:
        """Text of tokens with special tokens shown."""
        ...


@dataclass(frozen=True)
class Compiled:
    """One round's request as the token loop runs it.

    Attributes:
        processor: Logits processor ``(input_ids, scores) -> scores`` over float32 ``(n_vocab,)``
            logits, or None.
        jump: Output so far → the text now forced (``""``: none), or None.
        draft: Output so far → the text likely to follow (``""``: none), or None.
    """

    processor: Processor | None = None
    jump: Callable[[str], str] | None = None
    draft: Callable[[str], str] | None = None


def compile_request(
    req: Decoding,
    vocab: Vocabulary,
    n_prompt: int,
    markers: ThinkingMarkers,
    stats: ThinkingStats | None = None,
) -> Compiled:
    """Compile ``req`` for a prompt of ``n_prompt`` tokens.

    Args:
        req: The round's request.
        vocab: The model's tokenizer.
        n_prompt: Prompt length in tokens (a forced ``prefix`` counts as generated output).
        markers: The template's thinking markers.
        stats: Filled in by the thinking budget (required when ``req.thinking`` is set).

    Returns:
        The processors, jump-forward and drafting the request asks for.
    """
    tok, detok = vocab.plain_tokens, vocab.plain_text
    parts: list[Processor] = []
    if req.tool_bonuses and any(req.tool_bonuses.values()):
        parts.append(ToolChoicePrior(tok, detok, n_prompt, dict(req.tool_bonuses), list(req.tool_names)))
    if req.copy_from and req.copy_bonus:
        parts.append(CopyPrior(tok, detok, n_prompt, list(req.copy_from), req.copy_bonus))
    if req.avoid and req.avoid_penalty:
        parts.append(CopyPrior(tok, detok, n_prompt, list(req.avoid), -req.avoid_penalty, REPEAT_MIN_MATCH))
    if req.avoid_examples and req.avoid_penalty:
        parts.append(
            CopyPrior(tok, detok, n_prompt, list(req.avoid_examples), -req.avoid_penalty, EXAMPLE_MIN_MATCH)
        )
    if req.thinking is not None:
        th = req.thinking
        parts.append(
            ThinkingBudget(
                vocab.special_tokens,
                vocab.special_text,
                n_prompt,
                markers,
                th.starts_inside,
                th.max_tokens,
                th.max_ms,
                stats,
            )
        )
    processor = None if not parts else parts[0] if len(parts) == 1 else ProcessorChain(parts)
    draft = draft_from(req.copy_from) if req.draft and req.copy_from else None
    return Compiled(processor, jump_forward(req.forced), draft)


def jump_forward(forced: tuple[str, ...]) -> Callable[[str], str] | None:
    """What the output is forced to write next, given openings it must take one of.

    Once what is written fits only one of ``forced`` (it is a prefix of that one and of no
    other), the rest of that one is forced. While two still fit nothing is forced, even where
    they share letters: a tool name that is the start of another (``look``, ``look_at``) is
    forced only once its closing quote is written, and the model writes shared pieces in its
    own tokens.

    Args:
        forced: The openings (empty: no jump-forward).

    Returns:
        A function from the output so far to the forced text (``""``: none), or None.
    """
    if not forced:
        return None
    openings = tuple(dict.fromkeys(forced))

    def jump(text: str) -> str:
        fits = [o for o in openings if o.startswith(text)]
        return fits[0][len(text) :] if len(fits) == 1 else ""

    return jump


def draft_from(sources: tuple[str, ...]) -> Callable[[str], str]:
    """Drafting from texts the reply reads back: the continuation of the one it is copying.

    Args:
        sources: The texts, as they appear in the output.

    Returns:
        A function from the output so far to up to :data:`DRAFT_CHARS` characters likely next.
    """
    texts = list(sources)

    def draft(text: str) -> str:
        return continuation(texts, text[-LOOKBACK:], ahead=DRAFT_CHARS)

    return draft
