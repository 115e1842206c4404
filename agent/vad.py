"""Voice activity detection on whole files: split audio into utterances.

Uses the Silero VAD model bundled in faster-whisper (``faster_whisper.vad``), so no extra
download. Each speech span becomes one :class:`Segment`; the pipeline turns each into one
user turn. Padding (``speech_pad_ms``) keeps the first and last syllables; spans shorter
than ``min_speech_ms`` (taps, clicks) are dropped by the VAD itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agent.audio import SAMPLE_RATE
from agent.config import VADConfig


@dataclass(frozen=True)
class Segment:
    """One utterance found by the VAD.

    Attributes:
        audio: ``(n,)`` float32 mono at 16 kHz.
        start_ms: Start within the source audio, ms.
        end_ms: End within the source audio (the VAD's speech end), ms.
    """

    audio: np.ndarray
    start_ms: float
    end_ms: float


def split_utterances(audio: np.ndarray, cfg: VADConfig) -> list[Segment]:
    """Find speech in 16 kHz mono audio.

    Args:
        audio: ``(n,)`` float32 at 16 kHz.
        cfg: VAD thresholds (probability, ms).

    Returns:
        Speech segments in time order; empty for silence, noise or too-short audio.
    """
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    if audio.size < SAMPLE_RATE // 10 or not np.any(audio):
        return []
    opts = VadOptions(
        threshold=cfg.threshold,
        min_speech_duration_ms=cfg.min_speech_ms,
        min_silence_duration_ms=cfg.min_silence_ms,
        speech_pad_ms=cfg.speech_pad_ms,
        max_speech_duration_s=cfg.max_utterance_s,
    )
    spans = get_speech_timestamps(audio, opts)
    per_ms = SAMPLE_RATE / 1000.0
    return [Segment(audio[s["start"]:s["end"]].copy(), s["start"] / per_ms, s["end"] / per_ms) for s in spans]
