"""A Reachy Mini as a driver: Pollen's SDK client talking to ``reachy-mini-daemon``.

One code path for every Reachy Mini: the Lite (USB to the host that runs the daemon, e.g.
the Jetson: ``localhost:8000``), the Wireless (the daemon runs inside the robot:
``reachy-mini.local:8000``) and both simulators (``reachy-mini-daemon --mockup-sim`` without
physics, ``--sim`` with MuJoCo). The client connects with ``media_backend="no_media"`` (the
daemon leaves camera and microphones to us) and ``automatic_body_yaw=False`` (our joints set
the body yaw).

**Safety in front of the daemon.** Its own checks are thin: an unreachable pose is only
logged and the last target held, antennas have no limit, the head-body yaw coupling applies
only with automatic body yaw. The robot's safety layer (:class:`hardware.robot.Robot`)
already clamped every joint to its limits and speed; this driver then

1. keeps the head yaw within ``yaw_coupling_deg`` (65°, Pollen's documented limit) of the
   body yaw, and
2. checks the pose with the SDK's analytical inverse kinematics (tens of microseconds a
   call, measured 10-45 µs here) before a frame is sent — a solution exists and every
   Stewart motor stays within its range (the joint ranges of Pollen's MJCF model, the limits
   measured on the robot in its ``hardware_config.yaml``: e.g. -48° to +80°; the solver alone
   returns angles the motors cannot reach, which MuJoCo then stops short of) — and that the
   head stays clear of the body shell (:mod:`hardware.reachy_mini.collision`, Pollen's collision
   hulls, 0.1 ms); an unreachable pose is moved
   toward the head's neutral tilt and position (keeping yaw, body yaw and antennas) by
   bisection to the farthest reachable point (:meth:`ReachyMiniDriver.safe_pose`), so the
   robot goes as far as it can instead of freezing.

**E-stop** (``[robot.reachy_mini] estop``) holds the present pose with the motors on (``hold``,
the default: the head would sink with them off) or turns the motors off through the daemon
(``motors_off``), and drops every later frame until a person clears it; clearing it resumes,
or parks (``estop_release = "sleep"``). What the robot then says about its motors is what the
daemon reports (:meth:`ReachyMiniDriver.motors`: ``GET /api/motors/status``).
**Parking** (:meth:`ReachyMiniDriver.park`: SIGTERM, shutdown) moves to the SDK's sleep pose
(through its initial pose when far from it, as the SDK's ``goto_sleep``) and turns the
motors off; the next frame turns them on again. The robot reads the pose it reached and the
motors' mode back from the daemon (:meth:`hardware.robot.Robot.close`).

**Versions.** Client and daemon must be the same release (Pollen: "Install matching
reachy_mini versions for the SDK and daemon"): a different major.minor version keeps the
driver offline with a message saying which to install; a different patch release is
reported and used. ``reachy-mini`` 1.9 and later need Python 3.11; JetPack 6's Python 3.10
gets 1.8.4 (pyproject's ``reachy`` extra allows ``>=1.8.4,<1.14``).

**Connection.** A background thread connects with exponential backoff, watches the state
stream (the daemon sends it at 50 Hz) and reconnects when the daemon comes back; a frame
sent to a lost daemon marks the driver offline at once. The robot keeps running speech-only
meanwhile. Never ``spawn_daemon=True``: the SDK then kills other daemons by command line.
"""

from __future__ import annotations

import logging
import math
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from hardware.config import REACHY_MINI, ReachyMiniConfig, RobotConfig
from hardware.doa import DoaSource
from hardware.driver import Driver, DriverError, DriverRequest, DriverSpec, DriverState, StatusCallback
from hardware.reachy_mini.daemon import SDK_PACKAGE, motor_mode, same_release, sdk_version
from hardware.reachy_mini.moves import load_libraries
from hardware.reachy_mini.pose import HEAD_POSITION, HEAD_ROTATION, from_sdk, to_sdk

