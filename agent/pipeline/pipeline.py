"""The one pipeline, assembled: source → listener → ASR → turn driver → speech → sink.

Every entry point (``run``, ``listen``, ``chat``, ``demo``, ``bench``, ``bench --accuracy``)
builds an :class:`~agent.pipeline.core.AgentCore` once and runs it through this class with
its own source and sink::

    source ─AudioIn/TextIn─▶ listener (VAD, endpointing, echo gate, barge-in)
           ─Utterance/TextIn─▶ ASR stage (transcribe, echo/stop/wake checks)
           ─UserTurn─▶ turn driver (model, tools, robot; background results, greetings)
           ─ReplyDelta/ReplyEnd─▶ speech stage (sentence chunker, TTS)
           ─AudioOut/AudioEnd─▶ sink (speaker, WAV files, nothing) ─playback reports─▶ bus

Threads: the listener, ASR, driver and speech stages each run in a thread of their own and
meet only through typed messages (:mod:`agent.events`) in :class:`~.queues.StageQueue`
inboxes; the models release the GIL, so ASR, LLM and TTS really run in parallel. Reports
go to the :class:`~.bus.Bus`, whose turn book derives each turn's ``reply``/``timing``.

Interruption (barge-in, a stop phrase, a new turn, shutdown) = the turn generation moves
past the turn (every stage drops its leftovers), the model is cancelled after its current
token, the sink is cleared at once, and the history keeps only what was heard.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from agent.audio_io.devices import SoundBackend
from agent.events import BargeIn, CutHistory, Error, Event, Shutdown, TextIn, Timing, UserTurn
from agent.pipeline.asr_stage import ASRStage
from agent.pipeline.bus import Bus
from agent.pipeline.core import AgentCore
from agent.pipeline.driver import TurnDriver
from agent.pipeline.listener import Listener, Source
from agent.pipeline.queues import StageQueue
from agent.pipeline.sources import MicSource
from agent.pipeline.speech import AudioSink, SpeechStage

log = logging.getLogger(__name__)


class Pipeline:
    """One run of the agent over one source and one sink.

    Args:
        core: Models, skills, robot, conversation (shared by successive pipelines).
        bus: Where messages are published (the same bus ``core`` emits on).
        source: Microphone, files or typed text.
        sink: Speaker, WAV files or nothing.
        streaming: False for the sequential baseline (whole reply, then whole synthesis).
        speak: False: no speech synthesis at all.
        asr_bias: Bias ASR toward skill names (when ``[asr] bias_with_skills``).
        heartbeat: Called on every listener loop iteration (the systemd watchdog).
    """

    def __init__(
        self,
        core: AgentCore,
        bus: Bus,
        source: Source,
        sink: AudioSink,
        *,
        streaming: bool = True,
        speak: bool = True,
        asr_bias: bool = True,
        heartbeat: Callable[[], None] | None = None,
    ) -> None:
        self.core, self.bus, self.source, self.sink = core, bus, source, sink
        cfg = core.cfg
        # Speech claims the CPU only in a pipeline that streams speech to this sink.
        core.arbiter.attach(sink if streaming and speak else None)
        self.gate = core.gate  # shared by successive pipelines on one core: turn ids stay unique
        self.asr_q, self.speech_q = StageQueue(self.gate), StageQueue(self.gate)
        self.driver_q = StageQueue(self.gate, on_drop=lambda msg: self.work_finished())
        self._work = 0
        self._cv = threading.Condition()
        self._stopping = threading.Event()
        self._input_done = threading.Event()
        self._current: int | None = None
        self.listener = Listener(
            cfg,
            source,
            sink,
            self.asr_q,
            bus.publish,
            self,
            barge_in=cfg.live.barge_in and source.realtime and sink.realtime,
            heartbeat=heartbeat,
            semantic=core.end_of_turn is not None,
        )
        self.asr = ASRStage(
            core.asr,
            cfg.live,
            self.asr_q,
            self.driver_q,
            self.gate,
            bus.publish,
            self,
            core.registry,
            core.ctx,
            realtime=source.realtime,
            bias=asr_bias,
            echo_guard=source.realtime and sink.realtime,
            judge=core.end_of_turn,
            on_verdict=self.listener.verdict,
            wants=self.listener.wants,
            prefill=self._prefill,
            early_pad_ms=cfg.turn.short_silence_ms - cfg.turn.early_asr_ms if cfg.turn.early_asr_ms else 0,
        )
        self.speech = SpeechStage(
            core.tts,
            sink,
            self.speech_q,
            self.gate,
            bus.publish,
            cfg.live.clause_chars,
            streaming=streaming,
            speak=speak,
            arbiter=core.arbiter,
        )
        self.driver = TurnDriver(
            core,
            self.driver_q,
            self.speech_q,
            self.gate,
            bus.publish,
            self._may_speak_up,
            self._turn_started,
            arbiter=core.arbiter,
        )
        bus.route(Timing, self._turn_done)
        bus.route(CutHistory, self.driver_q.put)
        self._early_start = ThreadPoolExecutor(max_workers=1, thread_name_prefix="early-start")
        self._threads = [
            threading.Thread(target=self._guard, args=(fn,), name=name, daemon=True)
            for name, fn in (
                ("listener", self.listener.run),
                ("asr", self.asr.run),
                ("driver", self.driver.run),
                ("speech", self.speech.run),
            )
        ]

    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:  # a stage thread must never die silently
            log.exception("pipeline stage crashed")
            self.bus.publish(Error(-1, f"a pipeline stage stopped: {e.__class__.__name__}: {e}"))

    # --- life cycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        """Open the source and start every stage.

        Raises:
            agent.audio_io.devices.DeviceError: the microphone is missing or refuses to open.
        """
        self.source.open()
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        """Ask every stage to end (safe from a signal handler and from any thread)."""
        self._stopping.set()
        with self._cv:
            self._cv.notify_all()

    def close(self, timeout: float = 0.8) -> None:
        """Stop, cancel the current turn and any gesture, silence the sink, join the stages.

        Args:
            timeout: Longest wait for the stages to end, s.
        """
        self.stop()
        self.interrupt("shutdown")
        # The robot parks at neutral next: a gesture under way need not finish (the driver
        # would wait for it) and must not start a new move while the stages end.
        self.core.robot.stop()
        for q in (self.asr_q, self.driver_q, self.speech_q):
            q.put(Shutdown(-1))
        deadline = time.monotonic() + timeout
        for t in self._threads:
            if t.is_alive():
                t.join(max(0.0, deadline - time.monotonic()))
        self.source.close()
        self._early_start.shutdown(wait=False, cancel_futures=True)

    def finish(self, wait_background_s: float = 0.0) -> bool:
        """Wait until the source is exhausted and every turn is over, then for background calls.

        Args:
            wait_background_s: Also wait up to this long for background tool calls still
                running (timers), so their results are spoken.

        Returns:
            False when stopped early (signal).
        """
        while not self._input_done.wait(0.1):
            if self._stopping.is_set():
                return False
        deadline = time.monotonic() + wait_background_s
        while not self._stopping.is_set():
            self.wait_idle(0.1)
            # Read in this order: a finished call is queued before its count drops, and the driver
            # marks itself busy before it takes news, so no instant shows none of the three.
            running = self.core.conversation.background_running
            busy = self.driver.has_news() or self._busy()
            if not busy and (not running or time.monotonic() >= deadline):
                return True
        return False

    @property
    def stopping(self) -> bool:
        """Shutdown was asked for."""
        return self._stopping.is_set()

    # --- what the stages ask ------------------------------------------------------------------------
    def interrupt(self, reason: str) -> None:
        """Stop the turn being generated or spoken: cancel, clear the sink, keep what was heard.

        Args:
            reason: ``speech`` (barge-in), ``stop`` (stop phrase), ``new_turn``, ``device`` or ``shutdown``.
        """
        with self._cv:
            tid = self._current
            if tid is None:
                return
            self._current = None
        self.gate.cancel(tid)  # the turn's stop signal: its model stops after the current token
        t0 = time.perf_counter()
        cut = self.sink.clear()
        stop_ms = (time.perf_counter() - t0) * 1000
        self.listener.drain_sink()
        self.bus.publish(BargeIn(tid, reason, round(stop_ms, 2)))
        for spoken in cut:
            self.bus.publish(spoken)

    # --- from outside (the web console) ---------------------------------------------------------------
    def submit_text(self, text: str) -> None:
        """Hand a typed line to the running pipeline as a user turn, as ``chat``'s text source does.

        The line goes to the ASR stage as ``TextIn`` (no audio checks), which starts a turn; in
        a real-time pipeline it interrupts the turn being spoken, like a new spoken turn. Safe
        from any thread; empty lines are ignored.

        Args:
            text: What the user typed.
        """
        text = text.strip()
        if text:
            self.work_started()
            self.asr_q.put(TextIn(-1, text))

    def set_muted(self, muted: bool) -> bool:
        """Mute or unmute the microphone: while muted the listener hears silence.

        Args:
            muted: True to mute.

        Returns:
            False when the source has no microphone to mute (files, typed text).
        """
        if not isinstance(self.source, MicSource):
            return False
        self.source.muted = muted
        return True

    @property
    def can_mute(self) -> bool:
        """The source is a microphone (:meth:`set_muted` works)."""
        return isinstance(self.source, MicSource)

    @property
    def muted(self) -> bool:
        """The microphone is muted (:meth:`set_muted`)."""
        return isinstance(self.source, MicSource) and self.source.muted

    def speaking_turn(self) -> int | None:
        """The turn being generated or spoken, or None."""
        return self._current

    def recent_speech(self, since_s: float) -> list[str]:
        """Sentences the robot started saying in the last ``since_s`` s."""
        return self.bus.book.heard_texts(since_s)

    def work_started(self) -> None:
        """The listener handed over one utterance or line."""
        with self._cv:
            self._work += 1

    def work_finished(self) -> None:
        """An utterance or line ended without a turn, or a turn is over."""
        with self._cv:
            self._work = max(0, self._work - 1)
            self._cv.notify_all()

    def input_done(self) -> None:
        """The source has nothing more."""
        self._input_done.set()

    def _busy(self) -> bool:
        return (
            self._work > 0
            or self._current is not None
            or len(self.driver_q) > 0
            or len(self.asr_q) > 0
            or self.driver.speaking_up
        )

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no utterance, line or turn is in flight; False after ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self._busy():
                left = None if deadline is None else deadline - time.monotonic()
                if (left is not None and left <= 0) or self._stopping.is_set():
                    return False
                self._cv.wait(left if left is None else min(left, 0.1))
            return True

    def _may_speak_up(self) -> bool:
        return (
            not self._stopping.is_set()
            and not self.listener.speaking
            and not self._busy()
            and not self.sink.busy
        )

    def _prefill(self, text: str) -> None:
        """Early model start for a turn that may end at this pause (only while nothing else runs).

        Returns at once: the prompt is evaluated on the early-start thread (the model decodes on
        its own thread) while the ASR thread judges the pause; a turn that starts meanwhile waits
        for the model's lock and then evaluates only what the prompt adds.
        """
        if not self._busy() and not self.sink.busy and not self._stopping.is_set():
            self._early_start.submit(self._prefill_now, text)

    def _prefill_now(self, text: str) -> None:
        try:
            if not self._busy() and not self.sink.busy:
                n = self.core.conversation.prefill(text, self.core.state_line())
                log.debug("early start: %d prompt tokens evaluated for %r", n, text)
        except Exception:  # the turn evaluates its prompt itself
            log.exception("early model start failed")

    def _turn_started(self, turn: UserTurn, unprompted: bool) -> None:
        self.bus.book.open(
            turn.turn_id, turn.t_speech_end, turn.t_endpoint, turn.t_asr, turn.asr_ms, turn.end_rule
        )
        with self._cv:
            if unprompted:  # background results and greetings count as work until spoken
                self._work += 1
            self._current = turn.turn_id

    def _turn_done(self, msg: Event) -> None:
        with self._cv:
            if self._current == msg.turn_id:
                self._current = None
            self._cv.notify_all()
        self.asr.replied()
        self.work_finished()


def run_to_end(pipeline: Pipeline, wait_background_s: float = 0.0) -> bool:
    """Start ``pipeline``, wait until its source is done and its turns are over, then close it.

    Args:
        pipeline: A pipeline not started yet.
        wait_background_s: Also wait up to this long for background tool calls (timers).

    Returns:
        False when it was stopped early (:meth:`Pipeline.stop`, e.g. from a signal handler).
    """
    pipeline.start()
    try:
        return pipeline.finish(wait_background_s)
    finally:
        pipeline.close()


def live_pipeline(
    core: AgentCore, bus: Bus, backend: SoundBackend, heartbeat: Callable[[], None] | None = None
) -> Pipeline:
    """The microphone-to-speaker pipeline of ``bolt-agent run`` on a sound backend.

    Wires device recovery (a lost mic interrupts the turn; a recovered one resets the VAD)
    and head motion from the speech envelope (``[robot] speech_motion``).

    Args:
        core: The agent's parts.
        bus: The bus ``core`` publishes on.
        backend: sounddevice, or fake streams at the OS boundary in tests and ``bench``.
        heartbeat: Called from every listener loop iteration (the systemd watchdog).
    """
    from agent.audio_io.supervisor import Devices
    from agent.pipeline.sinks import SpeakerSink
    from hardware.speech_motion import speak_along

    cfg = core.cfg
    rc = cfg.robot
    devices = Devices(cfg.audio, backend, bus.publish)

    def head_motion(pcm: np.ndarray, rate: int) -> None:
        speak_along(
            core.robot,
            pcm,
            rate,
            enabled=rc.speech_motion,
            max_deg=rc.speech_motion_deg,
            joint=rc.speech_motion_joint,
        )

    source = MicSource(devices, cfg.audio, bus.publish)
    pipeline = Pipeline(core, bus, source, SpeakerSink(devices.speaker, head_motion), heartbeat=heartbeat)
    source.on_lost = lambda: pipeline.interrupt("device")
    source.on_recovered = pipeline.listener.reset
    return pipeline
