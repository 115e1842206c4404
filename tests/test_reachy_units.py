"""A Reachy Mini's parts that need no daemon: poses, Pollen's moves, config, skills, motion layers.

The daemon-backed behaviour (the real SDK client against both simulators) is in
``test_reachy_mini.py``. Here the SDK's own functions are the reference: our pose conversion
must agree with ``create_head_pose``, a recorded move with Pollen's ``RecordedMove``, a dance
with ``DanceMove``.
"""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from reachy_mini.motion.recorded_move import RecordedMove
from reachy_mini.reachy_mini import SLEEP_ANTENNAS_JOINT_POSITIONS, SLEEP_HEAD_POSE
from reachy_mini.utils import create_head_pose
from reachy_mini_dances_library.collection.dance import AVAILABLE_MOVES
from reachy_mini_dances_library.dance_move import DanceMove

from agent.pipeline.posture import Postures
from agent.skills import SkillContext, load_registry
from hardware.animation import AnimationError, linear_move, load_animation
from hardware.config import REACHY_JOINTS, ReachyMiniConfig, RobotConfig
from hardware.reachy_mini.daemon import same_release
from hardware.reachy_mini.driver import ReachyMiniDriver, sleep_pose
from hardware.reachy_mini.moves import (
    RECORDED_MOVE,
    RETURN_MS,
    DanceGesture,
    load_dances,
    load_emotions,
    load_moves,
    recorded_move,
)
from hardware.reachy_mini.pose import from_sdk, to_sdk
from hardware.robot import Robot
from hardware.servos.sim import SimulatedDriver
from hardware.speech_motion import speak_along

POSES = [
    dict(head_roll=10, head_pitch=-15, head_yaw=30, head_x=5, head_y=-12, head_z=-20),
    dict(head_roll=-25, head_pitch=30, head_yaw=-45, head_x=-20, head_y=40, head_z=10),
    dict(head_roll=0, head_pitch=0, head_yaw=0, head_x=0, head_y=0, head_z=0),
]


@pytest.mark.parametrize("pose", POSES)
def test_our_joints_match_the_sdks_head_pose(pose):
    joints = {**pose, "body_yaw": 20.0, "right_antenna": -30.0, "left_antenna": 45.0}
    head, antennas, body = to_sdk(joints)
    # The SDK's convention: + pitch is nose down, so our "+ = up" is its minus.
    x, y, z = pose["head_x"], pose["head_y"], pose["head_z"]
    ref = create_head_pose(
        x, y, z, pose["head_roll"], -pose["head_pitch"], pose["head_yaw"], mm=True, degrees=True
    )
    np.testing.assert_allclose(head, ref, atol=1e-12)
    assert antennas == pytest.approx([math.radians(-30), math.radians(45)])
    assert body == pytest.approx(math.radians(20))
    back = from_sdk(head, antennas, body)
    for k, v in joints.items():
        assert back[k] == pytest.approx(v, abs=1e-9), k


def test_a_recorded_move_plays_as_pollens_player_does():
    # A smooth head and antenna motion recorded at 50 Hz, as the emotions are (and written the same way).
    times = [i / 50.0 for i in range(76)]
    frames = [
        {
            "head": create_head_pose(
                z=0.01 * math.sin(t),
                roll=8 * math.sin(2 * t),
                pitch=-15 * math.sin(3 * t),
                yaw=20 * math.sin(t),
            ).tolist(),
            "antennas": [0.6 * math.sin(4 * t), -0.6 * math.sin(4 * t)],
            "body_yaw": 0.2 * math.sin(t),
        }
        for t in times
    ]
    data = {"description": "a test nod", "time": times, "set_target_data": frames}
    ours = recorded_move(data, "test_nod")
    theirs = RecordedMove(data)
    assert ours.duration_ms == pytest.approx(1500.0) and len(ours.keyframes) == 76
    for t in (0.0, 0.13, 0.5, 0.81, 1.2, 1.49):
        head, antennas, body = theirs.evaluate(t)
        want = from_sdk(head, antennas, body)
        got = ours.evaluate(t * 1000.0)
        for k, v in want.items():  # linear in Euler angles vs Pollen's slerp: equal at recording rates
            assert got[k] == pytest.approx(v, abs=0.05), (t, k)


