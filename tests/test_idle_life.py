"""Idle life (issue 48, item 6): small behaviours when nobody talks, on a simulated Reachy Mini body.

The draws run on a virtual clock with a seeded random generator (:meth:`IdleLife.step` takes the
time); the gestures they start play through the robot's real motion loop and safety layer, on the
simulated driver with a Reachy Mini's joints.
"""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest

from agent.pipeline.posture import Postures
from hardware.config import RobotConfig
from hardware.idle import IdleLife, idle_gestures
from hardware.joints import Joint
from hardware.robot import Robot
from hardware.servos.sim import SimulatedDriver


def _reachy_sim() -> Robot:
    cfg = RobotConfig(driver="reachy_mini")  # its joints, on the simulated driver
    joints = [Joint(j.name, j.min_deg, j.max_deg, j.neutral_deg, j.max_speed_dps) for j in cfg.joints]
    return Robot(joints, SimulatedDriver())


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_draws_wait_for_quiet_and_nothing_weighs_highest():
    robot = _reachy_sim()
    quiet = [True]
    clock = Clock()
    life = IdleLife(robot, lambda: quiet[0], period_s=6.0, after_s=8.0, clock=clock, rng=random.Random(7))
    assert {"breathe", "glance", "antenna_twitch"} <= set(life.weights)
    assert life.step() is None  # the quiet starts now
    clock.t += 7.9
    assert life.step() is None  # not yet 8 s of quiet
    clock.t += 0.2
    assert life.step() is not None
    robot.stop()
    drawn = Counter()
    for _ in range(2000):  # 2000 draws on the virtual clock, each gesture cut at once
        clock.t += 9.1  # past the longest gap (1.5 x 6 s)
        got = life.step()
        assert got is not None
        drawn[got] += 1
        robot.stop()
    share = {k: v / 2000 for k, v in drawn.items()}
    assert share["nothing"] == pytest.approx(0.5, abs=0.04) and share["nothing"] == max(share.values())
    assert share["breathe"] == pytest.approx(0.25, abs=0.04)
    assert share["antenna_twitch"] == pytest.approx(0.1, abs=0.03)
    # Someone speaks: nothing, and the quiet starts again afterwards.
    quiet[0] = False
    clock.t += 100
    assert life.step() is None
    quiet[0] = True
    assert life.step() is None
    clock.t += 7.0
    assert life.step() is None
    robot.close()


def test_never_during_a_gesture_the_estop_or_sleep():
    robot = _reachy_sim()
    clock = Clock()
    life = IdleLife(robot, lambda: True, period_s=2.0, after_s=1.0, clock=clock, rng=random.Random(1))
    robot.play(idle_gestures(set(robot.joints))["breathe"])  # a gesture a person asked for (not cuttable)
    clock.t += 50
    assert life.step() is None and robot.busy
    robot.stop()
    robot.estop()
    clock.t += 50
    assert life.step() is None
    robot.clear_estop()
    robot.rest({"head_pitch": -20.0}, 100)
    robot.wait_idle(5)
    clock.t += 50
    assert life.step() is None and robot.asleep
    robot.close()


def test_an_idle_gesture_ends_where_it_began_and_gives_way():
    robot = _reachy_sim()
    robot.move({"head_yaw": 20.0, "right_antenna": -30.0, "left_antenna": 30.0}, 200, wait=True)
    start = robot.positions()
    for name, g in idle_gestures(set(robot.joints)).items():
        robot.play(g, cuttable=True)
        assert robot.wait_idle(10), name
        end = robot.positions()
        assert all(end[j] == pytest.approx(start[j], abs=0.01) for j in start), (name, end)
    # A gesture a person asks for replaces an idle one at once; someone speaking ends one.
    gestures = idle_gestures(set(robot.joints))
    robot.play(gestures["breathe"], cuttable=True)
    time.sleep(0.3)
    robot.move({"head_yaw": 0.0}, 300)
    assert robot.playing == "move" and robot.queued == []
    robot.wait_idle(5)
    robot.play(gestures["glance_left"], cuttable=True)
    time.sleep(0.4)
    Postures(robot).user_speaking(True)
    assert robot.playing is None
    robot.wait_idle(5)
    assert robot.positions()["head_yaw"] == pytest.approx(0.0, abs=0.01)  # settled back
    robot.close()


def test_the_loop_draws_on_its_own_when_quiet():
    robot = _reachy_sim()
    life = IdleLife(robot, lambda: True, period_s=1.0, after_s=0.2, rng=random.Random(3))
    life.weights = {"antenna_twitch": 1.0}
    life.start()
    try:
        time.sleep(1.5)
    finally:
        life.close()
    assert [b for _, b in life.drawn][:1] == ["antenna_twitch"]
    robot.wait_idle(5)
    assert robot.positions()["right_antenna"] == pytest.approx(-10.0, abs=0.01)  # back at neutral
    robot.close()
