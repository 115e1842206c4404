"""The actuator driver interface, degree↔device-unit conversion, and the joint router.

Every driver — simulated, bolt_servo board, Pololu Maestro, Feetech bus — offers the same
small interface (:class:`Driver`): ``write`` joint targets in degrees (optionally over a
duration, ms), ``read`` positions in degrees, ``set_torque``, ``estop``, ``sync`` (wait until
queued commands reached the device), ``close``, and a ``state``/``message`` pair that says
whether the hardware is there. Drivers receive only targets that already passed the robot's
safety layer (:meth:`hardware.robot.Robot.command`); :class:`Channel` clamps once more into the
device range of the joint's limits, so even a driver bug cannot exceed them.

Degrees ↔ device units happen in one place: :meth:`Channel.to_device` and
:meth:`Channel.to_degrees` (``units = centre + direction × per_deg × degrees``). Each protocol
module gives its own centre and scale (and cites where the numbers come from).

:class:`JointRouter` lets one robot use several drivers (e.g. arms on a Maestro, the head on
a Feetech bus): it splits targets by joint and merges states.

A driver kind tells the factory everything it needs in one :class:`DriverSpec` (how to build
one driver from a :class:`DriverRequest`, whether it wakes the body, its animation libraries);
:mod:`hardware.registry` maps config names to specs, so the factory has no vendor branches.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from hardware.config import JointConfig, RobotConfig

if TYPE_CHECKING:
    from hardware.animation import Gesture
    from hardware.doa import DoaSource

DriverState = Literal["connecting", "online", "offline", "closed"]
StatusCallback = Callable[[str, "DriverState", str], None]
"""Called as ``on_status(driver_name, state, message)`` whenever a driver's state changes."""


class Driver(Protocol):
    """What a servo driver offers the robot (positions in degrees, durations in ms)."""

    name: str
    state: DriverState
    message: str

    def write(self, targets: dict[str, float], duration_ms: float = 0.0) -> None:
        """Send joint targets (degrees), reached over ``duration_ms`` (0 = at the configured speed)."""

    def read(self) -> dict[str, float]:
        """Last known joint positions, degrees (read back from the device where it can)."""

    def set_torque(self, on: bool) -> None:
        """Switch holding torque on or off for every joint of this driver."""

    def estop(self) -> None:
        """Emergency stop: drop queued targets and cut torque at once."""

    def sync(self, timeout_s: float = 1.0) -> bool:
        """Block until queued commands were sent (and acknowledged); False on timeout."""

    def close(self) -> None:
        """Stop the driver's thread and release the device."""


@dataclass(frozen=True)
class Channel:
    """How one joint maps onto one device channel/servo id.

    ``units = centre + direction × per_deg × deg``, rounded, then clamped into ``[lo, hi]``
    (the device units of the joint's own limits, so the device can never be sent a value
    beyond them).

    Attributes:
        joint: Joint name.
        id: Servo id or channel number on the device.
        centre: Device units at joint 0 degrees (includes the joint's trim).
        per_deg: Device units per degree (> 0).
        direction: +1, or -1 for a mirrored servo.
        lo: Lowest device value allowed for this joint.
        hi: Highest device value allowed for this joint.

    """

    joint: str
    id: int
    centre: float
    per_deg: float
    direction: int
    lo: int
    hi: int

    @classmethod
    def for_joint(
        cls,
        joint: str,
        id: int,
        min_deg: float,
        max_deg: float,
        *,
        centre: float,
        per_deg: float,
        direction: int = 1,
        offset_deg: float = 0.0,
        device_range: tuple[int, int] | None = None,
    ) -> Channel:
        """Build a channel whose device range is the joint's ``[min_deg, max_deg]``.

        Args:
            joint: Joint name.
            id: Servo id / channel.
            min_deg: Joint lower limit, degrees.
            max_deg: Joint upper limit, degrees.
            centre: Device units at the servo's centre.
            per_deg: Device units per degree.
            direction: +1 or -1.
            offset_deg: Servo angle (relative to centre) at joint 0 degrees.
            device_range: The device's own hard range in units, intersected with the joint's.

        """
        c = centre + per_deg * offset_deg
        a = c + direction * per_deg * min_deg
        b = c + direction * per_deg * max_deg
        lo, hi = math.ceil(min(a, b) - 1e-9), math.floor(max(a, b) + 1e-9)
        if device_range is not None:
            lo, hi = max(lo, device_range[0]), min(hi, device_range[1])
        return cls(joint, id, c, per_deg, 1 if direction >= 0 else -1, lo, hi)

    def to_device(self, deg: float) -> int:
        """Degrees → device units (int), clamped to ``[lo, hi]``; NaN/inf map to the nearest safe value."""
        if not math.isfinite(deg):
            return int(min(self.hi, max(self.lo, round(self.centre))))
        units = round(self.centre + self.direction * self.per_deg * deg)
        return int(min(self.hi, max(self.lo, units)))

    def to_degrees(self, units: float) -> float:
        """Device units → joint degrees."""
        return (units - self.centre) / (self.direction * self.per_deg)


