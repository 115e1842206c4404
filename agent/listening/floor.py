"""Who keeps the floor while the robot speaks: an acknowledgement, a noise, or an interruption.

People talk over a speaker all the time without wanting the floor: "uh-huh", "yeah", "right", a
laugh, a cough. A robot that stops at each of them, and answers them as turns, is tiring; one
that does not stop for "wait", "no, the other hand" or a question is worse. The decision has to
be made within a few hundred milliseconds, from what is known by then:

* **the early words**: the user's speech over the robot is transcribed ``[live]
  overlap_words_ms`` into it (and again every ``overlap_recheck_ms`` while it goes on): tiny.en
  hears "yeah", "mm-hmm", "okay" in their first 200 ms as well as "wait" or "no";
* **the audio**: how long the speech has lasted. Speech that goes on over the robot for ``[live]
  barge_in_ms`` before any word is known stops it anyway (the safe side);
* **what the robot is saying**: after a question ("Shall I dance?") a "yes" or "okay" is an
  answer, not an acknowledgement.

:func:`overlap_kind` sorts a transcript into :data:`BACKCHANNEL` (acknowledgements and fillers
only), :data:`NOTHING` (no words: a laugh, a cough, a noise Whisper could not make words of, or
only guessed at) and :data:`INTERRUPTION` (anything else). Only an interruption stops the robot;
the others never become turns (:mod:`agent.pipeline.asr_stage` reports them as
:class:`~agent.events.Backchannel`). A stop the words decide is a *hold* (the speaker pauses, the
turn goes on being prepared): if the utterance turns out to be an acknowledgement or nothing, the
robot resumes from the start of the sentence it was cut in (:mod:`agent.pipeline.pipeline`).
"""

from __future__ import annotations

import re

from agent.speech.words import words

BACKCHANNEL = "backchannel"
"""Words that only acknowledge ("uh-huh", "yeah", "right", "okay", "I see") or hesitate."""
NOTHING = "nothing"
"""No words: a laugh, a cough, a noise (Whisper heard nothing, or only guessed)."""
INTERRUPTION = "interruption"
"""Anything else: a stop, a correction, a question, a new request."""
UNDECIDED = ""
"""Not known yet (:func:`early_kind`): the first words are cut or only guessed; the next check decides."""

BACKCHANNEL_WORDS = frozenset(
    "yeah yes yep yup yah ya ok okay okey kay right alright sure uh huh uhhuh uhuh mhm mhmm mmhmm "
    "mm mmm hm hmm hmmm um umm uh ah aha oh ooh wow cool nice great good fine true totally exactly "
    "indeed gotcha cool".split()
)
"""Words that alone acknowledge or hesitate ("Uh-huh." is "uh" "huh" to :func:`agent.speech.words.words`)."""

BACKCHANNEL_PHRASES: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split())
    for p in (
        "i see", "got it", "all right", "that's right", "that's true", "makes sense", "sounds good",
        "go on", "i know", "of course", "oh really", "really", "interesting", "i guess",
    )
)  # fmt: skip
"""Short phrases that acknowledge ("I see", "got it", "go on")."""

LAUGH_WORDS = frozenset("ha haha hahaha hah heh hehe hehehe hee ho hoho lol".split())
"""What Whisper writes for a laugh."""

NOT_BACKCHANNEL = frozenset("no nope wait stop hold hey sorry actually but excuse what why how".split())
"""Words that never only acknowledge: said over the robot they want the floor."""

OPENERS = frozenset({"but"})
"""Words of :data:`NOT_BACKCHANNEL` that only open what follows: alone and only guessed (unsure),
:func:`early_kind` leaves them undecided, as it does other guessed words; heard surely, or with
words after them, they interrupt (docs/turn-taking.md)."""

ANSWER_WORDS = frozenset("yes yeah yep yup ok okay sure alright right no nope".split())
"""Words that answer the robot's question ("Shall I dance?" "Yes."): a turn, not an acknowledgement."""

_ANNOTATION = re.compile(r"[\[(*][^\])*]*[\])*]")
"""Whisper's notes on sounds: "(laughs)", "[Laughter]", "*coughs*"."""

MAX_WORDS = 5
"""An acknowledgement is this many words at most ("yeah yeah I see"); longer is an interruption."""

MAX_REPEAT = 3
"""The longest phrase, in words, whose back-to-back repeats :func:`heard_words` folds into one."""


