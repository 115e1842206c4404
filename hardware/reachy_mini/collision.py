"""Will a Reachy Mini's head hit its body? A clearance check on Pollen's own collision hulls.

The SDK's analytical inverse kinematics (and the motor ranges) accept many head poses that
the robot cannot reach: with the head low and tilted, the head meets the body shell. In
Pollen's MuJoCo model 65 % of random poses inside our joint limits that pass the IK and the
motor ranges stop short in the simulator (measured here, 300 poses), all of them on one
contact: the head (body ``xl_330``) against the body shell (``body_down_3dprint``, 7 convex
hulls). The daemon would only hold the motors short of their targets.

:class:`SelfCollision` places the head's collision hull where a head pose puts it and asks
MuJoCo for its distance to the shell's hulls (``mj_geomDistance``, about 0.1 ms a check).
The head hull's pose at the neutral head pose is taken once from the model (MuJoCo settles
the closed Stewart chain at the neutral motor angles); then only the eight hulls are kept, in
a model of their own (the full model holds about 135 MB once loaded; the hulls, 50-70
vertices each, next to nothing: measured here, the agent's resident memory grows by about
20 MB, 14 MB of it MuJoCo's import). A head pose ``T`` (the SDK's 4x4, in
the frame whose origin is ``head_z_offset`` above the base) moves it rigidly by
``Tz·T·Tz⁻¹`` (checked against the simulator: within 0.3 mm and 0.4°); the shell turns with
the body yaw about the base's vertical axis.

The hulls are coarser than the shell: Pollen's own sleep pose sits 5.9 mm inside them and
three of the 20 dances dip up to 6.4 mm. A pose is clear when the head is no more than
:data:`TOLERANCE_MM` inside; on the 300 sampled poses that threshold missed 5 contacts (each
stopping the motors 2-3° short) and refused 3 poses the simulator reached.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

HEAD_BODY = "xl_330"
SHELL_BODY = "body_down_3dprint"
MODEL = "descriptions/reachy_mini/mjcf/reachy_mini.xml"
TOLERANCE_MM = 4.0
"""Depth of the head's hull inside the shell's hulls still counted as clear, mm."""
SETTLE_STEPS = 1500
"""Simulation steps (2 ms each) for the chain to settle at the neutral motor angles."""


class SelfCollisionUnavailable(RuntimeError):
    """MuJoCo or Pollen's model is missing; the message says what to install."""


