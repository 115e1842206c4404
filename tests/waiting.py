"""Waiting in tests: on a condition, with a deadline, never for a fixed time.

``wait_until(cond, timeout)`` polls ``cond()`` until it is true or ``timeout`` seconds pass
and returns the last answer, so a test reads ``assert wait_until(lambda: ..., 5)``. Prefer
an event the code under test sets (``threading.Event.wait``, ``EventLog.wait_for``); poll
only state that has no event of its own (a file growing, another process's output).
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(cond: Callable[[], object], timeout: float = 5.0, step: float = 0.01) -> bool:
    """Poll ``cond()`` every ``step`` s until it is truthy or ``timeout`` s pass; return whether it is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())
