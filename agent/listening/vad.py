"""Streaming voice activity detection: Silero VAD one 32 ms frame at a time, with endpointing.

The Silero v6 ONNX model bundled with faster-whisper (``faster_whisper/assets``) is run
frame by frame: input float32 ``[1, 576]`` (the previous 64 samples + a 512-sample window
at 16 kHz) and the recurrent state ``h``, ``c`` ``[1, 1, 128]``; output the speech
probability. Fed this way it gives the same probabilities as faster-whisper's batch VAD.

:class:`Endpointer` turns probabilities into utterances:

* speech **starts** when a frame is over the threshold and the frames from it stay over
  ``threshold - 0.15`` for ``min_speech_ms`` (the same hysteresis as the end, as Silero's own
  ``get_speech_timestamps`` does): a short command whose probability dips once between its words
  ("Look up.": 0.62 0.79 0.67 0.57 0.41 0.76 0.89 ...) starts like any other; the utterance
  then includes ``speech_pad_ms`` of pre-roll so the first syllable is kept;
* it **ends** after ``min_silence_ms`` of frames under ``threshold - 0.15`` (hysteresis);
  the speech end is the end of the last speech frame, and ``speech_pad_ms`` (at most the
  silence) of post-roll is kept;
* an utterance longer than ``max_utterance_s`` is closed where it is;
* with semantic end-of-turn (``pause_ms``) a pause is *reported* after ``pause_ms`` of silence
  (the caller judges it and may :meth:`Endpointer.end_now`), and silence alone ends the
  utterance only after ``long_silence_ms``.

Not thread-safe: one thread (the turn-taking stage) owns one instance. Times are in samples of the 16 kHz
stream (the caller maps them to wall-clock time).
"""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass

import numpy as np

from agent.config import VADConfig
from agent.speech.audio import SAMPLE_RATE

FRAME = 512
"""Samples per VAD frame at 16 kHz (32 ms)."""
_CONTEXT = 64


def silero_path() -> str:
    """Path of the Silero VAD ONNX shipped inside faster-whisper."""
    import faster_whisper

    return os.path.join(os.path.dirname(faster_whisper.__file__), "assets", "silero_vad_v6.onnx")


class SileroFrameVAD:
    """Silero VAD with state kept between calls.

    Raises:
        RuntimeError: onnxruntime or the model file is missing.

    """

    def __init__(self) -> None:
        import onnxruntime

        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 4
        self._session = onnxruntime.InferenceSession(
            silero_path(), providers=["CPUExecutionProvider"], sess_options=opts
        )
        self.reset()

    def reset(self) -> None:
        """Forget the recurrent state and context (start of a new stream)."""
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._ctx = np.zeros(_CONTEXT, dtype=np.float32)

    def __call__(self, frame: np.ndarray) -> float:
        """Speech probability of one frame.

        Args:
            frame: ``(512,)`` float32 mono at 16 kHz, values in [-1, 1].

        Returns:
            Probability of speech in 0..1.

        """
        x = np.concatenate([self._ctx, frame.astype(np.float32, copy=False)])[None, :]
        out, self._h, self._c = self._session.run(None, {"input": x, "h": self._h, "c": self._c})
        self._ctx = x[0, -_CONTEXT:].copy()
        return float(np.asarray(out).reshape(-1)[0])


@dataclass(frozen=True)
class VADUpdate:
    """What one frame changed.

    Attributes:
        started: Speech was confirmed in this frame (``start_sample`` is set).
        ended: The utterance ended in this frame (``audio`` and ``end_sample`` are set).
        speaking: Inside an utterance after this frame.
        prob: This frame's speech probability.
        audio: The utterance, ``(n,)`` float32 16 kHz with pre-roll and post-roll (when ended).
        start_sample: Stream sample index of the confirmed speech start (pre-roll not included).
        end_sample: Stream sample index of the speech end (end of the last speech frame).
        truncated: The utterance was closed by ``max_utterance_s``.
        paused: A pause reached the short silence in this frame (semantic end-of-turn): judge
            it; ``audio`` is the utterance so far, ``pause_id`` names the pause.
        early: A pause reached the early-ASR silence in this frame: transcribe ``audio`` (the
            utterance so far) now, for the judgement at the short silence of the same
            ``pause_id``.
        audio_check: A pause reached the Smart Turn silence in this frame: judge ``audio`` (the
            utterance so far) by its sound now, for the judgement of the same ``pause_id``.
        pause_id: Which pause (a verdict for an older pause is stale).
        rule: What ended the utterance: ``silence``, ``max_length``, or the caller's rule
            (:meth:`Endpointer.end_now`).

    """

    started: bool = False
    ended: bool = False
    speaking: bool = False
    prob: float = 0.0
    audio: np.ndarray | None = None
    start_sample: int = 0
    end_sample: int = 0
    truncated: bool = False
    paused: bool = False
    early: bool = False
    audio_check: bool = False
    pause_id: int = 0
    rule: str = ""


