"""Semantic end-of-turn: has the user finished, judged from the audio *and* the words.

At the first short silence of a pause (``[turn] short_silence_ms``, 200 ms) the turn-taking stage
(:mod:`agent.pipeline.turn_taking`) has the utterance so far transcribed by the ASR stage and asks
:class:`EndOfTurnJudge`.
A finished turn ends at once, with its transcript already made (nothing is left to decode after
the endpoint); an unfinished one waits for more speech, and ends anyway after
``[turn] long_silence_ms`` (1.6 s), still with the transcript made at the pause when the user
said nothing more.

Why two signals. Smart Turn v3.2 (:mod:`agent.listening.smart_turn`) hears prosody, but on the shared
fixtures it is wrong where it matters: it calls jfk.flac's "And so my fellow Americans," complete
(0.93: the turn would break there) and four of the ten espeak-ng commands unfinished (robotic
prosody: nod 0.05, wave_right 0.03, what_see 0.08, turn_then_wave 0.04). Whisper punctuates
both "... fellow Americans." and "Please look to the left." with a full stop, so punctuation
cannot tell them apart either. The words can: a chat model's probability that the user's
sentence ends where the transcript ends (the end-of-turn marker or ``.?!`` next, punctuation
stripped first) — the idea of LiveKit's text turn detector, here with the embedded SmolLM2-135M
as it is, no fine-tuning. Measured with the robot's system prompt (log10 P): finished commands
-0.10 … -0.91 (look_left -0.84, stop -1.81, a misheard turn_then_wave -1.87), cut sentences
"fellow americans" -1.73, "… ask not" -1.88, "… can do for you" -1.93, "… and then" -3.29,
"what time is" -3.90. One threshold on either signal fails some case; the rules below pass
every shared case but the misheard turn_then_wave (which waits for the long silence):

1. a transcript that ends in a continuation (a comma, "and", "then", "the", "to", ...): unfinished;
1a. an amount of turn with no way said ("Turn your head thirty degrees"): unfinished
   (``no_direction``): the direction is still to come;
2. a stop phrase: finished (stopping never waits);
2a. a hesitation alone ("um", "hmm", "let me think", "okay so", "well"): unfinished (``hesitation``):
   the text model scores "um let me think" -1.08, a finished sentence, and Smart Turn is not even
   asked then, so "Hmm, let me think. [1 s] Can you nod?" used to become two turns;
2b. an unsure transcript (Whisper's guess at a hum: "Hmm." heard as "them.", see
   :mod:`agent.speech.asr`): unfinished (``unsure``), the words are still coming;
2c. only the robot's name ("Hey robot," before the request): unfinished (``address``): piper's
   "Hey robot, wave your right hand." pauses at the comma, and "hey robot" scored -1.12;
3. text ``>= text_complete`` (-1.2): finished (``text``);
4. Smart Turn ``> smart_turn_threshold`` (0.5) and text ``>= text_with_audio`` (-1.6): finished
   (``smart_turn``);
5. otherwise unfinished.

Both signals are computed at every pause, whichever rule decides, and every verdict carries
them (``--verbose`` and the console show them; ``bench --turns`` measures the thresholds on
them): Smart Turn starts ``[turn] smart_turn_ms`` (32 ms) into the pause
(:meth:`EndOfTurnJudge.hear`), while the CPU would only wait for the transcript started at
``early_asr_ms``, so its 50 ms add nothing to the verdict.

Neither signal at a 200 ms pause tells a pause after a complete clause ("Look up, [0.6 s] and
then look down") from a finished command ("Look up.") on the bench's synthetic voices, so the
text decides first and Smart Turn only where the words do not (the measurements:
``docs/turn-taking.md``). What does tell them apart is the words after the pause: an utterance
that starts with "and then", "to the", "if" (:func:`starts_as_continuation`) soon after a turn
ended continues that turn (``[turn] continue_ms``, :mod:`agent.pipeline.asr_stage`), which is
then answered whole; and more silence (``[turn] confirm_ms``: the reply is prepared while it
lasts). What the silence must confirm grows where the evidence is doubtful
(:func:`agent.pipeline.turn_taking.confirm_ms`): words Whisper was unclear about and a
``smart_turn`` verdict (the words alone did not say finished) wait ``doubtful_confirm_ms``.

Without the text model rules 3-4 become "Smart Turn says complete"; without Smart Turn rule 4
is dropped; without both, endpointing is silence only (``[vad] min_silence_ms``) with a notice.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from agent.config import LLMConfig, TurnConfig
from agent.speech.words import words

log = logging.getLogger(__name__)

CONTINUATIONS = frozenset(
    "and or but so then because if when while than that which who whose where the a an to of for "
    "with at in on from by about into my your his her their our its um uh like".split()
)
"""Last words after which an English sentence is not over (conjunctions, articles, prepositions,
possessives, fillers)."""

CONTINUATION_STARTS: tuple[tuple[str, ...], ...] = tuple(
    tuple(p.split())
    for p in (
        "and", "or", "but", "then", "because", "if", "unless", "with", "without", "to", "into",
        "onto", "for", "from", "by", "while", "until", "than", "a little", "little bit",
    )
)  # fmt: skip
"""First words that cannot begin a new request: what follows them finishes the last sentence
("Turn your head to the left, [1 s] and then wave", "Turn thirty degrees [1 s] to the right")."""

AMOUNT_UNITS = frozenset("degree degrees".split())
"""Units of a turn's amount: a command that ends on one with no way said is not over."""

