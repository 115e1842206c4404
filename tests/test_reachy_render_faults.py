"""A renderer or camera that fails never takes the agent down (issue 48, item 1).

The crash: ``bolt-agent chat --config launch/reachy_mini_sim.toml`` aborted at start-up (exit
134) when ``MUJOCO_GL`` was unset: the collision check imported ``mujoco`` first and bound GLFW,
the simulated camera's renderer failed without a display, and its retry aborted the process
in MuJoCo's C++. The tests here run with ``MUJOCO_GL`` unset, as a user's shell has it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from reachy_daemon import netns_problem, run_in_netns

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(600)


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY")}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_the_collision_check_binds_an_offscreen_backend_before_anyone_renders():
    """Imported first by the collision check, with MUJOCO_GL unset: EGL, not GLFW."""
    code = (
        "import numpy as np\n"
        "from reachy_mini.kinematics import AnalyticalKinematics\n"
        "from hardware.reachy_mini.collision import SelfCollision\n"
        "from hardware.reachy_mini.mujoco_gl import gl_backend, offscreen_problem\n"
        "k = AnalyticalKinematics(automatic_body_yaw=False)\n"
        "SelfCollision(k.head_z_offset, k.ik(np.eye(4), body_yaw=0.0))\n"
        "import mujoco, os\n"
        "print(gl_backend(mujoco), os.environ.get('PYOPENGL_PLATFORM'), offscreen_problem(mujoco))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_clean_env(), timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["egl", "egl", "None"]


def test_glfw_without_a_display_is_a_reason_not_a_crash():
    """mujoco bound to GLFW with no display (imported before MUJOCO_GL was set): the camera says
    why and never creates a renderer (a second one would abort the process)."""
    code = (
        "import mujoco\n"  # before anyone set MUJOCO_GL: GLFW
        "from hardware.camera.base import CameraError\n"
        "from hardware.reachy_mini.sim_eye import _import_mujoco\n"
        "try:\n    _import_mujoco()\nexcept CameraError as e:\n    print('refused:', e)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_clean_env(), timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "refused:" in r.stdout and "GLFW" in r.stdout and "MUJOCO_GL=egl" in r.stdout


FAULTS = """
import json, os, signal, time
import reachy_daemon as rd
from hardware.config import CameraConfig, ReachyMiniConfig, RobotConfig, VisionConfig
from hardware.factory import build_robot
from hardware.perception.watcher import build_vision
from hardware.reachy_mini.camera import camera_sources

out = {"status": []}
assert "MUJOCO_GL" not in os.environ
with rd.daemon("mockup"):
    robot, _ = build_robot(RobotConfig(driver="reachy_mini"))  # imports mujoco first (collision check)
    robot.wait_idle(10)
    named = camera_sources(ReachyMiniConfig(host="127.0.0.1"))
    cfg = CameraConfig(source="reachy_mini_sim", width=320, height=180, backoff_initial_s=0.2, dead_s=1.0)
    vision, msgs = build_vision(cfg, VisionConfig(), wait_s=60.0, named=named,
                                on_status=lambda s, m: out["status"].append([s, m]))
    cam = vision.camera
    out["first"] = cam.latest() is not None
    out["opens_before"] = cam.opens

    # The renderer dies as a GL fault would kill it: the agent's process lives, the camera says
    # why and comes back with a new renderer process.
    import gc
    from hardware.reachy_mini.sim_render import RenderProcess
    readers = [o for o in gc.get_objects() if isinstance(o, RenderProcess) and o.proc.poll() is None]
    out["children"] = len(readers)
    os.kill(readers[0].pid, signal.SIGABRT)
    t0 = time.monotonic()
    while cam.opens < 2 and time.monotonic() - t0 < 60:
        time.sleep(0.1)
    out["reopened_s"] = time.monotonic() - t0
    t1 = time.monotonic()
    while cam.latest() is None and time.monotonic() - t1 < 60:
        time.sleep(0.1)
    out["frames_again"] = cam.latest() is not None
    out["opens_after"] = cam.opens

    # The body still moves meanwhile.
    robot.move({"head_yaw": 20.0}, 400, wait=True)
    time.sleep(0.3)
    out["yaw"] = rd.joints()["head_yaw"]
    vision.close()
    robot.close()
print(json.dumps(out))
"""


def test_a_renderer_that_dies_is_reported_and_reopened_while_the_body_moves():
    why = netns_problem()
    if why:
        pytest.skip(why)
    r = run_in_netns(FAULTS, timeout=400, unset=("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY"))
    print(r)
    assert r["first"] and r["opens_before"] == 1 and r["children"] == 1
    offline = [m for s, m in r["status"] if s == "offline"]
    assert any("renderer process ended (signal SIGABRT)" in m for m in offline), r["status"]
    assert r["opens_after"] >= 2 and r["frames_again"]
    assert abs(r["yaw"] - 20.0) < 1.0
