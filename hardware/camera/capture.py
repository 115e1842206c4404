"""The capture thread that keeps only the newest frame, and the feed's health rules.

Threading: :class:`Camera` runs one daemon thread that reads frames as fast as the source
gives them and keeps only the newest (frame, capture time); readers call
:meth:`Camera.latest` and never wait for I/O. Health (:class:`FeedHealth`): no frame for
``dead_s``, a black picture for ``black_s`` or identical frames for ``frozen_s`` (live sources
only: a still image is allowed to be still) → the source is closed and reopened with exponential
backoff (``backoff_initial_s`` doubling to ``backoff_max_s``), sleeping on an event between
tries (a source that raises anything while opening or reading is such a fault too: the
thread never ends before :meth:`Camera.close`); so is a source whose path disappears (a file
or folder removed, ``/dev/videoN`` unplugged), until it is back. While offline
:meth:`Camera.latest` gives no frame. A named source that is ``still`` (a rendered simulation)
is exempt from the frozen rule.
Frames are BGR ``uint8`` arrays of shape ``(h, w, 3)``; times are monotonic seconds.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import cv2
import numpy as np

from hardware.camera.base import CameraError, FrameReader, NamedSource
from hardware.camera.sources import open_reader
from hardware.config import CameraConfig

log = logging.getLogger(__name__)


class FeedHealth:
    """The health rules for one opened source, fed the result of each read with its time.

    A source is *dead* when no frame came for ``dead_s``; a live source (camera, not a file
    or a still image) is *black* when its mean grey stays under ``black_level`` for
    ``black_s`` and *frozen* when consecutive frames stay identical for ``frozen_s``. Pure
    bookkeeping: the caller reads the frames and passes the time, so it runs on any clock.

    Args:
        cfg: Thresholds (``dead_s``, ``black_s``, ``black_level``, ``frozen_s``).
        live: Apply the black and frozen rules (live sources only).
        now: Time the source was opened, s (the dead-feed timer starts here).
        frozen: Apply the frozen rule to a live source (False: a source whose picture may
            legitimately stay identical, such as a rendered simulation).

    """

    def __init__(self, cfg: CameraConfig, live: bool, now: float, frozen: bool = True) -> None:
        self.cfg = cfg
        self.live = live
        self.check_frozen = frozen
        self.last_ok = now
        self._black_since: float | None = None
        self._frozen_since: float | None = None
        self._prev: np.ndarray | None = None

    def missed(self, now: float) -> str | None:
        """A read at ``now`` (s) gave no frame; returns the problem once none came for ``dead_s``."""
        if now - self.last_ok > self.cfg.dead_s:
            return f"no frame for {self.cfg.dead_s:g} s (dead feed)"
        return None

    def frame(self, frame: np.ndarray, now: float) -> str | None:
        """A BGR ``uint8`` ``(h, w, 3)`` frame arrived at ``now`` (s); returns the problem, if any."""
        self.last_ok = now
        if not self.live:
            return None
        small = cv2.resize(cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY), (64, 48))
        black = small.mean() < self.cfg.black_level
        self._black_since = (now if self._black_since is None else self._black_since) if black else None
        same = self._prev is not None and cv2.absdiff(small, self._prev).max() <= 1
        self._frozen_since = (now if self._frozen_since is None else self._frozen_since) if same else None
        self._prev = small
        if self._black_since is not None and now - self._black_since > self.cfg.black_s:
            return f"black picture for {self.cfg.black_s:g} s (lens covered or sensor dead)"
        frozen = self._frozen_since is not None and now - self._frozen_since > self.cfg.frozen_s
        if frozen and self.check_frozen:
            return f"identical frames for {self.cfg.frozen_s:g} s (frozen feed)"
        return None


PATH_CHECK_S = 1.0
"""How often a capturing camera checks that its source path still exists, s."""


def _source_path(source: str, kind: str) -> str | None:
    """The file system path behind a source of ``kind`` (a device, a file, a folder), or None."""
    s = str(source).strip()
    if kind in ("file", "folder", "image") or (kind == "v4l2" and s.startswith("/dev/")):
        return str(Path(s).expanduser())
    return None


class Camera:
    """Capture thread holding the newest frame (see the module docstring).

    Args:
        cfg: Camera settings (``source`` must be non-empty).
        on_status: Called as ``(state, message)`` when the camera goes online/offline.
        named: The named sources known here (a robot's own cameras; see
            :func:`hardware.registry.camera_sources`).

    """

    def __init__(
        self,
        cfg: CameraConfig,
        on_status: Callable[[str, str], None] | None = None,
        named: Mapping[str, NamedSource] | None = None,
    ) -> None:
        self.cfg = cfg
        self.on_status = on_status
        self.named = dict(named or {})
        self.state = "connecting"
        self.message = ""
        self.kind = ""
        self.opens = 0
        self._latest: tuple[np.ndarray, float] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._first = threading.Event()
        self._thread = threading.Thread(target=self._run, name="camera", daemon=True)

    def start(self, wait_s: float = 3.0) -> bool:
        """Start capturing; wait up to ``wait_s`` (s) for the first frame. Returns True when one arrived."""
        self._thread.start()
        self._first.wait(wait_s)
        return self._latest is not None

    def latest(self) -> tuple[np.ndarray, float] | None:
        """Return the newest ``(frame, capture time in monotonic s)``, or None.

        None before the first frame and while the camera is offline (a picture from before the
        outage is not what it sees now).
        """
        with self._lock:
            return None if self.state == "offline" else self._latest

    def close(self) -> None:
        """Stop the thread and release the device."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=3.0)
        self._set("closed", "")

    def _set(self, state: str, message: str) -> None:
        if (state, message) != (self.state, self.message):
            # One warning per outage; what the retries find meanwhile is detail.
            warn = message and state != self.state
            self.state, self.message = state, message
            (log.warning if warn else log.info)("camera %s: %s", state, message or self.cfg.source)
            if self.on_status is not None:
                self.on_status(state, message)

    def _run(self) -> None:
        delay = self.cfg.backoff_initial_s
        while not self._stop.is_set():
            try:
                reader, self.kind, fps = open_reader(self.cfg.source, self.cfg, self.named)
            except Exception as e:  # noqa: BLE001 - CameraError, or a backend's own (cv2.error): a fault
                why = str(e) if isinstance(e, CameraError) else f"{type(e).__name__}: {e}"
                self._set("offline", f"{why}; retrying in the background")
                self._first.set()
                self._stop.wait(delay)
                delay = min(delay * 2, self.cfg.backoff_max_s)
                continue
            self.opens += 1
            self._set("online", "")
            try:
                problem = self._capture(reader, fps)
            except Exception as e:  # noqa: BLE001 - a reader that raises is a fault, not the thread's end
                log.exception("camera %s: reading failed", self.cfg.source)
                problem = f"reading failed ({type(e).__name__}: {e})"
            try:
                reader.release()
            except Exception:  # noqa: BLE001 - releasing a broken reader must not end the thread
                log.exception("camera %s: releasing failed", self.cfg.source)
            if problem and not self._stop.is_set():
                self._set("offline", f"camera {self.cfg.source}: {problem}; reopening")
                self._stop.wait(delay)
                delay = min(delay * 2, self.cfg.backoff_max_s)
            else:
                delay = self.cfg.backoff_initial_s

    def _capture(self, reader: FrameReader, fps: float) -> str | None:
        """Read frames until stopped or unhealthy; returns the problem, or None when stopped."""
        known = self.named.get(str(self.cfg.source).strip())
        opened = known is not None and known.open is not None  # a reader of its own (a renderer)
        live = self.kind in ("v4l2", "gstreamer") or (opened and known.live)
        still = known is not None and known.still  # may stay identical: no frozen rule
        health = FeedHealth(self.cfg, live, time.monotonic(), frozen=not still)
        period = 1.0 / fps if fps else 0.0
        # An open file or a frame folder in memory reads on after its path is gone (an unplugged
        # USB camera's /dev/videoN goes too): the path is checked once a second.
        path = _source_path(self.cfg.source, self.kind)
        checked = time.monotonic()
        while not self._stop.is_set():
            t0 = time.monotonic()
            if path is not None and t0 - checked >= PATH_CHECK_S:
                checked = t0
                if not os.path.exists(path):
                    return f"source {path} is gone"
            ok, frame = reader.read()
            now = time.monotonic()
            if not ok or frame is None:
                if isinstance(reader, cv2.VideoCapture) and self.kind == "file":  # end of the clip: again
                    reader.set(cv2.CAP_PROP_POS_FRAMES, 0)
                    ok, frame = reader.read()
                if not ok or frame is None:
                    problem = health.missed(now)
                    if problem:
                        why = getattr(reader, "problem", "")  # a renderer says why (its process died)
                        return f"{problem}: {why}" if why else problem
                    self._stop.wait(0.05)
                    continue
            with self._lock:
                self._latest = (frame, now)
            self._first.set()
            problem = health.frame(frame, now)
            if problem:
                return problem
            if period:
                self._stop.wait(max(0.0, period - (time.monotonic() - t0)))
        return None
