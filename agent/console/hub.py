"""Fan-out of console messages to browsers: one bounded queue per client, never a wait.

The agent's stage threads call :meth:`Hub.post` (through :class:`~agent.console.feed.ConsoleFeed`)
with one message already serialized to JSON. ``post`` takes one short lock, appends the
message to every client's queue and returns: it never blocks on a browser. A client whose
queue is full loses its *oldest* message (the page then shows fresh state) and the loss is
counted; the count reaches the page as a ``console`` message (``dropped``) before the next
message it does get. A slow or hung browser therefore loses events, never the robot's voice.

Each client is read by one coroutine of the web server (:meth:`Client.take`), on the
server's event loop; ``post`` wakes it with ``loop.call_soon_threadsafe`` only when it is
waiting. The last ``history`` conversation messages are kept so a page opened (or reloaded)
mid-conversation starts with them.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import threading
from typing import Any

log = logging.getLogger(__name__)


def dumps(msg: dict[str, Any]) -> str:
    """One message as compact JSON (anything not JSON-native becomes its ``str``)."""
    return json.dumps(msg, default=str, separators=(",", ":"))


class Client:
    """One connected page: a bounded queue of JSON messages and a dropped-message counter.

    Args:
        loop: The web server's event loop (where :meth:`take` runs).
        maxlen: Messages kept before the oldest is dropped.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None, maxlen: int) -> None:
        self.loop = loop
        self.queue: collections.deque[str] = collections.deque()
        self.maxlen = maxlen
        self.dropped = 0
        self._reported = 0
        self._waiting = False
        self._wake = asyncio.Event() if loop is not None else None
        self.closed = False

    def _put(self, msg: str) -> None:
        """Called with the hub's lock held."""
        if len(self.queue) >= self.maxlen:
            self.queue.popleft()
            self.dropped += 1
        self.queue.append(msg)
        if self._waiting and self.loop is not None and self._wake is not None:
            self._waiting = False
            try:
                self.loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:  # the server's loop is closed: nobody is reading any more
                self.closed = True

    def _drain(self) -> list[str]:
        """Called with the hub's lock held: everything queued, after a dropped notice if due."""
        out = []
        if self.dropped != self._reported:
            self._reported = self.dropped
            out.append(dumps({"event": "console", "turn_id": -1, "dropped": self.dropped}))
        out.extend(self.queue)
        self.queue.clear()
        return out


class Hub:
    """Thread-safe fan-out with per-client bounded queues (see the module docstring).

    Args:
        maxlen: Messages kept per client (``[console] queue_events``).
        history: Conversation messages replayed to a new client (at most half of ``maxlen``).
    """

    def __init__(self, maxlen: int = 256, history: int = 200) -> None:
        self.maxlen = maxlen
        self._lock = threading.Lock()
        self._clients: list[Client] = []
        self._history: collections.deque[str] = collections.deque(maxlen=max(1, min(history, maxlen // 2)))
        self._latest: dict[str, str] = {}
        self.closed = False

    @property
    def clients(self) -> int:
        """Number of connected clients."""
        with self._lock:
            return len(self._clients)

    def post(self, msg: str, *, keep: bool = False, latest: str | None = None) -> None:
        """Queue one JSON message for every client; never blocks.

        Args:
            msg: The message, serialized (:func:`dumps`).
            keep: Also keep it for clients that connect later (conversation messages).
            latest: Keep it as the newest message of this kind (state snapshots), replayed
                to clients that connect later.
        """
        with self._lock:
            if keep:
                self._history.append(msg)
            if latest is not None:
                self._latest[latest] = msg
            for c in self._clients:
                c._put(msg)

    def stats(self) -> list[dict[str, int]]:
        """Per connected client: messages ``queued`` now and ``dropped`` so far."""
        with self._lock:
            return [{"queued": len(c.queue), "dropped": c.dropped} for c in self._clients]

    def latest(self) -> dict[str, str]:
        """The newest snapshot message of each kind (``body``, ``camera``)."""
        with self._lock:
            return dict(self._latest)

    def connect(self, loop: asyncio.AbstractEventLoop | None, first: tuple[str, ...] = ()) -> Client:
        """Register a client; its queue starts with ``first``, the newest snapshots and the history.

        Args:
            loop: The event loop its reader (:meth:`take`) runs on; None for :meth:`take_now` only.
            first: Messages to send before anything else (the page's static info).
        """
        c = Client(loop, self.maxlen)
        with self._lock:
            for msg in (*first, *self._latest.values(), *self._history):
                c._put(msg)
            c.dropped = c._reported = 0  # a replay cut to the bound is not a loss
            self._clients.append(c)
        return c

    def disconnect(self, client: Client) -> None:
        """Forget a client (its page closed)."""
        with self._lock:
            client.closed = True
            if client in self._clients:
                self._clients.remove(client)

    def take_now(self, client: Client) -> list[str]:
        """Everything queued for ``client`` (after a ``dropped`` notice when it lost messages)."""
        with self._lock:
            return client._drain()

    async def take(self, client: Client, timeout: float) -> list[str]:
        """Wait up to ``timeout`` s for messages for ``client``; [] on timeout or once closed."""
        if client._wake is None:
            raise ValueError("take() needs a client connected with its event loop")
        with self._lock:
            if self.closed or client.closed:
                return []
            out = client._drain()
            if out:
                return out
            client._wake.clear()
            client._waiting = True
        try:
            await asyncio.wait_for(client._wake.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        with self._lock:
            client._waiting = False
            return [] if self.closed or client.closed else client._drain()

    def close(self) -> None:
        """End every client's stream (the server is stopping)."""
        with self._lock:
            self.closed = True
            clients = list(self._clients)
        for c in clients:
            if c.loop is not None and c._wake is not None:
                try:
                    c.loop.call_soon_threadsafe(c._wake.set)
                except RuntimeError:  # loop already closed
                    pass
