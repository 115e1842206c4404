"""The tool prior: a logit bias toward the tools whose names or keywords the user said.

For small models in grammar mode (:mod:`agent.toolgrammar`). A 135M model picks tools almost
at random from names alone (measured on the command fixtures: 4 of 10): :func:`tool_prior`
finds the tools the user's words point at, :func:`tools_left` those still wanted in a later
round of the turn, and :class:`ToolChoicePrior` turns the bonuses into a llama.cpp logits
processor acting only where the tool name is written. The grammar keeps every choice valid.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agent.skills import Skill
from agent.toolgrammar import NO_TOOL

STOPWORDS = frozenset({"get", "set", "the", "and", "for", "you", "can", "your", "with", "make", "please"})


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def name_words(name: str) -> set[str]:
    """The words of a tool's name that the user must all say for a name match.

    Split at ``_``, generic verbs (:data:`STOPWORDS`) left out, short words kept: ``look_at``
    needs "look" *and* "at", so "please look to the left" names ``look``, not ``look_at``.
    """
    return {w for w in name.lower().split("_") if w and w not in STOPWORDS}


def tool_prior(user_text: str, skills: list[Skill], done: set[str], bonus: float) -> dict[str, float]:
    """Logit bonus per tool name from the user's own words (a prior for small models).

    A tool gets ``bonus`` when every word of its name (split at ``_``) or one of its
    declared ``keywords`` is in the user's text, half of it for a shared 4-letter stem ("dancing")
    when no tool matches exactly.
    Tools already called this turn get nothing; ``"none"`` gets the bonus when no other
    tool does (small talk stays small talk) and minus the bonus when one does.

    Args:
        user_text: What the user said this turn.
        skills: Tools on offer.
        done: Tool names already called this turn.
        bonus: Logit bonus for a full match (0 disables the prior).

    Returns:
        Tool name → logit bonus (only names with a bonus; ``"none"`` always present).
    """
    if bonus <= 0:
        return {}
    said = _words(user_text)
    text = " ".join(re.findall(r"[a-z]+", user_text.lower()))
    out: dict[str, float] = {}
    for s in skills:
        parts = name_words(s.name)
        keys = {w for w in parts if len(w) > 2} | {k for k in s.keywords if " " not in k}
        phrase = any(f" {k} " in f" {text} " for k in s.keywords)  # keywords may be phrases ("look at")
        # The whole name said ("emergency stop" — not just "stop"), or one of its keywords.
        if (parts and parts <= said) or phrase:
            out[s.name] = bonus
        elif any(len(k) >= 4 and len(w) >= 4 and k[:4] == w[:4] for k in keys for w in said):
            out[s.name] = bonus / 2
    if any(v == bonus for v in out.values()):  # an exact word beats a shared stem ("timer" vs "time")
        out = {k: v for k, v in out.items() if v == bonus}
    out = {k: v for k, v in out.items() if k not in done}
    # Push "none" the other way when the user named an action, toward it when they did not.
    out[NO_TOOL] = -bonus if out else bonus
    return out


def tool_words(user_text: str, skill: Skill) -> set[str]:
    """The user's words that point at ``skill``, as :func:`tool_prior` finds them (empty: none do).

    Its name's words when all were said, the words of each keyword said, or, failing those,
    the said words sharing a 4-letter stem with one of them ("dancing").
    """
    said = _words(user_text)
    text = f" {' '.join(re.findall(r'[a-z]+', user_text.lower()))} "
    parts = name_words(skill.name)
    out = set(parts) if parts and parts <= said else set()
    for k in skill.keywords:
        if f" {k} " in text:
            out |= set(k.split())
    if not out:
        keys = {w for w in parts if len(w) > 2} | {k for k in skill.keywords if " " not in k}
        out = {w for w in said if len(w) >= 4 and any(len(k) >= 4 and k[:4] == w[:4] for k in keys)}
    return out


def tools_left(user_text: str, skills: list[Skill], called: set[str], bonus: float) -> dict[str, float]:
    """:func:`tool_prior` for a later round of a turn: only tools the user's words still point at.

    A tool not yet called keeps its bonus only when some of the words that point at it are
    not explained by a tool already called: after ``look_at`` for "look to the left", ``look``
    (pointed at by the same word) is not wanted too; after ``wave`` for "turn your head and
    then wave", ``look`` (pointed at by "turn") still is.

    Args:
        user_text: What the user said this turn.
        skills: Tools on offer.
        called: Tool names already called this turn.
        bonus: Logit bonus for a full match (0 disables the prior: returns ``{}``).

    Returns:
        Tool name → logit bonus, as :func:`tool_prior` (``"none"`` positive when nothing is left).
    """
    bonuses = tool_prior(user_text, skills, called, bonus)
    if not bonuses:
        return bonuses
    by_name = {s.name: s for s in skills}
    covered: set[str] = set()
    for name in called:
        if name in by_name:
            covered |= tool_words(user_text, by_name[name])
    out = {
        n: b
        for n, b in bonuses.items()
        if n != NO_TOOL and b > 0 and not tool_words(user_text, by_name[n]) <= covered
    }
    out[NO_TOOL] = -bonus if out else bonus
    return out


class ToolChoicePrior:
    """llama.cpp logits processor that turns :func:`tool_prior` bonuses into a bias on whole tool names.

    A bonus belongs to a *name*, but the model writes the name in pieces ("d" + "ance", "de" +
    "scribe" ...), and pieces are shared ("no" starts both ``none`` and ``nod``). With ``L(w)``
    the lowest bonus among the names that the written text ``w`` can still become, a piece that
    takes the written value from ``w`` to ``w'`` gets ``L(w') - L(w)``. Along any spelling of a
    name the pieces' biases add up to that name's bonus (minus one constant), so a bonus is never
    counted twice; and a shared piece gets the *lowest* bonus of its names (unless it already
    spells a whole name, which then counts as that name), because a small
    model that writes an ambiguous piece has usually already chosen: measured on SmolLM2-135M
    after "what do you see", "d" goes on to "ance" (logit 35.3) far more than to "escribe"
    (20.8), so a bonus on "d" for ``describe_scene`` made the robot dance. The favoured name
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
        (favoured) is not held back by ``look_at``, which would still need "_at".
        """
        if written[1:] in self.bonuses and written.startswith('"'):
            return self.bonuses[written[1:]]
        vals = [b for t, b in self._targets if t.startswith(written)]
        return min(vals) if vals else None

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
