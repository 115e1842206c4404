"""Reading data back, for the small-model profile: where a reply's data starts and stops.

The turn judges with :func:`carries_data` (a short sentence whole, a longer result by half its
words). :class:`DataTail`: a reply that reads back exact data or a short sentence ends with the
sentence that carries it: "It is 22:49 on Tuesday 1 December. It needs to recharge." (the
system prompt's example joke leaking after the time) becomes "It is 22:49 on Tuesday 1
December." :class:`DataHead`: it starts with it too. A capable model's reply is never cut so
(the plain loop says its words as written); see ``docs/small-model.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from agent.control import StopSignal
from agent.conversation.results import (
    CLOCK,
    ERROR_PREFIX,
    NUMBER,
    REASON_SHARE,
    carries_reason,
    carries_result,
    contains_words,
    result_text,
    spoken_result,
    spoken_words,
)
from agent.speech.sentences import settled_boundaries

EXACT_MAX_WORDS = 12
"""Longest result without a clock time that counts as exact data, words ("the timer for 10 seconds")."""


def exact_data(result: Any) -> bool:
    """Whether ``result`` is exact data: a clock time, or a short result with a number.

    Only such a result ends its reply ("It is 22:49 on Tuesday 1 December.", "10 seconds"). A
    description ("A man holds a red mug. He smiles.", or "2 people sit at a table; one holds a
    mug.") is carried by any one of its words or numbers, so its first sentence would cut off the rest.
    """
    text = ERROR_PREFIX.sub("", result_text(result))
    if CLOCK.search(text):
        return True
    return bool(re.search(r"\d", text)) and len(text.split()) <= EXACT_MAX_WORDS


def short_sentence(result: Any) -> bool:
    """Whether ``result`` is a sentence written for people: :data:`EXACT_MAX_WORDS` words or fewer.

    Such a result is said whole (:func:`carries_data`) and ends its reply, like exact data: the
    emergency stop's "Emergency stop: my motors are off until someone clears it." was answered
    "The robot needs to recharge, so it's off until someone clears it. It was a joke." (SmolLM2-135M,
    greedy, a new user's chat): half of its words, and a falsehood.
    """
    text = ERROR_PREFIX.sub("", result_text(result))
    return exact_data(result) or 0 < len(text.split()) <= EXACT_MAX_WORDS


def said_as_written(result: Any) -> bool:
    """Whether ``result`` is a whole sentence written for people, to be said as it is.

    A :func:`short_sentence` of at least three words that ends in ``.``, ``!`` or ``?`` ("It is
    02:11 on Sunday 6 December."), as text or as a dict's words (:func:`spoken_result`). In
    grammar mode such a data result needs no model round to be read back: a round that read it
    back could only say it again (:class:`DataHead` and :class:`DataTail` keep the data sentence
    alone), and SmolLM2-135M sometimes said it wrongly ("23:19 is 23:19 on Saturday 5 December.",
    ``bench --accuracy``), after a round that cost about 300 ms of voice-to-voice here
    (``bench``: 1258-1279 ms for time.wav, the slowest shared command). A bare value ("73") is
    not one: the model's round puts it in a sentence.
    """
    text = spoken_result(result).strip()
    return short_sentence(text) and len(text.split()) >= 3 and text[-1:] in ".!?"


def carries_data(reply: str, result: Any, whole: bool = False) -> bool:
    """Whether ``reply`` says a result it reads back, as the turn loop judges.

    A clock time by :func:`carries_result`; other exact data (:func:`exact_data`) by every one
    of its numbers ("My battery is at 73 percent, about 2 hours left." is not said by "I only
    have 2 hours left.", a new user's custom skill); another short sentence
    (:func:`short_sentence`: a confirmation, a failure's reason) by all of its content words; a
    longer result (a description) by :func:`carries_reason`'s share of its words: one shared
    word ("time", "stop") does not say it.

    Args:
        reply: What the robot said.
        result: The result read back.
        whole: Every content word must be said (a finished background call's result: "Time is
            up: ... 10 seconds is done." was answered "I'm done. I'll play 10 seconds of your
            game.").
    """
    text = ERROR_PREFIX.sub("", result_text(result))
    if whole:
        return carries_reason(reply, text, 1.0)
    if CLOCK.search(text):
        return carries_result(reply, result)
    if exact_data(result):
        said = spoken_words(CLOCK.sub(" ", reply))
        numbers = NUMBER.findall(text)
        return bool(numbers) and all(contains_words(said, spoken_words(n)) for n in numbers)
    return carries_reason(reply, text, 1.0 if short_sentence(result) else REASON_SHARE)


def tail_after_data(
    reply: str, results: list[Any], carried: Callable[[str, Any], bool] = carries_result
) -> str:
    """What ``reply`` says after the sentence that carries every one of ``results`` ("" when nothing).

    Args:
        reply: What the robot said.
        results: The data results the reply reads back.
        carried: Whether a text carries a result (:func:`carries_result`, or :func:`carries_data`
            as :class:`DataTail` judges).

    Returns:
        The words after the end of that sentence; the whole reply when it never carries them all.
    """
    from agent.speech.sentences import split_sentences

    sentences = split_sentences(reply)
    for i in range(len(sentences)):
        said = " ".join(sentences[: i + 1])
        if all(carried(said, r) for r in results):
            return " ".join(sentences[i + 1 :]).strip()
    return reply.strip()


class DataHead:
    """A speech stream that starts with the data a round reads back: what comes before it is left out.

    Everything is held until the text carries every result (:func:`carries_data`); the text from
    the last sentence start that still carries them all is then forwarded, and the rest of the
    round goes straight on. A round that never says its data forwards nothing (the turn then
    reads the data back as written). SmolLM2-135M opened data rounds with the system prompt's
    example joke and more ("Why did the robot went on holiday? The robot needs to recharge, so
    it's off until someone clears it." for an emergency stop; "Let me look. Why did the robot
    went on holiday? 2 people: ..."; a new user's chat and the bench, greedy). The speech stage
    waits for a sentence's end anyway, so a data sentence the model writes first costs no time.

    Args:
        results: The data the round reads back (not failure reasons: those are said after the
            rounds as written).
        downstream: Receives speech deltas.
        carried: Whether a text says a result (:func:`carries_data`).
    """

    def __init__(
        self,
        results: list[str],
        downstream: Callable[[str], None],
        carried: Callable[[str, Any], bool] = carries_data,
    ) -> None:
        self.results, self.downstream, self.carried = list(results), downstream, carried
        self._text = ""  # this round's speech so far
        self.dropped = ""  # what was left out before the data
        self.opened = False

    def feed(self, delta: str) -> None:
        """Take one speech delta: hold it until the data is said, then forward from the data on."""
        if self.opened:
            self.downstream(delta)
            return
        self._text += delta
        if all(self.carried(self._text, r) for r in self.results):
            from agent.speech.sentences import sentence_boundaries

            start = next(
                b
                for b in reversed([0, *sentence_boundaries(self._text)])
                if b == 0 or all(self.carried(self._text[b:], r) for r in self.results)
            )
            self.dropped, self.opened = self._text[:start].strip(), True
            if self._text[start:]:
                self.downstream(self._text[start:])

    def flush(self) -> None:
        """End of the round: a round that never said its data is left out whole."""
        if not self.opened:
            self.dropped = self._text.strip()

    def kept(self, say: str) -> str:
        """``say`` (the round's whole speech) without what this stream left out before the data."""
        if self.dropped and say.strip().startswith(self.dropped):
            return say.strip()[len(self.dropped) :].strip()
        return say


class DataTail:
    """A speech stream that ends with the sentence carrying a round's data results.

    Text is forwarded as it comes until every result has been said (:func:`carries_data`); the
    rest of that sentence is then held until its end is certain (the next sentence begins, or the
    round ends), forwarded, and the stream is closed: ``stop`` is set so the model stops writing.

    Args:
        results: The tool results the round reads back (its copy sources).
        downstream: Receives speech deltas.
        stop: Set (reason ``"data said"``) when the data sentence is over.
        carried: Whether a text says a result (:func:`carries_data`).
    """

    def __init__(
        self,
        results: list[str],
        downstream: Callable[[str], None],
        stop: StopSignal,
        carried: Callable[[str, Any], bool] = carries_data,
    ) -> None:
        self.results, self.downstream, self.stop, self.carried = list(results), downstream, stop, carried
        self._text = ""  # this round's speech so far
        self._sent = 0  # characters of _text forwarded
        self._carried_at: int | None = None  # where every result had been said
        self.closed = False

    def feed(self, delta: str) -> None:
        """Take one speech delta: forward it, hold it, or (after the data sentence) drop it."""
        if self.closed or not delta:
            return
        self._text += delta
        if self._carried_at is None:
            self._forward_to(len(self._text))
            if all(self.carried(self._text, r) for r in self.results):
                self._carried_at = len(self._text)
            return
        ends = [b for b in settled_boundaries(self._text) if b >= self._carried_at]
        if ends:
            self._forward_to(len(self._text[: ends[0]].rstrip()))
            self.closed = True
            self.stop.set("data said")

    def flush(self) -> None:
        """End of the round: forward what is held (the data sentence ended with the round)."""
        if not self.closed:
            self._forward_to(len(self._text.rstrip()))

    def _forward_to(self, end: int) -> None:
        if end > self._sent:
            self.downstream(self._text[self._sent : end])
            self._sent = end
