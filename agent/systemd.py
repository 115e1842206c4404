"""systemd service integration (``Type=notify``): readiness, watchdog, start-up extension, log priorities.

The notify protocol is one datagram to the socket named by ``$NOTIFY_SOCKET`` (a leading
``@`` means the Linux abstract namespace), per ``sd_notify(3)``. Outside systemd the
variable is unset and every call does nothing.

- ``READY=1`` is sent by ``bolt-agent run`` only after every model is loaded and warmed.
- While models load, :func:`extend_timeout` sends ``EXTEND_TIMEOUT_USEC=`` from a helper thread
  so a slow first load (a 6 GB GGUF read from an SD card) does not trip ``TimeoutStartSec``.
- ``WATCHDOG=1`` comes from the loop that would hang, not from a free-running thread:
  :class:`Watchdog` is called on every iteration of the listener loop and rate-limits itself
  to half of ``$WATCHDOG_USEC``; when the loop blocks, the pings stop and systemd restarts us.
- :class:`JournalFormatter` prefixes each log line with its ``sd-daemon(3)`` priority
  (``<3>`` error ... ``<7>`` debug) so journald records the right level from plain stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping


def notify(message: str, env: Mapping[str, str] | None = None) -> bool:
    """Send one notification (``READY=1``, ``STOPPING=1``, ``WATCHDOG=1``, ``STATUS=...``).

    Args:
        message: Newline-separated ``KEY=VALUE`` assignments.
        env: Environment to read ``NOTIFY_SOCKET`` from (default ``os.environ``).

    Returns:
        True when a datagram was sent; False outside systemd or when the socket is gone.
    """
    addr = (env if env is not None else os.environ).get("NOTIFY_SOCKET", "")
    if not addr:
        return False
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(message.encode(), addr)
        return True
    except OSError:
        return False


def watchdog_period(env: Mapping[str, str] | None = None) -> float | None:
    """Seconds between watchdog pings: half of ``$WATCHDOG_USEC``.

    Args:
        env: Environment to read from (default ``os.environ``).

    Returns:
        The period in seconds, or None when no watchdog is configured (or it is meant for
        another process: ``$WATCHDOG_PID`` names a different pid).
    """
    e = env if env is not None else os.environ
    usec = e.get("WATCHDOG_USEC", "")
    if not usec.isdigit() or int(usec) <= 0:
        return None
    pid = e.get("WATCHDOG_PID", "")
    if pid.isdigit() and int(pid) != os.getpid():
        return None
    return int(usec) / 2e6


class Watchdog:
    """``WATCHDOG=1`` at most once per half ``$WATCHDOG_USEC``, sent from the caller's own loop.

    Call the instance on every iteration of the loop whose hang should restart the service
    (the listener loop, every <= 50 ms); it sends a ping only when the period has passed, so
    it is cheap to call often. A stalled loop stops calling it and systemd's watchdog fires.

    Args:
        env: Environment to read ``NOTIFY_SOCKET`` and ``WATCHDOG_USEC`` from (default ``os.environ``).
        clock: Monotonic clock in seconds (tests pass their own).
    """

    def __init__(
        self, env: Mapping[str, str] | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.env = env
        self.clock = clock
        self.period = watchdog_period(env)
        self._last: float | None = None
        self.pings = 0
        """How many pings were sent."""

    @property
    def enabled(self) -> bool:
        """True when systemd asked for watchdog pings."""
        return self.period is not None

    def __call__(self) -> None:
        """Ping if half the watchdog interval has passed since the last ping (the first call pings)."""
        if self.period is None:
            return
        now = self.clock()
        if self._last is not None and now - self._last < self.period:
            return
        self._last = now
        if notify("WATCHDOG=1", self.env):
            self.pings += 1


@contextlib.contextmanager
def extend_timeout(
    status: str = "loading models...",
    extend_s: float = 30.0,
    env: Mapping[str, str] | None = None,
) -> Iterator[None]:
    """Keep systemd's start timeout from expiring while the body runs (models loading).

    Sends ``STATUS=<status>`` and ``EXTEND_TIMEOUT_USEC=<2 x extend_s>`` at once and then every
    ``extend_s / 2`` seconds from a helper thread until the body ends. Each message asks for
    ``2 x extend_s`` more: a load that hangs for longer still times out. Does nothing outside systemd.

    Args:
        status: The ``STATUS=`` text shown by ``systemctl status``.
        extend_s: Seconds between extensions (each extension covers twice that).
        env: Environment to read ``NOTIFY_SOCKET`` from (default ``os.environ``).

    Yields:
        None, while the extensions run.
    """
    e = env if env is not None else os.environ
    if not e.get("NOTIFY_SOCKET"):
        yield
        return
    usec = int(2 * extend_s * 1e6)
    stop = threading.Event()
    notify(f"STATUS={status}\nEXTEND_TIMEOUT_USEC={usec}", e)

    def loop() -> None:
        while not stop.wait(extend_s / 2):
            notify(f"EXTEND_TIMEOUT_USEC={usec}", e)

    th = threading.Thread(target=loop, name="sd-extend-timeout", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join(timeout=1.0)


def under_systemd(env: Mapping[str, str] | None = None) -> bool:
    """True when stderr goes to journald or the process is a systemd unit.

    Args:
        env: Environment to read ``JOURNAL_STREAM`` and ``INVOCATION_ID`` from (default ``os.environ``).
    """
    e = env if env is not None else os.environ
    return bool(e.get("JOURNAL_STREAM") or e.get("INVOCATION_ID"))


_PRIORITY = ((logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4), (logging.INFO, 6))


def journal_priority(levelno: int) -> int:
    """The syslog priority of a logging level: 2 crit, 3 err, 4 warning, 6 info, 7 debug.

    Args:
        levelno: A :mod:`logging` level number.
    """
    for level, prio in _PRIORITY:
        if levelno >= level:
            return prio
    return 7


class JournalFormatter(logging.Formatter):
    """Prefix every line of a record with ``<N>`` (``sd-daemon(3)``) so journald keeps its priority.

    A multi-line record (a traceback) gets the prefix on each line; journald would otherwise
    log continuation lines at the default priority.
    """

    def format(self, record: logging.LogRecord) -> str:
        """Format the record as the base formatter does, then prefix each line with its priority."""
        text = super().format(record)
        prefix = f"<{journal_priority(record.levelno)}>"
        return "\n".join(prefix + line for line in text.split("\n"))


def start_watchdog(stop: threading.Event, env: Mapping[str, str] | None = None) -> threading.Thread | None:
    """Ping ``WATCHDOG=1`` at half of ``$WATCHDOG_USEC`` from a free-running thread until ``stop`` is set.

    Kept for callers without a loop of their own; ``bolt-agent run`` uses :class:`Watchdog`
    from its listener loop instead, because a free-running thread keeps pinging while the
    loop it should guard hangs.

    Args:
        stop: Set it to end the pings.
        env: Environment to read ``NOTIFY_SOCKET`` and ``WATCHDOG_USEC`` from (default ``os.environ``).

    Returns:
        The started thread, or None when no watchdog is configured.
    """
    period = watchdog_period(env)
    if period is None:
        return None

    def loop() -> None:
        while not stop.wait(period):
            notify("WATCHDOG=1", env)

    th = threading.Thread(target=loop, name="sd-watchdog", daemon=True)
    th.start()
    return th