log = logging.getLogger(__name__)

BISECT_STEPS = 12
"""Bisection steps of the reachability clamp (1/4096 of the way: well under 0.1 degree)."""
FAR_FROM_INIT_RAD = 0.2
"""Head joint distance, rad, beyond which parking passes through the initial pose (as ``goto_sleep``)."""


class VersionMismatch(DriverError):
    """The SDK and the daemon are different releases; the message says what to install."""


STEWART = tuple(f"stewart_{i}" for i in range(1, 7))
MJCF = "descriptions/reachy_mini/mjcf/reachy_mini.xml"
"""Pollen's MuJoCo model inside the ``reachy_mini`` package: its joint ranges are the motor limits."""


def motor_ranges() -> tuple[np.ndarray, np.ndarray]:
    """The six Stewart motors' ranges, rad: ``(lower (6,), upper (6,))``, in the IK's order.

    Read from the joint ``range`` attributes of Pollen's MJCF model (they are the limits
    measured on the robot, ``assets/config/hardware_config.yaml``: s1 -48° to +80°, ...).

    Raises:
        DriverError: the SDK is not installed or its model lacks a motor.
    """
    import xml.etree.ElementTree as ET
    from importlib.resources import files

    try:
        root = ET.fromstring(files("reachy_mini").joinpath(MJCF).read_text(encoding="utf-8"))
    except (ModuleNotFoundError, OSError) as e:
        raise DriverError(f"cannot read the Reachy Mini model's motor ranges ({MJCF}): {e}") from None
    ranges = {j.get("name"): j.get("range") for j in root.iter("joint")}
    try:
        pairs = [tuple(float(x) for x in str(ranges[name]).split()) for name in STEWART]
    except (KeyError, ValueError) as e:
        raise DriverError(f"{MJCF}: no usable range for {e}") from None
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def sleep_pose() -> dict[str, float]:
    """The SDK's sleep pose as our joints (head down and back, antennas folded)."""
    from reachy_mini.reachy_mini import SLEEP_ANTENNAS_JOINT_POSITIONS, SLEEP_HEAD_POSE

    return from_sdk(SLEEP_HEAD_POSE, SLEEP_ANTENNAS_JOINT_POSITIONS, 0.0)


