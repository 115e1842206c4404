"""ASR stage: audio → transcripts; a finished utterance → a user turn, or a reason to drop it.

One thread (faster-whisper releases the GIL, so it runs beside the model and the voice). It
answers the turn-taking stage's :class:`~agent.events.PauseCheck` questions with a
:class:`~agent.events.PauseTranscript` (skipping a pause the user has talked through), and for
each utterance: transcribe it (unless its pause's transcript came with it; the recognizer
filters hallucinations), then handle a stop phrase at once without the model (the *stop fast
path*: interrupt, run the ``stop`` skill; checked first, since stopping is always safe), drop
the robot's own echo (the transcript matches what it said in the last 30 s, only where a speaker
can be heard and only for audio taken while it was audible), drop a hesitation or a laugh
alone, drop speech not addressed to the robot (wake phrase), and otherwise start a turn: a new
turn id, a ``transcript`` message and a :class:`~agent.events.UserTurn` for the turn driver.
Typed lines (``TextIn``) skip the audio checks.

Speech over the robot: an :class:`~agent.events.OverlapCheck` is answered with its words and what
they are (:func:`~agent.listening.floor.overlap_kind`, with whether the robot's sentence is a
question: then "yes" answers it); an utterance that began over the robot (``Utterance.overlap``)
whose words are only an acknowledgement or no words at all is a
:class:`~agent.events.Backchannel`, never a turn, and any overlap utterance that becomes no turn
resumes a turn held for it (:class:`~agent.events.Resume`).

An utterance that starts within ``[turn] continue_ms`` of the last turn's utterance, with words
that only finish a sentence ("and then wave", "to the right":
:func:`~agent.listening.end_of_turn.starts_as_continuation`), continues that turn: its user turn
carries both parts and names the turn it finishes (``UserTurn.continues``), which the driver drops.
A pause after a complete clause sounds like an end to both signals ("Turn your head to the left,
[1 s] and then wave": text -0.48); the words after it are what tells.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from agent.config import LiveConfig
from agent.control import ReleaseGate
from agent.events import (
    Backchannel,
    Error,
    Event,
    Interrupt,
    OverlapCheck,
    OverlapTranscript,
    PauseCheck,
    PauseTranscript,
    Resume,
    Skipped,
    TextIn,
    ToolCall,
    ToolResult,
    Transcript,
    UserTurn,
    Utterance,
)
from agent.listening.echo import EchoGate
from agent.listening.end_of_turn import is_hesitation, starts_as_continuation
from agent.listening.floor import INTERRUPTION, early_kind, is_laugh, is_question, overlap_kind
from agent.listening.pace import PauseModel
from agent.listening.skill_words import things_to_end
from agent.listening.turns import Attention, echo_of, stop_command
from agent.pipeline.queues import StageQueue, TurnGate, run_stage
from agent.pipeline.turnbook import TurnBook
from agent.pipeline.work import WorkTracker
from agent.skills import SkillContext, SkillRegistry
from agent.speech.asr import ASRResult, WhisperASR
from agent.speech.audio import SAMPLE_RATE

log = logging.getLogger(__name__)

OVERLAP_MAX_TOKENS = 16
"""Tokens a check of speech over the robot decodes at most: its first words decide; a looping
decode ("What time? What time? ...") took over a second to its end."""
ECHO_WINDOW_S = 30.0
"""Transcripts are compared with what the robot said this recently, s."""
PAUSE_PAD = 6400
"""Zeros (400 ms at 16 kHz) appended to a pause's audio before it is transcribed."""


@dataclass(frozen=True)
class _Said:
    """The last turn started from speech: what a continuation would finish."""

    turn_id: int
    text: str
    source: str
    end_ms: float


