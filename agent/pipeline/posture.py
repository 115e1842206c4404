"""The body's posture follows who has the floor: listening, thinking, idle.

A person who is listened to sees it: while the user speaks the robot takes its ``listening``
posture (a Reachy Mini raises its antennas and tilts its head), from the end of the user's
turn until the robot's first word its ``thinking`` posture, then ``idle`` again (the speech
sway takes over while it talks). Postures are offsets the robot's motion loop blends in and
out (:meth:`hardware.robot.Robot.set_posture`); they never replace a gesture.

The turn-taking stage reports the user's side (:meth:`Postures.user_speaking`,
:meth:`Postures.user_done`); the pipeline reports the robot's (:meth:`Postures.robot_speaking`
on the first played sample, :meth:`Postures.turn_over` when a turn is done).
"""

from __future__ import annotations

import logging
from typing import Protocol

log = logging.getLogger(__name__)


class Body(Protocol):
    """What the postures need of the robot."""

    def set_posture(self, name: str) -> bool:
        """Blend into a named posture; True when it changed."""
        ...


class Postures:
    """Maps floor changes to postures; calls are cheap and safe from any stage thread.

    Args:
        body: The robot, or None (no body: every call does nothing).
    """

    def __init__(self, body: Body | None) -> None:
        self.body = body
        self._user = False  # the user is speaking
        self._waiting = False  # a user turn was handed over and the robot has not spoken yet

    def _set(self, name: str) -> None:
        if self.body is None:
            return
        try:
            self.body.set_posture(name)
        except Exception:  # a posture must never stop turn-taking
            log.exception("posture %s failed", name)

    def user_speaking(self, speaking: bool) -> None:
        """The VAD says the user speaks (True) or stopped without a turn (False: noise, too short)."""
        if speaking and not self._user:
            self._user = True
            self._set("listening")
        elif not speaking and self._user:
            self._user = False
            self._set("thinking" if self._waiting else "idle")

    def user_done(self) -> None:
        """The user's utterance was handed over: the robot is thinking until it speaks."""
        self._user, self._waiting = False, True
        self._set("thinking")

    def robot_speaking(self) -> None:
        """The robot's first sample of a turn is playing."""
        self._waiting = False
        if not self._user:
            self._set("idle")

    def turn_over(self) -> None:
        """A turn is done (spoken, silent or cancelled)."""
        self._waiting = False
        if not self._user:
            self._set("idle")
