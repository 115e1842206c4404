"""The whole agent assembled in one place, for recorded audio and typed text.

    file → decode (PyAV + soxr) → VAD (Silero) → ASR (faster-whisper) → Conversation
         (llama.cpp + skills → robot) → TTS (piper) → reply WAV

:class:`VoiceAgent` loads and warms every model at start, then handles inputs one at a
time; every stage reports through typed events (:mod:`agent.events`) handed to ``emit``.
Bad input (unreadable file, silence, noise) becomes an ``error`` or ``skipped`` event and
the agent goes on with the next input: nothing is lost from the conversation.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent.asr import WhisperASR
from agent.audio import AudioError, decode_file
from agent.config import Config
from agent.conversation import Conversation, TurnResult
from agent.events import BackgroundDone, Error, Event, Notice, Ready, Reply, RobotCommand, Skipped, Timing, Transcript
from agent.llm import ChatModel
from agent.models import resolve_model
from agent.skills import SkillContext, SkillRegistry, load_registry
from agent.tts import PiperTTS
from agent.vad import split_utterances
from hardware.factory import build_robot
from hardware.robot import Robot
from hardware.vision import SceneChange, build_vision

log = logging.getLogger(__name__)


@dataclass
class TurnClock:
    """Which turn is current, so asynchronous robot commands are attributed to it."""

    turn_id: int = -1
    counter: int = field(default=0)

    def next(self) -> int:
        """Start a new turn and return its id."""
        self.turn_id = self.counter
        self.counter += 1
        return self.turn_id


class VoiceAgent:
    """ASR + conversation + TTS + robot, built from a config.

    Args:
        cfg: The validated config.
        emit: Receives every event.
        out_dir: Where reply WAVs are written.

    Raises:
        agent.models.ModelNotFoundError: a model reference points at nothing.
        agent.llm.LLMError: the GGUF cannot be loaded.
        agent.tts.TTSError: the voice cannot be loaded.
    """

    def __init__(self, cfg: Config, emit: Callable[[Event], None], out_dir: Path) -> None:
        self.cfg = cfg
        self.emit = emit
        self.out_dir = Path(out_dir)
        self.clock = TurnClock()
        t0 = time.perf_counter()
        self.robot: Robot
        self.robot, robot_msgs = build_robot(cfg.robot, self._on_robot_command)
        self.registry: SkillRegistry = load_registry(cfg.skills.folders, cfg.skills.include_builtin,
                                                     cfg.skills.enabled, cfg.skills.timeout_s)
        for msg in [*robot_msgs, *self.registry.load_errors]:
            emit(Error(-1, msg))
        hotwords = self.hotwords() if cfg.asr.bias_with_skills else []
        self.asr = WhisperASR(resolve_model(cfg.asr.model, "ASR model"), cfg.asr, hotwords)
        self.model = ChatModel(resolve_model(cfg.llm.model, "LLM"), cfg.llm)
        self.tts = PiperTTS(resolve_model(cfg.tts.voice, "voice"), cfg.tts.length_scale, cfg.tts.speaker_id)
        from skills.motion import install_play_animation

        install_play_animation(self.registry, self.robot.animations)
        self._scene_changes: queue.Queue[SceneChange] = queue.Queue()
        self.vision, vision_msgs = build_vision(cfg.camera, cfg.vision, on_change=self._scene_changes.put)
        for msg in vision_msgs:
            emit(Notice(-1, msg))
        self.ctx = SkillContext(robot=self.robot, scene=self.vision)
        self.conversation = Conversation(self.model, self.registry, self.ctx, cfg.llm, emit)
        self.speak = True  # synthesize replies (off for typed chat without --out)
        # Dynamic state for the newest user turn: the camera's scene summary when there is one.
        self.state_providers: list[Callable[[], str | None]] = [self.vision.latest_summary] if self.vision else []
        self.load_ms = (time.perf_counter() - t0) * 1000.0

    def hotwords(self) -> list[str]:
        """Words that bias ASR toward this robot: skill and animation names, split at underscores.

        Verbs such as "get"/"set" are left out: as hotwords they leak into transcripts. With a
        wake phrase (``[live] attention = "wake"``) the phrase comes first.
        """
        from agent.toolgrammar import STOPWORDS

        words: list[str] = []
        for name in [*self.registry.names(), *self.robot.animations]:
            words += [w for w in name.lower().split("_") if len(w) > 2 and w not in STOPWORDS]
        if self.cfg.live.attention == "wake":
            words = [*self.cfg.live.wake_phrases, *words]
        return list(dict.fromkeys(words))

    def _on_robot_command(self, joint: str, deg: float, t_ms: float) -> None:
        self.emit(RobotCommand(self.clock.turn_id, joint, deg, round(t_ms, 1)))

    def warmup(self) -> None:
        """Warm ASR, LLM (static prompt prefix into the KV cache) and TTS; emits ``ready``."""
        t0 = time.perf_counter()
        self.asr.warmup()
        if self.cfg.llm.warmup:
            self.conversation.warmup()
        self.tts.warmup()
        self.emit(Ready(-1, round(self.load_ms + (time.perf_counter() - t0) * 1000.0, 1)))

    # --- inputs -------------------------------------------------------------------------
    def handle_file(self, path: Path) -> int | None:
        """Run every utterance in an audio file as a user turn.

        Returns:
            Number of turns run (0 when the file had no speech), None when it was unreadable.
        """
        try:
            audio = decode_file(path)
        except AudioError as e:
            self.emit(Error(-1, f"{e}; skipped, continuing with the next input"))
            return None
        segments = split_utterances(audio, self.cfg.vad)
        if not segments:
            self.emit(Skipped(-1, f"no speech found in {path} ({audio.size / 16000:.1f} s of audio)", str(path)))
            return 0
        turns = 0
        for seg in segments:
            t_end = time.perf_counter()  # the utterance is complete: speech end is now
            asr = self.asr.transcribe(seg.audio)
            if not asr.text:
                self.emit(Skipped(-1, f"{path} at {seg.start_ms / 1000:.1f} s: {asr.dropped}", str(path)))
                continue
            self.handle_text(asr.text, asr_ms=asr.duration_ms, t_start=t_end)
            turns += 1
        return turns

    def handle_text(self, text: str, asr_ms: float = 0.0, t_start: float | None = None) -> TurnResult:
        """Run one user turn from text: model, tools, speech; emits transcript → reply → timing.

        Background calls that finished meanwhile are spoken about right after the turn.
        """
        t0 = t_start if t_start is not None else time.perf_counter()
        turn_id = self.clock.next()
        self.emit(Transcript(turn_id, text))
        result = self.conversation.turn(text, turn_id, state=self.state_line())
        self._finish_turn(turn_id, result, asr_ms, t0)
        self.run_background_turns()
        return result

    def run_background_turns(self, wait_s: float = 0.0) -> int:
        """Speak about background calls that finished, in the order they finished, once each.

        Args:
            wait_s: Also wait up to this many seconds for calls still running (end of input).

        Returns:
            Number of background results handled.
        """
        handled = self._greet_arrivals()
        deadline = time.perf_counter() + wait_s
        while True:
            remaining = deadline - time.perf_counter()
            wait = remaining if remaining > 0 and self.conversation.background_running else 0.0
            done = self.conversation.next_background(timeout=wait)
            if done is None:
                return handled
            t0 = time.perf_counter()
            turn_id = self.clock.next()
            self.emit(BackgroundDone(turn_id, done.tool, done.ok, done.result, done.call_id))
            result = self.conversation.background_turn(done, turn_id)
            self._finish_turn(turn_id, result, 0.0, t0)
            handled += 1

    def _greet_arrivals(self) -> int:
        """Start a greeting turn for people who arrived (``[vision] greet_on_arrival``)."""
        greeted = 0
        while True:
            try:
                change = self._scene_changes.get_nowait()
            except queue.Empty:
                return greeted
            if change.kind != "arrived" or not self.cfg.vision.greet_on_arrival:
                continue
            t0 = time.perf_counter()
            turn_id = self.clock.next()
            self.emit(Transcript(turn_id, f"(camera: {change.summary})"))
            result = self.conversation.turn(f"(Someone just arrived. The camera sees: {change.summary}. "
                                            "Greet them in one short sentence.)", turn_id, tools=False)
            self._finish_turn(turn_id, result, 0.0, t0)
            greeted += 1

    def _finish_turn(self, turn_id: int, result: TurnResult, asr_ms: float, t0: float) -> None:
        for problem in result.problems:
            self.emit(Error(turn_id, problem))
        wav, tts_first, tts_ms = None, 0.0, 0.0
        if result.text and self.speak:
            try:
                synth = self.tts.synthesize_to_wav(result.text, self.out_dir / f"reply_{turn_id:03d}.wav")
            except Exception as e:  # speech failing must not lose the turn
                log.exception("turn %d: TTS failed", turn_id)
                self.emit(Error(turn_id, f"speech synthesis failed: {e}"))
                synth = None
            if synth is not None:
                wav, tts_first, tts_ms = str(synth.path), synth.first_audio_ms, synth.total_ms
        self.emit(Reply(turn_id, result.text, wav))
        self.robot.wait_idle(timeout=15.0)  # keep this turn's joint commands inside this turn
        self.emit(Timing(turn_id, asr_ms=round(asr_ms, 1), llm_ttft_ms=round(result.ttft_ms, 1),
                         llm_ms=round(result.llm_ms, 1), tts_first_audio_ms=round(tts_first, 1),
                         tts_ms=round(tts_ms, 1), turn_ms=round((time.perf_counter() - t0) * 1000.0, 1),
                         prompt_tokens=result.prompt_tokens))

    def state_line(self) -> str | None:
        """Dynamic app state for the newest user turn (kept out of the static prompt prefix).

        Each state provider (e.g. the camera's scene summary) contributes one line; None
        when there is nothing to add.
        """
        lines = [line for provider in self.state_providers if (line := provider())]
        return "; ".join(lines) or None

    def close(self) -> None:
        """Stop background skills, return the robot to neutral and release it."""
        self.ctx.shutdown.set()
        if self.vision is not None:
            self.vision.close()
        self.robot.close()
