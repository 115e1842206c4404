"""Byte-level emulator of a bus of Feetech STS servos (e.g. STS3215), on a pty.

Packets ``FF FF id len instr params… checksum`` (checksum ``~(id+len+instr+Σparams) & 0xFF``);
PING 0x01, READ 0x02, WRITE 0x03 and SYNC WRITE 0x83 are answered like a real bus: a status
packet ``FF FF id 2+n error data… checksum`` for PING/READ/WRITE to one id, nothing for
broadcasts. Each servo has a 256-byte memory laid out like the STS3215 table (model number
at 3, torque at 40, goal position at 42, present position at 56). ``goals`` keeps every goal
position exactly as decoded from the bytes; ``status_error[id]`` injects error bits.
"""

from __future__ import annotations

from pathlib import Path

from emu_pty import PtyDevice

MODEL_STS3215 = 777


def checksum(body: bytes) -> int:
    return ~sum(body) & 0xFF


def status(sid: int, error: int, data: bytes = b"") -> bytes:
    body = bytes((sid, len(data) + 2, error)) + data
    return b"\xff\xff" + body + bytes((checksum(body),))


class FeetechBus(PtyDevice):
    """Emulated bus with servos ``ids``; ``garbage`` answers noise, ``mute`` ids never answer."""

    def __init__(self, link: Path, ids: tuple[int, ...] = (1, 2, 3, 4), garbage: bool = False) -> None:
        super().__init__(link)
        self.mem = {i: bytearray(256) for i in ids}
        for m in self.mem.values():
            m[3], m[4] = MODEL_STS3215 & 0xFF, MODEL_STS3215 >> 8
            m[56], m[57] = 0x00, 0x08  # present position 2048
        self.garbage = garbage
        self.goals: list[tuple[int, int]] = []
        self.speeds: list[tuple[int, int]] = []
        self.status_error: dict[int, int] = {}
        self.mute: set[int] = set()
        self.bad_packets = 0
        self._buf = b""

    def torque(self, sid: int) -> int:
        return self.mem[sid][40]

    def on_bytes(self, data: bytes) -> None:
        if self.garbage:
            self.send(b"\xff\xff\x01\x05\x00\x13\x37\x42")
            return
        self._buf += data
        while True:
            start = self._buf.find(b"\xff\xff")
            if start < 0:
                self._buf = self._buf[-1:]
                return
            self._buf = self._buf[start:]
            if len(self._buf) < 4:
                return
            n = self._buf[3] + 4
            if len(self._buf) < n:
                return
            pkt, self._buf = self._buf[:n], self._buf[n:]
            if checksum(pkt[2:-1]) != pkt[-1]:
                self.bad_packets += 1
                continue
            self._execute(pkt[2], pkt[4], pkt[5:-1])

    def _store(self, sid: int, addr: int, data: bytes) -> None:
        m = self.mem[sid]
        m[addr : addr + len(data)] = data
        for a in range(addr, addr + len(data)):
            if a == 42 and a + 1 < addr + len(data):
                goal = m[42] | m[43] << 8
                self.goals.append((sid, goal))
                m[56], m[57] = m[42], m[43]  # the emulated servo arrives at once
            if a == 46 and a + 1 < addr + len(data):
                self.speeds.append((sid, m[46] | m[47] << 8))

    def _execute(self, sid: int, instr: int, params: bytes) -> None:
        if instr == 0x83:  # SYNC WRITE: addr, len, then (id, data×len)…
            addr, ln = params[0], params[1]
            block = params[2:]
            for k in range(0, len(block) - ln, ln + 1):
                tid = block[k]
                if tid in self.mem:
                    self._store(tid, addr, block[k + 1 : k + 1 + ln])
            return
        if sid not in self.mem or sid in self.mute:
            return
        err = self.status_error.get(sid, 0)
        if instr == 0x01:
            self.send(status(sid, err))
        elif instr == 0x02:
            addr, ln = params[0], params[1]
            self.send(status(sid, err, bytes(self.mem[sid][addr : addr + ln])))
        elif instr == 0x03:
            self._store(sid, params[0], params[1:])
            self.send(status(sid, err))
