"""``bolt-agent look-bench``'s measures: how fast the robot turns toward a voice; how often it tracks a face.

**Turn onset** (issue 48's target: 300 ms or less). The simulators have no microphone array
(the daemon runs with ``--no-media``: ``GET /api/state/doa`` is null), so the direction of arrival
comes from a :class:`ScriptedDoa` at the hardware boundary: a source whose angle the bench sets.
Each trial holds the robot looking ahead, then moves the voice to a side (alternating, 25-40° of
yaw) and times, on the body's own read-back (a Reachy Mini's daemon: its present head pose from
the SDK's 50 Hz state stream; a simulated body: the commanded pose), the first moment the head
has turned by :data:`ONSET_DEG`. The chain measured: the attention's poll, the gaze layer, the
motion loop, the safety layer, the driver, the daemon.

**Tracking rate** (``--video FILE``): the video plays as the camera (its own frame rate, looping),
the face tracker follows the face, and the bench counts eye-contact corrections a second.

Prints one line per figure (``--json``: one object).
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hardware.doa import DoaReading

if TYPE_CHECKING:
    from hardware.robot import Robot

ONSET_DEG = 1.0
"""The head counts as moving once it turned this far from where it looked, deg."""


class ScriptedDoa:
    """A direction-of-arrival source whose reading its caller sets (a bench, a test): the hardware boundary.

    Attributes:
        reading: What :meth:`read` returns (None: no array, no reading).
    """

    def __init__(self, angle_rad: float | None = None, speech: bool = True) -> None:
        self.reading = DoaReading(angle_rad, speech) if angle_rad is not None else None
        self.reads = 0

    def set(self, angle_rad: float | None, speech: bool = True) -> None:
        """Move the voice (rad: 0 = left, π/2 = front, π = right), or silence it (None)."""
        self.reading = DoaReading(angle_rad, speech) if angle_rad is not None else None

    def read(self) -> DoaReading | None:
        """The reading set last."""
        self.reads += 1
        return self.reading


def head_yaw(robot: Robot) -> float:
    """The head's yaw as the body reports it (a Reachy Mini's daemon), else as commanded, deg."""
    return float(robot.driver.read().get("head_yaw", robot.positions()["head_yaw"]))


def turn_onsets(robot: Robot, trials: int = 10) -> dict[str, Any]:
    """Time from a change of the voice's direction to the head's first degree of turn, ms.

    The robot must be online and awake; the floor is the user's (speech).
    """
    from agent.pipeline.attention import Attention

    doa = ScriptedDoa()
    att = Attention(robot, doa, look_at_speaker=True, eye_contact=False)
    att.floor("user")
    att.start()
    onsets: list[float] = []
    missed = 0
    try:
        for i in range(trials):
            doa.set(None)
            robot.look_toward(0.0)
            deadline = time.monotonic() + 5.0
            while abs(head_yaw(robot)) > 0.5 and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.3)
            att.forget_voice()  # the next voice is a new one
            start = head_yaw(robot)
            yaw = (25.0 + 15.0 * (i % 2)) * (1 if i % 2 == 0 else -1)
            t0 = time.monotonic()
            doa.set(math.radians(90.0 - yaw))
            while time.monotonic() - t0 < 2.0:
                if abs(head_yaw(robot) - start) >= ONSET_DEG:
                    onsets.append((time.monotonic() - t0) * 1000.0)
                    break
                time.sleep(0.002)
            else:
                missed += 1
    finally:
        att.close()
        robot.look_toward(None)
    ordered = sorted(onsets)
    return {
        "trials": trials,
        "missed": missed,
        "onset_p50_ms": round(statistics.median(ordered), 1) if ordered else None,
        "onset_p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 1)
        if ordered
        else None,
        "onset_max_ms": round(ordered[-1], 1) if ordered else None,
    }


def tracking_rate(robot: Robot, video: Path, seconds: float = 6.0, hfov_deg: float = 62.2) -> dict[str, Any]:
    """Eye-contact corrections a second while a video plays as the camera (its faces followed)."""
    from agent.pipeline.attention import Attention
    from hardware.camera.capture import Camera
    from hardware.config import CameraConfig
    from hardware.perception.faces import FaceTracker

    camera = Camera(CameraConfig(source=str(video)))
    att = Attention(robot, None, look_at_speaker=False, eye_contact=True)
    att.floor("user")
    tracker = FaceTracker(camera, hfov_deg, att.face)
    try:
        camera.start(10.0)
        tracker.start()
        time.sleep(seconds)
    finally:
        tracker.close()
        camera.close()
        robot.look_toward(None)
    times = att.corrections
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return {
        "seconds": seconds,
        "frames_looked": tracker.looked,
        "frames_with_a_face": tracker.found,
        "corrections": len(times),
        "tracking_hz": round((len(times) - 1) / span, 1) if span > 0 else 0.0,
    }
