"""A truthful body (issue 48, item 2), on the simulated driver with the packaged animations.

Gestures a turn asks for run one after another, in the order called, each to its end; a new one
cuts a running one only when the user asked (``queue=False``, a change of mind) or the safety
layer says so, and a cut one's joints settle back (an arm is never left raised). Sleep and wake;
what the e-stop and parking say is what the body reports; a person clears the e-stop, never a
request to the robot. The Reachy Mini's side (its daemon's reports) is in test_reachy_mini.py.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from agent.pipeline.posture import Postures, changes_mind
from agent.skills import SkillContext, load_registry
from hardware.config import RobotConfig
from hardware.factory import build_robot

ROOT = Path(__file__).resolve().parent.parent


def _robot():
    sent: list[tuple[float, str, float]] = []
    robot, _ = build_robot(RobotConfig(), on_command=lambda j, d, t: sent.append((time.monotonic(), j, d)))
    return robot, sent


def _track(sent, joint):
    return [(t, d) for t, j, d in sent if j == joint]


@pytest.mark.parametrize("trial", range(3))
def test_wave_and_then_nod_run_in_full_in_order(trial):
    robot, sent = _robot()
    reg = load_registry([], joints=list(robot.joints), animations=list(robot.animations))
    ctx = SkillContext(robot=robot)
    robot.begin_turn(0)
    assert reg.call("wave", {}, ctx).ok
    time.sleep(0.3)  # the model's second call comes while the arm is up
    assert reg.call("nod", {}, ctx).ok
    assert robot.playing == "wave" and robot.queued == ["nod"]
    assert robot.wait_idle(10)
    arm, pitch = _track(sent, "right_arm"), _track(sent, "head_pitch")
    assert max(d for _, d in arm) > 135.0 and arm[-1][1] == pytest.approx(0.0)  # a whole wave
    moving_pitch = [t for t, d in pitch if abs(d) > 0.5]
    assert moving_pitch and moving_pitch[0] >= arm[-1][0]  # the nod starts after the wave ended
    assert max(d for _, d in pitch) > 13.0 and pitch[-1][1] == pytest.approx(0.0)  # a whole nod
    robot.close()


def test_a_change_of_mind_cuts_and_the_arm_settles_back():
    robot, sent = _robot()
    robot.begin_turn(0)
    robot.play("wave")
    time.sleep(0.5)
    assert robot.positions()["right_arm"] > 90  # raised
    robot.begin_turn(1, changed_mind=changes_mind("no, nod instead"))
    robot.play("nod")  # cuts the wave at once
    assert robot.playing == "nod"
    assert robot.wait_idle(5)
    assert robot.positions()["right_arm"] == pytest.approx(0.0)  # not left at 92 degrees
    assert robot.positions()["head_pitch"] == pytest.approx(0.0)
    # A turn that did not change its mind queues.
    robot.begin_turn(2, changed_mind=changes_mind("and nod please"))
    robot.play("wave")
    robot.play("nod")
    assert robot.queued == ["nod"]
    robot.close()


def test_change_of_mind_words():
    for yes in ("no, nod instead", "Actually, wave", "never mind, dance", "Wait, stop waving", "rather nod"):
        assert changes_mind(yes), yes
    for no in ("wave and then nod", "nod, then wave", "dance for me", "I know you can nod"):
        assert not changes_mind(no), no


def test_a_loop_or_idle_life_is_cut_but_a_gesture_is_not():
    robot, _ = _robot()
    from dataclasses import replace

    robot.play(replace(robot.animations["nod"], loop=True))
    robot.play("wave")  # a loop never ends: replaced
    assert robot.playing == "wave"
    robot.stop()
    robot.play("nod", cuttable=True)  # idle life
    robot.play("wave")
    assert robot.playing == "wave" and robot.queued == []
    robot.close()


def test_sleep_then_speech_wakes_to_neutral():
    robot, _ = _robot()
    rest = {"head_pitch": -25.0, "head_yaw": 0.0}
    robot.rest(rest, 300)
    assert robot.asleep and robot.wait_idle(5)
    assert robot.positions()["head_pitch"] == pytest.approx(-25.0)
    Postures(robot).user_speaking(True)  # "talk to me to wake me up"
    assert not robot.asleep and robot.wait_idle(5)
    assert robot.positions()["head_pitch"] == pytest.approx(0.0)
    robot.rest(rest, 300)
    robot.play("wave")  # a gesture asked of a sleeping robot wakes it first, then plays
    assert robot.playing == "wake_up" and robot.queued == ["wave"]
    assert robot.wait_idle(10)
    robot.close()


def test_estop_says_what_the_motors_do_and_only_a_person_clears_it():
    robot, _ = _robot()
    reg = load_registry([], joints=list(robot.joints), animations=list(robot.animations))
    ctx = SkillContext(robot=robot)
    out = reg.call("emergency_stop", {}, ctx)
    assert robot.estopped and "my motors are off" in out.result and "bolt-agent estop clear" in out.result
    # "clear the emergency stop" called it again: latched already, nothing is done again, and
    # the robot says how a person clears it.
    again = reg.call("emergency_stop", {}, ctx)
    assert "already on" in again.result and "bolt-agent estop clear" in again.result
    assert robot.clear_estop() and not robot.estopped  # a person (the console, bolt-agent estop)
    assert not robot.clear_estop()
    robot.close()


def test_parking_reports_the_pose_it_reached():
    robot, _ = _robot()
    robot.move({"head_yaw": 30.0}, 200, wait=True)
    rep = robot.close()
    assert rep is not None and rep.pose == "neutral" and rep.motors_on is False and not rep.read_back
    robot, _ = _robot()
    robot.move({"head_yaw": 30.0}, 200, wait=True)
    robot.estop()
    rep = robot.close()
    assert rep.pose == "held" and rep.positions["head_yaw"] == pytest.approx(30.0)


def test_bolt_agent_estop_clears_a_running_agents_estop(tmp_path):
    """The command a person runs reaches the agent's socket; the robot itself never clears it."""
    from typer.testing import CliRunner

    from agent.cli import app
    from agent.cli.estop import EstopSocket

    robot, _ = _robot()
    notices: list = []
    sock = EstopSocket(robot, notices.append, tmp_path / "run")
    try:
        runner = CliRunner()
        r = runner.invoke(app, ["estop", "on", "--dir", str(tmp_path / "run")])
        assert r.exit_code == 0 and robot.estopped, r.output
        assert json.loads(r.output)["says"] == "Emergency stop: my motors are off."
        r = runner.invoke(app, ["estop", "clear", "--dir", str(tmp_path / "run")])
        assert r.exit_code == 0 and not robot.estopped, r.output
        assert "cleared by a person" in notices[-1].message
        r = runner.invoke(app, ["estop", "status", "--dir", str(tmp_path / "run")])
        assert json.loads(r.output)["estopped"] is False
    finally:
        sock.close()
        robot.close()
    r = CliRunner().invoke(app, ["estop", "status", "--dir", str(tmp_path / "run")])
    assert r.exit_code == 1 and "no bolt-agent" in r.output


def test_every_joint_command_is_reported_whatever_the_driver():
    """Robot.on_command sees what the safety layer sends (the agent's robot events), not a driver hook."""
    robot, sent = _robot()
    seen = threading.Event()
    robot.on_command = lambda j, d, t: seen.set()
    robot.move({"head_yaw": 10.0}, 100, wait=True)
    assert seen.is_set() and not sent  # replaced: one reporter, the robot's
    robot.close()
