"""Pololu Maestro servo controller, compact serial protocol.

Source of every number: the Pololu Maestro Servo Controller User's Guide, section 5.e
"Serial Servo Commands" (compact protocol) and section 4.b "Errors":

* Set Target ``0x84, channel, target & 0x7F, (target >> 7) & 0x7F`` — target in quarter
  microseconds (6000 = 1500 µs, the centre of a hobby servo); target 0 stops the pulses
  (the servo goes limp: our "torque off").
* Set Speed ``0x87, channel, lo7, hi7`` — units of 0.25 µs / 10 ms (0 = unlimited).
* Set Acceleration ``0x89, channel, lo7, hi7`` — units of 0.25 µs / 10 ms / 80 ms, 0..255.
* Get Position ``0x90, channel`` → 2 bytes, low byte first, quarter microseconds.
* Get Errors ``0xA1`` → 2 bytes, low byte first; bits: 0 serial signal, 1 serial overrun,
  2 serial buffer full, 3 serial CRC, 4 serial protocol, 5 serial timeout, 6 script stack,
  7 script call stack, 8 script program counter.

The Maestro's USB "Command Port" needs no baud setting; on its TTL port in auto-detect mode
the first byte ``0xAA`` sets the baud rate (we send it at connect; it is ignored otherwise).
Joint degrees → quarter-µs: ``4 × (1500 µs + direction × us_per_deg × degrees)``; the
default 2000/180 µs per degree maps 0..180° onto 500..2500 µs. The Maestro has no ready line
and no watchdog of its own (its "serial timeout" setting is the hardware equivalent; set it
in the Maestro Control Center).
"""

from __future__ import annotations

import math
from typing import Any

from hardware.driver import Driver, DriverRequest, DriverSpec
from hardware.servos.bus import ServoBusDriver
from hardware.servos.serial_link import ProtocolError, build_serial

SET_TARGET = 0x84
SET_SPEED = 0x87
SET_ACCELERATION = 0x89
GET_POSITION = 0x90
GET_ERRORS = 0xA1
BAUD_DETECT = 0xAA

QUARTER_US_PER_US = 4
CENTRE = 6000
"""Quarter-µs at the servo's centre (1500 µs)."""
PER_DEG = QUARTER_US_PER_US * 2000 / 180
"""Default quarter-µs per degree (overridden by the driver config's ``us_per_deg``)."""
DEVICE_RANGE = (2000, 10000)
"""500..2500 µs in quarter-µs: the widest pulse we ever send."""

ERROR_BITS = {
    0: "serial signal error",
    1: "serial overrun error",
    2: "serial buffer full",
    3: "serial CRC error",
    4: "serial protocol error",
    5: "serial timeout error",
    6: "script stack error",
    7: "script call stack error",
    8: "script program counter error",
}


def pack(cmd: int, channel: int, value: int) -> bytes:
    """One compact-protocol command with a 14-bit value split into two 7-bit bytes."""
    value = int(value)
    if not 0 <= value < 1 << 14:
        raise ValueError(f"Maestro value {value} outside 0..16383")
    return bytes((cmd, channel & 0x7F, value & 0x7F, (value >> 7) & 0x7F))


def speed_units(dps: float, per_deg: float) -> int:
    """deg/s → Maestro speed units (0.25 µs per 10 ms), at least 1, at most 16383."""
    return int(min(16383, max(1, math.floor(dps * per_deg / 100.0))))


def describe_errors(bits: int) -> str:
    """Error bits → ``"serial protocol error, serial timeout error"``."""
    return (
        ", ".join(text for bit, text in ERROR_BITS.items() if bits & (1 << bit)) or f"error bits {bits:#06x}"
    )


class MaestroDriver(ServoBusDriver):
    """Driver for a Pololu Maestro (Micro 6 or Mini 12/18/24) on its command port.

    Args:
        name, port, channels, **kw: As :class:`hardware.servos.bus.ServoBusDriver`.
        speeds: Joint → top speed, deg/s (written to the Maestro's speed register).
        neutral: Joint → neutral degrees (where torque-on starts when no target was sent yet).
        acceleration: Maestro acceleration units (0 = unlimited, 1..255).

    """

    kind = "maestro"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._last_units: dict[int, int] = {}

    def _query(self, request: bytes, what: str) -> int:
        self._write_all(request)
        reply = self._read_exact(2)
        if len(reply) < 2:
            raise ProtocolError(
                f"no reply to {what} within {self.timeout_s:g} s; is this a Maestro's command "
                f"port, in USB Dual Port or USB Chained mode?"
            )
        return reply[0] | reply[1] << 8

    def _check_errors(self) -> None:
        bits = self._query(bytes((GET_ERRORS,)), "Get Errors")
        extra = self._read_exact(16, 0.02)
        if extra:
            raise ProtocolError(
                f"device answers, but not like a Maestro (extra bytes {extra[:16]!r}); check the port"
            )
        if bits:
            self._fault("errors", f"Maestro reports {describe_errors(bits)}")
        else:
            self.faults.pop("errors", None)

    def _setup(self) -> None:
        self._handle.reset_input_buffer()
        self._write_all(bytes((BAUD_DETECT,)))
        self._check_errors()
        for joint, ch in self.channels.items():
            self._write_all(pack(SET_SPEED, ch.id, speed_units(self.speeds.get(joint, 180.0), ch.per_deg)))
            self._write_all(pack(SET_ACCELERATION, ch.id, self.acceleration))
        if not self._torque_wanted:
            self._torque(False)

    def _send_targets(self, units: dict[int, int], duration_ms: float) -> None:
        out = b""
        chans = {c.id: c for c in self.channels.values()}
        for cid, u in sorted(units.items()):
            prev = self._last_units.get(cid)
            if duration_ms > 0 and prev and prev != u:
                # Reach the target in duration_ms: speed = distance per 10 ms, within the joint's top speed.
                top = speed_units(self.speeds.get(chans[cid].joint, 180.0), chans[cid].per_deg)
                out += pack(SET_SPEED, cid, min(top, max(1, math.ceil(abs(u - prev) * 10.0 / duration_ms))))
            out += pack(SET_TARGET, cid, u)
            self._last_units[cid] = u
        self._write_all(out)

    def _torque(self, on: bool) -> None:
        out = b""
        for ch in self.channels.values():
            target = self._last_units.get(ch.id, ch.to_device(self.neutral.get(ch.joint, 0.0))) if on else 0
            out += pack(SET_TARGET, ch.id, target)
        self._write_all(out)

    def _poll(self) -> dict[int, int] | None:
        self._check_errors()
        out = {}
        for ch in self.channels.values():
            pos = self._query(bytes((GET_POSITION, ch.id)), "Get Position")
            if pos:  # 0 = pulses off: no position to report
                out[ch.id] = pos
        return out


def build(req: DriverRequest) -> tuple[Driver, float | None]:
    """The driver of a Maestro at ``[robot.drivers.NAME]``; its ``us_per_deg`` sets the scale."""
    us_per_deg = req.robot.drivers[req.name].us_per_deg
    per_deg = QUARTER_US_PER_US * us_per_deg
    return build_serial(req, MaestroDriver, centre=CENTRE, per_deg=per_deg, device_range=DEVICE_RANGE)


SPEC = DriverSpec("maestro", build)
"""``kind = "maestro"``: a Pololu Maestro servo controller."""
