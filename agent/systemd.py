"""systemd service integration (``Type=notify``): readiness, watchdog, start-up extension, log priorities.

The notify protocol is one datagram to the socket named by ``$NOTIFY_SOCKET`` (a leading
``@`` means the Linux abstract namespace), per ``sd_notify(3)``. Outside systemd the
variable is unset and every call does nothing.

- ``READY=1`` is sent by ``bolt-agent run`` only after every model is loaded and warmed.
- While models load, :func:`extend_timeout` sends ``EXTEND_TIMEOUT_USEC=`` from a helper thread
  so a slow first load (a 6 GB GGUF read from an SD card) does not trip ``TimeoutStartSec``, for
  at most ``limit_s`` (:data:`LOAD_LIMIT_S`): a load that hangs still fails the start.
- ``WATCHDOG=1`` comes from the loop that would hang, not from a free-running thread:
  :class:`Watchdog` is called on every iteration of the listener loop and rate-limits itself
  to half of ``$WATCHDOG_USEC``; when the loop blocks, the pings stop and systemd restarts us.
  The pipeline also withholds them while another stage is stuck on one item
  (:mod:`agent.pipeline.liveness`).
- :class:`JournalFormatter` prefixes each log line with its ``sd-daemon(3)`` priority
  (``<3>`` error ... ``<7>`` debug) so journald records the right level from plain stderr;
  :func:`journal_lines` does the same for lines printed without :mod:`logging`.
- :func:`service_info` reads the installed unit's state, user, environment and config
  (``systemctl show``), so ``doctor`` and ``models pull`` can use the cache the service uses;
  :func:`check_service` is ``doctor``'s check of it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hardware.check import Check

SERVICE = "bolt-agent"
LOAD_LIMIT_S = 300.0
"""Longest model load (s) for which :func:`extend_timeout` keeps extending the start timeout."""


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
    limit_s: float = LOAD_LIMIT_S,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[None]:
    """Keep systemd's start timeout from expiring while the body runs (models loading), up to ``limit_s``.

    Sends ``STATUS=<status>`` and ``EXTEND_TIMEOUT_USEC`` at once and then every ``extend_s / 2``
    seconds from a helper thread until the body ends. Each message asks for ``2 x extend_s`` more,
    never past ``limit_s`` after the start: a load that hangs, or takes longer than ``limit_s``,
    still fails the start (then ``STATUS=`` says so). Does nothing outside systemd
    (``$NOTIFY_SOCKET`` unset).

    Args:
        status: The ``STATUS=`` text shown by ``systemctl status``.
        extend_s: Seconds between extensions (each extension covers twice that).
        env: Environment to read ``NOTIFY_SOCKET`` from (default ``os.environ``).
        limit_s: Longest load the extensions cover, s from entering the block.
        clock: Monotonic clock in seconds.

    Yields:
        None, while the extensions run.
    """
    e = env if env is not None else os.environ
    if not e.get("NOTIFY_SOCKET"):
        yield
        return
    deadline = clock() + limit_s
    stop = threading.Event()

    def extension() -> str:
        left = min(2 * extend_s, max(deadline - clock(), 0.0))
        return f"EXTEND_TIMEOUT_USEC={int(left * 1e6)}"

    notify(f"STATUS={status}\n{extension()}", e)

    def loop() -> None:
        while not stop.wait(extend_s / 2):
            if clock() >= deadline:
                notify(f"STATUS={status} still not done after {limit_s:g} s; the start times out", e)
                return
            notify(extension(), e)

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
        return journal_lines(super().format(record), journal_priority(record.levelno))


def journal_lines(text: str, priority: int) -> str:
    """``text`` with ``<priority>`` (``sd-daemon(3)``: 3 error, 4 warning, 6 info) before each line.

    Args:
        text: One or more lines.
        priority: Syslog priority, 0..7.
    """
    return "\n".join(f"<{priority}>{line}" for line in text.split("\n"))


@dataclass(frozen=True)
class ServiceInfo:
    """The installed ``bolt-agent`` unit, as ``systemctl show`` reports it.

    Attributes:
        active: ``ActiveState`` (``active``, ``activating``, ``failed``, ``inactive``...).
        sub: ``SubState`` (``running``, ``auto-restart``...).
        result: ``Result`` of the last run (``success``, ``exit-code``, ``timeout``, ``watchdog``...).
        restarts: ``NRestarts``, automatic restarts since the unit was started.
        user: ``User=`` (empty: root).
        environment: ``Environment=`` assignments (drop-ins from ``systemctl edit`` included).
        exec_path: The program of ``ExecStart=``.
        config: The ``--config`` of ``ExecStart=``, or None.
    """

    active: str
    sub: str = ""
    result: str = ""
    restarts: int = 0
    user: str = ""
    environment: dict[str, str] = field(default_factory=dict)
    exec_path: str = ""
    config: Path | None = None


_SHOW = ("LoadState", "ActiveState", "SubState", "Result", "NRestarts", "User", "Environment", "ExecStart")


def service_info(name: str = SERVICE, run: Callable[..., Any] = subprocess.run) -> ServiceInfo | None:
    """State, user, environment and config of an installed unit, from ``systemctl show``.

    Args:
        name: Unit name without ``.service``.
        run: ``subprocess.run``.

    Returns:
        The unit's :class:`ServiceInfo`; None when ``systemctl`` is missing or fails (no systemd,
        a container) or the unit is not installed.
    """
    cmd = ["systemctl", "show", f"{name}.service", "--property=" + ",".join(_SHOW)]
    try:
        res = run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    props = dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)
    if props.get("LoadState", "not-found") == "not-found":
        return None
    try:
        env_words = shlex.split(props.get("Environment", ""))
    except ValueError:
        env_words = []
    environment = dict(w.split("=", 1) for w in env_words if "=" in w)
    argv = _exec_argv(props.get("ExecStart", ""))
    config = next(
        (Path(argv[i + 1]) for i, a in enumerate(argv[:-1]) if a in ("--config", "-c")),
        next((Path(a.split("=", 1)[1]) for a in argv if a.startswith("--config=")), None),
    )
    restarts = props.get("NRestarts", "0")
    return ServiceInfo(
        active=props.get("ActiveState", ""),
        sub=props.get("SubState", ""),
        result=props.get("Result", ""),
        restarts=int(restarts) if restarts.isdigit() else 0,
        user=props.get("User", ""),
        environment=environment,
        exec_path=argv[0] if argv else "",
        config=config,
    )


def _exec_argv(value: str) -> list[str]:
    """The ``argv[]=`` words of ``systemctl show``'s ``ExecStart={ path=... ; argv[]=... ; ... }``."""
    _, sep, rest = value.partition("argv[]=")
    if not sep:
        return []
    try:
        return shlex.split(rest.split(" ; ", 1)[0])
    except ValueError:
        return rest.split(" ; ", 1)[0].split()


def check_service(service: ServiceInfo | None) -> Check:
    """The state of the ``bolt-agent`` systemd service; failed or restarting is a problem with its fix.

    Args:
        service: :func:`agent.systemd.service_info` (None: not installed, or no systemd here).
    """
    if service is None:
        return Check("service", True, f"{SERVICE}.service not installed (or no systemd here)", blocking=False)
    state = f"{SERVICE}.service: {service.active} ({service.sub})"
    fix = (
        f"journalctl -u {SERVICE} -b -n 50 --no-pager  # read why, fix it, then: "
        f"sudo systemctl restart {SERVICE}"
    )
    restarts = f", {service.restarts} restarts" if service.restarts else ""
    if service.active == "failed":
        return Check("service", False, f"{state}: failed ({service.result}{restarts})", fix, blocking=False)
    if service.sub == "auto-restart" or (service.active == "activating" and service.restarts):
        return Check(
            "service",
            False,
            f"{state}: restarting after a failure ({service.result}{restarts})",
            fix,
            blocking=False,
        )
    return Check("service", True, state, blocking=False)
