"""Stage queues: control messages overtake data, and data of a cancelled turn is dropped.

:class:`TurnGate` is the pipeline's turn generation: interrupting turn N cancels every turn
up to N, and every stage asks the gate before acting on a message, so leftovers of a
cancelled turn (text deltas, sentences, audio) die wherever they are; the turn's model round
stops through the turn's :meth:`TurnGate.stop_signal`. Messages outside any turn
(``turn_id`` -1) are never stale.

:class:`StageQueue` is the inbox of one stage thread: ``put`` appends data and puts control
messages (``Event.control``) in front; ``get`` skips stale data; ``join`` waits until every
message put has been handled (the stage calls ``done`` for each). Thread-safe.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable

from agent.control import ReleaseGate, StopSignal
from agent.events import Event
from agent.pipeline.liveness import StageClock


class TurnGate:
    """Which turns are cancelled (all ids up to :attr:`cancelled_through`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cancelled_through = -1
        self._next = 0
        self._held: dict[int, ReleaseGate] = {}  # turns heard only once their gate opens

    def new_turn(self) -> int:
        """Allocate the next turn id (0, 1, 2, ...)."""
        with self._lock:
            tid = self._next
            self._next += 1
            return tid

    def cancel(self, turn_id: int) -> None:
        """Cancel ``turn_id`` and every earlier turn."""
        with self._lock:
            self.cancelled_through = max(self.cancelled_through, turn_id)

    def stale(self, turn_id: int) -> bool:
        """True for a message of a cancelled turn."""
        return 0 <= turn_id <= self.cancelled_through

    def hold(self, turn_id: int, release: ReleaseGate) -> None:
        """Hold ``turn_id``'s sound until ``release`` opens (a turn prepared before its confirmation)."""
        with self._lock:
            self._held = {t: g for t, g in self._held.items() if t > self.cancelled_through}
            self._held[turn_id] = release

    def release_of(self, turn_id: int) -> ReleaseGate | None:
        """The gate ``turn_id``'s sound waits for, or None (heard at once)."""
        with self._lock:
            return self._held.get(turn_id)

    def stop_signal(self, turn_id: int) -> StopSignal:
        """The stop signal of ``turn_id``: set once the turn is cancelled (:meth:`cancel`).

        The turn's generation checks it between tokens, so cancelling a turn here stops its
        model too; nothing else needs to be told.
        """
        return StopSignal(when=lambda: self.stale(turn_id))


class StageQueue:
    """FIFO of messages with control messages first and stale data dropped.

    Args:
        gate: The pipeline's turn generation.
        on_drop: Called with each stale data message dropped (bookkeeping of work in flight).
        clock: The consuming stage's liveness clock (:mod:`.liveness`): :func:`run_stage`
            reports each message it handles on it. None: not watched.
    """

    def __init__(
        self,
        gate: TurnGate,
        on_drop: Callable[[Event], None] | None = None,
        clock: StageClock | None = None,
    ) -> None:
        self.gate = gate
        self.on_drop = on_drop
        self.clock = clock
        self._items: collections.deque[Event] = collections.deque()
        self._cv = threading.Condition()
        self._unfinished = 0  # put and not yet done (or dropped as stale)

    def put(self, msg: Event) -> None:
        """Queue ``msg``: control messages go in front of all data."""
        with self._cv:
            if msg.control:
                self._items.appendleft(msg)
            else:
                self._items.append(msg)
            self._unfinished += 1
            self._cv.notify_all()

    def get(self, timeout: float | None = None) -> Event | None:
        """The next live message, or None after ``timeout`` s (None: wait for ever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                while self._items:
                    msg = self._items.popleft()
                    if msg.control or not self.gate.stale(msg.turn_id):
                        return msg
                    self._unfinished -= 1
                    self._cv.notify_all()
                    if self.on_drop is not None:
                        self.on_drop(msg)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cv.wait(left)

    @property
    def waiting(self) -> bool:
        """A message is queued (not yet taken)."""
        return bool(self._items)

    def done(self) -> None:
        """A message taken with :meth:`get` has been handled."""
        with self._cv:
            self._unfinished = max(0, self._unfinished - 1)
            self._cv.notify_all()

    def join(self, timeout: float) -> bool:
        """Wait until every message put has been handled.

        Args:
            timeout: Longest wait, s.

        Returns:
            False after ``timeout``.
        """
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._unfinished > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
            return True

    def __len__(self) -> int:
        """Messages queued (stale ones included until they are skipped)."""
        return len(self._items)


def run_stage(
    inbox: StageQueue,
    handle: Callable[[Event], object],
    on_error: Callable[[Event, Exception], None],
) -> None:
    """The loop of a stage thread: take messages from ``inbox`` until ``Shutdown``.

    A message that makes ``handle`` raise goes to ``on_error`` (which reports it) and the stage
    goes on with the next one: a failing stage never stops the agent. Each message is an item
    on the inbox's liveness clock, when it has one (a hang in ``handle`` withholds the
    systemd watchdog's pings).

    Args:
        inbox: The stage's queue.
        handle: Processes one message.
        on_error: Called with the message and the exception ``handle`` raised.
    """
    from agent.events import Shutdown

    while True:
        msg = inbox.get()
        if msg is None or isinstance(msg, Shutdown):
            return
        if inbox.clock is not None:
            inbox.clock.begin(msg.name)
        try:
            handle(msg)
        except Exception as e:  # a failing stage reports and goes on
            on_error(msg, e)
        finally:
            if inbox.clock is not None:
                inbox.clock.end()
            inbox.done()
