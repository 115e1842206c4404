"""``bolt-agent doctor``'s checks of a Reachy Mini body: daemon, release, motors, recorded emotions.

REST GETs only (:mod:`hardware.reachy_mini.daemon`): nothing moves and the motors are left as
they are. Every problem comes with the command or config edit that fixes it.
"""

from __future__ import annotations

import http.client
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hardware.check import Check
from hardware.config import REACHY_MINI, ReachyMiniConfig, RobotConfig
from hardware.reachy_mini.daemon import SDK_PACKAGE, daemon_get, motor_mode, same_release, sdk_version
from hardware.reachy_mini.moves import find_emotions

REPO = Path(__file__).resolve().parents[2]
"""The checkout (``launch/setup.sh`` is offered when it is there)."""


def check_reachy(
    robot: RobotConfig,
    where: str = "the config",
    pull_fix: str = "bolt-agent models pull",
    sdk: Callable[[], str | None] | None = None,
    timeout_s: float = 2.0,
) -> list[Check]:
    """A Reachy Mini body: its daemon, the SDK's release against the daemon's, its motors, its emotions.

    The daemon is asked over its REST API (``GET /api/daemon/status``, ``/api/motors/status``);
    nothing is moved and the motors are left as they are.

    Args:
        robot: ``[robot]``; nothing is checked unless ``driver = "reachy_mini"``.
        where: The config file, for the fixes (``"the config"`` for the default one).
        pull_fix: The ``models pull`` command that downloads the emotions into the cache ``run``
            reads (the service's, when it runs this config).
        sdk: Returns the installed SDK's version, None when it is missing (default:
            :func:`hardware.reachy_mini.daemon.sdk_version`).
        timeout_s: Longest wait for each answer of the daemon, s.

    Returns:
        ``reachy-daemon``, ``reachy-version``, ``reachy-motors`` (only when the daemon answers)
        and ``reachy-emotions``; empty for other bodies.
    """
    if robot.driver != REACHY_MINI:
        return []
    rm = robot.reachy_mini
    daemon, status = check_reachy_daemon(rm, where, timeout_s)
    checks = [daemon, check_reachy_version(status, (sdk or sdk_version)())]
    if status is not None:
        checks.append(check_reachy_motors(rm, timeout_s))
    return [*checks, check_reachy_emotions(rm, where, pull_fix)]


def check_reachy_daemon(
    rm: ReachyMiniConfig, where: str = "the config", timeout_s: float = 2.0
) -> tuple[Check, dict[str, Any] | None]:
    """The Reachy Mini's daemon answers at ``[robot.reachy_mini] host:port`` and is running.

    Without it the robot does not move (``run`` goes on speech-only), so a failure blocks, as a
    missing serial port does.

    Args:
        rm: ``[robot.reachy_mini]``.
        where: The config file, for the fix.
        timeout_s: Longest wait for the answer, s.

    Returns:
        ``(check, the daemon's status)``; the status is None when the daemon did not answer.
    """
    at = f"reachy-mini-daemon at {rm.host}:{rm.port}"
    try:
        status = daemon_get(rm.host, rm.port, "/api/daemon/status", timeout_s)
        if not isinstance(status, dict):
            raise ValueError(f"unexpected status {status!r}")
    except (OSError, ValueError, http.client.HTTPException) as e:  # HTTPException: not HTTP on that port
        if rm.host in ("localhost", "127.0.0.1", "::1"):  # a Lite, or the simulator, on this computer
            start = (
                "start reachy-mini-daemon on this computer: with the robot (a Lite: its USB cable "
                "goes here; installed by jetson/install.sh) sudo systemctl start reachy-mini-daemon; "
                "without it, the simulator: REACHY_MINI_TELEMETRY=0 DO_NOT_TRACK=1 "
                ".venv/bin/reachy-mini-daemon --sim --headless --no-media"
            )
        else:
            start = f"start reachy-mini-daemon on {rm.host} (a Wireless robot runs its own: power it on)"
        fix = f"{start}, or check [robot.reachy_mini] host and port in {where}"
        return Check(
            "reachy-daemon", False, f"{at} is not reachable ({getattr(e, 'reason', None) or e})", fix
        ), None
    version = f" ({status['version']})" if status.get("version") else ""
    runs = "robot"
    if status.get("mockup_sim_enabled"):
        runs = "mockup simulator"
    elif status.get("simulation_enabled"):
        runs = "MuJoCo simulator"
    state = str(status.get("state", "unknown"))
    detail = f"{at}{version}: {state}, {runs}"
    if state == "running":
        return Check("reachy-daemon", True, detail), status
    error = f": {status['error']}" if status.get("error") else ""
    return Check(
        "reachy-daemon", False, detail + error, f"restart reachy-mini-daemon on {rm.host} and read its log"
    ), status


