"""Listener stage: source → Silero VAD per 32 ms frame → endpointing → utterances; barge-in.

The listener thread reads the source, runs the VAD frame by frame (echo-gated: frames the
speaker's own output explains are not speech), and hands each finished utterance to the
ASR stage. It also drains the sink's playback reports onto the bus (and the echo
reference into the echo gate), and decides barge-in: user speech sustained for
``[live] barge_in_ms`` while the robot is speaking interrupts the turn.

With a source that need not keep real time (files for ``listen``, typed lines) the
listener waits after each utterance until the pipeline is idle, so turns run one after
another exactly as a person taking turns would; input is never dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from agent.config import Config
from agent.events import (
    AudioIn,
    Event,
    InputEnded,
    InputStarted,
    PauseCheck,
    PlayedBlock,
    Skipped,
    TextIn,
    Utterance,
)
from agent.listening.echo import EchoGate
from agent.listening.vad import FRAME, Endpointer, SileroFrameVAD, VADUpdate
from agent.pipeline.queues import StageQueue
from agent.pipeline.speech import AudioSink
from agent.speech.asr import ASRResult
from agent.speech.audio import SAMPLE_RATE

log = logging.getLogger(__name__)


class Source(Protocol):
    """What the listener reads (see :mod:`agent.pipeline.sources`)."""

    realtime: bool
    name: str

    def open(self) -> None:
        """Start delivering input."""
        ...

    def read(self, timeout: float) -> Event | None:
        """Next message or None after ``timeout`` s."""
        ...

    def idle(self) -> None:
        """The pipeline is idle (the previous input's turn is over)."""
        ...

    def close(self) -> None:
        """Release the input."""
        ...


class PipelineControl(Protocol):
    """What the listener asks of the pipeline."""

    def interrupt(self, reason: str) -> None:
        """Stop the current turn."""
        ...

    def speaking_turn(self) -> int | None:
        """The turn being spoken now, or None."""
        ...

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no work is pending."""
        ...

    def work_started(self) -> None:
        """One more item (utterance, line) is in flight."""
        ...

    def input_done(self) -> None:
        """The source has delivered everything."""
        ...

    @property
    def stopping(self) -> bool:
        """Shutdown was asked for."""
        ...


class Listener:
    """The listener thread body.

    Args:
        cfg: ``[vad]``, ``[live]`` (barge-in, echo guard).
        source: Where input comes from.
        sink: Where speech goes (its reports are drained here).
        asr_inbox: The ASR stage's queue.
        publish: The bus.
        control: The pipeline.
        barge_in: Allow the user to talk over the robot.
        heartbeat: Called on every loop iteration (<= 50 ms apart): the systemd watchdog.
        semantic: Semantic end-of-turn (``[turn]``): pauses are judged by the ASR stage
            (:meth:`verdict` brings the answer); False = silence-only endpointing.
    """

    def __init__(
        self,
        cfg: Config,
        source: Source,
        sink: AudioSink,
        asr_inbox: StageQueue,
        publish: Callable[[Event], None],
        control: PipelineControl,
        barge_in: bool,
        heartbeat: Callable[[], None] | None = None,
        semantic: bool = False,
    ) -> None:
        self.cfg, self.source, self.sink, self.asr_inbox = cfg, source, sink, asr_inbox
        self.publish, self.control, self.barge_in = publish, control, barge_in
        self.heartbeat = heartbeat
        self.vad = SileroFrameVAD()
        self.vad(np.zeros(FRAME, dtype=np.float32))  # warm the ONNX session
        self.vad.reset()
        self.semantic = semantic
        turn = cfg.turn
        self.endpointer = (
            Endpointer(cfg.vad, turn.short_silence_ms, turn.long_silence_ms, turn.early_asr_ms)
            if semantic
            else Endpointer(cfg.vad)
        )
        self._verdict: tuple[int, bool, str, ASRResult | None] | None = None
        self._verdict_ready = threading.Event()
        # The endpointer's state is the listener thread's, and the ASR thread's when a verdict
        # ends the turn between two audio blocks.
        self._ep_lock = threading.Lock()
        self._t_last, self._n_last = 0.0, 0  # the newest frame's end: perf_counter s, stream samples
        self.echo = EchoGate(cfg.live.echo_max_delay_ms, cfg.live.echo_tail_ms)
        self._drain_lock = threading.Lock()
        self._buf = np.zeros(0, dtype=np.float32)
        self._recent = np.zeros(4096, dtype=np.float32)
        self._n_total = 0
        self._user_run_ms = 0.0
        self._utterances = 0
        self._in_input = False
        self.speaking = False
        """The user is inside an utterance (background results wait for the end of it)."""

    def verdict(self, pause_id: int, complete: bool, rule: str, transcript: ASRResult | None) -> None:
        """The ASR stage's judgement of a pause (called from its thread); a complete one ends the turn now.

        Args:
            pause_id: The pause judged.
            complete: The user has finished.
            rule: The deciding rule.
            transcript: The transcript of the utterance up to the pause (None when it failed).
        """
        if not self.source.realtime:  # files as fast as possible: _frame waits for the verdict
            self._verdict = (pause_id, complete, rule, transcript)
            self._verdict_ready.set()
            return
        with self._ep_lock:
            self._verdict = (pause_id, complete, rule, transcript)
            self._verdict_ready.set()
            if complete and self.semantic:
                # The turn ends now, from this thread, not when the next audio block arrives
                # (up to 32 ms later).
                self._settle(VADUpdate(speaking=self.endpointer.speaking), self._t_last)

    def wants(self, pause_id: int) -> bool:
        """Whether pause ``pause_id`` still needs judging (no newer speech; the ASR stage asks)."""
        return self.endpointer.pause_id == pause_id and self.endpointer.speaking

    def reset(self) -> None:
        """Forget the VAD state (device recovered, new input)."""
        with self._ep_lock:
            self.endpointer.reset()
            self._verdict = None
        self.vad.reset()
        self._buf = np.zeros(0, dtype=np.float32)
        self.speaking = False

    def run(self) -> None:
        """Read the source until it is done and the pipeline stops."""
        while not self.control.stopping:
            if self.heartbeat is not None:
                self.heartbeat()  # the systemd watchdog: a hung loop stops pinging
            self.drain_sink()
            msg = self.source.read(0.05)
            if msg is None:
                continue
            if isinstance(msg, AudioIn):
                self._audio(msg)
            elif isinstance(msg, TextIn):
                self._hand_over(msg)
            elif isinstance(msg, InputStarted):
                self.publish(msg)
                self.reset()
                self._utterances, self._in_input = 0, True
            elif isinstance(msg, InputEnded):
                if self._in_input and self._utterances == 0:  # unreadable inputs were reported by the source
                    self.publish(Skipped(-1, f"no speech found in {msg.source}", msg.source))
                self._in_input = False
                if msg.last:  # keep draining the sink: replies and background turns still play
                    self.control.input_done()

    def drain_sink(self) -> None:
        """Move the sink's playback reports onto the bus (echo reference into the gate).

        Called by the listener thread and, on an interruption, by whichever thread interrupts:
        one lock keeps the reports in order and the sink's resampler single-threaded.
        """
        with self._drain_lock:
            for rep in self.sink.poll():
                if isinstance(rep, PlayedBlock):
                    if rep.samples is not None:
                        self.echo.add_reference(rep.samples, rep.t)
                else:
                    self.publish(rep)

    def _audio(self, msg: AudioIn) -> None:
        self._buf = np.concatenate([self._buf, msg.samples])
        while self._buf.size >= FRAME:
            frame, self._buf = self._buf[:FRAME], self._buf[FRAME:]
            self._n_total += FRAME
            self._recent = np.concatenate([self._recent[FRAME:], frame])
            self._frame(frame, msg.t_end - self._buf.size / SAMPLE_RATE)

    def _frame(self, frame: np.ndarray, t: float) -> None:
        prob = self.vad(frame)
        live, thr = self.cfg.live, self.cfg.vad.threshold
        if live.echo_guard and prob >= thr - 0.15 and self.echo.active(t):
            if self.echo.user_share(self._recent, t) < live.echo_min_unexplained:
                prob = 0.0  # the robot hearing itself
        with self._ep_lock:
            self._t_last, self._n_last = t, self._n_total
            upd = self.endpointer.feed(frame, prob)
            self._listen(upd, prob, thr)

    def _listen(self, upd: VADUpdate, prob: float, thr: float) -> None:
        """Act on one frame's endpointer update: barge-in, pauses to judge, utterances (lock held)."""
        live = self.cfg.live
        # An utterance that ends here is still "speaking" until it is handed over (and counted
        # as work): no instant in between lets a background result start over the user's turn.
        self.speaking = upd.speaking or upd.ended
        if (
            self.barge_in
            and self.sink.busy
            and self.control.speaking_turn() is not None
            and upd.speaking
            and prob >= thr
        ):
            self._user_run_ms += FRAME * 1000 / SAMPLE_RATE
            if self._user_run_ms >= live.barge_in_ms:
                self._user_run_ms = 0.0
                self.control.interrupt("speech")
        elif prob < thr - 0.15:
            self._user_run_ms = 0.0
        if upd.early and upd.audio is not None:  # transcribe now; the verdict comes at the pause
            self.asr_inbox.put(PauseCheck(-1, upd.pause_id, upd.audio, early=True))
        if upd.paused and upd.audio is not None:
            self._verdict_ready.clear()
            self.asr_inbox.put(PauseCheck(-1, upd.pause_id, upd.audio))
            if not self.source.realtime:  # files as fast as possible: the verdict decides before more audio
                while not self._verdict_ready.wait(0.1) and not self.control.stopping:
                    pass
        self._settle(upd, self._t_last)

    def _settle(self, upd: VADUpdate, t: float) -> None:
        """Apply a verdict on the newest pause and hand over an utterance that ended (lock held).

        Args:
            upd: The newest frame's update (or an empty one when a verdict arrives between frames).
            t: When the newest frame ended, perf_counter s.
        """
        transcript = None
        v = self._verdict
        if v is not None and self.semantic:
            pause_id, complete, rule, result = v
            if upd.ended and pause_id == self.endpointer.pause_id and upd.rule == "silence":
                transcript = result  # no speech since the pause: its transcript is the whole utterance
            elif complete and self.endpointer.in_pause(pause_id):
                upd, transcript = self.endpointer.end_now(rule), result
            if upd.ended:
                self._verdict = None
        if upd.ended and upd.audio is not None:
            t_end = t - (self._n_last - upd.end_sample) / SAMPLE_RATE
            now = time.perf_counter()
            if not self.source.realtime:
                t_end = now  # as fast as possible: the utterance is complete now
            end_ms = upd.end_sample / SAMPLE_RATE * 1000
            utt = Utterance(
                -1,
                self.source.name,
                round(max(0.0, end_ms - upd.audio.size / SAMPLE_RATE * 1000), 1),
                round(end_ms, 1),
                upd.audio,
                t_end,
                now,
                upd.rule or "silence",
                transcript,
            )
            self._hand_over(utt)
        elif upd.ended:
            self.speaking = False

    def _hand_over(self, msg: Event) -> None:
        self._utterances += 1
        self.control.work_started()
        self.asr_inbox.put(msg)
        self.speaking = False  # counted as work now: the turn holds background results back
        if not self.source.realtime:
            while not self.control.wait_idle(0.1):
                self.drain_sink()
                if self.control.stopping:
                    return
            self.drain_sink()
            self.source.idle()
