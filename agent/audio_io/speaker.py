"""The speaker: an output stream at the device's own rate that plays queued speech and can be cut.

Piper's 22050 Hz int16 chunks are resampled (soxr) to the stream's rate when queued, not in
the callback. The PortAudio callback copies the next samples of the queued items into the
output buffer (zeros when there is nothing), and records what it did in a report queue:
every block played (mono, stream rate, for the echo reference), and each item's first
sample and completion. It never blocks for long: a short lock shared with :meth:`Speaker.clear`.

:meth:`Speaker.clear` drops every queued item at once; the next callback writes silence, so
playback stops within one block plus the device's own latency. :meth:`Speaker.pause` stops it as
fast but keeps the queue, the sentence being played rewound to its start, and
:meth:`Speaker.resume` plays on from there (a false interruption: the user only said "uh-huh").
Items carry the turn and the reply piece they belong to, so the pipeline knows which words were
actually heard.

The speaking volume is applied here, in software: each block is scaled by the gain
:attr:`Speaker.gain` returns (:class:`agent.state.volume.Volume`, set by voice) before it is
written to the device, so it works on any output device, with no mixer; the echo reference
(:class:`BlockPlayed`) is the block as written.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import soxr

from agent.audio_io.devices import DeviceError, SoundBackend, find_device
from agent.config import AudioConfig

log = logging.getLogger(__name__)


@dataclass(eq=False)
class PlayItem:
    """One piece of audio to play.

    Attributes:
        turn_id: The turn it belongs to.
        text: What it says (cleaned for speech); ``""`` for an end-of-turn marker.
        piece: The raw reply piece (chunker output) it is part of.
        last_of_piece: The piece has been heard once this item is played completely.
        audio: ``(n,)`` float32 mono at the stream's rate (set by :meth:`Speaker.enqueue`).
        end_of_turn: A marker with no audio: the turn's playback is complete when reached.
        pos: Samples played so far.

    """

    turn_id: int
    text: str
    piece: str = ""
    last_of_piece: bool = True
    audio: np.ndarray | None = None
    end_of_turn: bool = False
    pos: int = 0


@dataclass(frozen=True)
class ItemStarted:
    """The callback wrote the first sample of ``item`` (``t`` perf_counter s, when it reaches the output)."""

    t: float
    item: PlayItem


@dataclass(frozen=True)
class ItemFinished:
    """The callback wrote the last sample of ``item`` (or reached an end-of-turn marker)."""

    t: float
    item: PlayItem


@dataclass(frozen=True)
class BlockPlayed:
    """One output block as written, ``(frames,)`` float32 mono at the stream's rate."""

    t: float
    block: np.ndarray


PlayReport = ItemStarted | ItemFinished | BlockPlayed
"""What the callback reports, in the order it happened."""


