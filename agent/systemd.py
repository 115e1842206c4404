"""systemd service notifications (``Type=notify``): ready after warm-up, watchdog pings.

The notify protocol is one datagram to the socket named by ``$NOTIFY_SOCKET`` (a leading
``@`` means the Linux abstract namespace), per ``sd_notify(3)``. Outside systemd the
variable is unset and every call does nothing.
"""

from __future__ import annotations

import os
import socket
import threading


def notify(message: str, env: dict[str, str] | None = None) -> bool:
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


def start_watchdog(stop: threading.Event, env: dict[str, str] | None = None) -> threading.Thread | None:
    """Ping ``WATCHDOG=1`` at half of ``$WATCHDOG_USEC`` until ``stop`` is set (None when no watchdog)."""
    usec = (env if env is not None else os.environ).get("WATCHDOG_USEC", "")
    if not usec.isdigit() or int(usec) <= 0:
        return None
    period = int(usec) / 2e6

    def loop() -> None:
        while not stop.wait(period):
            notify("WATCHDOG=1", env)

    th = threading.Thread(target=loop, name="sd-watchdog", daemon=True)
    th.start()
    return th
