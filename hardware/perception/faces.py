"""Where a face is, many times a second: the camera's face box as a bearing for eye contact.

The scene describer runs at 1-2 Hz (faces, people, light, motion); eye contact needs the face's
direction at 10 Hz or more. :class:`FaceTracker` is a thread of its own that takes the camera's
newest frame (:meth:`hardware.camera.capture.Camera.latest`, never waiting for I/O), finds
frontal faces with OpenCV's Haar cascade on a small copy (:data:`DETECT_WIDTH` px wide: 8-20 ms
a frame on one x86 core), and reports the face it follows as a :class:`FaceSeen`: its bearing
from the camera's axis (degrees; yaw + = left, pitch + = up, a pinhole of the camera's
horizontal field of view) and its box. It follows the face nearest the last one it followed (or
nearest a direction it is told to prefer: :meth:`FaceTracker.prefer`, the voice's), so it does
not jump between people. A frame it already looked at is not looked at again.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import cv2
import numpy as np

log = logging.getLogger(__name__)

DETECT_WIDTH = 320
"""Frames are shrunk to this width before detection, px."""
RATE_HZ = 20.0
"""Default detection rate, Hz (the eye-contact target is 10 Hz or more)."""


class FrameFeed(Protocol):
    """What the tracker reads: the newest frame and its time (a :class:`~hardware.camera.capture.Camera`)."""

    def latest(self) -> tuple[np.ndarray, float] | None:
        """``(BGR uint8 (h, w, 3), capture time in monotonic s)``, or None."""
        ...


@dataclass(frozen=True)
class FaceSeen:
    """A face found in one frame.

    Attributes:
        yaw_deg: Bearing from the camera's axis, degrees (+ = left of the picture's centre).
        pitch_deg: Bearing from the camera's axis, degrees (+ = above the centre).
        box: ``(x, y, w, h)`` in the frame's pixels.
        width_frac: The box's width as a fraction of the frame's (a nearer face is wider).
        t: The frame's capture time, monotonic s.
        faces: Faces in the frame.
    """

    yaw_deg: float
    pitch_deg: float
    box: tuple[int, int, int, int]
    width_frac: float
    t: float
    faces: int


def bearing(cx: float, cy: float, w: int, h: int, hfov_deg: float) -> tuple[float, float]:
    """Pixel → ``(yaw, pitch)`` from the camera's axis, degrees (+ = left, + = up), for a pinhole camera.

    Args:
        cx: Column, px (0 = left edge).
        cy: Row, px (0 = top edge).
        w: Frame width, px.
        h: Frame height, px.
        hfov_deg: Horizontal field of view, deg.
    """
    f = (w / 2.0) / math.tan(math.radians(hfov_deg) / 2.0)
    return math.degrees(math.atan2(w / 2.0 - cx, f)), math.degrees(math.atan2(h / 2.0 - cy, f))


class FaceTracker:
    """A thread that finds the followed face in the camera's newest frame (see the module docstring).

    Args:
        feed: The camera (its ``latest()``).
        hfov_deg: The camera's horizontal field of view, deg.
        on_face: Called from the thread with the :class:`FaceSeen` of each looked-at frame, or
            None when the frame has no face.
        rate_hz: Most frames looked at per second, Hz.
        clock: Monotonic clock, s.
    """

    def __init__(
        self,
        feed: FrameFeed,
        hfov_deg: float,
        on_face: Callable[[FaceSeen | None], None],
        rate_hz: float = RATE_HZ,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.feed, self.hfov_deg, self.on_face = feed, hfov_deg, on_face
        self.rate_hz, self.clock = rate_hz, clock
        self._cascade = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_default.xml")
        self._last: FaceSeen | None = None
        self._last_small: tuple[float, float, int, int] | None = None  # its box in the small frame
        self._prefer: float | None = None
        self._seen_t: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.looked = 0
        """Frames looked at."""
        self.found = 0
        """Frames with a face."""

    def prefer(self, yaw_deg: float | None) -> None:
        """Follow the face nearest this bearing (degrees from the camera's axis; the voice's), or None."""
        self._prefer = yaw_deg

    def _detect(self, gray: np.ndarray) -> np.ndarray:
        """Face boxes ``(n, 4)`` (x, y, w, h) in ``gray``'s pixels: near the last face first, else everywhere.

        Around the last box (a window three boxes wide, faces of half to twice its size) a search
        takes a few ms; the whole frame, 8-20 ms (more on a busy CPU).
        """
        last = self._last_small
        if last is not None:
            x, y, bw, bh = last
            x0, y0 = max(0, int(x - bw)), max(0, int(y - bh))
            x1, y1 = min(gray.shape[1], int(x + 2 * bw)), min(gray.shape[0], int(y + 2 * bh))
            lo = max(16, int(bw * 0.5))
            found = self._cascade.detectMultiScale(
                gray[y0:y1, x0:x1],
                scaleFactor=1.1,
                minNeighbors=3,
                minSize=(lo, lo),
                maxSize=(2 * bw, 2 * bh),
            )
            if len(found):
                return np.asarray(found, dtype=float) + np.array([x0, y0, 0, 0], dtype=float)
        found = self._cascade.detectMultiScale(gray, scaleFactor=1.15, minNeighbors=4, minSize=(20, 20))
        return np.asarray(found, dtype=float).reshape(-1, 4)

    def look(self, frame: np.ndarray, t: float) -> FaceSeen | None:
        """Find the followed face in one BGR frame taken at ``t`` (s); None when there is none."""
        h, w = frame.shape[:2]
        scale = DETECT_WIDTH / float(w) if w > DETECT_WIDTH else 1.0
        small = cv2.resize(frame, (round(w * scale), round(h * scale))) if scale < 1.0 else frame
        gray = cv2.equalizeHist(cv2.cvtColor(small, cv2.COLOR_BGR2GRAY))
        found = self._detect(gray)
        self.looked += 1
        if len(found) == 0:
            self._last = self._last_small = None
            return None
        seen = []
        small_boxes = {}
        for x, y, bw, bh in found / scale:
            yaw, pitch = bearing(x + bw / 2.0, y + bh / 2.0, w, h, self.hfov_deg)
            box = (round(x), round(y), round(bw), round(bh))
            seen.append(FaceSeen(yaw, pitch, box, bw / w, t, len(found)))
            small_boxes[box] = (x * scale, y * scale, int(bw * scale), int(bh * scale))
        anchor = self._last.yaw_deg if self._last is not None else self._prefer
        if anchor is None:
            best = max(seen, key=lambda s: s.width_frac)  # the nearest
        else:
            best = min(seen, key=lambda s: abs(s.yaw_deg - anchor))
        self._last, self._last_small = best, small_boxes[best.box]
        self.found += 1
        return best

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="face-tracker", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        period = 1.0 / self.rate_hz
        while not self._stop.is_set():
            t0 = self.clock()
            got = self.feed.latest()
            if got is not None and got[1] != self._seen_t:
                frame, t = got
                self._seen_t = t
                try:
                    self.on_face(self.look(frame, t))
                except Exception:  # noqa: BLE001 - a bad frame must not end eye contact for good
                    log.exception("face tracker: a frame failed")
            self._stop.wait(max(0.0, period - (self.clock() - t0)))

    def close(self) -> None:
        """Stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
