"""The one safety layer: random commands never put an out-of-limit value on any port.

Property tests (hypothesis) send thousands of random commands — NaN, ±inf, huge numbers,
strings, unknown joints, random time steps — through ``Robot.command`` to each real driver,
talking to a byte-level emulator of its device on a pty, and check every target the emulator
decoded from the bytes. Also: the rate limit, the emergency-stop latch, close() and SIGTERM.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from emu_bolt import BoltBoard
from emu_feetech import FeetechBus
from emu_maestro import Maestro
from emu_pty import settle
from hw_util import robot_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from waiting import wait_until

from hardware.factory import build_robot
from hardware.robot import MAX_DT_S

ROOT = Path(__file__).resolve().parent.parent


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-500, 500),
    st.integers(-(10**12), 10**12),
    st.sampled_from([float("nan"), float("inf"), -1e308, 1e308]),
    st.text(max_size=3),
    st.none(),
)
joint_names = st.sampled_from(["head_yaw", "head_pitch", "left_arm", "right_arm", "tail", ""])
commands = st.lists(
    st.tuples(st.floats(0, 0.5), st.dictionaries(joint_names, values, max_size=5)), min_size=1, max_size=60
)


def _device_setup(kind: str, tmp: Path):
    link = tmp / f"tty-{kind}"
    if kind == "bolt_serial":
        dev = BoltBoard(link, reset_on_open=False).plug()
        decoded = lambda: dev.moves  # noqa: E731
    elif kind == "maestro":
        dev = Maestro(link).plug()
        decoded = lambda: [(c, v) for c, v in dev.targets if v != 0]  # noqa: E731 - 0 = pulses off
    else:
        dev = FeetechBus(link, ids=(0, 1, 2, 3)).plug()
        decoded = lambda: dev.goals  # noqa: E731
    cfg = robot_config(kind, link, poll_hz=0)
    robot, msgs = build_robot(cfg, by_id_dir=tmp / "by-id")
    assert robot.status()[0] == "online", msgs
    return dev, robot, decoded


@pytest.fixture(scope="module", params=["bolt_serial", "maestro", "feetech"])
def rig(request, tmp_path_factory):
    dev, robot, decoded = _device_setup(request.param, tmp_path_factory.mktemp(request.param))
    yield dev, robot, decoded
    robot.use_clock(time.monotonic)
    robot.close()
    dev.close()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(cmds=commands)
def test_random_commands_never_exceed_limits_on_the_wire(rig, cmds):
    dev, robot, decoded = rig
    clock = FakeClock()
    robot.use_clock(clock)  # a fresh clock: the first command is limited like a first one
    channels = {c.id: c for c in robot.driver.channels.values()}
    start = len(decoded())
    prev = robot.positions()
    last_sent: float | None = None
    for dt, targets in cmds:
        clock.t += dt
        sent = robot.command(targets)
        step = MAX_DT_S if last_sent is None else min(clock.t - last_sent, MAX_DT_S)
        for j, deg in sent.items():
            jt = robot.joints[j]
            assert jt.min_deg <= deg <= jt.max_deg
            assert abs(deg - prev[j]) <= jt.max_speed_dps * step + 0.0006  # rounded to 0.001 deg
        if sent:
            last_sent = clock.t
        prev.update(sent)
        assert robot.driver.sync(2.0)
    settle(dev, quiet_s=0.015)
    for cid, units in decoded()[start:]:
        ch = channels[cid]
        assert ch.lo <= units <= ch.hi, (ch, units)
        deg = ch.to_degrees(units)
        jt = robot.joints[ch.joint]
        half_unit = 0.5 / ch.per_deg + 1e-9
        assert jt.min_deg - half_unit <= deg <= jt.max_deg + half_unit, (ch.joint, deg)


def test_first_command_is_rate_limited_too(rig):
    dev, robot, decoded = rig
    robot.use_clock(FakeClock())
    before = robot.positions()["left_arm"]
    sent = robot.command({"left_arm": 160})
    assert abs(sent["left_arm"] - before) <= 300 * MAX_DT_S + 1e-9


def test_estop_latches_until_cleared(rig):
    dev, robot, decoded = rig
    clock = FakeClock()
    robot.use_clock(clock)
    robot.estop()
    assert robot.driver.sync(2.0)
    settle(dev)
    n = len(decoded())
    assert robot.command({"head_yaw": 10}) == {}
    with pytest.raises(RuntimeError, match="emergency stop"):
        robot.play("nod")
    assert robot.driver.sync(2.0)
    settle(dev)
    assert len(decoded()) == n
    if isinstance(dev, BoltBoard):
        assert dev.estopped and not dev.torque
    if isinstance(dev, FeetechBus):
        assert all(dev.torque(i) == 0 for i in range(4))
    robot.clear_estop()
    clock.t += 0.05
    assert robot.command({"head_yaw": 1}) != {}
    assert robot.driver.sync(2.0)
    assert wait_until(lambda: len(decoded()) > n)


@pytest.mark.parametrize("kind", ["bolt_serial", "maestro", "feetech"])
def test_close_returns_to_neutral_and_cuts_torque(kind, tmp_path):
    dev, robot, decoded = _device_setup(kind, tmp_path)
    robot.move({"head_yaw": 40, "left_arm": 90}, 200, wait=True)
    robot.close()
    robot.close()  # twice is fine
    settle(dev)
    chans = {c.joint: c for c in robot.driver.channels.values()}
    last = {}
    for cid, u in decoded():
        last[cid] = u
    assert last[chans["head_yaw"].id] == chans["head_yaw"].to_device(0.0)
    assert last[chans["left_arm"].id] == chans["left_arm"].to_device(0.0)
    if kind == "bolt_serial":
        assert not dev.torque
    elif kind == "maestro":
        assert all(v == 0 for c, v in dev.targets[-4:])
    else:
        assert all(dev.torque(i) == 0 for i in range(4))
    dev.close()


def test_sigterm_parks_the_robot(tmp_path):
    board = BoltBoard(tmp_path / "ttyBOLT", reset_on_open=False).plug()
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from hw_util import robot_config
        from hardware.factory import build_robot
        from hardware.safety import install_shutdown
        robot, msgs = build_robot(robot_config("bolt_serial", {str(tmp_path / "ttyBOLT")!r}))
        install_shutdown(robot)
        robot.move({{"head_yaw": 30}}, 100, wait=True)
        robot.driver.sync(2.0)
        print("ready", flush=True)
        time.sleep(30)  # alive until the test's SIGTERM
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert board.pos[0] == 1200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert board.pos[0] == 900  # head_yaw neutral (0 degrees = servo centre)
    assert board.frames[-1].endswith("T 0") and not board.torque
    board.close()


def test_nan_and_strings_become_neutral_not_crashes(rig):
    dev, robot, decoded = rig
    clock = FakeClock()
    robot.use_clock(clock)
    for _ in range(50):
        clock.t += 0.02
        sent = robot.command({"head_yaw": math.nan, "left_arm": "up", "right_arm": None, "nope": 3})
    assert set(sent) == {"head_yaw", "left_arm", "right_arm"}
    assert sent["head_yaw"] == 0.0 and sent["left_arm"] == 0.0
    assert wait_until(lambda: robot.driver.sync(0.5))
    os.sync()