def test_recorded_moves_load_like_animations_and_errors_name_the_file(tmp_path):
    good = {
        "description": "d",
        "time": [0, 0.2],
        "set_target_data": [{"head": np.eye(4).tolist(), "antennas": [0, 0]}] * 2,
    }
    (tmp_path / "mine.json").write_text(json.dumps(good))
    (tmp_path / "short.json").write_text(
        json.dumps({"time": [0, 1], "set_target_data": [good["set_target_data"][0]]})
    )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "nested.json").write_text(json.dumps(good))
    anim = load_animation(tmp_path / "mine.json", RECORDED_MOVE)
    assert anim.name == "mine" and anim.joints == {*REACHY_JOINTS} - {"body_yaw"}
    neither = tmp_path / "elsewhere" / "neither.json"
    neither.parent.mkdir()
    neither.write_text(json.dumps({"frames": []}))
    with pytest.raises(
        AnimationError, match="'keyframes' list \\(or a recorded move's 'set_target_data'\\)$"
    ):
        load_animation(neither, RECORDED_MOVE)
    with pytest.raises(AnimationError, match="'keyframes' list$"):  # only keyframes were asked for
        load_animation(tmp_path / "mine.json")
    moves, errors = load_moves(tmp_path)
    assert sorted(moves) == ["mine", "nested"]
    assert len(errors) == 1 and "short.json" in errors[0] and "same length" in errors[0]


def test_every_dance_is_a_gesture_that_follows_pollens_dance():
    dances, messages = load_dances()
    assert sorted(dances) == sorted(AVAILABLE_MOVES) and len(dances) == 20 and messages == []
    for name, g in dances.items():
        ref = DanceMove(name)
        assert g.duration_ms == pytest.approx(ref.duration * 1000.0 + RETURN_MS)
        # It ends where it started (Pollen's dances end away from neutral).
        start = {j: 0.0 for j in REACHY_JOINTS} | {"right_antenna": -10.0, "left_antenna": 10.0}
        end = g.evaluate(g.duration_ms, start)
        assert all(end[j] == pytest.approx(start[j], abs=1e-6) for j in end), (name, end)
        t = ref.duration * 0.6  # past the blend-in
        head, antennas, body = ref.evaluate(t)
        want = from_sdk(head, antennas, body)
        got = g.evaluate(t * 1000.0, {})
        for k, v in want.items():
            assert got[k] == pytest.approx(v, abs=1e-6), (name, k)
    # A dance blends in from where it starts and is danced facing where the body faces.
    g = dances["side_to_side_sway"]
    start = {j: 0.0 for j in REACHY_JOINTS} | {"head_yaw": 50.0, "body_yaw": 40.0}
    assert g.evaluate(0.0, start)["head_yaw"] == pytest.approx(50.0)
    later = g.evaluate(1000.0, start)
    assert later["body_yaw"] == pytest.approx(
        40.0 + from_sdk(None, None, DanceMove("side_to_side_sway").evaluate(1.0)[2])["body_yaw"]
    )


def test_emotions_absent_say_how_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    emotions, messages = load_emotions("pollen-robotics/reachy-mini-emotions-library")
    assert emotions == {} and "bolt-agent models pull" in messages[0]


def test_reachy_config_defaults_and_checks():
    cfg = RobotConfig(driver="reachy_mini")
    assert [j.name for j in cfg.joints] == list(REACHY_JOINTS)
    assert cfg.postures["listening"] and cfg.motion_vad_weight == pytest.approx(0.6)
    sleep = sleep_pose()
    limits = {j.name: (j.min_deg, j.max_deg) for j in cfg.joints}
    for k, v in sleep.items():  # the SDK's own sleep pose lies inside our limits
        assert limits[k][0] <= v <= limits[k][1], (k, v)
    assert sleep["right_antenna"] == pytest.approx(math.degrees(SLEEP_ANTENNAS_JOINT_POSITIONS[0]))
    assert from_sdk(SLEEP_HEAD_POSE)["head_pitch"] < -20  # head down
    with pytest.raises(ValueError, match="no joint left_arm"):
        RobotConfig(driver="reachy_mini", joints=[{"name": "left_arm", "min_deg": 0, "max_deg": 90}])
    with pytest.raises(ValueError, match="posture 'listening' moves head_roll"):
        RobotConfig(postures={"listening": {"head_roll": 5}})
    assert RobotConfig().motion_vad_weight == 1.0 and RobotConfig().postures == {}
    assert same_release("1.13.0", "1.13.4") and not same_release("1.13.0", "1.12.9")


