"""Eye contact (issue 48, item 4): the real fixture video as the camera, the simulated body.

The clip (short_hamilton_clip.mp4, 640x360 at 29.97 fps, a person on a stage) plays through the
real capture thread; the face tracker (OpenCV's Haar cascade) follows the face and the attention
corrects the gaze through the robot's motion loop. Then the camera shows a picture without a face
(the fixtures' dog.jpg): eye contact lets go.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from agent.pipeline.attention import Attention
from hardware.camera.capture import Camera
from hardware.config import CameraConfig, RobotConfig
from hardware.factory import build_robot
from hardware.perception.faces import FaceTracker, bearing

pytestmark = pytest.mark.timeout(300)


def test_bearing_is_a_pinhole_with_yaw_left_and_pitch_up():
    assert bearing(320, 180, 640, 360, 62.2) == (0.0, 0.0)
    yaw, pitch = bearing(0, 0, 640, 360, 62.2)  # top-left corner
    assert yaw == pytest.approx(31.1, abs=0.01) and pitch > 0


class Switch:
    """The camera the tracker sees: one source, then another (two real captures)."""

    def __init__(self, first: Camera, then: Camera) -> None:
        self.cams, self.i = [first, then], 0

    def latest(self) -> tuple[np.ndarray, float] | None:
        return self.cams[self.i].latest()


def test_the_face_in_the_clip_drives_head_corrections_then_it_lets_go(fixtures_dir: Path):
    video = fixtures_dir / "video" / "short_hamilton_clip.mp4"
    no_face = fixtures_dir / "images" / "dog.jpg"
    robot, _ = build_robot(RobotConfig())  # the simulated body: head yaw and pitch
    clip = Camera(CameraConfig(source=str(video)))
    dog = Camera(CameraConfig(source=str(no_face), fps=15.0))
    feed = Switch(clip, dog)
    att = Attention(robot, None, look_at_speaker=False, eye_contact=True, max_deg=20.0)
    att.floor("user")  # listening
    seen = []

    def on_face(s):
        seen.append(s)
        att.face(s)

    tracker = FaceTracker(feed, 62.2, on_face, rate_hz=15.0)
    try:
        assert clip.start(10.0) and dog.start(10.0)
        tracker.start()
        time.sleep(4.0)
        hz = att.tracking_hz(window_s=3.0)
        faces = [s for s in seen if s is not None]
        looked_yaw = robot.gaze.get("head_yaw", 0.0)
        recent = sorted(f.yaw_deg for f in faces[-8:])
        # The head turns toward where the face is (the clip does not turn with the head, so the
        # corrections add up), by small corrections within eye_contact_max_deg of where it began.
        feed.i = 1  # the face leaves
        time.sleep(2.0)
        after = robot.gaze
        print(f"tracking {hz:.1f} corrections/s; {len(faces)} of {len(seen)} frames with a face")
    finally:
        tracker.close()
        clip.close()
        dog.close()
        robot.close()
    median = recent[len(recent) // 2]
    assert len(faces) > 10 and abs(median) > 3.0, recent
    assert 3.0 < abs(looked_yaw) <= 20.0 + 1e-6 and looked_yaw * median > 0, (looked_yaw, recent)
    assert hz >= 10.0, f"tracking at {hz:.1f} Hz"
    assert abs(after.get("head_yaw", 0.0)) < 1.0 and abs(after.get("head_pitch", 0.0)) < 1.0  # let go
