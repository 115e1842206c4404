"""What the pipeline has in flight: one tracker every stage reports to, instead of asking the pipeline.

An *item* of work is anything that will end in a turn or be dropped on the way: an utterance
the turn-taking stage hands over, a typed line, a background result or a greeting the driver
is about to speak. It is counted from the moment it exists until its turn is over (its
``Timing`` is derived) or a stage drops it (no speech, an echo, a stop phrase, a stale turn).
The tracker also knows the turn being generated or spoken, whether the user is inside an
utterance, and whether the input is exhausted or shutdown was asked for. From those:

* :meth:`WorkTracker.busy` / :meth:`WorkTracker.wait_idle` — a file source waits for each turn,
  ``finish`` waits for the last one;
* :meth:`WorkTracker.quiet` — the floor is free: background results and greetings may be spoken
  (nobody talking, nothing in flight, the speaker idle).

Thread-safe: one condition variable; every method is short.
"""

from __future__ import annotations

import threading
import time

from agent.control import Busy


class WorkTracker:
    """Counts of work in flight, the current turn, and the pipeline's life cycle.

    Args:
        speaker: The sink, consulted by :meth:`quiet` (None: never busy).
    """

    def __init__(self, speaker: Busy | None = None) -> None:
        self.speaker = speaker
        self._cv = threading.Condition()
        self._items = 0
        self._current: int | None = None
        self._user_speaking = False
        self._stopping = threading.Event()
        self._input_done = threading.Event()

    # --- items ---------------------------------------------------------------------------------------
    def started(self) -> None:
        """One more item is in flight (an utterance, a typed line, a background result)."""
        with self._cv:
            self._items += 1

    def finished(self) -> None:
        """An item ended: dropped, or its turn is over."""
        with self._cv:
            self._items = max(0, self._items - 1)
            self._cv.notify_all()

    @property
    def items(self) -> int:
        """Items in flight."""
        return self._items

    # --- the current turn ----------------------------------------------------------------------------
    def turn_started(self, turn_id: int) -> None:
        """The driver started generating ``turn_id``."""
        with self._cv:
            self._current = turn_id

    def turn_over(self, turn_id: int) -> None:
        """``turn_id`` was interrupted or finished; its item (if any) is not ended here."""
        with self._cv:
            if self._current == turn_id:
                self._current = None
            self._cv.notify_all()

    def take_current(self) -> int | None:
        """The turn being generated or spoken, now no longer current (an interruption); or None."""
        with self._cv:
            tid, self._current = self._current, None
            self._cv.notify_all()
            return tid

    @property
    def current_turn(self) -> int | None:
        """The turn being generated or spoken, or None."""
        return self._current

    # --- the user ------------------------------------------------------------------------------------
    @property
    def user_speaking(self) -> bool:
        """The user is inside an utterance (set by the turn-taking stage)."""
        return self._user_speaking

    @user_speaking.setter
    def user_speaking(self, on: bool) -> None:
        with self._cv:
            self._user_speaking = on
            if not on:
                self._cv.notify_all()

    # --- questions -----------------------------------------------------------------------------------
    def busy(self) -> bool:
        """An item or a turn is in flight."""
        return self._items > 0 or self._current is not None

    def quiet(self) -> bool:
        """The floor is free: not stopping, nobody speaking, nothing in flight, the speaker idle."""
        return (
            not self._stopping.is_set()
            and not self._user_speaking
            and not self.busy()
            and not (self.speaker is not None and self.speaker.busy)
        )

    def model_free(self) -> bool:
        """Nothing in flight and the speaker idle (the user may be mid-utterance): an early start may run."""
        return (
            not self._stopping.is_set()
            and not self.busy()
            and not (self.speaker is not None and self.speaker.busy)
        )

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is in flight.

        Args:
            timeout: Longest wait, s (None: no limit).

        Returns:
            False after ``timeout`` or once stopping.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while self.busy():
                left = None if deadline is None else deadline - time.monotonic()
                if (left is not None and left <= 0) or self._stopping.is_set():
                    return False
                self._cv.wait(0.1 if left is None else min(left, 0.1))
            return True

    # --- life cycle ----------------------------------------------------------------------------------
    def input_done(self) -> None:
        """The source has delivered everything."""
        self._input_done.set()

    def wait_input_done(self, timeout: float) -> bool:
        """Whether the source is exhausted, waiting at most ``timeout`` s."""
        return self._input_done.wait(timeout)

    def stop(self) -> None:
        """Shutdown was asked for (safe from a signal handler: waiters see it within 0.1 s)."""
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        """Shutdown was asked for."""
        return self._stopping.is_set()
