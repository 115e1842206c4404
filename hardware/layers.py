"""The motion loop's layers and what the robot reports about its motors, as small pure pieces.

:class:`hardware.robot.Robot` composes, each tick: the *gesture* being played (:class:`Playing`)
and the joints a replaced gesture left behind settling back (:class:`Settle`); on top of it,
offsets: the speech sway, the *posture* blend (:class:`Blend`) and the *gaze*
(:class:`Gaze`: where the robot looks, smoothed). Everything here is a pure function of the
time it is given (seconds on the robot's clock), so tests evaluate it without a loop.

:class:`MoveTo` is the gesture of :meth:`hardware.robot.Robot.move`: it blends from the pose the
robot has when it *starts* (a move queued behind a wave starts where the wave ended).

:class:`EstopReport` and :class:`ParkReport` say what the motors do after an emergency stop and
after parking, read back from the hardware where it can tell (a Reachy Mini's daemon), so what
the robot says about its body is what the body reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hardware.animation import Gesture

POSTURE_BLEND_MS = 400.0
"""Time a posture takes to blend in or out, ms."""
SETTLE_MS = 500.0
"""Joints a replaced gesture leaves behind go back to where it would have ended over this long, ms."""
GAZE_TAU_S = 0.08
"""Time constant of the gaze's smoothing, s: 95 % of a new direction in 0.24 s (then rate limited)."""


def ease(u: float) -> float:
    """Cosine ease-in-out of ``u`` in [0, 1] (clipped)."""
    u = min(1.0, max(0.0, u))
    return 0.5 - 0.5 * math.cos(math.pi * u)


@dataclass
class Playing:
    """A gesture being played: what, since when (s), from which pose, for whom.

    ``cuttable``: anything may replace it at once (idle life); else it runs to its end and the
    next gesture waits, unless the user asked otherwise (:meth:`hardware.robot.Robot.play`).
    """

    gesture: Gesture
    t0: float
    start: dict[str, float]
    tag: object
    cuttable: bool = False
    ticks: int = 0

    def end_pose(self) -> dict[str, float]:
        """Where the gesture would have left its joints: its last pose, or its start for a loop."""
        g = self.gesture
        if g.loop:
            return {j: self.start[j] for j in g.joints if j in self.start}
        return g.evaluate(g.duration_ms, self.start)


@dataclass
class Settle:
    """Joints a replaced gesture left mid-way, blending to its end pose (degrees) from ``t0`` (s)."""

    frm: dict[str, float]
    to: dict[str, float]
    t0: float
    ms: float = SETTLE_MS

    def at(self, t: float) -> tuple[dict[str, float], bool]:
        """The pose at ``t`` (s) and whether it is done."""
        u = (t - self.t0) * 1000.0 / self.ms
        e = ease(u)
        return {j: a + (self.to[j] - a) * e for j, a in self.frm.items()}, u >= 1.0


@dataclass
class Blend:
    """The posture layer: offsets blending from ``old`` to ``new`` over :data:`POSTURE_BLEND_MS`."""

    old: dict[str, float] = field(default_factory=dict)
    new: dict[str, float] = field(default_factory=dict)
    t0: float = 0.0

    def at(self, t: float) -> tuple[dict[str, float], bool]:
        """Offsets at ``t`` (s), and whether the blend is still moving."""
        u = min(1.0, max(0.0, (t - self.t0) * 1000.0 / POSTURE_BLEND_MS))
        keys = set(self.old) | set(self.new)
        out = {k: self.old.get(k, 0.0) + (self.new.get(k, 0.0) - self.old.get(k, 0.0)) * u for k in keys}
        return out, u < 1.0


