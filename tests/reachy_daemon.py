"""Pollen's ``reachy-mini-daemon`` in the tests: always inside a private network namespace.

The daemon announces itself by mDNS (multicast on every interface) and would send telemetry,
so a test never starts it in the host's namespace. :func:`run_in_netns` runs a Python script
under ``unshare -n`` (a new network namespace with only a loopback interface, brought up
first); the script starts the daemon with :func:`daemon` (telemetry off, datasets not
preloaded, Hugging Face offline), talks to it on ``127.0.0.1:8000`` from the same namespace,
stops it by its PID and prints one JSON line of results for the test to check.

``unshare -n`` needs root or user namespaces; :func:`netns_problem` says why it cannot run,
and the tests skip with that reason (the only reason they skip).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
PORT = 8000
DAEMON_ENV = {
    "REACHY_MINI_TELEMETRY": "0",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "MUJOCO_GL": "egl",
}
_NETNS = ["unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def netns_problem() -> str | None:
    """Why a private network namespace cannot be made here, or None when it can."""
    try:
        r = subprocess.run([*_NETNS, "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare -n is not available: {e}"
    if r.returncode != 0:
        why = r.stderr.strip() or f"exit {r.returncode}"
        return f"unshare -n is not permitted here ({why}); the daemon must not run in the host's network"
    return None


def run_in_netns(
    script: str, timeout: float = 180.0, env: dict[str, str] | None = None, unset: tuple[str, ...] = ()
) -> dict:
    """Run a Python script inside a new network namespace; return the JSON of its last stdout line.

    The script can ``import reachy_daemon`` (this module) and the project's packages. ``env`` adds
    variables; ``unset`` removes some (``MUJOCO_GL``: as a user's shell has it).

    Raises:
        AssertionError: the script failed or printed no JSON (its output is in the message).
    """
    code = textwrap.dedent(script)
    full_env = {**os.environ, **DAEMON_ENV, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), full_env.get("PYTHONPATH", "")])
    for name in unset:
        full_env.pop(name, None)
    r = subprocess.run(
        [*_NETNS, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=full_env,
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert r.returncode == 0 and lines, (
        f"namespace script failed (exit {r.returncode})\n"
        f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-6000:]}"
    )
    return json.loads(lines[-1])


def daemon_command(mode: str = "mockup", port: int = PORT) -> list[str]:
    """The daemon's command line: ``mockup`` (no physics) or ``sim`` (MuJoCo), headless, no media."""
    exe = str(Path(sys.executable).with_name("reachy-mini-daemon"))
    return [
        exe,
        "--mockup-sim" if mode == "mockup" else "--sim",
        "--headless",
        "--no-media",
        "--no-wake-up-on-start",
        "--no-goto-sleep-on-stop",
        "--no-preload-datasets",
        "--dataset-update-interval",
        "0",
        "--fastapi-host",
        "127.0.0.1",
        "--fastapi-port",
        str(port),
        "--log-level",
        "WARNING",
    ]


def wait_ready(port: int = PORT, timeout: float = 60.0) -> float:
    """Wait until the daemon answers ``/api/daemon/status``; returns the seconds it took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/daemon/status", timeout=1) as r:
                state = json.loads(r.read()).get("state")
            if state == "running":
                return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"reachy-mini-daemon not ready on port {port} after {timeout:g} s")


def get(path: str, port: int = PORT) -> dict:
    """GET one of the daemon's REST endpoints (JSON)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        return json.loads(r.read())


def start(mode: str = "mockup", port: int = PORT, log: str | None = None) -> subprocess.Popen:
    """Start the daemon (inside the namespace the caller runs in) and wait until it is ready."""
    out = open(log, "ab") if log else subprocess.DEVNULL  # handed to the child
    proc = subprocess.Popen(daemon_command(mode, port), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_ready(port)
    except BaseException:
        stop(proc)
        raise
    return proc


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stop the daemon by its PID (SIGKILL after 10 s)."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def daemon(mode: str = "mockup", port: int = PORT, log: str | None = None) -> Iterator[subprocess.Popen]:
    """The daemon for the length of a ``with`` block (started in the caller's namespace)."""
    proc = start(mode, port, log)
    try:
        yield proc
    finally:
        stop(proc)


def joints(port: int = PORT) -> dict[str, float]:
    """The daemon's present pose as our joints (degrees; head x/y/z in mm), from ``/api/state/full``.

    The daemon reports the head as x/y/z (m) and extrinsic xyz roll/pitch/yaw (rad, + pitch =
    nose down); ours is + = up (see ``hardware/reachy_mini/pose.py``).
    """
    import math

    s = get("/api/state/full?with_head_pose=true&with_body_yaw=true&with_antenna_positions=true", port)
    h = s["head_pose"]
    right, left = s["antennas_position"]
    return {
        "head_roll": math.degrees(h["roll"]),
        "head_pitch": -math.degrees(h["pitch"]),
        "head_yaw": math.degrees(h["yaw"]),
        "head_x": h["x"] * 1000.0,
        "head_y": h["y"] * 1000.0,
        "head_z": h["z"] * 1000.0,
        "body_yaw": math.degrees(s["body_yaw"] or 0.0),
        "right_antenna": math.degrees(right),
        "left_antenna": math.degrees(left),
    }


def sample(seconds: float, every: float = 0.05, port: int = PORT) -> list[dict[str, float]]:
    """The daemon's pose (:func:`joints`) every ``every`` s for ``seconds`` s."""
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out.append(joints(port))
        time.sleep(every)
    return out


def motors(port: int = PORT) -> str:
    """The daemon's motor mode: ``enabled``, ``disabled`` or ``gravity_compensation``."""
    return str(get("/api/motors/status", port)["mode"])
