"""Copy prior: a reply that reads a tool result back copies it as written.

A small model reading a tool result back gets digits wrong that it copies from a few hundred
tokens back (measured: ``docs/small-model.md``, "The measurements behind the code").
:class:`CopyPrior` is a logits processor for the round after a data tool: while the end of
the reply matches a stretch of a tool result, the tokens that continue that stretch get a
logit bonus. It is the copy mechanism of pointer-generator networks (See et al., 2017, "Get
To The Point") reduced to a bias, and the lookup of prompt-lookup decoding (Saxena, 2023):
the model still chooses its words, and nothing is boosted where it paraphrases.

With a negative bonus the same lookup is the *repeat guard*: a small model may answer a new
request with its previous reply word for word; once a reply has copied ``REPEAT_MIN_MATCH``
characters of the previous one, the token that would go on copying it is held back, so the
words change before the copy is complete.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agent.skills import GENERIC_NAME_WORDS

MIN_MATCH = 3
"""Characters of the reply's end that must match a result before its continuation is favoured."""
LOOKBACK = 40
"""Longest match tried, characters."""
AHEAD = 12
"""Characters of the result's continuation whose tokens are favoured."""
REPEAT_MIN_MATCH = 16
"""Characters of the previous reply a reply may share before the repeat guard acts ("It is 14:43 "
and "Why did the robot" are shared freely; acknowledgements are shorter)."""

EXAMPLE_MIN_MATCH = 12
"""Characters of the system prompt's example reply a reply may share before the guard acts.
Measured on SmolLM2-135M, greedy, "Tell me a short joke.": with the 16 of :data:`REPEAT_MIN_MATCH`
the example's punchline was copied, with 8 the joke lost its punchline, with 12 neither (the
replies: ``docs/small-model.md``, "The measurements behind the code")."""


def fold_case(text: str) -> str:
    """``text`` in lower case, character for character.

    A character whose lower case is longer (such as "İ") is kept, so offsets into the folded
    text are offsets into ``text``.
    """
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def continuation(
    sources: list[str], written: str, min_match: int = MIN_MATCH, ahead: int = AHEAD, any_case: bool = False
) -> str:
    """What follows the longest end of ``written`` found in one of ``sources`` (prompt lookup).

    Args:
        sources: Texts the reply may copy (tool results; for the repeat guard, earlier replies).
        written: The reply so far; at most its last :data:`LOOKBACK` characters are looked up.
        min_match: Fewest characters of the end of ``written`` that must match.
        ahead: Characters of the continuation to return.
        any_case: Match regardless of case ("because it needed to" continues "It needed to
            recharge"); the continuation is returned as the source writes it.

    Returns:
        Up to ``ahead`` characters that follow the match in its source; ``""`` without a match.
    """
    folded = [fold_case(s) for s in sources] if any_case else sources
    if any_case:
        written = fold_case(written)
    for k in range(min(len(written), LOOKBACK), min_match - 1, -1):
        end = written[-k:]
        for source, look in zip(sources, folded, strict=True):
            at = look.find(end)
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

    A penalty (the guards) matches regardless of case: a copy that starts a sentence lower
    down ("Because it needed to recharge.") is still a copy. A bonus copies the result as written.
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
        return continuation(self.sources, written, self.min_match, any_case=self.bonus < 0)

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


