"""A private PulseAudio server with null sinks (:mod:`agent.bench.pulse`) and the tests' helpers around it.

    mic_in (null sink)  --monitor-->  mic (remapped source, the default input)
    spk    (null sink)  --monitor-->  spk.monitor (what the agent played)

``paplay --device=mic_in x.wav`` is heard by anything recording from ``mic``;
``parecord --device=spk.monitor`` records the agent's voice. Each server gets its own
``XDG_RUNTIME_DIR`` (so it never touches a user's session) and is stopped by its pid.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
from waiting import wait_until

from agent.bench.pulse import MODULES, PulseRig, missing, stop_recording

__all__ = ["MODULES", "PulseRig", "missing", "read_wav", "stop_recording", "wait_recorded"]


def wait_recorded(path: Path, seconds: float, timeout: float = 10.0) -> bool:
    """Wait until the recording being written at ``path`` holds ``seconds`` of audio (16 kHz s16 mono).

    ``parecord`` hands audio to the file in fragments, some way behind the sound server: a
    recording started at ``t0`` holds everything played until ``t`` once it holds ``t - t0``
    seconds (its header, a few dozen bytes, is counted as audio: under a millisecond).
    """
    need = int(seconds * 16000) * 2
    return wait_until(lambda: path.exists() and path.stat().st_size >= need, timeout, step=0.05)


def read_wav(path: Path) -> np.ndarray:
    """A 16-bit WAV as float32 mono in [-1, 1] (its rate is not checked: recordings here are 16 kHz)."""
    with wave.open(str(path)) as w:
        a = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768.0
        return a.reshape(-1, w.getnchannels()).mean(axis=1)
