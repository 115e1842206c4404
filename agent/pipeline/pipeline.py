"""The one pipeline, assembled: source → listener → turn-taking → ASR → turn driver → speech → sink.

Every entry point (``run``, ``listen``, ``chat``, ``demo``, ``bench``, ``bench --accuracy``)
builds an :class:`~agent.pipeline.core.AgentCore` once and runs it through this class with
its own source and sink::

    source ─AudioIn/TextIn─▶ listener (Silero VAD, echo gate)
           ─VoiceFrame─▶ turn-taking (endpointing, pause verdicts, barge-in)
               ⇄ PauseCheck/PauseTranscript ⇄ ASR stage
           ─Utterance/TextIn─▶ ASR stage (transcribe, echo/stop/wake checks)
           ─UserTurn─▶ turn driver (model, tools, robot; background results, greetings)
           ─ReplyDelta/ReplyEnd─▶ speech stage (sentence chunker, TTS)
           ─AudioOut, end(turn)─▶ sink (speaker, WAV files, nothing) ─playback reports─▶ bus

Threads: the listener, turn-taking, ASR, driver and speech stages each run in a thread of
their own and meet only through typed messages (:mod:`agent.events`) in
:class:`~.queues.StageQueue` inboxes; the models release the GIL, so ASR, LLM and TTS really
run in parallel. Reports go to the :class:`~.bus.Bus`, whose turn book derives each turn's
``reply``/``timing``. Three named control edges cross threads: the turn's
:class:`~agent.control.StopSignal` (from the :class:`~.queues.TurnGate`), the
:class:`~agent.control.CpuArbiter` (speech synthesis before decoding while the speaker waits)
and the :class:`~.work.WorkTracker` (what is in flight, whether the floor is free).

With ``[live] attention = "wake_word"`` a live run starts in standby: :mod:`.standby` sees every
microphone block before the listener's VAD and lets none through until the wake word is heard.

Interruption (barge-in, a stop phrase, a new turn, shutdown): a stage publishes an
:class:`~agent.events.Interrupt`; here the turn generation moves past the turn (every stage
drops its leftovers and the turn's model stops after its current token), the sink is cleared
at once, and the history keeps only what was heard.

Holding the floor: speech over the robot that may be an interruption (its words say so, or it
went on before any word was known) is a :class:`~agent.events.Hold`: the sink pauses at once and
the turn goes on being prepared (:meth:`Pipeline.hold`). The user's utterance then decides: a turn
interrupts the held one as above; an acknowledgement, a noise or nothing is a
:class:`~agent.events.Resume`, and the robot goes on from the start of the sentence it was cut in
(:meth:`Pipeline.resume`; LiveKit's ``resume_false_interruption``).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from agent.audio_io.devices import SoundBackend
from agent.events import (
    BargeIn,
    CutHistory,
    Error,
    Event,
    Held,
    Hold,
    Interrupt,
    Notice,
    PlaybackStarted,
    Resume,
    Resumed,
    Shutdown,
    TextIn,
    Timing,
    TurnDropped,
    UserTurn,
)
from agent.events import Standby as StandbyChange
from agent.listening.pace import pause_model
from agent.pipeline.asr_stage import ASRStage
from agent.pipeline.body_life import BodyLife, build_body_life
from agent.pipeline.bus import Bus
from agent.pipeline.core import AgentCore
from agent.pipeline.driver import TurnDriver
from agent.pipeline.heap import HeapTrimmer
from agent.pipeline.listener import Listener, Source
from agent.pipeline.liveness import Liveness
from agent.pipeline.posture import Postures
from agent.pipeline.queues import StageQueue
from agent.pipeline.sources import MicSource
from agent.pipeline.speech import AudioSink, SpeechStage
from agent.pipeline.standby import Standby, build_standby
from agent.pipeline.turn_taking import EarlyStart, TurnTaking
from agent.pipeline.work import WorkTracker

log = logging.getLogger(__name__)

LAST_GESTURE_S = 15.0
"""Longest wait at the end of a run for a gesture still running (a looping one never ends), s."""


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
        heartbeat: Called on every listener loop iteration while no stage is stuck on one item
            longer than ``[live] stall_limit_s`` (the systemd watchdog; :mod:`.liveness`).
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
        self.work = WorkTracker(sink)
        self.gate = core.gate  # shared by successive pipelines on one core: turn ids stay unique
        # Each stage reports the item it works on; the watchdog pings only while none is stuck.
        self.liveness = Liveness(cfg.live.stall_limit_s, bus.publish)
        self.turn_q, self.asr_q, self.speech_q = (
            StageQueue(self.gate, clock=self.liveness.stage("turn-taking")),
            StageQueue(self.gate, clock=self.liveness.stage("asr")),
            StageQueue(self.gate, clock=self.liveness.stage("speech")),
        )
        self.driver_q = StageQueue(
            self.gate, on_drop=lambda msg: self.work.finished(), clock=self.liveness.stage("driver")
        )
        realtime = source.realtime
        robot = core.robot
        # Motor noise reaches the microphones: while the body moves, speech must be clearer.
        moving = (lambda: robot.moving) if realtime and cfg.robot.motion_vad_weight < 1.0 else None
        ping = self.liveness.gate(heartbeat)
        self.listener = Listener(
            cfg, source, sink, self.turn_q, self.asr_q, bus.publish, self.work, ping, moving
        )
        # The body's life between commands (attention, eye contact, idle life) in a live run only:
        # files and typed lines are processed, not lived with.
        self.life = build_body_life(core, bus.publish) if isinstance(source, MicSource) else BodyLife()
        # [live] attention = "wake_word": standby until the wake word, in a live run only.
        self.standby: Standby | None = None
        if cfg.live.attention == "wake_word" and isinstance(source, MicSource):
            self.standby = build_standby(
                cfg.live,
                robot,
                core.tts,
                bus.publish,
                self.gate,
                lambda: not self.work.quiet(),
                sink.play,
                core.asr.model,
            )
        self.postures = Postures(robot, [self.life.floor])
        self.early_start = EarlyStart(self._prefill, self.work)
        # The speaker's pauses, learned over this pipeline's conversation (both stages learn them).
        self.pauses = pause_model(cfg.turn) if core.end_of_turn is not None else None
        self.turn_taking = TurnTaking(
            cfg,
            self.turn_q,
            self.asr_q,
            bus.publish,
            self.work,
            sink,
            core.end_of_turn,
            self.early_start,
            realtime=realtime,
            barge_in=cfg.live.barge_in and realtime and sink.realtime,
            postures=self.postures,
            pauses=self.pauses,
            arbiter=core.arbiter,
        )
        turn = cfg.turn
        self.asr = ASRStage(
            core.asr,
            cfg.live,
            self.asr_q,
            self.turn_q,
            self.driver_q,
            self.gate,
            bus.publish,
            self.work,
            bus.book,
            core.registry,
            core.ctx,
            realtime=realtime,
            bias=asr_bias,
            echo_guard=realtime and sink.realtime,
            echo=self.listener.echo,
            post_roll_ms=cfg.vad.speech_pad_ms,
            early_pad_ms=turn.short_silence_ms - turn.early_asr_ms if turn.early_asr_ms else 0,
            continue_ms=turn.continue_ms if turn.end_of_turn == "semantic" else 0,
            pauses=self.pauses,
            sure_logprob=turn.unclear_logprob,
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
            lookahead_s=cfg.live.tts_lookahead_s,
        )
        self.driver = TurnDriver(
            core, self.driver_q, self.speech_q, self.gate, bus.publish, self.work, core.arbiter
        )
        if self.standby is not None:
            self.standby.connect(self.listener, self.asr)
            # A sleep phrase was an utterance handed over (the floor "thinking") that no turn ends.
            bus.route(
                StandbyChange, lambda msg: self.postures.turn_over() if msg.state == "standby" else None
            )
        self.trim_heap = HeapTrimmer()  # what a turn freed in the models' malloc arenas goes back
        bus.route(Timing, self._turn_done)
        bus.route(TurnDropped, self._turn_dropped)
        # The standby's chime is no turn (turn -1): the floor stays as it is.
        bus.route(PlaybackStarted, lambda msg: self.postures.robot_speaking() if msg.turn_id >= 0 else None)
        # A typed turn has no voice activity: the floor is the turn's from its start (no idle life).
        bus.route(UserTurn, lambda msg: self.postures.user_done() if msg.end_rule == "typed" else None)
        bus.route(CutHistory, self.driver_q.put)
        bus.route(Interrupt, self._interrupt)
        bus.route(Hold, self._hold)
        bus.route(Resume, self._resume)
        self._floor_lock = threading.Lock()
        self._held: tuple[int, float, float] | None = None  # the held turn, when (perf_counter s), stop ms
        self._threads = [
            threading.Thread(target=self._guard, args=(fn,), name=name, daemon=True)
            for name, fn in (
                ("listener", self.listener.run),
                ("turn-taking", self.turn_taking.run),
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
        if self.standby is not None:
            self.standby.start()  # before the listener's first block: the agent starts in standby
        for t in self._threads:
            t.start()
        self.life.start()
        self.core.start_vision(self._quiet)  # background looks only while the floor is free

    def stop(self) -> None:
        """Ask every stage to end (safe from a signal handler and from any thread)."""
        self.work.stop()

    def close(self, timeout: float = 0.8) -> None:
        """Stop, cancel the current turn and any gesture, silence the sink, join the stages.

        Args:
            timeout: Longest wait for the stages to end, s.
        """
        self.stop()
        self.interrupt("shutdown")
        self.life.close()
        # The robot parks at neutral next: a gesture under way need not finish and must not
        # start a new move while the stages end.
        self.core.robot.stop()
        for q in (self.turn_q, self.asr_q, self.driver_q, self.speech_q):
            q.put(Shutdown(-1))
        deadline = time.monotonic() + timeout
        for t in self._threads:
            if t.is_alive():
                t.join(max(0.0, deadline - time.monotonic()))
        self.source.close()
        self.sink.close()
        self.early_start.close()
        self.trim_heap.close()
        self.core.arbiter.attach(None)

    def finish(self, wait_background_s: float = 0.0) -> bool:
        """Wait until the source is exhausted and every turn is over, then for background calls.

        Args:
            wait_background_s: Also wait up to this long for background tool calls still
                running (timers), so their results are spoken.

        Returns:
            False when stopped early (signal).
        """
        while not self.work.wait_input_done(0.1):
            if self.work.stopping:
                return False
        deadline = time.monotonic() + wait_background_s
        background = self.core.conversation.background
        while not self.work.stopping:
            # Read in this order: a finished call is queued before its count drops, and the driver
            # counts a background result as work before it takes it, so no instant shows none of the three.
            running = self.core.conversation.background_running
            busy = self.driver.has_news() or self.work.busy()
            left = deadline - time.monotonic()
            if not busy and (not running or left <= 0):
                if running:  # a hung background skill is a daemon thread: it never holds the exit
                    msg = (
                        f"{running} background tool calls still running after "
                        f"{wait_background_s:g} s; not waited for"
                    )
                    log.info("%s", msg)  # said once, as the note
                    self.bus.publish(Notice(-1, msg))
                return self._last_gesture()
            # Sleep, never spin: on the turn in flight, or until a background call finishes (at
            # most 0.1 s: a result the driver is about to take, a stop). This loop used to call
            # wait_idle alone, which returns at once when nothing is in flight: a core at 100 %
            # for as long as a timer ran (37 s of CPU in a 35 s chat).
            if self.work.busy():
                self.work.wait_idle(0.1)
            else:
                background.wait_finished(min(0.1, left) if left > 0 else 0.1)
        return False

    def _last_gesture(self) -> bool:
        """The input is done and every turn over: let a gesture still running finish (a bounded wait).

        Turns never wait for the robot's motion; only the end of a run does, so ``listen`` and
        ``demo`` do not cut their last wave short. False when stopped meanwhile.
        """
        deadline = time.monotonic() + LAST_GESTURE_S
        while not self.core.robot.wait_idle(0.1):
            if self.work.stopping:
                return False
            if time.monotonic() >= deadline:
                break
        return True

    @property
    def stopping(self) -> bool:
        """Shutdown was asked for."""
        return self.work.stopping

    def _quiet(self) -> bool:
        """The floor is free and the agent awake (no background looks in standby)."""
        return self.work.quiet() and (self.standby is None or not self.standby.asleep)

    # --- interruptions ---------------------------------------------------------------------------------
    def _interrupt(self, msg: Event) -> None:
        assert isinstance(msg, Interrupt)
        self.interrupt(msg.reason)

    def interrupt(self, reason: str) -> None:
        """Stop the turn being generated or spoken: cancel it, clear the sink, keep what was heard.

        Stages ask for it with an :class:`~agent.events.Interrupt` message; safe from any thread.

        Args:
            reason: ``speech`` (barge-in), ``stop`` (stop phrase), ``new_turn``, ``device`` or ``shutdown``.
                A turn held for the user's speech (:meth:`hold`) that their new turn cancels is a
                barge-in for ``speech``, its ``stop_ms`` the hold's (the speaker fell silent then).
        """
        with self._floor_lock:
            tid = self.work.take_current()
            held, self._held = self._held, None
            if tid is None:
                return
            self.gate.cancel(tid)  # the turn's stop signal: its model stops after the current token
            t0 = time.perf_counter()
            cut = self.sink.clear()  # a paused sink plays again (the next turn's audio)
        stop_ms = (time.perf_counter() - t0) * 1000
        if held is not None and held[0] == tid and reason == "new_turn":
            reason, stop_ms = "speech", held[2]
        self.listener.drain_sink()
        self.bus.publish(BargeIn(tid, reason, round(stop_ms, 2)))
        for spoken in cut:
            self.bus.publish(spoken)

    def _hold(self, msg: Event) -> None:
        assert isinstance(msg, Hold)
        self.hold(msg.onset_t, msg.reason)

    def _resume(self, msg: Event) -> None:
        assert isinstance(msg, Resume)
        self.resume(msg.reason)

    def hold(self, onset_t: float, reason: str) -> None:
        """Silence the turn being spoken at once and keep it (the user may be interrupting).

        Publishes :class:`~agent.events.Held` and the sentence cut (``Spoken(completed=False)``);
        nothing when no turn is being spoken or one is held already. Safe from any thread.

        Args:
            onset_t: When the user's speech began (perf_counter s).
            reason: What decided (:attr:`agent.events.Hold.reason`).
        """
        with self._floor_lock:
            tid = self.work.current_turn
            if tid is None or self._held is not None or not self.sink.busy:
                return
            t0 = time.perf_counter()
            cut = self.sink.pause()
            stop_ms = (time.perf_counter() - t0) * 1000
            self._held = (tid, t0, stop_ms)
        self.bus.publish(Held(tid, round((t0 - onset_t) * 1000, 1), reason, round(stop_ms, 2)))
        for spoken in cut:
            self.bus.publish(spoken)

    def resume(self, reason: str) -> None:
        """The held turn goes on (from the start of the sentence it was cut in); nothing when none is held.

        Publishes :class:`~agent.events.Resumed`. Safe from any thread.

        Args:
            reason: What the speech turned out to be (:attr:`agent.events.Resume.reason`).
        """
        with self._floor_lock:
            held, self._held = self._held, None
            if held is None or self.work.current_turn != held[0]:
                return
            self.sink.resume()
        self.bus.publish(Resumed(held[0], round((time.perf_counter() - held[1]) * 1000, 1), reason))

    @property
    def held_turn(self) -> int | None:
        """The turn held by :meth:`hold` and not resumed or interrupted since, or None."""
        held = self._held
        return held[0] if held is not None else None

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
            self.work.started()
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
        return self.work.current_turn

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no utterance, line or turn is in flight; False after ``timeout`` s."""
        return self.work.wait_idle(timeout)

    # --- bookkeeping ----------------------------------------------------------------------------------
    def _prefill(self, text: str) -> int:
        """The early start's work: the first round's prompt for ``text``, with the current state line."""
        return self.core.conversation.prefill(text, self.core.state_line())

    def _turn_dropped(self, msg: Event) -> None:
        """A prepared turn the user talked on through: over, and never heard (no reply to wait for)."""
        if isinstance(msg, TurnDropped) and msg.continued:
            return  # answered and over already; the turn that continues it is the work now
        self.work.turn_over(msg.turn_id)
        self.work.finished()

    def _turn_done(self, msg: Event) -> None:
        self.postures.turn_over()
        self.work.turn_over(msg.turn_id)
        self.asr.replied()
        self.work.finished()
        self.trim_heap.request()


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
    devices = Devices(cfg.audio, backend, bus.publish, functools.partial(_gain, core))

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
    source.on_lost = lambda: bus.publish(Interrupt(-1, "device"))
    source.on_recovered = pipeline.listener.reset
    return pipeline


def _gain(core: AgentCore) -> float:
    """The speaking volume's gain now (the volume set by voice; 1.0 without one)."""
    volume = core.ctx.volume
    return 1.0 if volume is None else volume.gain
