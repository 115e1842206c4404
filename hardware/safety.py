"""Shutdown safety: on SIGTERM/SIGINT or interpreter exit, joints go to neutral and torque off.

:func:`install_shutdown` is for the entry point (signal handlers can only be installed from
the main thread). The handler closes the robot (:meth:`hardware.robot.Robot.close`: neutral
over ``neutral_ms``, torque off, driver released) and then raises :class:`SystemExit` so the
program's own ``finally`` blocks run; ``atexit`` covers a normal exit. Closing twice is safe.
"""

from __future__ import annotations

import atexit
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

from hardware.robot import Robot

log = logging.getLogger(__name__)


def install_shutdown(
    robot: Robot, signals: tuple[int, ...] = (signal.SIGTERM,), neutral_ms: float = 500.0, exit_code: int = 0
) -> Callable[[], None]:
    """Make SIGTERM (and any other given signals) and interpreter exit park the robot safely.

    Args:
        robot: The robot to close.
        signals: Signals to handle (default SIGTERM; add ``signal.SIGINT`` to handle Ctrl-C too).
        neutral_ms: Time to reach neutral, ms.
        exit_code: Exit status used after a signal.

    Returns:
        A function that restores the previous handlers and removes the atexit hook.

    Raises:
        ValueError: called from a thread other than the main thread.

    """
    if threading.current_thread() is not threading.main_thread():
        raise ValueError("install_shutdown must be called from the main thread")

    def park() -> None:
        try:
            robot.close(neutral_ms)
        except Exception:  # shutdown must go on whatever the driver does
            log.exception("parking the robot at shutdown failed")

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.warning("signal %s: returning joints to neutral and switching torque off", signum)
        park()
        raise SystemExit(exit_code)

    previous = {s: signal.signal(s, on_signal) for s in signals}
    atexit.register(park)

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)
        atexit.unregister(park)

    return restore
