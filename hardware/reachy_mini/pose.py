"""A Reachy Mini's pose as our joints, and back (pure numpy; no SDK needed).

The SDK describes the head as a 4x4 homogeneous matrix in metres (``create_head_pose``:
rotation from extrinsic ``"xyz"`` Euler angles roll, pitch, yaw — scipy's convention), the
antennas as ``[right, left]`` in radians and the body yaw in radians. Our safety layer works
in joints (:data:`hardware.config.REACHY_JOINTS`):

* ``head_roll``: the SDK's roll, degrees;
* ``head_pitch``: minus the SDK's pitch, degrees (+ = look up, like every other robot here;
  the SDK's + pitch is nose down);
* ``head_yaw``: the SDK's yaw, degrees (+ = look left), in the world frame (the body turns
  under it);
* ``head_x/y/z``: the head's position, millimetres;
* ``body_yaw``, ``right_antenna``, ``left_antenna``: degrees.

Source: ``reachy_mini/utils/__init__.py`` (``create_head_pose``) and
``reachy_mini/reachy_mini.py`` (``set_target``) of reachy-mini 1.8.4 to 1.13.0.
"""

from __future__ import annotations

import math

import numpy as np

HEAD_ROTATION = ("head_roll", "head_pitch", "head_yaw")
HEAD_POSITION = ("head_x", "head_y", "head_z")


def rotation_xyz(roll_deg: float, pitch_deg: float, yaw_deg: float) -> np.ndarray:
    """Rotation matrix of extrinsic x-y-z Euler angles (``Rz(yaw) @ Ry(pitch) @ Rx(roll)``), shape (3, 3)."""
    r, p, y = (math.radians(a) for a in (roll_deg, pitch_deg, yaw_deg))
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def euler_xyz(rotation: np.ndarray) -> tuple[float, float, float]:
    """Extrinsic x-y-z Euler angles (roll, pitch, yaw) of a rotation matrix, degrees.

    The inverse of :func:`rotation_xyz` for pitch within ±90 degrees (a head never gets near).
    """
    m = np.asarray(rotation, dtype=float)
    pitch = math.asin(max(-1.0, min(1.0, -m[2, 0])))
    roll = math.atan2(m[2, 1], m[2, 2])
    yaw = math.atan2(m[1, 0], m[0, 0])
    return math.degrees(roll), math.degrees(pitch), math.degrees(yaw)


def to_sdk(joints: dict[str, float]) -> tuple[np.ndarray, list[float], float]:
    """Our joints → what ``ReachyMini.set_target`` takes.

    Args:
        joints: Every joint of :data:`hardware.config.REACHY_JOINTS` (degrees, head x/y/z in mm);
            a missing one counts as 0.

    Returns:
        ``(head 4x4 in metres, [right, left] antennas in rad, body yaw in rad)``.
    """
    g = joints.get
    pose = np.eye(4)
    pose[:3, :3] = rotation_xyz(g("head_roll", 0.0), -g("head_pitch", 0.0), g("head_yaw", 0.0))
    pose[:3, 3] = [g("head_x", 0.0) / 1000.0, g("head_y", 0.0) / 1000.0, g("head_z", 0.0) / 1000.0]
    antennas = [math.radians(g("right_antenna", 0.0)), math.radians(g("left_antenna", 0.0))]
    return pose, antennas, math.radians(g("body_yaw", 0.0))


def from_sdk(
    head: np.ndarray | None, antennas: list[float] | np.ndarray | None = None, body_yaw: float | None = None
) -> dict[str, float]:
    """What the SDK gives (a move's frame, the daemon's state) → our joints.

    Args:
        head: 4x4 head pose, metres (or a flat row-major list of 16), or None.
        antennas: ``[right, left]`` in rad, or None.
        body_yaw: rad, or None.

    Returns:
        The joints given (degrees; head x/y/z in mm); parts that were None are left out.
    """
    out: dict[str, float] = {}
    if head is not None:
        m = np.asarray(head, dtype=float).reshape(4, 4)
        roll, pitch, yaw = euler_xyz(m[:3, :3])
        out.update(head_roll=roll, head_pitch=-pitch, head_yaw=yaw)
        out.update(head_x=m[0, 3] * 1000.0, head_y=m[1, 3] * 1000.0, head_z=m[2, 3] * 1000.0)
    if antennas is not None:
        out["right_antenna"] = math.degrees(float(antennas[0]))
        out["left_antenna"] = math.degrees(float(antennas[1]))
    if body_yaw is not None:
        out["body_yaw"] = math.degrees(float(body_yaw))
    return out
