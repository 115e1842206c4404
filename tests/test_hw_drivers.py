"""Each serial driver against a byte-level emulator of its device on a real pty: normal use,
reset-on-open boards, unplug/replug, missing ports, garbage, error status, permissions."""

from __future__ import annotations

import os
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
from waiting import wait_until

from hardware.factory import build_robot
from hardware.servos.bolt_serial import decode, encode

ROOT = Path(__file__).resolve().parent.parent


def test_frame_checksum_roundtrip():
    assert encode("1 H") == b"1 H*59\n"  # 0x31 ^ 0x20 ^ 0x48 = 0x59
    line = encode("OK 3 bolt_servo 1 4")
    assert decode(line) == "OK 3 bolt_servo 1 4"
    assert decode(line.replace(b"4*", b"5*")) is None and decode(b"garbage\n") is None


def test_bolt_board_resetting_on_open_waits_for_ready_then_moves(tmp_path):
    board = BoltBoard(tmp_path / "ttyACM0", reset_on_open=True, boot_s=0.3).plug()
    robot, msgs = build_robot(robot_config("bolt_serial", tmp_path / "ttyACM0"), by_id_dir=tmp_path / "by-id")
    try:
        assert msgs == [] and robot.status() == ("online", "")
        assert robot.driver.board_info.startswith("READY bolt_servo 1")
        assert board.frames[0].endswith("W 1000") and board.torque
        assert board.limits[0] == (300, 1500) and board.speed[2] == 300
        robot.move({"head_yaw": 30, "head_pitch": 10}, 200, wait=True)
        assert robot.driver.sync(2.0)
        assert board.pos[0] == 1200 and board.pos[1] == 800  # head_pitch mounted with direction -1
        assert wait_until(lambda: abs(robot.driver.read()["head_yaw"] - 30) < 0.2)  # read back with Q
        # Idle for longer than the board's 1 s watchdog (four heartbeats, one every 1/3 s):
        # the host's heartbeats keep it quiet.
        beats = sum(f.endswith(" H") for f in list(board.frames))
        assert wait_until(lambda: sum(f.endswith(" H") for f in list(board.frames)) >= beats + 4, 5)
        assert board.wdog_fired == 0
    finally:
        robot.close()
        board.close()


def test_a_parks_torque_off_is_the_last_frame_however_late_close_comes(tmp_path):
    board = BoltBoard(tmp_path / "tty", reset_on_open=False).plug()
    robot, _ = build_robot(robot_config("bolt_serial", tmp_path / "tty"))
    driver = robot.driver
    try:
        assert wait_until(lambda: any(f.endswith(" H") for f in list(board.frames)), 5)  # heartbeats run
        driver.begin_close()  # what Robot.close does before its torque-off
        driver.set_torque(False)
        assert driver.sync(2.0)
        time.sleep(1.0)  # three heartbeat periods and more: a busy machine's late close()
        assert board.frames[-1].endswith("T 0"), board.frames[-4:]
    finally:
        robot.close()
        board.close()
    assert board.frames[-1].endswith("T 0") and not board.torque


def test_a_fired_board_watchdog_gets_torque_back_on(tmp_path):
    """A host starved of CPU past the board's watchdog (seen in CI): the board cuts torque and
    sends WDOG; the host turns torque back on with its next exchange instead of staying limp."""
    board = BoltBoard(tmp_path / "tty", reset_on_open=False).plug()
    robot, _ = build_robot(robot_config("bolt_serial", tmp_path / "tty"))
    try:
        assert wait_until(lambda: board.torque, 5)
        board.watchdog_ms = 100  # shorter than the host's 1/3 s heartbeat: the next gap fires it
        assert wait_until(lambda: board.wdog_fired >= 1, 5)
        board.watchdog_ms = 1000
        assert wait_until(lambda: board.torque, 3)
        assert any(f.endswith("T 1") for f in list(board.frames)[-4:])
        robot.move({"head_yaw": 20}, 100, wait=True)
        assert robot.driver.sync(2.0) and board.pos[0] == 1100
    finally:
        robot.close()
        board.close()
    assert board.frames[-1].endswith("T 0") and not board.torque