class ReachyMiniDriver:
    """Our joints → ``ReachyMini.set_target``, with the reachability check and reconnection.

    Args:
        cfg: ``[robot.reachy_mini]``: host, port, timeouts, yaw coupling, sleep move, e-stop release.
        neutral: Neutral pose of every joint (degrees; head x/y/z in mm): the target of joints
            no frame has named yet.
        name: Driver name in messages and status callbacks.
        on_status: Called as ``(name, state, message)`` when the state changes.
        connect: Builds the SDK client (tests may pass their own; default: the SDK's ``ReachyMini``).

    Raises:
        DriverError: the SDK is not installed (the message says how to install it).
    """

    def __init__(
        self,
        cfg: ReachyMiniConfig,
        neutral: dict[str, float],
        name: str = "reachy_mini",
        on_status: StatusCallback | None = None,
        connect: Callable[[ReachyMiniConfig], Any] | None = None,
    ) -> None:
        self.sdk_version = sdk_version()
        if self.sdk_version is None and connect is None:
            raise DriverError(
                f"a Reachy Mini needs Pollen's SDK: pip install 'bolt-agent[reachy]' "
                f"(or run launch/setup.sh with BOLT_REACHY=1); {SDK_PACKAGE} is not installed"
            )
        self.cfg = cfg
        self.name = name
        self.state: DriverState = "connecting"
        self.message = ""
        self.release_policy = cfg.estop_release
        self.daemon_version: str | None = None
        self.sends = 0
        """Frames sent to the daemon."""
        self.clamped = 0
        """Frames the reachability check moved toward neutral."""
        self._connect_fn = connect or _sdk_connect
        self._on_status = on_status
        self._neutral = dict(neutral)
        self._want = dict(neutral)
        self._sent: dict[str, float] = {}
        self._mini: Any = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._thread: threading.Thread | None = None
        self._halted = False
        self._parked = False
        self._kin: Any = None
        self._ranges: tuple[np.ndarray, np.ndarray] | None = None
        self._collision: Any = None
        self.notes: list[str] = []
        """What the driver could not check (e.g. no MuJoCo: no self-collision check)."""

    @property
    def holds_on_estop(self) -> bool:
        """An e-stop holds the pose with the motors on (``estop = "hold"``) instead of turning them off."""
        return self.cfg.estop == "hold"

    def motors(self) -> bool | None:
        """Whether the motors are on, as the daemon reports (``enabled``, ``gravity_compensation``: on).

        Returns:
            None when the daemon does not answer (then nothing can be said of them).
        """
        try:
            return motor_mode(self.cfg, 1.0) != "disabled"
        except (OSError, ValueError):
            return None

    def rest_pose(self) -> dict[str, float]:
        """Where parking puts the robot: the SDK's sleep pose, as our joints."""
        return sleep_pose()

    # --- connection -------------------------------------------------------------------
    def describe(self) -> str:
        """``Reachy Mini daemon at HOST:PORT``."""
        return f"Reachy Mini daemon at {self.cfg.host}:{self.cfg.port}"

    def start(self, wait_s: float = 0.0) -> DriverState:
        """Prepare the checks, start the connection thread, wait up to ``wait_s`` (s) to connect.

        Returns:
            The state after the wait (``online`` or ``offline``/``connecting``: it keeps trying).
        """
        self.prepare_checks()
        first = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(first,), name=f"driver-{self.name}", daemon=True
        )
        self._thread.start()
        first.wait(wait_s)
        return self.state

    def _set_state(self, state: DriverState, message: str) -> None:
        if state == self.state and message == self.message:
            return
        self.state, self.message = state, message
        (log.info if state == "online" else log.warning)(
            "%s: %s%s", self.name, state, f": {message}" if message else ""
        )
        if self._on_status is not None:
            self._on_status(self.name, state, message)

    def _run(self, first: threading.Event) -> None:
        backoff = self.cfg.backoff_initial_s
        while not self._stop.is_set():
            if self._mini is None:
                try:
                    self._connect()
                    backoff = self.cfg.backoff_initial_s
                except VersionMismatch as e:
                    self._set_state("offline", str(e))
                    backoff = self.cfg.backoff_max_s  # a person must install the other version
                except Exception as e:  # the SDK raises ConnectionError, TimeoutError, OSError...
                    self._set_state(
                        "offline",
                        f"{self.describe()} is not reachable ({type(e).__name__}: {e}); is "
                        f"reachy-mini-daemon running? retrying every {backoff:g} s",
                    )
                finally:
                    first.set()
                if self._mini is None:
                    self._kick.wait(backoff)
                    self._kick.clear()
                    backoff = min(backoff * 2.0, self.cfg.backoff_max_s)
                continue
            mini = self._mini
            alive = _alive(mini)
            if not alive and mini is self._mini:
                self._drop(f"{self.describe()} stopped sending its state")
                continue
            self._kick.wait(0.5)
            self._kick.clear()

    def _connect(self) -> None:
        mini = self._connect_fn(self.cfg)
        try:
            status = mini.client.get_status(timeout=self.cfg.connect_timeout_s)
            daemon = str(getattr(status, "version", "") or "")
            if daemon and self.sdk_version and not same_release(daemon, self.sdk_version):
                raise VersionMismatch(
                    f"{self.describe()} runs reachy-mini {daemon} but bolt-agent has the SDK "
                    f"{self.sdk_version}; they must be the same release: pip install 'reachy-mini=={daemon}' "
                    f"in bolt-agent's environment, or update the robot to {self.sdk_version}"
                )
            self.daemon_version = daemon or None
            present = _present(mini)
            mini.enable_motors()  # pins the targets to the present pose first (SDK >= 1.5)
        except BaseException:
            _disconnect(mini)
            raise
        with self._lock:
            self._want.update(present)
            self._sent = dict(present)
            self._mini = mini
            self._parked = False
        note = ""
        if daemon and self.sdk_version and daemon != self.sdk_version:
            note = f"SDK {self.sdk_version} and daemon {daemon} differ in their patch release"
        self._set_state("online", note)

    def _drop(self, why: str) -> None:
        """Forget a lost client and let the thread reconnect."""
        with self._lock:
            mini, self._mini = self._mini, None
        if mini is None:
            return
        threading.Thread(target=_disconnect, args=(mini,), daemon=True).start()
        self._set_state(
            "offline",
            f"{why}; the robot holds still, the agent keeps talking, "
            f"and it reconnects when the daemon is back",
        )
        self._kick.set()

    # --- the safety checks --------------------------------------------------------------
    def _kinematics(self) -> Any:
        if self._kin is None:
            from reachy_mini.kinematics import AnalyticalKinematics

            self._kin = AnalyticalKinematics(automatic_body_yaw=False)
        return self._kin

    def prepare_checks(self) -> None:
        """Load the kinematics, the motor ranges and the self-collision model (about 0.5 s, once).

        Without MuJoCo the self-collision check is off and :attr:`notes` says so.
        """
        from hardware.reachy_mini.collision import SelfCollision, SelfCollisionUnavailable

        kin = self._kinematics()
        if self._ranges is None:
            self._ranges = motor_ranges()
        if self._collision is None:
            try:
                self._collision = SelfCollision(kin.head_z_offset, kin.ik(np.eye(4), body_yaw=0.0))
            except SelfCollisionUnavailable as e:
                self._collision = False
                self.notes.append(f"{e}; head poses are checked by the kinematics and motor ranges only")
                log.warning("%s: %s", self.name, self.notes[-1])

    def reachable(self, joints: dict[str, float]) -> bool:
        """Whether the SDK's inverse kinematics solves this pose within every motor's range."""
        pose, _, body = to_sdk(joints)
        try:
            sol = np.asarray(self._kinematics().ik(pose, body_yaw=body), dtype=float)
        except Exception:  # the Rust solver raises on some degenerate poses
            return False
        if self._ranges is None:
            self.prepare_checks()
        lo, hi = self._ranges
        if not (np.all(np.isfinite(sol)) and np.all(sol[1:] >= lo) and np.all(sol[1:] <= hi)):
            return False
        return not self._collision or self._collision.clear(pose, body)

    def safe_pose(self, joints: dict[str, float]) -> tuple[dict[str, float], bool]:
        """The pose that is sent for ``joints``: coupled yaw, reachable head.

        Args:
            joints: Every joint (degrees; head x/y/z in mm), already within its limits.

        Returns:
            ``(pose, clamped)``: ``clamped`` is True when the head had to move toward its
            neutral tilt and position to be reachable.
        """
        out = dict(joints)
        c = self.cfg.yaw_coupling_deg
        body = out.get("body_yaw", 0.0)
        out["head_yaw"] = min(body + c, max(body - c, out.get("head_yaw", 0.0)))
        if self.reachable(out):
            return out, False
        ref = dict(out)
        for k in (*HEAD_POSITION, "head_roll", "head_pitch"):
            ref[k] = 0.0
        if not self.reachable(ref):
            ref["head_yaw"] = body
        lo, hi = 0.0, 1.0
        for _ in range(BISECT_STEPS):
            mid = (lo + hi) / 2.0
            if self.reachable(_between(ref, out, mid)):
                lo = mid
            else:
                hi = mid
        return _between(ref, out, lo), True

    # --- the Driver interface -------------------------------------------------------------
    def write(self, targets: dict[str, float], duration_ms: float = 0.0) -> None:
        """Send joint targets (degrees; head x/y/z in mm) as one ``set_target`` frame.

        Joints not named keep their last target. Dropped while e-stopped or offline (the
        loss is in :attr:`message`). A send that fails marks the driver offline.
        """
        with self._lock:
            for k, v in targets.items():
                if k in self._want and math.isfinite(v):
                    self._want[k] = float(v)
            mini = self._mini
            if mini is None or self._halted:
                return
            pose, clamped = self.safe_pose(self._want)
            if clamped:
                self.clamped += 1
                if self.clamped == 1 or self.clamped % 500 == 0:
                    log.warning(
                        "%s: pose beyond reach (%s); sent the nearest reachable one (%d frames so far)",
                        self.name,
                        ", ".join(f"{k} {self._want[k]:.0f}" for k in (*HEAD_ROTATION, *HEAD_POSITION)),
                        self.clamped,
                    )
            head, antennas, body = to_sdk(pose)
            try:
                if self._parked:
                    mini.enable_motors()
                    self._parked = False
                mini.set_target(head=head, antennas=antennas, body_yaw=body)
            except Exception as e:  # ConnectionError, websockets' ConnectionClosed, ...
                lost = e
            else:
                self._sent = pose
                self.sends += 1
                return
        self._drop(f"lost {self.describe()} ({type(lost).__name__}: {lost})")

    def read(self) -> dict[str, float]:
        """Present joints from the daemon's state stream (degrees; mm); the last frame sent when offline."""
        mini = self._mini
        if mini is not None:
            try:
                return _present(mini)
            except Exception:  # no state received yet, or the client just closed
                pass
        with self._lock:
            return dict(self._sent or self._want)

    def sent(self) -> dict[str, float]:
        """The last frame sent, after the coupling and reachability checks (degrees; mm)."""
        with self._lock:
            return dict(self._sent)

    def set_torque(self, on: bool) -> None:
        """Motors on or off. After an e-stop, on = clear it: resume, or park (``estop_release``)."""
        with self._lock:
            was_halted = self._halted
            if on:
                self._halted = False
            mini = self._mini
        if mini is None:
            return
        if on and was_halted and self.release_policy == "sleep":
            if self.cfg.estop == "motors_off":
                self._enable(mini)  # the sleep move needs them
            self.park(True)
            return
        try:
            if on:
                mini.enable_motors()
            else:
                mini.disable_motors()
            self._parked = not on
        except Exception as e:  # the SDK's connection errors come as many types: a lost daemon
            self._drop(f"lost {self.describe()} ({type(e).__name__}: {e})")

    def _enable(self, mini: Any) -> None:
        try:
            mini.enable_motors()
            self._parked = False
        except Exception as e:  # noqa: BLE001
            self._drop(f"lost {self.describe()} ({type(e).__name__}: {e})")

    def estop(self) -> None:
        """Hold the pose, or turn the motors off (``estop = "motors_off"``); drop frames until cleared.

        Cleared by :meth:`set_torque` (True).
        """
        with self._lock:
            self._halted = True
            mini = self._mini
        if mini is None:
            return
        try:
            if self.cfg.estop == "motors_off":
                mini.disable_motors()
                self._parked = True
                return
            head_joints, antennas = mini.get_current_joint_positions()
            mini.set_target(
                head=mini.get_current_head_pose(), antennas=list(antennas), body_yaw=float(head_joints[0])
            )
        except Exception as e:  # as above: the daemon is gone
            self._drop(f"lost {self.describe()} during an emergency stop ({type(e).__name__}: {e})")

    def park(self, move: bool = True) -> bool:
        """Go to the sleep pose (when ``move``) and turn the motors off.

        Blocks for the move (``sleep_s``, plus 1 s through the initial pose when far from it).

        Returns:
            True when the motors were turned off.
        """
        with self._lock:
            mini = self._mini
            halted = self._halted
        if mini is None:
            return False
        try:
            if move and not halted:
                from reachy_mini.reachy_mini import (
                    INIT_ANTENNAS_JOINT_POSITIONS,
                    INIT_HEAD_POSE,
                    SLEEP_ANTENNAS_JOINT_POSITIONS,
                    SLEEP_HEAD_POSE,
                )

                init = self._kinematics().ik(INIT_HEAD_POSE, body_yaw=0.0)
                head_joints, _ = mini.get_current_joint_positions()
                if float(np.linalg.norm(np.asarray(head_joints) - init)) > FAR_FROM_INIT_RAD:
                    mini.goto_target(
                        INIT_HEAD_POSE, antennas=INIT_ANTENNAS_JOINT_POSITIONS, duration=1.0, body_yaw=0.0
                    )
                mini.goto_target(
                    SLEEP_HEAD_POSE,
                    antennas=SLEEP_ANTENNAS_JOINT_POSITIONS,
                    duration=self.cfg.sleep_s,
                    body_yaw=0.0,
                )
            mini.disable_motors()
        except Exception as e:  # parking is best effort: a failure is logged, never raised
            log.warning("%s: could not park: %s: %s", self.name, type(e).__name__, e)
            return False
        with self._lock:
            self._parked = True
            self._sent = _present(mini) if self._mini is mini else self._sent
            self._want.update(self._sent)
        return True

    def sync(self, timeout_s: float = 1.0) -> bool:
        """Frames go out as they are written: nothing is queued."""
        return True

    def close(self) -> None:
        """Stop the connection thread and disconnect (parking is :meth:`park`'s job)."""
        self._stop.set()
        self._kick.set()
        with self._lock:
            mini, self._mini = self._mini, None
        if mini is not None:
            _disconnect(mini)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        self.state, self.message = "closed", ""


