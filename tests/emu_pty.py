"""A serial device emulator on a real pty: the driver opens the slave, the emulator drives the master.

The emulator thread polls the master fd. It sees ``POLLHUP`` while no program has the slave
open, which is how it notices the port being opened (a board that resets on open prints its
ready line then) and closed. ``unplug()`` closes the master and removes the symlink (the
driver's reads and writes fail with EIO, as with a pulled USB cable); ``replug()`` makes a
new pty and points the same symlink path at it.

Subclasses implement ``on_bytes(data)`` (called on the emulator thread with every chunk the
host wrote) and may override ``on_open()``; they answer with ``send(data)``.
"""

from __future__ import annotations

import os
import select
import threading
import time
import tty
from pathlib import Path


class PtyDevice:
    """Base class of the byte-level device emulators.

    Args:
        link: Symlink path the driver is configured with (re-pointed on replug).
        chunk_delay_s: When > 0, replies are written one byte at a time with this pause
            (exercises the host's partial-read handling).
    """

    def __init__(self, link: Path, chunk_delay_s: float = 0.0) -> None:
        self.link = Path(link)
        self.chunk_delay_s = chunk_delay_s
        self.rx = bytearray()
        self.opens = 0
        self.silent = False
        self._lock = threading.Lock()
        self._master: int | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # --- lifecycle --------------------------------------------------------------
    def plug(self) -> PtyDevice:
        """Create the pty, point the symlink at it, start the emulator thread."""
        master, slave = os.openpty()
        tty.setraw(slave)
        name = os.ttyname(slave)
        os.close(slave)
        self._master = master
        self.link.parent.mkdir(parents=True, exist_ok=True)
        if self.link.is_symlink() or self.link.exists():
            self.link.unlink()
        self.link.symlink_to(name)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(master, self._stop), daemon=True)
        self._thread.start()
        return self

    def unplug(self) -> None:
        """Pull the cable: close the master, remove the symlink."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self.link.is_symlink():
            self.link.unlink()
        with self._lock:
            m, self._master = self._master, None
        if m is not None:
            os.close(m)

    def replug(self) -> PtyDevice:
        """Plug in again on a fresh pty behind the same symlink."""
        self.unplug()
        self.on_power_cycle()
        return self.plug()

    close = unplug

    # --- I/O ------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        """Write bytes towards the host (dropped when the port is closed or unplugged)."""
        with self._lock:
            m = self._master
        if m is None:
            return
        try:
            if self.chunk_delay_s > 0:
                for i in range(len(data)):
                    os.write(m, data[i : i + 1])
                    time.sleep(self.chunk_delay_s)
            else:
                os.write(m, data)
        except OSError:
            pass

    def _loop(self, master: int, stop: threading.Event) -> None:
        poller = select.poll()
        poller.register(master, select.POLLIN)
        is_open = False
        while not stop.is_set():
            events = poller.poll(20)
            ev = events[0][1] if events else 0
            if ev & select.POLLIN:
                try:
                    data = os.read(master, 4096)
                except OSError:
                    data = b""
                if data:
                    if not is_open:
                        is_open = True
                        self.opens += 1
                        self.on_open()
                    self.rx += data
                    if not self.silent:
                        self.on_bytes(data)
                    continue
            if ev & select.POLLHUP:
                if is_open:
                    is_open = False
                    self.on_close()
                time.sleep(0.005)
                continue
            if not is_open:
                is_open = True
                self.opens += 1
                self.on_open()

    # --- hooks --------------------------------------------------------------------------
    def on_open(self) -> None:
        """The host opened the port."""

    def on_close(self) -> None:
        """The host closed the port."""

    def on_power_cycle(self) -> None:
        """The device lost power (between unplug and replug)."""

    def on_bytes(self, data: bytes) -> None:
        """Bytes from the host."""
        raise NotImplementedError


def settle(dev: PtyDevice, quiet_s: float = 0.05, timeout: float = 3.0) -> None:
    """Wait until the emulator has received no new bytes for ``quiet_s`` (commands without replies)."""
    deadline = time.monotonic() + timeout
    n = -1
    while time.monotonic() < deadline and n != len(dev.rx):
        n = len(dev.rx)
        time.sleep(quiet_s)
