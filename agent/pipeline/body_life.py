"""The body's life between commands, wired for a live run: attention, eye contact, idle life.

:func:`build_body_life` makes, from ``[robot]``: the :class:`~agent.pipeline.attention.Attention`
(look at the speaker: the body's direction-of-arrival source, :func:`hardware.registry.doa_source`;
eye contact: a :class:`~hardware.perception.faces.FaceTracker` on the camera's newest frames) and
the :class:`~hardware.idle.IdleLife`. :meth:`BodyLife.floor` is a
:class:`~agent.pipeline.posture.Postures` listener: it tells both who has the floor, so the robot
never turns toward its own voice and never idles while anyone talks. The pipeline builds it for a
live run (``bolt-agent run``: the microphone); files and typed lines get none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent.events import Event, Notice
from agent.pipeline.attention import Attention
from hardware.driver import DriverError
from hardware.idle import IdleLife
from hardware.perception.faces import FaceTracker
from hardware.registry import doa_source

if TYPE_CHECKING:
    from agent.pipeline.core import AgentCore

log = logging.getLogger(__name__)


@dataclass
class BodyLife:
    """What moves the body between commands (each part None when off or impossible)."""

    attention: Attention | None = None
    tracker: FaceTracker | None = None
    idle: IdleLife | None = None
    floor_now: str = field(default="idle")

    def floor(self, state: str) -> None:
        """Who has the floor (a :class:`~agent.pipeline.posture.Postures` listener)."""
        self.floor_now = state
        if self.attention is not None:
            self.attention.floor(state)

    def start(self) -> None:
        """Start the threads."""
        for part in (self.attention, self.tracker, self.idle):
            if part is not None:
                part.start()

    def close(self) -> None:
        """Stop the threads (the robot keeps its pose; parking is the core's)."""
        for part in (self.idle, self.tracker, self.attention):
            if part is not None:
                part.close()


def build_body_life(core: AgentCore, emit: Callable[[Event], None]) -> BodyLife:
    """The attention, eye contact and idle life of ``core``'s robot, per ``[robot]`` (not started)."""
    rc = core.cfg.robot
    robot = core.robot
    life = BodyLife()
    doa = None
    if rc.look_at_speaker:
        try:
            doa = doa_source(rc)
        except DriverError as e:  # the body's package is missing: the robot looks ahead
            emit(Notice(-1, f"look at the speaker: {e}"))
    camera = core.vision.camera if core.vision is not None else None
    if doa is not None or (rc.eye_contact and camera is not None):
        life.attention = Attention(
            robot, doa, rc.look_at_speaker, rc.eye_contact and camera is not None, rc.eye_contact_max_deg
        )
        if rc.eye_contact and camera is not None and core.vision is not None:
            hfov = getattr(core.vision.describer, "hfov_deg", core.cfg.camera.hfov_deg)
            life.tracker = FaceTracker(camera, hfov, life.attention.face, rc.eye_contact_hz)
            life.attention.prefer = life.tracker.prefer
    if rc.idle_life:
        life.idle = IdleLife(
            robot,
            lambda: life.floor_now == "idle",
            rc.idle_period_s,
            rc.idle_after_s,
            dict(rc.idle_weights),
        )
    return life
