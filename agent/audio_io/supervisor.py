"""Device supervision for live mode: open, lose, retry with backoff, reopen.

A microphone that stops delivering audio for ``[audio] stall_s`` means the device or the
sound server went away: both streams are closed (in helper threads with a time limit, since
closing a stream of a dead server can hang), PortAudio is re-initialised for a fresh device
list, and opening is retried with exponential backoff (``backoff_initial_s`` doubling up to
``backoff_max_s``). A speaker that fails to open is reported and retried every 5 s while the
agent keeps listening (replies are then not spoken). Every change is a
:class:`~agent.events.DeviceState` event. Used only from the listener thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import soxr

from agent.audio_io.devices import DeviceError, SoundBackend
from agent.audio_io.mic import MicStream
from agent.audio_io.speaker import Speaker
from agent.config import AudioConfig
from agent.events import DeviceState, Event
from agent.speech.audio import SAMPLE_RATE

log = logging.getLogger(__name__)
SPEAKER_RETRY_S = 5.0


class Devices:
    """The mic and speaker of one live agent, and their recovery.

    Args:
        cfg: ``[audio]``.
        backend: Where streams come from.
        emit: Receives :class:`DeviceState` events.
        gain: Returns the speaking volume's gain (:class:`~agent.audio_io.speaker.Speaker`); None: 1.0.
    """

    def __init__(
        self,
        cfg: AudioConfig,
        backend: SoundBackend,
        emit: Callable[[Event], None],
        gain: Callable[[], float] | None = None,
    ) -> None:
        self.cfg, self.backend, self.emit = cfg, backend, emit
        self.mic = MicStream(cfg, backend)
        self.speaker = Speaker(cfg, backend, gain)
        self.ref_resampler: soxr.ResampleStream | None = None  # speaker rate → 16 kHz, for the echo reference
        self._backoff = cfg.backoff_initial_s
        self._next_try = 0.0
        self._next_speaker_try = 0.0

    def open(self) -> None:
        """Open the mic (required) and the speaker (optional).

        Raises:
            DeviceError: the input device is missing or refuses to open.
        """
        note = self.mic.open()
        self.emit(DeviceState(-1, "input", self.mic.name, "open", self.mic.rate, self.mic.channels, note))
        self.open_speaker()
        log.info("listening on %r (%d Hz, %d ch)", self.mic.name, self.mic.rate, self.mic.channels)

    def open_speaker(self) -> None:
        """Try to open the speaker; on failure report it and schedule a retry."""
        try:
            self.speaker.open()
        except DeviceError as e:
            self._next_speaker_try = time.perf_counter() + SPEAKER_RETRY_S
            self.emit(
                DeviceState(
                    -1,
                    "output",
                    str(self.cfg.output_device or "default"),
                    "failed",
                    message=f"{e}; replies are not spoken, retrying in {SPEAKER_RETRY_S:.0f} s",
                )
            )
            return
        self.ref_resampler = soxr.ResampleStream(self.speaker.rate, SAMPLE_RATE, 1, dtype="float32")
        self.emit(
            DeviceState(-1, "output", self.speaker.name, "open", self.speaker.rate, self.speaker.channels)
        )

    def retry_speaker(self, now: float) -> None:
        """Reopen a failed speaker when its retry time has come."""
        if not self.speaker.is_open and now >= self._next_speaker_try:
            self.open_speaker()

    def close(self) -> None:
        """Close both streams, waiting at most 2 s for each."""
        for dev in (self.mic, self.speaker):
            t = threading.Thread(target=dev.close, daemon=True)
            t.start()
            t.join(2.0)
        self.ref_resampler = None  # remade at the next open

    def lost(self, why: str) -> None:
        """The mic stalled: close everything and schedule the first retry."""
        log.warning("audio lost: %s; retrying", why)
        self.emit(DeviceState(-1, "input", self.mic.name, "lost", message=why))
        self.close()
        self._backoff = self.cfg.backoff_initial_s
        self._next_try = time.perf_counter() + self._backoff

    def recover(self) -> bool:
        """One recovery step (sleeps at most 50 ms); True once the devices are open again."""
        now = time.perf_counter()
        if now < self._next_try:
            time.sleep(min(0.05, self._next_try - now))
            return False
        try:
            self.backend.reinit()
            self.open()
        except Exception as e:  # DeviceError, PortAudioError: the server is still gone
            self.mic.close()
            self._backoff = min(self._backoff * 2, self.cfg.backoff_max_s)
            self._next_try = time.perf_counter() + self._backoff
            self.emit(
                DeviceState(
                    -1,
                    "input",
                    str(self.cfg.input_device or "default"),
                    "retry",
                    message=f"{str(e).splitlines()[0]}; next try in {self._backoff:.1f} s",
                )
            )
            return False
        return True
