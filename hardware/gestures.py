"""The robot's layers as a caller sees them: gestures in order, sleep and wake, sway, posture, gaze.

:class:`GestureLayers` is the part of :class:`hardware.robot.Robot` that callers use to move it
(skills, the console, the agent's attention and idle life); the motion loop that composes the
layers, the safety layer and parking are the robot's own (:mod:`hardware.robot`).

**Gestures run one after another, each to its end, in the order asked for**: :meth:`play` queues
a new one behind the running one. It cuts the running one only when the caller says so
(``queue=False``: the user asked), when the turn changed its mind (:meth:`begin_turn`), when the
running one never ends (a loop) or is idle life (``cuttable``); stop and the e-stop cancel
everything. A cut gesture's joints that the new one does not move settle back to where it
would have ended (an arm is never left raised). Moves (:meth:`move`) start from the pose the
robot has when they start. :meth:`rest` moves to a rest pose and marks the robot asleep;
:meth:`wake` (or any gesture a person asks for) first returns every joint to neutral.
:meth:`look_toward` sets the gaze: the head alone up to :data:`HEAD_REACH_DEG`, the body past it.
Calls are safe from any thread.
"""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Callable

from hardware.animation import Animation, Gesture
from hardware.joints import Joint
from hardware.layers import Blend, Gaze, MoveTo, Playing, Settle

WAKE_MS = 1500.0
"""Waking moves every joint from the rest pose to neutral over this long, ms."""
HEAD_REACH_DEG = 45.0
"""The gaze turns the head alone up to this yaw, deg; past it the body turns for the rest."""


