r"""Host side of the bolt_servo line protocol (``hardware/PROTOCOL.md``) for a microcontroller board.

Frames are ASCII lines ``<body>*<HH>\n`` where ``HH`` is the XOR of the body's bytes in
upper-case hex (NMEA style). Every host command carries a sequence number that the board
echoes in its one acknowledgement (``OK <seq> ...`` or ``ERR <seq> <code> ...``). Servo
targets are tenths of a degree of servo angle, 0..1800 (900 = the servo's centre). After a
reset (e.g. DTR on port open) the board prints ``READY bolt_servo <version> <channels>``; the
host waits for it, or pings a board that did not reset. The host feeds the board's watchdog
with ``H`` when idle; a board that hears nothing for ``W`` ms returns to neutral by itself
and detaches its servos. The reference firmware is ``hardware/firmware/bolt_servo``.

Threading and reconnects: see :mod:`hardware.servos.serial_link`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from hardware.driver import Driver, DriverRequest, DriverSpec
from hardware.servos.serial_link import LinkLost, ProtocolError, SerialDriver, build_serial

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
CENTRE = 900.0
"""Device units at the servo's centre: tenths of a degree of a 0..180 degree hobby servo."""
PER_DEG = 10.0
"""Device units per degree (tenths of a degree)."""
DEVICE_RANGE = (0, 1800)
MAX_LINE = 120
"""Longest frame the board accepts, bytes (the firmware's line buffer)."""


def checksum(body: str | bytes) -> int:
    """XOR of the body's bytes (0..255)."""
    data = body.encode("ascii") if isinstance(body, str) else body
    ck = 0
    for b in data:
        ck ^= b
    return ck


def encode(body: str) -> bytes:
    r"""Frame a body: ``b"<body>*<HH>\n"`` (ASCII; raises ValueError on ``*`` or a newline in it)."""
    if "*" in body or "\n" in body or "\r" in body:
        raise ValueError(f"frame body may not contain '*' or newlines: {body!r}")
    return f"{body}*{checksum(body):02X}\n".encode("ascii")


def decode(line: bytes) -> str | None:
    """Un-frame one line (with or without its newline); None when malformed or the checksum fails."""
    text = line.rstrip(b"\r\n")
    star = text.rfind(b"*")
    if star < 0 or len(text) - star != 3:
        return None
    body, ck = text[:star], text[star + 1 :]
    try:
        if int(ck, 16) != checksum(body):
            return None
        return body.decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return None


