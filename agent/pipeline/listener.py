"""Listener stage: source → Silero VAD per 32 ms frame (echo-gated) → the turn-taking stage.

The listener thread reads the source and runs the VAD frame by frame: frames the speaker's
own output explains are not speech (the echo gate, :mod:`agent.listening.echo`). Each frame
goes to the turn-taking stage as a :class:`~agent.events.VoiceFrame` with its speech
probability; input boundaries (``InputStarted``/``InputEnded``) go the same way, in order.
Typed lines (``TextIn``) go straight to the ASR stage. The listener also drains the sink's
playback reports onto the bus (and the played audio into the echo gate).

With a source that need not keep real time (files for ``listen``, typed lines) the listener
waits after each frame until the turn-taking stage has handled it, and after each typed line
until its turn is over: the next input is taken only when the previous one is decided.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

import numpy as np

from agent.config import Config
from agent.events import AudioIn, Event, InputEnded, InputStarted, PlayedBlock, TextIn, VoiceFrame
from agent.listening.echo import EchoGate
from agent.listening.vad import FRAME, SileroFrameVAD
from agent.pipeline.queues import StageQueue
from agent.pipeline.speech import AudioSink
from agent.pipeline.work import WorkTracker
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


class Listener:
    """The listener thread body.

    Args:
        cfg: ``[vad]`` (threshold), ``[live]`` (echo guard).
        source: Where input comes from.
        sink: Where speech goes (its reports are drained here).
        turn_taking: The turn-taking stage's queue (frames, input boundaries).
        asr_inbox: The ASR stage's queue (typed lines).
        publish: The bus.
        work: The pipeline's work in flight.
        heartbeat: Called on every loop iteration (<= 50 ms apart): the systemd watchdog.
        moving: True while the body's motors move (their noise reaches the microphones): the
            speech probability is then scaled by ``[robot] motion_vad_weight``. None: never.
    """

    def __init__(
        self,
        cfg: Config,
        source: Source,
        sink: AudioSink,
        turn_taking: StageQueue,
        asr_inbox: StageQueue,
        publish: Callable[[Event], None],
        work: WorkTracker,
        heartbeat: Callable[[], None] | None = None,
        moving: Callable[[], bool] | None = None,
    ) -> None:
        self.cfg, self.source, self.sink = cfg, source, sink
        self.moving = moving
        self.turn_taking, self.asr_inbox, self.publish, self.work = turn_taking, asr_inbox, publish, work
        self.heartbeat = heartbeat
        self.vad = SileroFrameVAD()
        self.vad(np.zeros(FRAME, dtype=np.float32))  # warm the ONNX session
        self.vad.reset()
        # Playback history: the longest utterance, its pre-roll, and a few seconds to transcribe it.
        history_s = cfg.vad.max_utterance_s + cfg.vad.speech_pad_ms / 1000 + 5.0
        self.echo = EchoGate(cfg.live.echo_max_delay_ms, cfg.live.echo_tail_ms, history_s)
        self._drain_lock = threading.Lock()
        self._buf = np.zeros(0, dtype=np.float32)
        self._recent = np.zeros(4096, dtype=np.float32)
        self._fresh = False  # the next frame starts a new stream
        self.gate: Callable[[AudioIn], AudioIn | None] | None = None
        """Sees every microphone block first and returns what goes on (the block, or the blocks it
        held back joined into one); None: nothing goes further (standby: only the wake word is
        listened for, :mod:`agent.pipeline.standby`). No gate: every block goes on."""

    def reset(self) -> None:
        """Forget the VAD state (the device recovered, a new input): the next frame is marked fresh."""
        self.vad.reset()
        self._buf = np.zeros(0, dtype=np.float32)
        self._fresh = True

    def run(self) -> None:
        """Read the source until the pipeline stops."""
        while not self.work.stopping:
            if self.heartbeat is not None:
                self.heartbeat()  # the systemd watchdog: a hung loop stops pinging
            self.drain_sink()
            msg = self.source.read(0.05)
            if msg is None:
                continue
            if isinstance(msg, AudioIn):
                self._audio(msg)
            elif isinstance(msg, TextIn):
                self._typed(msg)
            elif isinstance(msg, (InputStarted, InputEnded)):
                if isinstance(msg, InputStarted):
                    self.reset()
                self._forward(msg)

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
        if self.gate is not None:
            passed = self.gate(msg)
            if passed is None:
                return
            msg = passed
        self._buf = np.concatenate([self._buf, msg.samples])
        live, thr = self.cfg.live, self.cfg.vad.threshold
        while self._buf.size >= FRAME:
            frame, self._buf = self._buf[:FRAME], self._buf[FRAME:]
            self._recent = np.concatenate([self._recent[FRAME:], frame])
            t = msg.t_end - self._buf.size / SAMPLE_RATE
            prob = self.vad(frame)
            if self.moving is not None and self.moving():
                prob *= self.cfg.robot.motion_vad_weight  # clear speech still passes, motor whine does not
            if live.echo_guard and prob >= thr - 0.15 and self.echo.active(t):
                if self.echo.user_share(self._recent, t) < live.echo_min_unexplained:
                    prob = 0.0  # the robot hearing itself
            audible = self.echo.active(t)
            self._forward(VoiceFrame(-1, frame, prob, t, self.source.name, self._fresh, audible))
            self._fresh = False

    def _forward(self, msg: Event) -> None:
        """Hand ``msg`` to the turn-taking stage; a non-real-time source waits until it is handled."""
        self.turn_taking.put(msg)
        if not self.source.realtime:
            self._drain_until(self.turn_taking.join)

    def _typed(self, msg: TextIn) -> None:
        self.work.started()
        self.asr_inbox.put(msg)
        if not self.source.realtime and self._drain_until(self.work.wait_idle):
            self.drain_sink()
            self.source.idle()

    def _drain_until(self, done: Callable[[float], bool]) -> bool:
        """Drain the sink's reports until ``done(0.1)`` says so; False once stopping."""
        while not done(0.1):
            self.drain_sink()
            if self.work.stopping:
                return False
        return True
