"""Shared base of the position-servo drivers (Maestro, Feetech): per-joint speed, neutral, acceleration."""

from __future__ import annotations

from typing import Any

from hardware.servos.serial_link import SerialDriver


class ServoBusDriver(SerialDriver):
    """A :class:`~hardware.servos.serial_link.SerialDriver` whose servos take a speed and acceleration.

    Args:
        name, port, channels, **kw: As :class:`hardware.servos.serial_link.SerialDriver`.
        speeds: Joint → top speed, deg/s.
        neutral: Joint → neutral position, degrees.
        acceleration: The device's own acceleration units (0 = its maximum / unlimited).
    """

    def __init__(
        self,
        name: str,
        port: str,
        channels: list,
        *,
        speeds: dict[str, float] | None = None,
        neutral: dict[str, float] | None = None,
        acceleration: int = 0,
        **kw: Any,
    ) -> None:
        super().__init__(name, port, channels, **kw)
        self.speeds = dict(speeds or {})
        self.neutral = dict(neutral or {})
        self.acceleration = acceleration
