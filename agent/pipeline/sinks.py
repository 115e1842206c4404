"""Sinks drain the pipeline's speech: the speaker, reply WAV files, or nothing.

Every sink takes :class:`~agent.events.AudioOut` messages (int16 at the voice's rate) and
reports, through :meth:`poll`, what was played: ``PlaybackStarted`` (first sample out),
``Spoken`` (a sentence played to the end, or cut), ``TurnPlayed`` (the turn's audio is
done) and, for the speaker, ``PlayedBlock`` (the echo guard's reference).

* :class:`SpeakerSink` — a real output stream (:class:`~agent.audio_io.speaker.Speaker`); plays
  in real time, can be cleared at once (barge-in), drives head motion from the speech
  envelope while a sentence plays.
* :class:`WavSink` — writes each turn's reply to ``out_dir/reply_NNN.wav`` (16-bit mono
  at the voice's rate) when the turn's audio ends. A write that fails (disk full, read-only
  folder) is one ``error`` naming the file and the errno; the reply is kept in memory
  (:data:`MAX_UNWRITTEN` turns) and written with the next reply once writing works again.
* :class:`NullSink` — plays nothing; reports each sentence as spoken at once.
"""

from __future__ import annotations

import errno
import logging
import queue
import threading
import time
import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soxr

from agent.audio_io.speaker import BlockPlayed, ItemStarted, PlayItem, Speaker
from agent.events import AudioOut, Error, Event, Notice, PlaybackStarted, PlayedBlock, Spoken, TurnPlayed
from agent.speech.audio import SAMPLE_RATE

log = logging.getLogger(__name__)

MAX_UNWRITTEN = 20
"""Replies kept in memory while their WAVs cannot be written, turns (~100 KB per second of
speech at 22 050 Hz 16-bit); older ones are dropped with a log line."""


def _drain(q: queue.Queue[Event]) -> list[Event]:
    """Everything queued now, oldest first, without waiting."""
    out: list[Event] = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out


class SpeakerSink:
    """Real-time playback on a speaker.

    Args:
        speaker: An output stream wrapper (opened and reopened by its owner).
        on_sentence: Called with ``(int16 audio, rate)`` when a sentence starts playing
            (head motion from the speech envelope); None for no motion.
    """

    realtime = True

    def __init__(
        self, speaker: Speaker, on_sentence: Callable[[np.ndarray, int], None] | None = None
    ) -> None:
        self.speaker = speaker
        self.on_sentence = on_sentence
        self._pending: queue.Queue[Event] = queue.Queue()
        self._ref: soxr.ResampleStream | None = None
        self._ref_rate = 0

    def play(self, msg: AudioOut) -> None:
        """Queue one sentence (resampled to the stream's rate); dropped when the speaker is closed."""
        item = PlayItem(msg.turn_id, msg.text, msg.piece, msg.last_of_piece)
        self.speaker.enqueue(item, msg.audio, msg.sample_rate)

    def end(self, turn_id: int) -> None:
        """Queue the end-of-turn marker; with no open speaker the turn counts as played now."""
        if not self.speaker.enqueue(PlayItem(turn_id, "", end_of_turn=True)):
            self._pending.put(TurnPlayed(turn_id, None))

    def clear(self) -> list[Spoken]:
        """Silence the speaker now; ``Spoken(completed=False)`` for each partly played sentence."""
        dropped = self.speaker.clear()
        return [
            Spoken(it.turn_id, it.text, False, it.piece, it.last_of_piece)
            for it in dropped
            if it.pos > 0 and it.audio is not None
        ]

    def pause(self) -> list[Spoken]:
        """Fall silent now and keep the queue (a held turn).

        Returns:
            ``Spoken(completed=False)`` for the sentence cut, which plays again from its start on
            :meth:`resume`.
        """
        it = self.speaker.pause()
        return [] if it is None else [Spoken(it.turn_id, it.text, False, it.piece, it.last_of_piece)]

    def resume(self) -> None:
        """Play on after :meth:`pause`."""
        self.speaker.resume()

    @property
    def paused(self) -> bool:
        """Paused (:meth:`pause`) and not resumed or cleared since."""
        return self.speaker.paused

    @property
    def busy(self) -> bool:
        """Audio is queued or playing (or paused)."""
        return self.speaker.busy

    @property
    def queued_s(self) -> float:
        """Audio queued and not yet played, s."""
        return self.speaker.queued_s

    def close(self) -> None:
        """Drop the echo reference's resampler (soxr's native state), remade if played again.

        At exit a resampler still referenced is reported by nanobind as a leak on stderr, which
        a journal under systemd shows as an unprefixed line.
        """
        self._ref = None

    def poll(self) -> list[Event]:
        """Translate the speaker callback's reports into messages."""
        out = _drain(self._pending)
        while True:
            try:
                r = self.speaker.reports.get_nowait()
            except queue.Empty:
                return out
            if isinstance(r, BlockPlayed):
                if self._ref is None or self._ref_rate != self.speaker.rate:
                    self._ref = soxr.ResampleStream(self.speaker.rate, SAMPLE_RATE, 1, dtype="float32")
                    self._ref_rate = self.speaker.rate
                out.append(PlayedBlock(-1, self._ref.resample_chunk(r.block), r.t))
            elif isinstance(r, ItemStarted):
                it = r.item
                out.append(PlaybackStarted(it.turn_id, it.text, r.t))
                if it.audio is not None and self.on_sentence is not None:
                    pcm = (np.clip(it.audio, -1.0, 1.0) * 32767).astype(np.int16)
                    self.on_sentence(pcm, self.speaker.rate)
            elif r.item.end_of_turn:
                out.append(TurnPlayed(r.item.turn_id, None))
            else:
                it = r.item
                out.append(Spoken(it.turn_id, it.text, True, it.piece, it.last_of_piece))