class Endpointer:
    """Frames in, utterances out (see the module docstring for the rules).

    Args:
        cfg: ``[vad]`` thresholds: probability, ms, s.
        pause_ms: Semantic end-of-turn: silence after which a pause is reported for judging
            (``[turn] short_silence_ms``), ms; None = silence-only endpointing.
        long_silence_ms: With ``pause_ms``: silence that ends the utterance anyway, ms
            (otherwise ``cfg.min_silence_ms``).
        early_ms: With ``pause_ms``: silence after which the same pause is reported early, for
            its transcript (``[turn] early_asr_ms``), ms; None, 0 or not below ``pause_ms``
            (in 32 ms frames) = no early report.
        audio_ms: With ``pause_ms``: silence after which the same pause is reported for its
            audio judgement (``[turn] smart_turn_ms``), ms; None, 0 or over ``pause_ms`` = no
            such report. One frame may carry several reports (``audio_check`` and ``early``).

    """

    def __init__(
        self,
        cfg: VADConfig,
        pause_ms: int | None = None,
        long_silence_ms: int | None = None,
        early_ms: int | None = None,
        audio_ms: int | None = None,
    ) -> None:
        self.cfg = cfg
        ms = FRAME * 1000 / SAMPLE_RATE
        self._start_frames = max(1, round(cfg.min_speech_ms / ms))
        # Semantic end-of-turn: report a pause after pause_ms, end by silence only after
        # long_silence_ms; otherwise silence alone ends the utterance after min_silence_ms.
        self._pause_frames = max(1, round(pause_ms / ms)) if pause_ms else None
        # Early ASR: a pause is reported twice, at early_ms (transcribe) and at pause_ms (judge).
        early = max(1, round(early_ms / ms)) if early_ms else None
        self._early_frames = (
            early if early is not None and self._pause_frames and early < self._pause_frames else None
        )
        # Smart Turn ahead: the pause's sound is judged in the idle silence before its transcript.
        heard = max(1, round(audio_ms / ms)) if audio_ms else None
        self._audio_frames = (
            heard if heard is not None and self._pause_frames and heard <= self._pause_frames else None
        )
        # A pause's id is new at its first report, whichever that is.
        firsts = [f for f in (self._audio_frames, self._early_frames, self._pause_frames) if f]
        self._first_frames = min(firsts) if firsts else None
        end_ms = long_silence_ms if pause_ms and long_silence_ms else cfg.min_silence_ms
        self._end_frames = max(1, round(end_ms / ms))
        self._pad_frames = max(0, round(cfg.speech_pad_ms / ms))
        self._max_frames = int(cfg.max_utterance_s * 1000 / ms)
        self._pre: collections.deque[np.ndarray] = collections.deque(
            maxlen=self._pad_frames + self._start_frames
        )
        self.reset()

    def reset(self) -> None:
        """Drop any utterance in progress."""
        self._pre.clear()
        self._frames: list[np.ndarray] = []
        self._run = 0
        self._silence = 0
        self._speaking = False
        self._last_speech_end = 0
        self._n = 0  # samples seen
        self.pause_id = 0

    @property
    def speaking(self) -> bool:
        """Inside an utterance."""
        return self._speaking

    def feed(self, frame: np.ndarray, prob: float) -> VADUpdate:
        """Advance by one frame.

        Args:
            frame: ``(512,)`` float32 16 kHz.
            prob: The frame's speech probability (already gated for echo by the caller).

        Returns:
            A :class:`VADUpdate`.

        """
        self._n += FRAME
        thr = self.cfg.threshold
        if not self._speaking:
            self._pre.append(frame)
            self._run = self._run + 1 if prob >= thr or (self._run and prob >= thr - 0.15) else 0
            if self._run >= self._start_frames:
                self._speaking = True
                self._frames = list(self._pre)
                self._silence = 0
                self._last_speech_end = self._n
                return VADUpdate(
                    started=True, speaking=True, prob=prob, start_sample=self._n - self._run * FRAME
                )
            return VADUpdate(prob=prob)
        self._frames.append(frame)
        if prob >= thr - 0.15:
            self._silence = 0
            if prob >= thr:
                self._last_speech_end = self._n
        else:
            self._silence += 1
        truncated = len(self._frames) >= self._max_frames
        if self._silence >= self._end_frames or truncated:
            return self._end(prob, truncated, "max_length" if truncated else "silence")
        if self._silence == self._first_frames:
            self.pause_id += 1  # the reports of one pause share its id
        audio_check = self._silence == self._audio_frames
        early = self._silence == self._early_frames
        paused = self._silence == self._pause_frames
        if audio_check or early or paused:
            audio = np.concatenate(self._frames)
            return VADUpdate(
                speaking=True,
                prob=prob,
                paused=paused,
                early=early,
                audio_check=audio_check,
                pause_id=self.pause_id,
                audio=audio,
            )
        return VADUpdate(speaking=True, prob=prob)

    def start_with(self, frames: list[np.ndarray]) -> VADUpdate:
        """Start an utterance now from ``frames``, speech too short for ``min_speech_ms`` that counts.

        The caller knows the frames hold words (an interruption heard over the robot: a "Stop."
        of 200 ms): they become the utterance's start, its speech ends here and its silence
        counts from the next frame, so its pause is reported and judged as any other.

        Args:
            frames: ``(512,)`` float32 16 kHz frames, the last one the newest fed.

        Returns:
            A ``started`` update, or an empty one when an utterance is already in progress.
        """
        if self._speaking or not frames:
            return VADUpdate()
        self._speaking, self._run, self._silence = True, 0, 0
        self._frames = list(frames)
        self._pre.clear()
        self._last_speech_end = self._n
        return VADUpdate(started=True, speaking=True, start_sample=max(0, self._n - len(frames) * FRAME))

    def set_long_silence(self, ms: int) -> None:
        """With semantic end-of-turn: the silence that ends an utterance anyway, from now on, ms.

        The speaker's learned pauses lengthen it (:mod:`agent.listening.pace`). Without
        ``pause_ms`` (silence-only endpointing) this does nothing.
        """
        if self._pause_frames:
            ms_per_frame = FRAME * 1000 / SAMPLE_RATE
            self._end_frames = max(self._pause_frames + 1, round(ms / ms_per_frame))

    @property
    def samples(self) -> int:
        """Samples fed since the last :meth:`reset` (the clock of ``start_sample``/``end_sample``)."""
        return self._n

    @property
    def silence_ms(self) -> float:
        """Silence since the last speech frame of the utterance in progress, ms (0 while speaking)."""
        return self._silence * FRAME * 1000 / SAMPLE_RATE if self._speaking else 0.0

    def snapshot(self, rule: str) -> VADUpdate:
        """The utterance so far as an ``ended`` update, without ending it (a tentative end).

        The utterance goes on: more speech extends it, and :meth:`end_now` or the silence ends
        it for good.

        Args:
            rule: What decided, reported with the update.

        Returns:
            An ``ended`` update like :meth:`end_now`'s, or an empty one when no utterance is in
            progress.
        """
        if not self._speaking:
            return VADUpdate()
        keep = len(self._frames) - max(0, self._silence - self._pad_frames)
        return VADUpdate(
            ended=True, audio=np.concatenate(self._frames[:keep]), end_sample=self._last_speech_end, rule=rule
        )

    def still_silent(self, pause_id: int) -> bool:
        """No speech since pause ``pause_id`` was first reported (early or at the short silence)."""
        return self._speaking and self._silence > 0 and self.pause_id == pause_id

    def in_pause(self, pause_id: int) -> bool:
        """Still inside pause ``pause_id``: no speech since it was reported."""
        return self._speaking and self._silence >= (self._pause_frames or 1) and self.pause_id == pause_id

    def end_now(self, rule: str) -> VADUpdate:
        """End the utterance in progress now (an end-of-turn verdict), keeping its post-roll.

        Args:
            rule: What decided, reported with the update.

        Returns:
            An ``ended`` update, or an empty one when no utterance is in progress.
        """
        if not self._speaking:
            return VADUpdate()
        return self._end(0.0, False, rule)

    def _end(self, prob: float, truncated: bool, rule: str) -> VADUpdate:
        keep = len(self._frames) - max(0, self._silence - self._pad_frames)
        audio = np.concatenate(self._frames[:keep])
        end = self._last_speech_end if not truncated else self._n
        self._speaking, self._run, self._frames = False, 0, []
        self._pre.clear()
        return VADUpdate(ended=True, prob=prob, audio=audio, end_sample=end, truncated=truncated, rule=rule)


def find_utterances(audio: np.ndarray, cfg: VADConfig) -> list[VADUpdate]:
    """Run the streaming VAD and endpointer over a whole recording (the pipeline's rules, offline).

    Args:
        audio: ``(n,)`` float32 mono at 16 kHz; 1 s of silence is appended so a final
            utterance reaches its endpoint.
        cfg: ``[vad]`` thresholds.

    Returns:
        One ``ended`` update per utterance, in time order (``audio``, ``end_sample`` set).
    """
    vad, ep = SileroFrameVAD(), Endpointer(cfg)
    x = np.concatenate([audio.astype(np.float32), np.zeros(SAMPLE_RATE, dtype=np.float32)])
    out = []
    for i in range(0, x.size - FRAME + 1, FRAME):
        frame = x[i : i + FRAME]
        upd = ep.feed(frame, vad(frame))
        if upd.ended:
            out.append(upd)
    return out
