"""ASR stage: utterance → transcript → a user turn, or a reason to drop it.

One thread (faster-whisper releases the GIL, so it runs beside the model and the voice).
For each utterance: transcribe (the recognizer filters hallucinations), then handle a stop
phrase at once without the model (the *stop fast path*: interrupt, run the ``stop`` skill;
checked first, since stopping is always safe), drop the robot's own echo (the transcript
matches what it said in the last 30 s, only where a speaker can be heard), drop speech not
addressed to the robot (wake phrase), and otherwise start a turn:
a new turn id, a ``transcript`` message and a :class:`~agent.events.UserTurn` for the turn
driver. Typed lines (``TextIn``) skip the audio checks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from agent.config import LiveConfig
from agent.events import (
    EndOfTurnCheck,
    Error,
    Event,
    PauseCheck,
    Skipped,
    TextIn,
    ToolCall,
    ToolResult,
    Transcript,
    UserTurn,
    Utterance,
)
from agent.listening.end_of_turn import EndOfTurnJudge
from agent.listening.turns import Attention, is_echo, stop_command
from agent.pipeline.queues import StageQueue, TurnGate, run_stage
from agent.skills import SkillContext, SkillRegistry
from agent.speech.asr import ASRResult, WhisperASR
from agent.speech.audio import SAMPLE_RATE

log = logging.getLogger(__name__)
ECHO_WINDOW_S = 30.0
"""Transcripts are compared with what the robot said this recently, s."""
PAUSE_PAD = 6400
"""Zeros (400 ms at 16 kHz) appended to a pause's audio before it is transcribed."""


class TurnControl(Protocol):
    """What the ASR stage asks of the pipeline."""

    def interrupt(self, reason: str) -> None:
        """Stop the current turn."""
        ...

    def work_finished(self) -> None:
        """An utterance was dropped: one item less in flight."""
        ...

    def recent_speech(self, since_s: float) -> list[str]:
        """What the robot said recently."""
        ...


