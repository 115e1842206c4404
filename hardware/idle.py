"""Idle life: small behaviours when nobody talks, so the robot looks alive and not switched off.

Every ``idle_period_s`` on average (uniformly between half and one and a half of it) of quiet,
:class:`IdleLife` draws one behaviour by weight (``[robot] idle_weights``): ``nothing`` (weighed
highest, as in Pollen's conversation app), ``breathe`` (a slow sway of the head, up and down, and
on a Reachy Mini its height), ``glance`` (a look aside and back) or ``antenna_twitch`` (a Reachy
Mini's antennas, quickly). Each is a short gesture of offsets around the pose it starts in
(:class:`Around`), so it ends where it started (wherever the robot looks), played
``cuttable``: any gesture a person asks for replaces it at once, and someone speaking ends it
(:meth:`hardware.robot.Robot.cut_idle`). Nothing starts before ``idle_after_s`` of quiet, nor
while someone speaks, the robot speaks or thinks (``quiet()`` says so), a gesture plays, the robot
sleeps, its e-stop is latched or its driver is offline.

:meth:`IdleLife.step` is pure bookkeeping on the time it is given: tests drive it with a virtual
clock and a seeded random generator; :meth:`IdleLife.start` runs it in a thread at 5 Hz.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hardware.animation import Animation, Keyframe
from hardware.robot import Robot

log = logging.getLogger(__name__)

BEHAVIOURS = ("nothing", "breathe", "glance", "antenna_twitch")
STEP_HZ = 5.0


@dataclass(frozen=True)
class Around:
    """An animation of offsets (degrees; mm) played around the pose it starts in; it ends there."""

    anim: Animation
    loop: bool = False

    @property
    def name(self) -> str:
        """The behaviour's gesture name (``idle_glance``)."""
        return self.anim.name

    @property
    def duration_ms(self) -> float:
        """Its length, ms."""
        return self.anim.duration_ms

    @property
    def joints(self) -> set[str]:
        """The joints it moves."""
        return self.anim.joints

    def evaluate(self, t_ms: float, start: dict[str, float] | None = None) -> dict[str, float]:
        """The start pose plus the offsets at ``t_ms``."""
        start = start or {}
        return {j: start.get(j, 0.0) + v for j, v in self.anim.evaluate(t_ms).items()}


def _offsets(name: str, keys: list[tuple[float, dict[str, float]]]) -> Around:
    joints = {j for _, pose in keys for j in pose}
    frames = [Keyframe(0.0, dict.fromkeys(joints, 0.0))]
    frames += [Keyframe(t, pose) for t, pose in keys]
    frames.append(Keyframe(keys[-1][0] + 700.0, dict.fromkeys(joints, 0.0)))
    return Around(Animation(name, tuple(frames)))


def idle_gestures(joints: set[str]) -> dict[str, Around]:
    """The idle behaviours this body can do, as offsets around the pose each starts in."""
    out: dict[str, Around] = {}
    if "head_pitch" in joints:
        up, down = {"head_pitch": 2.0}, {"head_pitch": -1.5}
        if "head_z" in joints:
            up, down = {**up, "head_z": 3.0}, {**down, "head_z": -2.0}
        out["breathe"] = _offsets("idle_breathe", [(1300.0, up), (2800.0, down)])
    if "head_yaw" in joints:
        for side, sign in (("left", 1.0), ("right", -1.0)):
            aside = {"head_yaw": 18.0 * sign}
            out[f"glance_{side}"] = _offsets(f"idle_glance_{side}", [(600.0, aside), (1500.0, aside)])
    if {"left_antenna", "right_antenna"} <= joints:
        out["antenna_twitch"] = _offsets(
            "idle_antenna_twitch",
            [
                (150.0, {"right_antenna": -15.0, "left_antenna": 15.0}),
                (300.0, {"right_antenna": 6.0, "left_antenna": -6.0}),
                (450.0, {"right_antenna": -10.0, "left_antenna": 10.0}),
            ],
        )
    return out


class IdleLife:
    """Draws and plays idle behaviours while it is quiet (see the module docstring).

    Args:
        robot: The body.
        quiet: True while nobody speaks or thinks (the agent's floor is free).
        period_s: Mean time between two draws, s.
        after_s: Quiet time before the first draw, s.
        weights: Behaviour → weight (:data:`BEHAVIOURS`); behaviours this body cannot do are
            dropped, the rest renormalised.
        clock: Monotonic clock, s.
        rng: Random generator (seed it in tests).
    """

    def __init__(
        self,
        robot: Robot,
        quiet: Callable[[], bool],
        period_s: float = 6.0,
        after_s: float = 8.0,
        weights: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.robot, self.quiet, self.period_s, self.after_s = robot, quiet, period_s, after_s
        self.clock = clock
        self.rng = rng or random.Random()
        self.gestures = idle_gestures(set(robot.joints))
        wanted = dict(weights or {"nothing": 0.5, "breathe": 0.25, "glance": 0.15, "antenna_twitch": 0.1})
        can = {"nothing", *self.gestures, *(["glance"] if "glance_left" in self.gestures else [])}
        self.weights = {k: w for k, w in wanted.items() if w > 0 and k in can}
        self._quiet_since: float | None = None
        self._next: float | None = None
        self.drawn: list[tuple[float, str]] = []
        """``(time, behaviour)`` of every draw, ``nothing`` included."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _may_move(self) -> bool:
        r = self.robot
        return (
            self.quiet()
            and not r.busy
            and r.playing is None
            and not r.estopped
            and not r.asleep
            and r.status()[0] == "online"
        )

    def step(self, now: float | None = None) -> str | None:
        """Draw and start one behaviour when it is time; returns what was drawn, or None.

        Any activity (someone speaks, a gesture plays, the e-stop, sleep) resets the quiet time.
        """
        now = self.clock() if now is None else now
        if not self._may_move():
            self._quiet_since, self._next = None, None
            return None
        if self._quiet_since is None:
            self._quiet_since = now
            self._next = now + self.after_s
        if self._next is None or now < self._next or not self.weights:
            return None
        names = list(self.weights)
        choice = self.rng.choices(names, weights=[self.weights[n] for n in names])[0]
        self._next = now + self.period_s * self.rng.uniform(0.5, 1.5)
        self.drawn.append((now, choice))
        if choice != "nothing":
            name = f"glance_{self.rng.choice(('left', 'right'))}" if choice == "glance" else choice
            try:
                self.robot.play(self.gestures[name], cuttable=True)
            except RuntimeError:  # latched meanwhile: nothing moves
                return None
        return choice

    def start(self) -> None:
        """Step at :data:`STEP_HZ` in a thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="idle-life", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0 / STEP_HZ):
            try:
                self.step()
            except Exception:  # noqa: BLE001 - idle life must never take the agent down
                log.exception("idle life: a step failed")

    def close(self) -> None:
        """Stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
