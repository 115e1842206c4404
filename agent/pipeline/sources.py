"""Sources feed the pipeline: the microphone, audio files, typed text.

A source is read by the listener thread: ``read(timeout)`` returns the next message
(``AudioIn`` 16 kHz blocks, ``TextIn`` lines, ``InputStarted``/``InputEnded`` around each
input) or None when nothing came in time. ``realtime`` tells the pipeline whether input
keeps coming while the robot speaks (microphone, files paced by the clock for ``bench``)
or may wait for each turn to finish (files as fast as possible for ``listen``, typed lines).

* :class:`MicSource` — the input device at its own rate, resampled to 16 kHz, with device
  supervision (a stalled mic = device or sound server gone: close, re-initialise, reopen
  with backoff) and one warning for a mic that delivers only digital silence.
* :class:`FileSource` — decoded files (PyAV + soxr), each followed by enough silence to
  close its last utterance; unreadable files become ``error`` messages and are skipped.
* :class:`TextSource` — lines from any iterable (stdin for ``chat``), read in a thread;
  each line cleaned by :func:`clean_typed` (control characters dropped, cut to
  :data:`MAX_TYPED` characters) with one ``notice`` saying what was changed.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from agent.audio_io.supervisor import Devices
from agent.config import AudioConfig
from agent.events import AudioIn, Error, Event, InputEnded, InputStarted, Notice, TextIn
from agent.speech.audio import SAMPLE_RATE, AudioError, decode_file

BLOCK = 512
"""Samples per block from a file source (32 ms, one VAD frame)."""
TAIL_S = 1.2
"""Silence appended to each file so its last utterance reaches the endpoint, s."""
ZERO_WARN_S = 10.0
"""A mic that delivers exact zeros this long gets one warning, s."""
OVERFLOW_WARN_S = 30.0
"""Shortest time between two "audio blocks lost" messages of the mic, s (a busy machine loses
blocks in bursts: one line per burst, with the count)."""
MAX_TYPED = 2000
"""Longest typed line kept, characters (~500 tokens: a quarter of SmolLM2's 2048-token context,
and far more than a spoken turn); the rest is cut with a notice."""

log = logging.getLogger(__name__)

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Terminal escape sequences (ECMA-48: CSI "ESC [ ... final", OSC "ESC ] ... BEL/ST", two-byte
# "ESC x"): dropped whole, or "\x1b[31m" would leave "[31m" in the transcript.
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_REPORTED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # tabs and line ends are no news


def clean_typed(text: str, limit: int = MAX_TYPED) -> tuple[str, list[str]]:
    """A typed line as the model should get it, and what was changed.

    Terminal escape sequences (colours, cursor moves) are dropped whole; other control
    characters (C0, DEL, C1: NUL, tabs, stray newlines) become spaces, runs of spaces one, the
    ends are stripped; over ``limit`` characters the line is cut at the last space before it.
    U+FFFD (what a decoder with ``errors="replace"`` puts for bytes that are not UTF-8) is
    counted and reported.

    Args:
        text: The line as typed.
        limit: Longest result, characters.

    Returns:
        ``(clean text, problems)``: ``problems`` is a list of short phrases for people
        (empty when the line was fine); the text is ``""`` when nothing printable was left.
    """
    problems: list[str] = []
    if (bad := text.count("\ufffd")) > 0:
        problems.append(f"{bad} invalid UTF-8 sequences replaced by U+FFFD")
    if (ctrl := len(_REPORTED.findall(text))) > 0:
        problems.append(f"{ctrl} control character{'s' if ctrl > 1 else ''} removed")
    clean = " ".join(_CONTROL.sub(" ", _ESCAPE.sub("", text)).split())
    if len(clean) > limit:
        problems.append(f"cut from {len(clean)} to {limit} characters")
        cut = clean[:limit]
        clean = cut.rsplit(" ", 1)[0] if " " in cut[limit // 2 :] else cut
    return clean, problems


class MicSource:
    """The microphone (and, through :class:`~agent.audio_io.supervisor.Devices`, speaker recovery).

    Args:
        devices: Mic and speaker of this agent.
        cfg: ``[audio]`` (stall time).
        publish: Receives ``error`` messages.
    """

    realtime = True

    def __init__(
        self,
        devices: Devices,
        cfg: AudioConfig,
        publish: Callable[[Event], None],
        zero_warn_s: float = ZERO_WARN_S,
    ) -> None:
        self.devices, self.cfg, self.publish = devices, cfg, publish
        self.zero_warn_s = zero_warn_s
        self.name = "mic"
        self._last_audio = time.perf_counter()
        self._zero_since: float | None = None
        self._zero_warned = False
        self._overflows_seen = 0
        self._overflow_said = -OVERFLOW_WARN_S
        self.on_lost: Callable[[], None] = lambda: None
        self.on_recovered: Callable[[], None] = lambda: None
        self.muted = False
        """Deliver silence instead of the mic's audio (the console's mute); the device stays open."""

    def open(self) -> None:
        """Open the mic (required) and the speaker (optional).

        Raises:
            agent.audio_io.devices.DeviceError: the input device is missing or refuses to open.
        """
        self.devices.open()
        self.name = self.devices.mic.name
        self._last_audio = time.perf_counter()

    def read(self, timeout: float) -> Event | None:
        """The next 16 kHz block, or None (also while the device is being recovered)."""
        mic = self.devices.mic
        if not mic.is_open:
            if self.devices.recover():
                self.on_recovered()
            self._last_audio = time.perf_counter()
            return None
        got = mic.read(timeout)
        now = time.perf_counter()
        if got is None:
            if now - self._last_audio > self.cfg.stall_s:
                self.on_lost()
                self.devices.lost(f"no audio from {mic.name!r} for {now - self._last_audio:.1f} s")
            return None
        samples, t_end = got
        self._last_audio = now
        self._report_overflows(mic.overflows, mic.name, now)
        self.devices.retry_speaker(now)
        if self.muted:  # silence keeps the VAD, endpointing and device supervision running as usual
            self._zero_since = None
            return AudioIn(-1, np.zeros_like(samples), t_end)
        if samples.size and not np.any(samples):
            self._zero_since = self._zero_since or now
            if not self._zero_warned and now - self._zero_since > self.zero_warn_s:
                self._zero_warned = True
                self.publish(
                    Error(
                        -1,
                        f"microphone {mic.name!r} delivers only digital silence (muted or wrong "
                        f"device?); still listening",
                    )
                )
        elif samples.size:
            self._zero_since = None
        return AudioIn(-1, samples, t_end)

    def _report_overflows(self, total: int, name: str, now: float) -> None:
        """One error per burst of lost input blocks (PortAudio's input overflow, or our queue full).

        A command said while blocks were lost may be heard cut or not at all; without this line a
        missed command on a busy machine could not be told from a VAD or ASR miss.
        """
        lost = total - self._overflows_seen
        if lost <= 0 or now - self._overflow_said < OVERFLOW_WARN_S:
            return
        self._overflows_seen, self._overflow_said = total, now
        self.publish(
            Error(
                -1,
                f"microphone {name!r}: {lost} audio block(s) lost (input overflow: the audio was not "
                "read in time, the machine is too busy); speech in them was not heard",
            )
        )

    def idle(self) -> None:
        """Nothing to do when the pipeline is idle."""

    def close(self) -> None:
        """Close mic and speaker (at most 2 s each)."""
        self.devices.close()


class FileSource:
    """Audio files, one after another.

    Args:
        paths: Files to play (any format PyAV decodes).
        realtime: Pace blocks by the wall clock (``bench``), else as fast as possible.
        publish: Receives ``error`` messages for unreadable files.
    """

    def __init__(self, paths: Iterable[Path], realtime: bool, publish: Callable[[Event], None]) -> None:
        self.paths = [Path(p) for p in paths]
        self.realtime = realtime
        self.publish = publish
        self.name = "files"
        self.unreadable = 0
        self._it: Iterator[Event] = self._messages()
        self._t_next = 0.0

    def open(self) -> None:
        """Nothing to open (files are decoded one at a time)."""

    def _messages(self) -> Iterator[Event]:
        for i, path in enumerate(self.paths):
            last = i == len(self.paths) - 1
            try:
                audio = decode_file(path)
            except AudioError as e:
                self.unreadable += 1
                self.publish(Error(-1, f"{e}; skipped, continuing with the next input"))
                yield InputEnded(-1, str(path), last)
                continue
            self.name = str(path)
            yield InputStarted(-1, str(path))
            audio = np.concatenate([audio, np.zeros(int(TAIL_S * SAMPLE_RATE), dtype=np.float32)])
            for k in range(0, audio.size, BLOCK):
                yield AudioIn(-1, audio[k : k + BLOCK], 0.0)
            yield InputEnded(-1, str(path), last)

    def read(self, timeout: float) -> Event | None:
        """The next message; None once every file is done."""
        msg = next(self._it, None)
        if msg is None:
            time.sleep(min(timeout, 0.05))
            return None
        if isinstance(msg, AudioIn):
            now = time.perf_counter()
            if self.realtime:
                self._t_next = max(self._t_next, now) + msg.samples.size / SAMPLE_RATE
                if self._t_next > now:
                    time.sleep(self._t_next - now)
                now = time.perf_counter()
            return AudioIn(-1, msg.samples, now)
        return msg

    def idle(self) -> None:
        """Nothing to do when the pipeline is idle."""

    def close(self) -> None:
        """Nothing to close."""


class TextSource:
    """Typed lines, one user turn each; empty lines are ignored.

    Each line is cleaned with :func:`clean_typed`; what was changed (control characters,
    invalid UTF-8, a line cut to :data:`MAX_TYPED`) is one ``notice`` and one log line, and a
    line with nothing printable left is ignored with a notice.

    Args:
        lines: Where lines come from (e.g. ``sys.stdin``); read in a daemon thread.
        prompt: Called before each line is read (e.g. print ``you>``), or None.
        publish: Receives the ``notice`` messages; None: logged only.
    """

    realtime = False

    def __init__(
        self,
        lines: Iterable[str],
        prompt: Callable[[], None] | None = None,
        publish: Callable[[Event], None] | None = None,
    ) -> None:
        self.name = "keyboard"
        self._lines = lines
        self._prompt = prompt
        self._publish = publish
        self._q: queue.Queue[Event] = queue.Queue()
        self._thread = threading.Thread(target=self._read, name="text-source", daemon=True)
        self.unreadable = 0
        self.turn_done = threading.Event()
        self.turn_done.set()

    def open(self) -> None:
        """Start reading lines."""
        self._thread.start()

    def _read(self) -> None:
        it = iter(self._lines)
        n = 0
        while True:
            self.turn_done.wait()
            if self._prompt is not None:
                self._prompt()
            try:
                line = next(it)
            except (StopIteration, ValueError, OSError):  # end of input or a closed stream
                break
            n += 1
            text, problems = clean_typed(line)
            if problems or (line.strip() and not text):
                self._notice(n, problems, text)
            if text:
                self.turn_done.clear()
                self._q.put(TextIn(-1, text))
        self._q.put(InputEnded(-1, self.name, True))

    def _notice(self, n: int, problems: list[str], text: str) -> None:
        what = "; ".join(problems) or "only spaces and control characters"
        msg = f"typed line {n}: {what}" + ("" if text else "; nothing left to answer, ignored")
        log.info("%s", msg)  # said once, as the note (a warning line printed it twice)
        if self._publish is not None:
            self._publish(Notice(-1, msg))

    def read(self, timeout: float) -> Event | None:
        """The next line (``TextIn``), ``InputEnded`` at the end, or None."""
        try:
            return self._q.get(timeout=timeout)
        except queue.Empty:
            return None

    def idle(self) -> None:
        """The pipeline finished the last line's turn: prompt for and read the next one."""
        self.turn_done.set()

    def close(self) -> None:
        """Nothing to close (the reader thread is a daemon)."""
