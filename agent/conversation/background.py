"""Asynchronous tool calls: which are running, and their results in the order they finished.

A ``@skill(background=True)`` returns "started" at once and reports later through the
callback made here (a result of None reports nothing: a timer the user cancelled). Results
are queued under one lock (each exactly once, in finishing order) and taken by the turn driver
between turns.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from agent.events import BackgroundDone
from agent.skills import SkillRegistry, ToolOutcome


class BackgroundCalls:
    """Bookkeeping of background calls.

    Args:
        registry: Tells which skills run in the background.
    """

    def __init__(self, registry: SkillRegistry) -> None:
        self.registry = registry
        self._done: queue.Queue[BackgroundDone] = queue.Queue()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a call finished or was uncounted
        self._finished = 0
        self.running = 0

    def callback(self, name: str, call_id: str, always: bool = False) -> Callable[[ToolOutcome], None] | None:
        """The completion callback for a call of ``name`` (None: not a background skill).

        ``always``: make one even when ``name`` is not a loaded background skill (a timer
        restored from the state store reports as ``set_timer`` whatever the skills are now).
        """
        sk = self.registry.skills.get(name)
        if not always and (sk is None or not sk.background):
            return None
        with self._lock:
            self.running += 1

        def done(outcome: ToolOutcome) -> None:
            with self._lock:
                # Queued before the count drops, so a waiter never sees neither. A call that
                # returns None has nothing left to say (a timer the user cancelled).
                if not outcome.ok or outcome.result is not None:
                    self._done.put(BackgroundDone(-1, name, outcome.ok, outcome.result, call_id))
                self.running -= 1
                self._finished += 1
                self._changed.notify_all()

        return done

    def not_started(self) -> None:
        """Uncount a call that got a :meth:`callback` and was refused before it started.

        Bad arguments or a stuck skill: it will never call back (``chat`` waited 30 s at its end
        for "set a timer for 0 seconds", rejected by the argument check).
        """
        with self._lock:
            self.running -= 1
            self._finished += 1
            self._changed.notify_all()

    def wait_finished(self, timeout: float) -> bool:
        """Block until a background call finishes (or is uncounted), at most ``timeout`` s.

        A waiter sleeps on a condition: ``chat`` and ``listen`` waiting at the end of their input
        for a timer used a whole core in a loop that never slept (37 s of CPU in a 35 s run).

        Returns:
            True when one finished during the wait, False after ``timeout``.
        """
        with self._changed:
            seen = self._finished
            return self._changed.wait_for(lambda: self._finished != seen, max(0.0, timeout))

    def next(self, timeout: float = 0.0) -> BackgroundDone | None:
        """The next finished call (FIFO, each returned once), or None after ``timeout`` s."""
        try:
            return self._done.get(timeout=timeout) if timeout > 0 else self._done.get_nowait()
        except queue.Empty:
            return None

    def waiting(self) -> bool:
        """A finished call is waiting to be spoken about."""
        return not self._done.empty()