def _between(a: dict[str, float], b: dict[str, float], s: float) -> dict[str, float]:
    return {k: a[k] + (b[k] - a[k]) * s for k in b}


def _present(mini: Any) -> dict[str, float]:
    head_joints, antennas = mini.get_current_joint_positions()
    return from_sdk(mini.get_current_head_pose(), antennas, head_joints[0])


def _alive(mini: Any) -> bool:
    try:
        return bool(mini.client.is_connected())  # waits up to 1 s for the 50 Hz state stream
    except Exception:  # any failure of the check means not connected
        return False


def _disconnect(mini: Any) -> None:
    try:
        mini.client.disconnect()
    except Exception:  # already gone
        pass


def _sdk_connect(cfg: ReachyMiniConfig) -> Any:
    """Connect Pollen's client to the daemon at ``cfg.host:cfg.port`` (no mDNS, no media)."""
    from reachy_mini import ReachyMini

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # its version warning: we report our own
        return ReachyMini(
            host=cfg.host,
            port=cfg.port,
            connection_mode="network",
            timeout=cfg.connect_timeout_s,
            automatic_body_yaw=False,
            media_backend="no_media",
            log_level="WARNING",
        )


REACHY_WAKE_MS = 1500.0
"""A Reachy Mini moves from the pose it was found in (often asleep) to neutral over this long, ms."""


def build(req: DriverRequest) -> tuple[Driver, float | None]:
    """The Reachy Mini of ``[robot.reachy_mini]`` moving the request's joints (not started).

    Raises:
        DriverError: Pollen's SDK is not installed.
    """
    rm = req.robot.reachy_mini
    driver = ReachyMiniDriver(rm, {j.name: j.neutral_deg for _, j in req.joints}, req.name, req.on_status)
    return driver, rm.connect_wait_s


def daemon_doa(cfg: RobotConfig) -> DoaSource:
    """The daemon's direction of arrival (``GET /api/state/doa``; none with ``--no-media``)."""
    from hardware.reachy_mini.doa import DaemonDoa

    return DaemonDoa(cfg.reachy_mini)


SPEC = DriverSpec(REACHY_MINI, build, wake_ms=REACHY_WAKE_MS, libraries=load_libraries, doa=daemon_doa)
"""``[robot] driver = "reachy_mini"`` (built in): the whole body, through its daemon."""
