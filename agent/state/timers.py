"""Timers that outlive the process: set, waited for, fired, and re-armed after a restart.

:class:`TimerBook` is what ``set_timer`` and ``cancel_timer`` get through their
:class:`~agent.skills.SkillContext` (``ctx.timers``): the timer is written to the store when it
starts (label, length, due time as UTC wall-clock seconds) and removed when it fires or the
user cancels it (a cancelled timer's wait ends and reports nothing). Shutting down removes
nothing: the timer waits in the store for the next start.

At start-up :func:`rearm` hands every pending timer to the conversation's background calls,
the same path a ``set_timer`` result takes: one still running fires at its original due
time; one that came due while the agent was down is announced once ("While I was restarting,
your 5 minute timer finished.") and removed as it is queued, so no restart announces it again.
Waiting follows the wall clock in steps of at most :data:`STEP_S`, so a clock set by NTP
after boot moves the due time with it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

from agent.state.store import PendingTimer, StateStore

STEP_S = 0.1
"""Longest single wait, s: the wall clock is read again after each step, and a cancel ends the
wait within one."""

SKILL = "set_timer"
"""The background skill whose calls re-armed timers report as."""


def spoken_length(seconds: float) -> str:
    """A timer's length as said before its label: 300 -> "5 minute", 90 -> "90 second", 7200 -> "2 hour"."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} second"


def spoken_duration(seconds: float) -> str:
    """A length as said after "for": 300 -> "5 minutes", 60 -> "1 minute", 7200 -> "2 hours"."""
    length = spoken_length(seconds)
    return length if length.startswith("1 ") else length + "s"


def spoken_timers(timers: list[PendingTimer]) -> str:
    """Timers as said: "the tea timer for 5 minutes and the timer for 10 seconds"."""
    return " and ".join(f"the {t.label} for {spoken_duration(t.seconds)}" for t in timers)


_NOT_A_NAME = frozenset("set start make cancel cancelled stop a an the my me for please".split())

_LENGTH_WORDS = frozenset(
    "second seconds minute minutes hour hours half quarter one two three four five six seven eight nine ten "
    "eleven twelve fifteen twenty thirty forty fifty sixty ninety".split()
)
"""Words of a length, left out of a timer's name: the model labelled "set a timer for ten minutes"
``ten-minutes``, which made "the ten-minutes timer for 10 minutes"."""


def timer_label(label: str) -> str:
    """A timer's name as said in "the ... is done": the model's label without command words.

    The 135M model labels timers with the user's command ("Set a timer", "Cancel the timer"),
    which made "Time is up: the Set a timer for 5 seconds is done." (a new user's ``chat``).

    Returns:
        "timer" for those and for a length ("ten-minutes"); "egg timer" for "egg timer"; "tea
        timer" for "tea".
    """
    said = [w for w in (w.strip(".,!?;:") for w in label.lower().replace("-", " ").split()) if w]
    if "timer" in said:
        said = said[: said.index("timer")]
    kept = [w for w in said if w not in _NOT_A_NAME and w not in _LENGTH_WORDS and not w.isdigit()]
    return " ".join([*kept, "timer"])


def done_message(label: str, seconds: float) -> str:
    """What a timer that fires on time reports (the model reads it out)."""
    return f"Time is up: the {label} for {spoken_duration(seconds)} is done."


def kept_message(label: str) -> str:
    """What a timer reports when the agent shuts down first: it is kept, not cancelled."""
    return f"The {label} is still set and will go on after I restart."


def missed_message(timer: PendingTimer) -> str:
    """The announcement of a timer that came due while the agent was not running."""
    return f"While I was restarting, your {spoken_length(timer.seconds)} {timer.label} finished."


