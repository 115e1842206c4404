"""Timers that outlive the process: set, waited for, fired, and re-armed after a restart.

:class:`TimerBook` is what the timer skills get through their
:class:`~agent.skills.SkillContext` (``ctx.timers``): the timer is written to the store when it
starts (label, length, due time as UTC wall-clock seconds), written again when the user changes
it ("make it five minutes", "add two minutes": its wait follows the new due time), and removed
when it fires or the user cancels it (a cancelled timer's wait ends and reports nothing).
Shutting down removes nothing: the timer waits in the store for the next start. A timer is
found by the name the user gave it ("the tea timer"), or, named generically, as the only one or
the one set last; a name no running timer has is said plainly ("There is no pasta timer.").

At start-up :func:`rearm` hands every pending timer to the conversation's background calls,
the same path a ``set_timer`` result takes: one still running fires at its original due
time; one that came due while the agent was down is announced once ("While I was restarting,
your 5 minute timer finished.") and removed as it is queued, so no restart announces it again.
Waiting follows the wall clock in steps of at most :data:`STEP_S`, so a clock set by NTP
after boot moves the due time with it.
"""

from __future__ import annotations

import dataclasses
import math
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


def spoken_left(seconds: float) -> str:
    """Time left as said: 250 -> "4 minutes and 10 seconds", 3900 -> "1 hour and 5 minutes".

    Whole seconds, rounded up (a timer with 0.4 s left has not fired); from 10 minutes on,
    whole minutes (rounded up), and from an hour on, hours and minutes.
    """
    total = max(1, math.ceil(seconds - 1e-6))
    if total >= 600:
        total = math.ceil(total / 60) * 60
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{n} {unit}{'s' if n != 1 else ''}"
        for n, unit in ((hours, "hour"), (minutes, "minute"), (secs, "second"))
        if n
    ]
    return " and ".join(parts[:2]) if len(parts) <= 2 else f"{parts[0]}, {parts[1]} and {parts[2]}"


def set_message(label: str, seconds: float) -> str:
    """What a timer just set confirms: "10-minute tea timer.", "90-second timer." (issue 50)."""
    return f"{spoken_length(seconds).replace(' ', '-')} {label}."


def spoken_timers(timers: list[PendingTimer]) -> str:
    """Timers as said: "the tea timer for 5 minutes and the timer for 10 seconds"."""
    return " and ".join(f"the {t.label} for {spoken_duration(t.seconds)}" for t in timers)


_NOT_A_NAME = frozenset(
    "set start make cancel cancelled stop change add a an the my me for of on to it please one another "
    "new".split()
)

_LENGTH_WORDS = frozenset(
    "second seconds minute minutes hour hours half quarter one two three four five six seven eight nine ten "
    "eleven twelve fifteen twenty thirty forty fifty sixty ninety".split()
)
"""Words of a length, left out of a timer's name: the model labelled "set a timer for ten minutes"
``ten-minutes``, which made "the ten-minutes timer for 10 minutes"."""


def timer_label(label: str) -> str:
    """A timer's name as said in "the ... is done": the words the user named it by, then "timer".

    Small models label timers with the user's command ("Set a timer"), which is no name.
    A name after "called" or "named" is the name ("a timer called tea"), else the words before
    "timer" ("pasta timer"), else those after it ("the timer for the pasta"); command words,
    lengths and numbers are no name.

    Returns:
        "timer" for those and for a length ("ten-minutes"); "egg timer" for "egg timer"; "tea
        timer" for "tea" and for "Set a timer called tea".
    """
    said = [w for w in (w.strip(".,!?;:'\"") for w in label.lower().replace("-", " ").split()) if w]

    def name(words: list[str]) -> list[str]:
        return [w for w in words if w not in _NOT_A_NAME and w not in _LENGTH_WORDS and not w.isdigit()]

    called = next((i for i, w in enumerate(said) if w in _NAMING), None)
    if called is not None:
        kept = name([w for w in said[called + 1 :] if w != "timer"])
    elif "timer" in said:
        at = said.index("timer")
        kept = name(said[:at]) or name(said[at + 1 :])
    else:
        kept = name(said)
    return " ".join([*kept, "timer"])


_NAMING = frozenset({"called", "named", "labelled", "labeled"})
"""Words after which a timer's name follows ("a timer called tea")."""

_NOT_NAMED = (
    _NOT_A_NAME
    | _LENGTH_WORDS
    | frozenset(
        "is are was what which how long left your our this that these those its all any every each "
        "first last next running other".split()
    )
)


