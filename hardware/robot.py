"""The robot body: joints, one safety layer, a driver and one motion loop.

Data flow: gesture / speech sway / posture → the motion loop → :meth:`Robot.command` (clamp to
the joint's limits, then rate-limit to its top speed) → driver ``write``. Nothing reaches a
driver any other way.

Safety: non-numbers, NaN and infinities become the joint's neutral position (then rate
limited), unknown joints are dropped, and an emergency stop (:meth:`Robot.estop`) latches:
every command is refused until :meth:`Robot.clear_estop`. :meth:`Robot.close` parks the robot
(neutral and torque off, or the driver's own parking: a Reachy Mini goes to its sleep pose);
install it for SIGTERM with :func:`hardware.safety.install_shutdown`.

**One motion loop** (``rate_hz``, 50 by default) is the only sender of targets, as in Pollen's
conversation app. Each tick it composes three layers:

1. the *gesture* (:meth:`Robot.play`: a keyframe animation, a dance, a recorded emotion — any
   pure function of time); a new one replaces the running one (blending from the current pose)
   or waits in a queue behind it;
2. the *speech sway* (:meth:`Robot.sway`): offsets that follow the robot's own voice, added on
   top of whatever gesture runs, so talking and gesturing no longer exclude each other;
3. the *posture* (:meth:`Robot.set_posture`: idle, listening, thinking): small offsets
   (antennas, a head tilt) blended in and out.

Offsets are added to the gesture's pose, or to the held pose when no gesture runs. When no
layer has anything to say the loop sends nothing. Skills start gestures; they never send
poses themselves. Calls are safe from any thread.

Attribution: the caller labels who moves the robot (:attr:`Robot.tag`, e.g. the conversation
turn); a gesture keeps the label it was started with for every command it sends, so a wave
started in one turn is still that turn's while the next turn runs (:attr:`Robot.sending_tag`).
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hardware.animation import Animation, Gesture, linear_move
from hardware.driver import Driver, DriverState
from hardware.joints import Joint

log = logging.getLogger(__name__)

MAX_DT_S = 0.1
"""Longest time step the rate limiter credits to one command, s."""
POSTURE_BLEND_MS = 400.0
"""Time a posture takes to blend in or out, ms."""


@dataclass
class _Playing:
    """A gesture being played: what, since when, from which pose, for whom."""

    gesture: Gesture
    t0: float
    start: dict[str, float]
    tag: object
    ticks: int = 0


@dataclass
class _Blend:
    """The posture layer: offsets blending from ``old`` to ``new`` over ``POSTURE_BLEND_MS``."""

    old: dict[str, float] = field(default_factory=dict)
    new: dict[str, float] = field(default_factory=dict)
    t0: float = 0.0

    def at(self, t: float) -> tuple[dict[str, float], bool]:
        """Offsets at ``t`` (s), and whether the blend is still moving."""
        u = min(1.0, max(0.0, (t - self.t0) * 1000.0 / POSTURE_BLEND_MS))
        keys = set(self.old) | set(self.new)
        out = {k: self.old.get(k, 0.0) + (self.new.get(k, 0.0) - self.old.get(k, 0.0)) * u for k in keys}
        return out, u < 1.0


class Robot:
    """Joints + safety layer + driver + the motion loop.

    Args:
        joints: The robot's joints (limits in degrees, speeds in deg/s; a Reachy Mini's head
            translations in mm and mm/s).
        driver: Where safe commands go.
        animations: Named gestures available to :meth:`play` (keyframe animations, dances,
            recorded moves).
        rate_hz: Control rate of the motion loop, Hz.
        clock: Monotonic clock in seconds.
        postures: Named posture offsets (``listening``: joint → degrees) for :meth:`set_posture`.
        libraries: The body's animation libraries by kind (a Reachy Mini's ``dances`` and
            ``emotions``), played with :meth:`play` like any gesture.
    """

    def __init__(
        self,
        joints: list[Joint],
        driver: Driver,
        animations: dict[str, Gesture] | None = None,
        rate_hz: float = 50.0,
        clock: Callable[[], float] = time.monotonic,
        postures: dict[str, dict[str, float]] | None = None,
        libraries: dict[str, dict[str, Gesture]] | None = None,
    ) -> None:
        self.joints = {j.name: j for j in joints}
        self.driver = driver
        self.animations: dict[str, Gesture] = dict(animations or {})
        self.postures = {k: dict(v) for k, v in (postures or {}).items()}
        self.libraries = {k: dict(v) for k, v in (libraries or {}).items()}
        self.rate_hz = rate_hz
        self.clock = clock
        self._lock = threading.RLock()
        self._pos = {j.name: j.neutral_deg for j in joints}
        self._base = dict(self._pos)  # the pose without offsets (gesture output, or held)
        self._last_t: float | None = None
        self._wake = threading.Condition(self._lock)
        self._playing: _Playing | None = None
        self._queue: collections.deque[tuple[Gesture, object]] = collections.deque()
        self._sway: _Playing | None = None
        self._posture = _Blend()
        self._posture_pending = False  # a blend whose final offsets were not sent yet
        self._offsets: dict[str, float] = {}  # the posture offsets last sent
        self.posture = "idle"
        self._idle = threading.Event()
        self._idle.set()
        self._loop: threading.Thread | None = None
        self._stop_loop = False
        self.ticks = 0
        """Motion-loop ticks that sent a command (the loop rate is measured from it)."""
        self._tick_t: collections.deque[float] = collections.deque(maxlen=512)
        self._estopped = False
        self._closed = False
        self.torque_on = True
        """Whether the robot last asked its drivers to hold torque (False after close, and after
        an e-stop of a driver that cuts torque)."""
        self._closing = False
        self.tag: object = None
        """Who moves the robot now (the caller's label); a gesture keeps the one it started with."""
        self._sender = threading.local()  # the tag of what the sending thread sends
        self.on_estop: Callable[[bool], None] | None = None
        """Called with True after an e-stop latches and False after it is cleared (the agent
        records it so a restart comes back latched); from the caller's thread."""

    # --- status -------------------------------------------------------------------
    @property
    def sending_tag(self) -> object:
        """The label of what sends the current command: the playing gesture's, else :attr:`tag`.

        Read from a driver's command callback (it runs in the thread that sends).
        """
        return getattr(self._sender, "tag", self.tag)

    @property
    def estopped(self) -> bool:
        """True while an emergency stop is latched."""
        return self._estopped

    @property
    def playing(self) -> str | None:
        """Name of the gesture playing now, or None."""
        p = self._playing
        return p.gesture.name if p is not None else None

    @property
    def queued(self) -> list[str]:
        """Names of the gestures queued after the one playing, in the order they will play."""
        with self._lock:
            return [g.name for g, _ in self._queue]

    @property
    def moving(self) -> bool:
        """A gesture or the speech sway is moving the motors (their noise reaches the microphones)."""
        return self._playing is not None or self._sway is not None

    def status(self) -> tuple[DriverState, str]:
        """``(driver state, message)``: ``online``/``offline``/...; the message says what is wrong."""
        return getattr(self.driver, "state", "online"), getattr(self.driver, "message", "")

    def on_driver_status(self, name: str, state: DriverState, message: str) -> None:
        """Driver state callback: a lost link cancels the gesture; a (re)connect resets rate limiting.

        With no link the motion cannot be trusted (the device parks on its own: a board's
        watchdog, a daemon's loss), so the gesture under way is cancelled, never resumed from
        its middle when the link returns. After a (re)connect rate limiting starts from the
        pose read back.
        """
        if state == "offline":
            self.stop()
        elif state == "online":
            with self._lock:
                for joint, deg in self.driver.read().items():
                    if joint in self._pos:
                        self._pos[joint] = self._base[joint] = self.joints[joint].clamp(deg)

    # --- safety layer -------------------------------------------------------------
    def use_clock(self, clock: Callable[[], float]) -> None:
        """Run the safety layer and the motion loop on ``clock`` (monotonic s) from now on.

        A time read from the old clock says nothing on the new one, so the next command is
        rate limited like a first one (one :data:`MAX_DT_S` step from the current pose).
        """
        with self._lock:
            self.clock = clock
            self._last_t = None

    def command(self, targets: dict[str, float]) -> dict[str, float]:
        """Send joint targets through the safety layer.

        Each target is clamped to its joint's limits (NaN, infinities and non-numbers become
        the neutral position), then limited to the joint's top speed given the time since the
        previous command (at most :data:`MAX_DT_S`). Unknown joints are dropped with a warning.
        While an emergency stop is latched nothing is sent.

        Args:
            targets: Joint name → degrees (mm for a Reachy Mini's head translations).

        Returns:
            What was actually sent, joint → degrees (empty when nothing was).

        """
        with self._lock:
            if self._estopped or self._closed and not self._closing:
                return {}
            now = self.clock()
            # Time since the previous command, at most MAX_DT_S: a command after a long pause
            # (or the very first one) may move only as far as one short step allows.
            dt = MAX_DT_S if self._last_t is None else min(max(now - self._last_t, 0.0), MAX_DT_S)
            safe: dict[str, float] = {}
            for name, deg in targets.items():
                joint = self.joints.get(name)
                if joint is None:
                    log.warning("no joint named %r on this robot; command dropped", name)
                    continue
                try:
                    target = joint.clamp(float(deg))
                except (TypeError, ValueError):
                    log.warning("joint %s: %r is not a number of degrees; using neutral", name, deg)
                    target = joint.neutral_deg
                target = joint.limit_step(self._pos[name], target, dt)
                safe[name] = joint.clamp(round(target, 3))
            if safe:
                self._pos.update(safe)
                self._last_t = now
                self.driver.write(safe, 1000.0 / self.rate_hz)
            return safe

    def positions(self) -> dict[str, float]:
        """Last commanded position of every joint, degrees."""
        with self._lock:
            return dict(self._pos)

    # --- layers ---------------------------------------------------------------------
    def play(
        self,
        anim: Gesture | str,
        remap: dict[str, str] | None = None,
        wait: bool = False,
        queue: bool = False,
    ) -> Gesture:
        """Start a gesture: it replaces the running one (blending from the current pose), or queues.

        Args:
            anim: A gesture (keyframe animation, dance, recorded move) or the name of a loaded one.
            remap: Joint renaming (e.g. play a right-arm wave on the left arm; keyframe animations).
            wait: Block until it (and what was queued before it) ends.
            queue: Play it after the running gesture (and those queued) instead of replacing it.

        Returns:
            The gesture that was started or queued.

        Raises:
            KeyError: no gesture of that name (the message lists the known ones).
            RuntimeError: an emergency stop is latched.

        """
        if self._estopped:
            raise RuntimeError("my emergency stop is on, so I cannot move until someone clears it")
        if isinstance(anim, str):
            if anim not in self.animations:
                raise KeyError(
                    f"no animation {anim!r}; known: {', '.join(sorted(self.animations)) or 'none'}"
                )
            anim = self.animations[anim]
        if remap and isinstance(anim, Animation):
            anim = anim.remapped(remap)
        with self._lock:
            if queue and (self._playing is not None or self._queue):
                self._queue.append((anim, self.tag))
            else:
                self._queue.clear()
                self._start(anim, self.tag)
            self._idle.clear()
            self._ensure_loop()
            self._wake.notify_all()
        if wait:
            self.wait_idle()
        return anim

    def move(self, targets: dict[str, float], duration_ms: float = 500.0, wait: bool = False) -> Gesture:
        """Move joints smoothly to targets (degrees) over ``duration_ms`` (ms), replacing the gesture."""
        start = {j: self._base[j] for j in targets if j in self._base}
        return self.play(linear_move("move", start, targets, duration_ms), wait=wait)

    def sway(self, offsets: Gesture | None) -> None:
        """Layer offsets (degrees, relative to 0) on top of whatever runs, e.g. the speech sway.

        Args:
            offsets: A gesture whose poses are offsets (replaces the previous sway), or None to end it.
        """
        with self._lock:
            self._sway = _Playing(offsets, self.clock(), {}, self.tag) if offsets is not None else None
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
            self._posture = _Blend(current, self.postures.get(name, {}), now)
            self.posture = name
            self._posture_pending = bool(current or self._posture.new)
            if self._posture_pending and not self._estopped:
                self._ensure_loop()
                self._wake.notify_all()
            return True

    def _start(self, anim: Gesture, tag: object) -> None:
        self._playing = _Playing(anim, self.clock(), dict(self._base), tag)

    # --- the motion loop ----------------------------------------------------------
    def _ensure_loop(self) -> None:
        if self._loop is None or not self._loop.is_alive():
            self._stop_loop = False
            self._loop = threading.Thread(target=self._run_loop, name="motion-loop", daemon=True)
            self._loop.start()

    def _active(self) -> bool:
        return self._playing is not None or self._sway is not None or self._posture_pending

    def _run_loop(self) -> None:
        period = 1.0 / self.rate_hz
        while True:
            with self._lock:
                while not self._stop_loop and not self._active():
                    self._wake.wait(0.5)
                if self._stop_loop:
                    return
            t_start = time.monotonic()
            try:
                self._tick()
            except Exception:  # a driver fault must not kill the loop silently
                log.exception("motion loop: a tick failed; the gesture stops")
                with self._lock:
                    self._playing, self._sway = None, None
                    self._queue.clear()
                    self._idle.set()
            time.sleep(max(0.0, period - (time.monotonic() - t_start)))

    def _tick(self) -> None:
        """One control step: compose the layers, send through the safety layer, advance the gesture."""
        with self._lock:
            now = self.clock()
            p, done = self._playing, False
            if p is not None:
                g = p.gesture
                t_ms = (now - p.t0) * 1000.0
                if g.loop and g.duration_ms > 0:
                    t_ms %= g.duration_ms
                self._base.update({j: v for j, v in g.evaluate(t_ms, p.start).items() if j in self._base})
                p.ticks += 1
                done = not g.loop and t_ms >= g.duration_ms
            offsets: dict[str, float] = {}
            s = self._sway
            if s is not None:
                t_ms = (now - s.t0) * 1000.0
                for j, v in s.gesture.evaluate(t_ms, {}).items():
                    offsets[j] = offsets.get(j, 0.0) + v
                if t_ms >= s.gesture.duration_ms:
                    self._sway = None
            posture, blending = self._posture.at(now)
            self._posture_pending = self._posture_pending and blending  # this tick sends the final offsets
            self._offsets = posture
            for j, v in posture.items():
                offsets[j] = offsets.get(j, 0.0) + v
            touched = set(p.gesture.joints) if p is not None else set()
            target = {
                j: self._base[j] + offsets.get(j, 0.0) for j in touched | set(offsets) if j in self._base
            }
            tag = p.tag if p is not None else (s.tag if s is not None else self.tag)
        self._sender.tag = tag
        sent = self.command(target) if target else {}
        if sent:
            self.ticks += 1
            self._tick_t.append(time.monotonic())
        if done and p is not None:
            # Rate limiting may leave joints short of the final pose: the gesture ends once
            # a tick sends its final targets uncut.
            done = all(
                abs(sent.get(j, math.nan) - self.joints[j].clamp(round(target[j], 3))) < 1e-6
                for j in p.gesture.joints
                if j in target
            )
        if self._estopped:
            done = p is not None
        if done:
            with self._lock:
                if self._playing is p:
                    if self._queue:
                        self._start(*self._queue.popleft())
                    else:
                        self._playing = None
                        self._idle.set()

    def loop_stats(self) -> dict[str, float]:
        """The motion loop's recent sending rate, from its last 512 sending ticks.

        Returns:
            ``{"ticks", "rate_hz", "period_p50_ms", "period_p99_ms", "period_max_ms"}`` over
            the ticks of the most recent run of consecutive sends (gaps over 0.5 s split
            runs); zeros before two ticks.
        """
        times = list(self._tick_t)
        run: list[float] = times[-1:]
        for t in reversed(times[:-1]):
            if run[-1] - t > 0.5:
                break
            run.append(t)
        periods = sorted(a - b for a, b in zip(run, run[1:], strict=False))
        if not periods:
            return {
                "ticks": self.ticks,
                "rate_hz": 0.0,
                "period_p50_ms": 0.0,
                "period_p99_ms": 0.0,
                "period_max_ms": 0.0,
            }
        n = len(periods)
        return {
            "ticks": self.ticks,
            "rate_hz": round(n / (run[0] - run[-1]), 2),
            "period_p50_ms": round(periods[n // 2] * 1000.0, 2),
            "period_p99_ms": round(periods[min(n - 1, int(n * 0.99))] * 1000.0, 2),
            "period_max_ms": round(periods[-1] * 1000.0, 2),
        }

    def stop(self) -> None:
        """Cancel the running gesture, the queue and the speech sway; hold the current position."""
        with self._lock:
            self._playing, self._sway = None, None
            self._queue.clear()
            # Hold here; the posture stays an offset on top (it blends out on its own later).
            self._base.update({j: v - self._offsets.get(j, 0.0) for j, v in self._pos.items()})
            self._idle.set()

    def wait_idle(self, timeout: float | None = 30.0) -> bool:
        """Block until no gesture runs or waits; returns False on timeout (s)."""
        return self._idle.wait(timeout)

    # --- emergency stop and parking ---------------------------------------------------
    def estop(self) -> None:
        """Emergency stop: cancel every motion and refuse commands until cleared.

        The driver decides what stopping means for its motors: servos cut torque; a Reachy Mini
        holds its current pose (its head would fall otherwise).
        """
        with self._lock:
            self._estopped = True
        self.stop()
        self.driver.estop()
        self.torque_on = bool(getattr(self.driver, "holds_on_estop", False))
        log.warning("emergency stop latched")
        if self.on_estop is not None:
            self.on_estop(True)

    def clear_estop(self) -> None:
        """Clear a latched emergency stop: torque back on, rate limiting from the pose read back."""
        with self._lock:
            self._estopped = False
            self._last_t = None
        self.driver.set_torque(True)
        self.torque_on = True
        self.on_driver_status(getattr(self.driver, "name", ""), "online", "")
        if self.on_estop is not None:
            self.on_estop(False)

    def close(self, neutral_ms: float = 500.0) -> None:
        """Stop and park: the driver's own parking, else neutral over ``neutral_ms`` and torque off.

        Safe to call twice and from a signal handler; skips the move after an emergency stop or
        while the driver is offline.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._closing = True
            self._stop_loop = True
            self._wake.notify_all()
        try:
            self.stop()
            loop = self._loop
            if loop is not None and loop is not threading.current_thread():
                loop.join(timeout=1.0)
            self._sender.tag = None  # the park is nobody's gesture (not the last turn's)
            state, _ = self.status()
            park = getattr(self.driver, "park", None)
            if park is not None:
                park(not self._estopped and state == "online")
            else:
                if not self._estopped and state == "online":
                    self._park_at_neutral(neutral_ms)
                last_frames = getattr(self.driver, "begin_close", None)
                if last_frames is not None:  # a serial link: its torque-off is the last frame sent
                    last_frames()
                self.driver.set_torque(False)
                self.driver.sync(1.0)
            self.torque_on = False
        finally:
            self._closing = False
            self.driver.close()

    def _park_at_neutral(self, neutral_ms: float) -> None:
        """Move to neutral over ``neutral_ms`` from this thread (the loop has ended), at the control rate."""
        move = linear_move(
            "neutral", self.positions(), {n: j.neutral_deg for n, j in self.joints.items()}, neutral_ms
        )
        period = 1.0 / self.rate_hz
        t0 = self.clock()
        give_up = time.monotonic() + neutral_ms / 1000.0 + 2.0
        while time.monotonic() < give_up:
            t_ms = (self.clock() - t0) * 1000.0
            self.command(move.evaluate(t_ms))
            if t_ms >= move.duration_ms and all(
                abs(self._pos[j] - self.joints[j].clamp(round(v, 3))) < 1e-6
                for j, v in move.evaluate(t_ms).items()
            ):
                break
            time.sleep(period)
        self.driver.sync(1.0)
