"""Text-to-speech with a piper voice: reply text in, one int16 audio chunk per sentence out.

Design:

* :class:`PiperTTS` loads one piper 1.8 ONNX voice (``NAME.onnx`` with ``NAME.onnx.json`` next
  to it) once, on the CPU; loading takes about half a second, and :meth:`PiperTTS.warmup`
  takes the first-call cost out of the first reply.
* :meth:`PiperTTS.synthesize` is a generator. It cleans the reply for speech
  (:func:`agent.speech.text.clean_for_speech`), cuts it into sentences
  (:func:`agent.speech.sentences.split_sentences`) and synthesizes one sentence each time the
  caller asks for the next chunk, so playback starts after the first sentence (typically
  50-100 ms here) and a barge-in cancels by simply stopping iteration: no sentence after the
  current one is ever computed. Each :class:`SpeechChunk` keeps the text it says, so a caller
  that is interrupted knows which words were played.
* A sentence that fails in piper is logged and skipped; the others are still spoken.
  Problems with the voice itself (missing, corrupt, wrong speaker) raise :class:`TTSError`
  at construction, never in the middle of a reply.
* Blocking: synthesis runs ONNX inference in the calling thread (real-time factor about 0.1
  on a laptop CPU; onnxruntime releases the GIL). Run it in a one-worker executor; calls on
  one instance are serialised by a lock.

Audio is mono int16 PCM at the voice's sample rate (22050 Hz for ``en_US-joe-medium``);
piper already ends each sentence with 100-200 ms of silence, so chunks can be played back to
back.
"""

from __future__ import annotations

import logging
import threading
import time
import wave
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from agent.speech.sentences import split_sentences
from agent.speech.text import clean_for_speech

if TYPE_CHECKING:
    from piper import PiperVoice

__all__ = ["TTSError", "SpeechChunk", "SynthesisResult", "TextToSpeech", "PiperTTS"]

logger = logging.getLogger(__name__)

MAX_SENTENCE_CHARS = 200
"""Longest piece of text synthesized at once; longer sentences are cut at clause boundaries."""

_WARMUP_TEXT = "Hello."


ARENA_SHRINKAGE = ("memory.enable_memory_arena_shrinkage", "cpu:0")
"""onnxruntime run option (``onnxruntime_run_options_config_keys.h``): at the end of each run,
hand the CPU arena's free regions back. Without it piper's session kept growing in a long run:
each sentence has its own input length, and the arena, extended for every new size, was never
shrunk. Measured with ``en_US-joe-medium`` on random sentences of 3-30 words (2026-12-02): PSS
319 MiB after 50 sentences, 323 after 100, 402 after 150, 413 after 200 without it; 242, 228
and 228 after 50, 100 and 150 with it
(see :class:`_ShrinkingSession`)."""


class TTSError(Exception):
    """The voice cannot be used; the message names the file and what to do."""


class _Stopped(Exception):
    """A sentence's synthesis was preempted (inside :class:`PiperTTS`)."""


class SynthesisPreempted(Exception):
    """:meth:`PiperTTS.preempt` stopped a synthesis; nothing of ``remaining`` was made.

    Attributes:
        remaining: The text from the sentence being made on: synthesize it again later.
    """

    def __init__(self, remaining: str) -> None:
        super().__init__(f"synthesis preempted at {remaining[:40]!r}")
        self.remaining = remaining


