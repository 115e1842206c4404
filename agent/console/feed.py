"""From the agent's typed messages to console messages: the event feed and the state ticker.

:class:`ConsoleFeed` is one more outside sink of the :class:`~agent.pipeline.Bus`: the CLI
tees the printer's ``emit`` into it (:func:`tee`), so the page sees exactly the public
messages ``--json`` prints, in the same JSON shape (``Event.to_json()``), plus:

* ``t`` — wall-clock time of the message, ms since the epoch;
* on ``tool_result`` and ``background_done`` — ``duration_ms`` since the matching
  ``tool_call``.

Messages about the turn still in progress (``end_of_turn_check``: the transcript so far at
a pause, i.e. the partial transcript) are sent live but not kept for pages opened later.

Joint commands (``robot``, 50 a second per joint) are not forwarded one by one: the feed
keeps the newest position per joint and :class:`StateTicker` sends a ``body`` snapshot
(positions, animation, e-stop, torque, mute) at most ``rate_hz`` times a second when it
changed, and a ``camera`` message when the vision thread described a new frame.

The feed runs on the stage threads that publish: it serializes the message once and
hands it to the :class:`~agent.console.hub.Hub`, which never blocks; any failure is
logged and swallowed, so the console can never stop a stage.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from agent.console import snapshot
from agent.console.hub import Hub, dumps
from agent.events import BackgroundDone, Event, RobotCommand, RobotParked, ToolCall, ToolResult
from hardware.perception.watcher import Vision
from hardware.robot import Robot

log = logging.getLogger(__name__)

TRANSIENT = ("end_of_turn_check", "utterance")
"""Sent live but not replayed to pages opened later: the user's turn in progress (what was heard
so far at a pause) and per-utterance detail the page does not show."""


def tee(*sinks: Callable[[Event], None]) -> Callable[[Event], None]:
    """One ``emit`` that calls every sink in order (e.g. the CLI printer, then the console)."""

    def emit(ev: Event) -> None:
        for sink in sinks:
            sink(ev)

    return emit


class ConsoleFeed:
    """Callable event sink that forwards public messages to the hub (see the module docstring).

    Args:
        hub: Where messages go.
        clock: Monotonic clock for tool durations, s.
    """

    def __init__(self, hub: Hub, clock: Callable[[], float] = time.perf_counter) -> None:
        self.hub = hub
        self.clock = clock
        self.positions: dict[str, float] = {}
        """Newest commanded position per joint, degrees (seeded from the robot by the console)."""
        self._calls: dict[str, float] = {}
        self._failures = 0

    def __call__(self, ev: Event) -> None:
        """Forward one message; never raises."""
        try:
            self._forward(ev)
        except Exception:  # the console must never stop a pipeline stage
            self._failures += 1
            if self._failures in (1, 10, 100) or self._failures % 1000 == 0:
                log.exception("console feed failed (%d times)", self._failures)

    def _forward(self, ev: Event) -> None:
        if isinstance(ev, RobotCommand):
            self.positions[ev.joint] = ev.deg
            return
        if isinstance(ev, RobotParked):
            self.positions.update(ev.positions)
        msg: dict[str, Any] = ev.to_json()
        msg["t"] = round(time.time() * 1000.0, 1)
        now = self.clock()
        if isinstance(ev, ToolCall):
            self._calls[ev.call_id] = now
            if len(self._calls) > 256:  # calls whose result never came
                self._calls.pop(next(iter(self._calls)))
        elif isinstance(ev, (ToolResult, BackgroundDone)):
            t0 = self._calls.pop(ev.call_id, None)
            msg["duration_ms"] = round((now - t0) * 1000.0, 1) if t0 is not None else None
        self.hub.post(dumps(msg), keep=ev.name not in TRANSIENT and "partial" not in ev.name)


class StateTicker:
    """A daemon thread that sends ``body`` and ``camera`` snapshots when they change.

    Args:
        hub: Where snapshots go.
        feed: The newest joint positions.
        robot: E-stop, animation and torque state.
        vision: The camera's scene state, or None without a camera.
        muted: Returns ``(muted, can_mute)`` for the microphone.
        rate_hz: Snapshots per second at most.
    """

    def __init__(
        self,
        hub: Hub,
        feed: ConsoleFeed,
        robot: Robot,
        vision: Vision | None,
        muted: Callable[[], tuple[bool, bool]],
        rate_hz: float = 10.0,
    ) -> None:
        self.hub, self.feed, self.robot, self.vision, self.muted = hub, feed, robot, vision, muted
        self.period = 1.0 / rate_hz
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-state", daemon=True)
        self._last_body = ""
        self._last_scene_t: float | None = None

    def start(self) -> None:
        """Start sending snapshots."""
        self._thread.start()

    def tick(self) -> None:
        """Send what changed since the last tick (the thread calls this ``rate_hz`` times a second)."""
        muted, can_mute = self.muted()
        body = dumps(snapshot.body(self.robot, dict(self.feed.positions), muted, can_mute))
        if body != self._last_body:
            self._last_body = body
            self.hub.post(body, latest="body")
        if self.vision is not None:
            scene = self.vision.latest()
            if scene is not None and scene.t != self._last_scene_t:
                self._last_scene_t = scene.t
                cam = snapshot.camera(self.vision)
                if cam is not None:
                    self.hub.post(dumps(cam), latest="camera")

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.tick()
            except Exception:  # a snapshot bug must not end the console
                log.exception("console state snapshot failed")

    def close(self) -> None:
        """Stop the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(1.0)