def heard_words(text: str) -> list[str]:
    """The words of a transcript of speech over the robot, Whisper's notes and loops taken out.

    A phrase of up to :data:`MAX_REPEAT` words repeated back to back counts once ("Got it Got it
    Got it" → "got it"), and a last repeat cut short is dropped ("... got it got"): Whisper's
    decoder loops on cut words, and a loop must not make an acknowledgement look longer than
    :data:`MAX_WORDS`.

    Args:
        text: A transcript ("" when Whisper heard nothing).

    Returns:
        Lower-case words without "(laughs)"-style notes, each run of a repeated phrase kept once.
    """
    said = words(_ANNOTATION.sub(" ", text))
    out: list[str] = []
    loop: list[str] = []  # the phrase folded last, and where it ends in ``out``
    loop_end = 0
    for w in said:
        out.append(w)
        for n in range(1, MAX_REPEAT + 1):
            if len(out) >= 2 * n and out[-n:] == out[-2 * n : -n]:
                loop = out[-n:]
                del out[-n:]
                loop_end = len(out)
                break
    tail = out[loop_end:] if loop else []
    if 0 < len(tail) < len(loop) and tail == loop[: len(tail)]:
        del out[loop_end:]  # the loop cut by the token limit ("... Got it Got")
    return out


def is_laugh(text: str) -> bool:
    """Whether a transcript is only laughter ("Ha ha ha!", "heh heh", "(laughs)"): nothing to answer."""
    said = heard_words(text)
    if not said:
        return bool(re.search(r"laugh", text, re.IGNORECASE))
    return all(w in LAUGH_WORDS for w in said)


def overlap_kind(text: str, unsure: bool = False, robot_asked: bool = False) -> str:
    """What the user's words over the robot's speech are.

    Args:
        text: The transcript of the user's speech so far ("" when Whisper heard nothing).
        unsure: Whisper only guessed (:attr:`agent.speech.asr.ASRResult.unsure`: a hum, a noise).
        robot_asked: The robot's sentence being said (or just said) is a question: "yes",
            "okay", "no" answer it.

    Returns:
        :data:`BACKCHANNEL`, :data:`NOTHING` or :data:`INTERRUPTION`.
    """
    said = heard_words(text)
    if not said or all(w in LAUGH_WORDS for w in said):
        return NOTHING
    if robot_asked and set(said) & ANSWER_WORDS:
        return INTERRUPTION
    if set(said) & NOT_BACKCHANNEL or len(said) > MAX_WORDS:
        return INTERRUPTION
    if _only_acknowledgement(said):
        return BACKCHANNEL
    return NOTHING if unsure else INTERRUPTION


def _only_acknowledgement(said: list[str]) -> bool:
    """Whether every word is an acknowledgement, a filler, a laugh or part of an acknowledging phrase."""
    i = 0
    while i < len(said):
        phrase = next((p for p in BACKCHANNEL_PHRASES if tuple(said[i : i + len(p)]) == p), None)
        if phrase is not None:
            i += len(phrase)
        elif said[i] in BACKCHANNEL_WORDS or said[i] in LAUGH_WORDS:
            i += 1
        else:
            return False
    return True


def early_kind(text: str, unsure: bool = False, robot_asked: bool = False) -> str:
    """What the first words of speech that goes on over the robot are, so far.

    As :func:`overlap_kind`, but :data:`UNDECIDED` where a later check may still tell: no words
    yet (the first 200 ms of "No, the other hand" can be a breath), words Whisper only guessed
    (``unsure``: a greedy decode under its log-probability threshold; a laugh's "ha ha" stays
    :data:`NOTHING`), and an acknowledgement the check cut ("got" of "got it",
    :func:`may_become_acknowledgement`), and a lone opening word only guessed (:data:`OPENERS`: "but").
    Speech that stays undecided for ``[live] barge_in_ms`` stops the robot
    (:mod:`agent.pipeline.overlap`).
    """
    said = heard_words(text)
    if not said:
        return UNDECIDED
    kind = overlap_kind(text, unsure, robot_asked)
    if kind == NOTHING and unsure and not all(w in LAUGH_WORDS for w in said):
        return UNDECIDED
    if kind == INTERRUPTION and not robot_asked and may_become_acknowledgement(text):
        return UNDECIDED
    if kind == INTERRUPTION and unsure and len(said) == 1 and said[0] in OPENERS:
        return UNDECIDED
    return kind


def may_become_acknowledgement(text: str) -> bool:
    """Whether ``text``, the first words of speech that goes on, may still turn into an acknowledgement.

    True when every word but the last is an acknowledgement (:func:`overlap_kind` would say so)
    and the last begins one of :data:`BACKCHANNEL_PHRASES` ("got" of "got it", "I" of "I see"):
    the early check heard the phrase cut, and the next one decides.
    """
    said = heard_words(text)
    if not said or set(said) & NOT_BACKCHANNEL:
        return False
    head, last = said[:-1], said[-1]
    starts = any(len(p) > 1 and p[0] == last for p in BACKCHANNEL_PHRASES)
    return starts and (not head or _only_acknowledgement(head))


def is_question(sentence: str) -> bool:
    """Whether the robot's ``sentence`` asks something (it ends with a question mark)."""
    return sentence.rstrip().rstrip("\"')").endswith("?")