def test_bolt_partial_reads_and_board_error_reply(tmp_path):
    board = BoltBoard(tmp_path / "tty", reset_on_open=False, chunk_delay_s=0.0005).plug()
    robot, msgs = build_robot(
        robot_config("bolt_serial", tmp_path / "tty", timeout_s=0.3), by_id_dir=tmp_path
    )
    try:
        assert robot.status()[0] == "online", msgs
        board.reject = {"M"}
        robot.command({"left_arm": 5})
        assert robot.driver.sync(2.0)
        assert "board rejected 'M'" in robot.driver.faults["M"] and robot.status()[0] == "online"
    finally:
        robot.close()
        board.close()


def test_garbage_device_is_reported_not_crashed(tmp_path):
    board = BoltBoard(tmp_path / "tty", garbage=True).plug()
    robot, msgs = build_robot(
        robot_config("bolt_serial", tmp_path / "tty", ready_timeout_s=0.5), by_id_dir=tmp_path
    )
    try:
        assert robot.status()[0] == "offline"
        assert "not in the bolt_servo protocol" in msgs[0] and "speech-only" in msgs[0]
        assert robot.command({"head_yaw": 5}) == {
            "head_yaw": 5
        }  # the safety layer still works; nothing is sent
    finally:
        robot.close()
        board.close()


@pytest.mark.parametrize("kind", ["bolt_serial", "maestro", "feetech"])
def test_missing_port_at_start_then_plugged_in(kind, tmp_path):
    link = tmp_path / "ttyX"
    robot, msgs = build_robot(robot_config(kind, link, connect_wait_s=0.5), by_id_dir=tmp_path / "by-id")
    try:
        assert robot.status()[0] == "offline"
        assert "not found" in msgs[0] and "speech-only" in msgs[0]
        dev = {
            "bolt_serial": lambda: BoltBoard(link),
            "maestro": lambda: Maestro(link),
            "feetech": lambda: FeetechBus(link, ids=(0, 1, 2, 3)),
        }[kind]().plug()
        assert wait_until(lambda: robot.status()[0] == "online", 5)
        robot.move({"left_arm": 20}, 100, wait=True)
        assert robot.driver.sync(2.0)
        dev.close()
    finally:
        robot.close()


@pytest.mark.parametrize("kind", ["bolt_serial", "maestro", "feetech"])
def test_unplug_and_replug_reconnects_by_id(kind, tmp_path):
    by_id = tmp_path / "by-id"
    tty0, tty1 = tmp_path / "ttyACM0", tmp_path / "ttyACM1"
    make = {
        "bolt_serial": BoltBoard,
        "maestro": Maestro,
        "feetech": lambda p: FeetechBus(p, ids=(0, 1, 2, 3)),
    }[kind]
    dev = make(tty0).plug()
    (by_id).mkdir()
    (by_id / "usb-Bolt_Servo_1234-if00").symlink_to(tty0)
    robot, msgs = build_robot(robot_config(kind, tty0), by_id_dir=by_id)
    try:
        assert robot.status()[0] == "online", msgs
        assert robot.driver.by_id_link == str(by_id / "usb-Bolt_Servo_1234-if00")
        dev.unplug()
        (by_id / "usb-Bolt_Servo_1234-if00").unlink()
        robot.driver.write({"head_yaw": 1.0})  # the driver notices at its next I/O
        assert wait_until(lambda: robot.status()[0] == "offline", 5)
        assert "lost" in robot.status()[1] or "not found" in robot.status()[1]
        n = robot.driver.connects
        time.sleep(0.3)  # a window in which nothing may happen: no reconnect attempt (backoff)
        assert robot.driver.connects == n  # backoff, no busy reconnect loop
        # Re-plugged: the kernel gives it another name; only the by-id link leads to it.
        dev2 = make(tty1).plug()
        (by_id / "usb-Bolt_Servo_1234-if00").symlink_to(tty1)
        assert wait_until(lambda: robot.status()[0] == "online", 5)
        robot.move({"left_arm": 10}, 100, wait=True)
        assert robot.driver.sync(2.0)
        settle(dev2)
        assert len(dev2.rx) > 0 and not tty0.exists()
        dev2.close()
    finally:
        robot.close()


