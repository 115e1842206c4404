"""The message bus: every stage publishes here; the turn book listens; public messages go out.

``publish`` is called from any stage thread. Each message first updates the
:class:`~agent.pipeline.turnbook.TurnBook`; a message and the messages the book derives from
it (a turn's ``Reply`` and ``Timing``, a ``CutHistory`` for the driver) are handed to the
route the pipeline registered for their type (an ``Interrupt`` request goes to the pipeline
this way), and every *public* message reaches the outside sink (CLI printer, JSON Lines,
tests). Internal messages (audio, marks) never leave the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.events import Event
from agent.pipeline.turnbook import TurnBook


class Bus:
    """Fan-out of pipeline messages.

    Args:
        emit: The outside sink for public messages; called from several threads.
    """

    def __init__(self, emit: Callable[[Event], None]) -> None:
        self.emit = emit
        self.book = TurnBook()
        self.routes: dict[type[Event], Callable[[Event], None]] = {}

    def route(self, kind: type[Event], handler: Callable[[Event], None]) -> None:
        """Send messages of type ``kind`` (published or derived) to ``handler``, in the publishing thread."""
        self.routes[kind] = handler

    def publish(self, msg: Event) -> None:
        """Record ``msg``, emit it when public, route it, and deliver what it completes."""
        derived = self.book.on(msg)
        if msg.public:
            self.emit(msg)
        route = self.routes.get(type(msg))
        if route is not None:
            route(msg)
        for d in derived:
            handler = self.routes.get(type(d))
            if d.public:
                self.emit(d)
            if handler is not None:
                handler(d)