class Speaker:
    """Queued playback on an output device.

    Args:
        cfg: ``[audio]`` (output device, rate, block length in ms).
        backend: Where streams come from.
        gain: Returns the factor samples are scaled by (the speaking volume's
            :attr:`~agent.state.volume.Volume.gain`, read at every block); None: 1.0.

    """

    def __init__(
        self, cfg: AudioConfig, backend: SoundBackend, gain: Callable[[], float] | None = None
    ) -> None:
        self.cfg = cfg
        self.backend = backend
        self.gain = gain
        self._items: collections.deque[PlayItem] = collections.deque()
        self._lock = threading.Lock()
        self.reports: queue.Queue[PlayReport] = queue.Queue()
        self._stream: Any = None
        self._paused = False
        self.name = ""
        self.rate = 0
        self.channels = 0
        self.underflows = 0

    def open(self) -> None:
        """Find the device and start the stream (silence until something is queued).

        Raises:
            DeviceError: no such device or it cannot be opened.

        """
        idx, dev = find_device(self.backend, self.cfg.output_device, "output")
        own = int(dev["default_samplerate"])
        rate = self.cfg.output_sample_rate or own
        channels = min(2, int(dev["max_output_channels"]))
        errors = []
        for r in dict.fromkeys([rate, own, 48_000, 44_100]):
            self.rate, self.channels, self.name = r, channels, str(dev["name"])  # the callback needs them
            try:
                stream = self.backend.output_stream(
                    device=idx,
                    samplerate=r,
                    channels=channels,
                    dtype="float32",
                    blocksize=int(r * self.cfg.block_ms / 1000),
                    callback=self._callback,
                )
                stream.start()
            except Exception as e:  # PortAudioError, ValueError: refused
                errors.append(f"{r} Hz: {e}")
                continue
            self._stream = stream
            return
        raise DeviceError(f"output device {dev['name']!r} could not be opened: {'; '.join(errors)}")

    @property
    def is_open(self) -> bool:
        """A stream is open."""
        return self._stream is not None

    def enqueue(self, item: PlayItem, audio: np.ndarray | None = None, sample_rate: int = 22050) -> bool:
        """Queue an item.

        Args:
            item: What to play.
            audio: ``(n,)`` int16 or float32 mono at ``sample_rate``; None for a marker.
            sample_rate: Rate of ``audio``, Hz.

        Returns:
            False when no stream is open (the item is dropped).

        """
        if not self.is_open:
            return False
        if audio is not None:
            a = audio.astype(np.float32) / 32768.0 if audio.dtype == np.int16 else audio.astype(np.float32)
            if sample_rate != self.rate and a.size:
                a = soxr.resample(a, sample_rate, self.rate).astype(np.float32)
            item.audio = a
        with self._lock:
            self._items.append(item)
        return True

    def clear(self) -> list[PlayItem]:
        """Drop everything queued, end a pause; return the dropped items (the first may be partly played)."""
        with self._lock:
            dropped = list(self._items)
            self._items.clear()
            self._paused = False
        return dropped

    def pause(self) -> PlayItem | None:
        """Fall silent now, keeping the queue; the sentence being played starts again on :meth:`resume`.

        Returns:
            The item that was cut (partly played), now rewound to its start; None when nothing
            was playing.
        """
        with self._lock:
            self._paused = True
            head = self._items[0] if self._items else None
            if head is None or head.audio is None or head.pos == 0:
                return None
            head.pos = 0
        return head

    def resume(self) -> None:
        """Play on after :meth:`pause` (from the start of the sentence it cut)."""
        with self._lock:
            self._paused = False

    @property
    def paused(self) -> bool:
        """:meth:`pause` was called and neither :meth:`resume` nor :meth:`clear` since."""
        return self._paused

    @property
    def busy(self) -> bool:
        """Something is queued or playing."""
        return bool(self._items)

    @property
    def queued_s(self) -> float:
        """Audio queued and not yet played (the part of the sentence playing included), s."""
        with self._lock:
            left = sum(it.audio.size - it.pos for it in self._items if it.audio is not None)
        return left / self.rate if self.rate else 0.0

    def _callback(self, outdata: np.ndarray, frames: int, t: Any, status: Any) -> None:
        try:
            self._fill(outdata, frames, status)
        except Exception:  # an exception would abort the stream: play silence, report, go on
            outdata.fill(0)
            log.exception("speaker callback failed")

    def _fill(self, outdata: np.ndarray, frames: int, status: Any) -> None:
        if status:
            self.underflows += 1
        now = time.perf_counter()
        mono = np.zeros(frames, dtype=np.float32)
        filled = 0
        with self._lock:
            while filled < frames and self._items and not self._paused:
                it = self._items[0]
                if it.audio is None or it.end_of_turn:
                    self._items.popleft()
                    self.reports.put(ItemFinished(now, it))
                    continue
                if it.pos == 0:
                    self.reports.put(ItemStarted(now + filled / self.rate, it))
                n = min(frames - filled, it.audio.size - it.pos)
                mono[filled : filled + n] = it.audio[it.pos : it.pos + n]
                it.pos += n
                filled += n
                if it.pos >= it.audio.size:
                    self._items.popleft()
                    self.reports.put(ItemFinished(now + filled / self.rate, it))
        if filled and self.gain is not None:
            gain = min(1.0, max(0.0, float(self.gain())))
            if gain != 1.0:
                mono *= gain
        outdata[:] = mono[:, None]
        self.reports.put(BlockPlayed(now + frames / self.rate, mono))

    def close(self) -> None:
        """Stop and close the stream; queued items are dropped (never raises)."""
        stream, self._stream = self._stream, None
        self.clear()
        if stream is None:
            return
        try:
            stream.abort()
            stream.close()
        except Exception as e:  # closing a lost device fails in many ways
            log.info("closing output stream: %s", e)


__all__ = ["BlockPlayed", "DeviceError", "ItemFinished", "ItemStarted", "PlayItem", "PlayReport", "Speaker"]