class TimerBook:
    """The timers set and not fired: running ones in memory, pending ones in the state store.

    Args:
        store: Where timers are kept across restarts; None (or a disabled store) keeps
            nothing: timers then end with the process.
        clock: UTC wall clock, s since the Unix epoch (``time.time``).
    """

    def __init__(self, store: StateStore | None = None, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, tuple[PendingTimer, threading.Event]] = {}
        self._over: set[str] = set()  # ids cancelled before their wait ended: that wait ends at once

    def start(self, label: str, seconds: float) -> PendingTimer:
        """Record a timer of ``seconds`` s starting now and return it."""
        now = self.clock()
        timer = PendingTimer(uuid.uuid4().hex[:12], label, float(seconds), now + seconds, now)
        if self.store is not None:
            self.store.add_timer(timer)
        self._cancel_event(timer)
        return timer

    def _cancel_event(self, timer: PendingTimer) -> threading.Event:
        """The event that cancels ``timer``; registers it as running (also a re-armed one)."""
        with self._lock:
            if timer.id in self._over:  # cancelled before its wait began
                self._over.discard(timer.id)  # one wait per timer: kept no longer
                over = threading.Event()
                over.set()
                return over
            if timer.id not in self._running:
                self._running[timer.id] = (timer, threading.Event())
            return self._running[timer.id][1]

    def wait(self, timer: PendingTimer, shutdown: threading.Event) -> bool:
        """Block until ``timer`` is due (True), or ``shutdown`` is set or it is cancelled first (False)."""
        cancelled = self._cancel_event(timer)
        while not cancelled.is_set():
            left = timer.due_utc - self.clock()
            if left <= 0:
                return True
            if shutdown.wait(min(left, STEP_S)):
                return False
        return False

    def fired(self, timer: PendingTimer) -> None:
        """Forget a timer that went off."""
        self._forget(timer, cancelled=False)

    def cancelled(self, timer: PendingTimer) -> None:
        """Forget a timer the user cancelled (a wait on it that starts later ends at once)."""
        self._forget(timer, cancelled=True)

    def _forget(self, timer: PendingTimer, cancelled: bool) -> None:
        with self._lock:
            self._running.pop(timer.id, None)
            if cancelled:  # only until its wait has ended: weeks of timers leave no ids behind
                self._over.add(timer.id)
        if self.store is not None:
            self.store.remove_timer(timer.id)

    def pending(self) -> list[PendingTimer]:
        """Timers in the store, set and not fired, soonest first (empty without a store)."""
        return self.store.timers() if self.store is not None else []

    def running(self) -> list[PendingTimer]:
        """Timers counting down now, soonest first."""
        with self._lock:
            return sorted((t for t, _ in self._running.values()), key=lambda t: t.due_utc)

    def cancel(self, label: str = "timer", seconds: float | None = None) -> list[PendingTimer]:
        """Cancel the running timers of length ``seconds`` or called ``label``, or the only one running.

        Args:
            label: The timer's name as :func:`timer_label` gives it ("tea timer"); the generic
                "timer" (and a name no timer has: the small model's labels are unreliable)
                names the one running, and asks which where several run.
            seconds: The timer's length as set, s ("the ten minute one"); None: by ``label``.

        Returns:
            The cancelled timers (their waits end within a moment and report nothing).

        Raises:
            LookupError: no timer is running, or several are and ``label`` names none of them
                (the message is said to the user: it names them).
        """
        running = self.running()
        if not running:
            raise LookupError("no timer is set")
        chosen = [t for t in running if seconds is not None and abs(t.seconds - seconds) < 0.5]
        if not chosen and label != "timer":
            chosen = [t for t in running if t.label == label]
        if not chosen and len(running) == 1:
            chosen = running
        if not chosen:
            raise LookupError(
                f"there are {len(running)} timers, {spoken_timers(running)}. Which one should I cancel?"
            )
        with self._lock:
            for t in chosen:
                entry = self._running.get(t.id)
                if entry is not None:
                    entry[1].set()
        for t in chosen:
            self.cancelled(t)
        return chosen

    def run(self, timer: PendingTimer, shutdown: threading.Event) -> str | None:
        """Wait for ``timer`` and return its result: done (and forgotten), kept at shutdown, or None.

        None: the user cancelled it (:meth:`cancel` said so already: nothing more to report).
        With persistence off (no store, or one that could not be written) a shutdown does end
        the timer, and the result says so rather than promise a restart that will not know it.
        """
        if not self.wait(timer, shutdown):
            with self._lock:
                entry = self._running.pop(timer.id, None)
                self._over.discard(timer.id)
            if entry is None or entry[1].is_set():
                return None
            if self.store is None or not self.store.enabled:
                return f"The {timer.label} was cancelled because I am shutting down."
            return kept_message(timer.label)
        self.fired(timer)
        return done_message(timer.label, timer.seconds)


def rearm(
    book: TimerBook,
    shutdown: threading.Event,
    callback: Callable[[str, str], Callable[[str], None]],
) -> tuple[int, int]:
    """Hand the store's pending timers back to the background calls after a start.

    Args:
        book: The timers.
        shutdown: Set when the agent stops (a re-armed timer then stays in the store).
        callback: ``(skill name, call id) -> report``; ``report(text)`` hands the timer's
            result to the conversation like a finished background call (the wiring in
            :mod:`agent.pipeline.state` makes it from
            :meth:`agent.conversation.background.BackgroundCalls.callback`).

    Returns:
        ``(announced, re-armed)``: timers that came due while the agent was down (queued
        once and removed), and timers still running (each on a thread of its own).
    """
    now = book.clock()
    announced = rearmed = 0
    for timer in book.pending():
        done = callback(SKILL, f"restored-{timer.id}")
        if timer.due_utc <= now:
            book.fired(timer)  # removed as it is queued: never announced twice
            done(missed_message(timer))
            announced += 1
            continue

        def wait(timer: PendingTimer = timer, done: Callable[[str], None] = done) -> None:
            done(book.run(timer, shutdown))

        threading.Thread(target=wait, name=f"timer-{timer.id}", daemon=True).start()
        rearmed += 1
    return announced, rearmed