@dataclass
class Gaze:
    """Where the robot looks, as offsets (degrees) smoothed toward a target (first order, :data:`GAZE_TAU_S`).

    Joints a gesture plays are let go (their target is 0 while it plays): a gesture owns the
    joints it moves. :meth:`step` is called once per tick with the time and those joints.
    """

    target: dict[str, float] = field(default_factory=dict)
    now: dict[str, float] = field(default_factory=dict)
    t: float | None = None
    tau_s: float = GAZE_TAU_S

    def step(self, t: float, owned: set[str]) -> tuple[dict[str, float], bool]:
        """Advance to ``t`` (s); returns the offsets and whether they are still short of the target.

        Joints in ``owned`` head for 0 instead of their target (a gesture plays them); they count
        as short of it, so the loop keeps ticking until the gaze is back once the gesture ends.
        """
        dt = 0.0 if self.t is None else max(0.0, t - self.t)
        self.t = t
        k = 1.0 - math.exp(-dt / self.tau_s) if self.tau_s > 0 else 1.0
        out: dict[str, float] = {}
        short = False
        for j in set(self.target) | set(self.now):
            want = self.target.get(j, 0.0)
            goal = 0.0 if j in owned else want
            cur = self.now.get(j, 0.0)
            nxt = goal if abs(goal - cur) < 0.01 else cur + (goal - cur) * k
            short = short or abs(want - nxt) > 1e-6
            if abs(nxt) > 1e-6 or j in self.target:
                out[j] = nxt
        self.now = out
        return dict(out), short


@dataclass(frozen=True)
class MoveTo:
    """A gesture from the pose it starts in to ``target`` (degrees) over ``duration_ms``, eased."""

    name: str
    target: dict[str, float]
    ms: float
    loop: bool = False

    @property
    def duration_ms(self) -> float:
        """The move's length, ms."""
        return max(self.ms, 1.0)

    @property
    def joints(self) -> set[str]:
        """The joints it moves."""
        return set(self.target)

    def evaluate(self, t_ms: float, start: dict[str, float] | None = None) -> dict[str, float]:
        """Targets at ``t_ms``: from ``start`` (the pose when it started) to ``target``."""
        e = ease(t_ms / self.duration_ms)
        start = start or {}
        return {j: start.get(j, v) + (v - start.get(j, v)) * e for j, v in self.target.items()}


@dataclass(frozen=True)
class EstopReport:
    """What an emergency stop did to the motors.

    Attributes:
        motors_on: Whether the motors are powered (holding the pose), as read back from the
            hardware when ``read_back``, else as commanded; None when nothing can tell (offline).
        read_back: The hardware reported it (a Reachy Mini's daemon).
        held: The robot holds its pose with the motors on (a Reachy Mini's head would sink).
        already: It was latched before this call (nothing was done again).
    """

    motors_on: bool | None
    read_back: bool
    held: bool
    already: bool = False

    def says(self) -> str:
        """One sentence for people, true to the report (the skill adds who clears it and how)."""
        source = " (my daemon reports them on)" if self.read_back and self.motors_on else ""
        if self.already:
            state = "on, and I am holding still" if self.motors_on else "on, and my motors are off"
            if self.motors_on is None:
                state = "on"
            return f"My emergency stop is already {state}."
        if self.motors_on is None:
            return (
                "Emergency stop: I will not move, but I cannot reach my motors to tell whether they are on."
            )
        if self.motors_on:
            why = " to hold my head up" if self.held else ""
            return f"Emergency stop: I am holding still, with my motors on{why}{source}."
        return "Emergency stop: my motors are off" + (
            " (my daemon reports them off)." if self.read_back else "."
        )


@dataclass(frozen=True)
class ParkReport:
    """Where the robot parked and what its motors do, read back after parking.

    Attributes:
        pose: ``sleep`` (the body's rest pose), ``neutral``, or ``held`` (it did not move: after
            an e-stop or while offline, or it stopped elsewhere).
        motors_on: Motors powered, read back when ``read_back`` (else as commanded); None: unknown.
        read_back: Positions and motors come from the hardware (a Reachy Mini's daemon), not from
            what was last commanded.
        positions: Joint → degrees (mm for a Reachy Mini's head translations).
    """

    pose: str
    motors_on: bool | None
    read_back: bool
    positions: dict[str, float]
