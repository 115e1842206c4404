"""Joint limits and the one safety rule every command passes through.

Units: degrees for positions, degrees per second for speeds, seconds for time steps.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Joint:
    """One actuated joint.

    Attributes:
        name: Joint name used in configs, animations and events.
        min_deg: Lowest allowed position, degrees.
        max_deg: Highest allowed position, degrees.
        neutral_deg: Rest position, degrees.
        max_speed_dps: Top speed, degrees per second.

    """

    name: str
    min_deg: float
    max_deg: float
    neutral_deg: float = 0.0
    max_speed_dps: float = 180.0

    def clamp(self, deg: float) -> float:
        """Clamp a target into ``[min_deg, max_deg]``; NaN and infinities become the neutral position."""
        if deg != deg or deg in (float("inf"), float("-inf")):
            return self.neutral_deg
        return min(self.max_deg, max(self.min_deg, float(deg)))

    def limit_step(self, current: float, target: float, dt_s: float) -> float:
        """Move from ``current`` toward ``target`` by at most ``max_speed_dps * dt_s`` degrees."""
        step = self.max_speed_dps * max(dt_s, 0.0)
        return current + max(-step, min(step, target - current))