def label_in(text: str) -> str:
    """The timer a user's words name, as :func:`timer_label` gives it; "timer" when they name none.

    "a timer for ten minutes called tea", "how long is left on the tea timer?", "cancel the
    pasta timer" name "tea timer", "tea timer", "pasta timer"; "is my timer done?", "set a ten
    minute timer" name none. The timer skills read their ``label`` from the words this way on
    the small-model profile (``from_words``; docs/skills.md says why).
    """
    said = [w for w in (w.strip(".,!?;:'\"") for w in text.lower().replace("-", " ").split()) if w]
    at = next((i for i, w in enumerate(said) if w in _NAMING), None)
    if at is not None:
        name = []
        for w in said[at + 1 :]:
            if w in ("and", "then", "for", "but", "please") or len(name) == 3:
                break
            if w not in _NOT_NAMED and w != "timer" and not w.isdigit():
                name.append(w)
        if name:
            return timer_label(" ".join(name))
    if "timer" in said and said.index("timer") > 0:
        before = said[said.index("timer") - 1]
        if before not in _NOT_NAMED and not before.isdigit():
            return timer_label(before)
    return "timer"


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
        """Block until ``timer`` is due (True), or ``shutdown`` is set or it is cancelled first (False).

        The due time is read again at every step: a change (:meth:`change`) moves it.
        """
        cancelled = self._cancel_event(timer)
        while not cancelled.is_set():
            left = self.current(timer).due_utc - self.clock()
            if left <= 0:
                return True
            if shutdown.wait(min(left, STEP_S)):
                return False
        return False

    def current(self, timer: PendingTimer) -> PendingTimer:
        """The running record of ``timer`` (changed since, maybe), or ``timer`` once it is not running."""
        with self._lock:
            entry = self._running.get(timer.id)
        return entry[0] if entry is not None else timer

    def left_s(self, timer: PendingTimer) -> float:
        """Seconds until ``timer`` fires (0 when due), by the wall clock."""
        return max(0.0, self.current(timer).due_utc - self.clock())

    def find(self, label: str = "timer") -> PendingTimer:
        """The running timer ``label`` names: the one of that name, or, for "timer", the one set last.

        Args:
            label: A name as :func:`timer_label` gives it ("tea timer"), or "timer" for any.

        Raises:
            LookupError: none runs ("No timer is running."), or none has that name ("There is
                no pasta timer."); said to the user as it is.
        """
        running = self.running()
        if not running:
            raise LookupError("No timer is running.")
        if label == "timer":
            return max(running, key=lambda t: t.set_utc)
        named = [t for t in running if t.label == label]
        if not named:
            raise LookupError(f"There is no {label}.")
        return max(named, key=lambda t: t.set_utc)

    def change(self, timer: PendingTimer, seconds: float | None = None, add_s: float = 0.0) -> PendingTimer:
        """Give a running timer a new length from now, or add time to it; returns its new record.

        Args:
            timer: The timer (from :meth:`find`).
            seconds: Its new length, s, counted from now ("make it five minutes"); None: keep it.
            add_s: Seconds added to what is left ("add two minutes"; below zero takes time off).

        Raises:
            LookupError: it is no longer running.
            ValueError: the change would leave no time on it (said to the user as it is).
        """
        now = self.clock()
        with self._lock:
            entry = self._running.get(timer.id)
            if entry is None:
                raise LookupError(f"The {timer.label} is not running any more.")
            old = entry[0]
            due = (now + seconds if seconds is not None else old.due_utc) + add_s
            if due <= now:
                raise ValueError(
                    f"That leaves no time on the {old.label}; it has {spoken_left(old.due_utc - now)} left."
                )
            length = seconds if seconds is not None else old.seconds
            new = dataclasses.replace(old, seconds=float(length + add_s), due_utc=due)
            self._running[timer.id] = (new, entry[1])
        if self.store is not None:
            self.store.add_timer(new)  # the same id: the record is replaced
        return new

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
                "timer" names the one running, and asks which where several run.
            seconds: The timer's length as set, s ("the ten minute one"); None: by ``label``.

        Returns:
            The cancelled timers (their waits end within a moment and report nothing).

        Raises:
            LookupError: no timer is running, ``label`` names one no running timer has ("There
                is no pasta timer."), or several run and neither argument picks one (the message
                names them and asks which); each is said to the user as it is.
        """
        running = self.running()
        if not running:
            raise LookupError("No timer is running.")
        chosen = [t for t in running if seconds is not None and abs(t.seconds - seconds) < 0.5]
        if not chosen and label != "timer":
            chosen = [t for t in running if t.label == label]
            if not chosen:  # "cancel the pasta timer" with none: said plainly, not "which one?"
                raise LookupError(f"There is no {label}.")
        if not chosen and len(running) == 1:
            chosen = running
        if not chosen:
            raise LookupError(
                f"There are {len(running)} timers, {spoken_timers(running)}. Which one should I cancel?"
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
            timer = self.current(timer)
            with self._lock:
                entry = self._running.pop(timer.id, None)
                self._over.discard(timer.id)
            if entry is None or entry[1].is_set():
                return None
            if self.store is None or not self.store.enabled:
                return f"The {timer.label} was cancelled because I am shutting down."
            return kept_message(timer.label)
        timer = self.current(timer)  # changed since it was set, maybe
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