class SelfCollision:
    """Clearance between a Reachy Mini's head and its body for a commanded pose.

    Args:
        head_z_offset: Height of the head frame's origin above the base, m (the SDK's
            kinematics data, ``AnalyticalKinematics.head_z_offset``).
        neutral_motors: Motor angles of the neutral head pose, rad, shape (7,): body yaw
            first, then the six Stewart motors (the SDK's ``ik`` of the identity pose).

    Raises:
        SelfCollisionUnavailable: MuJoCo is not installed or the model cannot be read.
    """

    def __init__(self, head_z_offset: float, neutral_motors: np.ndarray) -> None:
        from importlib.resources import files

        from hardware.reachy_mini.mujoco_gl import MujocoUnavailable, import_mujoco

        try:
            mujoco = import_mujoco()  # the process's GL backend is bound here: offscreen, not GLFW
        except MujocoUnavailable as e:
            raise SelfCollisionUnavailable(f"the self-collision check needs MuJoCo: {e}") from None
        try:
            path = files("reachy_mini").joinpath(MODEL)
            self._m = mujoco.MjModel.from_xml_path(str(path))
        except (ModuleNotFoundError, ValueError, OSError) as e:
            raise SelfCollisionUnavailable(f"cannot load Pollen's model {MODEL}: {e}") from None
        self._mj = mujoco
        m = self._m
        self._d = mujoco.MjData(m)
        head = m.body(HEAD_BODY).id
        shell = m.body(SHELL_BODY).id
        colliding = [g for g in range(m.ngeom) if m.geom_contype[g] or m.geom_conaffinity[g]]
        self._head = [g for g in colliding if m.geom_bodyid[g] == head]
        self._shell = [g for g in colliding if m.geom_bodyid[g] == shell]
        if not self._head or not self._shell:
            raise SelfCollisionUnavailable(f"{MODEL} has no collision hulls for {HEAD_BODY} or {SHELL_BODY}")
        d = self._d
        d.ctrl[: len(neutral_motors)] = neutral_motors
        for _ in range(SETTLE_STEPS):
            mujoco.mj_step(m, d)
        mujoco.mj_forward(m, d)
        poses = {g: _pose(d, g) for g in self._head + self._shell}
        # Keep only the hulls: a model of eight meshes, in the same geom frames (vertices as compiled).
        hulls = {
            g: m.mesh_vert[m.mesh_vertadr[m.geom_dataid[g]] :][: m.mesh_vertnum[m.geom_dataid[g]]]
            for g in poses
        }
        self._m = m = mujoco.MjModel.from_xml_string(_hull_model(hulls))
        self._d = d = mujoco.MjData(m)
        order = list(poses)
        self._head0 = {order.index(g): poses[g] for g in self._head}
        self._shell0 = {order.index(g): poses[g] for g in self._shell}
        self._head, self._shell = list(self._head0), list(self._shell0)
        _return_freed_memory()
        self._tz = np.eye(4)
        self._tz[2, 3] = head_z_offset
        self._tz_inv = np.linalg.inv(self._tz)
        self._fromto = np.zeros(6)

    def clearance_mm(self, head: np.ndarray, body_yaw: float) -> float:
        """Smallest distance from the head's hull to the body shell's hulls, mm (< 0: inside).

        Args:
            head: The SDK's head pose, 4x4, metres.
            body_yaw: Body yaw, rad.
        """
        d, mj = self._d, self._mj
        move = self._tz @ head @ self._tz_inv
        for g, g0 in self._head0.items():
            _place(d, g, move @ g0)
        turn = np.eye(4)
        c, s = math.cos(body_yaw), math.sin(body_yaw)
        turn[:2, :2] = [[c, -s], [s, c]]
        for g, g0 in self._shell0.items():
            _place(d, g, turn @ g0)
        dist = min(
            mj.mj_geomDistance(self._m, d, h, b, 0.05, self._fromto) for h in self._head for b in self._shell
        )
        return dist * 1000.0

    def clear(self, head: np.ndarray, body_yaw: float) -> bool:
        """Whether the pose keeps the head out of the body (within :data:`TOLERANCE_MM`)."""
        return self.clearance_mm(head, body_yaw) >= -TOLERANCE_MM


def _return_freed_memory() -> None:
    """Hand the full model's freed heap back to the OS (glibc keeps it otherwise: 246 → 111 MB RSS here)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError, TypeError):  # not glibc (musl, macOS): nothing to trim
        pass


def _hull_model(hulls: dict[int, np.ndarray]) -> str:
    """MJCF of one static mesh geom per hull (vertices in the geom's frame), in the given order."""
    meshes = "".join(
        f'<mesh name="m{i}" vertex="{" ".join(f"{v:.9g}" for v in verts.ravel())}"/>'
        for i, verts in enumerate(hulls.values())
    )
    geoms = "".join(f'<geom name="g{i}" type="mesh" mesh="m{i}"/>' for i in range(len(hulls)))
    return f"<mujoco><asset>{meshes}</asset><worldbody>{geoms}</worldbody></mujoco>"


def _pose(d: Any, g: int) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = d.geom_xmat[g].reshape(3, 3)
    t[:3, 3] = d.geom_xpos[g]
    return t


def _place(d: Any, g: int, t: np.ndarray) -> None:
    d.geom_xpos[g] = t[:3, 3]
    d.geom_xmat[g] = t[:3, :3].ravel()
