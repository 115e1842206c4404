"""Turn-taking stage: who has the floor. VAD frames in; pauses judged, utterances and barge-ins out.

One thread owns the endpointer (:class:`~agent.listening.vad.Endpointer`) and the end-of-turn
judgement (:class:`~agent.listening.end_of_turn.EndOfTurnJudge`), as the turn analyzers of the
best voice frameworks own theirs. It reads :class:`~agent.events.VoiceFrame` messages from the
listener (one per 32 ms, with the echo-gated speech probability) and
:class:`~agent.events.PauseTranscript` answers from the ASR stage, and decides:

* **pauses** (semantic end-of-turn): at ``[turn] smart_turn_ms`` of silence Smart Turn starts
  on the utterance so far (:meth:`~agent.listening.end_of_turn.EndOfTurnJudge.hear`: the audio
  signal of every pause, computed before the transcript is started); at ``early_asr_ms`` the
  utterance so far goes to the ASR stage as a :class:`~agent.events.PauseCheck`; at ``short_silence_ms``,
  once its transcript is back, the pause is judged from the audio and the words, the model
  starts early on the transcript (:class:`EarlyStart`), and the verdict is a
  :class:`~agent.events.PauseVerdict` message, published and applied here: a finished turn ends
  at once with its transcript made, heard once the silence confirms it (:func:`confirm_ms`:
  longer where the evidence is doubtful; dropped if the user goes on first); an unfinished one
  waits for more speech, ending anyway after ``long_silence_ms``. A pause the user talks
  through marks its check stale, so the ASR stage skips it;
* **utterances**: the endpointer's (silence, longest utterance, or a verdict) go to the ASR
  stage, with the pause's transcript when no speech followed it (nothing left to decode);
* **speech over the robot** (:mod:`agent.pipeline.overlap`): its words are asked for early and
  only an interruption stops the robot (a :class:`~agent.events.Hold`, resumed if it turns out to
  be an acknowledgement or a noise); an utterance that began over the robot is marked
  ``overlap`` for the ASR stage, which never makes an acknowledgement a turn;
* **the speaker's pauses**: each pause the user goes on after is learned
  (:class:`~agent.listening.pace.PauseModel`) and lengthens every wait from then on.

With a source that need not keep real time (files as fast as possible) each pause's verdict
comes before the next frame is taken, and each utterance's turn is over before the next one
starts, exactly as a person taking turns would; input is never dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from agent.config import Config, TurnConfig
from agent.control import CpuArbiter, ReleaseGate, StopSignal
from agent.events import (
    Error,
    Event,
    InputEnded,
    InputStarted,
    OverlapTranscript,
    PauseCheck,
    PauseTranscript,
    PauseVerdict,
    Shutdown,
    Skipped,
    TurnConfirmed,
    Utterance,
    VoiceFrame,
)
from agent.listening.end_of_turn import EndOfTurnJudge, Verdict
from agent.listening.pace import CONFIRMED_RULES, UNFINISHED, PauseModel, command_wait_ms, evidence, wait_ms
from agent.listening.vad import FRAME, Endpointer, VADUpdate
from agent.pipeline.overlap import Floor, OverlapTracker
from agent.pipeline.posture import Postures
from agent.pipeline.queues import StageQueue, run_stage
from agent.pipeline.work import WorkTracker
from agent.speech.asr import ASRResult
from agent.speech.audio import SAMPLE_RATE

log = logging.getLogger(__name__)

FRAME_MS = FRAME * 1000 / SAMPLE_RATE
"""One VAD frame, ms (32)."""

INPUT_END_RULE = "input_end"
"""Endpoint rule of an utterance a file or line source ended (no more silence will come)."""


def unclear(turn: TurnConfig, asr_logprob: float) -> bool:
    """Whether Whisper was unclear about the words it heard.

    Args:
        turn: ``[turn]`` settings (``unclear_logprob``).
        asr_logprob: Whisper's mean token log-probability of the words (natural log).

    Returns:
        True when ``asr_logprob`` is under ``[turn] unclear_logprob``.
    """
    return asr_logprob < turn.unclear_logprob


def confirm_ms(
    turn: TurnConfig,
    rule: str,
    complete: bool,
    unclear_words: bool,
    text_score: float = 1.0,
    smart_turn: float = -1.0,
    heard: str = "",
    extra_ms: float = 0.0,
) -> int:
    """The silence that must confirm a verdict before its reply is heard, ms (0: heard at once).

    The evidence decides (:func:`agent.listening.pace.evidence`): a finished verdict of the words
    (:data:`~agent.listening.pace.CONFIRMED_RULES`) on strong evidence waits ``[turn]
    strong_confirm_ms``, on ordinary evidence ``confirm_ms``, on doubtful evidence
    ``doubtful_confirm_ms``: words Whisper was unclear about (:func:`unclear`: the text model
    judged words the user may not have said), or words that alone did not say finished
    (``smart_turn``). Measured on ``bench --turns``' set (tiny.en, 2026-12-05): the first parts of
    paused sentences that sounded finished were misheard ("Nod your head," as "down your head"
    -0.68, "Can you wave" as "come your way" -0.54) or ended by Smart Turn ("Look to the left," as
    "look at the left": words -1.27, Smart Turn 0.97). Each wait grows by how much longer than the
    shortest the speaker's pauses are (``extra_ms``, :class:`agent.listening.pace.PauseModel`).

    Args:
        turn: ``[turn]`` settings.
        rule: The verdict's rule.
        complete: The verdict says finished.
        unclear_words: Whisper was unclear about the words judged (:func:`unclear`).
        text_score: The text model's score (1.0: not run).
        smart_turn: Smart Turn's probability (-1: no model).
        heard: The transcript judged.
        extra_ms: The speaker's learned extra pause, ms.

    Returns:
        Silence, ms, counted from the end of speech.
    """
    if not complete or rule not in CONFIRMED_RULES:
        return 0
    level = evidence(turn, rule, complete, text_score, smart_turn, unclear_words, heard)
    return wait_ms(turn, level, extra_ms)


class EarlyStart:
    """The model evaluates the prompt a turn would have while its pause is judged (an early start).

    Args:
        prefill: Evaluates the prompt for a transcript (``Conversation.prefill`` with the state line).
        work: The pipeline's work (an early start runs only while nothing else does).

    A turn that starts meanwhile waits for the model and then evaluates only what its prompt adds;
    a user who goes on makes it a discard, which costs nothing but the time already spent.
    """

    def __init__(self, prefill: Callable[[str], int], work: WorkTracker) -> None:
        self.prefill, self.work = prefill, work
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="early-start")

    def submit(self, text: str) -> None:
        """Start evaluating the prompt for ``text`` on the early-start thread; returns at once."""
        if self.work.model_free():
            self._pool.submit(self._run, text)

    def _run(self, text: str) -> None:
        try:
            if self.work.model_free():
                log.debug("early start: %d prompt tokens evaluated for %r", self.prefill(text), text)
        except Exception:  # the turn evaluates its prompt itself
            log.exception("early model start failed")

    def close(self) -> None:
        """Drop what has not started (a prefill under way finishes on its own)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class _Tentative:
    """A turn ended on a verdict the silence has not confirmed yet (``[turn] confirm_ms``)."""

    pause_id: int
    rule: str
    transcript: ASRResult
    gate: ReleaseGate | None  # real time: the turn is prepared at once and heard on release
    confirm_ms: int  # the silence that confirms it
    command_ms: int  # ... once the prepared reply called a skill as the skill asks