DIRECTION_WORDS = frozenset(
    "left right up down forward forwards back backward backwards around ahead straight "
    "clockwise counterclockwise anticlockwise center centre middle".split()
)
"""Words that say which way a turn goes."""

HESITATION_WORDS = frozenset("um uh uhm umm hmm hm mm mmm em er erm ah eh oh well so like".split())
"""Words that alone say only "I am still thinking" (fillers, not answers: "okay" and "yes" are answers)."""

HESITATION_PHRASES = (
    ("let", "me", "think"),
    ("let", "me", "see"),
    ("okay", "so"),
    ("ok", "so"),
    ("hold", "on"),
    ("you", "know"),
    ("i", "mean"),
    ("give", "me", "a", "second"),
    ("just", "a", "second"),
)
"""Phrases that alone say only "I am still thinking"."""

ADDRESS_WORDS = frozenset("hey hi ok okay yo excuse me".split())
"""Words that call someone before the request ("hey", "okay", "excuse me")."""

MAX_WORDS = 48
"""Words of the transcript the text model reads (its last ones), so any turn fits its 512-token context."""

_SENTINEL = "\u2063TURN\u2063"  # invisible separator: never in a transcript


@dataclass(frozen=True)
class Verdict:
    """The judgement of one pause.

    Attributes:
        complete: The user has finished their turn.
        rule: Which rule decided: ``continuation``, ``no_direction``, ``stop``, ``hesitation``,
            ``unsure``, ``address``, ``text``, ``smart_turn``, ``unfinished`` (no rule said
            finished) or ``empty`` (nothing was heard).
        smart_turn: Smart Turn's probability, at every pause (-1: no Smart Turn model).
        text_score: log10 probability that the sentence ends here (0 and below; 1.0: not run).
        ms: Time the judgement took (ASR excluded), ms.
    """

    complete: bool
    rule: str
    smart_turn: float = -1.0
    text_score: float = 1.0
    ms: float = 0.0


def ends_in_continuation(text: str) -> bool:
    """Whether ``text`` stops where an English sentence cannot end.

    Args:
        text: A transcript (any case, any punctuation).

    Returns:
        True for a trailing comma, dash or ellipsis, or a last word in :data:`CONTINUATIONS`.
    """
    t = text.strip()
    if not t:
        return False
    if t.endswith((",", "...", "…", "-", "—", ";", ":")):
        return True
    said = words(t)
    return bool(said) and said[-1] in CONTINUATIONS


def lacks_a_direction(text: str) -> bool:
    """Whether ``text`` ends on an amount of turn and says no way to turn.

    "Turn your head thirty degrees [1 s] to the right": the words scored -0.67, a finished
    sentence, and the turn was answered before its direction came (``bench --turns``,
    paused_14); a robot cannot turn thirty degrees without one.

    Args:
        text: A transcript (any case, any punctuation).

    Returns:
        True when the last word is a unit of :data:`AMOUNT_UNITS` and no word is one of
        :data:`DIRECTION_WORDS`.
    """
    said = words(text)
    return len(said) >= 2 and said[-1] in AMOUNT_UNITS and not set(said) & DIRECTION_WORDS


def starts_as_continuation(text: str) -> bool:
    """Whether ``text`` begins where only a sentence already under way can go on.

    Args:
        text: A transcript (any case, any punctuation).

    Returns:
        True when its first words are one of :data:`CONTINUATION_STARTS` ("and then wave",
        "to the right", "if you can hear me"); False for "" and for a request of its own.
    """
    said = words(text)
    return any(tuple(said[: len(p)]) == p for p in CONTINUATION_STARTS)


