"""When to look: descriptions on demand and in the background, never in a turn's way.

OpenCV (:class:`hardware.perception.watcher.Vision`) is the fast always-on layer: faces, people, light,
motion, arrivals. :class:`SceneNarrator` adds a vision-language model's words on top:

* **On demand**: the ``describe_scene`` skill calls :meth:`SceneNarrator.describe_now` (the
  model has already said "Let me look."); a background description in progress is stopped so
  the asked one starts at once.
* **In the background**, on events: the first frame, someone arriving (the OpenCV layer's
  :class:`~hardware.perception.watcher.SceneChange`), or the picture changing a lot since the last
  description (mean absolute difference of 32 x 24 grey thumbnails, 0..1, over
  ``change_threshold``), at most once per ``min_interval_s``. A background description starts
  only once the floor has been free for ``quiet_s`` (``idle()``: nobody speaking, no turn in
  flight); when the describer is the chat model itself it is stopped between tokens as soon as
  the floor is taken (a turn starts) and the trigger waits for the next free moment. With the chat model's own
  vision the turn may still wait for one image encode already running (libmtmd's encoder pass
  cannot be interrupted); a separate VLM never holds the chat model.

The newest description replaces the previous one and enters the chat model's context with its
age through :meth:`SceneNarrator.context_line`, bounded to ``context_tokens``.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable

import cv2
import numpy as np

from agent.control import StopSignal
from agent.vision.describer import DescribeError, Description, VlmDescriber
from hardware.perception.watcher import SceneChange, Vision

log = logging.getLogger(__name__)

THUMB = (32, 24)
"""Thumbnail for the change measure, px: small enough to ignore noise and compression."""


def thumbnail(frame: np.ndarray) -> np.ndarray:
    """A ``(24, 32)`` float32 grey thumbnail of a BGR frame, values 0..1."""
    grey = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) if frame.ndim == 3 else frame
    return cv2.resize(grey, THUMB, interpolation=cv2.INTER_AREA).astype(np.float32) / 255.0


def change(a: np.ndarray, b: np.ndarray) -> float:
    """How different two thumbnails are: mean absolute difference, 0 (same) .. 1."""
    return float(np.mean(np.abs(a - b)))


class SceneNarrator:
    """The vision-language layer over a :class:`~hardware.perception.watcher.Vision`.

    Args:
        vision: The camera and its OpenCV layer (frames come from ``vision.camera``).
        describer: Frames to words.
        frames: Frames sent per description (1 = the newest; more for a model that takes a
            short clip: the newest ones, ``frame_gap_s`` apart).
        frame_gap_s: Spacing of the frames kept for a clip, s.
        change_threshold: Thumbnail change that starts a background description, 0..1
            (0 = never on change).
        min_interval_s: Shortest time between two background descriptions, s.
        on_arrival: Describe in the background when someone arrives.
        quiet_s: The floor must have been free this long before a background description
            starts, s (a turn that starts right after the user's first words then finds the
            model free more often: an image encode already running cannot be stopped).
        shares_model: The describer is the chat model itself: a background description stops as
            soon as the floor is taken (a separate VLM runs on beside the turn).
        on_described: Called with each new description (events, the console).
        on_error: Called with each failure message (the first and every 10th are logged).
        clock: Monotonic clock, s (the camera's clock).
    """

    def __init__(
        self,
        vision: Vision,
        describer: VlmDescriber,
        frames: int = 1,
        frame_gap_s: float = 0.5,
        change_threshold: float = 0.2,
        min_interval_s: float = 20.0,
        on_arrival: bool = True,
        quiet_s: float = 2.0,
        shares_model: bool = False,
        on_described: Callable[[Description], None] | None = None,
        on_error: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.vision = vision
        self.describer = describer
        self.frames = max(1, frames)
        self.frame_gap_s = frame_gap_s
        self.change_threshold = change_threshold
        self.min_interval_s = min_interval_s
        self.on_arrival = on_arrival
        self.shares_model = shares_model
        self.quiet_s = quiet_s
        self._idle_since: float | None = None
        self.on_described = on_described
        self.on_error = on_error
        self.clock = clock
        self.idle: Callable[[], bool] = lambda: True
        self.errors = 0
        self.preempted = 0
        self._latest: Description | None = None
        self._clip: collections.deque[tuple[np.ndarray, float]] = collections.deque(maxlen=self.frames)
        self._last_thumb: np.ndarray | None = None
        self._last_bg = -1e9
        self._pending: str | None = "first look"
        self._describing = threading.Lock()
        self._bg_stop: StopSignal | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- for the agent ------------------------------------------------------------------------
    def latest(self) -> Description | None:
        """The newest description, or None before the first."""
        return self._latest

    def age_s(self, d: Description | None = None) -> float | None:
        """Seconds since the newest described frame was captured (None without a description)."""
        d = d or self._latest
        return None if d is None else max(0.0, self.clock() - d.t)

    def context_line(self) -> str | None:
        """``"described 12 s ago: A man holds a red mug."``, or None before the first description."""
        d = self._latest
        if d is None:
            return None
        return f"described {self.age_s(d):.0f} s ago: {d.text}"

    @property
    def clip_times(self) -> list[float]:
        """Capture times of the frames kept for a clip, oldest first, monotonic s."""
        return [t for _, t in self._clip]

    def request(self, trigger: str) -> None:
        """Ask for a background description at the next free moment (never blocks)."""
        self._pending = trigger

    def on_change(self, change_event: SceneChange) -> None:
        """The OpenCV layer's arrivals start a background description (``on_arrival``)."""
        if change_event.kind == "arrived" and self.on_arrival:
            self.request("arrived")

    def describe_now(self, timeout_s: float = 30.0) -> Description:
        """Describe the newest frame now (the ``describe_scene`` skill); blocks until done.

        A background description in progress is stopped first.

        Args:
            timeout_s: Longest wait for a background description to give way, s.

        Raises:
            DescribeError: no frame yet, the model failed, or the describer stayed busy.
        """
        if self._bg_stop is not None:
            self._bg_stop.set("asked")
        if not self._describing.acquire(timeout=timeout_s):
            raise DescribeError(f"the {self.describer.name} is still busy after {timeout_s:.0f} s")
        try:
            frames, t = self._frames()
            d = self.describer.describe(frames, t, "asked")
            if d is None:  # only a background round is stopped
                raise DescribeError("the description was stopped")
            self._store(d, frames[-1])
            return d
        finally:
            self._describing.release()

    # --- background -----------------------------------------------------------------------------
    def _frames(self) -> tuple[list[np.ndarray], float]:
        camera = self.vision.camera
        got = camera.latest() if camera is not None else None
        if got is None:
            message = self.vision.message
            raise DescribeError(f"the camera has no picture yet{': ' + message if message else ''}")
        frame, t = got
        clip = [f for f, ft in self._clip if ft < t][-(self.frames - 1) :] if self.frames > 1 else []
        return [*clip, frame], t

    def _store(self, d: Description, newest: np.ndarray) -> None:
        self._latest = d
        self._last_thumb = thumbnail(newest)
        if self.on_described is not None:
            try:
                self.on_described(d)
            except Exception:  # a listener's bug must not stop the narrator
                log.exception("description listener failed")

    def _fail(self, message: str) -> None:
        self.errors += 1
        if self.errors in (1, 10, 100) or self.errors % 1000 == 0:
            log.warning("scene description failed (%d times): %s", self.errors, message)
        if self.on_error is not None and self.errors in (1, 10, 100):
            self.on_error(message)

    def _sample(self) -> None:
        """Keep the clip's frames and notice a big change."""
        camera = self.vision.camera
        got = camera.latest() if camera is not None else None
        if got is None:
            return
        frame, t = got
        if not self._clip or t - self._clip[-1][1] >= self.frame_gap_s:
            self._clip.append((frame, t))
        if self._pending is None and self._last_thumb is not None and self.change_threshold > 0:
            if change(thumbnail(frame), self._last_thumb) > self.change_threshold:
                self._pending = "scene changed"

    def step(self) -> Description | None:
        """One background tick: sample a frame and describe if a trigger waits and the floor is free.

        Returns:
            The new description, or None (nothing due, not idle, preempted, or failed).
        """
        self._sample()
        now = self.clock()
        if not self.idle():
            self._idle_since = None
            return None
        if self._idle_since is None:
            self._idle_since = now
        trigger = self._pending
        if trigger is None or now - self._idle_since < self.quiet_s:
            return None
        if trigger != "arrived" and now - self._last_bg < self.min_interval_s:
            return None
        if not self._describing.acquire(blocking=False):
            return None
        try:
            stop = self._bg_stop = StopSignal(when=(lambda: not self.idle()) if self.shares_model else None)
            try:
                frames, t = self._frames()
                d = self.describer.describe(frames, t, trigger, stop)
            except DescribeError as e:
                self._pending = None  # one failure per trigger, not one per tick
                self._last_bg = self.clock()
                self._fail(str(e))
                return None
            if d is None:
                self.preempted += 1  # a turn started: try again once the floor is quiet again
                self._idle_since = None
                return None
            self._pending = None
            self._last_bg = self.clock()
            self._store(d, frames[-1])
            return d
        finally:
            self._bg_stop = None
            self._describing.release()

    def start(self, idle: Callable[[], bool] | None = None, tick_s: float = 0.25) -> None:
        """Start the background thread.

        Args:
            idle: Whether the floor is free (the pipeline's ``WorkTracker.quiet``).
            tick_s: Sampling period, s.
        """
        if idle is not None:
            self.idle = idle
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, args=(tick_s,), name="scene-narrator", daemon=True)
        self._thread.start()

    def _run(self, tick_s: float) -> None:
        while not self._stop.wait(tick_s):
            try:
                self.step()
            except Exception:  # the narrator must outlive any frame
                log.exception("scene narrator tick failed")

    def close(self) -> None:
        """Stop the thread (a description in progress is stopped) and a separate vision engine."""
        self._stop.set()
        if self._bg_stop is not None:
            self._bg_stop.set("shutdown")
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        self.describer.close()
