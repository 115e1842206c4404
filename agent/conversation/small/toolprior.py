"""The tool prior: a logit bias toward the tools whose names or keywords the user said.

For small models in grammar mode (:mod:`agent.conversation.toolgrammar`). A 135M model picks tools almost
at random from names alone (measured on the command fixtures: 4 of 10): :func:`tool_prior`
finds the tools the user's words point at, :func:`tools_left` those still wanted in a later
round of the turn, and :class:`ToolChoicePrior` turns the bonuses into a llama.cpp logits
processor acting only where the tool name is written. The grammar keeps every choice valid.
"""

from __future__ import annotations

import re

from agent.conversation.small.argprior import OPPOSITES, OTHER_WORDS, directions, named_sides
from agent.conversation.small.quantities import spoken_seconds
from agent.conversation.toolgrammar import NO_TOOL
from agent.listening.skill_words import ENDING_CUES, name_words
from agent.skills import Skill
from agent.speech.words import words

NEGATIONS: tuple[tuple[str, ...], ...] = tuple(
    tuple(c.split())
    for c in (
        "don't",
        "dont",
        "don t",
        "do not",
        "never",
        "stop",
        "quit",
        "cancel",
        "no more",
        "not",
        "without",
        "clear",
        "reset",
        "release",
        "unlatch",
    )
)
"""Words after which the next word is what the user does *not* want ("stop waving", "don't dance",
"cancel the timer": not ``set_timer``, whose keyword "timer" it is; "clear the emergency stop": not
``emergency_stop``, which latched it again);
"don t": a typographic apostrophe splits the word. Not a bare "no": "no, wave the other hand"."""

_CUE_WORDS = frozenset(c[0] for c in NEGATIONS if len(c) == 1)
"""One-word negation cues. A tool name's cue ("cancel" of ``cancel_timer``) is no stem to match
on its own: "cancel the dance" does not point at ``cancel_timer``."""

_OBJECT_CUES = frozenset({("cancel",), ("clear",), ("reset",), ("release",), ("unlatch",)})
"""Cues that negate a thing, not a verb: every word after them up to :data:`_CLAUSE_JOINS`."""

_CLAUSE_JOINS = frozenset("and then but".split())
"""Words that end what an object cue negates ("cancel the timer and wave": "wave" is wanted)."""

_BEFORE_THE_VERB = frozenset("you please ever even to be any more longer keep the my your this that".split())
"""Words that may stand between a negation and its verb or thing ("do not ever wave", "please stop
to dance", "stop the timer": "timer" is negated, so it does not point at ``set_timer``)."""


def negated(user_text: str) -> list[bool]:
    """For each word of ``user_text`` (:func:`~agent.speech.words.words`), whether it is negated.

    The negated word is the first one after a cue of :data:`NEGATIONS` that is not a filler of
    :data:`_BEFORE_THE_VERB`, in the same clause: "stop waving" negates "waving", "please do not
    dance" "dance", "stop and wave" only "and", "Stop. Wave." nothing. "cancel" negates the thing
    it names, every word up to "and", "then" or "but" ("cancel the tea timer"). The cue itself
    is not negated ("stop" still names ``stop``).

    Args:
        user_text: What the user said.

    Returns:
        One flag per word, in order.
    """
    return [no for clause in re.split(r"[.,;:!?]", user_text) for no in _negated_in(words(clause))]


def _negated_in(said: list[str]) -> list[bool]:
    """:func:`negated` of one clause's words."""
    out = [False] * len(said)
    i = 0
    while i < len(said):
        cue = next((c for c in NEGATIONS if tuple(said[i : i + len(c)]) == c), None)
        if cue is None:
            i += 1
            continue
        j = i + len(cue)
        if cue in _OBJECT_CUES:  # "cancel the tea timer": the whole thing named, up to "and"
            while j < len(said) and said[j] not in _CLAUSE_JOINS:
                out[j] = True
                j += 1
            i = j
            continue
        while j < len(said) and said[j] in _BEFORE_THE_VERB:
            j += 1
        if j < len(said):
            out[j] = True
        i = j
    return out


