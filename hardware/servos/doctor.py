"""``bolt-agent doctor``'s check of the serial drivers' ports (the file system only; nothing is opened)."""

from __future__ import annotations

import grp
import os
from pathlib import Path

from hardware.check import Check
from hardware.config import REACHY_MINI, RobotConfig


def check_serial(robot: RobotConfig, where: str = "the config") -> Check:
    """Serial ports of the robot's drivers: present, readable and writable, user in ``dialout``.

    Args:
        robot: ``[robot]``.
        where: The config file, for the fix (``"the config"`` for the default one).
    """
    ports = [(name, d.port) for name, d in robot.drivers.items() if d.kind != "sim" and d.port]
    if not ports:
        body = "a Reachy Mini, through its daemon" if robot.driver == REACHY_MINI else "simulated robot"
        return Check("serial", True, f"no serial drivers ({body})")
    problems, fix, seen = [], "", []
    for name, port in ports:
        path = Path(port) if "/" in port else Path("/dev/serial/by-id") / port
        if not path.exists():
            problems.append(f"{name}: {path} does not exist")
            fix = fix or f"ls -l /dev/serial/by-id/  # then set [robot.drivers.{name}] port in {where}"
        elif not os.access(path, os.R_OK | os.W_OK):
            problems.append(f"{name}: {path} not readable/writable by this user")
            fix = fix or "sudo usermod -aG dialout $USER  # then log out and in again"
        else:
            seen.append(f"{name}: {path}")
    groups = {grp.getgrgid(g).gr_name for g in os.getgroups()}
    if os.getuid() != 0 and "dialout" not in groups:
        problems.append("user not in group dialout")
        fix = fix or "sudo usermod -aG dialout $USER  # then log out and in again"
    if problems:  # the ports that are fine are listed too
        return Check("serial", False, "; ".join(problems + seen), fix)
    return Check("serial", True, "; ".join(seen))
