"""The words that name a skill, and what a stop phrase may end besides motion and speech.

Used by the end-of-turn judge and the ASR stage's stop fast path ("stop the timer" is no stop
command: :func:`things_to_end`), by the ASR hotwords, and by the small-model profile's tool prior
(:mod:`agent.conversation.small.toolprior`).
"""

from __future__ import annotations

from agent.skills import GENERIC_NAME_WORDS, Skill

STOPWORDS = GENERIC_NAME_WORDS | {"the", "and", "for", "you", "can", "your", "with", "please"}
"""Words of a tool's name the user need not say for a name match (:func:`name_words`)."""

ENDING_CUES = frozenset({"stop", "cancel", "quit"})
"""Cues that end a thing: a tool named for one of them (``cancel_timer``) is named by any of them
with the rest of its name ("stop the timer" names ``cancel_timer``)."""


def name_words(name: str) -> set[str]:
    """The words of a tool's name that the user must all say for a name match.

    Split at ``_``, generic verbs (:data:`STOPWORDS`) left out, short words kept: ``look_at``
    needs "look" *and* "at", so "please look to the left" names ``look``, not ``look_at``.
    """
    return {w for w in name.lower().split("_") if w and w not in STOPWORDS}


def things_to_end(skills: list[Skill]) -> frozenset[str]:
    """Words that, said with a stop phrase, name something to end besides motion and speech.

    The name words and one-word keywords of each skill with side effects that does not move
    the body and does not stop it (the timers': "timer", "alarm", ...). "stop the timer" took the
    stop fast path, which halts the body and silences the robot, and the timer went on (a new
    user's ``chat``); with these words said the model answers instead (``cancel_timer``).

    Args:
        skills: The skills on offer.

    Returns:
        Lower-case words.
    """
    out: set[str] = set()
    for s in skills:
        if not s.side_effects or s.moves or "stop" in s.name.lower().split("_"):
            continue
        out |= {w for w in name_words(s.name) if len(w) > 2} | {k for k in s.keywords if " " not in k}
    return frozenset(out - ENDING_CUES)
