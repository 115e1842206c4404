"""Vision service: describes the camera's newest frame at a low rate, keeps the latest scene.

The agent loop reads :meth:`Vision.latest_summary` (one line with its age, for the newest
user turn); skills call :meth:`Vision.describe_now` and :meth:`Vision.latest`. People
arriving or leaving become :class:`SceneChange` events passed to ``on_change``; a new head
count must persist for ``confirm`` descriptions first, so one missed detection does not
announce a departure.

Threading: one daemon thread wakes ``rate_hz`` times per second (at most 2 Hz by config),
describes the newest frame if there is a new one, and stores the result. A lock serialises
describer calls (the OpenCV describer keeps the previous frame for motion) between that
thread and :meth:`describe_now`. ``on_change`` runs on the vision thread: keep it short.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from hardware.camera.base import NamedSource
from hardware.camera.capture import Camera
from hardware.config import CameraConfig, VisionConfig
from hardware.perception.scene import Describer, DescriberError, OpenCVDescriber, Scene

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SceneChange:
    """People arrived or left.

    Attributes:
        kind: ``"arrived"`` or ``"left"``.
        before: Head count before.
        after: Head count now.
        summary: The scene summary at the change.
        t: Capture time, monotonic s.

    """

    kind: str
    before: int
    after: int
    summary: str
    t: float


class Vision:
    """Low-rate scene description over a :class:`~hardware.camera.capture.Camera` (or frames fed by hand).

    Args:
        camera: The camera, or None to describe only frames passed to :meth:`feed`.
        describer: Turns a frame into a :class:`~hardware.perception.scene.Scene`.
        rate_hz: Descriptions per second, Hz.
        confirm: Descriptions a new head count must persist for before an event.
        on_change: Called with each :class:`SceneChange`.
        clock: Monotonic clock, s (same clock as the camera's timestamps).

    """

    def __init__(
        self,
        camera: Camera | None,
        describer: Describer,
        rate_hz: float = 1.0,
        confirm: int = 2,
        on_change: Callable[[SceneChange], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.camera = camera
        self.describer = describer
        self.rate_hz = min(rate_hz, 2.0)
        self.confirm = confirm
        self.on_change = on_change
        self.clock = clock
        self.errors = 0
        self._latest: Scene | None = None
        self._count: int | None = None
        self._candidate: tuple[int, int] | None = None
        self._last_t: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- for the agent loop and skills ---------------------------------------------------
    @property
    def message(self) -> str:
        """Why vision is degraded ("" when fine): the camera's offline message."""
        return self.camera.message if self.camera is not None else ""

    def latest(self) -> Scene | None:
        """Return the newest scene, or None before the first description."""
        return self._latest

    def age_s(self, scene: Scene | None = None) -> float | None:
        """Seconds since the described frame was captured."""
        scene = scene or self._latest
        return None if scene is None else max(0.0, self.clock() - scene.t)

    def latest_summary(self) -> str | None:
        """``"camera, 0.4 s ago: 2 people: ...; the room is dim"``; None before the first description.

        While the camera is offline the last summary is still returned with its (growing)
        age and ``(camera offline)`` appended.
        """
        scene = self._latest
        if scene is None:
            return None
        off = " (camera offline)" if self.camera is not None and self.camera.state == "offline" else ""
        return f"camera, {self.age_s(scene):.1f} s ago: {scene.summary}{off}"

    def describe_now(self) -> Scene | None:
        """Describe the camera's newest frame right away (the ``describe_scene`` skill).

        Returns:
            The scene; the last one when no new frame came; None before the first frame and
            while the camera is offline (:attr:`message` says why).
        """
        if self.camera is not None and self.camera.state == "offline":
            return None
        got = self.camera.latest() if self.camera is not None else None
        if got is None:
            return self._latest
        return self.feed(*got)

    # --- describing -------------------------------------------------------------------------
    def feed(self, frame: np.ndarray, t: float) -> Scene:
        """Describe one frame, update the latest scene and emit change events.

        Args:
            frame: BGR ``uint8`` image of shape ``(h, w, 3)``.
            t: Capture time, monotonic s.

        Raises:
            DescriberError: the describer failed.

        """
        with self._lock:
            scene = self.describer.describe(frame, t)
            self._last_t = t
            self._latest = scene
            self._track(scene)
        return scene

    def _track(self, scene: Scene) -> None:
        n = len(scene.people)
        if self._count is None:
            self._count = n
            return
        if n == self._count:
            self._candidate = None
            return
        seen = self._candidate[1] + 1 if self._candidate and self._candidate[0] == n else 1
        self._candidate = (n, seen)
        if seen >= self.confirm:
            ev = SceneChange("arrived" if n > self._count else "left", self._count, n, scene.summary, scene.t)
            self._count, self._candidate = n, None
            if self.on_change is not None:
                try:
                    self.on_change(ev)
                except Exception:  # a listener's bug must not stop vision
                    log.exception("scene change listener failed")

    def start(self) -> None:
        """Start the description thread (needs a camera)."""
        if self.camera is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="vision", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        period = 1.0 / self.rate_hz
        while not self._stop.wait(period):
            got = self.camera.latest() if self.camera is not None else None
            if got is None or got[1] == self._last_t:
                continue
            try:
                self.feed(*got)
            except (DescriberError, ValueError, RuntimeError) as e:
                self.errors += 1
                if self.errors in (1, 10, 100) or self.errors % 1000 == 0:
                    log.warning("scene description failed (%d times): %s", self.errors, e)

    def close(self) -> None:
        """Stop the thread and the camera."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self.camera is not None:
            self.camera.close()


def make_describer(vcfg: VisionConfig, hfov_deg: float = 62.2) -> OpenCVDescriber:
    """Build the OpenCV describer of ``[vision]`` (the always-on layer; words come from the agent's VLM).

    Args:
        vcfg: ``[vision]`` settings.
        hfov_deg: The camera's horizontal field of view, degrees (for distances and ``look_at``).
    """
    return OpenCVDescriber(
        detect_width=vcfg.detect_width,
        hfov_deg=hfov_deg,
        face_width_m=vcfg.face_width_m,
        people_detector=vcfg.people,
        motion_threshold=vcfg.motion_threshold,
    )


def build_vision(
    ccfg: CameraConfig,
    vcfg: VisionConfig,
    on_change: Callable[[SceneChange], None] | None = None,
    wait_s: float = 3.0,
    named: Mapping[str, NamedSource] | None = None,
    on_status: Callable[[str, str], None] | None = None,
) -> tuple[Vision | None, list[str]]:
    """Start camera + vision from config.

    ``named`` are the named camera sources known here (a robot's own cameras:
    :func:`hardware.registry.camera_sources`); a named source may bring its own field of view.
    ``on_status`` is called as ``(state, message)`` when the camera goes online or offline
    (:class:`~hardware.camera.capture.Camera`).

    Returns:
        ``(vision, messages)``. ``vision`` is None when no camera is configured or vision is
        disabled (the agent then runs without vision; a message says so). A configured
        camera that is missing still gives a :class:`Vision` that reconnects in the background.

    """
    if not vcfg.enabled:
        return None, ["vision is disabled in the config"]
    if not ccfg.source:
        return None, ["no camera configured ([camera] source); running without vision"]
    known = (named or {}).get(ccfg.source.strip())
    hfov = known.hfov_deg(ccfg) if known is not None and known.hfov_deg is not None else ccfg.hfov_deg
    describer = make_describer(vcfg, hfov)
    camera = Camera(ccfg, on_status, named)
    messages = []
    if not camera.start(wait_s):
        messages.append(f"{camera.message or 'camera gave no frame yet'}; vision starts when it does")
    vision = Vision(camera, describer, vcfg.rate_hz, vcfg.confirm, on_change)
    vision.start()
    return vision, messages
