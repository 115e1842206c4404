"""A Reachy Mini through Pollen's real daemon and SDK client, in both simulators.

Every test runs its scenario inside a private network namespace (``tests/reachy_daemon.py``:
``unshare -n``, loopback only, telemetry off), where it starts ``reachy-mini-daemon``
(``--mockup-sim``: no physics, reports motors disabled; ``--sim``: MuJoCo), drives it through
our robot (or the whole agent as a child process) and reads the daemon's own state back over
its REST API. The scenario prints one JSON line; the assertions are here.
"""

from __future__ import annotations

import json

import pytest
from reachy_daemon import netns_problem, run_in_netns

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module", autouse=True)
def _netns():
    why = netns_problem()
    if why:
        pytest.skip(why)


BODY = """
import json, math, time
import numpy as np
import reachy_daemon as rd
from hardware.config import RobotConfig
from hardware.factory import build_robot
from hardware.speech_motion import speak_along

out = {}
MODE = "%s"
with rd.daemon(MODE):
    robot, msgs = build_robot(RobotConfig(driver="reachy_mini"))
    out["state"] = robot.status()[0]
    out["daemon_version"] = robot.driver.daemon_version
    out["sdk_version"] = robot.driver.sdk_version
    robot.wait_idle(10)  # the wake-up move
    time.sleep(0.5)
    out["woke"] = rd.joints()

    # Beyond the envelope: per-joint limits, then reachability. Clamped, reached, not frozen.
    far = {"head_pitch": 80.0, "head_roll": 30.0, "head_z": -45.0, "head_yaw": 20.0}
    robot.move(far, 800, wait=True)
    time.sleep(1.0 if MODE == "sim" else 0.4)
    out["far_sent"] = robot.driver.sent()
    out["far_read"] = rd.joints()
    out["clamped"] = robot.driver.clamped
    robot.move({k: 0.0 for k in far}, 600, wait=True)
    time.sleep(1.0 if MODE == "sim" else 0.4)
    out["back"] = rd.joints()

    # Antennas: a wild command stays within +-175 degrees; a dance keeps them where Pollen put them.
    robot.move({"right_antenna": 400.0, "left_antenna": -400.0}, 400, wait=True)
    time.sleep(0.5)
    out["antennas_wild"] = [rd.joints()["right_antenna"], rd.joints()["left_antenna"]]
    robot.move({"right_antenna": -10.0, "left_antenna": 10.0}, 400, wait=True)
    dance = robot.libraries["dances"]["groovy_sway_and_roll"]
    time.sleep(1.0 if MODE == "sim" else 0.3)
    before_dance = rd.joints()
    robot.play(dance)
    during = rd.sample(2.0)
    out["dance_range"] = {k: max(s[k] for s in during) - min(s[k] for s in during) for k in during[0]}
    out["dance_antenna_max"] = max(max(abs(s["right_antenna"]), abs(s["left_antenna"])) for s in during)
    robot.wait_idle(15)
    out["loop"] = robot.loop_stats()
    time.sleep(1.0 if MODE == "sim" else 0.3)
    after_dance = rd.joints()
    out["dance_end_offset"] = {k: after_dance[k] - before_dance[k] for k in before_dance}

    # Speech sway on the head while a gesture turns it.
    from hardware.animation import linear_move
    robot.play(linear_move("turn", {"head_yaw": 0.0}, {"head_yaw": 30.0}, 2500))
    sr = 22050
    t = np.arange(2 * sr) / sr
    loud = 0.5 + 0.5 * np.sin(2 * np.pi * 2.5 * t)  # syllables at 2.5 Hz
    speech = (np.sin(2 * np.pi * 180 * t) * loud * 15000).astype(np.int16)
    speak_along(robot, speech, sr, max_deg=6.0)
    swayed = rd.sample(1.6)
    out["sway_pitch_range"] = max(s["head_pitch"] for s in swayed) - min(s["head_pitch"] for s in swayed)
    out["sway_yaw"] = [swayed[0]["head_yaw"], swayed[-1]["head_yaw"]]
    robot.wait_idle(10)
    time.sleep(0.5)
    still = rd.sample(0.6)
    out["still_pitch_range"] = max(s["head_pitch"] for s in still) - min(s["head_pitch"] for s in still)

    # E-stop during a dance holds the pose; commands are refused; clearing it parks (the default).
    robot.play(robot.libraries["dances"]["side_to_side_sway"])
    time.sleep(0.8)
    report = robot.estop()
    out["estop_report"] = [report.motors_on, report.read_back, report.says()]
    time.sleep(0.3 if MODE == "sim" else 0.1)
    held = rd.sample(0.8)
    out["estop_drift"] = max(max(abs(s[k] - held[0][k]) for s in held) for k in held[0])
    out["estop_motors"] = rd.motors()
    try:
        robot.play(dance)
        out["refused"] = False
    except RuntimeError:
        out["refused"] = True
    robot.clear_estop()
    out["released_motors"] = rd.motors()
    out["released_pose"] = rd.joints()
    awake = {"head_pitch": 0.0, "head_z": 0.0, "head_x": 0.0, "right_antenna": -10.0, "left_antenna": 10.0}
    robot.move(awake, 1500, wait=True)
    time.sleep(1.0 if MODE == "sim" else 0.4)
    out["woken_motors"] = rd.motors()
    out["woken_pose"] = rd.joints()

    # Shutdown parks: sleep pose, motors off; the report is read back from the daemon.
    t0 = time.monotonic()
    rep = robot.close()
    out["park_s"] = time.monotonic() - t0
    out["park_report"] = [rep.pose, rep.motors_on, rep.read_back]
    out["parked_motors"] = rd.motors()
    out["parked_pose"] = rd.joints()

    # estop = "motors_off": the daemon turns them off, and the report says what it reports.
    from hardware.config import ReachyMiniConfig
    off = ReachyMiniConfig(estop="motors_off")
    robot, _ = build_robot(RobotConfig(driver="reachy_mini", reachy_mini=off))
    robot.wait_idle(10)
    report = robot.estop()
    out["off_report"] = [report.motors_on, report.read_back, report.says(), rd.motors()]
    robot.clear_estop()
    robot.close()
print(json.dumps(out))
"""


