"""Stage liveness: the systemd watchdog pings only while every stage thread makes progress.

``WATCHDOG=1`` is sent from the listener loop (:class:`agent.systemd.Watchdog`), so on its
own it proves only that the listener runs. A hang further down (ASR, the turn driver waiting
on a model server that went silent, TTS, a speaker write that blocks) would leave the pings
going and the robot deaf for ever. Here each stage thread owns a :class:`StageClock` and
reports the item it works on (:meth:`StageClock.begin` / :meth:`StageClock.end`, by
:func:`~agent.pipeline.queues.run_stage` and the turn driver) and progress within a long one
(:meth:`StageClock.progress`: the driver on each piece of reply text). :class:`Liveness`
gates the listener's heartbeat: while a stage has been on one item with no progress for
longer than ``[live] stall_limit_s`` (45 s by default: the slowest legitimate item, a long
first prompt on a Jetson, takes a few seconds; below ``WatchdogSec=60`` of
``jetson/bolt-agent.service``) the pings are withheld, one error event and one log line name
the stage and how long it has been stuck, and systemd restarts the service when ``WatchdogSec``
passes without a ping. A stage that moves again before that (a stopped process continued)
gets its pings back and one log line says so: nothing was lost, so nothing is restarted.

Thread-safety: a clock is written by its own stage thread only (one tuple assignment) and
read by the listener thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent.events import Error, Event

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stall:
    """A stage stuck on one item.

    Attributes:
        stage: The stage thread's name (``asr``, ``driver``, ``speech``, ``turn-taking``).
        item: What it works on (a message name: ``user_turn``, ``reply_delta``...).
        stuck_s: Seconds since the item began or last made progress.
    """

    stage: str
    item: str
    stuck_s: float


class StageClock:
    """The item one stage thread works on, and since when it has made no progress.

    Args:
        stage: The stage's name, as logs and error events show it.
        clock: Monotonic clock, s.
    """

    def __init__(self, stage: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.stage = stage
        self._clock = clock
        self._item: tuple[str, float] | None = None  # (item, last progress); None: idle

    def begin(self, item: str) -> None:
        """The stage starts working on ``item`` (a message name)."""
        self._item = (item, self._clock())

    def progress(self) -> None:
        """The current item moved on (a token, a chunk of audio): its stall time starts again."""
        cur = self._item
        if cur is not None:
            self._item = (cur[0], self._clock())

    def end(self) -> None:
        """The item is handled; the stage waits for the next one (waiting is never a stall)."""
        self._item = None

    def stuck(self) -> Stall | None:
        """The current item and the seconds since its last progress; None while idle."""
        cur = self._item
        if cur is None:
            return None
        return Stall(self.stage, cur[0], self._clock() - cur[1])


class Liveness:
    """The stage clocks of one pipeline, and the gate they put on the watchdog ping.

    Args:
        limit_s: Longest time a stage may spend on one item without progress, s
            (``[live] stall_limit_s``).
        publish: The bus: one :class:`~agent.events.Error` when a stall begins.
        clock: Monotonic clock, s (shared with the stage clocks).
    """

    def __init__(
        self,
        limit_s: float,
        publish: Callable[[Event], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit_s = limit_s
        self.publish = publish
        self._clock = clock
        self._clocks: list[StageClock] = []
        self._stall: Stall | None = None  # the stall being reported, until it ends

    def stage(self, name: str) -> StageClock:
        """A new clock for the stage thread ``name``, watched from now on."""
        c = StageClock(name, self._clock)
        self._clocks.append(c)
        return c

    def stalled(self) -> Stall | None:
        """The stage stuck longest past ``limit_s``, or None when every stage moves or waits."""
        worst = None
        for c in self._clocks:
            s = c.stuck()
            if s is not None and s.stuck_s > self.limit_s and (worst is None or s.stuck_s > worst.stuck_s):
                worst = s
        return worst

    def gate(self, ping: Callable[[], None] | None) -> Callable[[], None] | None:
        """The heartbeat the listener loop calls: ``ping`` while no stage is stalled.

        Args:
            ping: The systemd watchdog (:class:`agent.systemd.Watchdog`), or None.

        Returns:
            None when ``ping`` is None (no watchdog: nothing to gate), else a callable that
            pings, or withholds the ping and reports the stall once per episode.
        """
        if ping is None:
            return None

        def heartbeat() -> None:
            if self.check():
                ping()

        return heartbeat

    def check(self) -> bool:
        """True when every stage moves; on the first check of a stall, one error event and log line.

        Also logs once when a stalled stage moves again (the pings resume).
        """
        stall = self.stalled()
        if stall is None:
            if self._stall is not None:
                log.warning(
                    "stage %s moving again after its stall on %s: watchdog pings resume",
                    self._stall.stage,
                    self._stall.item,
                )
                self._stall = None
            return True
        if self._stall is None or self._stall.stage != stall.stage:
            self._stall = stall
            what = (
                f"pipeline stage {stall.stage!r} stuck on {stall.item} for {stall.stuck_s:.1f} s "
                f"(limit {self.limit_s:g} s): watchdog pings withheld, systemd restarts the "
                "service unless it moves again"
            )
            log.error("%s", what)
            self.publish(Error(-1, what))
        return False
