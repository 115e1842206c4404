"""``bolt-agent motion-bench``: the body's motion loop, measured on the configured robot.

Three figures, printed by the command (targets in an issue are checked on these, not in tests):

* **loop rate** — the motion loop is the only sender of targets; while a gesture plays (a
  dance on a Reachy Mini, the ``nod`` animation elsewhere) its sending ticks are timed
  (:meth:`hardware.robot.Robot.loop_stats`: rate, median/p99/max period);
* **command-to-motion latency** — a small head-yaw step goes through the safety layer and
  the driver; the time until the pose read back (a Reachy Mini: the daemon's 50 Hz state
  stream) has moved a third of the way (motion), and until it arrived (settling), per trial;
* **SIGTERM-to-parked** — ``bolt-agent chat`` runs on the config as a child process; once it
  is ready it gets SIGTERM, and the time until the robot reports its motors off is taken
  (a Reachy Mini: the daemon's ``/api/motors/status``), with the child's exit status. Pollen's
  MuJoCo simulator never reports its motors off (its torque-off does nothing), so there the
  child's own ``robot_parked`` message marks the end (``parked_by``).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hardware.robot import Robot


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(len(s) * q))], 1) if s else 0.0


def loop_rate(robot: Robot, gesture: Any) -> dict[str, float]:
    """Play ``gesture`` to its end and time the motion loop's sending ticks.

    Args:
        robot: A robot whose driver is online.
        gesture: A gesture (or the name of one of ``robot.animations``).

    Returns:
        :meth:`~hardware.robot.Robot.loop_stats` plus ``configured_hz`` and ``gesture_s``.
    """
    t0 = time.monotonic()
    g = robot.play(gesture, wait=True)
    out: dict[str, float] = dict(robot.loop_stats())
    out["configured_hz"] = robot.rate_hz
    out["gesture_s"] = round(time.monotonic() - t0, 2)
    out["gesture_ms"] = round(g.duration_ms, 1)
    return out


def _settle(robot: Robot, joint: str, timeout_s: float = 2.0) -> float:
    """Wait until the joint read back is still (under 0.05 degree in 50 ms); its value, degrees."""
    end = time.perf_counter() + timeout_s
    last = robot.driver.read()[joint]
    while time.perf_counter() < end:
        time.sleep(0.05)
        now = robot.driver.read()[joint]
        if abs(now - last) < 0.05:
            return now
        last = now
    return last


def command_latency(
    robot: Robot,
    joint: str = "head_yaw",
    step_deg: float = 3.0,
    trials: int = 20,
    onset_deg: float = 1.0,
    tol_deg: float = 0.5,
) -> dict[str, Any]:
    """Time single-step commands until the pose read back starts to move, and until it arrives.

    Each step starts from a still joint; the time runs from :meth:`~hardware.robot.Robot.command`
    (safety layer, driver, daemon) to the first read-back that moved ``onset_deg`` toward the
    target (the command-to-motion latency), and to the first within ``tol_deg`` of it (the
    physics' settling, long in MuJoCo).

    Args:
        robot: A robot whose driver is online and that is not playing a gesture.
        joint: The joint to step.
        step_deg: Step size, degrees (small enough for one rate-limited command).
        trials: Steps, alternating direction.
        onset_deg: Movement that counts as motion, degrees.
        tol_deg: The step counts as reached within this, degrees.

    Returns:
        ``{"trials", "p50_ms", "p95_ms", "max_ms", "reached_p50_ms", "reached_p95_ms", "missed"}``:
        the first three are the onset; ``missed`` counts steps not reached within 2 s.
    """
    onsets: list[float] = []
    reached: list[float] = []
    missed = 0
    for i in range(trials):
        base = _settle(robot, joint)
        t0 = time.perf_counter()
        sent = robot.command({joint: base + (step_deg if i % 2 == 0 else -step_deg)})
        goal = sent.get(joint, base)
        onset = None
        while time.perf_counter() - t0 < 2.0:
            x = robot.driver.read()[joint]
            if onset is None and abs(x - base) >= onset_deg:
                onset = (time.perf_counter() - t0) * 1000.0
                onsets.append(onset)
            if abs(x - goal) <= tol_deg:
                reached.append((time.perf_counter() - t0) * 1000.0)
                break
            time.sleep(0.0005)
        else:
            missed += 1
    return {
        "trials": trials,
        "p50_ms": round(statistics.median(onsets), 1) if onsets else 0.0,
        "p95_ms": _pct(onsets, 0.95),
        "max_ms": round(max(onsets), 1) if onsets else 0.0,
        "reached_p50_ms": round(statistics.median(reached), 1) if reached else 0.0,
        "reached_p95_ms": _pct(reached, 0.95),
        "missed": missed,
    }


def sigterm_to_parked(
    config: Path, motors_off: Callable[[], bool], timeout_s: float = 120.0, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Start ``bolt-agent chat`` on ``config``, SIGTERM it once ready, time until ``motors_off()``.

    Args:
        config: The robot config the child runs.
        motors_off: True once the robot reports its motors off (polled every 10 ms).
        timeout_s: Longest wait for the child to be ready, s.
        env: Extra environment for the child.

    Returns:
        ``{"parked_ms", "parked_by", "exit_ms", "exit_code"}``: ``parked_by`` is ``motors off``
        (the robot said so) or ``robot_parked`` (the child did, first); ``parked_ms`` is None
        when neither happened within 15 s.

    Raises:
        RuntimeError: the child ended or stayed silent before it was ready.
    """
    cmd = [sys.executable, "-m", "agent", "chat", "--json", "--config", str(config)]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        t_ready = time.monotonic() + timeout_s
        assert proc.stdout is not None
        for line in proc.stdout:
            if '"event": "ready"' in line or '"event":"ready"' in line:
                break
            if time.monotonic() > t_ready:
                raise RuntimeError(f"bolt-agent chat was not ready after {timeout_s:g} s")
        else:
            raise RuntimeError(f"bolt-agent chat ended before it was ready (exit {proc.wait()})")
        time.sleep(0.5)  # the robot is up and holding
        said: list[float] = []

        def watch() -> None:
            for line in proc.stdout or ():
                if '"robot_parked"' in line:
                    said.append(time.monotonic())

        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        threading.Thread(target=watch, daemon=True).start()
        parked, by = None, None
        while time.monotonic() - t0 < 15.0:
            if motors_off():
                parked, by = time.monotonic(), "motors off"
                break
            if said:
                parked, by = said[0], "robot_parked"
                break
            time.sleep(0.01)
        code = proc.wait(20)
        return {
            "parked_ms": round((parked - t0) * 1000.0, 1) if parked is not None else None,
            "parked_by": by,
            "exit_ms": round((time.monotonic() - t0) * 1000.0, 1),
            "exit_code": code,
        }
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def summary(figures: dict[str, Any]) -> str:
    """One line per figure, for people."""
    lines = []
    lr = figures.get("loop")
    if lr:
        lines.append(
            f"motion loop: {lr['rate_hz']:.1f} Hz (configured {lr['configured_hz']:g}), period "
            f"p50 {lr['period_p50_ms']:.1f} ms / p99 {lr['period_p99_ms']:.1f} ms / "
            f"max {lr['period_max_ms']:.1f} ms"
        )
    cl = figures.get("latency")
    if cl:
        lines.append(
            f"command to motion: p50 {cl['p50_ms']:.1f} ms / p95 {cl['p95_ms']:.1f} ms / "
            f"max {cl['max_ms']:.1f} ms over {cl['trials']} steps; arrived p50 {cl['reached_p50_ms']:.1f} ms "
            f"/ p95 {cl['reached_p95_ms']:.1f} ms ({cl['missed']} not within 2 s)"
        )
    sp = figures.get("park")
    if sp:
        parked = "never" if sp["parked_ms"] is None else f"{sp['parked_ms']:.0f} ms"
        lines.append(
            f"SIGTERM to parked: {parked} ({sp['parked_by']}; process exit {sp['exit_code']} "
            f"after {sp['exit_ms']:.0f} ms)"
        )
    return "\n".join(lines) or json.dumps(figures)
