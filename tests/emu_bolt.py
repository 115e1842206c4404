"""Byte-level emulator of a board running the bolt_servo firmware (hardware/PROTOCOL.md), on a pty.

It parses the same frames as ``hardware/firmware/bolt_servo/bolt_servo.ino``: checksummed
ASCII lines, one ``OK``/``ERR`` per command, ``READY`` after a reset (when the port opens,
like an Arduino's DTR reset), and a watchdog that returns every servo to neutral and detaches
it when the host goes quiet. Every target value it receives is kept in ``moves`` exactly as
decoded from the bytes (before the board's own clamping), for the safety tests.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from emu_pty import PtyDevice

from hardware.servos.bolt_serial import PROTOCOL_VERSION, decode, encode


class BoltBoard(PtyDevice):
    """Emulated bolt_servo board.

    Args:
        link: Symlink path of the port.
        channels: Servo outputs (ids 0..channels-1).
        reset_on_open: Reboot when the host opens the port (prints READY after ``boot_s``).
        boot_s: Boot time, s (bytes received while booting are lost, as in a bootloader).
        garbage: Answer everything with noise (wrong device / wrong baud).
        chunk_delay_s: Reply one byte at a time with this pause.
    """

    def __init__(
        self,
        link: Path,
        channels: int = 4,
        reset_on_open: bool = True,
        boot_s: float = 0.2,
        garbage: bool = False,
        chunk_delay_s: float = 0.0,
    ) -> None:
        super().__init__(link, chunk_delay_s)
        self.channels = channels
        self.reset_on_open = reset_on_open
        self.boot_s = boot_s
        self.garbage = garbage
        self.moves: list[tuple[int, int]] = []
        self.frames: list[str] = []
        self.bad_frames = 0
        self.wdog_fired = 0
        self.reject: set[str] = set()
        self._buf = b""
        self._booting = False
        self._reset_state()
        self._wd_stop = threading.Event()
        threading.Thread(target=self._watchdog, daemon=True).start()

    def _reset_state(self) -> None:
        self.pos = {i: 900 for i in range(self.channels)}
        self.limits = {i: (0, 1800) for i in range(self.channels)}
        self.neutral = {i: 900 for i in range(self.channels)}
        self.speed = {i: 180 for i in range(self.channels)}
        self.torque = False
        self.estopped = False
        self.watchdog_ms = 1000
        self.last_rx = time.monotonic()
        self.wdog_armed = False

    # --- PtyDevice hooks -------------------------------------------------------------
    def on_open(self) -> None:
        if self.garbage:
            self.send(b"\x00\xfe\x13bootloader v0\x07\r\n")
            return
        if self.reset_on_open:
            self._reset_state()
            self._booting = True
            self._buf = b""

            def boot() -> None:
                time.sleep(self.boot_s)
                self._booting = False
                self.send(b"# bolt_servo booting\n")
                self.send(encode(f"READY bolt_servo {PROTOCOL_VERSION} {self.channels}"))

            threading.Thread(target=boot, daemon=True).start()

    def on_power_cycle(self) -> None:
        self._reset_state()

    def on_bytes(self, data: bytes) -> None:
        if self._booting:
            return
        if self.garbage:
            self.send(b"\xff\xfe?? 0x3F garbage \x81\r\n")
            return
        self._buf += data
        while b"\n" in self._buf:
            line, _, self._buf = self._buf.partition(b"\n")
            self._handle(line)

    # --- protocol -----------------------------------------------------------------------
    def _reply(self, body: str) -> None:
        self.send(encode(body))

    def _handle(self, line: bytes) -> None:
        body = decode(line)
        if body is None:
            self.bad_frames += 1
            self._reply("ERR ? CHK bad frame or checksum")
            return
        self.last_rx = time.monotonic()
        self.wdog_armed = True
        self.frames.append(body)
        seq, _, rest = body.partition(" ")
        cmd, _, args = rest.partition(" ")
        if cmd in self.reject:
            self._reply(f"ERR {seq} ARG rejected by test")
            return
        try:
            data = self._execute(cmd, args.split())
        except (ValueError, KeyError) as e:
            self._reply(f"ERR {seq} ARG {e}".replace("*", "x")[:100])
            return
        if data is None:
            self._reply(f"ERR {seq} CMD unknown command {cmd!r}")
        elif data.startswith("!"):
            self._reply(f"ERR {seq} {data[1:]}")
        else:
            self._reply(f"OK {seq}{' ' + data if data else ''}")

    @staticmethod
    def _pairs(args: list[str]) -> list[tuple[int, str]]:
        out = []
        for a in args:
            k, _, v = a.partition("=")
            if not v:
                raise ValueError(f"expected id=value, got {a!r}")
            out.append((int(k), v))
        return out

    def _execute(self, cmd: str, args: list[str]) -> str | None:
        """One command's reply body ("" for a bare OK), or None for an unknown command."""
        if cmd in ("P", "H", "W", "T", "E", "Q"):
            return self._board(cmd, args)
        return self._channels(cmd, args)

    def _board(self, cmd: str, args: list[str]) -> str:
        """The commands of the whole board: ping, heartbeat, watchdog, torque, e-stop, query."""
        if cmd == "P":
            return f"bolt_servo {PROTOCOL_VERSION} {self.channels}"
        if cmd == "W":
            self.watchdog_ms = int(args[0])
        elif cmd == "T":
            self.torque = args[0] == "1"
            if self.torque:
                self.estopped = False
        elif cmd == "E":
            self.torque, self.estopped = False, True
        elif cmd == "Q":
            return " ".join(f"{i}={v}" for i, v in sorted(self.pos.items()))
        return ""  # H: the heartbeat

    def _channels(self, cmd: str, args: list[str]) -> str | None:
        """The per-channel commands (``id=value`` pairs): move, limits, neutral, speed."""
        pairs = self._pairs(args[1:] if cmd == "M" else args)
        for i, _ in pairs:
            if i not in self.pos:
                raise KeyError(f"no channel {i}")
        if cmd == "M":
            int(args[0])
            return self._move(pairs)
        if cmd == "L":
            for i, v in pairs:
                lo, hi = (int(x) for x in v.split(":"))
                self.limits[i] = (lo, hi)
        elif cmd == "N":
            for i, v in pairs:
                self.neutral[i] = int(v)
        elif cmd == "S":
            for i, v in pairs:
                self.speed[i] = int(v)
        else:
            return None
        return ""

    def _move(self, pairs: list[tuple[int, str]]) -> str:
        """``M``: each channel to its target within its limits, unless an e-stop is latched."""
        if self.estopped:
            return "!STOP emergency stop latched; send T 1"
        for i, v in pairs:
            self.moves.append((i, int(v)))
            lo, hi = self.limits[i]
            self.pos[i] = min(hi, max(lo, int(v)))
        return ""

    def _watchdog(self) -> None:
        while not self._wd_stop.wait(0.02):
            if self.wdog_armed and time.monotonic() - self.last_rx > self.watchdog_ms / 1000.0:
                self.wdog_armed = False
                self.wdog_fired += 1
                self.pos = dict(self.neutral)
                self.torque = False
                self._reply("WDOG")