def test_reachability_clamp_moves_toward_neutral_until_the_ik_solves():
    drv = ReachyMiniDriver(ReachyMiniConfig(), {j: 0.0 for j in REACHY_JOINTS}, connect=lambda cfg: None)
    neutral = {j: 0.0 for j in REACHY_JOINTS}
    drv.prepare_checks()
    assert drv.notes == []  # MuJoCo is there: the self-collision check is on
    t0 = time.perf_counter()
    for _ in range(200):
        assert drv.reachable(neutral)
    per_call_us = (time.perf_counter() - t0) / 200 * 1e6
    far = neutral | {
        "head_pitch": 35.0,
        "head_roll": 30.0,
        "head_z": -45.0,
        "head_yaw": 30.0,
        "right_antenna": 90.0,
    }
    assert not drv.reachable(far)
    safe, clamped = drv.safe_pose(far)
    assert clamped and drv.reachable(safe)
    assert safe["head_yaw"] == 30.0 and safe["right_antenna"] == 90.0  # yaw and antennas kept
    assert 0 < safe["head_pitch"] < 35.0 and -45.0 < safe["head_z"] < 0
    # Farthest reachable point: a little further along is unreachable.
    nudged = {k: safe[k] + (far[k] - safe[k]) * 0.01 for k in far}
    assert not drv.reachable(nudged)
    # Head-body yaw coupling (65 degrees): the head follows the body.
    coupled, _ = drv.safe_pose(neutral | {"body_yaw": -30.0, "head_yaw": 60.0})
    assert coupled["head_yaw"] == pytest.approx(35.0)
    assert per_call_us < 5000  # measured about 90 us (IK 10-45, clearance 50-110); generous for CI
    # Inside the joint limits, solvable, motors in range, but the head in the body: refused.
    low_tilted = neutral | {"head_roll": 22.7, "head_pitch": 26.5, "head_yaw": 20.0, "head_z": -34.1}
    assert not drv.reachable(low_tilted)


def test_skills_follow_the_body():
    generic = load_registry([])
    assert {"wave", "dance", "nod"} <= set(generic.skills) and "play_emotion" not in generic.skills
    assert "antenna" in generic.left_out["play_emotion"]
    dances = sorted(AVAILABLE_MOVES)
    reachy = load_registry([], joints=REACHY_JOINTS, libraries={"dances": dances, "emotions": []})
    assert "wave" not in reachy.skills
    assert reachy.left_out["wave"].startswith("this body has no left_arm, right_arm (")
    assert "skills/motion.py:" in reachy.left_out["wave"]  # which file defines it
    assert reachy.left_out["play_emotion"].startswith("no emotions installed (")
    assert reachy.skills["dance"].parameters["properties"]["name"]["enum"] == dances
    assert {"move_head", "go_to_sleep", "look_at", "nod"} <= set(reachy.skills)
    with_emotions = load_registry(
        [], joints=REACHY_JOINTS, libraries={"dances": dances, "emotions": ["cheerful1"]}
    )
    assert with_emotions.skills["play_emotion"].parameters["properties"]["name"]["enum"] == ["cheerful1"]


def _sim_robot(**kw) -> tuple[Robot, list]:
    sent: list = []
    drv = SimulatedDriver(on_command=lambda j, d, t: sent.append((time.monotonic(), j, d)))
    cfg = RobotConfig()
    from hardware.joints import Joint

    joints = [Joint(j.name, j.min_deg, j.max_deg, j.neutral_deg, j.max_speed_dps) for j in cfg.joints]
    return Robot(joints, drv, **kw), sent


def test_speech_sway_layers_on_a_running_gesture():
    robot, sent = _sim_robot()
    robot.play(linear_move("turn", {"head_yaw": 0.0}, {"head_yaw": 40.0}, 1500))
    sr = 22050
    t = np.arange(sr) / sr
    speech = (np.sin(2 * np.pi * 180 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t)) * 15000).astype(np.int16)
    assert speak_along(robot, speech, sr, max_deg=6.0)
    assert robot.playing == "turn" and robot.moving
    time.sleep(1.0)
    pitch = [d for _, j, d in sent if j == "head_pitch"]
    yaw = [d for _, j, d in sent if j == "head_yaw"]
    assert max(pitch) > 3.0 and min(pitch) < 3.0  # the sway goes up and down...
    assert yaw[-1] > yaw[0] + 10  # ...while the gesture turns the head
    robot.close()


