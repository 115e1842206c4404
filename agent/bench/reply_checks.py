"""Does a reply fit its turn? Pure text checks for ``bench --accuracy`` and the tests.

:func:`reply_check`: a reply after a data skill or a background result carries that result
(:func:`carries_result`, the clock time in any spoken form); a chat request gets an answer, not
a refusal or a statement about the request (:func:`answers_chat`); and no reply repeats the
previous one word for word (:func:`repeats`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from agent.speech.words import words

REPEAT_MIN_WORDS = 3
"""Shorter replies ("Sure!", "On it.") may repeat: acknowledgements are meant to."""
_REFUSAL = re.compile(
    r"^(no\b|nope\b|sorry\b|i can'?t\b|i cannot\b|i'?m not\b|i am not\b|i don'?t\b|i do not\b|you can\b)"
)
_META = re.compile(r"\b(i am|i'm) (telling|going to tell|giving|saying)\b|\bif you want\b|\bas an ai\b")
_CLOCK = re.compile(r"(?<![\d:])(?:[01]?\d|2[0-3]):[0-5]\d(?![\d:])")
_ERROR_PREFIX = re.compile(r"^\w+ failed: (?:\w+: )?")
_ASKING = frozenset("tell give say sing share make recite read".split())
"""First words of a request for something (its object must not be echoed in the reply)."""
_SIZES = frozenset("short long little quick small funny good nice new another".split())
_STOP = frozenset(
    "a an the is are was be to of and or in on at for with it its it's this that i you me my your we "
    "what do does did can could would will just now here there so not no yes please tell".split()
)


# --- reply checks (pure) ------------------------------------------------------------------------


def spoken_words(text: str) -> list[str]:
    """``text`` as the words a listener hears: numbers and times spelled out, lower case, no punctuation."""
    from agent.speech.text import clean_for_speech

    return words(clean_for_speech(str(text)))


def _contains(words: list[str], part: list[str]) -> bool:
    n = len(part)
    return n > 0 and any(words[i : i + n] == part for i in range(len(words) - n + 1))


def _stem(word: str) -> str:
    return word[:4]


def result_text(result: Any) -> str:
    """A tool result as plain text (JSON for dicts and lists)."""
    return result if isinstance(result, str) else json.dumps(result, default=str)


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
    text = _ERROR_PREFIX.sub("", result_text(result))
    times = _CLOCK.findall(text)
    if times:
        said = spoken_words(reply)
        return any(_contains(said, spoken_words(t)) for t in times)
    said = spoken_words(_CLOCK.sub(" ", reply))
    numbers = re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]|\.\d)", text)
    if numbers:
        return any(_contains(said, spoken_words(n)) for n in numbers)
    content = {_stem(w) for w in spoken_words(text) if len(w) >= 3 and w not in _STOP}
    return bool(content & {_stem(w) for w in said})


def repeats(reply: str, previous: str) -> bool:
    """``reply`` says the same words as ``previous`` (case, punctuation and number forms ignored)."""
    a = spoken_words(reply)
    return bool(a) and a == spoken_words(previous)


def answers_chat(request: str, reply: str) -> bool:
    """Whether ``reply`` answers a chat request rather than refusing or talking about it.

    "Tell me a short joke" answered with "I am telling you a joke", "It is not a joke", "It's
    a joke about the moon" or "No, no, no!" fails. The reply must have three words or more,
    must not open with a refusal ("no", "sorry", "I can't", "I'm not"...) or announce itself
    ("I am telling you..."); and when the request asks for something ("tell me a joke", "sing
    a song"), the reply must not say what it is or is not ("I'm a joke", "it is not a joke"),
    talk about telling it ("tell you a joke") or describe it ("a joke about ...").

    Args:
        request: What the user asked.
        reply: What the robot said.
    """
    words = spoken_words(reply)
    low = " ".join(words)
    if len(words) < 3 or _REFUSAL.match(low) or _META.search(low):
        return False
    asked = spoken_words(request)
    if not asked or asked[0] not in _ASKING:
        return True
    wanted = [w for w in asked[1:] if len(w) >= 3 and w not in _STOP and w not in _SIZES]
    for thing in wanted:
        t = re.escape(thing)
        about = (
            rf"\b(i am|i'm|it is|it's|this is|that is|that's|here is|here's)( not)?( a| an| the| my)? {t}"
            rf"|\b(tell|telling|told|tells)( you| me)?( a| an| the)? {t}|\b{t}s? about\b"
        )
        if re.search(about, low):
            return False
    return True


def reply_check(
    reply: str | None,
    previous: str,
    results: Iterable[tuple[str, Any]] = (),
    chat_request: str | None = None,
    expect_reply: bool = True,
) -> tuple[bool, str]:
    """Check one turn's reply.

    A repeat of the previous reply fails unless it is a short acknowledgement (under
    :data:`REPEAT_MIN_WORDS` words: "Sure!" twice is fine) or carries this turn's results (the
    same clock time asked twice in a minute).

    Args:
        reply: The reply text; None when the turn had no reply (the stop fast path).
        previous: The reply before it in the conversation ("" for a first turn).
        results: ``(tool, result)`` of the data skills and background calls the reply must pass on.
        chat_request: The user's words when the turn is a chat request (no tool expected).
        expect_reply: False when silence is right (a stop command).

    Returns:
        ``(ok, why)``: ``why`` names the first failed check ("" when ok).
    """
    if not reply:
        return (not expect_reply, "" if not expect_reply else "no reply")
    results = list(results)
    missing = [tool for tool, result in results if not carries_result(reply, result)]
    copied = previous and repeats(reply, previous) and len(spoken_words(reply)) >= REPEAT_MIN_WORDS
    if copied and (missing or not results):
        return False, "repeats the previous reply"
    if missing:
        return False, f"does not carry the result of {missing[0]}"
    if chat_request is not None and not answers_chat(chat_request, reply):
        return False, "does not answer the chat request"
    return True, ""


# --- the run --------------------------------------------------------------------------------------
