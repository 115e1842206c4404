"""Tool results as people hear them: their words, and whether a reply passes them on.

:func:`spoken_result` is what of a result is said (text as it is, a dict by its words);
:func:`carries_result` and :func:`carries_reason` judge whether a reply passes a result or a
failure's reason on, spoken forms allowed. Shared by the turn loop, the small-model profile's
read-back (:mod:`agent.conversation.small.readback`) and the reply checks of ``bench --accuracy``.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from agent.speech.words import words

CLOCK = re.compile(r"(?<![\d:])(?:[01]?\d|2[0-3]):[0-5]\d(?![\d:])")
"""A clock time as a result writes it ("08:18", "8:18")."""
ERROR_PREFIX = re.compile(r"^\w+ failed: (?:\w+: )?")
"""The ``NAME failed: SomeError:`` prefix of a failed call's message for the model."""

STOP_WORDS = frozenset(
    "a an the is are was be to of and or in on at for with it its it's this that i you me my your we "
    "what do does did can could would will just now here there so not no yes please tell".split()
)


def spoken_words(text: str) -> list[str]:
    """``text`` as the words a listener hears: numbers and times spelled out, lower case, no punctuation."""
    from agent.speech.text import clean_for_speech

    return words(clean_for_speech(str(text)))


def contains_words(words: list[str], part: list[str]) -> bool:
    """Whether ``part`` occurs in ``words`` as a run of consecutive words (False when ``part`` is empty)."""
    n = len(part)
    return n > 0 and any(words[i : i + n] == part for i in range(len(words) - n + 1))


NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]|\.\d)")
"""A number as written in a result ("10", "0.8"; not the digits of "10:41" or "v2")."""


@functools.lru_cache(maxsize=256)
def _content(text: str) -> frozenset[str]:
    """The 4-letter stems of ``text``'s content words (three letters or more, not stop words).

    Cached: a result is compared with the growing reply at every token of its round.
    """
    return frozenset(_stem(w) for w in spoken_words(text) if len(w) >= 3 and w not in STOP_WORDS)


def _stem(word: str) -> str:
    return word[:4]


def result_text(result: Any) -> str:
    """A tool result as plain text (JSON for dicts and lists)."""
    return result if isinstance(result, str) else json.dumps(result, default=str)


SPOKEN_FIELDS = ("description", "summary")
"""Fields of a dict result that say it in words, best first: a vision-language model's
``description``, then a ``summary`` line (``describe_scene``: "2 people: one on the left ...")."""


def spoken_result(result: Any) -> str:
    """What of a tool result a reply reads back: text as it is; a dict by its words.

    Args:
        result: A skill's return value.

    Returns:
        ``result`` when it is text; the first non-empty :data:`SPOKEN_FIELDS` of a dict, its
        first letter a capital ("Nobody in view; ..."); "" for anything else (a status dict).
    """
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        words = next(
            (v.strip() for k in SPOKEN_FIELDS if isinstance(v := result.get(k), str) and v.strip()), ""
        )
        return words[:1].upper() + words[1:]  # "nobody in view; ..." starts a spoken sentence
    return ""


def carries_result(reply: str, result: Any) -> bool:
    """Whether ``reply`` passes on a tool result, spoken forms allowed.

    A clock time in the result (``HH:MM``) must be in the reply ("06:49", "6:49" and "six
    forty-nine" are the same); otherwise one of its numbers, not counting numbers inside a
    clock time of the reply ("10 seconds" is not carried by "10:59"); otherwise one of its
    content words (three letters or more, same first four letters: "see" for "I have no
    camera, so I cannot see"). An error result is judged by its message, without the
    ``NAME failed: SomeError:`` prefix.

    Args:
        reply: What the robot said.
        result: The tool's result (text, dict, ...), or its error message.
    """
    text = ERROR_PREFIX.sub("", result_text(result))
    times = CLOCK.findall(text)
    if times:
        said = spoken_words(reply)
        return any(contains_words(said, spoken_words(t)) for t in times)
    said = spoken_words(CLOCK.sub(" ", reply))
    numbers = NUMBER.findall(text)
    if numbers:
        return any(contains_words(said, spoken_words(n)) for n in numbers)
    return bool(_content(text) & {_stem(w) for w in said})


REASON_SHARE = 0.5
"""Share of a failure reason's content words a reply must say to carry it."""


def carries_reason(reply: str, reason: str, share: float = REASON_SHARE) -> bool:
    """Whether ``reply`` says why a call failed: :data:`REASON_SHARE` of ``reason``'s content words.

    Stricter than :func:`carries_result`, whose one shared word is enough for data: a reply can
    share a word of the reason ("move") and say nothing of why (``docs/small-model.md``,
    "The measurements behind the code").

    Args:
        reply: What the robot said.
        reason: The message the skill raised (an ``NAME failed: Error:`` prefix is ignored).
        share: Share of its content words that must be said (1.0: all of them).

    Returns:
        True when at least half of the reason's content words (three letters or more, not stop
        words, same first four letters) are in the reply.
    """
    content = _content(ERROR_PREFIX.sub("", reason))
    said = {_stem(w) for w in spoken_words(reply)}
    return bool(content) and len(content & said) >= share * len(content)


def as_sentence(message: str) -> str:
    """A message as a spoken sentence: stripped, a capital first, a full stop at the end ("" stays "")."""
    message = message.strip()
    if not message:
        return ""
    message = message[0].upper() + message[1:]
    return message if message[-1] in ".!?" else message + "."


def failure_reason(outcome: Any) -> str:
    """What the skill of a failed call raised for people, as a spoken sentence.

    Args:
        outcome: A :class:`~agent.skills.ToolOutcome`.

    Returns:
        ``outcome.raised`` as a sentence (:func:`as_sentence`); "" for a call that worked or
        failed with nothing said for people (an unknown tool, a timeout).
    """
    return as_sentence(outcome.raised) if not outcome.ok and outcome.raised.strip() else ""
