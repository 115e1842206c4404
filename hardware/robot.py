"""The robot body: joints, one safety layer, a driver and an animation player.

Data flow: skill / animation / model → :meth:`Robot.command` (clamp to the joint's limits,
then rate-limit to its top speed) → driver ``write``. Nothing reaches a driver any other way.

Safety: non-numbers, NaN and infinities become the joint's neutral position (then rate
limited), unknown joints are dropped, and an emergency stop (:meth:`Robot.estop`) latches:
every command is refused until :meth:`Robot.clear_estop`. :meth:`Robot.close` returns the
joints to neutral and switches torque off (install it for SIGTERM with
:func:`hardware.safety.install_shutdown`).

Threading: one player thread per robot samples the current animation at the control rate
(``rate_hz``) and sends each pose through :meth:`Robot.command`. :meth:`Robot.play` replaces
the running animation (blending from the current pose); :meth:`Robot.stop` cancels it and
holds position. Calls are safe from any thread.

Attribution: the caller labels who moves the robot (:attr:`Robot.tag`, e.g. the conversation
turn); a gesture keeps the label it was started with for every command it sends, so a wave
started in one turn is still that turn's while the next turn runs (:attr:`Robot.sending_tag`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from hardware.animation import Animation, linear_move
from hardware.driver import Driver, DriverState
from hardware.joints import Joint

log = logging.getLogger(__name__)

MAX_DT_S = 0.1
"""Longest time step the rate limiter credits to one command, s."""


class Robot:
    """Joints + safety layer + driver + animation player.

    Args:
        joints: The robot's joints (limits in degrees, speeds in deg/s).
        driver: Where safe commands go.
        animations: Named animations available to :meth:`play`.
        rate_hz: Control rate of the player, Hz.
        clock: Monotonic clock in seconds.

    """

    def __init__(
        self,
        joints: list[Joint],
        driver: Driver,
        animations: dict[str, Animation] | None = None,
        rate_hz: float = 50.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.joints = {j.name: j for j in joints}
        self.driver = driver
        self.animations = dict(animations or {})
        self.rate_hz = rate_hz
        self.clock = clock
        self._lock = threading.RLock()
        self._pos = {j.name: j.neutral_deg for j in joints}
        self._last_t: float | None = None
        self._cancel = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self.playing: str | None = None
        self._estopped = False
        self._closed = False
        self.torque_on = True
        """Whether the robot last asked its drivers to hold torque (False after e-stop and close)."""
        self._closing = False
        self.tag: object = None
        """Who moves the robot now (the caller's label); a gesture keeps the one it started with."""
        self._sender = threading.local()  # the tag of the gesture this player thread plays

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

    def status(self) -> tuple[DriverState, str]:
        """``(driver state, message)``: ``online``/``offline``/...; the message says what is wrong."""
        return getattr(self.driver, "state", "online"), getattr(self.driver, "message", "")

    def on_driver_status(self, name: str, state: DriverState, message: str) -> None:
        """Driver state callback: after a (re)connect, start rate limiting from the pose read back."""
        if state == "online":
            with self._lock:
                for joint, deg in self.driver.read().items():
                    if joint in self._pos:
                        self._pos[joint] = self.joints[joint].clamp(deg)

    # --- safety layer -------------------------------------------------------------
    def use_clock(self, clock: Callable[[], float]) -> None:
        """Run the safety layer and the player on ``clock`` (monotonic s) from now on.

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
        While an emergency stop
        is latched nothing is sent.

        Args:
            targets: Joint name → degrees.

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

    # --- animations ---------------------------------------------------------------
    def play(
        self, anim: Animation | str, remap: dict[str, str] | None = None, wait: bool = False
    ) -> Animation:
        """Start an animation, replacing the running one; it blends from the current pose.

        Args:
            anim: An :class:`Animation` or the name of a loaded one.
            remap: Joint renaming (e.g. play a right-arm wave on the left arm).
            wait: Block until it ends.

        Returns:
            The animation that was started.

        Raises:
            KeyError: no animation of that name (the message lists the known ones).
            RuntimeError: an emergency stop is latched.

        """
        if self._estopped:
            raise RuntimeError("emergency stop is latched; clear it before moving")
        if isinstance(anim, str):
            if anim not in self.animations:
                raise KeyError(
                    f"no animation {anim!r}; known: {', '.join(sorted(self.animations)) or 'none'}"
                )
            anim = self.animations[anim]
        if remap:
            anim = anim.remapped(remap)
        self.stop()
        self._cancel = threading.Event()
        self._idle.clear()
        self.playing = anim.name
        self._thread = threading.Thread(
            target=self._run, args=(anim, self._cancel, None, self.tag), name=f"anim-{anim.name}", daemon=True
        )
        self._thread.start()
        if wait:
            self.wait_idle()
        return anim

    def move(self, targets: dict[str, float], duration_ms: float = 500.0, wait: bool = False) -> Animation:
        """Move joints smoothly to targets (degrees) over ``duration_ms`` (ms)."""
        start = {j: self._pos[j] for j in targets if j in self._pos}
        return self.play(linear_move("move", start, targets, duration_ms), wait=wait)

    def _run(
        self, anim: Animation, cancel: threading.Event, max_wall_s: float | None = None, tag: object = None
    ) -> None:
        self._sender.tag = tag
        period = 1.0 / self.rate_hz
        start_pose = self.positions()
        t0 = self.clock()
        give_up = None if max_wall_s is None else time.monotonic() + max_wall_s
        try:
            while not cancel.is_set() and (give_up is None or time.monotonic() < give_up):
                t_ms = (self.clock() - t0) * 1000.0
                if anim.loop and anim.duration_ms > 0:
                    t_ms %= anim.duration_ms
                self.command(anim.evaluate(t_ms, start_pose))
                if self._estopped:
                    break
                if not anim.loop and t_ms >= anim.duration_ms:
                    # Rate limiting may leave joints short of the final pose: finish the approach,
                    # to the exact commanded value (positions are sent rounded to 0.001 degree).
                    final = anim.evaluate(anim.duration_ms)
                    if all(
                        abs(self._pos[j] - self.joints[j].clamp(round(self.joints[j].clamp(v), 3))) < 1e-6
                        for j, v in final.items()
                        if j in self.joints
                    ):
                        break
                cancel.wait(period)
        except Exception:  # noqa: BLE001 - a driver fault must not kill the player silently
            log.exception("animation %s stopped by a driver error", anim.name)
        finally:
            if self._cancel is cancel:
                self.playing = None
                self._idle.set()

    def stop(self) -> None:
        """Cancel the running animation and hold the current position."""
        self._cancel.set()
        th = self._thread
        if th is not None and th is not threading.current_thread():
            th.join(timeout=1.0)
        self.playing = None
        self._idle.set()

    def wait_idle(self, timeout: float | None = 30.0) -> bool:
        """Block until no animation runs; returns False on timeout (s)."""
        return self._idle.wait(timeout)

    def estop(self) -> None:
        """Emergency stop: cancel the animation, cut torque, and refuse commands until cleared."""
        with self._lock:
            self._estopped = True
        self.stop()
        self.driver.estop()
        self.torque_on = False
        log.warning("emergency stop latched")

    def clear_estop(self) -> None:
        """Clear a latched emergency stop: torque back on, rate limiting from the pose read back."""
        with self._lock:
            self._estopped = False
            self._last_t = None
        self.driver.set_torque(True)
        self.torque_on = True
        self.on_driver_status(getattr(self.driver, "name", ""), "online", "")

    def close(self, neutral_ms: float = 500.0) -> None:
        """Stop, return to neutral over ``neutral_ms`` (ms), switch torque off, release the driver.

        Safe to call twice and from a signal handler; skips the neutral move after an
        emergency stop or while the driver is offline.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._closing = True
        try:
            self.stop()
            state, _ = self.status()
            if not self._estopped and state == "online":
                self._run(
                    linear_move(
                        "neutral",
                        self.positions(),
                        {n: j.neutral_deg for n, j in self.joints.items()},
                        neutral_ms,
                    ),
                    threading.Event(),
                    neutral_ms / 1000.0 + 2.0,
                )
                self.driver.sync(1.0)
            self.driver.set_torque(False)
            self.torque_on = False
            self.driver.sync(1.0)
        finally:
            self._closing = False
            self.driver.close()
