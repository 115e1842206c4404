"""The console as one object: feed, hub, snapshots, controls and the web servers.

Life cycle, as ``bolt-agent run --console`` uses it::

    console = Console(cfg.console)
    server = console.serve(host, port, token)   # bound at once: a busy port fails before loading
    core, bus = build_agent(cfg, console.tee(printer))
    pipeline = live_pipeline(core, bus, backend)
    console.attach(core, bus, pipeline, verdict)  # controls and snapshots from now on
    ...
    console.close()

Until :meth:`attach` the page shows the agent loading and the controls answer 503.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent.config import ConsoleConfig
from agent.console import snapshot
from agent.console.app import build_app
from agent.console.auth import Access, RateLimiter, is_loopback
from agent.console.controls import Controls
from agent.console.feed import ConsoleFeed, StateTicker, tee
from agent.console.hub import Hub, dumps
from agent.console.server import ConsoleServer
from agent.events import Event

if TYPE_CHECKING:
    from agent.memplan import BudgetVerdict
    from agent.pipeline import AgentCore, Bus, Pipeline

log = logging.getLogger(__name__)

LOADING = dumps({"event": "info", "turn_id": -1, "loading": True})


class Console:
    """The live web console of one agent.

    Args:
        cfg: ``[console]`` (queue size, rate limit).
    """

    def __init__(self, cfg: ConsoleConfig) -> None:
        self.cfg = cfg
        self.hub = Hub(cfg.queue_events)
        self.feed = ConsoleFeed(self.hub)
        self.controls: Controls | None = None
        self.core: AgentCore | None = None
        self.pipeline: Pipeline | None = None
        self._info = LOADING
        self._ticker: StateTicker | None = None
        self.servers: list[ConsoleServer] = []

    def tee(self, emit: Callable[[Event], None]) -> Callable[[Event], None]:
        """``emit`` followed by the console's feed: build the agent's bus with this."""
        return tee(emit, self.feed)

    def serve(self, host: str, port: int, token: str | None = None) -> ConsoleServer:
        """Start a web server for this console on ``host:port``.

        Args:
            host: Bind address; anything but a loopback address requires ``token``.
            port: Port (0 = any free one).
            token: The token every request must carry; None (loopback only) = none needed.

        Raises:
            ValueError: a non-loopback address without a token.
            OSError: the address cannot be bound.
            RuntimeError: the server did not start.
        """
        access = Access(token, is_loopback(host))
        server = ConsoleServer(
            build_app(self, access, RateLimiter(self.cfg.rate_per_s, self.cfg.burst)), host, port
        )
        server.start()
        self.servers.append(server)
        return server

    def attach(
        self, core: AgentCore, bus: Bus, pipeline: Pipeline, verdict: BudgetVerdict | None = None
    ) -> None:
        """Connect the running agent: info, snapshots and controls start working.

        Args:
            core: The agent's parts.
            bus: Its bus (controls publish notices on it).
            pipeline: The running pipeline (typed turns, mute).
            verdict: ``run``'s memory-plan verdict, if it made one (otherwise made here).
        """
        self.core, self.pipeline = core, pipeline
        self.feed.positions.update(core.robot.positions())
        self._info = dumps(snapshot.info(core.cfg, core.robot, core.vision, verdict))
        self.hub.post(self._info)  # pages already open; new ones start with info_message()
        self.controls = Controls(core, bus, pipeline)
        self._ticker = StateTicker(
            self.hub,
            self.feed,
            core.robot,
            core.vision,
            lambda: (pipeline.muted, pipeline.can_mute),
        )
        self._ticker.tick()
        self._ticker.start()

    def info_message(self) -> str:
        """The ``info`` message a new page starts with (``loading`` before :meth:`attach`)."""
        return self._info

    def state(self) -> dict[str, Any]:
        """The newest ``info``, ``body`` and ``camera`` messages by name, and per-client queue stats."""
        out: dict[str, Any] = {"info": json.loads(self._info), "clients": self.hub.stats()}
        latest = self.hub.latest()
        for name in ("body", "camera"):
            out[name] = json.loads(latest[name]) if name in latest else None
        return out

    def frame_jpeg(self) -> bytes | None:
        """The camera's newest frame with boxes, or None (no camera, no frame yet)."""
        vision = self.core.vision if self.core is not None else None
        return snapshot.frame_jpeg(vision) if vision is not None else None

    def close(self) -> None:
        """Stop snapshots, end every stream and stop the servers."""
        if self._ticker is not None:
            self._ticker.close()
        self.hub.close()
        for s in self.servers:
            s.stop()
        self.servers.clear()