class DriverError(Exception):
    """A driver could not be built (bad config, missing vendor package); the message says what to do."""


@dataclass(frozen=True)
class DriverRequest:
    """What the factory hands a driver kind for one driver of the robot.

    Attributes:
        name: The driver's name: a key of ``[robot.drivers]`` or a built-in name (``sim``,
            ``reachy_mini``).
        robot: The whole ``[robot]`` section; each kind reads its own options from it
            (``drivers[name]``, or a body's own section such as ``reachy_mini``).
        joints: ``(index in [[robot.joints]], joint)`` of every joint this driver moves.
        on_status: Called as ``(name, state, message)`` on every change of state.
        by_id_dir: Folder of stable serial links (``/dev/serial/by-id``; tests use another).
    """

    name: str
    robot: RobotConfig
    joints: list[tuple[int, JointConfig]]
    on_status: StatusCallback | None
    by_id_dir: Path


Libraries = tuple[dict[str, dict[str, "Gesture"]], list[str]]
"""A body's animation libraries by kind (``dances`` → name → gesture) and the loading messages."""


@dataclass(frozen=True)
class DriverSpec:
    """One driver kind, as the factory sees it.

    Attributes:
        kind: Its config name (``[robot.drivers.X] kind``, or a built-in driver name).
        build: Creates the driver for a request, not started; returns it with the longest
            wait for its first connection, s (the section's ``connect_wait_s``), or None when
            there is nothing to connect to. Raises :class:`DriverError` when it cannot be built.
        wake_ms: Once connected at start, the robot moves to neutral over this long, ms (a
            body found asleep or anywhere comes to attention); None: it stays where it is.
        libraries: Loads the body's own animation libraries when this kind is the robot's
            default driver; never raises (a missing library is a message).
        doa: The body's microphone array's direction of arrival (a Reachy Mini's daemon), when
            this kind is the robot's default driver; None: it has none.
    """

    kind: str
    build: Callable[[DriverRequest], tuple[Driver, float | None]]
    wake_ms: float | None = None
    libraries: Callable[[RobotConfig], Libraries] | None = None
    doa: Callable[[RobotConfig], DoaSource] | None = None


class JointRouter:
    """One driver made of several: targets are split by joint, states merged.

    Args:
        drivers: Driver name → driver.
        joint_driver: Joint name → driver name.

    """

    def __init__(self, drivers: dict[str, Driver], joint_driver: dict[str, str]) -> None:
        self.drivers = drivers
        self.joint_driver = joint_driver
        self.name = "+".join(drivers)

    @property
    def state(self) -> DriverState:
        """``online`` when every driver is, ``offline`` when none is, else ``connecting``."""
        states = {d.state for d in self.drivers.values()}
        if states == {"online"}:
            return "online"
        if "online" not in states:
            return "closed" if states == {"closed"} else "offline"
        return "connecting"

    @property
    def message(self) -> str:
        """The drivers' messages joined by ``; `` (empty when all are fine)."""
        return "; ".join(d.message for d in self.drivers.values() if d.message)

    def write(self, targets: dict[str, float], duration_ms: float = 0.0) -> None:
        """Send each joint's target (degrees) to the driver that owns it."""
        split: dict[str, dict[str, float]] = {}
        for joint, deg in targets.items():
            split.setdefault(self.joint_driver[joint], {})[joint] = deg
        for name, part in split.items():
            self.drivers[name].write(part, duration_ms)

    def read(self) -> dict[str, float]:
        """Positions of every joint of every driver, degrees."""
        out: dict[str, float] = {}
        for d in self.drivers.values():
            out.update(d.read())
        return out

    def set_torque(self, on: bool) -> None:
        """Torque on/off on every driver."""
        for d in self.drivers.values():
            d.set_torque(on)

    def estop(self) -> None:
        """Emergency stop on every driver."""
        for d in self.drivers.values():
            d.estop()

    def sync(self, timeout_s: float = 1.0) -> bool:
        """Wait for every driver's queue; False if any timed out."""
        return all([d.sync(timeout_s) for d in self.drivers.values()])

    def close(self) -> None:
        """Close every driver."""
        for d in self.drivers.values():
            d.close()