class ToolChoicePrior:
    """llama.cpp logits processor that turns :func:`tool_prior` bonuses into a bias on whole tool names.

    A bonus belongs to a *name*, but the model writes the name in pieces ("d" + "ance", "de" +
    "scribe" ...), and pieces are shared ("no" starts both ``none`` and ``nod``). With ``L(w)``
    the lowest bonus among the names that the written text ``w`` can still become, a piece that
    takes the written value from ``w`` to ``w'`` gets ``L(w') - L(w)``. Along any spelling of a
    name the pieces' biases add up to that name's bonus (minus one constant), so a bonus is never
    counted twice; and a shared piece gets the *lowest* bonus of its names (unless it already
    spells a whole name, which then counts as that name), because a small
    model that writes an ambiguous piece has usually already chosen (measured:
    ``docs/small-model.md``, "The measurements behind the code"). The favoured name
    is reached through its own pieces ("de", "describe"). The grammar still decides what is
    allowed; the bias only tips the choice between valid tools.

    Args:
        tokenize: The model's tokenizer (text → token ids, no BOS).
        detokenize: Token ids → text.
        n_prompt: Prompt length in tokens (generated tokens follow it).
        bonuses: Tool name → logit bonus (names not listed have 0).
        names: Every tool name the grammar allows here (``"none"`` included).
    """

    _AT_NAME = re.compile(r'"tool"\s*:\s*("?)([^"]*)$')
    _ENDS = ('",', '"}', '" ')  # what the JSON grammar may write right after a name

    def __init__(
        self,
        tokenize: Callable[[str], list[int]],
        detokenize: Callable[[list[int]], str],
        n_prompt: int,
        bonuses: dict[str, float],
        names: list[str],
    ) -> None:
        self.tokenize = tokenize
        self.detokenize = detokenize
        self.n_prompt = n_prompt
        self.bonuses = bonuses
        self.names = names
        self._first: dict[str, dict[int, str]] = {}
        # Every full value the grammar can write, with its name's bonus.
        self._targets = [('"' + n + end, bonuses.get(n, 0.0)) for n in names for end in self._ENDS]

    def _prefix_tokens(self, text: str) -> dict[int, str]:
        """Every token whose text is a prefix of ``text``, with that text (cached per text)."""
        if text not in self._first:
            toks: dict[int, str] = {}
            for k in range(1, min(len(text), 40) + 1):
                ids = self.tokenize(text[:k])
                if len(ids) == 1:
                    toks[ids[0]] = text[:k]
            self._first[text] = toks
        return self._first[text]

    def _floor(self, written: str) -> float | None:
        """``L(written)``: the lowest bonus among the names the written value can still become.

        A value that already spells a whole name counts as that name: "look" for ``look``
        (favoured) is not held back by ``look_at``, which would still need "_at". A value that
        spells only a generic verb (:data:`~agent.skills.GENERIC_NAME_WORDS`: "get", "get_")
        says nothing of which tool follows, so it carries the *highest* bonus of its names and
        the words after it decide: a user's ``get_weather`` was never called for "weather
        forecast please" (its "get" carried ``get_time``'s 0, so "none" won), while
        ``weather_report`` always was.
        """
        if written[1:] in self.bonuses and written.startswith('"'):
            return self.bonuses[written[1:]]
        vals = [b for t, b in self._targets if t.startswith(written)]
        if not vals:
            return None
        return max(vals) if written[1:].rstrip("_") in GENERIC_NAME_WORDS else min(vals)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Return ``scores`` (float32 logits over the vocabulary) with the name bias added in place."""
        if not self.bonuses or not any(self.bonuses.values()):
            return scores
        # Only the last tokens matter (the name position): keep the per-token cost flat.
        tail = self.detokenize(list(input_ids[max(self.n_prompt, len(input_ids) - 32) :]))
        m = self._AT_NAME.search(tail[-48:])
        if not m:
            return scores
        written = m.group(1) + m.group(2)  # '' before the opening quote, else '"' + partial name
        here = self._floor(written)
        if here is None:
            return scores
        seen: dict[int, str] = {}
        for target, _ in self._targets:
            if not target.startswith(written):
                continue
            rest = target[len(written) :]
            seen.update(self._prefix_tokens(rest))
            if not written:  # the opening quote may come with the space before it
                seen.update({t: p[1:] for t, p in self._prefix_tokens(" " + rest).items() if len(p) > 1})
        for tok, piece in seen.items():
            after = self._floor(written + piece)
            if after is not None and after != here:
                scores[tok] += after - here
        return scores


class ProcessorChain:
    """Logits processors applied in order, as one ``(input_ids, scores) -> scores`` processor.

    Args:
        parts: The processors (a tool prior, a copy prior); an engine that cannot run a
            processor (a remote server) looks at the parts one by one.
    """

    def __init__(self, parts: list[Callable[[Any, Any], Any]]) -> None:
        self.parts = parts

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """``scores`` after every part, in order."""
        for part in self.parts:
            scores = part(input_ids, scores)
        return scores
