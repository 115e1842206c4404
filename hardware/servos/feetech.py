"""Feetech STS smart servos (e.g. STS3215) on one half-duplex bus, through the vendor SDK.

The SDK is ``feetech-servo-sdk`` (import name ``scservo_sdk``): ``PortHandler`` opens the port
with pyserial, ``PacketHandler(0)`` speaks the STS packet format (little-endian words; the
SDK keeps the byte order in a module global, so SCS-series servos, which are big-endian,
cannot share the process). Packets: ``FF FF id len instr params… checksum`` with
``checksum = ~(id + len + instr + Σparams) & 0xFF``; a status packet carries an error byte.

Numbers, from the Feetech STS3215 memory table (the same addresses the SDK's examples use):

* 3 model number (2 bytes); 40 torque enable (1 byte, 0/1); 41 acceleration (1 byte,
  100 steps/s²); 42 goal position (2 bytes, steps, bit 15 = sign); 44 goal time (2 bytes, ms);
  46 goal speed (2 bytes, steps/s); 56 present position (2 bytes).
* 4096 steps per turn: 4096/360 steps per degree, 2048 = centre.
* status error bits (``scservo_sdk.protocol_packet_handler``): 1 voltage, 2 angle sensor,
  4 overheat, 8 over-current, 32 overload.

Targets go out as one SYNC WRITE (instruction 0x83, no reply) of acceleration, position,
time and speed for every servo. Present positions are read servo by servo at ``poll_hz``
(each read waits for a status packet; the SDK polls the port for up to ~35 ms per read, so
keep ``poll_hz`` low). An I/O error becomes a lost link (reconnect); a servo that stops
answering or reports an error bit becomes a fault message, while the others keep working.
"""

from __future__ import annotations

import math
import termios
from collections.abc import Callable
from typing import Any

import serial

from hardware.driver import Channel, Driver, DriverRequest, DriverSpec
from hardware.servos.bus import ServoBusDriver
from hardware.servos.serial_link import LinkLost, ProtocolError, build_serial

ADDR_MODEL = 3
ADDR_TORQUE_ENABLE = 40
ADDR_ACCELERATION = 41
ADDR_GOAL_POSITION = 42
ADDR_PRESENT_POSITION = 56
SYNC_BLOCK = 7
"""Bytes per servo in the sync write from address 41: acc, position (2), time (2), speed (2)."""

CENTRE = 2048
PER_DEG = 4096 / 360
DEVICE_RANGE = (0, 4095)

ERROR_BITS = {
    1: "input voltage error",
    2: "angle sensor error",
    4: "overheating",
    8: "over-current",
    32: "overload",
}


def describe_status(bits: int) -> str:
    """Status error byte → ``"overheating, overload"``."""
    return ", ".join(t for b, t in ERROR_BITS.items() if bits & b) or f"error bits {bits:#04x}"


def _sdk() -> Any:
    import scservo_sdk  # the vendor package; imported when a Feetech driver is built

    return scservo_sdk


