"""The microphone: an input stream at the device's own rate and channels, resampled to 16 kHz mono.

Many USB microphones offer only 48 kHz stereo, so the stream is opened as the device is
(``default_samplerate``, up to 2 channels, or what ``[audio]`` asks) and converted here:
channels averaged, then soxr's streaming resampler (``soxr.ResampleStream``, state kept
between blocks, so no clicks at block edges) to 16 kHz float32.

Threading: the PortAudio callback runs on PortAudio's thread and only copies the block and
its arrival time into a queue; :meth:`MicStream.read` (the listener thread) converts. A
rate the device refuses falls back to the device's own rate and then to common rates, with
a warning. Errors opening raise :class:`~agent.audio_io.devices.DeviceError`.
"""

from __future__ import annotations

import logging
import queue
import time
from typing import Any

import numpy as np
import soxr

from agent.audio_io.devices import DeviceError, SoundBackend, find_device
from agent.config import AudioConfig
from agent.speech.audio import SAMPLE_RATE

log = logging.getLogger(__name__)

_FALLBACK_RATES = (48_000, 44_100, 32_000, 16_000)


class MicStream:
    """16 kHz mono audio from an input device.

    Args:
        cfg: ``[audio]`` (device, rate, channels, block length in ms).
        backend: Where streams come from (sounddevice, or a fake in the benchmark).

    """

    def __init__(self, cfg: AudioConfig, backend: SoundBackend) -> None:
        self.cfg = cfg
        self.backend = backend
        self._q: queue.Queue[tuple[np.ndarray, float]] = queue.Queue(maxsize=500)
        self._stream: Any = None
        self._rs: soxr.ResampleStream | None = None
        self.name = ""
        self.rate = 0
        self.channels = 0
        self.overflows = 0

    def _callback(self, indata: np.ndarray, frames: int, t: Any, status: Any) -> None:
        if status:
            self.overflows += 1
        try:
            self._q.put_nowait((indata.copy(), time.perf_counter()))
        except queue.Full:
            self.overflows += 1

    def open(self) -> str:
        """Find the device and start the stream.

        Returns:
            A note for the log when the requested rate was refused (else ``""``).

        Raises:
            DeviceError: no such device, or it refuses every rate tried.

        """
        idx, dev = find_device(self.backend, self.cfg.input_device, "input")
        channels = self.cfg.input_channels or min(2, int(dev["max_input_channels"]))
        own = int(dev["default_samplerate"])
        rates = list(dict.fromkeys([self.cfg.input_sample_rate or own, own, *_FALLBACK_RATES]))
        errors = []
        for rate in rates:
            try:
                stream = self.backend.input_stream(
                    device=idx,
                    samplerate=rate,
                    channels=channels,
                    dtype="float32",
                    blocksize=int(rate * self.cfg.block_ms / 1000),
                    callback=self._callback,
                )
                stream.start()
            except Exception as e:  # PortAudioError and ValueError both mean "refused"
                errors.append(f"{rate} Hz: {e}")
                continue
            self._stream, self.rate, self.channels, self.name = stream, rate, channels, str(dev["name"])
            self._rs = (
                soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32") if rate != SAMPLE_RATE else None
            )
            while not self._q.empty():
                self._q.get_nowait()
            note = ""
            if errors:
                note = f"input device {self.name!r} refused {'; '.join(errors)}; using {rate} Hz"
                log.warning("%s", note)
            return note
        raise DeviceError(f"input device {dev['name']!r} could not be opened: {'; '.join(errors)}")

    @property
    def is_open(self) -> bool:
        """A stream is open."""
        return self._stream is not None

    def read(self, timeout: float = 0.1) -> tuple[np.ndarray, float] | None:
        """The next block as 16 kHz mono.

        Args:
            timeout: Longest wait, s.

        Returns:
            ``(samples, t_end)``: ``(n,)`` float32 16 kHz in [-1, 1] (n may be 0 while the
            resampler fills) and the ``time.perf_counter()`` at which the block arrived; None
            when nothing arrived in time.

        """
        try:
            block, t = self._q.get(timeout=timeout)
        except queue.Empty:
            return None
        mono = block.mean(axis=1, dtype=np.float32) if block.ndim == 2 else block.astype(np.float32)
        if self._rs is not None:
            mono = self._rs.resample_chunk(mono)
        return np.clip(mono, -1.0, 1.0).astype(np.float32, copy=False), t

    def close(self) -> None:
        """Stop and close the stream (never raises; a dead sound server can make this slow)."""
        stream, self._stream = self._stream, None
        self._rs = None  # a new stream gets a new resampler; none is left to the interpreter's exit
        if stream is None:
            return
        try:
            stream.abort()
            stream.close()
        except Exception as e:  # closing a lost device fails in many ways
            log.info("closing input stream: %s", e)
