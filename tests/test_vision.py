"""Camera sources and scene descriptions on the real fixture images and video."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from waiting import wait_until

from agent.skills import SkillContext, load_registry
from hardware.camera.base import CameraError
from hardware.camera.capture import Camera
from hardware.camera.sources import open_reader, parse_source, read_image
from hardware.config import CameraConfig, VisionConfig
from hardware.joints import Joint
from hardware.perception.scene import OpenCVDescriber, face_distance_m, summarize
from hardware.perception.watcher import SceneChange, Vision, build_vision
from hardware.robot import Robot
from hardware.servos.sim import SimulatedDriver


@pytest.fixture(scope="module")
def describer():
    return OpenCVDescriber()


def test_two_people_image_has_two_faces_left_and_right(fixtures_dir, describer):
    img = read_image(fixtures_dir / "images" / "two_people.jpg")
    scene = describer.describe(img, time.monotonic())
    assert len(scene.faces) == 2 and len(scene.people) == 2
    assert sorted(p.region for p in scene.people) == ["left", "right"]
    for p in scene.people:
        assert 0.3 < p.distance_m < 3.0
    assert scene.summary.startswith("2 people: one on the")
    assert "m away" in scene.summary and "the room is" in scene.summary
    assert scene.motion is None  # first frame: no motion estimate yet


def test_person_image_has_one_person_by_hog(fixtures_dir, describer):
    scene = OpenCVDescriber().describe(read_image(fixtures_dir / "images" / "person.jpg"))
    assert len(scene.people) == 1 and scene.people[0].kind == "person"
    assert scene.people[0].region == "centre" and scene.people[0].distance_m is None
    assert scene.summary.startswith("1 person: in the centre;")


def test_no_people_in_horses(fixtures_dir, describer):
    scene = OpenCVDescriber().describe(read_image(fixtures_dir / "images" / "horses.jpg"))
    assert scene.summary.startswith("nobody in view")


def test_pinhole_distance_and_summary_wording():
    # 640 px wide, 62.2 deg: f = 320 / tan(31.1 deg) = 530 px; 0.16 m face seen 56.5 px wide -> 1.5 m
    assert face_distance_m(56.5, 640, 62.2, 0.16) == pytest.approx(1.5, abs=0.01)
    from hardware.perception.scene import Detection

    people = (
        Detection("face", (300, 100, 57, 57), 0.5, 0.3, "centre", 1.5),
        Detection("person", (0, 0, 9, 9), 0.1, 0.1, "left"),
    )
    assert summarize(people, "dim", True) == (
        "2 people: one in the centre about 1.5 m away, one on the left; the room is dim; something is moving"
    )


def test_brightness_and_motion_from_frame_differencing():
    d = OpenCVDescriber(people_detector=False)
    dark = np.full((240, 320, 3), 20, np.uint8)
    assert d.describe(dark).light == "dark"
    moved = dark.copy()
    moved[50:150, 50:200] = 200
    s = d.describe(moved)
    assert s.moving and s.motion > 0.05 and "something is moving" in s.summary
    assert not d.describe(moved).moving


def test_video_file_as_camera_source(fixtures_dir):
    cam = Camera(CameraConfig(source=str(fixtures_dir / "video" / "short_hamilton_clip.mp4")))
    try:
        assert cam.start(5.0) and cam.state == "online" and cam.kind == "file"
        frame, t = cam.latest()
        assert frame.shape == (360, 640, 3) and frame.dtype == np.uint8
        assert wait_until(lambda: cam.latest()[1] > t)  # keeps replacing the newest frame
    finally:
        cam.close()


def test_vision_service_summary_with_age_and_change_events(fixtures_dir):
    events: list[SceneChange] = []
    now = [100.0]
    v = Vision(None, OpenCVDescriber(), confirm=2, on_change=events.append, clock=lambda: now[0])
    assert v.latest_summary() is None
    two = read_image(fixtures_dir / "images" / "two_people.jpg")
    empty = np.full_like(two, 128)
    v.feed(two, 99.6)
    assert v.latest_summary().startswith("camera, 0.4 s ago: 2 people")
    v.feed(empty, 100.0)
    assert events == []  # one empty frame is not yet a departure
    v.feed(empty, 100.5)
    assert [(e.kind, e.before, e.after) for e in events] == [("left", 2, 0)]
    v.feed(two, 101.0)
    v.feed(two, 101.5)
    assert [e.kind for e in events] == ["left", "arrived"]


def test_build_vision_without_camera_says_so():
    vision, msgs = build_vision(CameraConfig(source=""), VisionConfig())
    assert vision is None and "without vision" in msgs[0]


def test_missing_camera_path_is_a_clear_message_and_retries(tmp_path):
    with pytest.raises(CameraError, match="does not exist"):
        parse_source("/dev/video99")
    vision, msgs = build_vision(
        CameraConfig(source=str(tmp_path / "nocam"), backoff_initial_s=0.05), VisionConfig(), wait_s=0.5
    )
    try:
        assert vision is not None and "does not exist" in msgs[0]
        assert vision.camera.state == "offline" and vision.latest_summary() is None
    finally:
        vision.close()


def test_corrupt_image_and_empty_video_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    with pytest.raises(CameraError, match="could not be decoded"):
        read_image(bad)
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    with pytest.raises(CameraError, match="empty.mp4"):
        open_reader(str(empty))
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "x.png").write_bytes(b"nope")
    with pytest.raises(CameraError, match="no readable images"):
        open_reader(str(folder))


def test_image_folder_source_skips_corrupt_files(tmp_path, fixtures_dir):
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "a.jpg").write_bytes((fixtures_dir / "images" / "person.jpg").read_bytes())
    (folder / "b.jpg").write_bytes(b"garbage")
    reader, kind, fps = open_reader(str(folder))
    assert kind == "folder" and fps == 2.0 and len(reader.frames) == 1 and "b.jpg" in reader.problems[0]


def test_describe_scene_and_look_at_skills(fixtures_dir):
    reg = load_registry([])
    robot = Robot(
        [Joint("head_yaw", -60, 60, 0, 240), Joint("head_pitch", -30, 30, 0, 180)], SimulatedDriver()
    )
    v = Vision(None, OpenCVDescriber())
    v.feed(read_image(fixtures_dir / "images" / "two_people.jpg"), time.monotonic())
    ctx = SkillContext(robot=robot, scene=v)
    out = reg.call("describe_scene", {}, ctx)
    assert out.ok and out.result["people"] == 2 and out.result["faces"] == 2
    json.dumps(out.result)
    res = reg.call("look_at", {"target": "face"}, ctx)
    assert res.ok, res.result
    robot.wait_idle(5)
    yaw = robot.positions()["head_yaw"]
    assert yaw != 0.0 and -60 <= yaw <= 60
    assert reg.call("look_at", {"target": "left"}, ctx).ok
    no_cam = reg.call("describe_scene", {}, SkillContext(robot=robot))
    assert not no_cam.ok and "no camera" in no_cam.result
    # Nobody in view: a reason said to the user (only "Sure!" was heard while the head stayed).
    v.feed(read_image(fixtures_dir / "images" / "horses.jpg"), time.monotonic())
    robot.wait_idle(5)
    before = robot.positions()
    nobody = reg.call("look_at", {"target": "person"}, ctx)
    assert not nobody.ok and nobody.raised == "I see no person to look at, so I stay as I am"
    assert robot.positions() == before
    robot.close()