class ASRStage:
    """The ASR thread body.

    Args:
        asr: The recognizer.
        live: ``[live]`` (echo guard, stop phrases, attention).
        inbox: ``Utterance`` / ``TextIn`` / ``Shutdown``.
        driver_inbox: Where user turns go.
        gate: Allocates turn ids.
        publish: The bus.
        control: The pipeline.
        registry: Skills (the stop fast path calls ``stop``).
        ctx: What skills get.
        realtime: Input keeps coming while the robot speaks: a new turn interrupts the current one.
        bias: Use ASR biasing (hotwords / initial prompt) when configured.
        echo_guard: Drop transcripts that repeat the robot's recent speech (only where a
            speaker can be heard by the microphone).
        judge: Semantic end-of-turn (``PauseCheck`` messages); None = silence only.
        on_verdict: Where a pause's verdict goes: ``(pause_id, complete, rule, ASRResult)``.
        wants: Whether a pause still needs judging (a stale one is skipped).
        prefill: Early model start: called with the transcript of each pause before it is
            judged, and must not block (the model evaluates that prompt beside the judgement; a
            finished turn finds it in the KV cache, and if the user goes on it is discarded).
        early_pad_ms: Silence an early transcript (``PauseCheck.early``) lacks against one made at
            the judgement (``[turn] short_silence_ms - early_asr_ms``), ms: added as zeros, so
            both end in the same silence.
    """

    def __init__(
        self,
        asr: WhisperASR,
        live: LiveConfig,
        inbox: StageQueue,
        driver_inbox: StageQueue,
        gate: TurnGate,
        publish: Callable[[Event], None],
        control: TurnControl,
        registry: SkillRegistry,
        ctx: SkillContext,
        realtime: bool,
        bias: bool = True,
        echo_guard: bool = True,
        judge: EndOfTurnJudge | None = None,
        on_verdict: Callable[[int, bool, str, ASRResult | None], None] | None = None,
        wants: Callable[[int], bool] | None = None,
        prefill: Callable[[str], None] | None = None,
        early_pad_ms: int = 0,
    ) -> None:
        self.asr, self.live, self.inbox, self.driver_inbox = asr, live, inbox, driver_inbox
        self.gate, self.publish, self.control = gate, publish, control
        self.registry, self.ctx, self.realtime, self.bias = registry, ctx, realtime, bias
        self.echo_guard = echo_guard and live.echo_guard
        self.attention = Attention(live)
        self.judge, self.on_verdict, self.wants, self.prefill = judge, on_verdict, wants, prefill
        self.early_pad = early_pad_ms * SAMPLE_RATE // 1000  # samples
        self._early: tuple[int, ASRResult] | None = None  # (pause_id, transcript made early)

    def run(self) -> None:
        """Process utterances until ``Shutdown``."""
        run_stage(self.inbox, self._one, self._failed)

    def _one(self, msg: Event) -> None:
        if isinstance(msg, PauseCheck):  # not an item of work: a question from the listener
            self._judge(msg)
            return
        if not self._handle(msg):
            self.control.work_finished()  # dropped: one item less in flight

    def _failed(self, msg: Event, e: Exception) -> None:
        log.exception("ASR stage failed")
        self.publish(Error(-1, f"speech recognition failed: {e.__class__.__name__}: {e}; still listening"))
        self.control.work_finished()

    def _handle(self, msg: Event) -> bool:
        if isinstance(msg, TextIn):
            now = time.perf_counter()
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
        res = msg.transcript if msg.transcript is not None else self.asr.transcribe(audio, bias=self.bias)
        t_asr = time.perf_counter()
        self.publish(msg)
        where = f"{msg.source} at {msg.start_ms / 1000:.1f} s"
        if not res.text:
            self.publish(Skipped(-1, f"{where}: {res.dropped}", msg.source))
            return False
        # A stop phrase is obeyed before the echo check: a "stop" that sounds like the robot's own
        # words must still stop it (stopping is always safe; ignoring a real stop is not).
        if stop_command(res.text, self.live.stop_phrases, self.live.stop_max_words):
            self._stop_fast(res.text)
            return False
        if self.echo_guard and is_echo(
            res.text, self.control.recent_speech(ECHO_WINDOW_S), self.live.echo_text_score
        ):
            self.publish(Skipped(-1, f"echo of the robot's own speech: {res.text!r}", msg.source))
            return False
        text = self.attention.accept(res.text)
        if text is None:
            self.publish(
                Skipped(-1, f"not addressed to the robot (no wake phrase): {res.text!r}", msg.source)
            )
            return False
        self._start(text, msg.t_speech_end, msg.t_endpoint, t_asr, res.duration_ms, msg.end_rule)
        return True

    def _judge(self, msg: PauseCheck) -> None:
        """Transcribe the utterance so far and judge whether the user has finished."""
        if self.judge is None or self.on_verdict is None or msg.audio is None:
            return
        if self.wants is not None and not self.wants(msg.pause_id):
            return  # the user spoke again, or the turn ended, while this waited
        if msg.early:
            try:
                self._early = (msg.pause_id, self._transcribe_pause(msg.audio, self.early_pad))
            except Exception:  # the judgement transcribes for itself
                log.exception("early transcript failed")
            return
        early, self._early = self._early, None
        try:
            if early is not None and early[0] == msg.pause_id:
                res = early[1]  # no speech since it was made: the same words
            else:
                res = self._transcribe_pause(msg.audio, 0)
            if self.prefill is not None and res.text:
                # The turn may end at this pause: the model reads it while the pause is judged.
                self.prefill(res.text)
            v = self.judge.judge(msg.audio, res.text)
        except Exception as e:  # the turn then ends by silence and is transcribed as a whole
            log.exception("end-of-turn check failed")
            self.publish(Error(-1, f"end-of-turn check failed ({e}); ending turns by silence for now"))
            self.on_verdict(msg.pause_id, False, "error", None)
            return
        self.publish(
            EndOfTurnCheck(
                -1,
                msg.pause_id,
                res.text,
                v.complete,
                v.rule,
                v.smart_turn,
                v.text_score,
                res.duration_ms,
                v.ms,
            )
        )
        self.on_verdict(msg.pause_id, v.complete, v.rule, res)

    def _transcribe_pause(self, audio: np.ndarray, extra: int) -> ASRResult:
        """Transcribe the utterance so far, ending in the pause's silence plus zeros.

        Digital silence after the pause's 200 ms: with hotwords, Whisper dropped the trailing
        "and then" of a piper "Turn your head to the left and then" in 2 of 20 syntheses with
        the bare 200 ms, in 0 of 20 with 600 ms (measured here, tiny.en).
        """
        padded = np.concatenate([audio, np.zeros(PAUSE_PAD + extra, dtype=np.float32)])
        return self.asr.transcribe(padded, bias=self.bias)

    def _start(
        self,
        text: str,
        t_speech_end: float,
        t_endpoint: float,
        t_asr: float,
        asr_ms: float,
        rule: str = "typed",
    ) -> None:
        if self.realtime:
            self.control.interrupt("new_turn")
        tid = self.gate.new_turn()
        self.publish(Transcript(tid, text))
        self.driver_inbox.put(UserTurn(tid, text, t_speech_end, t_endpoint, t_asr, asr_ms, rule))

    def _stop_fast(self, text: str) -> None:
        """A stop phrase: silence and stop the robot now, without asking the model."""
        self.control.interrupt("stop")
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
