"""Copy prior: a reply that reads a tool result back copies it as written.

A 135M model asked to tell the user about ``"It is 15:25 on Tuesday 01 December 2026."``
writes "It is 15:26" in about one turn of six (measured here on 40 clock times, greedy: 34
right). The digits it gets wrong are the ones it is copying from a few hundred tokens back.
:class:`CopyPrior` is a logits processor for the round after a data tool: while the end of
the reply matches a stretch of a tool result, the tokens that continue that stretch get a
logit bonus. It is the copy mechanism of pointer-generator networks (See et al., 2017, "Get
To The Point") reduced to a bias, and the lookup of prompt-lookup decoding (Saxena, 2023):
the model still chooses its words, and nothing is boosted where it paraphrases.

With a negative bonus the same lookup is the *repeat guard*: the same model answers "Tell me
another joke." and "What can you do?" with its previous reply word for word (greedy, seen
here); once a reply has copied ``REPEAT_MIN_MATCH`` characters of the previous one, the token
that would go on copying it is held back, so the words change before the copy is complete.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MIN_MATCH = 3
"""Characters of the reply's end that must match a result before its continuation is favoured."""
LOOKBACK = 40
"""Longest match tried, characters."""
AHEAD = 12
"""Characters of the result's continuation whose tokens are favoured."""
REPEAT_MIN_MATCH = 16
"""Characters of the previous reply a reply may share before the repeat guard acts ("It is 14:43 "
and "Why did the robot" are shared freely; acknowledgements are shorter)."""


def continuation(sources: list[str], written: str, min_match: int = MIN_MATCH, ahead: int = AHEAD) -> str:
    """What follows the longest end of ``written`` found in one of ``sources`` (prompt lookup).

    Args:
        sources: Texts the reply may copy (tool results; for the repeat guard, earlier replies).
        written: The reply so far; at most its last :data:`LOOKBACK` characters are looked up.
        min_match: Fewest characters of the end of ``written`` that must match.
        ahead: Characters of the continuation to return.

    Returns:
        Up to ``ahead`` characters that follow the match in its source; ``""`` without a match.
    """
    for k in range(min(len(written), LOOKBACK), min_match - 1, -1):
        end = written[-k:]
        for source in sources:
            at = source.find(end)
            if at >= 0:
                return source[at + k : at + k + ahead]
    return ""


class CopyPrior:
    """Favours the tokens that continue a tool result the reply is copying.

    Args:
        tokenize: Text → token ids (no BOS, no special tokens).
        detokenize: Token ids → text.
        n_prompt: Prompt length in tokens (generation starts after it).
        sources: Tool results the reply may read back (for the repeat guard: earlier replies).
        bonus: Logit bonus for a continuing token (0 = off; negative: a penalty, the repeat guard).
        min_match: Characters that must match before the continuation is biased.
    """

    def __init__(
        self,
        tokenize: Callable[[str], list[int]],
        detokenize: Callable[[list[int]], str],
        n_prompt: int,
        sources: list[str],
        bonus: float,
        min_match: int = MIN_MATCH,
    ) -> None:
        self.tokenize, self.detokenize = tokenize, detokenize
        self.n_prompt = n_prompt
        self.min_match = min_match
        self.sources = [s for s in sources if len(s) > min_match]
        self.bonus = bonus
        self._tokens: dict[str, list[int]] = {}

    def continuation(self, written: str) -> str:
        """What follows the longest end of ``written`` found in a source (see :func:`continuation`)."""
        return continuation(self.sources, written, self.min_match)

    def _prefix_tokens(self, text: str) -> list[int]:
        """Every token whose text is a prefix of ``text`` (cached per text)."""
        if text not in self._tokens:
            toks = []
            for k in range(1, len(text) + 1):
                ids = self.tokenize(text[:k])
                if len(ids) == 1:
                    toks.append(ids[0])
            self._tokens[text] = toks
        return self._tokens[text]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Return ``scores`` (float32 logits over the vocabulary) with the copy bonus added in place."""
        if not self.sources or not self.bonus:
            return scores
        # Only the end of the reply matters: keep the per-token cost flat.
        recent = self.detokenize(list(input_ids[max(self.n_prompt, len(input_ids) - 24) :]))
        ahead = self.continuation(recent[-LOOKBACK:])
        if ahead:
            for tok in self._prefix_tokens(ahead):
                scores[tok] += self.bonus
        return scores