@dataclass
class _Pause:
    """A pause of the utterance in progress, from its first report to its verdict."""

    pause_id: int
    stale: StopSignal
    audio: np.ndarray | None = None  # the utterance so far at the short silence (judged)
    transcript: ASRResult | None = None
    answered: bool = False  # the ASR stage answered (transcript or error)
    error: str = ""
    judge: bool = False  # the short silence was reached: judge once the transcript is here


class TurnTaking:
    """The turn-taking thread body.

    Args:
        cfg: ``[vad]``, ``[turn]``, ``[live]`` (barge-in).
        inbox: ``VoiceFrame``, ``PauseTranscript``, ``InputStarted``/``InputEnded``, ``Shutdown``.
        asr_inbox: The ASR stage's queue (``PauseCheck``, ``Utterance``).
        publish: The bus (verdicts, skipped inputs, interruptions).
        work: The pipeline's work in flight.
        speaker: The sink (speech over it is judged only while it plays a turn).
        judge: Semantic end-of-turn; None = silence-only endpointing.
        early_start: The model's early start at each judged pause, or None.
        realtime: The source keeps real time (else: a verdict before the next frame, a turn's
            end before the next utterance).
        barge_in: Allow the user to talk over the robot.
        postures: The body's posture follows the floor (listening while the user speaks,
            thinking once the turn is handed over); None: no body.
        pauses: The speaker's learned pauses (shared with the ASR stage, which learns the gap
            before a continuation); None: not learned.
        arbiter: Claimed for listening while speech over the robot is judged; None = no claims.
    """

    def __init__(
        self,
        cfg: Config,
        inbox: StageQueue,
        asr_inbox: StageQueue,
        publish: Callable[[Event], None],
        work: WorkTracker,
        speaker: Floor,
        judge: EndOfTurnJudge | None,
        early_start: EarlyStart | None,
        realtime: bool,
        barge_in: bool,
        postures: Postures | None = None,
        pauses: PauseModel | None = None,
        arbiter: CpuArbiter | None = None,
    ) -> None:
        self.cfg, self.inbox, self.asr_inbox, self.publish = cfg, inbox, asr_inbox, publish
        self.work, self.speaker, self.judge, self.early_start = work, speaker, judge, early_start
        self.realtime, self.barge_in = realtime, barge_in
        self.postures = postures or Postures(None)
        turn = cfg.turn
        self.endpointer = (
            Endpointer(
                cfg.vad, turn.short_silence_ms, turn.long_silence_ms, turn.early_asr_ms, turn.smart_turn_ms
            )
            if judge is not None
            else Endpointer(cfg.vad)
        )
        self._pause: _Pause | None = None
        self._undecided: tuple[int, ASRResult] | None = None  # an unfinished verdict's transcript
        self._tentative: _Tentative | None = None  # a finished verdict waiting for its confirmation
        self._t_last = 0.0  # wall time of the newest frame's end (perf_counter s)
        self._t_audible = -1e9  # end of the newest frame in which the robot could be heard (perf_counter s)
        self._source = ""  # the newest frame's source (file path or device name)
        self._later: list[Event] = []  # taken while waiting for a transcript, handled after it
        self.overlap = OverlapTracker(cfg, asr_inbox, publish, work, speaker, arbiter)
        self._utt_overlap = False  # the utterance in progress began over the robot's speech
        self.pauses = pauses
        self._silence_ms = 0.0  # the endpointer's silence after the previous frame, ms
        self._utterances = 0  # in the current input
        self._in_input = False
        self._lengthen()

    def run(self) -> None:
        """Handle messages until ``Shutdown``."""
        run_stage(self.inbox, self._handle, self._failed)

    def _failed(self, msg: Event, e: Exception) -> None:
        log.exception("turn-taking failed on %s", msg.name)
        self.publish(Error(-1, f"turn-taking failed: {e.__class__.__name__}: {e}; still listening"))

    def _handle(self, msg: Event) -> None:
        self._one(msg)
        while self._later:
            self._one(self._later.pop(0))
            self.inbox.done()

    def _one(self, msg: Event) -> None:
        if isinstance(msg, VoiceFrame):
            self._frame(msg)
        elif isinstance(msg, PauseTranscript):
            self._transcript(msg)
        elif isinstance(msg, OverlapTranscript):
            self.overlap.words(msg)
            self._keep_interruption()
        elif isinstance(msg, InputStarted):
            self.publish(msg)
            self._reset()
            self._utterances, self._in_input = 0, True
        elif isinstance(msg, InputEnded):
            self._settle(confirmed=True)  # the input is over: nothing more will be said
            # Speech still held for more (an unfinished verdict waits up to long_silence_ms, longer
            # than a file's appended silence) ends here: it is all the user said.
            self._end(self.endpointer.end_now(INPUT_END_RULE))
            if self._in_input and self._utterances == 0:  # unreadable inputs were reported by the source
                self.publish(Skipped(-1, f"no speech found in {msg.source}", msg.source))
            self._in_input = False
            if msg.last:
                self.work.input_done()

    def _reset(self) -> None:
        self._settle(confirmed=True)
        self.endpointer.reset()
        self._drop_pause()
        self._undecided = None
        self._utt_overlap = False
        self._silence_ms = 0.0
        self.overlap.reset()
        self.work.user_speaking = False

    # --- frames ------------------------------------------------------------------------------------
    def _frame(self, f: VoiceFrame) -> None:
        if f.fresh:
            self._reset()
        self._t_last, self._source = f.t_end, f.source
        if f.robot_audible:
            self._t_audible = f.t_end
        upd = self.endpointer.feed(f.samples, f.prob)
        self._learn(upd)
        if upd.started:
            self._utt_overlap = self.barge_in and (self.overlap.active or self.overlap.robot_speaking())
        if self._tentative is not None:
            upd = self._confirm_or_drop(upd)
        # Still "speaking" until an utterance that ends here is handed over (and counted as work):
        # no instant in between lets a background result start over the user's turn.
        speaking = (upd.speaking and self._tentative is None) or upd.ended
        self.work.user_speaking = speaking or self._tentative is not None
        self.postures.user_speaking(speaking)
        if self.barge_in:
            self.overlap.frame(f, self.endpointer.speaking)
        if self._pause is not None and not self.endpointer.still_silent(self._pause.pause_id):
            self._drop_pause()  # the user spoke again (or the utterance ended): not wanted
        if upd.audio_check and upd.audio is not None and self.judge is not None:
            self.judge.hear(upd.pause_id, upd.audio)  # Smart Turn runs while the CPU waits
        if upd.early and upd.audio is not None:
            self._check(upd.pause_id, upd.audio, early=True)
        if upd.paused and upd.audio is not None:
            pause = self._pause if self._pause and self._pause.pause_id == upd.pause_id else None
            if pause is None:  # no early transcript: transcribe now
                pause = self._check(upd.pause_id, upd.audio, early=False)
            pause.audio, pause.judge = upd.audio, True
            if not self.realtime:  # files as fast as possible: the verdict decides before more audio
                self._await_transcript(pause)
            self._judge_if_ready()
        if upd.ended:
            self._end(upd)

    def _keep_interruption(self) -> None:
        """Words over the robot that stopped it become an utterance, however short.

        The endpointer starts one only after ``[vad] min_speech_ms`` of speech; a "Stop." or "No."
        over the robot can be shorter. Left alone, its hold would end as a false interruption.
        """
        frames = self.overlap.interruption_frames()
        if frames is None or self.endpointer.speaking:
            return
        if self.endpointer.start_with(frames).started:
            self._utt_overlap = True
            self.work.user_speaking = True

    def _learn(self, upd: VADUpdate) -> None:
        """A pause the user went on after (a judged one, ``short_silence_ms`` or longer) is learned."""
        silence, self._silence_ms = self._silence_ms, self.endpointer.silence_ms
        if self.pauses is None or not upd.speaking or upd.started or self._silence_ms > 0:
            return
        if silence >= self.cfg.turn.short_silence_ms:
            self.pauses.observe(silence)
            self._lengthen()
            log.debug("the user went on after %.0f ms: pauses average %.0f ms", silence, self.pauses.value_ms)

    def _lengthen(self) -> None:
        """The long silence that ends an unfinished-sounding turn grows with the learned pauses."""
        extra = self.pauses.extra_ms if self.pauses is not None else 0.0
        self.endpointer.set_long_silence(wait_ms(self.cfg.turn, UNFINISHED, extra))

    # --- pauses ------------------------------------------------------------------------------------
    def _check(self, pause_id: int, audio: np.ndarray, early: bool) -> _Pause:
        """Ask the ASR stage for the transcript of the utterance so far."""
        self._drop_pause()
        pause = self._pause = _Pause(pause_id, StopSignal())
        self.asr_inbox.put(PauseCheck(-1, pause_id, audio, early, pause.stale))
        return pause

    def _drop_pause(self) -> None:
        if self._pause is not None:
            self._pause.stale.set("speech resumed")
            self._pause = None

    def _transcript(self, msg: PauseTranscript) -> None:
        pause = self._pause
        if pause is None or pause.pause_id != msg.pause_id:
            return  # stale: the user went on meanwhile
        pause.transcript, pause.error, pause.answered = msg.result, msg.error, True
        self._judge_if_ready()

    def _await_transcript(self, pause: _Pause) -> None:
        """Wait for the ASR stage to answer ``pause`` (non-real-time sources).

        Other messages taken meanwhile are handled after the current frame, in their order.
        """
        while not pause.answered and not self.work.stopping:
            msg = self.inbox.get(timeout=0.1)
            if msg is None:
                continue
            if isinstance(msg, Shutdown):
                self.inbox.put(msg)  # seen again by the stage loop, which ends
                self.inbox.done()
                return
            if isinstance(msg, PauseTranscript) and msg.pause_id == pause.pause_id:
                pause.transcript, pause.error, pause.answered = msg.result, msg.error, True
                self.inbox.done()
            else:
                self._later.append(msg)  # done once handled

    def _judge_if_ready(self) -> None:
        pause = self._pause
        if pause is None or not pause.judge or not pause.answered or pause.audio is None:
            return
        self._pause = None
        if not self.endpointer.in_pause(pause.pause_id):
            return
        verdict = self._verdict(pause, pause.audio)
        self.publish(verdict)
        self._apply(verdict, pause.transcript)

    def _verdict(self, pause: _Pause, audio: np.ndarray) -> PauseVerdict:
        """Judge ``pause``; a failed transcript or judgement is an unfinished verdict (``error``)."""
        assert self.judge is not None
        res = pause.transcript
        v: Verdict | None = None
        if res is not None:
            if res.text and self.early_start is not None:
                self.early_start.submit(res.text)  # the model reads it while the pause is judged
            try:
                v = self.judge.judge(audio, res.text, unsure=res.unsure, pause_id=pause.pause_id)
            except Exception as e:  # the turn then ends by silence and is transcribed as a whole
                log.exception("end-of-turn check failed")
                pause.error = f"{e.__class__.__name__}: {e}"
        if v is None:
            self.publish(Error(-1, f"end-of-turn check failed ({pause.error}); ending this turn by silence"))
            return PauseVerdict(-1, pause.pause_id, res.text if res else "", False, "error")
        assert res is not None  # judged only on a transcript
        turn = self.cfg.turn
        doubt = unclear(turn, res.avg_logprob)
        extra = self.pauses.extra_ms if self.pauses is not None else 0.0
        level = evidence(turn, v.rule, v.complete, v.text_score, v.smart_turn, doubt, res.text)
        confirm = confirm_ms(turn, v.rule, v.complete, doubt, v.text_score, v.smart_turn, res.text, extra)
        return PauseVerdict(
            -1,
            pause.pause_id,
            res.text,
            v.complete,
            v.rule,
            smart_turn=v.smart_turn,
            text_score=v.text_score,
            asr_ms=res.duration_ms,
            judge_ms=v.ms,
            asr_logprob=res.avg_logprob,
            unclear=doubt,
            confirm_ms=confirm,
            command_ms=min(confirm, command_wait_ms(turn, level, v.smart_turn, extra)) if confirm else 0,
            evidence=level,
            pause_ms=round(self.pauses.value_ms) if self.pauses is not None else 0,
        )

    def _apply(self, verdict: PauseVerdict, transcript: ASRResult | None) -> None:
        """A finished turn ends now, with its transcript; an unfinished one keeps it for a silent end.

        A turn the words or Smart Turn called finished is confirmed by the verdict's
        ``confirm_ms`` of silence (:func:`confirm_ms`): in real time it is handed over at once with
        a :class:`ReleaseGate` (prepared, heard on release, dropped if the user goes on); otherwise
        it ends at the confirmation.
        """
        if verdict.complete and transcript is not None:
            self._undecided = None
            confirm = verdict.confirm_ms
            if confirm and self.endpointer.silence_ms < confirm:
                gate = ReleaseGate() if self.realtime else None
                self._tentative = _Tentative(
                    verdict.pause_id, verdict.rule, transcript, gate, confirm, verdict.command_ms or confirm
                )
                if gate is not None:
                    self._end(self.endpointer.snapshot(verdict.rule), transcript, gate)
                return
            self._end(self.endpointer.end_now(verdict.rule), transcript)
        elif transcript is not None and verdict.rule != "error":
            self._undecided = (verdict.pause_id, transcript)

    def _confirm_or_drop(self, upd: VADUpdate) -> VADUpdate:
        """Settle a tentative end on this frame: confirmed by silence, or dropped by more speech.

        Returns:
            ``upd``, or an empty update where it ended an utterance already handed over.
        """
        t = self._tentative
        assert t is not None
        if upd.ended:  # the longest utterance: what was said stands
            self._settle(confirmed=True, ended=upd)
            return VADUpdate(prob=upd.prob) if t.gate is not None else upd
        if self.endpointer.still_silent(t.pause_id):
            if self.endpointer.silence_ms >= self._confirm_wait(t):
                self._settle(confirmed=True)
                return VADUpdate(prob=upd.prob)  # the utterance is over (and handed over)
            return upd
        self._settle(confirmed=False)  # the user went on: one utterance, judged again at its next pause
        return upd

    @staticmethod
    def _confirm_wait(t: _Tentative) -> int:
        """The silence that confirms ``t`` now, ms: less once its prepared reply called a skill as asked."""
        return t.command_ms if t.gate is not None and t.gate.command else t.confirm_ms

    def _settle(self, confirmed: bool, ended: VADUpdate | None = None) -> None:
        """Release (or drop) the tentative turn; without a gate, end its utterance when confirmed."""
        t, self._tentative = self._tentative, None
        if t is None:
            return
        if t.gate is None:
            if confirmed and ended is None:
                self._end(self.endpointer.end_now(t.rule), t.transcript)
            return
        if confirmed:
            t.gate.release()
            if ended is None:
                self.endpointer.end_now(t.rule)  # handed over already: this only closes it
            wait = self._confirm_wait(t)
            self.publish(TurnConfirmed(-1, t.pause_id, wait, wait < t.confirm_ms))
            log.debug("turn confirmed by %d ms of silence", wait)
        else:
            t.gate.drop()
            log.info("the user went on: the prepared turn is dropped, the utterance continues")

    # --- utterances --------------------------------------------------------------------------------
    def _end(
        self, upd: VADUpdate, transcript: ASRResult | None = None, release: ReleaseGate | None = None
    ) -> None:
        """Hand over the utterance that ended in ``upd`` (with the transcript made at its last pause).

        With ``release`` the utterance is tentative: its turn is prepared now and heard once the
        gate opens.
        """
        if upd.audio is None:
            self.work.user_speaking = False
            return
        if transcript is None and self._undecided is not None and upd.rule in ("silence", INPUT_END_RULE):
            pause_id, made = self._undecided
            if pause_id == self.endpointer.pause_id:  # no speech since: its transcript is the whole utterance
                transcript = made
        self._undecided = None
        self._drop_pause()
        overlap, self._utt_overlap = self._utt_overlap, False
        if overlap:
            self.overlap.handed_over = True  # its words decide a hold (the ASR stage)
        now = time.perf_counter()
        t_end = self._t_last - (self.endpointer.samples - upd.end_sample) / SAMPLE_RATE
        # The audio handed over (pre-roll included) began this long before its speech end.
        audible = self._t_audible >= t_end - upd.audio.size / SAMPLE_RATE
        if not self.realtime:
            t_end = now  # as fast as possible: the utterance is complete now
        end_ms = upd.end_sample / SAMPLE_RATE * 1000
        self._utterances += 1
        self.postures.user_done()
        self.work.started()
        self.asr_inbox.put(
            Utterance(
                -1,
                self._source,
                round(max(0.0, end_ms - upd.audio.size / SAMPLE_RATE * 1000), 1),
                round(end_ms, 1),
                upd.audio,
                t_end,
                now,
                upd.rule or "silence",
                transcript,
                release,
                audible,
                overlap,
            )
        )
        self.work.user_speaking = False  # counted as work now: the turn holds background results back
        if not self.realtime:
            self.work.wait_idle()