def _close(a: dict, b: dict, keys, tol: float) -> list[str]:
    return [f"{k}: {a[k]:.2f} vs {b[k]:.2f}" for k in keys if abs(a[k] - b[k]) > tol]


@pytest.mark.parametrize("mode", ["mockup", "sim"])
def test_the_body_through_the_daemon(mode):
    from hardware.reachy_mini.driver import sleep_pose

    r = run_in_netns(BODY % mode, timeout=300)
    tol = 0.6 if mode == "mockup" else 3.0  # MuJoCo's servos track with a small error
    assert r["state"] == "online" and r["daemon_version"] == r["sdk_version"]
    assert abs(r["woke"]["head_pitch"]) < tol and abs(r["woke"]["right_antenna"] + 10) < tol
    head = ("head_roll", "head_pitch", "head_yaw", "head_x", "head_y", "head_z")
    # Clamped (pitch to its 35 degree limit, then toward neutral until reachable) and reached.
    sent, read = r["far_sent"], r["far_read"]
    assert r["clamped"] > 0 and sent["head_pitch"] < 35.0 and sent["head_yaw"] == pytest.approx(20.0)
    assert not _close(sent, read, head, tol), _close(sent, read, head, tol)
    assert not _close(r["back"], dict.fromkeys(head, 0.0), head, tol)  # not frozen: it came back
    assert all(abs(a) <= 175.0 + tol for a in r["antennas_wild"]) and max(map(abs, r["antennas_wild"])) > 170
    assert r["dance_range"]["head_roll"] > 5 or r["dance_range"]["head_pitch"] > 5, r["dance_range"]
    assert r["dance_antenna_max"] <= 60.0 + tol
    assert r["loop"]["ticks"] > 100 and r["loop"]["rate_hz"] > 0
    # The sway moves the pitch while the gesture turns the yaw; without it the pitch is still.
    assert r["sway_pitch_range"] > 2.0 and r["sway_yaw"][1] > r["sway_yaw"][0] + 5, r
    assert r["still_pitch_range"] < 0.5
    assert r["estop_drift"] < (0.3 if mode == "mockup" else 1.5), r["estop_drift"]
    assert r["estop_motors"] == "enabled" and r["refused"]
    # What the robot says of its motors is what the daemon reports.
    on, read_back, says = r["estop_report"]
    assert on is True and read_back and "holding still, with my motors on" in says, says
    # A dance ends where it started (within the servos' tracking).
    assert all(abs(v) < (tol + 0.5) for v in r["dance_end_offset"].values()), r["dance_end_offset"]
    sleep = sleep_pose()
    if mode == "mockup":  # MuJoCo's torque-off is a no-op (Pollen's simulator)
        assert r["released_motors"] == "disabled" and r["parked_motors"] == "disabled"
    rest = tol if mode == "mockup" else 5.0  # in MuJoCo the sleeping head rests on the shell
    assert not _close(r["released_pose"], sleep, ("head_pitch", "head_z"), rest)
    assert r["woken_motors"] == "enabled" and abs(r["woken_pose"]["head_pitch"]) < tol
    assert not _close(r["parked_pose"], sleep, ("head_pitch", "head_z", "right_antenna"), rest)
    pose, motors_on, read_back = r["park_report"]
    assert read_back and motors_on is (r["parked_motors"] != "disabled")
    if mode == "mockup":
        assert pose == "sleep" and motors_on is False
        on, read_back, says, daemon = r["off_report"]
        assert daemon == "disabled" and on is False and read_back and "my motors are off" in says