_ASKS = frozenset("what how".split())
_ASKS_CONTRACTED = frozenset("what's how's whats hows".split())
_AUX = frozenset("does do is s would will".split())  # "s": a typographic "what’s" splits
_DETERMINERS = frozenset("the a an your my this that".split())
_ASK_ENDS = frozenset("do does work works mean means".split())


def asked_about(user_text: str) -> list[bool]:
    """For each word of ``user_text``, whether it names a thing the user asks *about*.

    "What does the emergency stop do?", "how does your wave work", "what does the timer mean": the
    words between the determiner and the closing verb name a tool the user wants explained, not
    run (a new user's question latched the emergency stop, which only a person clears); so do
    the words after "what is a" ("what is a timer?" started a one-second timer). Words after
    "what do you" are not a thing ("what do you see" asks for ``describe_scene``), nor after
    "what is the" ("what is the time?").

    Args:
        user_text: What the user said.

    Returns:
        One flag per word (:func:`~agent.speech.words.words`), in order.
    """
    said = words(user_text)
    out = [False] * len(said)
    for i, w in enumerate(said):
        if w in _ASKS and i + 1 < len(said) and said[i + 1] in _AUX:
            k = i + 2  # "what does the ..."
        elif w in _ASKS_CONTRACTED:
            k = i + 1  # "what's the ..."
        else:
            continue
        if k >= len(said) or said[k] not in _DETERMINERS:
            continue
        end = next((j for j in range(k + 1, min(len(said), k + 6)) if said[j] in _ASK_ENDS), None)
        if end is None and said[k] in ("a", "an") and said[k - 1] in ("is", "s", "what's", "whats"):
            end = len(said)  # "what is a timer?": a kind of thing (but "what is the time?" asks for it)
        for j in range(k + 1, end or k + 1):
            out[j] = True
    return out


def wanted_words(user_text: str) -> list[str]:
    """The words of ``user_text`` the user asks for.

    Not negated (:func:`negated`), nor only asked about (:func:`asked_about`).
    """
    flags = zip(words(user_text), negated(user_text), asked_about(user_text), strict=True)
    return [w for w, no, about in flags if not no and not about]


def names_its_negation(user_text: str, name: str) -> bool:
    """Whether a tool's name starts with a negation cue the user said, with the rest of the name.

    ``cancel_timer`` for "cancel the timer": "cancel" negates "timer" (:func:`negated`), so the
    name is not among the wanted words, yet the words name exactly this tool ("don't cancel the
    timer" does not: the cue itself is negated; ``stop`` is one word and matches as any name).
    A cue that ends a thing stands for any other (:data:`ENDING_CUES`): "stop the timer" names
    ``cancel_timer`` too.

    Args:
        user_text: What the user said.
        name: The tool's name.

    Returns:
        True when the name has more than one word, its first is a one-word cue of
        :data:`NEGATIONS` the user said un-negated (or another of :data:`ENDING_CUES` where it is
        one), and every other word of the name was said.
    """
    first, parts = name.lower().split("_")[0], name_words(name)
    cues = ENDING_CUES if first in ENDING_CUES else {first}
    said = set(words(user_text))
    return (
        first in _CUE_WORDS
        and len(parts) > 1
        and bool(cues & set(wanted_words(user_text)))
        and parts - {first} <= said
    )