class BoltSerialDriver(SerialDriver):
    """Driver for a board running the bolt_servo firmware.

    Args:
        name, port, channels, **kw: As :class:`hardware.servos.serial_link.SerialDriver`.
        ready_timeout_s: How long to wait for the ready line after opening, s.
        watchdog_ms: The board's watchdog timeout, ms (heartbeats go out at a third of it or
            ``heartbeat_s``, whichever is shorter).
        neutral: Joint → neutral degrees (sent to the board for its watchdog).
        speeds: Joint → top speed, deg/s (the board limits its own interpolation too).

    """

    kind = "bolt_serial"

    def __init__(
        self,
        name: str,
        port: str,
        channels: list,
        *,
        ready_timeout_s: float = 2.5,
        watchdog_ms: int = 1000,
        neutral: dict[str, float] | None = None,
        speeds: dict[str, float] | None = None,
        **kw: Any,
    ) -> None:
        kw["heartbeat_s"] = min(kw.get("heartbeat_s") or 1e9, watchdog_ms / 3000.0)
        super().__init__(name, port, channels, **kw)
        self.ready_timeout_s = ready_timeout_s
        self.watchdog_ms = int(watchdog_ms)
        self.neutral = dict(neutral or {})
        self.speeds = dict(speeds or {})
        self.board_info = ""
        self._seq = 0
        self._buf = b""
        self._ready_seen: str | None = None
        self._wdog_seen = False  # the board's watchdog fired: its torque is off until we re-arm it

    # --- line I/O -----------------------------------------------------------------
    def _readline(self, deadline: float) -> bytes | None:
        """One raw line (partial reads are joined); None at the deadline."""
        while b"\n" not in self._buf:
            if time.monotonic() >= deadline:
                return None
            self._buf += self._read_some(max(0.0, deadline - time.monotonic()))
            if len(self._buf) > 4 * MAX_LINE and b"\n" not in self._buf:
                raise ProtocolError(
                    f"device sends unframed data (got {self._buf[:24]!r}...); check port and baud"
                )
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _command(self, body: str, retries: int = 2) -> str | None:
        """Send one command and return the data after ``OK <seq>``; None on an ``ERR`` reply.

        A ``WDOG`` line read on the way (the board's watchdog fired while this host was starved of
        CPU for longer than ``watchdog_ms``: the board went to neutral and cut torque) is answered
        once the command is done: torque goes back on if it is wanted and the link is not closing,
        so a robot does not stay limp while the host believes it holds.

        Raises:
            LinkLost: no valid reply after ``retries`` resends, or the board restarted.
            ProtocolError: only garbage came back.
        """
        reply = self._exchange(body, retries)
        if self._wdog_seen:
            self._wdog_seen = False
            if self._torque_wanted and not self._closing.is_set() and body not in ("T 0", "E"):
                log.warning("%s: torque back on after the board's watchdog", self.describe())
                self._exchange("T 1", retries)
        return reply

    def _exchange(self, body: str, retries: int) -> str | None:
        """One command and its reply (see :meth:`_command`, which raises what this raises)."""
        garbage = b""
        for _attempt in range(retries + 1):
            self._seq = (self._seq + 1) % 256
            seq = str(self._seq)
            self._write_all(encode(f"{seq} {body}"))
            deadline = time.monotonic() + self.timeout_s
            while True:
                raw = self._readline(deadline)
                if raw is None:
                    break
                msg = decode(raw)
                if msg is None:
                    garbage = garbage or raw
                    continue
                parts = msg.split(" ", 2)
                if parts[0] == "READY":
                    self._ready_seen = msg
                    raise LinkLost("the board restarted")
                if parts[0] == "WDOG":
                    log.warning("%s: board watchdog fired (host was quiet too long)", self.describe())
                    self._wdog_seen = True
                    continue
                if parts[0] in ("OK", "ERR") and len(parts) > 1 and parts[1] == seq:
                    rest = parts[2] if len(parts) > 2 else ""
                    if parts[0] == "OK":
                        return rest
                    if rest.startswith("CHK"):
                        break  # our frame arrived damaged: resend
                    self._fault(body.split(" ")[0], f"board rejected {body.split(' ')[0]!r}: {rest}")
                    return None
        if garbage:
            raise ProtocolError(
                f"device answers, but not in the bolt_servo protocol (got {garbage[:32]!r}); "
                f"check the port and baud rate"
            )
        raise LinkLost(
            f"no reply to {body.split(' ')[0]!r} within {self.timeout_s:g} s ({retries + 1} tries)"
        )

    # --- hooks --------------------------------------------------------------------------
    def _setup(self) -> None:
        self._buf = b""
        self._handle.reset_input_buffer()
        now = time.monotonic()
        deadline, next_ping = now + self.ready_timeout_s, now + min(0.3, self.ready_timeout_s)
        info, garbage = None, b""
        while info is None and time.monotonic() < deadline:
            raw = self._readline(min(deadline, next_ping))
            if raw is not None:
                msg = decode(raw)
                if msg is not None and msg.startswith("READY"):
                    info = msg
                elif msg is None and raw.strip():
                    garbage = garbage or raw
                continue
            # Quiet so far: a board that does not reset on open (or already printed READY) answers a ping.
            self._ready_seen = None
            try:
                info = f"READY {self._command('P', retries=0)}"
            except LinkLost:
                info = self._ready_seen
            except ProtocolError:
                garbage = garbage or b"?"
            next_ping = time.monotonic() + 0.5
        if info is None:
            if garbage:
                raise ProtocolError(
                    f"device answers, but not in the bolt_servo protocol "
                    f"(got {garbage[:32]!r}); check the port and baud rate"
                )
            raise ProtocolError(
                f"no ready line within {self.ready_timeout_s:g} s and no reply to a ping; "
                f"is the bolt_servo firmware flashed?"
            )
        fields = info.split()
        if len(fields) < 3 or fields[1] != "bolt_servo":
            raise ProtocolError(f"device is not a bolt_servo board (says {info!r})")
        if fields[2] != str(PROTOCOL_VERSION):
            raise ProtocolError(
                f"board speaks protocol version {fields[2]}, host speaks {PROTOCOL_VERSION}; "
                f"flash hardware/firmware/bolt_servo"
            )
        self.board_info = info
        self._command(f"W {self.watchdog_ms}")
        for joint, ch in self.channels.items():
            self._command(f"L {ch.id}={ch.lo}:{ch.hi}")
            self._command(f"N {ch.id}={ch.to_device(self.neutral.get(joint, 0.0))}")
            self._command(f"S {ch.id}={max(1, round(self.speeds.get(joint, 180.0)))}")
        self._command("T 1" if self._torque_wanted else "T 0")

    def _send_targets(self, units: dict[int, int], duration_ms: float) -> None:
        pairs = " ".join(f"{i}={u}" for i, u in sorted(units.items()))
        self._command(f"M {int(min(duration_ms, 60000))} {pairs}")

    def _torque(self, on: bool) -> None:
        self._command("T 1" if on else "T 0")

    def _estop(self) -> None:
        self._command("E", retries=3)

    def _heartbeat(self) -> None:
        self._command("H")

    def _poll(self) -> dict[int, int] | None:
        reply = self._command("Q")
        if not reply:
            return None
        out = {}
        for pair in reply.split():
            key, _, val = pair.partition("=")
            try:
                out[int(key)] = int(val)
            except ValueError:
                self._fault("Q", f"unreadable position report {pair!r}")
        return out


def build(req: DriverRequest) -> tuple[Driver, float | None]:
    """The driver of a bolt_servo board at ``[robot.drivers.NAME]`` (:func:`build_serial`)."""
    dcfg = req.robot.drivers[req.name]
    return build_serial(
        req,
        BoltSerialDriver,
        centre=CENTRE,
        per_deg=PER_DEG,
        device_range=DEVICE_RANGE,
        ready_timeout_s=dcfg.ready_timeout_s,
        watchdog_ms=dcfg.watchdog_ms,
        heartbeat_s=dcfg.heartbeat_ms / 1000.0,
    )


SPEC = DriverSpec("bolt_serial", build)
"""``kind = "bolt_serial"``: a microcontroller board speaking ``hardware/PROTOCOL.md``."""
