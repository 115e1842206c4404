"""Asking for the same again: the last action ("do that again") or the last words ("what did you say?").

A capable model reads its own history and calls the same tool again, or says its words again. The
stand-in cannot: "one more time" read the time out (the word "time"), and "do that again" never
repeated anything. The small profile answers these turns itself (:meth:`SmallRules.answer`).
"""

from __future__ import annotations

from agent.speech.words import words

AGAIN = (
    ("again",),
    ("one", "more", "time"),
    ("once", "more"),
    ("same", "again"),
    ("repeat", "that"),
    ("repeat", "it"),
    ("encore",),
)
"""Word runs that ask for the last action again ("do that again", "one more time")."""

SAID = (
    ("what", "did", "you", "say"),
    ("what", "did", "you", "just", "say"),
    ("what", "was", "that"),
    ("say", "that", "again"),
    ("say", "it", "again"),
    ("repeat", "what", "you", "said"),
    ("repeat", "what", "you", "just", "said"),
    ("come", "again"),
    ("pardon",),
    ("didn't", "catch", "that"),
    ("didn", "t", "catch", "that"),
)
"""Word runs that ask for the last words again ("what did you just say?", "pardon?")."""

_NOT = frozenset({"don't", "dont", "not", "never", "stop", "no"})


def _has(said: list[str], run: tuple[str, ...]) -> int:
    """Where ``run`` starts in ``said`` (-1: nowhere)."""
    n = len(run)
    return next((i for i in range(len(said) - n + 1) if tuple(said[i : i + n]) == run), -1)


def asks_what_was_said(text: str) -> bool:
    """Whether the words ask the robot to say its last words again ("what did you just say?")."""
    said = words(text)
    return any(_has(said, run) >= 0 for run in SAID)


def asks_again(text: str) -> bool:
    """Whether the words ask for the last action again, not negated ("don't do that again" does not).

    Args:
        text: What the user said.

    Returns:
        True for "again", "do that again", "one more time", "once more", "repeat that"; False
        where a negation comes before it, or where the words ask what was said.
    """
    said = words(text)
    if asks_what_was_said(text):
        return False
    for run in AGAIN:
        at = _has(said, run)
        if at >= 0 and not _NOT & set(said[:at]):
            return True
    return False
