"""What the user asked the robot to remember: their name and simple facts, kept across restarts.

:class:`Memory` is what the ``remember``, ``forget`` and ``recall`` skills get through their
:class:`~agent.skills.SkillContext` (``ctx.memory``). A fact is kept as the user said it, in the
first person ("I like jazz"), under a key: ``name`` for the user's name ("my name is Sam", "call
me Sam": one name, a new one replaces it), else the fact's own words in lower case (so it is
kept once). With a state store (``bolt-agent run``) every change is one transaction; without
one (``chat``, tests) the facts last as long as the process.

:meth:`Memory.context_line` is what the model is told each turn (in the state line that the
user's message carries, so the prompt prefix stays byte-stable for the KV cache): "the user's
name is Sam; the user told you: I like jazz". Pure text work, stdlib only, like the rest of
:mod:`agent.state`.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from agent.state.store import StateStore

NAME = "name"
"""The key of the user's name."""

MAX_FACTS = 20
"""Most facts kept besides the name; the oldest goes first (the context line stays short)."""
MAX_CHARS = 120
"""Longest fact kept, characters (a fact is a sentence, not a story)."""

_NAME_SAID = re.compile(
    r"\b(?:my name is|my name's|call me|i am called|i'm called|you can call me|i am|i'm)\s+"
    r"([A-Za-zÀ-ÿ][\w'-]*(?:\s+[A-Z][\w'-]*)?)",
    re.IGNORECASE,
)
_NOT_A_NAME = frozenset(
    "a an the not so very really just here fine ok okay good tired hungry happy sad sorry back home going "
    "from in at on bored cold hot ready done sure learning".split()
)
"""Words after "I am" that say how the user is, not who ("I am tired")."""

_FIRST_TO_SECOND = {
    "i": "you",
    "i'm": "you're",
    "im": "you're",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "myself": "yourself",
    "am": "are",
    "i've": "you've",
    "i'd": "you'd",
    "i'll": "you'll",
    "was": "were",
}


@dataclass(frozen=True)
class Fact:
    """One thing remembered.

    Attributes:
        key: ``name`` for the user's name, else the fact's words in lower case.
        text: The user's name, or the fact as they said it ("I like jazz").
    """

    key: str
    text: str

    def said_back(self) -> str:
        """The fact as the robot says it to the user: "your name is Sam", "you like jazz"."""
        if self.key == NAME:
            return f"your name is {self.text}"
        return to_second_person(self.text)


def to_second_person(text: str) -> str:
    """``text`` said back to its speaker: "I like my cat" -> "you like your cat"."""
    out = [_FIRST_TO_SECOND.get(w.lower(), w) for w in text.split()]
    return " ".join(out)


def name_said(text: str) -> str | None:
    """The user's name in ``text`` ("my name is Sam", "call me Sam", "I'm Sam"), or None ("I am tired")."""
    m = _NAME_SAID.search(text)
    if m is None:
        return None
    words = [w.strip(".,!?") for w in m.group(1).split()]
    words = [w for w in words if w]
    if not words or words[0].lower() in _NOT_A_NAME:
        return None
    return " ".join(w[:1].upper() + w[1:] for w in words)


def fact_key(text: str) -> str:
    """The key of a fact: its words, lower case ("I like Jazz!" -> "i like jazz")."""
    return " ".join(re.findall(r"[\w']+", text.lower()))


class Memory:
    """The user's name and facts: in memory, and in the state store when there is one.

    Args:
        store: Where they are kept across restarts; None (or a disabled store) keeps nothing.
    """

    def __init__(self, store: StateStore | None = None) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._facts: dict[str, Fact] = {}
        if store is not None:
            for key, text in store.facts():
                self._facts[key] = Fact(key, text)

    def remember(self, fact: str) -> Fact:
        """Keep ``fact`` ("my name is Sam", "I like jazz") and return it as kept.

        Raises:
            ValueError: nothing to remember (empty words).
        """
        fact = " ".join(fact.split()).strip(" .!")[:MAX_CHARS]
        if not fact_key(fact):
            raise ValueError("There was nothing to remember.")
        name = name_said(fact)
        kept = Fact(NAME, name) if name else Fact(fact_key(fact), fact[:1].upper() + fact[1:])
        with self._lock:
            self._facts.pop(kept.key, None)  # kept once, as the newest
            self._facts[kept.key] = kept
            others = [k for k in self._facts if k != NAME]
            dropped = others[: max(0, len(others) - MAX_FACTS)]
            for k in dropped:
                del self._facts[k]
        if self.store is not None:
            self.store.set_fact(kept.key, kept.text)
            if dropped:
                self.store.forget_facts(dropped)
        return kept

    def forget(self, what: str) -> list[Fact]:
        """Forget what ``what`` names: "my name", "everything", or the facts that hold its words.

        Args:
            what: The user's words ("my name", "that I like jazz", "jazz", "everything").

        Returns:
            The facts forgotten (empty: none matched).
        """
        said = set(re.findall(r"[\w']+", what.lower())) - {
            "that",
            "about",
            "the",
            "a",
            "an",
            "please",
            "forget",
        }
        with self._lock:
            if said & {"everything", "all"} and len(said) <= 3:
                gone = list(self._facts.values())
            elif said & {"name", "called"} and not said - {"my", "name", "called", "i", "am", "what", "is"}:
                gone = [self._facts[NAME]] if NAME in self._facts else []
            else:
                words = said - {"i", "my", "me", "you", "your", "is", "am", "are", "like", "have"}
                gone = [
                    f
                    for f in self._facts.values()
                    if words
                    and words <= set(fact_key(f.text if f.key != NAME else f"my name is {f.text}").split())
                ]
            for f in gone:
                del self._facts[f.key]
        if self.store is not None and gone:
            self.store.forget_facts([f.key for f in gone])
        return gone

    def name(self) -> str | None:
        """The user's name, when they said it."""
        with self._lock:
            fact = self._facts.get(NAME)
        return fact.text if fact is not None else None

    def facts(self) -> list[Fact]:
        """Everything remembered, the name first, then the facts oldest first."""
        with self._lock:
            facts = list(self._facts.values())
        return sorted(facts, key=lambda f: f.key != NAME)

    def context_line(self) -> str | None:
        """What the model is told of the user each turn, or None when nothing is remembered.

        "the user's name is Sam; the user told you: I like jazz; I have a cat".
        """
        facts = self.facts()
        if not facts:
            return None
        parts = [f"the user's name is {f.text}" for f in facts if f.key == NAME]
        told = [f.text for f in facts if f.key != NAME]
        if told:
            parts.append("the user told you: " + "; ".join(told))
        return "; ".join(parts)
