"""The camera's comings and goings as events: one error per outage, one notice when it is back.

:class:`~hardware.camera.capture.Camera` calls its status callback on every change of state or message
(the retries of one outage find different reasons); people need one line per outage. A camera
missing at the start is reported by :func:`~hardware.perception.watcher.build_vision`'s messages, so only
a camera lost after the start is an error here.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.events import Error, Event, Notice


class CameraNews:
    """The camera's status callback (``(state, message)``), deduplicated into events.

    Args:
        emit: The bus.

    Called from the camera's capture thread.
    """

    def __init__(self, emit: Callable[[Event], None]) -> None:
        self.emit = emit
        self.started = False
        """Set once the agent has started (an outage before that is a start-up message)."""
        self._lost = False

    def __call__(self, state: str, message: str) -> None:
        """One camera state change: ``online``, ``offline`` (with why), ``closed``."""
        if state == "offline" and not self._lost:
            self._lost = True
            if self.started:
                self.emit(Error(-1, f"camera: {message}; vision reports no camera until it is back"))
        elif state == "online" and self._lost:
            self._lost = False
            self.emit(Notice(-1, "camera: back online"))
