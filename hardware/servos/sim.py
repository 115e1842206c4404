"""Simulated servo driver: no hardware, records every joint command with its time.

The simulated robot is the embedded default and the reference for tests: every command
that reaches it is kept in :attr:`SimulatedDriver.commands` as ``(t_ms, joint, deg)`` and
reported to an optional callback (the agent turns it into ``robot`` events). Only the newest
:data:`COMMANDS_KEPT` are kept: the sim is also the default body of ``bolt-agent run``, which
runs for weeks (an unbounded list grew 120 bytes per joint command (tracemalloc), 50 per s per joint
while a gesture plays; measured with ``bolt-agent soak``).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hardware.driver import Driver, DriverRequest, DriverSpec

COMMANDS_KEPT = 5_000
"""Joint commands :attr:`SimulatedDriver.commands` keeps (about 25 s of 4 joints at 50 Hz, 0.6 MiB).
50,000 (6 MiB) took a soak's gestures hundreds of turns to fill: memory growth after warm-up."""


@dataclass
class SimulatedDriver:
    """A driver that moves instantly and remembers what it was told.

    Attributes:
        on_command: Called as ``on_command(joint, deg, t_ms)`` for each joint command.
        clock: Monotonic clock in seconds (injected for tests).
        commands: The newest :data:`COMMANDS_KEPT` commands as ``(t_ms, joint, deg)``, t_ms since
            the driver started.

    """

    on_command: Callable[[str, float, float], None] | None = None
    name: str = "sim"
    state: str = "online"
    message: str = ""
    clock: Callable[[], float] = time.monotonic
    commands: collections.deque[tuple[float, str, float]] = field(
        default_factory=lambda: collections.deque(maxlen=COMMANDS_KEPT)
    )
    torque_on: bool = True
    _pos: dict[str, float] = field(default_factory=dict)
    _t0: float = field(default=0.0)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._t0 = self.clock()

    def write(self, targets: dict[str, float], duration_ms: float = 0.0) -> None:
        """Send joint targets in degrees (already clamped by the robot's safety layer); moves at once."""
        t_ms = (self.clock() - self._t0) * 1000.0
        with self._lock:
            for joint, deg in targets.items():
                self._pos[joint] = deg
                self.commands.append((t_ms, joint, deg))
        if self.on_command is not None:
            for joint, deg in targets.items():
                self.on_command(joint, deg, t_ms)

    def read(self) -> dict[str, float]:
        """Return the joint positions in degrees (the last commanded ones)."""
        with self._lock:
            return dict(self._pos)

    def set_torque(self, on: bool) -> None:
        """Switch holding torque on or off (recorded only)."""
        self.torque_on = on

    def estop(self) -> None:
        """Emergency stop: torque off (recorded only)."""
        self.torque_on = False

    def sync(self, timeout_s: float = 1.0) -> bool:
        """Nothing is queued: always True."""
        return True

    def close(self) -> None:
        """Nothing to release."""
        self.state = "closed"


def build(req: DriverRequest) -> tuple[Driver, float | None]:
    """A simulated driver named ``req.name`` (the robot reports what it sends: ``Robot.on_command``)."""
    return SimulatedDriver(name=req.name), None


SPEC = DriverSpec("sim", build)
"""``sim`` (built in, or ``kind = "sim"``): records commands only; nothing to connect."""
