"""Decisions on a finished transcript: is it the robot's own echo, a stop command, addressed to us?

Pure functions plus one small state holder, all on normalised text (lower case, letters,
digits, apostrophes and single spaces). Fuzzy matching uses rapidfuzz (Levenshtein-based
scores 0..100), which tolerates ASR spellings ("hey robert", "hay bolt").

* :func:`echo_of` / :func:`is_echo` — the transcript is (part of) what the robot said
  recently: the robot hearing itself. Compared with ``partial_ratio`` so a fragment of a long
  reply matches; a transcript longer than the sentence must be made of the robot's words only.
* :func:`stop_command` — a short transcript containing a stop phrase ("stop", "freeze",
  "be quiet" …): handled at once, without the model.
* :class:`Attention` — ``always`` mode accepts everything; ``wake`` mode needs a wake phrase
  at the start of the transcript, except within ``follow_up_s`` after a reply. The wake
  phrase is removed from the text passed on.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from rapidfuzz import fuzz

from agent.config import LiveConfig
from agent.speech.words import normalize


def is_echo(transcript: str, recent_speech: list[str], min_score: float) -> bool:
    """True when ``transcript`` matches what the robot recently said (see :func:`echo_of`)."""
    return echo_of(transcript, recent_speech, min_score) is not None


def echo_of(transcript: str, recent_speech: list[str], min_score: float) -> str | None:
    """What the robot said that ``transcript`` is the echo of, or None.

    A transcript no longer than one of the robot's sentences is its echo when it is a fuzzy
    fragment of it (``partial_ratio``). A longer one must also be made only of words the robot
    said (each word of three letters or more within ``min_score`` of one of them): "What time is
    it?" is the user's even right after the robot's "What is it?" (``ratio`` 80), while "Sure, I
    nodded twice" after "Sure." and "I nodded twice." is the robot's.

    Args:
        transcript: ASR text of a user utterance.
        recent_speech: Texts the robot spoke recently (newest last).
        min_score: Fuzzy score 0..100 needed.

    Returns:
        The robot's sentence it matched (its sentences joined, for an echo that runs over
        several), as said; None: not an echo.
    """
    t = normalize(transcript)
    if len(t) < 4:
        return None
    said = [(normalize(text), text) for text in recent_speech]
    said = [(s, text) for s, text in said if s]
    for s, text in said:
        if len(t) <= len(s) and fuzz.partial_ratio(t, s) >= min_score:
            return text
    if _unsaid(t, {w for s, _ in said for w in s.split()}, min_score):
        return None
    for s, text in said:
        if fuzz.ratio(t, s) >= min_score:
            return text
    joined = " ".join(s for s, _ in said)  # an echo that runs over several sentences
    if len(t) <= len(joined) and fuzz.partial_ratio(t, joined) >= min_score:
        return " ".join(text for _, text in said)
    return None


def _unsaid(text: str, said: set[str], min_score: float) -> bool:
    """True when ``text`` has a word of 3+ letters that matches no word in ``said``."""
    return any(
        len(w) >= 3 and w not in said and all(fuzz.ratio(w, s) < min_score for s in said)
        for w in text.split()
    )


def stop_command(
    transcript: str, phrases: list[str], max_words: int, other_things: frozenset[str] = frozenset()
) -> str | None:
    """The stop phrase in a short transcript, or None.

    Args:
        transcript: ASR text.
        phrases: Stop phrases ("stop", "be quiet", ...).
        max_words: Transcripts with more words are not stop commands (the model handles them).
        other_things: Words that name something else to end ("timer": "stop the timer" is for
            the timer, not the body; ``agent.listening.skill_words.things_to_end``): a
            transcript with one of them is not a stop command (the model handles it).

    """
    words = normalize(transcript).split()
    if not words or len(words) > max_words or other_things & set(words):
        return None
    text = " ".join(words)
    for p in sorted(phrases, key=len, reverse=True):
        pn = normalize(p)
        if re.search(rf"(^| ){re.escape(pn)}( |$)", text):
            return pn
        if len(pn) >= 5 and any(
            fuzz.ratio(pn, " ".join(words[i : i + len(pn.split())])) >= 85 for i in range(len(words))
        ):
            return pn
    return None


def strip_wake(transcript: str, phrases: list[str], min_score: float) -> str | None:
    """The transcript without its leading wake phrase, or None when it does not start with one.

    Returns ``""`` when the transcript is only the wake phrase.
    """
    words = normalize(transcript).split()
    raw = transcript.split()
    for p in phrases:
        n = len(normalize(p).split())
        for k in (n, n + 1, n - 1):  # ASR may split or merge a word
            if 0 < k <= len(words) and fuzz.ratio(" ".join(words[:k]), normalize(p)) >= min_score:
                return " ".join(raw[k:]).lstrip(" ,.!?") if len(raw) >= k else ""
    return None


class Attention:
    """Whether a transcript is addressed to the robot.

    Args:
        cfg: ``[live]`` (attention mode, wake phrases, score, follow-up window in s).
        clock: Monotonic time source, s (tests pass a fake).

    """

    def __init__(self, cfg: LiveConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.cfg = cfg
        self.clock = clock
        self._follow_until = -1.0

    def replied(self) -> None:
        """A reply finished playing: open the follow-up window."""
        self._follow_until = self.clock() + self.cfg.follow_up_s

    def accept(self, transcript: str) -> str | None:
        """Text to pass to the model, or None when not addressed to the robot."""
        if self.cfg.attention == "always":
            return transcript
        rest = strip_wake(transcript, self.cfg.wake_phrases, self.cfg.wake_score)
        if rest is not None:
            return rest or None
        if self.clock() <= self._follow_until:
            return transcript
        return None
