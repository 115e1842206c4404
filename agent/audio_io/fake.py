"""In-process sound devices that keep real time: the benchmark's (and fault tests') OS boundary.

:class:`FakeBackend` has the :class:`~agent.audio_io.devices.SoundBackend` interface. Its input
stream delivers whatever was :meth:`FakeBackend.feed`-ed (zeros when nothing is), and its
output stream consumes audio, each in blocks paced by the wall clock from a thread of its
own, exactly as PortAudio calls a callback. ``fail_output`` / ``refuse_rates`` make
opening fail the way a real device does (an exception from the stream constructor).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from agent.speech.audio import SAMPLE_RATE


class StreamError(Exception):
    """What a fake stream raises where PortAudio would raise ``PortAudioError``."""


class _FakeStream:
    def __init__(
        self,
        backend: FakeBackend,
        kind: str,
        samplerate: int,
        channels: int,
        blocksize: int,
        callback: Any,
        **_: Any,
    ) -> None:
        self.backend, self.kind = backend, kind
        self.rate, self.channels, self.block, self.callback = int(samplerate), channels, blocksize, callback
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"fake-{kind}", daemon=True)
        self.active = False

    def start(self) -> None:
        self.active = True
        self._thread.start()

    def _loop(self) -> None:
        t_next = time.perf_counter()
        while not self._stop.is_set():
            t_next += self.block / self.rate
            if self.kind == "input":
                data = self.backend._take(self.block, self.rate)
                status, self.backend.input_status = self.backend.input_status, None  # one block's flag
                self.callback(np.repeat(data[:, None], self.channels, axis=1), self.block, None, status)
            else:
                out = np.zeros((self.block, self.channels), dtype=np.float32)
                self.callback(out, self.block, None, None)
                self.backend.played_blocks += 1
                if self.backend.record:
                    self.backend.played.append(out.copy())
                if np.any(out):
                    self.backend.last_sound_t = time.perf_counter()
            delay = t_next - time.perf_counter()
            if delay > 0:
                time.sleep(delay)

    def stop(self) -> None:
        self._stop.set()
        self.active = False

    abort = stop

    def close(self) -> None:
        self.stop()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(1.0)


class FakeBackend:
    """A fake microphone (16 kHz mono source) and speaker that keep real time.

    Args:
        mic_rate: The fake mic's own rate, Hz (audio fed at 16 kHz is resampled to it).
        speaker_rate: The fake speaker's own rate, Hz.
        refuse_rates: Input rates whose opening raises (a device refusing a rate).
        fail_output: Opening the output raises.
        record: Keep every output block as the device got it (:attr:`played`).

    """

    def __init__(
        self,
        mic_rate: int = 48_000,
        speaker_rate: int = 48_000,
        refuse_rates: tuple[int, ...] = (),
        fail_output: bool = False,
        record: bool = False,
    ) -> None:
        self.mic_rate, self.speaker_rate = mic_rate, speaker_rate
        self.refuse_rates, self.fail_output = set(refuse_rates), fail_output
        self._pending = np.zeros(0, dtype=np.float32)
        self._lock = threading.Lock()
        self.played_blocks = 0
        self.input_status: str | None = None
        """PortAudio's callback status for the next input block (e.g. ``"input overflow"``)."""
        self.last_sound_t = 0.0
        self.opened: list[tuple[str, int, int]] = []
        self.record = record
        self.played: list[np.ndarray] = []
        """Output blocks ``(frames, channels)`` float32 as written by the callback (with ``record``)."""

    def feed(self, audio16k: np.ndarray) -> None:
        """Queue ``(n,)`` float32 16 kHz audio to come out of the fake mic in real time."""
        import soxr

        a = soxr.resample(audio16k.astype(np.float32), SAMPLE_RATE, self.mic_rate).astype(np.float32)
        with self._lock:
            self._pending = np.concatenate([self._pending, a])

    @property
    def mic_idle(self) -> bool:
        """Everything fed has been delivered."""
        return self._pending.size == 0

    def _take(self, n: int, rate: int) -> np.ndarray:
        with self._lock:
            out, self._pending = self._pending[:n], self._pending[n:]
        return np.pad(out, (0, n - out.size)).astype(np.float32)

    def query_devices(self) -> list[dict[str, Any]]:
        """A mic and a speaker."""
        return [
            {
                "name": "fake-mic",
                "max_input_channels": 2,
                "max_output_channels": 0,
                "default_samplerate": float(self.mic_rate),
            },
            {
                "name": "fake-speaker",
                "max_input_channels": 0,
                "max_output_channels": 2,
                "default_samplerate": float(self.speaker_rate),
            },
        ]

    def default_device(self, kind: str) -> int:
        """0 for input, 1 for output."""
        return 0 if kind == "input" else 1

    def input_stream(self, **kw: Any) -> _FakeStream:
        """A real-time fake input stream (raises for refused rates)."""
        if int(kw["samplerate"]) in self.refuse_rates:
            raise StreamError(f"Invalid sample rate {kw['samplerate']}")
        self.opened.append(("input", int(kw["samplerate"]), kw["channels"]))
        return _FakeStream(self, "input", **kw)

    def output_stream(self, **kw: Any) -> _FakeStream:
        """A real-time fake output stream (raises when ``fail_output``)."""
        if self.fail_output:
            raise StreamError("Device unavailable")
        self.opened.append(("output", int(kw["samplerate"]), kw["channels"]))
        return _FakeStream(self, "output", **kw)

    def reinit(self) -> None:
        """Nothing to do."""
