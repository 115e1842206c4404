"""The peer of ``bolt-agent bench --peer``: pipecat's voice pipeline on our models, timed like ours.

A standalone script, run by :mod:`tools.bench.peer` with the Python of a separate virtual
environment that holds ``pipecat-ai[whisper,piper]==1.14.0``. It imports pipecat and the
standard library only, never ``agent`` (not installed there), and nothing in ``agent/``
imports it: pipecat is no dependency of bolt-agent.

Input, a JSON object on stdin (written by :func:`tools.bench.peer.peer_spec`): ``files``
(``file``, ``path``, ``speech_end_ms``: the end of user speech in the WAV by our own VAD),
``warmup`` (a WAV played first and not measured), ``sample_rate``, ``chunk_ms``, the models
(``whisper_model`` a CTranslate2 folder, ``piper_voice`` an ``.onnx`` with its ``.onnx.json``
beside it, ``llm_base_url`` of an OpenAI-compatible server, ``llm_model``), ``system_prompt``,
and the waits ``after_s``, ``quiet_s``, ``max_wait_s``.

The pipeline is pipecat 1.14's standard voice agent: ``WhisperSTTService`` → user aggregator
(``LLMUserAggregatorParams(vad_analyzer=SileroVADAnalyzer())`` and the default
``UserTurnStrategies``, whose stop strategy is ``TurnAnalyzerUserTurnStopStrategy`` with
``LocalSmartTurnAnalyzerV3``: Smart Turn v3.2, bundled ONNX) → ``OpenAILLMService`` →
``PiperTTSService`` → output transport (:class:`RealTimeSpeaker`: pipecat's own, on a device
that plays in real time like our bench's speaker) → assistant aggregator. Defaults as read in
pipecat 1.14's source: ``VADParams`` confidence 0.7, start 0.2 s, stop 0.2 s;
``SmartTurnParams.stop_secs`` 3 s (the silence after which a turn Smart Turn judged unfinished
ends anyway); Whisper's own ``transcribe`` defaults (beam 5). Only the models,
``device="cpu"`` and ``compute_type="int8"``
(as ours) are set.

Audio is one continuous stream at ``sample_rate``, as ``InputAudioRawFrame`` frames of
``chunk_ms`` queued in real time (chunk *k* when its last sample would have been captured):
silence, the warm-up WAV, then each WAV followed by silence until the reply is over (at least
``after_s`` after the file, no reply under way, ``quiet_s`` without output; at most
``max_wait_s``). The context is emptied between files (the system prompt is the LLM
service's ``system_instruction``). A probe just before the output transport records when each
file's first ``TTSAudioRawFrame`` reaches it (is handed to the output).

Output, one JSON line on stdout, per file: ``voice_to_voice_ms`` (speech end → first reply
audio handed to the output, -1 without a reply), ``endpoint_ms`` (speech end → the user turn's
end, ``UserStoppedSpeakingFrame``), ``turns`` (user turns the file became), ``held`` (Smart Turn
judged the turn unfinished at its last pause, so it ended after ``stop_secs`` of silence),
``smart_turn`` (the probabilities Smart Turn gave, in order), ``transcripts``, ``reply``; and
``errors``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger

logger.remove()  # pipecat logs through loguru: only warnings, on stderr (stdout carries the report)
logger.add(sys.stderr, level=os.environ.get("BOLT_PEER_LOG", "WARNING"))

import numpy as np  # noqa: E402
from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3  # noqa: E402
from pipecat.audio.vad.silero import SileroVADAnalyzer  # noqa: E402
from pipecat.frames.frames import (  # noqa: E402
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    Frame,
    InputAudioRawFrame,
    LLMFullResponseEndFrame,
    OutputAudioRawFrame,
    StartFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSTextFrame,
    UserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline  # noqa: E402
from pipecat.pipeline.worker import PipelineParams, PipelineWorker  # noqa: E402
from pipecat.processors.aggregators.llm_context import LLMContext  # noqa: E402
from pipecat.processors.aggregators.llm_response_universal import (  # noqa: E402
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor  # noqa: E402
from pipecat.services.openai.llm import OpenAILLMService  # noqa: E402
from pipecat.services.piper.tts import PiperTTSService  # noqa: E402
from pipecat.services.whisper.stt import WhisperSTTService  # noqa: E402
from pipecat.transports.base_output import BaseOutputTransport  # noqa: E402
from pipecat.transports.base_transport import TransportParams  # noqa: E402
from pipecat.turns.user_stop import TurnAnalyzerUserTurnStopStrategy  # noqa: E402
from pipecat.turns.user_turn_strategies import UserTurnStrategies  # noqa: E402


@dataclass
class Record:
    """What the probes saw, with ``time.perf_counter()`` stamps (s), and the feeder's marks."""

    events: list[tuple[float, str, str]] = field(default_factory=list)
    smart_turn: list[tuple[float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    last_output: float = 0.0
    replying: bool = False  # a user turn ended and its reply has not ended yet
    speaking: bool = False  # the bot's audio is playing

    def add(self, kind: str, text: str = "") -> None:
        """Stamp one event (``audio``, ``user_stopped``, ``transcript``, ``spoken``, ``llm_end``)."""
        now = time.perf_counter()
        self.events.append((now, kind, text))
        self.last_output = now
        if kind in ("user_stopped", "llm_end"):
            self.replying = kind == "user_stopped"
        if kind in ("bot_started", "bot_stopped"):
            self.speaking = kind == "bot_started"


class Probe(FrameProcessor):
    """Passes every frame on and records the ones the report needs."""

    def __init__(self, record: Record, kinds: tuple[type[Frame], ...]) -> None:
        super().__init__()
        self._record, self._kinds = record, kinds

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        """Record (frames of ``kinds`` only: a broadcast frame passes several probes), push on."""
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM and isinstance(frame, self._kinds):
            if isinstance(frame, TTSAudioRawFrame):
                self._record.add("audio")
            elif isinstance(frame, UserStoppedSpeakingFrame):
                self._record.add("user_stopped")
            elif isinstance(frame, TranscriptionFrame):
                self._record.add("transcript", frame.text)
            elif isinstance(frame, TTSTextFrame):  # what the TTS spoke (it consumes LLMTextFrames)
                self._record.add("spoken", frame.text)
            elif isinstance(frame, LLMFullResponseEndFrame):
                self._record.add("llm_end")
            elif isinstance(frame, BotStartedSpeakingFrame):
                self._record.add("bot_started")
            elif isinstance(frame, BotStoppedSpeakingFrame):
                self._record.add("bot_stopped")
        await self.push_frame(frame, direction)


class RealTimeSpeaker(BaseOutputTransport):
    """pipecat's own output transport on a device that consumes audio in real time (no sound card).

    Through it pipecat paces the reply and says when the bot starts and stops speaking
    (``BotStartedSpeakingFrame``/``BotStoppedSpeakingFrame``), which its turn logic relies on.
    """

    async def start(self, frame: StartFrame) -> None:
        """Start, and say the device is ready."""
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        """Take the frame as long as it plays (16-bit samples)."""
        await asyncio.sleep(len(frame.audio) / (2 * max(1, frame.num_channels) * frame.sample_rate))
        return True


class RecordedSmartTurn(LocalSmartTurnAnalyzerV3):
    """pipecat's local Smart Turn v3, unchanged, with each verdict's probability recorded."""

    def __init__(self, record: Record) -> None:
        super().__init__()
        self._record = record

    def _predict_endpoint(self, audio_array: np.ndarray) -> dict[str, Any]:
        out = super()._predict_endpoint(audio_array)
        self._record.smart_turn.append((time.perf_counter(), float(out["probability"])))
        return out


def read_wav(path: str, rate: int) -> bytes:
    """A mono 16-bit WAV's samples as bytes.

    Raises:
        ValueError: the file is not mono 16-bit PCM at ``rate`` Hz.
    """
    with wave.open(path, "rb") as w:
        if w.getnchannels() != 1 or w.getsampwidth() != 2 or w.getframerate() != rate:
            raise ValueError(f"{path}: want mono 16-bit PCM at {rate} Hz")
        return w.readframes(w.getnframes())


@dataclass
class Mark:
    """When one file was played (perf_counter s); ``speech_end`` is the end of its speech."""

    file: str
    start: float = 0.0
    speech_end: float = 0.0
    end: float = 0.0


class Feeder:
    """Queues the stream in real time: chunk *k* at ``t0 + (k + 1) * chunk`` s."""

    def __init__(self, worker: PipelineWorker, rate: int, chunk_ms: float) -> None:
        self.worker, self.rate = worker, rate
        self.chunk = max(1, int(rate * chunk_ms / 1000))
        self.t0 = 0.0
        self.sent = 0  # samples queued

    async def push(self, pcm: bytes, speech_end_sample: int = -1) -> float:
        """Queue ``pcm`` in real time; returns when sample ``speech_end_sample`` of it was "spoken".

        The time is the push time of the chunk that holds the sample less the samples after
        it in that chunk (the chunk arrives when its last sample is captured). 0.0 when the
        sample is not in ``pcm``.
        """
        if self.t0 == 0.0:
            self.t0 = time.perf_counter()
        samples = np.frombuffer(pcm, dtype=np.int16)
        spoken = 0.0
        for i in range(0, len(samples), self.chunk):
            part = samples[i : i + self.chunk]
            due = self.t0 + (self.sent + len(part)) / self.rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            frame = InputAudioRawFrame(audio=part.tobytes(), sample_rate=self.rate, num_channels=1)
            await self.worker.queue_frame(frame)
            self.sent += len(part)
            if i <= speech_end_sample <= i + len(part):
                spoken = time.perf_counter() - (i + len(part) - speech_end_sample) / self.rate
        return spoken

    async def silence(self, seconds: float) -> None:
        """Queue ``seconds`` of silence in real time."""
        await self.push(bytes(2 * int(seconds * self.rate)))

    async def silence_until(self, record: Record, since: float, spec: dict[str, Any]) -> None:
        """Silence until the reply is over: ``after_s`` past ``since``, no reply going, ``quiet_s`` quiet."""
        while True:
            now = time.perf_counter()
            if now - since >= spec["max_wait_s"]:
                return
            quiet = now - max(record.last_output, since) >= spec["quiet_s"]
            if now - since >= spec["after_s"] and quiet and not (record.replying or record.speaking):
                return
            await self.silence(0.1)


def build(spec: dict[str, Any], record: Record) -> tuple[PipelineWorker, LLMContext]:
    """The voice pipeline of pipecat's examples, with its default turn stack, on the spec's models."""
    voice = Path(spec["piper_voice"])
    stt = WhisperSTTService(
        device="cpu",
        compute_type="int8",
        settings=WhisperSTTService.Settings(model=spec["whisper_model"]),
    )
    llm = OpenAILLMService(
        api_key="none",  # a local llama-server takes any key
        base_url=spec["llm_base_url"],
        settings=OpenAILLMService.Settings(
            model=spec["llm_model"],
            system_instruction=spec["system_prompt"],
            max_completion_tokens=spec["max_tokens"],  # ours stops at [llm] max_tokens too
        ),
    )
    tts = PiperTTSService(download_dir=voice.parent, settings=PiperTTSService.Settings(voice=voice.stem))
    context = LLMContext()  # the system prompt is the service's system_instruction (pipecat >= 1.9)
    # The default stop strategy, with the analyzer built here so its verdicts are recorded.
    turns = UserTurnStrategies(
        stop=[TurnAnalyzerUserTurnStopStrategy(turn_analyzer=RecordedSmartTurn(record))]
    )
    user, assistant = LLMContextAggregatorPair(
        context,
        user_params=LLMUserAggregatorParams(vad_analyzer=SileroVADAnalyzer(), user_turn_strategies=turns),
    )
    speaker = RealTimeSpeaker(TransportParams(audio_out_enabled=True))
    heard = Probe(record, (TranscriptionFrame,))
    handed = Probe(
        record, (TTSAudioRawFrame, UserStoppedSpeakingFrame, TTSTextFrame, LLMFullResponseEndFrame)
    )
    played = Probe(record, (BotStartedSpeakingFrame, BotStoppedSpeakingFrame))
    pipeline = Pipeline([stt, heard, user, llm, tts, handed, speaker, played, assistant])
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(audio_in_sample_rate=spec["sample_rate"]),
        idle_timeout_secs=None,
        enable_rtvi=False,
    )

    @worker.event_handler("on_pipeline_error")
    async def _error(_worker: PipelineWorker, frame: Frame) -> None:
        record.errors.append(str(getattr(frame, "error", frame)))

    return worker, context


async def play(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the pipeline over the spec's files; the per-file results (see the module docstring)."""
    from pipecat.workers.runner import WorkerRunner

    record = Record()
    t_load = time.perf_counter()
    worker, context = build(spec, record)
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _started(_worker: PipelineWorker, _frame: Frame) -> None:
        started.set()

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    await asyncio.wait_for(started.wait(), timeout=120.0)
    load_s = time.perf_counter() - t_load
    rate, feeder = spec["sample_rate"], Feeder(worker, spec["sample_rate"], spec["chunk_ms"])
    await feeder.silence(1.0)
    if spec.get("warmup"):
        await feeder.push(read_wav(spec["warmup"], rate))
        await feeder.silence_until(record, time.perf_counter(), spec)
        context.set_messages([])
    marks: list[Mark] = []
    for item in spec["files"]:
        pcm = read_wav(item["path"], rate)
        end_sample = min(len(pcm) // 2, round(item["speech_end_ms"] * rate / 1000))
        mark = Mark(item["file"], start=time.perf_counter())
        mark.speech_end = await feeder.push(pcm, end_sample)
        mark.end = time.perf_counter()
        await feeder.silence_until(record, mark.end, spec)
        marks.append(mark)
        context.set_messages([])
        await feeder.silence(0.5)
    await worker.queue_frame(EndFrame())
    try:
        await asyncio.wait_for(running, timeout=30.0)
    except asyncio.TimeoutError:
        await worker.cancel()
    return {
        "peer": "pipecat-ai 1.14.0",
        "turn_stack": "SileroVADAnalyzer + LocalSmartTurnAnalyzerV3 (Smart Turn v3.2)",
        "load_s": round(load_s, 2),
        "per_file": [
            per_file(m, marks[i + 1].start if i + 1 < len(marks) else float("inf"), record)
            for i, m in enumerate(marks)
        ],
        "errors": record.errors,
    }


def per_file(mark: Mark, until: float, record: Record) -> dict[str, Any]:
    """One file's results from the events stamped between its start and ``until`` (s)."""
    evs = [(t, k, x) for t, k, x in record.events if mark.start <= t < until]
    first_audio = next((t for t, k, _ in evs if k == "audio" and t >= mark.speech_end), None)
    stops = [t for t, k, _ in evs if k == "user_stopped"]
    first_stop = next((t for t in stops if t >= mark.speech_end), None)

    verdicts = [(t, p) for t, p in record.smart_turn if mark.start <= t < until]
    # The last verdict before the turn ended: "unfinished" (probability <= 0.5, pipecat's rule)
    # means the turn ended only after SmartTurnParams.stop_secs of silence.
    before = [p for t, p in verdicts if first_stop is not None and t <= first_stop]

    def ms(t: float | None) -> float:
        return round((t - mark.speech_end) * 1000.0, 1) if t is not None else -1.0

    return {
        "file": mark.file,
        "voice_to_voice_ms": ms(first_audio),
        "endpoint_ms": ms(first_stop),
        "turns": len(stops),
        "held": bool(before) and before[-1] <= 0.5,
        "smart_turn": [round(p, 3) for _, p in verdicts],
        "transcripts": [x.strip() for _, k, x in evs if k == "transcript"],
        "reply": " ".join(x.strip() for _, k, x in evs if k == "spoken").strip(),
    }


def main() -> None:
    """Read the spec from stdin, run, print the result as one JSON line."""
    spec = json.load(sys.stdin)
    result = asyncio.run(play(spec))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