def test_postures_blend_in_and_out_and_queue_or_replace():
    robot, sent = _sim_robot(postures={"listening": {"head_pitch": 6.0}, "thinking": {"head_yaw": -8.0}})
    marks = Postures(robot)
    marks.user_speaking(True)
    time.sleep(0.7)
    assert robot.positions()["head_pitch"] == pytest.approx(6.0)
    marks.user_done()  # listening → thinking: pitch back, yaw aside
    time.sleep(0.7)
    pos = robot.positions()
    assert pos["head_pitch"] == pytest.approx(0.0) and pos["head_yaw"] == pytest.approx(-8.0)
    marks.robot_speaking()
    time.sleep(0.7)
    assert robot.positions()["head_yaw"] == pytest.approx(0.0) and robot.posture == "idle"
    n = len(sent)
    time.sleep(0.3)
    assert len(sent) == n  # nothing to say: the loop sends nothing
    # Queue or replace.
    a = linear_move("a", {"head_yaw": 0.0}, {"head_yaw": 20.0}, 300)
    b = linear_move("b", {"head_yaw": 20.0}, {"head_yaw": -20.0}, 300)
    robot.play(a)
    robot.play(b, queue=True)
    assert robot.playing == "a" and robot.wait_idle(5)
    assert robot.positions()["head_yaw"] == pytest.approx(-20.0)
    robot.play(a)
    robot.play(b)  # waits for a: gestures run one after another
    assert robot.playing == "a" and robot.queued == ["b"]
    robot.play(a, queue=False)  # the user asked: cuts b and what waits
    assert robot.playing == "a" and robot.queued == []
    robot.close()
    assert robot.loop_stats()["rate_hz"] > 0


def test_skills_play_dances_through_the_motion_loop():
    dances, _ = load_dances()
    robot, sent = _sim_robot(libraries={"dances": dict(dances)})
    reg = load_registry([], joints=REACHY_JOINTS, libraries={"dances": list(dances)})
    # The generic sim body lacks a Reachy's joints: the loop drops what it has not got, keeps the rest.
    out = reg.call("dance", {"name": "simple_nod"}, SkillContext(robot=robot))
    assert out.ok and robot.playing == "simple_nod"
    bad = reg.call("dance", {"name": "moonwalk"}, SkillContext(robot=robot))
    assert not bad.ok and "simple_nod" in bad.result
    robot.close()
    assert isinstance(dances["simple_nod"], DanceGesture)


def test_speech_must_be_clearer_while_the_motors_move(fixtures_dir):
    """The listener scales the VAD's speech probability by ``motion_vad_weight`` while the body moves."""
    from types import SimpleNamespace

    from agent.config import load_config
    from agent.events import AudioIn, VoiceFrame
    from agent.pipeline.listener import Listener
    from agent.pipeline.queues import StageQueue, TurnGate
    from agent.speech.audio import decode_file

    cfg = load_config(None)
    cfg.robot.motion_vad_weight = 0.6
    moving = [False]
    q = StageQueue(TurnGate())
    mic = SimpleNamespace(name="mic", realtime=True)
    listener = Listener(cfg, mic, None, q, None, lambda e: None, None, moving=lambda: moving[0])
    speech = decode_file(fixtures_dir / "commands" / "dance.wav")

    def probs() -> list[float]:
        listener.reset()
        listener._audio(AudioIn(-1, speech, 10.0))
        out = []
        while (msg := q.get(timeout=0.01)) is not None:
            if isinstance(msg, VoiceFrame):
                out.append(msg.prob)
        return out

    still = probs()
    moving[0] = True
    shaken = probs()
    assert len(still) == len(shaken) > 20 and max(still) > 0.9
    assert shaken == pytest.approx([p * 0.6 for p in still])
    passed = sum(p >= cfg.vad.threshold for p in shaken)
    assert 0 < passed < sum(p >= cfg.vad.threshold for p in still)  # clear speech still passes, less of it
