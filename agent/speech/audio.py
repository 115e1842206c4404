"""Audio in: decode any file to 16 kHz mono float32, and write WAVs.

Decoding uses PyAV (FFmpeg), as faster-whisper does, so WAV, FLAC, MP3, OGG and the rest
work at any sample rate and channel count. Channels are averaged to mono and the result is
resampled to 16 kHz with soxr (high quality, well kept). Every failure is an
:class:`AudioError` whose message names the file and says what to do.
"""

from __future__ import annotations

import os
import wave
from pathlib import Path

import numpy as np
import soxr

SAMPLE_RATE = 16_000  # Hz; what Silero VAD and Whisper expect


class AudioError(Exception):
    """A file could not be read as audio; the message names the file and the fix."""


def to_mono_16k(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """Mix down and resample audio for the VAD and ASR.

    Args:
        samples: ``(n,)`` mono or ``(n, channels)`` interleaved audio; float in [-1, 1] or int16.
        sample_rate: Rate of ``samples``, Hz.

    Returns:
        ``(m,)`` float32 mono at 16 kHz, values in [-1, 1].
    """
    x = np.asarray(samples)
    if x.dtype == np.int16:
        x = x.astype(np.float32) / 32768.0
    x = x.astype(np.float32, copy=False)
    if x.ndim == 2:
        x = x.mean(axis=1, dtype=np.float32)
    if sample_rate != SAMPLE_RATE and x.size:
        x = soxr.resample(x, sample_rate, SAMPLE_RATE).astype(np.float32, copy=False)
    return np.clip(x, -1.0, 1.0)


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be an input file, from what the file system tells (nothing is decoded).

    A file that passes may still turn out not to be audio (:func:`decode_file` says so then).

    Args:
        path: A file given as input.

    Returns:
        ``"PATH: file not found"`` and the like, or None for a readable, non-empty regular file.
    """
    if not path.exists():
        return f"{path}: file not found"
    if path.is_dir():
        return f"{path}: is a folder, expected an audio file"
    if not path.is_file():
        return f"{path}: not a regular file, expected an audio file"
    if not os.access(path, os.R_OK):
        return f"{path}: not readable (permission denied)"
    if path.stat().st_size == 0:
        return f"{path}: file is empty (0 bytes); record it again"
    return None


def decode_file(path: str | Path) -> np.ndarray:
    """Decode an audio file to 16 kHz mono float32.

    Args:
        path: Any format FFmpeg reads (WAV, FLAC, MP3, OGG, ...), any rate and channel count.

    Returns:
        ``(n,)`` float32 samples at 16 kHz in [-1, 1].

    Raises:
        AudioError: missing, empty, not audio, or no audio stream.
    """
    import av  # PyAV: imported here so that tools that never decode don't pay for it

    p = Path(path)
    problem = file_problem(p)
    if problem is not None:
        raise AudioError(problem)
    chunks: list[np.ndarray] = []
    rate = 0
    try:
        with av.open(str(p), metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise AudioError(f"{p}: has no audio stream; pass a WAV, FLAC, MP3 or OGG file")
            stream = container.streams.audio[0]
            rate = stream.rate or stream.codec_context.sample_rate
            # Float planar at the source rate and layout: soxr does the rate conversion.
            resampler = av.AudioResampler(format="fltp", rate=rate)
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray())
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray())
    except AudioError:
        raise
    except (av.error.FFmpegError, ValueError, IndexError, OSError) as e:
        raise AudioError(
            f"{p}: not a readable audio file ({decode_problem(e)}); pass a WAV, FLAC, MP3 or OGG file"
        ) from None
    if not chunks or rate <= 0:
        raise AudioError(f"{p}: contains no audio samples")
    planar = np.concatenate(chunks, axis=1)  # (channels, n)
    return to_mono_16k(planar.T, rate)


def decode_problem(e: BaseException) -> str:
    """What went wrong decoding a file, in words: FFmpeg's message without its errno or the file name.

    PyAV's ``InvalidDataError: [Errno 1094995529] Invalid data found when processing input:
    'bad.mp4'`` became "invalid data found when processing input" (a new user saw the raw form).
    """
    text = getattr(e, "strerror", None) or str(e) or type(e).__name__
    text = str(text).strip().rstrip(".")
    return text[:1].lower() + text[1:]


def write_wav(path: str | Path, audio: np.ndarray, sample_rate: int) -> Path:
    """Write mono 16-bit PCM WAV.

    Args:
        path: Output file (parent folders are created).
        audio: ``(n,)`` int16, or float in [-1, 1].
        sample_rate: Hz.

    Returns:
        The path written.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    a = np.asarray(audio)
    if a.dtype != np.int16:
        a = (np.clip(a, -1.0, 1.0) * 32767.0).astype(np.int16)
    with wave.open(str(p), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(a.tobytes())
    return p
