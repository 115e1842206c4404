"""Direction of arrival: where a voice comes from, as a microphone array reports it.

A :class:`DoaSource` is polled (``read``) by the agent's attention (``agent/pipeline/attention.py``):
it returns the newest :class:`DoaReading` or None when the array has nothing (no array, the
daemon runs with ``--no-media``, no reading yet). Angles follow Pollen's Reachy Mini (the XVF3800
array, ``media.get_DoA()`` and the daemon's ``GET /api/state/doa``): radians, 0 = left, π/2 =
front, π = right; the array cannot tell front from back. :func:`yaw_deg` turns that into the
robot's yaw (degrees, + = left, 0 = straight ahead). Sources: the daemon's REST reading
(:class:`hardware.reachy_mini.doa.DaemonDoa`), the SDK's media object where the agent owns the
media (:class:`hardware.reachy_mini.doa.SdkDoa`), a test's stand-in at this boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class DoaReading:
    """One reading: the angle (rad, 0 = left, π/2 = front, π = right) and the array's speech flag."""

    angle_rad: float
    speech: bool

    @property
    def yaw_deg(self) -> float:
        """The robot's yaw toward the voice, degrees (+ = left)."""
        return yaw_deg(self.angle_rad)


class DoaSource(Protocol):
    """A microphone array's direction of arrival, polled."""

    def read(self) -> DoaReading | None:
        """The newest reading, or None when there is none (no array, no reading yet, unreachable)."""
        ...


def yaw_deg(angle_rad: float) -> float:
    """Pollen's DoA angle (rad; 0 = left, π/2 = front, π = right) → yaw, degrees (+ = left), in [-90, 90]."""
    return max(-90.0, min(90.0, 90.0 - math.degrees(angle_rad)))