def is_hesitation(text: str) -> bool:
    """Whether ``text`` holds nothing but hesitation: fillers and thinking-aloud phrases.

    One word before a thinking-aloud phrase counts as a misheard filler: Whisper heard espeak-ng's
    "Um, let me think." as "come let me think" (``bench --turns``, filler_08).

    Args:
        text: A transcript (any case, any punctuation).

    Returns:
        True when every word belongs to :data:`HESITATION_WORDS` or a phrase of
        :data:`HESITATION_PHRASES` ("Hmm, let me think.", "um okay so"), or when only the first
        word does not and a phrase follows ("come let me think"); False for "" and for anything
        with a word of its own ("um, wave", "okay", "wave um").
    """
    said = words(text)
    if _only_hesitation(said):
        return True
    rest = said[1:]
    return _only_hesitation(rest) and any(_phrase_at(rest, i) for i in range(len(rest)))


def _phrase_at(said: list[str], i: int) -> tuple[str, ...] | None:
    """The hesitation phrase that starts at word ``i`` of ``said``, if any."""
    return next((p for p in HESITATION_PHRASES if tuple(said[i : i + len(p)]) == p), None)


def _only_hesitation(said: list[str]) -> bool:
    """Whether the words ``said`` are all fillers or thinking-aloud phrases (False when empty)."""
    i = 0
    while i < len(said):
        phrase = _phrase_at(said, i)
        if phrase is not None:
            i += len(phrase)
        elif said[i] in HESITATION_WORDS:
            i += 1
        else:
            return False
    return bool(said)


def is_address(text: str, names: frozenset[str]) -> bool:
    """Whether ``text`` only calls the robot ("Hey robot,", "Okay Bolt"): the request follows.

    Args:
        text: A transcript (any case, any punctuation).
        names: What the robot answers to, lower case ("robot", the wake phrases' names).

    Returns:
        True when every word is a name or in :data:`ADDRESS_WORDS` and one is a name; False for
        "hi" or "okay" alone (answers in themselves).
    """
    said = words(text)
    return any(w in names for w in said) and all(w in names or w in ADDRESS_WORDS for w in said)


def robot_names(wake_phrases: list[str]) -> frozenset[str]:
    """What the robot answers to: "robot" and the words of the wake phrases that are not greetings."""
    return frozenset({"robot"} | {w for p in wake_phrases for w in words(p) if w not in ADDRESS_WORDS})


class TextEndOfTurn:
    """A chat model's probability that the user's sentence ends where the transcript ends.

    The prompt is the model's own chat template with the robot's system prompt and the user's
    words (trailing punctuation removed, lower case, as Whisper's punctuation is unreliable);
    the score is ``log10`` of the next-token probability of the template's end-of-user-turn
    marker plus ``.``, ``?`` and ``!``. The system-prompt prefix stays in this model's own KV
    cache, so one call evaluates only the user's words (about 10 tokens).

    Args:
        model_path: A GGUF with a chat template (the embedded SmolLM2-135M by default).
        system_prompt: The robot's system prompt (the scores above were measured with it).
        threads: CPU threads.

    Raises:
        agent.engines.base.LLMError: the GGUF cannot be loaded or has no usable template.
    """

    def __init__(self, model_path: Path, system_prompt: str, threads: int = 1) -> None:
        from agent.engines.base import LLMError
        from agent.engines.embedded.model import ChatModel

        cfg = LLMConfig(model=str(model_path), n_ctx=512, threads=threads, n_gpu_layers=0)
        self.model = ChatModel(model_path, cfg)
        rendered = self.model.render(
            [{"role": "system", "content": system_prompt}, {"role": "user", "content": _SENTINEL}]
        )
        if _SENTINEL not in rendered:
            raise LLMError(f"{model_path.name}: its chat template dropped the user's message")
        self._prefix, suffix = rendered.split(_SENTINEL, 1)
        marker = self.model.special_tokens(suffix)[:1]
        self._ends = sorted({*marker, *(t for p in (".", "?", "!") for t in self.model.plain_tokens(p)[:1])})
        self.score("hello")  # fills the KV cache with the system prompt

    def score(self, text: str) -> float:
        """log10 probability that the user's sentence ends after ``text``.

        Args:
            text: The transcript so far.

        Returns:
            A value <= 0 (about -0.1 for a finished command, below -3 after "and then").

        Raises:
            agent.engines.base.LLMError: the system prompt alone does not fit the 512-token context.
        """
        words = re.sub(r"[\s.?!,;:…]+$", "", text.strip()).lower()
        words = " ".join(words.split()[-MAX_WORDS:])  # the end decides; keeps a 30 s turn in n_ctx
        logits = self.model.next_token_logits(self._prefix + words).astype(np.float64)
        logits -= logits.max()
        p = np.exp(logits[self._ends]).sum() / np.exp(logits).sum()
        return float(math.log10(max(p, 1e-12)))

    def close(self) -> None:
        """Free the model."""
        self.model.close()


class AudioEndOfTurn(Protocol):
    """What the judge needs of an audio end-of-turn model (:class:`~agent.listening.smart_turn.SmartTurn`)."""

    def probability(self, audio: np.ndarray) -> float:
        """Probability (0..1) that the speaker finished, from ``(n,)`` float32 16 kHz audio."""
        ...