class GestureLayers:
    """The layers' API of :class:`hardware.robot.Robot` (a mixin: the robot owns the state it uses)."""

    joints: dict[str, Joint]
    animations: dict[str, Gesture]
    postures: dict[str, dict[str, float]]
    clock: Callable[[], float]
    tag: object
    posture: str
    asleep: bool
    _lock: threading.RLock
    _wake: threading.Condition
    _idle: threading.Event
    _estopped: bool
    _playing: Playing | None
    _queue: collections.deque[tuple[Gesture, object, bool]]
    _settle: Settle | None
    _sway: Playing | None
    _posture: Blend
    _posture_pending: bool
    _gaze: Gaze
    _gaze_pending: bool
    _base: dict[str, float]
    _cut_for: object

    def _ensure_loop(self) -> None:  # the robot's motion loop
        raise NotImplementedError

    def wait_idle(self, timeout: float | None = 30.0) -> bool:  # the robot's
        """Block until no gesture runs, waits or settles back; False on timeout (s)."""
        raise NotImplementedError

    def play(
        self,
        anim: Gesture | str,
        remap: dict[str, str] | None = None,
        wait: bool = False,
        queue: bool | None = None,
        cuttable: bool = False,
    ) -> Gesture:
        """Start a gesture, or queue it behind the running one (see the module docstring).

        Args:
            anim: A gesture (keyframe animation, dance, recorded move) or the name of a loaded one.
            remap: Joint renaming (e.g. play a right-arm wave on the left arm; keyframe animations).
            wait: Block until it (and what was queued before it) ends.
            queue: None (default): after the running gesture and those queued, unless the running
                one loops or is cuttable, or this turn changed its mind (:meth:`begin_turn`);
                True: always after them; False: cut them now (the user asked).
            cuttable: Anything may replace it at once (idle life); it never wakes the robot.

        Returns:
            The gesture that was started or queued.

        Raises:
            KeyError: no gesture of that name (the message lists the known ones).
            RuntimeError: an emergency stop is latched.

        """
        if self._estopped:
            raise RuntimeError("my emergency stop is on, so I cannot move until a person clears it")
        if isinstance(anim, str):
            if anim not in self.animations:
                raise KeyError(
                    f"no animation {anim!r}; known: {', '.join(sorted(self.animations)) or 'none'}"
                )
            anim = self.animations[anim]
        if remap and isinstance(anim, Animation):
            anim = anim.remapped(remap)
        with self._lock:
            if self.asleep and not cuttable:
                self._wake_locked(WAKE_MS)
            p = self._playing
            cut = queue is False or (
                queue is None and self._cut_for is not None and self._cut_for == self.tag
            )
            if cut:
                self._cut_for = None
            if p is None:
                self._start(anim, self.tag, cuttable)
            elif cut or (queue is None and (p.cuttable or p.gesture.loop) and not self._queue):
                self._replace(anim, self.tag, cuttable)
            else:
                self._queue.append((anim, self.tag, cuttable))
            self._idle.clear()
            self._ensure_loop()
            self._wake.notify_all()
        if wait:
            self.wait_idle()
        return anim

    def move(
        self,
        targets: dict[str, float],
        duration_ms: float = 500.0,
        wait: bool = False,
        queue: bool | None = None,
    ) -> Gesture:
        """Move joints smoothly to ``targets`` (degrees) over ``duration_ms`` (ms); queued like any gesture.

        The move starts from where the joints are when it starts (:meth:`play` queues it).
        """
        return self.play(MoveTo("move", dict(targets), duration_ms), wait=wait, queue=queue)

    def begin_turn(self, tag: object, changed_mind: bool = False) -> None:
        """A new turn moves the robot from now on (:attr:`tag`).

        Args:
            tag: The turn's label.
            changed_mind: The person changed their mind ("no, nod instead"): the turn's first
                gesture cuts what an earlier one still plays or queued.
        """
        with self._lock:
            self.tag = tag
            self._cut_for = tag if changed_mind else None

    def rest(self, pose: dict[str, float], duration_ms: float) -> Gesture:
        """Move to a rest pose (the body's sleep pose) after what runs, and be asleep from now on.

        The move may be cut by :meth:`wake` (someone spoke while it went to sleep).
        """
        g = self.play(MoveTo("sleep", dict(pose), duration_ms), cuttable=True)
        with self._lock:
            self.asleep = True
        return g

    def wake(self, duration_ms: float = WAKE_MS) -> bool:
        """Wake from :meth:`rest`: every joint back to neutral (a Reachy Mini's antennas up).

        Returns:
            True when the robot was asleep and is now waking.
        """
        with self._lock:
            if not self.asleep or self._estopped:
                return False
            self._wake_locked(duration_ms)
            self._idle.clear()
            self._ensure_loop()
            self._wake.notify_all()
        return True

    def cut_idle(self) -> bool:
        """End an idle-life gesture at once (someone speaks): its joints settle back; True when one ran."""
        with self._lock:
            p = self._playing
            if p is None or not p.cuttable or self.asleep:
                return False
            left = {j: v for j, v in p.end_pose().items() if j in self._base}
            if left:
                self._settle = Settle({j: self._base[j] for j in left}, left, self.clock())
            self._playing = None
            if self._queue:
                self._start(*self._queue.popleft())
            elif self._settle is None:
                self._idle.set()
            self._wake.notify_all()
            return True

    def _wake_locked(self, duration_ms: float) -> None:
        self.asleep = False
        neutral = MoveTo("wake_up", {n: j.neutral_deg for n, j in self.joints.items()}, duration_ms)
        p = self._playing
        if p is None:
            self._start(neutral, self.tag, False)
        elif p.cuttable:
            self._replace(neutral, self.tag, False)
        else:
            self._queue.appendleft((neutral, self.tag, False))

    def sway(self, offsets: Gesture | None) -> None:
        """Layer offsets (degrees, relative to 0) on top of whatever runs, e.g. the speech sway.

        Args:
            offsets: A gesture whose poses are offsets (replaces the previous sway), or None to end it.
        """
        with self._lock:
            self._sway = Playing(offsets, self.clock(), {}, self.tag) if offsets is not None else None
            if offsets is not None and not self._estopped:
                self._ensure_loop()
                self._wake.notify_all()

    def set_posture(self, name: str) -> bool:
        """Blend into a named posture (``idle``, ``listening``, ``thinking``); unknown names are ``idle``.

        Returns:
            True when the posture changed.
        """
        with self._lock:
            if name == self.posture:
                return False
            now = self.clock()
            current, _ = self._posture.at(now)
            self._posture = Blend(current, self.postures.get(name, {}), now)
            self.posture = name
            self._posture_pending = bool(current or self._posture.new)
            if self._posture_pending and not self._estopped:
                self._ensure_loop()
                self._wake.notify_all()
            return True

    def look_toward(self, yaw_deg: float | None, pitch_deg: float = 0.0) -> None:
        """Look toward a direction relative to the held pose (degrees; yaw + = left), or let go (None).

        The head turns alone up to :data:`HEAD_REACH_DEG`; past it a body with ``body_yaw`` turns
        for the rest. Smoothed by the gaze layer, then clamped and rate limited like every command.
        """
        if yaw_deg is None:
            target: dict[str, float] = {}
        else:
            target = {"head_yaw": yaw_deg, "head_pitch": pitch_deg}
            if "body_yaw" in self.joints and abs(yaw_deg) > HEAD_REACH_DEG:
                target["body_yaw"] = yaw_deg - math.copysign(HEAD_REACH_DEG, yaw_deg)
            target = {j: v for j, v in target.items() if j in self.joints}
        with self._lock:
            if target == self._gaze.target:
                return
            self._gaze.target = target
            self._gaze_pending = True
            if not self._estopped:
                self._ensure_loop()
                self._wake.notify_all()

    @property
    def gaze(self) -> dict[str, float]:
        """The gaze offsets now (joint → degrees; empty when it looks straight from the held pose)."""
        with self._lock:
            return dict(self._gaze.now)

    @property
    def gaze_target(self) -> dict[str, float]:
        """Where the gaze heads (joint → degrees), as :meth:`look_toward` last set it."""
        with self._lock:
            return dict(self._gaze.target)

    def _start(self, anim: Gesture, tag: object, cuttable: bool) -> None:
        self._playing = Playing(anim, self.clock(), dict(self._base), tag, cuttable)

    def _replace(self, anim: Gesture, tag: object, cuttable: bool) -> None:
        """Cut the running gesture and the queue; its joints ``anim`` leaves alone settle to its end."""
        p = self._playing
        self._queue.clear()
        if p is not None:
            left = {j: v for j, v in p.end_pose().items() if j in self._base and j not in anim.joints}
            if self._settle is not None:  # an earlier cut still settling: finish with it
                left = {**{j: v for j, v in self._settle.to.items() if j not in anim.joints}, **left}
            if left:
                self._settle = Settle({j: self._base[j] for j in left}, left, self.clock())
        self._start(anim, tag, cuttable)