class _ShrinkingSession:
    """Piper's ``onnxruntime.InferenceSession``, run with :data:`ARENA_SHRINKAGE`.

    ``piper.PiperVoice`` calls ``session.run(None, feeds)`` with no run options and builds its
    session itself, so the options are added here; everything else is the session's own.

    Args:
        session: The voice's loaded session (CPU, arena on: the shrinkage needs the arena).
    """

    def __init__(self, session: object) -> None:
        import onnxruntime

        self._session = session
        self._options = onnxruntime.RunOptions()
        self._options.add_run_config_entry(*ARENA_SHRINKAGE)

    def run(self, output_names: list[str] | None, input_feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        """``InferenceSession.run`` with the shrinking run options; the outputs as numpy arrays."""
        return self._session.run(output_names, input_feed, self._options)  # type: ignore[attr-defined]

    def terminate(self, stop: bool) -> None:
        """Stop the run in progress, or (``stop`` False) let the next runs go on.

        Safe from another thread: onnxruntime checks the flag between operators.
        """
        self._options.terminate = stop

    def __getattr__(self, name: str) -> object:
        return getattr(self._session, name)


@dataclass(frozen=True, eq=False)
class SpeechChunk:
    """Audio for one sentence.

    Attributes:
        text: The sentence as spoken (already cleaned for speech).
        audio: Mono PCM samples, ``np.int16``, shape ``(n_samples,)``.
        sample_rate: Samples per second of ``audio``, Hz.

    """

    text: str
    audio: np.ndarray = field(repr=False)
    sample_rate: int

    @property
    def duration_s(self) -> float:
        """Length of ``audio`` in seconds."""
        return len(self.audio) / self.sample_rate


@dataclass(frozen=True)
class SynthesisResult:
    """What :meth:`PiperTTS.synthesize_to_wav` wrote.

    Attributes:
        path: The WAV file (16-bit mono PCM at the voice's sample rate).
        text: Everything spoken, cleaned for speech, sentences joined by spaces.
        duration_s: Audio length in seconds.
        first_audio_ms: Time from the call to the first sentence's audio being ready, ms.
        total_ms: Time from the call until the file was complete, ms.

    """

    path: Path
    text: str
    duration_s: float
    first_audio_ms: float
    total_ms: float


class TextToSpeech(Protocol):
    """What the pipeline needs from a speech synthesizer."""

    @property
    def sample_rate(self) -> int:
        """Sample rate of every chunk, Hz."""
        ...

    def warmup(self) -> float:
        """Run one short synthesis so the first reply is fast; return its time in ms."""
        ...

    def synthesize(
        self, text: str, on_error: Callable[[str, Exception], None] | None = None
    ) -> Iterator[SpeechChunk]:
        """Yield one chunk per sentence of ``text`` (raw model output); nothing if unspeakable.

        A sentence that fails is skipped and passed to ``on_error`` with the exception.
        Raises :class:`SynthesisPreempted` when :meth:`preempt` stopped it.
        """
        ...

    def preempt(self) -> None:
        """Stop the synthesis in progress (from another thread); nothing when none runs."""
        ...


class PiperTTS:
    """A piper 1.8 voice behind the :class:`TextToSpeech` interface.

    Args:
        voice_path: The voice's ``.onnx`` file; its ``.onnx.json`` config must sit next to it
            (see :func:`agent.models.resolve_model` for ``packaged:piper-joe-medium``).
        length_scale: Phoneme length factor: 1.0 is the voice's normal pace, > 1 slower,
            < 1 faster. Must be > 0.
        speaker_id: Speaker index for multi-speaker voices; ``None`` = the voice's default.
            A single-speaker voice accepts only ``None`` or 0.
        noise_scale: Piper's audio variation (the voice's ``.onnx.json`` default when None);
            0 with ``noise_w_scale`` 0 makes the same text give the same audio every time.
        noise_w_scale: Piper's phoneme-duration variation (default: the voice's).

    Raises:
        TTSError: the voice or its config is missing or unreadable, ``length_scale`` ≤ 0, or
            ``speaker_id`` is out of range. The message names the file and the fix.

    """

    def __init__(
        self,
        voice_path: Path,
        length_scale: float = 1.0,
        speaker_id: int | None = None,
        noise_scale: float | None = None,
        noise_w_scale: float | None = None,
    ) -> None:
        voice_path = Path(voice_path).expanduser()
        config_path = Path(f"{voice_path}.json")
        if not voice_path.is_file():
            raise TTSError(
                f"piper voice not found: {voice_path}; set tts.voice in the config to a piper "
                f"'.onnx' voice file, or use packaged:piper-joe-medium"
            )
        if not config_path.is_file():
            raise TTSError(
                f"piper voice config not found: {config_path}; a piper voice is two files, "
                f"put the voice's '.onnx.json' next to {voice_path.name}"
            )
        if not length_scale > 0:
            raise TTSError(f"length_scale must be > 0 (1.0 = normal pace), got {length_scale}")
        from piper import PiperVoice, SynthesisConfig

        try:
            voice = PiperVoice.load(voice_path, config_path=config_path)
        except Exception as e:  # onnxruntime and json raise many types; all mean "unusable voice"
            raise TTSError(
                f"cannot load piper voice {voice_path} ({e.__class__.__name__}: {e}); the file "
                f"or its '.onnx.json' is corrupt or not a piper voice: download it again"
            ) from e
        n_speakers = max(1, int(voice.config.num_speakers))
        if speaker_id is not None and not 0 <= speaker_id < n_speakers:
            raise TTSError(
                f"speaker_id {speaker_id} is out of range for {voice_path.name}, which has "
                f"{n_speakers} speaker(s): use 0..{n_speakers - 1} or leave it unset"
            )
        self._runs = _ShrinkingSession(voice.session)
        voice.session = self._runs  # the arena gives back what a sentence freed
        self._voice = voice
        self._syn_config = SynthesisConfig(
            speaker_id=speaker_id,
            length_scale=length_scale,
            noise_scale=noise_scale,
            noise_w_scale=noise_w_scale,
        )
        self._lock = threading.Lock()
        self._preempted = threading.Event()
        self.voice_path = voice_path

    @property
    def voice(self) -> PiperVoice:
        """The loaded ``piper.PiperVoice`` (vendor object; its ``synthesize`` makes the audio)."""
        return self._voice

    @property
    def sample_rate(self) -> int:
        """Sample rate of every chunk this voice produces, Hz (22050 for joe-medium)."""
        return int(self._voice.config.sample_rate)

    def warmup(self) -> float:
        """Synthesize one short word and throw the audio away.

        It goes through :meth:`synthesize`, so the sentence splitter is warm too (its first
        call imports pysbd and compiles its rules: about 20 ms, measured here, that a turn's
        first sentence would otherwise wait).

        Returns:
            Time the warm-up took, ms.

        """
        start = time.perf_counter()
        for _ in self.synthesize(_WARMUP_TEXT):
            pass
        return (time.perf_counter() - start) * 1000

    def preempt(self) -> None:
        """Stop the synthesis in progress: :meth:`synthesize` raises :class:`SynthesisPreempted`.

        Safe from any thread. The sentence being made is abandoned (its work is lost); a
        synthesis that starts later is not affected.
        """
        self._preempted.set()
        self._runs.terminate(True)

    def _sentence_audio(self, sentence: str) -> np.ndarray:
        with self._lock:
            self._runs.terminate(False)
            if self._preempted.is_set():  # preempted between two sentences
                raise _Stopped
            try:
                parts = [
                    chunk.audio_int16_array for chunk in self._voice.synthesize(sentence, self._syn_config)
                ]
            except Exception as e:
                if self._preempted.is_set():  # onnxruntime: "Exiting due to terminate flag being set"
                    raise _Stopped from e
                raise
        if not parts:
            return np.zeros(0, dtype=np.int16)
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.int16).reshape(-1)

    def synthesize(
        self, text: str, on_error: Callable[[str, Exception], None] | None = None
    ) -> Iterator[SpeechChunk]:
        """Speak ``text``: yield one :class:`SpeechChunk` per sentence, computed lazily.

        Args:
            text: Raw reply text; it is cleaned with :func:`clean_for_speech` first.
            on_error: Called with a sentence piper failed on and the exception (after the log
                line), so the caller can report it; the other sentences are still spoken.

        Yields:
            Chunks in order, ``audio`` int16 mono at :attr:`sample_rate`. Nothing when the
            text has nothing speakable. A sentence on which piper fails is logged (warning)
            and skipped; a sentence that gives no audio is skipped.

        Raises:
            SynthesisPreempted: :meth:`preempt` was called during this synthesis; its
                ``remaining`` is the text from the sentence it stopped in.

        """
        self._preempted.clear()
        sentences = split_sentences(clean_for_speech(text), MAX_SENTENCE_CHARS)
        for i, sentence in enumerate(sentences):
            try:
                audio = self._sentence_audio(sentence)
            except _Stopped:
                raise SynthesisPreempted(" ".join(sentences[i:])) from None
            except Exception as e:  # one bad sentence must not silence the reply
                logger.warning(
                    "TTS failed on sentence %r (%s: %s); skipped",
                    sentence,
                    e.__class__.__name__,
                    e,
                    exc_info=True,
                )
                if on_error is not None:
                    on_error(sentence, e)
                continue
            if audio.size == 0:
                logger.debug("TTS produced no audio for %r; skipped", sentence)
                continue
            yield SpeechChunk(text=sentence, audio=audio, sample_rate=self.sample_rate)

    def synthesize_to_wav(self, text: str, path: Path) -> SynthesisResult | None:
        """Speak ``text`` into a WAV file.

        Args:
            text: Raw reply text (cleaned and split as in :meth:`synthesize`).
            path: WAV file to write (16-bit mono PCM at :attr:`sample_rate`); missing parent
                folders are created; an existing file is replaced.

        Returns:
            What was written and how long it took, or ``None`` when nothing was speakable
            (then no file is written).

        Raises:
            OSError: the file cannot be written.

        """
        start = time.perf_counter()
        path = Path(path)
        first_audio_ms: float | None = None
        spoken: list[str] = []
        n_samples = 0
        wav: wave.Wave_write | None = None
        try:
            for chunk in self.synthesize(text):
                if wav is None:
                    first_audio_ms = (time.perf_counter() - start) * 1000
                    path.parent.mkdir(parents=True, exist_ok=True)
                    wav = wave.open(str(path), "wb")
                    wav.setnchannels(1)
                    wav.setsampwidth(2)
                    wav.setframerate(chunk.sample_rate)
                wav.writeframes(chunk.audio.astype("<i2", copy=False).tobytes())
                spoken.append(chunk.text)
                n_samples += len(chunk.audio)
        finally:
            if wav is not None:
                wav.close()
        if wav is None or first_audio_ms is None:
            return None
        return SynthesisResult(
            path=path,
            text=" ".join(spoken),
            duration_s=n_samples / self.sample_rate,
            first_audio_ms=first_audio_ms,
            total_ms=(time.perf_counter() - start) * 1000,
        )