def check_reachy_version(status: dict[str, Any] | None, sdk: str | None) -> Check:
    """Pollen's SDK is installed and the same release (major.minor) as the daemon.

    Pollen: "Install matching reachy_mini versions for the SDK and daemon". The driver refuses
    another major.minor release (blocking); another patch release connects (a warning). Without
    the SDK, ``run`` stops at start (blocking).

    Args:
        status: The daemon's status (:func:`check_reachy_daemon`), None when it did not answer.
        sdk: The installed SDK's version, None when it is not installed.
    """
    if sdk is None:
        setup = REPO / "launch" / "setup.sh"
        pip = "pip install 'bolt-agent[reachy]'"
        fix = f"BOLT_REACHY=1 bash {setup} run  # or: {pip}" if setup.is_file() else pip
        detail = f"Pollen's SDK ({SDK_PACKAGE}) is not installed: run cannot drive a Reachy Mini"
        return Check("reachy-version", False, detail, fix)
    daemon = str(status.get("version") or "") if status is not None else ""
    if not daemon:
        why = "did not say" if status is not None else "did not answer"
        return Check("reachy-version", True, f"SDK {sdk}; the daemon's version is unknown (it {why})")
    if daemon == sdk:
        return Check("reachy-version", True, f"SDK {sdk} and daemon {daemon}: the same release")
    pip = f"{sys.executable} -m pip install '{SDK_PACKAGE}=={daemon}'"
    if same_release(daemon, sdk):
        return Check(
            "reachy-version",
            False,
            f"SDK {sdk} and daemon {daemon} differ in their patch release: they connect, "
            "but matching versions are what Pollen supports",
            f"{pip}  # or update the daemon to {sdk}",
            blocking=False,
        )
    return Check(
        "reachy-version",
        False,
        f"SDK {sdk} and daemon {daemon} are different releases: the driver refuses to connect "
        "and the robot stays still",
        f"{pip}  # or update the robot's daemon to {sdk}",
    )


def check_reachy_motors(rm: ReachyMiniConfig, timeout_s: float = 2.0) -> Check:
    """The motor mode the daemon reports; anything but ``enabled`` is a warning.

    ``run`` turns the motors on when it connects (pinning the targets to the present pose
    first), so torque off is not a fault, only worth knowing before the head moves.

    Args:
        rm: ``[robot.reachy_mini]``.
        timeout_s: Longest wait for the answer, s.
    """
    try:
        mode = motor_mode(rm, timeout_s)
    except (OSError, ValueError, http.client.HTTPException) as e:
        fix = f"restart reachy-mini-daemon on {rm.host} and read its log"
        return Check("reachy-motors", False, f"cannot read the motor mode: {e}", fix, blocking=False)
    if mode == "enabled":
        return Check("reachy-motors", True, "motors enabled", blocking=False)
    return Check(
        "reachy-motors",
        False,
        f"motors {mode}: bolt-agent run turns them on when it connects",
        f"curl -X POST http://{rm.host}:{rm.port}/api/motors/set_mode/enabled  "
        "# only to try them now; run does it at start",
        blocking=False,
    )


def check_reachy_emotions(rm: ReachyMiniConfig, where: str = "the config", pull_fix: str = "") -> Check:
    """Pollen's recorded emotions are on disk: in the Hugging Face cache, or ``emotions_dir``.

    Without them the robot runs, with no emotions (a warning). Move files are counted, not
    parsed (``models pull`` and ``run`` report a file that does not load).

    Args:
        rm: ``[robot.reachy_mini]``.
        where: The config file, for the fix.
        pull_fix: The command that downloads them (``bolt-agent models pull ...``).
    """
    from huggingface_hub import constants

    edit = f"edit [robot.reachy_mini] emotions_dir in {where}"
    found = find_emotions(rm.emotions_repo, rm.emotions_dir)
    if found is None and rm.emotions_dir is not None:
        detail = (
            f"[robot.reachy_mini] emotions_dir {rm.emotions_dir} is not a folder: the robot has no emotions"
        )
        return Check("reachy-emotions", False, detail, edit, blocking=False)
    if found is None:
        detail = (
            f"the recorded emotions ({rm.emotions_repo}) are not downloaded "
            f"(cache {constants.HF_HUB_CACHE}): the robot has no emotions"
        )
        return Check("reachy-emotions", False, detail, pull_fix, blocking=False)
    moves = sorted(found.glob("*.json")) + sorted((found / "data").glob("*.json"))  # where Pollen keeps them
    if not moves:
        detail = f"no recorded moves (*.json, also under data/) in {found}: the robot has no emotions"
        fix = edit if rm.emotions_dir is not None else pull_fix
        return Check("reachy-emotions", False, detail, fix, blocking=False)
    return Check("reachy-emotions", True, f"{len(moves)} recorded moves in {found}", blocking=False)
