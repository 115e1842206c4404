"""Replies that say the robot is moving when no tool call moved it.

A small model copies earlier tool results as speech: after ``wave`` returned "I am waving my
right hand.", SmolLM2-135M answered a German "look to the left" with "I'm waving my right arm."
and "fly to the moon" with "I am flying to the moon.", with no call in either turn (a new
user's ``chat``, measured). A robot that says it moves while it stands still misleads the
people around it, so in a turn without a call that worked such a sentence is not spoken
(:class:`ClaimGuard`). :data:`CANNOT` is said instead where the user asked for that movement
("fly to the moon"); where they did not (:func:`asked_for`: a copied result, or words the model
did not understand), :data:`MISSED` asks them to say it another way.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agent.speech.sentences import sentence_boundaries, settled_boundaries

CANNOT = "Sorry, I can't do that."
"""Said instead of a claimed movement the user asked for and no call made."""

MISSED = "Sorry, I didn't get that. Could you say it another way?"
"""Said instead of a claimed movement the user did not ask for: the model copied an earlier result
("I am looking -30 degrees to the side" for "tell me a short joke", or "I am waving my right hand."
for a Chinese "look to the left"; measured on SmolLM2-135M), so the request went unanswered."""

MOTION_PARTICIPLES = frozenset(
    (
        "waving nodding looking turning dancing moving flying walking running jumping spinning "
        "raising lifting lowering pointing shaking tilting rotating swimming driving rolling "
        "grabbing climbing bowing clapping"
    ).split()
)
"""Verbs of the body in ``-ing`` form: "I am <verb>ing ..." claims the movement is under way."""

_OPENING = re.compile(r"\s*I(?:'m|\u2019m| am|'ll|\u2019ll| will)\s+", re.I)
_ADVERBS = frozenset({"now", "still", "already", "just", "about"})
_FUTURE = frozenset({"going", "gonna", "about"})  # "I'm going to wave", "I'm gonna nod", "I'm about to"
_DOING = frozenset({"repeating", "doing", "trying", "starting"})  # "I'm repeating the wave"
_FIGURES = re.compile(r"\blooking\s+forward\b", re.I)  # "I'm looking forward to it" moves nothing
_WORDS_TO_DECIDE = 6  # "I am going to wave now": a sentence's first words show whether it claims a movement

MOTION_VERBS = frozenset(
    (
        "wave nod look turn dance move fly walk run jump spin raise lift lower point shake tilt rotate "
        "swim drive roll grab climb bow clap"
    ).split()
)
"""The same verbs in their plain form ("I'll wave", "I'm going to dance")."""

MOTION_NOUNS = MOTION_VERBS | frozenset("movement gesture animation moves steps".split())
"""What "I am repeating / doing ..." claims when one of these follows."""


def _words_after_opening(sentence: str) -> list[str] | None:
    """The words after "I am" / "I'm" / "I'll" / "I will", lower case ("shakin'" as "shaking").

    None where the sentence does not open so.
    """
    m = _OPENING.match(sentence)
    if m is None:
        return None
    out = []
    for w in re.findall(r"[A-Za-z]+'?", sentence[m.end() :]):
        w = w.lower()
        out.append(w[:-1] + "g" if w.endswith("in'") else w.rstrip("'"))
    return out


def _stem(participle: str) -> str:
    """The verb's stem a user's word starts with: waving → wav, nodding → nod, flying → fly."""
    stem = participle[:-3]
    if len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
        stem = stem[:-1]  # nodding, spinning, clapping; not rolling or calling
    return stem


def _claimed(sentence: str, ended: bool = True) -> str | None:
    """The stem of the movement a sentence says the robot makes or will make ("wav"), "" to wait, or None.

    Args:
        sentence: The sentence so far.
        ended: It is whole (else a last word may still grow, and too few words wait: "").
    """
    said = _words_after_opening(sentence)
    if said is None:
        return None
    if not ended:
        said = said[:-1] if sentence[-1:].isalpha() or sentence[-1:] == "'" else said
    while said and said[0] in _ADVERBS - {"about"}:
        said = said[1:]
    if not said:
        return None if ended else ""
    word, rest = said[0], said[1:]
    if word in MOTION_PARTICIPLES:
        if word == "looking" and not ended and not rest:
            return ""  # "I am looking forward": one word more decides
        return None if _FIGURES.search(sentence) else _stem(word)
    if word in MOTION_VERBS:  # "I'll wave", "I will nod"
        return word[:3] if word != "bow" else word
    if word in _FUTURE or word in _DOING:
        verbs = [w for w in rest[:3] if w in MOTION_NOUNS]
        if verbs:
            return verbs[0][:3] if verbs[0] in MOTION_VERBS else "mov"
        return None if ended or len(rest) >= 3 else ""
    return None


def claims_motion(sentence: str) -> bool:
    """Whether ``sentence`` says the robot is moving now, or is about to.

    Args:
        sentence: One sentence of a reply.

    Returns:
        True for "I am waving my right hand.", "I'm now dancing for you!", "I am shakin' my head.",
        "I'm going to wave.", "I'll nod.", "I am repeating the wave." (a verb of the body after
        "I am" / "I'm", with an adverb allowed, or after "going to", "gonna", "about to", "I'll",
        "I will", or "repeating" / "doing" before a movement); False for "I'm looking forward to it."
    """
    return bool(_claimed(sentence, ended=True))


def asked_for(user_text: str, claim: str) -> bool:
    """Whether the user's words ask for the movement ``claim`` says is under way.

    Args:
        user_text: What the user said this turn.
        claim: A sentence :func:`claims_motion` accepts ("I am flying to the moon.").

    Returns:
        True when a word of ``user_text`` starts with the claimed verb's stem (flying → "fly";
        waving → "wave", "waves"; nodding → "nod").
    """
    stem = _claimed(claim, ended=True)
    if not stem:
        return False
    return any(w.startswith(stem) for w in re.findall(r"[a-z]+", user_text.lower()))


class ClaimGuard:
    """A speech stream that leaves out sentences claiming a movement while no call was made.

    A sentence that starts with "I" is held until its first words show whether it claims a
    movement (:func:`claims_motion`; at most :data:`_WORDS_TO_DECIDE` words, and the speech
    stage waits for a sentence's end anyway); a claim is dropped to its end when ``acted()``
    says no call was made, anything else is forwarded. One instance per model round.

    Args:
        downstream: Receives speech deltas.
        acted: Whether a call of the turn has worked by now (a round's call comes before its speech).
    """

    def __init__(self, downstream: Callable[[str], None], acted: Callable[[], bool]) -> None:
        self.downstream, self.acted = downstream, acted
        self.dropped: list[str] = []  # the claims left out, whole sentences
        self._text = ""  # this round's speech so far
        self._sent = 0  # characters of _text forwarded or dropped
        self._start = 0  # where the current sentence starts
        self._verdict: bool | None = None  # the current sentence: True = drop, False = forward

    def feed(self, delta: str) -> None:
        """Take one speech delta: forward it, hold it, or drop it with its claiming sentence."""
        if delta:
            self._text += delta
            self._advance(final=False)

    def flush(self) -> None:
        """End of the round: decide and forward (or drop) what is held."""
        self._advance(final=True)

    def kept(self, say: str) -> str:
        """``say`` (the round's whole speech) without the sentences this guard dropped."""
        for claim in self.dropped:
            say = say.replace(claim, "", 1)
        return " ".join(say.split())

    def _advance(self, final: bool) -> None:
        while True:
            # Only the text from the pending sentence on: the sentences before it are settled.
            pending = self._text[self._start :]
            bounds = sentence_boundaries(pending) if final else settled_boundaries(pending)
            ends = [self._start + b for b in bounds if b > 0]
            end = ends[0] if ends else (len(self._text) if final else None)
            if self._verdict is None:
                self._verdict = self._decide(self._text[self._start : end], end is not None)
                if self._verdict is None:
                    return  # held: not enough words yet
            if not self._verdict:
                stop = end if end is not None else self._unsettled()
                if stop > self._sent:
                    self.downstream(self._text[self._sent : stop])
                    self._sent = stop
            if end is None:
                return
            if self._verdict:
                self.dropped.append(self._text[self._start : end].strip())
            self._start, self._verdict, self._sent = end, None, max(self._sent, end)
            if end >= len(self._text):
                return

    def _unsettled(self) -> int:
        """Where the text that may already belong to the next sentence begins (after a last . ! ?)."""
        cut = max(self._text.rfind(c, self._start) for c in ".!?")
        return cut + 1 if cut >= 0 else len(self._text)

    def _decide(self, sentence: str, ended: bool) -> bool | None:
        """True: drop it; False: forward it; None: wait for more words."""
        words = sentence.split()
        if not words:
            return False if ended else None
        if not words[0].startswith("I"):
            return False
        stem = _claimed(sentence, ended)
        if stem == "" and len(words) <= _WORDS_TO_DECIDE:
            return None  # "I am going": the words after it decide
        if stem:
            return not self.acted()
        whole = len(words) if ended or sentence[-1:].isspace() else len(words) - 1
        return False if ended or whole >= 3 else None