def test_maestro_protocol_bytes_and_error_flags(tmp_path):
    m = Maestro(tmp_path / "tty").plug()
    robot, msgs = build_robot(robot_config("maestro", tmp_path / "tty", poll_hz=20), by_id_dir=tmp_path)
    try:
        assert robot.status()[0] == "online"
        settle(m)
        assert m.rx.startswith(b"\xaa\xa1")  # baud detect, then Get Errors
        assert m.speed[0] == 106  # 240 deg/s * 44.44 qus/deg / 100 = 106 (0.25 us / 10 ms)
        robot.move({"head_yaw": 45}, 300, wait=True)
        assert robot.driver.sync(2.0)
        settle(m)
        assert m.pos[0] == 8000  # 1500 us + 45 deg * 11.11 us/deg = 2000 us = 8000 qus
        m.errors = 1 << 4
        assert wait_until(lambda: "serial protocol error" in robot.driver.faults.get("errors", ""))
        assert robot.status()[0] == "online"
    finally:
        robot.close()
        m.close()


def test_feetech_overload_status_and_silent_servo(tmp_path):
    bus = FeetechBus(tmp_path / "tty", ids=(1, 2, 3, 4)).plug()
    bus.mute = {4}
    robot, msgs = build_robot(
        robot_config("feetech", tmp_path / "tty", ids=[1, 2, 3, 4], poll_hz=20), by_id_dir=tmp_path
    )
    try:
        assert robot.status()[0] == "online", msgs
        assert "servo 4 (joint right_arm) does not answer" in robot.driver.faults["4"]
        assert bus.torque(1) == 1 and bus.torque(4) == 0
        robot.move({"head_yaw": 90}, 300, wait=True)  # beyond the 60 degree limit: clamped
        assert robot.driver.sync(2.0)
        settle(bus)
        assert (
            bus.goals[-1][0] in (1, 2, 3, 4) and max(g for i, g in bus.goals if i == 1) == 2730
        )  # floor(2048 + 60 * 4096 / 360)
        bus.status_error[2] = 32
        assert wait_until(lambda: "overload" in robot.driver.faults.get("2", ""))
    finally:
        robot.close()
        bus.close()


def test_feetech_garbage_bus(tmp_path):
    bus = FeetechBus(tmp_path / "tty", garbage=True).plug()
    robot, msgs = build_robot(robot_config("feetech", tmp_path / "tty"), by_id_dir=tmp_path)
    try:
        assert robot.status()[0] == "offline" and ("garbled" in msgs[0] or "no Feetech servo" in msgs[0])
    finally:
        robot.close()
        bus.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a check as an unprivileged user")
def test_permission_denied_names_dialout(tmp_path):
    board = BoltBoard(tmp_path / "tty").plug()
    real = os.path.realpath(tmp_path / "tty")
    os.chmod(real, 0o600)
    tmp_path.chmod(0o755)
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        from hw_util import robot_config
        from hardware.factory import build_robot
        robot, msgs = build_robot(robot_config("bolt_serial", {str(tmp_path / "tty")!r}, connect_wait_s=1))
        print(msgs[0])
    """)
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            user=65534,
            env={**os.environ, "HOME": "/tmp"},
        )
    except PermissionError as e:
        pytest.skip(f"the interpreter cannot run as an unprivileged user here: {e}")
    finally:
        board.close()
    if "Permission denied" in out.stderr and "python" in out.stderr.lower():
        pytest.skip(f"the interpreter is not readable by an unprivileged user: {out.stderr[-200:]}")
    assert "permission denied" in out.stdout and "dialout" in out.stdout, out.stderr[-2000:]