class EndOfTurnJudge:
    """The rules of the module docstring over Smart Turn and the text model.

    Both signals are computed at every pause, whichever rule decides (a verdict shows them
    both). Smart Turn's audio judgement may start ahead (:meth:`hear`, ``[turn]
    smart_turn_ms`` into the pause, while the CPU waits for the transcript anyway), so it adds
    nothing to the pause's verdict.

    Args:
        cfg: ``[turn]`` thresholds.
        smart_turn: The audio model (:class:`~agent.listening.smart_turn.SmartTurn`), or None.
        text: A :class:`TextEndOfTurn`, or None.
        is_stop: Whether a transcript is a stop phrase.
        names: What the robot answers to (:func:`robot_names`): a pause after only its name waits.
    """

    def __init__(
        self,
        cfg: TurnConfig,
        smart_turn: AudioEndOfTurn | None,
        text: TextEndOfTurn | None,
        is_stop: Callable[[str], bool],
        names: frozenset[str] = frozenset({"robot"}),
    ) -> None:
        self.cfg, self.smart_turn, self.text, self.is_stop = cfg, smart_turn, text, is_stop
        self.names = names
        self._pool = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="smart-turn") if smart_turn else None
        )
        self._ahead: tuple[int, Future[float]] | None = None  # (pause id, Smart Turn's answer)

    def hear(self, pause_id: int, audio: np.ndarray) -> None:
        """Start Smart Turn on a pause's audio on the judge's own thread; returns at once.

        The :meth:`judge` of the same ``pause_id`` then takes its answer (waiting for it if it
        is still running) instead of running the model itself. An earlier pause's answer not
        taken yet is dropped.

        Args:
            pause_id: The pause (:attr:`agent.listening.vad.VADUpdate.pause_id`).
            audio: ``(n,)`` float32 16 kHz: the utterance so far, with the pause's first silence.
        """
        if self.smart_turn is None or self._pool is None:
            return
        if self._ahead is not None:
            self._ahead[1].cancel()
        self._ahead = (pause_id, self._pool.submit(self.smart_turn.probability, audio))

    def _audio_says(self, audio: np.ndarray, pause_id: int | None) -> float:
        """Smart Turn's probability for this pause: heard ahead when it was, else now (-1: no model)."""
        if self.smart_turn is None:
            return -1.0
        ahead, self._ahead = self._ahead, None
        if ahead is not None and pause_id is not None and ahead[0] == pause_id:
            try:
                return ahead[1].result()
            except CancelledError:  # not started: run it here
                pass
        return self.smart_turn.probability(audio)

    def judge(
        self, audio: np.ndarray, transcript: str, unsure: bool = False, pause_id: int | None = None
    ) -> Verdict:
        """Judge one pause.

        Args:
            audio: ``(n,)`` float32 16 kHz: the utterance so far, with the pause's first silence.
            transcript: What the recognizer made of ``audio`` ("" when nothing).
            unsure: The recognizer only guessed ``transcript`` (:attr:`agent.speech.asr.ASRResult.unsure`:
                a hum or a noise): unfinished like a hesitation, unless it is a stop phrase.
            pause_id: The pause, when :meth:`hear` may have started Smart Turn on it.

        Returns:
            The :class:`Verdict`, with Smart Turn's probability whichever rule decided (-1 only
            without the model) and the text score where the rules reached the text model.

        Raises:
            Whatever a model raised (the caller ends the turn by silence).
        """
        t0 = time.perf_counter()
        st = self._audio_says(audio, pause_id)

        def done(complete: bool, rule: str, tx: float = 1.0) -> Verdict:
            return Verdict(
                complete, rule, round(st, 3), round(tx, 2), round((time.perf_counter() - t0) * 1000, 1)
            )

        if not transcript.strip():
            return done(False, "empty")
        if ends_in_continuation(transcript):
            return done(False, "continuation")
        if lacks_a_direction(transcript):
            return done(False, "no_direction")
        if self.is_stop(transcript):
            return done(True, "stop")
        if is_hesitation(transcript):
            return done(False, "hesitation")
        if unsure:
            return done(False, "unsure")
        if is_address(transcript, self.names):
            return done(False, "address")
        tx = self.text.score(transcript) if self.text is not None else 1.0
        if self.text is not None and tx >= self.cfg.text_complete:
            return done(True, "text", tx)
        audio_says = st > self.cfg.smart_turn_threshold
        if audio_says and (self.text is None or tx >= self.cfg.text_with_audio):
            return done(True, "smart_turn", tx)
        return done(False, "unfinished", tx)

    def close(self) -> None:
        """Free the text model and Smart Turn's thread."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self.text is not None:
            self.text.close()
