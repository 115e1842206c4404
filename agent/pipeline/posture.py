"""The body's posture follows who has the floor: listening, thinking, idle.

A person who is listened to sees it: while the user speaks the robot takes its ``listening``
posture (a Reachy Mini raises its antennas and tilts its head), from the end of the user's
turn until the robot's first word its ``thinking`` posture, then ``idle`` again (the speech
sway takes over while it talks). Postures are offsets the robot's motion loop blends in and
out (:meth:`hardware.robot.Robot.set_posture`); they never replace a gesture.

The turn-taking stage reports the user's side (:meth:`Postures.user_speaking`,
:meth:`Postures.user_done`); the pipeline reports the robot's (:meth:`Postures.robot_speaking`
on the first played sample, :meth:`Postures.turn_over` when a turn is done). A person who starts
to speak wakes a sleeping robot (``go_to_sleep`` says "talk to me to wake me up").

:func:`changes_mind` reads a turn's words for a change of mind ("no, nod instead"): that turn's
first gesture may cut what an earlier turn still plays (:meth:`hardware.robot.Robot.begin_turn`);
otherwise gestures run one after another, each to its end.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger(__name__)


CHANGE_OF_MIND = re.compile(
    r"^\s*(no|nope|wait)\b|\b(instead|actually|rather|never mind|nevermind|on second thought|"
    r"change of plans?|scratch that|forget (that|it))\b",
    re.IGNORECASE,
)
"""Words that take back what was asked before: a leading "no"/"wait", or "instead", "actually", ..."""


def changes_mind(text: str) -> bool:
    """Whether a user's words change their mind about what the robot does ("no, nod instead").

    Args:
        text: The user's turn.

    Returns:
        True for a leading "no", "nope" or "wait", or "instead", "actually", "rather", "never
        mind", "on second thought", "change of plan(s)", "scratch that", "forget that/it".
    """
    return bool(CHANGE_OF_MIND.search(text or ""))


class Body(Protocol):
    """What the postures need of the robot."""

    def set_posture(self, name: str) -> bool:
        """Blend into a named posture; True when it changed."""
        ...

    def wake(self) -> bool:
        """Wake from the rest pose (neutral, antennas up); True when it was asleep."""
        ...


class Postures:
    """Maps floor changes to postures; calls are cheap and safe from any stage thread.

    Args:
        body: The robot, or None (no body: every call does nothing).
        listeners: Told who has the floor at each change (``user``, ``thinking``, ``robot``,
            ``idle``): the attention and idle life (:mod:`agent.pipeline.body_life`).
    """

    def __init__(self, body: Body | None, listeners: list[Callable[[str], None]] | None = None) -> None:
        self.body = body
        self.listeners = list(listeners or [])
        self.floor = "idle"
        """Who has the floor now: ``user`` (speaking), ``thinking``, ``robot`` (speaking) or ``idle``."""
        self._user = False  # the user is speaking
        self._waiting = False  # a user turn was handed over and the robot has not spoken yet

    def _tell(self, floor: str) -> None:
        if floor == self.floor:
            return
        self.floor = floor
        for listen in self.listeners:
            try:
                listen(floor)
            except Exception:  # noqa: BLE001 - a listener must never stop turn-taking
                log.exception("floor listener failed")

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
            self._tell("user")
            if self.body is not None:
                try:
                    cut = getattr(self.body, "cut_idle", None)
                    if cut is not None:
                        cut()  # an idle glance ends when someone speaks
                    wake = getattr(self.body, "wake", None)
                    if wake is not None:
                        wake()
                except Exception:  # noqa: BLE001 - waking must never stop turn-taking
                    log.exception("waking the robot failed")
            self._set("listening")
        elif not speaking and self._user:
            self._user = False
            self._tell("thinking" if self._waiting else "idle")
            self._set("thinking" if self._waiting else "idle")

    def user_done(self) -> None:
        """The user's utterance was handed over: the robot is thinking until it speaks."""
        self._user, self._waiting = False, True
        self._tell("thinking")
        self._set("thinking")

    def robot_speaking(self) -> None:
        """The robot's first sample of a turn is playing."""
        self._waiting = False
        if not self._user:
            self._tell("robot")
            self._set("idle")

    def turn_over(self) -> None:
        """A turn is done (spoken, silent or cancelled)."""
        self._waiting = False
        if not self._user:
            self._tell("idle")
            self._set("idle")