AGENT = """
import json, os, signal, subprocess, sys, time, threading
import reachy_daemon as rd

out = {"events": []}
proc_daemon = rd.start("mockup")
agent = subprocess.Popen(
    [sys.executable, "-m", "agent", "chat", "--json", "--config", os.environ["REACHY_CFG"]],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
)
events = []
def read():
    for line in agent.stdout:
        try:
            events.append((time.monotonic(), json.loads(line)))
        except ValueError:
            pass
threading.Thread(target=read, daemon=True).start()

def wait_for(pred, timeout=120, since=0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for _, e in list(events)[since:]:
            if pred(e):
                return e
        time.sleep(0.05)
    raise TimeoutError("no such event; got " + json.dumps([e for _, e in events])[-3000:])

def say(text):
    n = len(events)
    agent.stdin.write(text + "\\n")
    agent.stdin.flush()
    return n

try:
    wait_for(lambda e: e["event"] == "ready")
    time.sleep(2.0)  # the wake-up move
    rest = rd.joints()
    n = say("Dance for me.")
    out["first_tool"] = wait_for(lambda e: e["event"] == "tool_call", since=n)["name"]
    moving = rd.sample(1.5)
    out["first_range"] = max(max(abs(s[k] - rest[k]) for s in moving) for k in rest)
    wait_for(lambda e: e["event"] == "timing", since=n)

    # The daemon dies in the middle of a dance: a clear error; the agent keeps talking.
    n = say("Dance for me.")
    wait_for(lambda e: e["event"] == "tool_call", since=n)
    time.sleep(0.5)
    rd.stop(proc_daemon, signal.SIGKILL)
    err = wait_for(lambda e: e["event"] == "error" and "daemon" in e.get("message", ""), 30, n)
    out["lost_message"] = err["message"]
    n = say("What time is it?")
    reply = wait_for(lambda e: e["event"] == "reply", 120, n)
    out["reply_while_lost"] = reply["text"]

    # The daemon is back: the agent reconnects and moves again.
    proc_daemon = rd.start("mockup")
    back = wait_for(lambda e: e["event"] == "notice" and "back online" in e.get("message", ""), 60, n)
    out["back_message"] = back["message"]
    time.sleep(2.0)
    rest = rd.joints()
    n = say("Dance for me.")
    out["again_tool"] = wait_for(lambda e: e["event"] == "tool_call" and e["name"] == "dance", 120, n)["name"]
    moving = rd.sample(1.5)
    out["again_range"] = max(max(abs(s[k] - rest[k]) for s in moving) for k in rest)
    wait_for(lambda e: e["event"] == "timing", 120, n)

    # SIGTERM parks: sleep pose, motors off (the mockup reports it).
    out["motors_before"] = rd.motors()
    t0 = time.monotonic()
    agent.send_signal(signal.SIGTERM)
    while rd.motors() != "disabled" and time.monotonic() - t0 < 15:
        time.sleep(0.01)
    out["parked_s"] = time.monotonic() - t0
    out["exit"] = agent.wait(20)
    out["parked_pose"] = rd.joints()
    out["events"] = [e["event"] for _, e in events]
finally:
    if agent.poll() is None:
        agent.kill()
    rd.stop(proc_daemon)
print(json.dumps(out))
"""


