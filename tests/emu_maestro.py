"""Byte-level emulator of a Pololu Maestro's compact serial protocol, on a pty.

Commands per the Maestro user's guide, section 5.e: Set Target 0x84, Set Speed 0x87, Set
Acceleration 0x89 (channel + two 7-bit bytes), Get Position 0x90 (2-byte reply), Get Errors
0xA1 (2-byte reply, clears the errors), baud detection byte 0xAA. ``targets`` keeps every
target exactly as decoded from the bytes.
"""

from __future__ import annotations

from pathlib import Path

from emu_pty import PtyDevice

LENGTHS = {0x84: 4, 0x87: 4, 0x89: 4, 0x90: 2, 0x93: 1, 0xA1: 1, 0xA2: 1, 0xAA: 1}


class Maestro(PtyDevice):
    """Emulated Maestro with ``channels`` channels; ``errors`` is returned (then cleared) by Get Errors."""

    def __init__(self, link: Path, channels: int = 6, garbage: bool = False) -> None:
        super().__init__(link)
        self.channels = channels
        self.garbage = garbage
        self.pos = {i: 0 for i in range(channels)}
        self.speed = {i: 0 for i in range(channels)}
        self.accel = {i: 0 for i in range(channels)}
        self.targets: list[tuple[int, int]] = []
        self.errors = 0
        self.unknown = 0
        self._buf = b""

    def on_bytes(self, data: bytes) -> None:
        if self.garbage:
            self.send(b"\x13\x37garbage!\r\n")
            return
        self._buf += data
        while self._buf:
            cmd = self._buf[0]
            n = LENGTHS.get(cmd)
            if n is None:
                self.unknown += 1
                self.errors |= 1 << 4  # serial protocol error
                self._buf = self._buf[1:]
                continue
            if len(self._buf) < n:
                return
            pkt, self._buf = self._buf[:n], self._buf[n:]
            self._execute(pkt)

    def _execute(self, pkt: bytes) -> None:
        cmd = pkt[0]
        if cmd in (0x84, 0x87, 0x89):
            ch, value = pkt[1], pkt[2] | pkt[3] << 7
            if ch >= self.channels or pkt[2] > 0x7F or pkt[3] > 0x7F:
                self.errors |= 1 << 4
                return
            if cmd == 0x84:
                self.targets.append((ch, value))
                self.pos[ch] = value
            elif cmd == 0x87:
                self.speed[ch] = value
            else:
                self.accel[ch] = value
        elif cmd == 0x90:
            v = self.pos.get(pkt[1], 0)
            self.send(bytes((v & 0xFF, v >> 8)))
        elif cmd == 0xA1:
            e, self.errors = self.errors, 0
            self.send(bytes((e & 0xFF, e >> 8)))
