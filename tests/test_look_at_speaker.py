"""Look at whoever speaks (issue 48, item 3).

The direction of arrival crosses the hardware boundary as a reading: the daemon's real
``GET /api/state/doa`` (null with ``--no-media``: the simulators have no microphone array), a
small HTTP server answering that endpoint as a robot's daemon does, and a :class:`ScriptedDoa`
the test sets. The motion goes through the real mockup daemon (in ``unshare -n``) and is read back
from it.
"""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from reachy_daemon import netns_problem, run_in_netns

from hardware.config import ReachyMiniConfig
from hardware.doa import DoaReading, yaw_deg
from hardware.reachy_mini.doa import DaemonDoa, parse_doa

pytestmark = pytest.mark.timeout(600)


def test_pollens_angles_become_the_robots_yaw():
    assert yaw_deg(0.0) == 90.0 and yaw_deg(math.pi / 2) == 0.0 and yaw_deg(math.pi) == -90.0
    assert DoaReading(math.radians(60), True).yaw_deg == pytest.approx(30.0)  # left of front
    assert parse_doa(None) is None and parse_doa({"angle": "x"}) is None
    assert parse_doa({"angle": 1.0, "speech_detected": True}) == DoaReading(1.0, True)


def test_the_daemon_reading_over_http():
    """A server answering /api/state/doa as a robot's daemon does (the array's angle, then null)."""
    answers = [{"angle": 0.5, "speech_detected": True}, None]

    class Doa(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = json.dumps(answers[0] if self.path == "/api/state/doa" else {"error": 1}).encode()
            self.send_response(200 if self.path == "/api/state/doa" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Doa)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        doa = DaemonDoa(ReachyMiniConfig(host="127.0.0.1", port=server.server_address[1]))
        assert doa.read() == DoaReading(0.5, True) and doa.problem == ""
        answers.pop(0)
        assert doa.read() is None  # no reading (no array, none yet)
    finally:
        server.shutdown()
    gone = DaemonDoa(ReachyMiniConfig(host="127.0.0.1", port=server.server_address[1]))
    assert gone.read() is None and gone.problem  # unreachable: no reading, and why


LOOK = """
import json, math, time
import reachy_daemon as rd
from tools.bench.look_bench import ScriptedDoa, turn_onsets
from agent.pipeline.attention import Attention
from hardware.config import ReachyMiniConfig, RobotConfig
from hardware.factory import build_robot
from hardware.reachy_mini.doa import DaemonDoa

def toward(yaw):
    return math.radians(90.0 - yaw)

def settle(s=1.2):
    time.sleep(s)
    return rd.joints()

out = {}
with rd.daemon("mockup"):
    out["daemon_doa"] = repr(DaemonDoa(ReachyMiniConfig(host="127.0.0.1")).read())  # --no-media: none
    robot, _ = build_robot(RobotConfig(driver="reachy_mini"))
    robot.wait_idle(10)
    doa = ScriptedDoa()
    att = Attention(robot, doa, look_at_speaker=True, eye_contact=False)
    att.start()
    try:
        att.floor("user")
        doa.set(toward(30.0))  # a voice 30 degrees to the left
        out["left"] = settle()
        doa.set(toward(-75.0))  # far right: the body turns past the head's reach
        out["far_right"] = settle(2.0)
        # Its own voice: the robot speaks; a direction heard then is ignored.
        att.floor("robot")
        doa.set(toward(40.0))
        out["own_voice"] = settle()
        doa.set(toward(40.0), speech=False)  # the robot stops; nobody speaks (the array's flag is off)
        att.floor("idle")
        out["no_speech"] = settle(1.2)  # past the echo tail
        # A gesture a person asked for owns the head: no turn while it plays.
        att.floor("user")
        robot.play(robot.libraries["dances"]["simple_nod"])
        doa.set(toward(10.0))
        time.sleep(0.3)
        out["during_gesture_target"] = robot.gaze_target.get("head_yaw")
        out["busy"] = robot.busy
        robot.wait_idle(15)
        out["after_gesture"] = settle(1.5)
    finally:
        att.close()
    robot.look_toward(None)
    settle()
    # Off: [robot] look_at_speaker = false.
    off = Attention(robot, doa, look_at_speaker=False, eye_contact=False)
    off.floor("user")
    doa.set(toward(35.0))
    for _ in range(10):
        off.step()
    out["off"] = settle(0.8)
    # Direction change to head motion onset, through the daemon.
    out["onsets"] = turn_onsets(robot, trials=6)
    robot.close()
print(json.dumps(out))
"""


def test_the_head_turns_toward_the_voice_through_the_daemon():
    why = netns_problem()
    if why:
        pytest.skip(why)
    r = run_in_netns(LOOK, timeout=500)
    print(json.dumps(r["onsets"]))
    assert r["daemon_doa"] == "None"  # the mockup runs --no-media: no array, no reading
    assert r["left"]["head_yaw"] == pytest.approx(30.0, abs=1.5) and abs(r["left"]["body_yaw"]) < 1.0
    # 75 degrees right: the head reaches 45 alone, the body turns the rest (within the 65 deg coupling).
    far = r["far_right"]
    assert far["head_yaw"] == pytest.approx(-75.0, abs=2.0) and far["body_yaw"] == pytest.approx(
        -30.0, abs=2.0
    )
    assert r["own_voice"]["head_yaw"] == pytest.approx(far["head_yaw"], abs=1.0)  # not toward itself
    assert r["no_speech"]["head_yaw"] == pytest.approx(far["head_yaw"], abs=1.0)
    assert r["busy"] and r["during_gesture_target"] == pytest.approx(-75.0, abs=0.5)  # not retargeted
    assert r["after_gesture"]["head_yaw"] == pytest.approx(10.0, abs=2.0)  # then it turns
    assert abs(r["off"]["head_yaw"]) < 1.0
    onsets = r["onsets"]
    assert onsets["missed"] == 0 and onsets["onset_p50_ms"] is not None


def test_a_live_run_wires_the_voice_the_face_and_idle_life_per_config():
    from pathlib import Path
    from types import SimpleNamespace

    from agent.config import load_config
    from agent.pipeline.body_life import build_body_life
    from hardware.joints import Joint
    from hardware.robot import Robot
    from hardware.servos.sim import SimulatedDriver

    cfg = load_config(Path(__file__).resolve().parent.parent / "launch" / "reachy_mini_sim.toml")
    joints = [Joint(j.name, j.min_deg, j.max_deg, j.neutral_deg, j.max_speed_dps) for j in cfg.robot.joints]
    robot = Robot(joints, SimulatedDriver())
    life = build_body_life(SimpleNamespace(cfg=cfg, robot=robot, vision=None), print)
    assert isinstance(life.attention.doa, DaemonDoa) and life.attention.look_at_speaker
    assert life.tracker is None and not life.attention.eye_contact  # no camera built here
    assert life.idle is not None and "antenna_twitch" in life.idle.weights
    life.floor("user")
    assert not life.idle.quiet()
    cfg.robot.look_at_speaker = cfg.robot.idle_life = False
    off = build_body_life(SimpleNamespace(cfg=cfg, robot=robot, vision=None), print)
    assert off.attention is None and off.idle is None
    robot.close()
