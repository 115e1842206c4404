"""Camera health: black, frozen and dead feeds are detected (live-source rules, real OpenCV decoding).

Each recorded feed is decoded by OpenCV and handed to :class:`FeedHealth` as a live camera
would be, one read every 20 ms of a virtual clock: no waiting, the same answer every run.
"""

from __future__ import annotations

import cv2
import numpy as np

from hardware.camera.capture import FeedHealth
from hardware.config import CameraConfig

READ_S = 0.02  # one read per 20 ms, as a 50 fps camera


def _video(path, frames) -> str:
    h, w = frames[0].shape[:2]
    out = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 20.0, (w, h))
    for f in frames:
        out.write(f)
    out.release()
    return str(path)


def _health(path: str, **cfg) -> str | None:
    """The first problem found in the feed at ``path`` read as a live camera; None if none in 4 s."""
    config = CameraConfig(source=path, black_s=0.3, frozen_s=0.3, dead_s=0.3, **cfg)
    health = FeedHealth(config, live=True, now=0.0)  # apply the live-camera rules to a recorded feed
    reader = cv2.VideoCapture(path)
    try:
        for i in range(1, 200):
            now = i * READ_S
            ok, frame = reader.read()
            problem = health.frame(frame, now) if ok and frame is not None else health.missed(now)
            if problem:
                return problem
        return None
    finally:
        reader.release()


def test_black_feed(tmp_path):
    frames = [np.zeros((48, 64, 3), np.uint8)] * 60
    assert "black picture" in _health(_video(tmp_path / "black.avi", frames))


def test_frozen_feed(tmp_path):
    rng = np.random.default_rng(0)
    still = (rng.random((48, 64, 3)) * 255).astype(np.uint8)
    assert "frozen feed" in _health(_video(tmp_path / "frozen.avi", [still] * 60))


def test_dead_feed(tmp_path):
    assert "dead feed" in _health(str(tmp_path / "nothing.avi"))


def test_moving_feed_is_healthy_until_it_ends(tmp_path):
    rng = np.random.default_rng(1)
    frames = [(rng.random((48, 64, 3)) * 255).astype(np.uint8) for _ in range(10)]
    # A live source that stops delivering frames is dead, not black or frozen.
    assert "dead feed" in _health(_video(tmp_path / "moving.avi", frames))