class FeetechDriver(ServoBusDriver):
    """Driver for Feetech STS servos (ids from the joint config) on one bus.

    Args:
        name, port, channels, **kw: As :class:`hardware.servos.bus.ServoBusDriver` (baud
            usually 1000000).
        speeds: Joint → top speed, deg/s (sent as the goal speed with every target).
        neutral: Joint → neutral degrees.
        acceleration: STS acceleration register, 100 steps/s² per unit (0 = the servo's maximum).

    """

    kind = "feetech"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._ph: Any = None
        self._last: dict[int, int] = {}
        self._dead: set[int] = set()

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run one SDK call; pyserial errors become :class:`LinkLost`."""
        try:
            return fn(self._handle, *args)
        except (serial.SerialException, OSError, termios.error) as e:
            raise LinkLost(f"I/O error on the servo bus ({e})") from None

    def _result(self, ch: Channel, what: str, result: int, error: int) -> bool:
        """Check one reply: True when it is usable; faults recorded, garbage raises ProtocolError."""
        sdk = _sdk()
        where = f"servo {ch.id} (joint {ch.joint})"
        if result == sdk.COMM_RX_CORRUPT:
            raise ProtocolError(f"{what}: garbled reply from {where}; check the baud rate and wiring")
        if result != sdk.COMM_SUCCESS:
            self._fault(f"{ch.id}", f"{where} does not answer ({what}: {self._ph.getTxRxResult(result)})")
            return False
        if error:
            self._fault(f"{ch.id}", f"{where} reports {describe_status(error)}")
        else:
            self.faults.pop(f"{ch.id}", None)
        return True

    # --- hooks ---------------------------------------------------------------------------
    def _open_port(self, path: str) -> Any:
        sdk = _sdk()
        port = sdk.PortHandler(path)
        port.baudrate = self.baud
        if not port.openPort():
            raise ProtocolError(f"baud rate {self.baud} is not supported by scservo_sdk")
        self._ph = sdk.PacketHandler(0)
        return port

    def _close_port(self, handle: Any) -> None:
        if handle.is_open:
            handle.closePort()

    def _setup(self) -> None:
        answered = 0
        self._dead.clear()
        for ch in self.channels.values():
            _model, result, error = self._call(self._ph.ping, ch.id)
            if self._result(ch, "ping", result, error):
                answered += 1
            else:
                self._dead.add(ch.id)
        if not answered:
            raise ProtocolError(
                f"no Feetech servo answered (ids {sorted(c.id for c in self.channels.values())} "
                f"at {self.baud} baud)"
            )
        self._torque(self._torque_wanted)

    def _send_targets(self, units: dict[int, int], duration_ms: float) -> None:
        sdk = _sdk()
        chans = {c.id: c for c in self.channels.values()}
        group = sdk.GroupSyncWrite(self._handle, self._ph, ADDR_ACCELERATION, SYNC_BLOCK)
        for cid, pos in sorted(units.items()):
            ch = chans[cid]
            top = max(1, round(self.speeds.get(ch.joint, 180.0) * ch.per_deg))
            prev = self._last.get(cid)
            speed = top
            if duration_ms > 0 and prev is not None:
                speed = min(top, max(1, math.ceil(abs(pos - prev) * 1000.0 / duration_ms)))
            t = int(min(duration_ms, 65535))
            group.addParam(
                cid,
                [
                    self.acceleration & 0xFF,
                    pos & 0xFF,
                    (pos >> 8) & 0xFF,
                    t & 0xFF,
                    t >> 8,
                    speed & 0xFF,
                    (speed >> 8) & 0xFF,
                ],
            )
            self._last[cid] = pos
        try:
            result = group.txPacket()
        except (serial.SerialException, OSError, termios.error) as e:
            raise LinkLost(f"I/O error on the servo bus ({e})") from None
        if result != sdk.COMM_SUCCESS:
            raise LinkLost(f"sync write failed: {self._ph.getTxRxResult(result)}")

    def _torque(self, on: bool) -> None:
        for ch in self.channels.values():
            if ch.id in self._dead:
                continue
            result, error = self._call(self._ph.write1ByteTxRx, ch.id, ADDR_TORQUE_ENABLE, 1 if on else 0)
            self._result(ch, "torque", result, error)

    def _poll(self) -> dict[int, int] | None:
        sdk = _sdk()
        out = {}
        for ch in self.channels.values():
            value, result, error = self._call(self._ph.read2ByteTxRx, ch.id, ADDR_PRESENT_POSITION)
            if self._result(ch, "read position", result, error):
                self._dead.discard(ch.id)
                out[ch.id] = sdk.SCS_TOHOST(value, 15)
        return out


def build(req: DriverRequest) -> tuple[Driver, float | None]:
    """The driver of a Feetech STS bus at ``[robot.drivers.NAME]`` (the SDK is imported when it opens)."""
    return build_serial(req, FeetechDriver, centre=CENTRE, per_deg=PER_DEG, device_range=DEVICE_RANGE)


SPEC = DriverSpec("feetech", build)
"""``kind = "feetech"``: Feetech STS servos on one bus, through ``feetech-servo-sdk``."""