def tool_prior(user_text: str, skills: list[Skill], done: set[str], bonus: float) -> dict[str, float]:
    """Logit bonus per tool name from the user's own words (a prior for small models).

    A tool gets ``bonus`` when every word of its name (split at ``_``) or one of its
    declared ``keywords`` is in the user's text, half of it for a shared 4-letter stem ("dancing")
    when no tool matches exactly. Negated words (:func:`negated`) count as not said: "stop
    waving" names ``stop``, not ``wave`` (a new user's ``chat`` got ``stop`` and then ``wave``).
    A tool named for ending a thing (:func:`names_its_negation`) takes the cue that names it:
    "stop the timer" names ``cancel_timer`` alone, not ``stop`` too.
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
    wanted = wanted_words(user_text)
    ended = {s.name for s in skills if names_its_negation(user_text, s.name)}
    if ended:  # "stop the timer": the cue went to cancel_timer; it does not name stop as well
        wanted = [w for w in wanted if w not in ENDING_CUES]
    said, text = set(wanted), " ".join(wanted)
    out: dict[str, float] = {}
    for s in skills:
        parts = name_words(s.name)
        keys = {w for w in parts if len(w) > 2 and w not in _CUE_WORDS} | {
            k for k in s.keywords if " " not in k
        }
        phrase = any(f" {k} " in f" {text} " for k in s.keywords)  # keywords may be phrases ("look at")
        # The whole name said ("emergency stop" — not just "stop"), or one of its keywords.
        if (parts and parts <= said) or phrase or s.name in ended:
            out[s.name] = bonus
        elif any(len(k) >= 4 and len(w) >= 4 and k[:4] == w[:4] for k in keys for w in said):
            out[s.name] = bonus / 2
    if any(v == bonus for v in out.values()):  # an exact word beats a shared stem ("timer" vs "time")
        out = {k: v for k, v in out.items() if v == bonus}
    out = answered_by_reading(user_text, skills, out)
    out = {k: v for k, v in out.items() if k not in done}
    # Push "none" the other way when the user named an action, toward it when they did not.
    out[NO_TOOL] = -bonus if out else bonus
    return out


QUESTION_OPENERS = frozenset(
    "what what's whats how how's which when where who whose is are does did has have was were".split()
)
"""First words of a question that asks for facts ("how long is left on the tea timer?", "is my
timer done?"); not "can/could/would you ...", which ask for an action."""


def answered_by_reading(user_text: str, skills: list[Skill], bonuses: dict[str, float]) -> dict[str, float]:
    """A question is answered by a skill that reads: the skills that change things lose their bonus.

    "how long is left on the tea timer?" named ``timers_left`` (keywords "how long", "is left")
    and ``set_timer`` (its keyword "timer"); SmolLM2-135M called ``set_timer``, which asked "For
    how long?". Only where a question (:data:`QUESTION_OPENERS`) points at a skill without side
    effects; otherwise ``bonuses`` as they are.
    """
    said = words(user_text)
    if not said or said[0] not in QUESTION_OPENERS:
        return bonuses
    by_name = {s.name: s for s in skills}
    reading = {n for n in bonuses if n in by_name and not by_name[n].side_effects}
    return {n: v for n, v in bonuses.items() if n in reading} if reading else bonuses


def tool_words(user_text: str, skill: Skill) -> set[str]:
    """The user's words that point at ``skill``, as :func:`tool_prior` finds them (empty: none do).

    Its name's words when all were said, the words of each keyword said, or, failing those,
    the said words sharing a 4-letter stem with one of them ("dancing"). Negated words
    (:func:`negated`: "don't wave") point at nothing.
    """
    wanted = wanted_words(user_text)
    said, text = set(wanted), f" {' '.join(wanted)} "
    parts = name_words(skill.name)
    out = set(parts) if parts and (parts <= said or names_its_negation(user_text, skill.name)) else set()
    for k in skill.keywords:
        if f" {k} " in text:
            out |= set(k.split())
    if not out:
        keys = {w for w in parts if len(w) > 2 and w not in _CUE_WORDS} | {
            k for k in skill.keywords if " " not in k
        }
        out = {w for w in said if len(w) >= 4 and any(len(k) >= 4 and k[:4] == w[:4] for k in keys)}
    return out


def said_not_to(user_text: str, skill: Skill) -> bool:
    """Whether the user's words name ``skill`` only where they negate it ("don't wave", "stop dancing").

    A skill that stops (``stop`` in its name) never counts: stopping always runs ("don't stop"
    is not a reason to keep moving when the model calls ``stop``).

    Args:
        user_text: What the user said this turn.
        skill: The skill a tool call names.

    Returns:
        True when no wanted word points at ``skill`` (:func:`tool_words`) and a negated one does.
    """
    if "stop" in name_words(skill.name) or tool_words(user_text, skill):
        return False
    not_wanted = " ".join(w for w, no in zip(words(user_text), negated(user_text), strict=True) if no)
    return bool(tool_words(not_wanted, skill))


def takes_a_side(user_text: str, skill: Skill) -> bool:
    """Whether the words name a side one of ``skill``'s arguments takes.

    Args:
        user_text: What the user said this turn.
        skill: A skill whose schema may hold sides.

    Returns:
        True for a direction of a signed argument's convention (``look``'s yaw "positive =
        left": "left" or "right", :func:`~agent.conversation.small.argprior.directions`), a side
        that is a value of an enum argument ("right" for ``wave``'s ``hand``), or "other" /
        "opposite" (:data:`~agent.conversation.small.argprior.OTHER_WORDS`) where the skill has either.
    """
    said = set(wanted_words(user_text))
    named = named_sides(directions(user_text), skill.parameters)
    if any(pos or neg for pos, neg in named.values()):
        return True
    props = (skill.parameters.get("properties") or {}).values()
    enums = [set(p.get("enum") or ()) & set(OPPOSITES) for p in props]
    if said & OTHER_WORDS and (named or any(enums)):
        return True
    return any(said & e for e in enums)


def follow_on(user_text: str, skills: list[Skill], earlier: list[str], bonus: float) -> dict[str, float]:
    """The tool prior for words that name no tool but a side or a length of the tool just called.

    "And now to the right" after "look to the left" named no tool, and SmolLM2-135M answered
    with a claim ("Sorry, I didn't get that.", a new user's chat): the words go on the last
    turn's call, so its tool gets the bonus (the argument prior then points it right; for "now
    the other one" it takes the side the last call did not). So does a duration alone ("five
    minutes") after a call that takes one (:func:`takes_a_length`: "set a timer", answered "For
    how long?").

    Args:
        user_text: What the user said this turn.
        skills: Tools on offer.
        earlier: Tools the previous user turn called, in order.
        bonus: Logit bonus (0 disables the prior: returns ``{}``).

    Returns:
        ``{tool: bonus, "none": -bonus}`` for the newest of ``earlier`` whose arguments take a
        side or a length the words name; ``{}`` when the words name a tool themselves, or
        neither.
    """
    named = tool_prior(user_text, skills, set(), bonus)
    if bonus <= 0 or any(v > 0 for k, v in named.items() if k != NO_TOOL):
        return {}
    by_name = {s.name: s for s in skills}
    for name in reversed(earlier):
        if name in by_name and (
            takes_a_side(user_text, by_name[name]) or takes_a_length(user_text, by_name[name])
        ):
            return {name: bonus, NO_TOOL: -bonus}
    return {}


def takes_a_length(user_text: str, skill: Skill) -> bool:
    """Whether the words say a duration and ``skill`` has an argument "in seconds" (``set_timer``).

    "Five minutes." after "set a timer" was answered "For how long?" goes on that call.

    Args:
        user_text: What the user said this turn.
        skill: A skill whose schema may describe an argument "in seconds".

    Returns:
        True when one of its arguments is "in seconds" and the words say a duration
        (:func:`~agent.conversation.small.argprior.spoken_seconds`).
    """
    props = (skill.parameters.get("properties") or {}).values()
    has_length = any("in seconds" in str(p.get("description", "")) for p in props)
    return has_length and spoken_seconds(user_text) is not None


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
