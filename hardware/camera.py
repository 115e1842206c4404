"""Camera sources and a capture thread that keeps only the newest frame.

Sources (:func:`parse_source`): a V4L2 device (``"0"`` or ``"/dev/video0"``), a GStreamer
pipeline string (anything containing ``!``, e.g. Jetson CSI ``nvarguscamerasrc ! ... !
appsink`` — needs an OpenCV built with GStreamer: JetPack's system OpenCV, not the PyPI
wheels), a video file (played at its own frame rate, looping) or a folder of images
(cycled at ``fps``, default 2 Hz). A USB camera by its ids (``"usb:VVVV:PPPP"``, or
``"reachy_mini"`` for a Reachy Mini Lite's camera) resolves to its V4L2 device each time it
opens, and ``"reachy_mini_sim"`` renders the simulated Reachy Mini's eye camera, posed from
its daemon (both in :mod:`hardware.reachy_camera`).

Threading: :class:`Camera` runs one daemon thread that reads frames as fast as the source
gives them and keeps only the newest (frame, capture time); readers call
:meth:`Camera.latest` and never wait for I/O. Health: no frame for ``dead_s``, a black picture
for ``black_s`` or identical frames for ``frozen_s`` (live sources only: a still image is
allowed to be still) → the source is closed and reopened with exponential backoff
(``backoff_initial_s`` doubling to ``backoff_max_s``), sleeping on an event between tries;
so is a source whose path disappears (a file or folder removed, ``/dev/videoN`` unplugged),
until it is back. While offline :meth:`Camera.latest` gives no frame.
The simulated eye camera is live but exempt from the frozen rule (see :meth:`Camera._capture`).
Frames are BGR ``uint8`` arrays of shape ``(h, w, 3)``; times are monotonic seconds.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np

from hardware.config import CameraConfig, ReachyMiniConfig

log = logging.getLogger(__name__)

IMAGE_EXTS = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}


class CameraError(Exception):
    """A camera source cannot be opened or read; the message names the source and the cause."""


class FrameReader(Protocol):
    """What the capture loop reads from: ``cv2.VideoCapture`` or the image-folder reader."""

    def read(self) -> tuple[bool, np.ndarray | None]:
        """The next frame: ``(ok, BGR uint8 (h, w, 3) or None)``."""
        ...

    def release(self) -> None:
        """Close the source."""
        ...


def parse_source(source: str) -> tuple[str, int | str | Path]:
    """Classify a camera source string.

    Returns ``("v4l2", index|path)``, ``("gstreamer", pipeline)``, ``("file", path)``,
    ``("folder", path)``, ``("image", path)`` or ``("reachy_sim", "reachy_mini_sim")``; a USB
    camera by ids (``usb:VVVV:PPPP``, ``reachy_mini``) is ``("v4l2", "/dev/videoN")``.

    Raises:
        CameraError: empty, a path that does not exist, or a USB camera that is not plugged in.

    """
    from hardware import reachy_camera  # optional sources, imported when a source is parsed

    s = str(source).strip()
    if not s:
        raise CameraError("no camera source configured")
    if s == reachy_camera.SIM_SOURCE:
        return "reachy_sim", s
    if reachy_camera.is_usb_source(s):
        try:
            return "v4l2", reachy_camera.resolve_usb_source(s)
        except reachy_camera.ReachyCameraError as e:
            raise CameraError(str(e)) from None
    if s.isdigit():
        return "v4l2", int(s)
    if "!" in s:
        return "gstreamer", s
    p = Path(s).expanduser()
    if s.startswith("/dev/"):
        if not p.exists():
            raise CameraError(f"camera {s} does not exist (is it plugged in? see ls /dev/video*)")
        return "v4l2", s
    if not p.exists():
        raise CameraError(
            f"camera source {s} does not exist (expected a device, pipeline, video file or image folder)"
        )
    if p.is_dir():
        return "folder", p
    return ("image", p) if p.suffix.lower() in IMAGE_EXTS else ("file", p)


def read_image(path: Path | str) -> np.ndarray:
    """Read one image file as BGR ``uint8`` ``(h, w, 3)``.

    Raises:
        CameraError: missing, unreadable or not a decodable image.

    """
    p = Path(path)
    if not p.is_file():
        raise CameraError(f"image {p} does not exist")
    img = cv2.imread(str(p), cv2.IMREAD_COLOR)
    if img is None or img.size == 0:
        raise CameraError(f"image {p} could not be decoded (corrupt or not an image)")
    return img


class _FolderReader:
    """Cycles through readable images (corrupt ones are reported in ``problems`` and skipped)."""

    def __init__(self, path: Path) -> None:
        self.frames: list[np.ndarray] = []
        self.problems: list[str] = []
        if path.is_file():
            self.frames.append(read_image(path))
        else:
            for f in sorted(path.iterdir()):
                if f.suffix.lower() in IMAGE_EXTS:
                    try:
                        self.frames.append(read_image(f))
                    except CameraError as e:
                        self.problems.append(str(e))
                        log.warning("%s; skipped", e)
            if not self.frames:
                raise CameraError(f"image folder {path} has no readable images")
        self.i = 0

    def read(self) -> tuple[bool, np.ndarray | None]:
        frame = self.frames[self.i % len(self.frames)]
        self.i += 1
        return True, frame

    def release(self) -> None:
        self.frames = []


def open_reader(
    source: str, cfg: CameraConfig | None = None, reachy: ReachyMiniConfig | None = None
) -> tuple[FrameReader, str, float]:
    """Open a source; returns ``(reader with read()/release(), kind, pacing fps or 0)``.

    Args:
        source: See :func:`parse_source`.
        cfg: ``[camera]`` (size, rate).
        reachy: ``[robot.reachy_mini]``, the daemon the simulated eye camera takes its pose from
            (default ``localhost:8000``); only ``reachy_mini_sim`` uses it.

    Raises:
        CameraError: the source does not exist, cannot be opened, or yields no frame.

    """
    cfg = cfg or CameraConfig(source=source)
    kind, arg = parse_source(source)
    if kind in ("folder", "image"):
        return _FolderReader(Path(arg)), kind, cfg.fps or 2.0
    if kind == "reachy_sim":
        from hardware.reachy_camera import SIM_FPS, ReachyCameraError, open_sim_camera

        try:
            return open_sim_camera(cfg, reachy), kind, cfg.fps or SIM_FPS
        except ReachyCameraError as e:
            raise CameraError(str(e)) from None
    if kind == "gstreamer":
        cap = cv2.VideoCapture(arg, cv2.CAP_GSTREAMER)
    elif kind == "v4l2":
        cap = cv2.VideoCapture(arg, cv2.CAP_V4L2)
    else:
        cap = cv2.VideoCapture(str(arg), cv2.CAP_FFMPEG)
    if not cap.isOpened():
        hint = (
            " (this OpenCV has no GStreamer: use JetPack's OpenCV on a Jetson)"
            if kind == "gstreamer" and "GStreamer:                   YES" not in cv2.getBuildInformation()
            else ""
        )
        if kind == "file":
            raise CameraError(f"cannot open video file {arg}{hint}; it may be empty, corrupt or in use")
        raise CameraError(f"cannot open camera {arg}{hint}; it may not exist, or another program uses it")
    if kind == "v4l2":
        if cfg.width:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, cfg.width)
        if cfg.height:
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, cfg.height)
        if cfg.fps:
            cap.set(cv2.CAP_PROP_FPS, cfg.fps)
    ok, frame = cap.read()
    if not ok or frame is None:
        cap.release()
        raise CameraError(f"{'video file' if kind == 'file' else 'camera'} {arg} gives no frames")
    if kind == "file":
        cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
        fps = cfg.fps or cap.get(cv2.CAP_PROP_FPS) or 25.0
        return cap, kind, min(fps, 60.0)
    return cap, kind, 0.0


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
        reachy: ``[robot.reachy_mini]``: the daemon the ``reachy_mini_sim`` source is posed from.

    """

    def __init__(
        self,
        cfg: CameraConfig,
        on_status: Callable[[str, str], None] | None = None,
        reachy: ReachyMiniConfig | None = None,
    ) -> None:
        self.cfg = cfg
        self.on_status = on_status
        self.reachy = reachy
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
                reader, self.kind, fps = open_reader(self.cfg.source, self.cfg, self.reachy)
            except CameraError as e:
                self._set("offline", f"{e}; retrying in the background")
                self._first.set()
                self._stop.wait(delay)
                delay = min(delay * 2, self.cfg.backoff_max_s)
                continue
            self.opens += 1
            self._set("online", "")
            problem = self._capture(reader, fps)
            reader.release()
            if problem and not self._stop.is_set():
                self._set("offline", f"camera {self.cfg.source}: {problem}; reopening")
                self._stop.wait(delay)
                delay = min(delay * 2, self.cfg.backoff_max_s)
            else:
                delay = self.cfg.backoff_initial_s

    def _capture(self, reader: FrameReader, fps: float) -> str | None:
        """Read frames until stopped or unhealthy; returns the problem, or None when stopped."""
        # The simulated eye camera is live (dead and black feeds are real faults there: a daemon
        # that stopped answering, a broken GL renderer) but its picture is legitimately identical
        # while the head and the scene are still, so the frozen rule would reopen it forever.
        live = self.kind in ("v4l2", "gstreamer", "reachy_sim")
        health = FeedHealth(self.cfg, live, time.monotonic(), frozen=self.kind != "reachy_sim")
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
                        return problem
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
