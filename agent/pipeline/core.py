"""The agent's parts, built once from a config: models, skills, robot, camera, conversation.

:class:`AgentCore` is what the pipeline's stages share: the ASR, chat and voice models, the
skill registry and the robot the skills act on, the camera's scene state and the
conversation history. It does no scheduling of its own (that is :mod:`agent.pipeline.pipeline`).
Loading is slow (models) and happens in :func:`build_core`; :meth:`AgentCore.warmup` pays
every model's first-call cost before the first user turn.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agent.blas import limit_numpy_blas
from agent.config import Config
from agent.control import CpuArbiter
from agent.conversation import Conversation
from agent.engines import ChatEngine, make_chat_model
from agent.events import Error, Event, Notice, Ready, RobotCommand, RobotParked, SceneDescribed
from agent.listening.end_of_turn import EndOfTurnJudge
from agent.listening.skill_words import things_to_end
from agent.models import resolve_model
from agent.pipeline.camera_news import CameraNews
from agent.pipeline.queues import TurnGate
from agent.skills import SkillContext, SkillRegistry, load_registry
from agent.speech.asr import WhisperASR
from agent.speech.tts import PiperTTS
from agent.state.memory import Memory
from agent.state.timers import TimerBook
from agent.state.volume import Volume
from agent.vision.build import build_narrator, chat_projector
from agent.vision.narrator import SceneNarrator
from hardware.factory import build_robot
from hardware.perception.watcher import SceneChange, Vision, build_vision
from hardware.registry import camera_sources
from hardware.robot import Robot

if TYPE_CHECKING:
    from agent.state.keep import AgentState

log = logging.getLogger(__name__)


@dataclass(eq=False)
class AgentCore:
    """Everything a turn needs, built by :func:`build_core`.

    Attributes:
        cfg: The validated config.
        robot: The robot (simulated or serial) behind the safety layer.
        registry: Skills offered to the model.
        asr: Speech recognizer (16 kHz float32 in, text out).
        model: The chat model (GGUF via llama.cpp).
        tts: The voice (text in, int16 audio out).
        vision: Camera + scene describer, or None without a camera.
        ctx: What skills get (robot, scene, shutdown event).
        conversation: History and turn loop.
        scene_changes: People arriving/leaving, from the vision thread.
        load_ms: Model loading time, ms.
        turn_id: The turn being run (set by the turn driver, which also labels the robot's gestures
            with it: :attr:`hardware.robot.Robot.tag`).
        gate: Turn ids and cancellation, shared by every pipeline run on this core.
        end_of_turn: The semantic end-of-turn judge, or None (silence-only endpointing).
        arbiter: Shares the CPU between speech synthesis and the chat model's decoding.
        narrator: The vision-language layer (descriptions in words), or None.
        state: What is kept across restarts (:mod:`agent.state`), or None (``build_core(state=False)``).
        closers: Called last by :meth:`close` (the command line's e-stop socket).
    """

    cfg: Config
    robot: Robot
    registry: SkillRegistry
    asr: WhisperASR
    model: ChatEngine
    tts: PiperTTS
    vision: Vision | None
    ctx: SkillContext
    conversation: Conversation
    emit: Callable[[Event], None]
    scene_changes: queue.Queue[SceneChange] = field(default_factory=queue.Queue)
    load_ms: float = 0.0
    turn_id: int = -1
    gate: TurnGate = field(default_factory=TurnGate)
    end_of_turn: EndOfTurnJudge | None = None
    arbiter: CpuArbiter = field(default_factory=CpuArbiter)
    narrator: SceneNarrator | None = None
    state: AgentState | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)

    def warmup(self) -> None:
        """Warm ASR, LLM (static prompt prefix into the KV cache) and TTS; emits ``ready``."""
        t0 = time.perf_counter()
        self.asr.warmup()
        if self.cfg.llm.warmup:
            self.conversation.warmup()
        self.tts.warmup()
        load_ms = round(self.load_ms + (time.perf_counter() - t0) * 1000.0, 1)
        self.emit(Ready(-1, load_ms, self.conversation.profile, self.conversation.format))

    def state_line(self) -> str | None:
        """Dynamic app state for the newest user turn, or None: the scene, what the user told the robot.

        ``"camera, 0.4 s ago: 1 person in the centre; the room is dim; described 12 s ago: A man
        holds a red mug; the user's name is Sam; the user told you: I like jazz"``. Kept out of the
        static prompt prefix so the KV cache of earlier turns stays valid; the description is
        bounded (``[vision.vlm] context_tokens``), and so are the facts
        (:data:`agent.state.memory.MAX_FACTS`).
        """
        parts: list[str | None] = []
        if self.vision is not None:
            parts.append(self.vision.latest_summary())
            parts.append(self.narrator.context_line() if self.narrator is not None else None)
        if self.ctx.memory is not None:
            parts.append(self.ctx.memory.context_line())
        return "; ".join(p for p in parts if p) or None

    def start_vision(self, idle: Callable[[], bool]) -> None:
        """Let the vision-language layer describe in the background while ``idle()`` (the floor is free)."""
        if self.narrator is not None:
            self.narrator.start(idle)

    def keep_history(self) -> None:
        """Save the conversation's tail to the state store (no-op without one); from the driver thread."""
        if self.state is not None:
            self.state.keep_history(self.conversation.history)

    def close(self) -> None:
        """Park the robot first (its motors off soonest), then stop background skills and the camera.

        Parking is the body's own (neutral and torque off, a Reachy Mini's sleep pose); the
        ``robot_parked`` message says where it parked, read back where the body can tell.
        Pending timers stay in the state store (a shutdown is no cancellation); it is closed last.
        """
        self.ctx.shutdown.set()
        self.robot.close()
        if self.narrator is not None:
            self.narrator.close()
        if self.vision is not None:
            self.vision.close()
        if self.end_of_turn is not None:
            self.end_of_turn.close()
        self.emit(parked_event(self.robot))  # the last word, once everything else has closed
        if self.state is not None:
            self.state.close()
        for close in self.closers:
            close()


def parked_event(robot: Robot) -> RobotParked:
    """The ``robot_parked`` message of a closed robot: where it parked and its motors, read back."""
    rep = robot.parked
    if rep is None:
        return RobotParked(-1, robot.positions(), robot.torque_on)
    return RobotParked(-1, rep.positions, bool(rep.motors_on), rep.pose, rep.read_back)


NOT_HOTWORDS = frozenset(
    {"cancel", "abilities"}
    # The skills of issue 50 (dates, timers asked about and changed, who is who) add none: each
    # hotword biases every transcript, and these were not measured with bench (left as before).
    | {"date", "timers", "left", "change", "add", "own", "name", "remember", "forget", "recall"}
    # Nor the volume skills' (not measured with bench either).
    | {"volume"}
)
"""Words of skill names that are not passed to the recognizer as hotwords (see :func:`hotwords`)."""


def hotwords(cfg: Config, registry: SkillRegistry, animations: list[str]) -> list[str]:
    """Words that bias ASR toward this robot: skill and animation names, split at underscores.

    Verbs such as "get"/"set" are left out: as hotwords they leak into transcripts. So is
    "cancel" (of ``cancel_timer``): with it tiny.en heard the shared turn_then_wave.wav as "turn
    your head 30 degrees to the right hand and wave" instead of "... turn the right hand wave",
    words the text model scores -1.87 against -1.13, so that turn waited for the long silence
    (voice-to-voice 1.7 s against 0.75 s; ``bench``, 2026-12-05). So is "abilities" (the
    ``abilities`` skill's name): people ask "what can you do?", its keywords, not the name, and
    every hotword biases every transcript (with it ``bench`` measured p95 1224 and 1323 ms,
    without it 1202 and 1175, the code before 1152 and 1281: within the run-to-run spread, so
    left out for the bias alone). With a wake phrase (``[live] attention = "wake"``) the phrases
    come first.

    Args:
        cfg: The config (``[live] attention`` and ``wake_phrases``).
        registry: The skills offered to the model.
        animations: The robot's animation names.

    Returns:
        Lower-case words, each once, in order.
    """
    from agent.listening.skill_words import STOPWORDS

    skip = STOPWORDS | NOT_HOTWORDS
    words: list[str] = []
    for name in [*registry.names(), *animations]:
        words += [w for w in name.lower().split("_") if len(w) > 2 and w not in skip]
    if cfg.live.attention == "wake":
        words = [*cfg.live.wake_phrases, *words]
    return list(dict.fromkeys(words))


def build_core(
    cfg: Config,
    emit: Callable[[Event], None],
    on_robot: Callable[[Robot], None] | None = None,
    state: bool = False,
) -> AgentCore:
    """Load every part named by ``cfg``; problems that leave the agent usable become events.

    The robot is built first (its drivers connect while the models load). If anything after
    it fails, or a signal handler raises, the robot is parked (neutral, torque off, a
    ``robot_parked`` message) before the exception leaves.

    Args:
        cfg: The validated config.
        emit: Receives ``error``/``notice`` messages and every joint command (``robot``).
        on_robot: Called with the robot as soon as it exists, before any model loads (the
            entry point's signal handling parks it from then on).
        state: Open the state store of ``[state]`` and restore from it (``bolt-agent run``);
            one-off commands and tests leave it off.

    Raises:
        agent.models.ModelNotFoundError: a model reference points at nothing.
        agent.engines.base.LLMError: the GGUF cannot be loaded.
        agent.speech.tts.TTSError: the voice cannot be loaded.
        hardware.driver.DriverError: the robot's driver cannot be built.
    """
    t0 = time.perf_counter()
    limit_numpy_blas()  # its spinning worker thread would slow every Whisper decode (agent/blas.py)

    def on_robot_command(joint: str, deg: float, t_ms: float) -> None:
        # Every body's joint commands, from its safety layer. The turn whose gesture sends it (a
        # wave outlives the turn that started it).
        tag = robot.sending_tag
        emit(RobotCommand(tag if isinstance(tag, int) else -1, joint, deg, round(t_ms, 1)))

    lost: set[str] = set()

    def on_driver_status(name: str, state: str, message: str) -> None:
        # A body that comes and goes (a daemon restarted, a cable pulled) is news for people.
        if state == "offline" and name not in lost:
            lost.add(name)
            if robot_ref:  # the first connection's failure is one of build_robot's messages
                emit(Error(-1, f"robot: {message or name + ' offline'}"))
        elif state == "online" and name in lost:
            lost.discard(name)
            emit(Notice(-1, f"robot: {name} is back online{': ' + message if message else ''}"))

    robot_ref: list[Robot] = []
    robot, robot_msgs = build_robot(cfg.robot, on_status=on_driver_status)
    robot.on_command = on_robot_command  # after the wake-up move at start: that one is nobody's turn
    robot_ref.append(robot)
    vision: Vision | None = None
    try:
        if on_robot is not None:
            on_robot(robot)
        log.info("robot ready (%s); loading the models", ", ".join(robot.joints))
        registry = load_registry(
            cfg.skills.folders,
            cfg.skills.include_builtin,
            cfg.skills.enabled,
            cfg.skills.timeout_s,
            animations=list(robot.animations),
            joints=list(robot.joints),
            libraries={kind: list(lib) for kind, lib in robot.libraries.items()},
            devices=cfg.devices(),
        )
        for msg in [*robot_msgs, *registry.load_errors]:
            emit(Error(-1, msg))
        words = hotwords(cfg, registry, list(robot.animations)) if cfg.asr.bias_with_skills else []
        asr = WhisperASR(resolve_model(cfg.asr.model, "ASR model"), cfg.asr, words)
        arbiter = CpuArbiter()
        model, mmproj = load_chat_model(cfg, arbiter, emit)
        tts = PiperTTS(resolve_model(cfg.tts.voice, "voice"), cfg.tts.length_scale, cfg.tts.speaker_id)
        scene_changes: queue.Queue[SceneChange] = queue.Queue()
        camera_news = CameraNews(emit)
        vision, vision_msgs = build_vision(
            cfg.camera,
            cfg.vision,
            on_change=scene_changes.put,
            named=camera_sources(cfg.robot),
            on_status=camera_news,
        )
        camera_news.started = True
        for msg in vision_msgs:
            emit(Notice(-1, msg))
        ctx = SkillContext(  # a state store replaces the timer book, the memory and the volume
            robot=robot,
            scene=vision,
            timers=TimerBook(),
            abilities=registry.abilities(),
            memory=Memory(),
            robot_name=cfg.agent.name,
            volume=Volume(),
        )
        conversation = Conversation(model, registry, ctx, cfg.llm, emit)
        narrator, narrator_msgs = build_narrator(
            cfg,
            vision,
            model,
            mmproj,
            render=conversation.look_prompt,
            on_described=lambda d: emit(
                SceneDescribed(-1, d.text, d.trigger, round(d.took_ms, 1), d.image_tokens, d.frames)
            ),
            on_error=lambda message: emit(Error(-1, f"vision: {message}")),
        )
        for msg in narrator_msgs:
            emit(Notice(-1, msg))
        if narrator is not None and vision is not None:
            ctx.narrator = narrator
            vision.on_change = _fan_out(vision.on_change, narrator.on_change)
        core = AgentCore(
            cfg,
            robot,
            registry,
            asr,
            model,
            tts,
            vision,
            ctx,
            conversation,
            emit,
            scene_changes,
            (time.perf_counter() - t0) * 1000.0,
            arbiter=arbiter,
            narrator=narrator,
        )
        core.end_of_turn = build_end_of_turn(cfg, emit, things_to_end(list(registry.skills.values())))
        if state:
            from agent.pipeline.state import open_state

            core.state = open_state(cfg.state, conversation, ctx, emit)
    except BaseException:  # a model that fails to load, or a signal: never leave the robot holding torque
        _park(robot, vision, emit)
        raise
    return core


def load_chat_model(
    cfg: Config, arbiter: CpuArbiter, emit: Callable[[Event], None]
) -> tuple[ChatEngine, Path | None]:
    """The chat model of ``[llm]``, with its vision projector when ``[vision.vlm] engine = "chat"``.

    A projector that is missing or does not load is a notice: the model loads without it and
    the camera is described by OpenCV alone.

    Returns:
        ``(model, projector path or None)``: the path only when the projector loaded.

    Raises:
        agent.models.ModelNotFoundError: the model reference points at nothing.
        agent.engines.base.LLMError: the GGUF cannot be loaded.
    """
    from agent.engines.base import LLMError
    from agent.vision.build import OPENCV_ONLY

    path = resolve_model(cfg.llm.model, "LLM") if cfg.llm.model else None
    mmproj, messages = chat_projector(cfg)
    for msg in messages:
        emit(Notice(-1, msg))
    if mmproj is not None:
        try:
            model = make_chat_model(
                cfg.llm, path, arbiter, mmproj=mmproj, mmproj_offload=cfg.vision.vlm.mmproj_offload
            )
            return model, mmproj
        except LLMError as e:
            emit(Error(-1, f"vision: the chat model's projector did not load ({e}); {OPENCV_ONLY}"))
    return make_chat_model(cfg.llm, path, arbiter), None


def _fan_out(*listeners: Callable[[SceneChange], None] | None) -> Callable[[SceneChange], None]:
    """One scene-change listener that calls each of ``listeners`` (None ones skipped)."""
    alive = [fn for fn in listeners if fn is not None]

    def call(change: SceneChange) -> None:
        for fn in alive:
            fn(change)

    return call


def _park(robot: Robot, vision: Vision | None, emit: Callable[[Event], None]) -> None:
    """Close the camera and park the robot of a core that could not be built."""
    try:
        robot.close()
        if vision is not None:
            vision.close()
    except Exception:  # the build's own error is the one to report
        log.exception("parking the robot after a failed start failed")
    emit(parked_event(robot))


def build_end_of_turn(
    cfg: Config, emit: Callable[[Event], None], other_things: frozenset[str] = frozenset()
) -> EndOfTurnJudge | None:
    """The semantic end-of-turn judge of ``[turn]``, or None for silence-only endpointing.

    A missing model is a notice, not an error: the judge works with either model, and without
    both the turn ends after ``[vad] min_silence_ms`` of silence as before.

    Args:
        cfg: The validated config.
        emit: Receives the notices.
        other_things: Words that make a stop phrase no stop command (``things_to_end`` of the
            skills: "stop the timer" is judged like any request, not as a stop that never waits).

    Returns:
        The judge, or None (``[turn] end_of_turn = "silence"``, or neither model loadable).
    """
    from agent.engines.base import LLMError
    from agent.listening.end_of_turn import EndOfTurnJudge, TextEndOfTurn, robot_names
    from agent.listening.smart_turn import EndOfTurnModelMissing, SmartTurn
    from agent.listening.turns import stop_command
    from agent.models import ModelNotFoundError

    turn = cfg.turn
    if turn.end_of_turn != "semantic":
        return None
    smart = text = None
    try:
        smart = SmartTurn(Path(turn.smart_turn_model) if turn.smart_turn_model else None)
    except (EndOfTurnModelMissing, RuntimeError) as e:
        emit(Notice(-1, f"end-of-turn: no Smart Turn model ({e})"))
    if turn.text_model:
        try:
            text = TextEndOfTurn(
                resolve_model(turn.text_model, "end-of-turn text model"), cfg.llm.system_prompt
            )
        except (ModelNotFoundError, LLMError) as e:
            emit(Notice(-1, f"end-of-turn: no text model ({e})"))
    if smart is None and text is None:
        emit(
            Notice(-1, f"end-of-turn by silence only: turns end after {cfg.vad.min_silence_ms} ms of silence")
        )
        return None
    live = cfg.live
    return EndOfTurnJudge(
        turn,
        smart,
        text,
        lambda t: stop_command(t, live.stop_phrases, live.stop_max_words, other_things) is not None,
        robot_names(live.wake_phrases),
    )