class ASRStage:
    """The ASR thread body.

    Args:
        asr: The recognizer.
        live: ``[live]`` (echo guard, stop phrases, attention).
        inbox: ``PauseCheck`` / ``Utterance`` / ``TextIn`` / ``Shutdown``.
        turn_taking: Where pause transcripts go.
        driver_inbox: Where user turns go.
        gate: Allocates turn ids.
        publish: The bus (``Interrupt`` requests included).
        work: The pipeline's work in flight (a dropped utterance is one item less).
        book: What the robot said recently (the echo check).
        registry: Skills (the stop fast path calls ``stop``).
        ctx: What skills get.
        realtime: Input keeps coming while the robot speaks: a new turn interrupts the current one.
        bias: Use ASR biasing (hotwords / initial prompt) when configured.
        echo_guard: Drop transcripts that repeat the robot's recent speech (only where a
            speaker can be heard by the microphone).
        echo: The listener's echo gate: whether the robot's voice is really in an utterance
            whose words read like its own (None: the words alone decide).
        post_roll_ms: ``[vad] speech_pad_ms``: audio kept after an utterance's speech end, ms.
        early_pad_ms: Silence an early transcript (``PauseCheck.early``) lacks against one made at
            the judgement (``[turn] short_silence_ms - early_asr_ms``), ms: added as zeros, so
            both end in the same silence.
        continue_ms: ``[turn] continue_ms``: longest gap after which an utterance may continue the
            last turn, ms (0: never).
        pauses: The speaker's learned pauses: the gap before a continuation is one (None: not learned).
        sure_logprob: ``[turn] unclear_logprob``: a turn's short-window decode (``[asr]
            turn_context_s``) under it is decoded again on the full window (natural log).
    """

    def __init__(
        self,
        asr: WhisperASR,
        live: LiveConfig,
        inbox: StageQueue,
        turn_taking: StageQueue,
        driver_inbox: StageQueue,
        gate: TurnGate,
        publish: Callable[[Event], None],
        work: WorkTracker,
        book: TurnBook,
        registry: SkillRegistry,
        ctx: SkillContext,
        realtime: bool,
        bias: bool = True,
        echo_guard: bool = True,
        echo: EchoGate | None = None,
        post_roll_ms: int = 400,
        early_pad_ms: int = 0,
        continue_ms: int = 0,
        pauses: PauseModel | None = None,
        sure_logprob: float | None = None,
    ) -> None:
        self.asr, self.live, self.inbox, self.driver_inbox = asr, live, inbox, driver_inbox
        self.sure_logprob = sure_logprob
        self.turn_taking, self.gate, self.publish, self.work, self.book = (
            turn_taking,
            gate,
            publish,
            work,
            book,
        )
        self.registry, self.ctx, self.realtime, self.bias = registry, ctx, realtime, bias
        self._other_things = things_to_end(list(registry.skills.values()))  # "stop the timer"
        self.echo_guard = echo_guard and live.echo_guard
        self.echo, self.post_roll_s = echo, post_roll_ms / 1000.0
        self.attention = Attention(live)
        self.early_pad = early_pad_ms * SAMPLE_RATE // 1000  # samples
        self.continue_ms = continue_ms
        self.pauses = pauses
        self._said: _Said | None = None
        self.before_turn: Callable[[str], bool] | None = None
        """Sees each transcript about to become a turn (after the stop, echo and hesitation checks);
        True: it was handled without a turn (standby's sleep phrases, :mod:`agent.pipeline.standby`)."""

    def run(self) -> None:
        """Process utterances until ``Shutdown``."""
        run_stage(self.inbox, self._one, self._failed)

    def _one(self, msg: Event) -> None:
        if isinstance(msg, PauseCheck):  # not an item of work: a question from the turn-taking stage
            self._pause(msg)
            return
        if isinstance(msg, OverlapCheck):
            self._overlap(msg)
            return
        if not self._handle(msg):
            self.work.finished()  # dropped: one item less in flight
            if isinstance(msg, Utterance) and msg.overlap:  # no turn came of it: a held turn goes on
                self.publish(Resume(-1, "no turn"))

    def _failed(self, msg: Event, e: Exception) -> None:
        log.exception("ASR stage failed")
        self.publish(Error(-1, f"speech recognition failed: {e.__class__.__name__}: {e}; still listening"))
        if isinstance(msg, PauseCheck):  # the turn-taking stage waits for an answer
            self.turn_taking.put(PauseTranscript(-1, msg.pause_id, None, f"{e.__class__.__name__}: {e}"))
        elif isinstance(msg, OverlapCheck):
            self.turn_taking.put(OverlapTranscript(-1, msg.check_id, None, ""))
        else:
            self.work.finished()

    def _heard_during(self, msg: Utterance) -> list[str]:
        """What the robot said while ``msg``'s speech was captured, or just before.

        Just before: within the echo gate's delay and tail, its echo could still arrive.
        """
        start = msg.t_speech_end - (msg.end_ms - msg.start_ms) / 1000.0
        margin_s = (self.live.echo_max_delay_ms + self.live.echo_tail_ms) / 1000.0
        return self.book.heard_texts(ECHO_WINDOW_S, (start, msg.t_speech_end), margin_s)

    def _echoed(self, msg: Utterance, text: str, said: str) -> bool:
        """``text`` reads like the robot's ``said``: is the robot's voice really in ``msg``'s audio?

        Words alone cannot tell ("What time is it?" over a story where the cat "wondered what
        time it was", issue 22's soak): the transcript is the robot's echo only where the
        playback explains at least ``[live] echo_text_min_share`` of the audio. Publishes the
        skip; returns True when the utterance is dropped.
        """
        share = 1.0  # no playback to compare with: the words decide, as they always did
        if self.echo is not None and msg.audio is not None:
            # The audio ends 0..post-roll after the speech end (and a frame either way).
            slack_s = self.post_roll_s + 0.064
            share = self.echo.echo_share(msg.audio, msg.t_speech_end + self.post_roll_s, slack_s)
        if share < self.live.echo_text_min_share:
            log.info(
                "%r reads like the robot's %r, but its voice explains %.1f%% of the audio: the user's",
                text,
                said,
                100 * share,
            )
            return False
        reason = f"echo of the robot's own speech: {text!r} (like its {said!r}; {share:.0%} of the audio)"
        self.publish(Skipped(-1, reason, msg.source))
        return True

    def _not_a_request(self, msg: Utterance, res: ASRResult, where: str) -> bool:
        """An unsure guess, the robot's echo, a hesitation or the standby's words: no turn (reported)."""
        if res.unsure:  # a hum or a noise Whisper guessed at ("Hmm." -> "them."): not a request
            self.publish(
                Skipped(
                    -1,
                    f"{where}: unsure transcript {res.text!r} (logprob {res.avg_logprob:.2f} at "
                    f"fallback temperature {res.temperature:.1f}): not answered",
                    msg.source,
                )
            )
            return True
        # Only audio the robot could be heard in holds its echo, and only of what it said then:
        # a command said after it fell silent, or like an earlier sentence, is the user's ("Set
        # a timer for ten seconds" after "Your two-second timer is done").
        if (
            self.echo_guard
            and msg.robot_audible
            and (said := echo_of(res.text, self._heard_during(msg), self.live.echo_text_score))
            and self._echoed(msg, res.text, said)
        ):
            return True
        if is_hesitation(res.text):  # "hmm, let me think" and silence: the words are still coming
            self.publish(Skipped(-1, f"only a hesitation, nothing to answer: {res.text!r}", msg.source))
            return True
        if is_laugh(res.text):  # the user laughed at what the robot said: no request in it
            self.publish(Skipped(-1, f"only a laugh, nothing to answer: {res.text!r}", msg.source))
            return True
        if self.before_turn is not None and self.before_turn(res.text):
            return True
        return False

    def _handle(self, msg: Event) -> bool:
        if isinstance(msg, TextIn):
            now = time.perf_counter()
            self._said = None  # typed words never finish a spoken sentence
            self._start(msg.text, now, now, now, 0.0)
            return True
        if not isinstance(msg, Utterance) or msg.audio is None:
            return False
        audio = msg.audio
        clipped = float(np.mean(np.abs(audio) >= 0.99))
        if clipped > 0.01:
            log.warning(
                "input is clipping (%.1f%% of samples at full scale); lower the mic gain", 100 * clipped
            )
        # Made at the pause that ended the turn (semantic end-of-turn): nothing left to decode.
        res = msg.transcript if msg.transcript is not None else self._turn_words(audio)
        t_asr = time.perf_counter()
        self.publish(msg)
        if msg.overlap and self._acknowledged(res):
            return False
        where = f"{msg.source} at {msg.start_ms / 1000:.1f} s"
        if not res.text:
            self.publish(Skipped(-1, f"{where}: {res.dropped}", msg.source))
            return False
        # A stop phrase is obeyed before the echo check: a "stop" that sounds like the robot's own
        # words must still stop it (stopping is always safe; ignoring a real stop is not).
        if stop_command(res.text, self.live.stop_phrases, self.live.stop_max_words, self._other_things):
            self._said = None
            self._stop_fast(res.text)
            return False
        if self._not_a_request(msg, res, where):
            return False
        text = self.attention.accept(res.text)
        if text is None:
            self.publish(
                Skipped(-1, f"not addressed to the robot (no wake phrase): {res.text!r}", msg.source)
            )
            return False
        said = self._said
        continues = -1
        if (
            said is not None
            and self.continue_ms > 0
            and said.source == msg.source
            and msg.start_ms - said.end_ms <= self.continue_ms
            and starts_as_continuation(text)
        ):
            log.info("%r finishes the last turn's %r: answered as one sentence", text, said.text)
            text, continues = f"{said.text} {text}", said.turn_id
            if self.pauses is not None:  # the user paused this long inside one turn
                self.pauses.observe(max(0.0, msg.start_ms + self.post_roll_s * 1000 - said.end_ms))
        tid = self._start(
            text,
            msg.t_speech_end,
            msg.t_endpoint,
            t_asr,
            res.duration_ms,
            msg.end_rule,
            msg.release,
            continues,
        )
        self._said = _Said(tid, text, msg.source, msg.end_ms)
        return True

    def _pause(self, msg: PauseCheck) -> None:
        """Transcribe the utterance so far for the turn-taking stage (skipped once the pause is over)."""
        if msg.audio is None or (msg.stale is not None and msg.stale.is_set()):
            return  # the user spoke again, or the utterance ended, while this waited
        res = self._transcribe_pause(msg.audio, self.early_pad if msg.early else 0)
        self.turn_taking.put(PauseTranscript(-1, msg.pause_id, res))

    def _overlap(self, msg: OverlapCheck) -> None:
        """Transcribe the user's speech over the robot's for the turn-taking stage, with what it is."""
        if msg.audio is None:
            return
        padded = np.concatenate([msg.audio, np.zeros(PAUSE_PAD, dtype=np.float32)])
        # Fast over robust: a greedy decode that fails is "not known yet", and the check is asked again.
        res = self.asr.transcribe(
            padded,
            bias=self.bias,
            context_s=self.asr.cfg.overlap_context_s,
            fallback=False,
            max_tokens=OVERLAP_MAX_TOKENS,
        )
        kind = early_kind(res.text, res.unsure, self._robot_asked())
        self.turn_taking.put(OverlapTranscript(-1, msg.check_id, res, kind))

    def _robot_asked(self) -> bool:
        """The robot's sentence being said (the newest one started in the last 30 s) is a question."""
        said = self.book.heard_texts(ECHO_WINDOW_S)
        return bool(said) and is_question(said[-1])

    def _acknowledged(self, res: ASRResult) -> bool:
        """An utterance over the robot that is only an acknowledgement or no words: reported, no turn.

        A stop phrase is never one ("stop" interrupts, :data:`agent.listening.floor.NOT_BACKCHANNEL`).
        """
        kind = overlap_kind(res.text, res.unsure, self._robot_asked())
        if kind == INTERRUPTION:
            return False
        log.info("%r over the robot's speech: %s, no turn", res.text, kind)
        self.publish(Backchannel(-1, res.text, kind))
        self.publish(Resume(-1, kind))
        return True

    def _transcribe_pause(self, audio: np.ndarray, extra: int) -> ASRResult:
        """Transcribe the utterance so far, ending in the pause's silence plus zeros.

        Digital silence after the pause's 200 ms: with hotwords, Whisper dropped the trailing
        "and then" of a piper "Turn your head to the left and then" in 2 of 20 syntheses with
        the bare 200 ms, in 0 of 20 with 600 ms (measured here, tiny.en).
        """
        padded = np.concatenate([audio, np.zeros(PAUSE_PAD + extra, dtype=np.float32)])
        return self._turn_words(padded)

    def _turn_words(self, audio: np.ndarray) -> ASRResult:
        """A turn's words (``[asr] turn_context_s``: the encoder's window)."""
        return self.asr.transcribe(
            audio, bias=self.bias, context_s=self.asr.cfg.turn_context_s, sure_logprob=self.sure_logprob
        )

    def _start(
        self,
        text: str,
        t_speech_end: float,
        t_endpoint: float,
        t_asr: float,
        asr_ms: float,
        rule: str = "typed",
        release: ReleaseGate | None = None,
        continues: int = -1,
    ) -> int:
        """Start a user turn; returns its id."""
        if self.realtime:
            self.publish(Interrupt(-1, "new_turn"))
        tid = self.gate.new_turn()
        self.publish(Transcript(tid, text))
        self.driver_inbox.put(
            UserTurn(tid, text, t_speech_end, t_endpoint, t_asr, asr_ms, rule, release, continues)
        )
        return tid

    def _stop_fast(self, text: str) -> None:
        """A stop phrase: silence and stop the robot now, without asking the model."""
        self.publish(Interrupt(-1, "stop"))
        tid = self.gate.new_turn()
        self.gate.cancel(tid)  # nothing more is said in this turn
        self.publish(Transcript(tid, text))
        call_id = f"t{tid}stop"
        self.publish(ToolCall(tid, "stop", {}, call_id))
        outcome = self.registry.call("stop", {}, self.ctx)
        self.publish(ToolResult(tid, "stop", outcome.ok, outcome.result, call_id))

    def replied(self) -> None:
        """A reply finished playing: open the wake-phrase follow-up window."""
        self.attention.replied()
