"""The robot body: joints, one safety layer, a driver and one motion loop.

Data flow: gesture / speech sway / posture / gaze → the motion loop → :meth:`Robot.command`
(clamp to the joint's limits, then rate-limit to its top speed) → driver ``write``. Nothing
reaches a driver any other way; every joint command sent is reported to :attr:`Robot.on_command`,
whatever the driver (the agent prints them as ``robot`` events).

Safety: non-numbers, NaN and infinities become the joint's neutral position (then rate
limited), unknown joints are dropped, and an emergency stop (:meth:`Robot.estop`) latches:
every command is refused until :meth:`Robot.clear_estop`, which only a person calls (the
console, ``bolt-agent estop clear``). :meth:`Robot.close` parks the robot (neutral and torque
off, or the driver's own parking: a Reachy Mini goes to its sleep pose) and reports where it
parked, read back (:attr:`Robot.parked`); install it for SIGTERM with
:func:`hardware.safety.install_shutdown`.

**One motion loop** (``rate_hz``, 50 by default) is the only sender of targets, as in Pollen's
conversation app. Each tick it composes (:mod:`hardware.layers`; the callers' API of the layers is
:class:`hardware.gestures.GestureLayers`):

1. the *gesture* (:meth:`Robot.play`: a keyframe animation, a dance, a recorded emotion, a
   move — any pure function of time). **Gestures run one after another, each to its end, in
   the order asked for**; one cuts another only when the person asked or for safety, and what
   it leaves settles back (:mod:`hardware.gestures`);
2. the *speech sway* (:meth:`Robot.sway`): offsets that follow the robot's own voice;
3. the *posture* (:meth:`Robot.set_posture`: idle, listening, thinking), blended in and out;
4. the *gaze* (:meth:`Robot.look_toward`): where the robot looks (a voice, a face), smoothed;
   a gesture owns the joints it moves, so the gaze lets go of them while it plays.

Offsets are added to the gesture's pose, or to the held pose when no gesture runs. When no
layer has anything to say the loop sends nothing. Skills start gestures; they never send
poses themselves. Calls are safe from any thread.

Sleep: :meth:`Robot.rest` moves to a rest pose and marks the robot asleep; :meth:`Robot.wake`
(or any gesture a person asks for) first returns every joint to neutral.

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

from hardware.animation import Gesture, linear_move
from hardware.driver import Driver, DriverState
from hardware.gestures import GestureLayers
from hardware.joints import Joint
from hardware.layers import Blend, EstopReport, Gaze, ParkReport, Playing, Settle

log = logging.getLogger(__name__)

MAX_DT_S = 0.1
"""Longest time step the rate limiter credits to one command, s."""
PARK_WAIT_S = 20.0
"""A second :meth:`Robot.close` waits this long for the first one's parking, s."""
REST_TOL = 10.0
"""A body read back within this many degrees (mm) of its rest pose is asleep (found so at a reconnect)."""
PARKED_TOL = 3.0
"""A joint within this many degrees (mm) of a pose counts as in it, when naming the parked pose."""