class WavSink:
    """Each turn's reply into ``out_dir/reply_NNN.wav``.

    Args:
        out_dir: Folder for the files (created when the first reply is written).
    """

    realtime = False

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = Path(out_dir)
        self._unwritten: list[tuple[int, list[AudioOut]]] = []
        self._failing = False
        self._audio: dict[int, list[AudioOut]] = {}
        self._reports: queue.Queue[Event] = queue.Queue()
        self._lock = threading.Lock()

    def play(self, msg: AudioOut) -> None:
        """Collect one sentence of the turn."""
        with self._lock:
            first = msg.turn_id not in self._audio
            self._audio.setdefault(msg.turn_id, []).append(msg)
        if first:
            self._reports.put(PlaybackStarted(msg.turn_id, msg.text, time.perf_counter()))

    def end(self, turn_id: int) -> None:
        """Write the turn's WAV (nothing when it had no audio) and report it played.

        Replies whose WAVs could not be written before are written first. A failed write
        reports one ``error`` (file, errno) until a write succeeds again, then one ``notice``;
        the turn is reported played either way (with no file: ``TurnPlayed.audio`` None).
        """
        with self._lock:
            parts = self._audio.pop(turn_id, [])
        path = None
        if parts:
            self._unwritten.append((turn_id, parts))
            if len(self._unwritten) > MAX_UNWRITTEN:
                lost, _ = self._unwritten.pop(0)
                log.error(
                    "reply WAV of turn %d dropped: %d unwritten replies kept at most", lost, MAX_UNWRITTEN
                )
            written = self._write_unwritten()
            path = written.get(turn_id)
        for p in parts:
            self._reports.put(Spoken(turn_id, p.text, True, p.piece, p.last_of_piece))
        self._reports.put(TurnPlayed(turn_id, str(path) if path else None))

    def _write_unwritten(self) -> dict[int, Path]:
        """Write the kept replies, oldest first, up to the first failure; the paths written."""
        written: dict[int, Path] = {}
        while self._unwritten:
            tid, parts = self._unwritten[0]
            path = self.out_dir / f"reply_{tid:03d}.wav"
            try:
                _write_wav(path, parts)
            except OSError as e:
                if not self._failing:  # one error per episode, not one per reply
                    self._failing = True
                    code = errno.errorcode.get(e.errno or 0, "?")
                    msg = (
                        f"cannot write reply WAV {path}: {code} ({e.strerror or e}); "
                        f"kept in memory and retried with the next reply"
                    )
                    log.error("%s", msg)
                    self._reports.put(Error(tid, msg))
                return written
            self._unwritten.pop(0)
            written[tid] = path
        if self._failing:
            self._failing = False
            msg = f"reply WAVs are written again in {self.out_dir} ({len(written)} kept replies written now)"
            log.info("%s", msg)
            self._reports.put(Notice(-1, msg))
        return written

    def clear(self) -> list[Spoken]:
        """Forget collected audio (nothing was played)."""
        with self._lock:
            self._audio.clear()
        return []

    def pause(self) -> list[Spoken]:
        """Nothing plays, so nothing pauses."""
        return []

    def resume(self) -> None:
        """Nothing to resume."""

    @property
    def paused(self) -> bool:
        """Never paused."""
        return False

    @property
    def busy(self) -> bool:
        """Never busy: writing is immediate."""
        return False

    @property
    def queued_s(self) -> float:
        """Nothing waits to be played."""
        return 0.0

    def close(self) -> None:
        """Nothing to close: each turn's file is written when the turn ends."""

    def poll(self) -> list[Event]:
        """Reports since the last call."""
        return _drain(self._reports)


def _write_wav(path: Path, parts: list[AudioOut]) -> None:
    """One reply as a 16-bit mono WAV at its voice's rate; a half-written regular file is removed.

    Raises:
        OSError: the folder or file cannot be made or written (ENOSPC, EACCES, EROFS...).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with wave.open(str(path), "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(parts[0].sample_rate)
            for p in parts:
                wav.writeframes(np.asarray(p.audio, dtype="<i2").tobytes())
    except OSError:
        if not path.is_symlink() and path.is_file():
            path.unlink(missing_ok=True)
        raise


class NullSink(WavSink):
    """Plays nothing; every sentence counts as spoken at once (typed chat, accuracy runs)."""

    def __init__(self) -> None:
        super().__init__(Path("."))

    def end(self, turn_id: int) -> None:
        """Report the turn's sentences spoken and the turn played; write nothing."""
        with self._lock:
            parts = self._audio.pop(turn_id, [])
        for p in parts:
            self._reports.put(Spoken(turn_id, p.text, True, p.piece, p.last_of_piece))
        self._reports.put(TurnPlayed(turn_id, None))