def test_the_agent_dances_loses_the_daemon_keeps_talking_and_parks(tmp_path):
    from hardware.reachy_mini.driver import sleep_pose

    cfg = tmp_path / "reachy.toml"
    cfg.write_text('[robot]\ndriver = "reachy_mini"\n[robot.reachy_mini]\nbackoff_max_s = 1.0\n')
    r = run_in_netns(AGENT, timeout=500, env={"REACHY_CFG": str(cfg)})
    assert r["first_tool"] == "dance" and r["first_range"] > 5.0, r
    assert (
        "Reachy Mini daemon at localhost:8000" in r["lost_message"] and "keeps talking" in r["lost_message"]
    )
    assert r["reply_while_lost"]
    assert "reachy_mini is back online" in r["back_message"]
    assert r["again_range"] > 5.0
    assert r["motors_before"] == "enabled" and r["exit"] == 0
    assert r["parked_s"] < 10.0
    sleep = sleep_pose()
    assert abs(r["parked_pose"]["head_pitch"] - sleep["head_pitch"]) < 1.0
    assert "robot_parked" in r["events"]


BENCH = """
import json, os, subprocess, sys
import reachy_daemon as rd

with rd.daemon("mockup"):
    cmd = [sys.executable, "-m", "agent", "motion-bench", "--json", "--trials", "5", "--config"]
    r = subprocess.run([*cmd, os.environ["REACHY_CFG"]], capture_output=True, text=True, timeout=300)
    motors = rd.motors()
out = r.stdout.strip().splitlines()[-1:]
print(json.dumps({"code": r.returncode, "out": out, "err": r.stderr[-2000:], "motors": motors}))
"""


def test_motion_bench_prints_the_loop_latency_and_parking_figures(tmp_path):
    cfg = tmp_path / "reachy.toml"
    cfg.write_text('[robot]\ndriver = "reachy_mini"\n')
    r = run_in_netns(BENCH, timeout=400, env={"REACHY_CFG": str(cfg)})
    assert r["code"] == 0, r["err"]
    figures = json.loads(r["out"][0])
    assert figures["loop"]["ticks"] > 50 and figures["loop"]["configured_hz"] == 50
    assert figures["latency"]["trials"] == 5 and figures["latency"]["missed"] == 0
    assert figures["park"]["parked_ms"] is not None and figures["park"]["exit_code"] == 0
    assert figures["park"]["parked_by"] == "motors off"  # the mockup reports it
    assert r["motors"] == "disabled"  # the chat child parked the robot on SIGTERM
