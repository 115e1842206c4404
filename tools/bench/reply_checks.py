"""Does a reply fit its turn? Pure text checks for ``bench --accuracy`` and the tests.

:func:`reply_check`: a reply after a data skill or a background result carries that result
(:func:`carries_result`, the clock time in any spoken form) and ends with the sentence that
carries it (:func:`tail_after_data`); no reply carries a sentence of the system prompt's example
(:func:`copies_example`); a chat request gets an answer, not a refusal or a statement about the
request (:func:`answers_chat`); and no reply repeats the previous one word for word (:func:`repeats`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from agent.conversation.prompt import EXAMPLE_SAY
from agent.conversation.results import STOP_WORDS as _STOP
from agent.conversation.results import carries_result, result_text, spoken_words
from agent.conversation.small.readback import exact_data, tail_after_data

__all__ = [
    "answers_chat",
    "carries_result",
    "copies_example",
    "repeats",
    "reply_check",
    "result_text",
    "spoken_words",
    "tail_after_data",
]

REPEAT_MIN_WORDS = 3
"""Shorter replies ("Sure!", "On it.") may repeat: acknowledgements are meant to."""
_REFUSAL = re.compile(
    r"^(no\b|nope\b|sorry\b|i can'?t\b|i cannot\b|i'?m not\b|i am not\b|i don'?t\b|i do not\b|you can\b)"
)
_META = re.compile(r"\b(i am|i'm) (telling|going to tell|giving|saying)\b|\bif you want\b|\bas an ai\b")
_ASKING = frozenset("tell give say sing share make recite read".split())
"""First words of a request for something (its object must not be echoed in the reply)."""
_SIZES = frozenset("short long little quick small funny good nice new another".split())


# --- argument checks (pure) ---------------------------------------------------------------------

DEGREE_TOLERANCE = 5.0
"""How far a turn's degrees may be from the number said, degrees."""


def arguments_fit(
    said: str, calls: Iterable[tuple[str, dict[str, Any]]], schemas: dict[str, dict[str, Any]]
) -> tuple[bool, str]:
    """Whether the calls' arguments follow the words: direction, side and number.

    * direction: a signed argument (``positive = left`` in its schema) points to the one side
      the words name, by a turn a person sees ("look to the left" → yaw of at least
      :data:`~agent.conversation.small.argprior.MIN_TURN_SHARE` of its range to the left: 12 degrees of
      60); words naming both sides: any; words naming neither: any, unless they name a side of
      another signed argument of the call ("look to the left" asks for no tilt: pitch under
      that share of its range);
    * side: a ``left``/``right`` choice named with its limb ("wave your right hand" →
      ``hand = "right"``; "turn to the right and wave" leaves the hand free);
    * number: the degrees said ("thirty degrees") within :data:`DEGREE_TOLERANCE` of a
      signed argument of the same call; a duration said ("ten seconds", "five minutes") equal
      to a ``seconds`` argument; a count said ("twice") equal to a count of repetitions
      (``nod``'s ``times``).

    Args:
        said: What the user said (the manifest's text).
        calls: ``(tool, arguments)`` of the turn's calls.
        schemas: Tool name → its parameters' JSON schema.

    Returns:
        ``(ok, why)``: ``why`` names the first argument that does not follow ("" when ok).
    """
    from agent.conversation.small.argprior import (
        MIN_TURN_SHARE,
        OPPOSITES,
        directions,
        is_count,
        limb_sides,
        named_sides,
        sides,
        signed_range,
        spoken_count,
        spoken_degrees,
        spoken_seconds,
    )

    degrees = spoken_degrees(said)
    seconds = spoken_seconds(said)
    count = spoken_count(said)
    for tool, args in calls:
        schema = schemas.get(tool) or {}
        signed = sides(schema)
        named = named_sides(directions(said), schema)
        one_side = any(p != n for p, n in named.values())
        for name, pos in signed.items():
            says_pos, says_neg = named[name]
            value = float(args.get(name, 0) or 0)
            least = MIN_TURN_SHARE * signed_range((schema.get("properties") or {}).get(name, {}))
            if says_pos != says_neg and value * (1 if says_pos else -1) < least:
                return False, f"{tool} {name}={value:g} does not point {pos if says_pos else OPPOSITES[pos]}"
            if one_side and not says_pos and not says_neg and abs(value) >= least:
                return (
                    False,
                    f"{tool} {name}={value:g}, though the words ask for no {pos} or {OPPOSITES[pos]}",
                )
        if degrees is not None and signed:
            if not any(abs(abs(float(args.get(n, 0) or 0)) - degrees) <= DEGREE_TOLERANCE for n in signed):
                return False, f"{tool} does not turn the {degrees:g} degrees said"
        for name, prop in (schema.get("properties") or {}).items():
            named = limb_sides(said) & set(prop.get("enum") or [])
            chosen = args.get(name, prop.get("default"))  # left out: the skill's default runs
            if len(named) == 1 and chosen not in named:
                return False, f"{tool} {name}={chosen!r}, the words say {next(iter(named))!r}"
            if name == "seconds" and seconds is not None and name in args:
                if abs(float(args[name]) - seconds) > 0.5:
                    return False, f"{tool} seconds={args[name]} for the {seconds:g} s said"
            if count is not None and is_count(name, prop) and args.get(name, prop.get("default")) != count:
                return (
                    False,
                    f"{tool} {name}={args.get(name, prop.get('default'))} for the {count} times said",
                )
    return True, ""


# --- reply checks (pure) ------------------------------------------------------------------------


def copies_example(reply: str, example: str = EXAMPLE_SAY) -> bool:
    """Whether ``reply`` carries a whole sentence of the system prompt's example reply.

    Compared on the words' first four letters, so "It needs to recharge." copies "It needed to
    recharge."; a joke that only opens the same way ("Why did the robot cross the road?") does not.
    """
    from agent.speech.sentences import split_sentences

    said = [w[:4] for w in spoken_words(reply)]
    for sentence in split_sentences(example):
        part = [w[:4] for w in spoken_words(sentence)]
        if part and any(said[i : i + len(part)] == part for i in range(len(said) - len(part) + 1)):
            return True
    return False


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
    if copies_example(reply):
        return False, "copies the system prompt's example"
    data = [result for _, result in results if exact_data(result)]
    if data and tail_after_data(reply, data):
        return False, f"goes on after the data: {tail_after_data(reply, data)!r}"
    if chat_request is not None and not answers_chat(chat_request, reply):
        return False, "does not answer the chat request"
    return True, ""


# --- the run --------------------------------------------------------------------------------------
