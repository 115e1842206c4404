"""The simulator's eye camera, rendered in this process with MuJoCo and posed from the daemon.

``[camera] source = "reachy_mini_sim"`` (:mod:`hardware.reachy_mini.camera`) renders the eye
camera of Pollen's MuJoCo model (the ``eye_camera`` of
``descriptions/reachy_mini/mjcf/scenes/minimal.xml`` in the ``reachy-mini`` package: a table
with a duck, a croissant and an apple) offline, with our own ``mujoco`` model instance, posed
each frame from the daemon's joint state
(``GET /api/state/full?with_head_joints=true&with_antenna_positions=true`` on the host and
port of ``[robot.reachy_mini]``). The daemon may run either simulator (``--sim`` or
``--mockup-sim``; its own ``--sim`` scene is the empty one by default, and it streams its camera
only through WebRTC) or drive the real robot. Rendering needs ``mujoco`` (bolt-agent's ``reachy``
extra) and an offscreen OpenGL: ``MUJOCO_GL=egl`` (set when unset, before ``mujoco`` is first
imported anywhere in the process: :mod:`hardware.reachy_mini.mujoco_gl`; Mesa's EGL renders on
the CPU). The agent opens it in a child process (:mod:`hardware.reachy_mini.sim_render`): a GL
fault ends that child, is reported, and the camera reopens with a new one. Measured on 2 x86-64
cores with Mesa llvmpipe (``docs/facts.md``): opening (model load, settling, renderer, first
frame) 1.6-2.3 s; one 640x360 frame 67-80 ms with shadows and reflections off (320-360 ms with
them on, so they are off), plus 1-15 ms to pose the head and a few ms for the state request.
Frames are BGR ``uint8`` ``(h, w, 3)``.

Posing: the head is a Stewart platform, a closed kinematic loop. The daemon reports the seven
actuated joints (body yaw, ``stewart_1..6``) and the two antennas; the passive joints follow
from the loop-closing equality constraints, which are solved here kinematically (Newton steps on
the constraint residual, continued in small steps from the previous pose so that the solution
stays on the platform's own assembly branch) instead of simulating physics. The loose objects
are settled on the table once, when the source opens, and stay put.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from hardware.camera.base import CameraError
from hardware.reachy_mini.daemon import daemon_get

log = logging.getLogger(__name__)

SIM_SCENE = "minimal"
"""Pollen's scene with objects (``scenes/minimal.xml``); the daemon's own default is ``empty``."""
SIM_CAMERA = "eye_camera"
SIM_SIZE = (640, 360)
"""Default render size, px (16:9 like the real camera and Pollen's 1280x720 sim stream)."""
SIM_FOVY_DEG = 80.0
"""Vertical field of view of the model's ``eye_camera``, deg (``fovy`` in ``reachy_mini.xml``)."""
STATE_PATH = "/api/state/full?with_head_joints=true&with_antenna_positions=true"
STATE_TIMEOUT_S = 1.0
"""One state request, s: shorter than ``[camera] dead_s`` (2 s) so a hung daemon is a dead feed."""
SETTLE_STEPS = 250
"""Physics steps (0.5 s at Pollen's 2 ms) that let the loose objects come to rest on the table."""
CONTINUATION_STEP_RAD = 0.05
"""Largest change of any actuated joint between two Newton solves of the head's closed loop, rad."""
NEWTON_ITERS = 10
RESIDUAL_OK = 1e-6
"""Loop-closing residual accepted as solved (metres for the connect constraints)."""


# --- the simulated eye camera -----------------------------------------------------------------


def _import_mujoco() -> Any:
    """Import ``mujoco`` for offscreen rendering (:func:`~hardware.reachy_mini.mujoco_gl.import_mujoco`).

    Raises:
        CameraError: ``mujoco`` is not installed, its GL backend failed to load, or it was
            bound to a backend that cannot render here (GLFW without a display).

    """
    from hardware.reachy_mini.mujoco_gl import MujocoUnavailable, import_mujoco, offscreen_problem

    try:
        mujoco = import_mujoco()
    except MujocoUnavailable as e:
        raise CameraError(f"the simulated Reachy Mini camera: {e}") from None
    problem = offscreen_problem(mujoco)
    if problem is not None:  # creating a renderer would fail, and a second try abort the process
        raise CameraError(f"the simulated Reachy Mini camera cannot render: {problem}")
    return mujoco


def sim_scene_path(scene: str = SIM_SCENE) -> Path:
    """Path of one of Pollen's MJCF scenes inside the installed ``reachy-mini`` package.

    Raises:
        CameraError: the package (or the scene) is not installed.

    """
    try:
        from importlib.resources import files

        import reachy_mini
    except ImportError:
        raise CameraError(
            "the simulated Reachy Mini camera needs Pollen's model: BOLT_REACHY=1 bash launch/setup.sh run"
        ) from None
    path = Path(str(files(reachy_mini).joinpath(f"descriptions/reachy_mini/mjcf/scenes/{scene}.xml")))
    if not path.is_file():
        raise CameraError(f"Pollen's MuJoCo scene {path} is missing (reinstall reachy-mini)")
    return path


def daemon_joints(host: str, port: int, timeout_s: float = STATE_TIMEOUT_S) -> np.ndarray:
    """The daemon's present joints as MuJoCo actuator positions: 9 floats, rad.

    Order of Pollen's model's actuators: ``yaw_body``, ``stewart_1..6``, ``right_antenna``,
    ``left_antenna``. The daemon's ``head_joints`` are the first seven as they are; its
    ``antennas_position`` (``[right, left]``) are the model's antenna joints negated (Pollen's
    MuJoCo backend: ``ctrl[-2:] = -antennas``, reported as ``-qpos``).

    Raises:
        CameraError: the daemon is unreachable or its state has no joints.

    """
    try:
        state = daemon_get(host, port, STATE_PATH, timeout_s)
    except (OSError, ValueError) as e:
        raise CameraError(
            f"the Reachy Mini daemon at {host}:{port} is not reachable for the simulated camera's "
            f"head pose ({e}); start reachy-mini-daemon --sim (or --mockup-sim)"
        ) from None
    head = state.get("head_joints") if isinstance(state, dict) else None
    antennas = state.get("antennas_position") if isinstance(state, dict) else None
    if not head or len(head) != 7 or not antennas or len(antennas) != 2:
        raise CameraError(f"the Reachy Mini daemon at {host}:{port} reports no head joints yet")
    joints = np.array([*head, -antennas[0], -antennas[1]], dtype=float)
    if not np.isfinite(joints).all():
        raise CameraError(f"the Reachy Mini daemon at {host}:{port} reports non-finite joints {joints}")
    return joints


class SimEyeCamera:
    """Renders the eye camera of Pollen's MuJoCo model, posed from the daemon (a ``FrameReader``).

    Opening checks the daemon first (cheap, so an offline daemon fails fast under the camera's
    backoff), then loads the model, settles the objects, creates the renderer and renders the
    first frame, which the first :meth:`read` returns.

    Args:
        host: The daemon's host.
        port: The daemon's REST port.
        width: Frame width, px.
        height: Frame height, px.
        scene: Pollen's scene name (``minimal``: with objects; ``empty``).

    Raises:
        CameraError: the daemon is unreachable, ``mujoco`` or Pollen's model is missing, or
            offscreen OpenGL (EGL) cannot render; the message says which.

    """

    def __init__(
        self,
        host: str,
        port: int,
        width: int = SIM_SIZE[0],
        height: int = SIM_SIZE[1],
        scene: str = SIM_SCENE,
    ) -> None:
        self.host, self.port = host, port
        self.problem = ""
        self.renderer: Any = None
        joints = daemon_joints(host, port)
        self.mj = mj = _import_mujoco()
        m = mj.MjModel.from_xml_path(str(sim_scene_path(scene)))
        m.vis.global_.offwidth = max(int(m.vis.global_.offwidth), width)
        m.vis.global_.offheight = max(int(m.vis.global_.offheight), height)
        m.opt.jacobian = mj.mjtJacobian.mjJAC_DENSE  # efc_J as a dense (nefc, nv) array
        self.model, self.data = m, mj.MjData(m)
        self.camera_id = mj.mj_name2id(m, mj.mjtObj.mjOBJ_CAMERA, SIM_CAMERA)
        if self.camera_id < 0 or m.nu != 9:
            raise CameraError(f"Pollen's scene {scene} lacks {SIM_CAMERA} or the 9 Reachy Mini actuators")
        act_joints = [int(m.actuator_trnid[i, 0]) for i in range(m.nu)]
        self.act_qpos = np.array([m.jnt_qposadr[j] for j in act_joints])
        act_dofs = {int(m.jnt_dofadr[j]) for j in act_joints}
        free = [j for j in range(m.njnt) if m.jnt_type[j] == mj.mjtJoint.mjJNT_FREE]
        free_dofs = {int(m.jnt_dofadr[j]) + k for j in free for k in range(6)}
        self.passive_dofs = np.array([i for i in range(m.nv) if i not in act_dofs and i not in free_dofs])
        self._settle_objects([int(m.jnt_qposadr[j]) + k for j in free for k in range(7)])
        self.hfov_deg = hfov_deg(width, height, float(m.cam_fovy[self.camera_id]))
        try:
            self.renderer = mj.Renderer(m, height=height, width=width)
            # Shadows and reflections cost ~4x the render time on a CPU (0.26 s vs 65 ms a frame).
            self.renderer.scene.flags[mj.mjtRndFlag.mjRND_SHADOW] = 0
            self.renderer.scene.flags[mj.mjtRndFlag.mjRND_REFLECTION] = 0
        except Exception as e:  # noqa: BLE001 - EGL/GL failures come as many exception types
            self.release()
            raise CameraError(
                f"cannot render offscreen with MUJOCO_GL={os.environ.get('MUJOCO_GL')} "
                f"({type(e).__name__}: {e}); install Mesa's EGL (apt-get install libegl1 "
                "libgl1-mesa-dri) or set MUJOCO_GL=osmesa"
            ) from None
        self._first: np.ndarray | None = self._render(joints)

    def _settle_objects(self, free_qpos: list[int]) -> None:
        """Let the loose objects fall onto the table with the robot out of the way, then keep them.

        The robot's geoms are unnamed in Pollen's model; the scene's are named (Pollen's MuJoCo
        backend turns collisions off for unnamed geoms the same way while it starts).
        """
        mj, m, d = self.mj, self.model, self.data
        for g in range(m.ngeom):
            if m.geom_contype[g] and mj.mj_id2name(m, mj.mjtObj.mjOBJ_GEOM, g) is None:
                m.geom_contype[g] = 0
                m.geom_conaffinity[g] = 0
        for _ in range(SETTLE_STEPS):
            mj.mj_step(m, d)
        objects = d.qpos[free_qpos].copy()
        mj.mj_resetData(m, d)  # the robot back in its assembled reference pose (all joints 0)
        d.qpos[free_qpos] = objects
        mj.mj_forward(m, d)

    def _close_loop(self, target: np.ndarray) -> float:
        """Set the actuated joints to ``target`` (rad) and solve the passive ones; returns the residual."""
        mj, m, d = self.mj, self.model, self.data
        start = d.qpos[self.act_qpos].copy()
        steps = max(1, math.ceil(float(np.abs(target - start).max()) / CONTINUATION_STEP_RAD))
        residual = 0.0
        for s in range(1, steps + 1):
            d.qpos[self.act_qpos] = start + (target - start) * (s / steps)
            for _ in range(NEWTON_ITERS):
                mj.mj_forward(m, d)
                rows = d.efc_type[: d.nefc] == mj.mjtConstraint.mjCNSTR_EQUALITY
                r = d.efc_pos[: d.nefc][rows]
                residual = float(np.abs(r).max()) if r.size else 0.0
                if residual < RESIDUAL_OK * 1e-3:
                    break
                jac = d.efc_J[: d.nefc * m.nv].reshape(d.nefc, m.nv)[rows][:, self.passive_dofs]
                dq = np.zeros(m.nv)
                dq[self.passive_dofs] = -np.linalg.lstsq(jac, r, rcond=None)[0]
                mj.mj_integratePos(m, d.qpos, dq, 1.0)
        mj.mj_forward(m, d)
        return residual

    def pose(self, joints: np.ndarray) -> float:
        """Pose the model: 9 actuator positions, rad (see :func:`daemon_joints`); returns the residual, m.

        Continues from the previous pose; should that fail to close the loop, it starts again
        from the assembled reference pose. A pose that still does not close is rendered anyway
        (approximate) and logged.
        """
        residual = self._close_loop(joints)
        if residual > RESIDUAL_OK:
            self.data.qpos[self.act_qpos] = 0.0
            self._close_loop(np.zeros(len(joints)))
            residual = self._close_loop(joints)
            if residual > RESIDUAL_OK:
                log.warning("simulated camera: head pose not solved (residual %.2g m)", residual)
        return residual

    def _render(self, joints: np.ndarray) -> np.ndarray:
        self.pose(joints)
        self.renderer.update_scene(self.data, self.camera_id)
        return cv2.cvtColor(self.renderer.render(), cv2.COLOR_RGB2BGR)

    def read(self) -> tuple[bool, np.ndarray | None]:
        """The eye camera's view at the daemon's present pose: ``(ok, BGR uint8 (h, w, 3))``.

        A daemon that stops answering gives ``(False, None)`` (the reason in :attr:`problem`),
        so the capture thread's dead-feed rule reopens the source, and reopening reports it.
        """
        if self._first is not None:
            frame, self._first = self._first, None
            return True, frame
        if self.renderer is None:
            return False, None
        try:
            frame = self._render(daemon_joints(self.host, self.port))
        except CameraError as e:
            self.problem = str(e)
            return False, None
        except Exception as e:  # noqa: BLE001 - a GL failure must not end the capture thread
            self.problem = f"rendering failed: {type(e).__name__}: {e}"
            log.warning("simulated camera: %s", self.problem)
            return False, None
        self.problem = ""
        return True, frame

    def release(self) -> None:
        """Free the renderer's OpenGL context (call from the thread that opened it)."""
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None


def hfov_deg(width: int, height: int, fovy_deg: float = SIM_FOVY_DEG) -> float:
    """Horizontal field of view, deg, of a pinhole camera with vertical ``fovy_deg`` at ``width x height`` px.

    MuJoCo keeps a camera's vertical field of view and widens or narrows the horizontal one
    with the image's aspect: 112.3 deg at 640x360 (16:9), 96.4 deg at 640x480.
    """
    return math.degrees(2 * math.atan(math.tan(math.radians(fovy_deg) / 2) * width / height))