class Robot(GestureLayers):
    """Joints + safety layer + driver + the motion loop (the API: :class:`~hardware.gestures.GestureLayers`).

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
        self._playing: Playing | None = None
        self._queue: collections.deque[tuple[Gesture, object, bool]] = collections.deque()
        self._settle: Settle | None = None
        self._sway: Playing | None = None
        self._posture = Blend()
        self._posture_pending = False  # a blend whose final offsets were not sent yet
        self._gaze = Gaze()
        self._gaze_pending = False
        self._short = False  # the last tick's targets were cut by rate limiting
        self._held: dict[str, float] = {}  # the posture and gaze offsets last sent
        self._cut_for: object = None  # a turn that changed its mind: its first gesture cuts
        self.posture = "idle"
        self.asleep = False
        """In the rest pose (:meth:`rest`); the next gesture a person asks for wakes it first."""
        self._idle = threading.Event()
        self._idle.set()
        self._loop: threading.Thread | None = None
        self._stop_loop = False
        self.ticks = 0
        """Motion-loop ticks that sent a command (the loop rate is measured from it)."""
        self._tick_t: collections.deque[float] = collections.deque(maxlen=512)
        self._t0 = time.monotonic()
        self._estopped = False
        self._closed = False
        self.torque_on = True
        """Whether the robot last asked its drivers to hold torque (False after close, and after
        an e-stop of a driver that cuts torque)."""
        self._closing = False
        self._closed_done = threading.Event()
        self._closer: threading.Thread | None = None
        self.tag: object = None
        """Who moves the robot now (the caller's label); a gesture keeps the one it started with."""
        self._sender = threading.local()  # the tag of what the sending thread sends
        self.on_estop: Callable[[bool], None] | None = None
        """Called with True after an e-stop latches and False after it is cleared (the agent
        records it so a restart comes back latched); from the caller's thread."""
        self.on_command: Callable[[str, float, float], None] | None = None
        """Called as ``(joint, degrees, t_ms since the robot was made)`` for every joint command
        the safety layer sends, whatever the driver; from the sending thread."""
        self.parked: ParkReport | None = None
        """Where :meth:`close` parked the robot, read back; None before."""

    # --- status -------------------------------------------------------------------
    @property
    def sending_tag(self) -> object:
        """The label of what sends the current command: the playing gesture's, else :attr:`tag`."""
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
            return [g.name for g, _, _ in self._queue]

    @property
    def moving(self) -> bool:
        """A gesture or the speech sway is moving the motors (their noise reaches the microphones)."""
        return self._playing is not None or self._sway is not None

    @property
    def busy(self) -> bool:
        """A gesture a person asked for plays or waits (idle life and the gaze are not that)."""
        p = self._playing
        return (p is not None and not p.cuttable) or bool(self._queue)

    def status(self) -> tuple[DriverState, str]:
        """``(driver state, message)``: ``online``/``offline``/...; the message says what is wrong."""
        return getattr(self.driver, "state", "online"), getattr(self.driver, "message", "")

    def on_driver_status(self, name: str, state: DriverState, message: str) -> None:
        """Driver state callback: a lost link cancels the gesture; a (re)connect resets rate limiting.

        With no link the motion cannot be trusted (the device parks on its own), so the gesture
        under way is cancelled, never resumed from its middle when the link returns. After a
        (re)connect rate limiting starts from the pose read back.
        """
        if state == "offline":
            self.stop()
        elif state == "online":
            with self._lock:
                for joint, deg in self.driver.read().items():
                    if joint in self._pos:
                        self._pos[joint] = self._base[joint] = self.joints[joint].clamp(deg)
                if self._near(self._rest_pose(), REST_TOL):  # found asleep (a daemon restarted)
                    self.asleep = True

    def _rest_pose(self) -> dict[str, float]:
        rest = getattr(self.driver, "rest_pose", None)
        return rest() if callable(rest) else {}

    def _near(self, pose: dict[str, float], tol: float) -> bool:
        common = [j for j in pose if j in self._pos]
        return bool(common) and all(abs(self._pos[j] - pose[j]) <= tol for j in common)

    # --- safety layer -------------------------------------------------------------
    def use_clock(self, clock: Callable[[], float]) -> None:
        """Run the safety layer and the motion loop on ``clock`` (monotonic s) from now on.

        A time read from the old clock says nothing on the new one, so the next command is
        rate limited like a first one (one :data:`MAX_DT_S` step from the current pose).
        """
        with self._lock:
            self.clock = clock
            self._last_t = None
            self._gaze.t = None

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
                if self.on_command is not None:
                    t_ms = (time.monotonic() - self._t0) * 1000.0
                    for name, deg in safe.items():
                        self.on_command(name, deg, t_ms)
            return safe

    def positions(self) -> dict[str, float]:
        """Last commanded position of every joint, degrees."""
        with self._lock:
            return dict(self._pos)

    # --- the motion loop ----------------------------------------------------------
    def _ensure_loop(self) -> None:
        if self._closed:  # parking (or parked): nothing else may move the robot
            return
        if self._loop is None or not self._loop.is_alive():
            self._stop_loop = False
            self._loop = threading.Thread(target=self._run_loop, name="motion-loop", daemon=True)
            self._loop.start()

    def _active(self) -> bool:
        return (
            self._playing is not None
            or self._sway is not None
            or self._posture_pending
            or self._settle is not None
            or self._gaze_pending
            or self._short
        )

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
                    self._playing, self._sway, self._settle = None, None, None
                    self._queue.clear()
                    self._idle.set()
            time.sleep(max(0.0, period - (time.monotonic() - t_start)))

    def _tick(self) -> None:
        """One control step: compose the layers, send through the safety layer, advance the gesture."""
        with self._lock:
            now = self.clock()
            p = self._playing
            owned, done = self._advance_gesture(p, now)
            self._advance_settle(now, owned)
            s = self._sway  # before the sway may end this tick: it still tags the tick
            offsets = self._offsets(now, owned)
            target = {j: self._base[j] + offsets.get(j, 0.0) for j in owned | set(offsets) if j in self._base}
            tag = p.tag if p is not None else (s.tag if s is not None else self.tag)
        self._sender.tag = tag
        sent = self.command(target) if target else {}
        if sent:
            self.ticks += 1
            self._tick_t.append(time.monotonic())
        # Rate limiting left a joint short of its target (a big gaze turn): tick on until it is there.
        self._short = bool(sent) and any(
            abs(sent.get(j, math.nan) - self.joints[j].clamp(round(v, 3))) > 1e-6 for j, v in target.items()
        )
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
            self._next_gesture(p)

    def _advance_gesture(self, p: Playing | None, now: float) -> tuple[set[str], bool]:
        """The playing gesture's pose at ``now`` into the base pose (under the lock).

        Returns:
            ``(joints it owns, whether it has played to its end)``.
        """
        if p is None:
            return set(), False
        g = p.gesture
        t_ms = (now - p.t0) * 1000.0
        if g.loop and g.duration_ms > 0:
            t_ms %= g.duration_ms
        self._base.update({j: v for j, v in g.evaluate(t_ms, p.start).items() if j in self._base})
        p.ticks += 1
        return set(g.joints), not g.loop and t_ms >= g.duration_ms

    def _advance_settle(self, now: float, owned: set[str]) -> None:
        """The settle move's pose on the joints no gesture owns (in ``owned`` after; under the lock)."""
        if self._settle is None:
            return
        pose, settled = self._settle.at(now)
        self._base.update({j: v for j, v in pose.items() if j not in owned})
        owned |= set(pose)
        if settled:
            self._settle = None
            if self._playing is None and not self._queue:
                self._idle.set()

    def _offsets(self, now: float, owned: set[str]) -> dict[str, float]:
        """The offsets over the base pose at ``now``: speech sway, posture and gaze (under the lock)."""
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
        gaze, self._gaze_pending = self._gaze.step(now, owned)
        held = dict(posture)
        for j, v in gaze.items():
            held[j] = held.get(j, 0.0) + v
        self._held = held
        for j, v in held.items():
            offsets[j] = offsets.get(j, 0.0) + v
        return offsets

    def _next_gesture(self, p: Playing | None) -> None:
        """``p`` is over: the next queued gesture starts, or the body is idle."""
        with self._lock:
            if self._playing is p:
                if self._queue:
                    self._start(*self._queue.popleft())
                else:
                    self._playing = None
                    if self._settle is None:
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
        stats = {"ticks": self.ticks, "rate_hz": 0.0, "period_p50_ms": 0.0, "period_p99_ms": 0.0}
        stats["period_max_ms"] = 0.0
        if periods:
            n = len(periods)
            stats["rate_hz"] = round(n / (run[0] - run[-1]), 2)
            stats["period_p50_ms"] = round(periods[n // 2] * 1000.0, 2)
            stats["period_p99_ms"] = round(periods[min(n - 1, int(n * 0.99))] * 1000.0, 2)
            stats["period_max_ms"] = round(periods[-1] * 1000.0, 2)
        return stats

    def stop(self) -> None:
        """Cancel the running gesture, the queue and the speech sway; hold the current position."""
        with self._lock:
            self._playing, self._sway, self._settle = None, None, None
            self._queue.clear()
            self._gaze.target = dict(self._gaze.now)  # the gaze holds where it is too
            # Hold here; the posture and the gaze stay offsets on top.
            self._base.update({j: v - self._held.get(j, 0.0) for j, v in self._pos.items()})
            self._idle.set()

    def wait_idle(self, timeout: float | None = 30.0) -> bool:
        """Block until no gesture runs, waits or settles back; returns False on timeout (s)."""
        return self._idle.wait(timeout)

    # --- emergency stop and parking ---------------------------------------------------
    def _motors(self) -> tuple[bool | None, bool]:
        """``(motors on, read back)``: the driver's read-back when it has one, else the commanded state."""
        read = getattr(self.driver, "motors", None)
        if read is not None:
            try:
                on = read()
            except Exception:  # noqa: BLE001 - a driver that cannot tell: say so
                log.exception("reading the motors' state failed")
                on = None
            if on is not None:
                return bool(on), True
            return None, False
        return self.torque_on, False

    def estop(self) -> EstopReport:
        """Emergency stop: cancel every motion and refuse commands until a person clears it.

        The driver decides what stopping means for its motors: servos cut torque; a Reachy
        Mini holds its pose (its head would sink) or turns its motors off (``estop =
        "motors_off"``). Calling it while latched does nothing again.

        Returns:
            What the motors do now, read back from the hardware where it can tell.
        """
        with self._lock:
            already = self._estopped
            self._estopped = True
        if already:
            on, read_back = self._motors()
            return EstopReport(on, read_back, bool(getattr(self.driver, "holds_on_estop", False)), True)
        self.stop()
        self.driver.estop()
        held = bool(getattr(self.driver, "holds_on_estop", False))
        self.torque_on = held
        log.warning("emergency stop latched")
        if self.on_estop is not None:
            self.on_estop(True)
        on, read_back = self._motors()
        return EstopReport(on, read_back, held and bool(on))

    def clear_estop(self) -> bool:
        """Clear a latched emergency stop (a person's act): torque on, rate limiting from the pose read back.

        Returns:
            True when one was latched.
        """
        with self._lock:
            was = self._estopped
            self._estopped = False
            self._last_t = None
        if not was:
            return False
        self.driver.set_torque(True)
        self.torque_on = True
        self.on_driver_status(getattr(self.driver, "name", ""), "online", "")
        if self.on_estop is not None:
            self.on_estop(False)
        return True

    def close(self, neutral_ms: float = 500.0) -> ParkReport | None:
        """Stop and park: the driver's own parking, else neutral over ``neutral_ms`` and torque off.

        Safe to call twice, from two threads (the second waits for the first to finish parking,
        at most :data:`PARK_WAIT_S`) and from a signal handler; skips the move after an emergency
        stop or while the driver is offline.

        Returns:
            Where it parked, read back (also :attr:`parked`); None when the other call did not
            finish in time.
        """
        with self._lock:
            second = self._closed
            if not second:
                self._closed = True
                self._closer = threading.current_thread()
        if second:
            if threading.current_thread() is not self._closer:
                self._closed_done.wait(PARK_WAIT_S)  # outside the lock: the first one needs it
            return self.parked
        with self._lock:
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
            moves = not self._estopped and state == "online"
            park = getattr(self.driver, "park", None)
            if park is not None:
                park(moves)
            else:
                if moves:
                    self._park_at_neutral(neutral_ms)
                last_frames = getattr(self.driver, "begin_close", None)
                if last_frames is not None:  # a serial link: its torque-off is the last frame sent
                    last_frames()
                self.driver.set_torque(False)
                self.driver.sync(1.0)
            self.torque_on = False
            self.parked = self._park_report(moves)
        finally:
            self._closing = False
            self.driver.close()
            self._closed_done.set()
        return self.parked

    def _park_report(self, moved: bool) -> ParkReport:
        """Where the robot is after parking: read back from a driver that reads, else as commanded."""
        on, read_back = self._motors()
        positions = self.positions()
        if read_back:
            try:
                positions.update({j: v for j, v in self.driver.read().items() if j in positions})
            except Exception:  # noqa: BLE001 - keep what was commanded
                read_back = False
        named = {"neutral": {n: j.neutral_deg for n, j in self.joints.items()}}
        rest = self._rest_pose()
        if rest:
            named = {"sleep": rest, **named}
        pose = next(
            (
                name
                for name, want in named.items()
                if all(abs(positions.get(j, v) - v) <= PARKED_TOL for j, v in want.items() if j in positions)
            ),
            "held" if not moved else "elsewhere",
        )
        return ParkReport(pose, on if read_back else False, read_back, positions)

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
