"""Signals for a command that owns a robot: SIGTERM and SIGINT park it, in every phase of the command.

A robot must never be left holding a pose with its torque on because the process was told to
stop: :class:`Stopper` is entered on a command's first line, is handed the robot the moment it
exists, and parks it (neutral pose, torque off) whether the signal comes while the models load,
while a pipeline runs or while the command closes. Under systemd it says ``STOPPING=1`` first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from agent.events import Event, RobotParked
from agent.systemd import notify

if TYPE_CHECKING:
    from hardware.robot import Robot

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)
ROBOT_WAIT_S = 10.0
"""Longest wait for a robot being built (its drivers' first connection) before a signal exits, s."""


class Stopped(Exception):
    """A signal ended the command before its work was done (the robot is parked; exit status 0)."""


class Stopper:
    """SIGTERM and SIGINT for a command that owns a robot, from its first line to its last.

    Enter it before anything is built (``with Stopper() as stopper:``; main thread only).
    What a signal does depends on the phase the command is in:

    * **before** :meth:`running` (the config, :meth:`loading` the models and warming them,
      anything until a pipeline runs): the robot, handed over by
      :func:`~agent.pipeline.core.build_core` through :meth:`own` the moment it exists (and
      awaited while :meth:`loading` builds it), is parked at once, a ``robot_parked``
      message is emitted and the process exits with status 0.
    * **running** (:meth:`running`, a pipeline runs): the first signal calls the pipeline's
      ``stop``; the command returns and parks the robot as it closes the core. A second
      signal raises ``KeyboardInterrupt`` in the main thread, to break a wait.
    * **closing** (after :meth:`running`): the command is parking the robot; signals wait.

    Signals are taken by a thread of its own, woken through :func:`signal.set_wakeup_fd`:
    the main thread may be inside one long C call (a GGUF load, a warmup) for many seconds,
    and Python runs signal handlers only between bytecodes of the main thread. That thread
    ends the process with :func:`os._exit` because the main thread cannot be interrupted
    there; nothing else is left to release once the robot is parked.

    Not entered (library use, tests), it installs nothing and only records the phases.
    """

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._phase = "before"
        self._robot: Robot | None = None
        self._emit: Callable[[Event], None] | None = None
        self._stop: Callable[[], None] | None = None
        self._exiting = False
        self._taken = 0  # signals the watcher has seen
        self._handled = 0  # signals the main thread's handler has seen
        self._old: dict[int, Any] = {}
        self._old_fd = -1
        self._fds: tuple[int, int] | None = None
        self._watcher: threading.Thread | None = None

    # --- installation --------------------------------------------------------------------------
    def __enter__(self) -> Stopper:
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._fds = (r, w)
        self._old = {s: signal.signal(s, self._on_signal) for s in SIGNALS}
        self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        self._watcher = threading.Thread(target=self._watch, args=(r,), name="signals", daemon=True)
        self._watcher.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> bool:
        signal.set_wakeup_fd(self._old_fd)
        for s, h in self._old.items():
            signal.signal(s, h)
        if self._fds is not None:
            r, w = self._fds
            os.close(w)  # the watcher reads end-of-file and returns
            if self._watcher is not None:
                self._watcher.join(1.0)
            os.close(r)
        # A signal that ended the work early is a normal end, not an error.
        return kind is not None and issubclass(kind, (Stopped, KeyboardInterrupt)) and self.stopped

    @property
    def stopped(self) -> bool:
        """A signal asked the command to stop."""
        return self._taken > 0 or self._handled > 0

    # --- phases (main thread) --------------------------------------------------------------------
    def own(self, robot: Robot) -> None:
        """The robot exists: a signal before :meth:`running` parks it (``build_core``'s ``on_robot``)."""
        with self._cv:
            self._robot = robot
            self._cv.notify_all()

    @contextlib.contextmanager
    def loading(self, emit: Callable[[Event], None]) -> Iterator[None]:
        """Models load and warm up inside; ``emit`` receives ``robot_parked`` if a signal parks."""
        with self._cv:
            self._emit = emit
        self._enter("loading")
        try:
            yield
        finally:
            self._enter("before")  # wakes a watcher waiting for a robot that will not come

    @contextlib.contextmanager
    def running(self, stop: Callable[[], None]) -> Iterator[None]:
        """A pipeline runs inside: a signal calls ``stop``; on leaving, the command parks the robot."""
        with self._cv:
            self._stop = stop
        self._enter("running")
        try:
            yield
        finally:
            self._enter("closing")

    def _enter(self, phase: str) -> None:
        with self._cv:
            self._phase = phase
            exiting = self._exiting
            self._cv.notify_all()  # a watcher waiting for the robot being built looks again
        if exiting:  # the watcher is parking the robot and ends the process
            threading.Event().wait()

    # --- signals ---------------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: object) -> None:
        """The main thread's handler: only a repeated signal while running interrupts a wait."""
        self._handled += 1
        if self._handled > 1 and self._phase == "running":
            raise KeyboardInterrupt

    def _watch(self, fd: int) -> None:
        while True:
            try:
                data = os.read(fd, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum in SIGNALS:
                    self._take(signum)

    def _take(self, signum: int) -> None:
        with self._cv:
            self._taken += 1
            if self._taken > 1 or self._phase == "closing":
                return
            if self._phase == "running":
                stop = self._stop
            else:
                stop = None
                self._exiting = True
                deadline = time.monotonic() + ROBOT_WAIT_S
                while self._robot is None and self._phase == "loading" and time.monotonic() < deadline:
                    self._cv.wait(0.1)
            robot, emit = self._robot, self._emit
        if stop is not None:
            log.warning("signal %d: stopping", signum)
            stop()
            return
        log.warning("signal %d: parking the robot and exiting", signum)
        notify("STOPPING=1\nSTATUS=stopping: parking the robot")
        try:
            if robot is not None:
                rep = robot.close()
                if emit is not None:
                    emit(
                        RobotParked(-1, robot.positions(), robot.torque_on)
                        if rep is None
                        else RobotParked(-1, rep.positions, bool(rep.motors_on), rep.pose, rep.read_back)
                    )
        except Exception:  # exit whatever the driver does
            log.exception("parking the robot failed")
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(0)
