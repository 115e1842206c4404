"""Build the robot the config describes: a driver registry, joints, channels, animations.

The registry maps a driver ``kind`` to a factory; each factory imports its protocol module
when called, so a missing vendor package (``scservo_sdk``) only matters to robots that use
it, and its message says what to install. A driver whose port is missing does not stop the
build: the robot comes up with that driver ``offline`` (speech-only) and a message saying
so, while the driver keeps trying to connect in the background.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from hardware.animation import Animation, Gesture, load_animations
from hardware.config import REACHY_MINI, DriverConfig, JointConfig, RobotConfig
from hardware.driver import Channel, Driver, DriverError, DriverState, JointRouter, StatusCallback
from hardware.joints import Joint
from hardware.robot import Robot
from hardware.serial_link import BY_ID_DIR, SerialDriver
from hardware.sim import SimulatedDriver

BUILTIN_ANIMATIONS = Path(__file__).resolve().parent / "animations"
WAKE_MS = 1500.0
"""A Reachy Mini moves from the pose it was found in (often asleep) to neutral over this long, ms."""


def _bolt_serial() -> ModuleType:
    from hardware import bolt_serial

    return bolt_serial


def _maestro() -> ModuleType:
    from hardware import maestro

    return maestro


def _feetech() -> ModuleType:
    from hardware import feetech  # imports the vendor SDK (scservo_sdk)

    return feetech


# kind → (protocol module loader, driver class, package to install); the module gives the
# channel scale (CENTRE, PER_DEG, DEVICE_RANGE), with its sources.
_SERIAL_KINDS: dict[str, tuple[Callable[[], ModuleType], str, str]] = {
    "bolt_serial": (_bolt_serial, "BoltSerialDriver", "pyserial"),
    "maestro": (_maestro, "MaestroDriver", "pyserial"),
    "feetech": (_feetech, "FeetechDriver", "feetech-servo-sdk"),
}


def _protocol(kind: str) -> tuple[ModuleType, type[SerialDriver]]:
    """The protocol module of a serial driver kind and its driver class (imported now)."""
    load, cls, package = _SERIAL_KINDS[kind]
    try:
        module = load()
    except ImportError as e:
        raise DriverError(
            f"driver kind {kind!r} needs the package {package!r} (pip install {package}): {e}"
        ) from None
    return module, getattr(module, cls)


def make_channels(kind: str, joints: list[tuple[int, JointConfig]], dcfg: DriverConfig) -> list[Channel]:
    """Build the :class:`Channel` of every joint on one driver (scale from the protocol module).

    Raises:
        DriverError: the kind's package is missing.
    """
    module, _ = _protocol(kind)
    per_deg = module.PER_DEG if kind != "maestro" else module.QUARTER_US_PER_US * dcfg.us_per_deg
    return [
        Channel.for_joint(
            j.name,
            j.id if j.id is not None else i,
            j.min_deg,
            j.max_deg,
            centre=module.CENTRE,
            per_deg=per_deg,
            direction=j.direction,
            offset_deg=j.offset_deg,
            device_range=module.DEVICE_RANGE,
        )
        for i, j in joints
    ]


def make_driver(
    name: str,
    dcfg: DriverConfig,
    joints: list[tuple[int, JointConfig]],
    on_status: StatusCallback | None = None,
    by_id_dir: Path = BY_ID_DIR,
) -> SerialDriver:
    """Create (not start) one serial driver for ``joints`` (``(index, JointConfig)`` pairs).

    Raises:
        DriverError: the kind's package is missing.

    """
    _, cls = _protocol(dcfg.kind)
    kw: dict[str, Any] = dict(
        baud=dcfg.baud,
        timeout_s=dcfg.timeout_s,
        poll_hz=dcfg.poll_hz,
        backoff_initial_s=dcfg.backoff_initial_s,
        backoff_max_s=dcfg.backoff_max_s,
        on_status=on_status,
        by_id_dir=by_id_dir,
    )
    speeds = {j.name: j.max_speed_dps for _, j in joints}
    neutral = {j.name: j.neutral_deg for _, j in joints}
    if dcfg.kind == "bolt_serial":
        kw.update(
            ready_timeout_s=dcfg.ready_timeout_s,
            watchdog_ms=dcfg.watchdog_ms,
            heartbeat_s=dcfg.heartbeat_ms / 1000.0,
            neutral=neutral,
            speeds=speeds,
        )
    else:
        kw.update(speeds=speeds, neutral=neutral)
    return cls(name, str(dcfg.port), make_channels(dcfg.kind, joints, dcfg), **kw)


def check_animations(animations: dict[str, Animation], joints: dict[str, Joint]) -> list[str]:
    """Messages for animations that move joints the robot lacks or go beyond a joint's limits."""
    msgs = []
    for name, anim in sorted(animations.items()):
        missing = anim.joints - set(joints)
        if missing:
            msgs.append(
                f"{anim.source}: animation {name!r} moves {', '.join(sorted(missing))}, "
                f"which this robot lacks; those joints are ignored"
            )
        for k in anim.keyframes:
            for j, v in k.pose.items():
                jt = joints.get(j)
                if jt is not None and not jt.min_deg <= v <= jt.max_deg:
                    msgs.append(
                        f"{anim.source}: animation {name!r} at {k.t_ms:g} ms puts {j} at {v:g} degrees, "
                        f"beyond its limits [{jt.min_deg:g}, {jt.max_deg:g}]; it will be clamped"
                    )
    return msgs


def load_libraries(cfg: RobotConfig) -> tuple[dict[str, dict[str, Gesture]], list[str]]:
    """The body's animation libraries by kind: a Reachy Mini's ``dances`` and ``emotions``.

    Returns:
        ``(libraries, messages)``: empty for other bodies; a missing library is a message
        (what to install or download), never an error.
    """
    if cfg.driver != REACHY_MINI:
        return {}, []
    from hardware.pollen_moves import load_dances, load_emotions

    dances, messages = load_dances()
    emotions, more = load_emotions(cfg.reachy_mini.emotions_repo, cfg.reachy_mini.emotions_dir)
    return {"dances": dict(dances), "emotions": dict(emotions)}, messages + more


def body_animations(cfg: RobotConfig, joints: dict[str, Joint]) -> tuple[dict[str, Animation], list[str]]:
    """The keyframe animations a robot of ``cfg`` gets, read from files; no driver starts.

    Args:
        cfg: The robot's config (``animation_folders``).
        joints: Its joints by name.

    Returns:
        Packaged animations that fit this body, then the config folders' (by name), and the
        loading notes (a file that does not parse, an animation that does not fit the joints).
    """
    packaged, messages = load_animations([BUILTIN_ANIMATIONS])
    animations = {n: a for n, a in packaged.items() if a.joints <= set(joints)}
    if cfg.animation_folders:
        own, more = load_animations(cfg.animation_folders)
        messages += more + check_animations(own, joints)
        animations.update(own)
    return animations, messages


def build_robot(
    cfg: RobotConfig,
    on_command: Callable[[str, float, float], None] | None = None,
    *,
    on_status: StatusCallback | None = None,
    by_id_dir: Path = BY_ID_DIR,
    connect_wait_s: float | None = None,
) -> tuple[Robot, list[str]]:
    """Create the robot from config and start its drivers.

    Args:
        cfg: The ``[robot]`` section.
        on_command: Called as ``(joint, deg, t_ms)`` for every command that reaches the
            simulated driver.
        on_status: Called as ``(driver, state, message)`` when a driver goes online/offline.
        by_id_dir: Folder of stable serial links (tests point it at a temporary folder).
        connect_wait_s: How long to wait for each driver's first connection, s (default:
            the driver's ``connect_wait_s``).

    Returns:
        ``(robot, messages)``: messages report skipped or clamped animations, missing
        animation libraries and drivers that are offline (the robot then runs speech-only
        until they connect).

    Raises:
        DriverError: a driver kind's package is missing (a Reachy Mini without its SDK).

    """
    joints = [Joint(j.name, j.min_deg, j.max_deg, j.neutral_deg, j.max_speed_dps) for j in cfg.joints]
    animations, messages = body_animations(cfg, {j.name: j for j in joints})
    libraries, more = load_libraries(cfg)
    messages += more
    by_driver: dict[str, list[tuple[int, JointConfig]]] = {}
    for i, j in enumerate(cfg.joints):
        by_driver.setdefault(j.driver or cfg.driver, []).append((i, j))
    robot_ref: list[Robot] = []

    def status(name: str, state: DriverState, message: str) -> None:
        if robot_ref:
            robot_ref[0].on_driver_status(name, state, message)
        if on_status is not None:
            on_status(name, state, message)

    drivers: dict[str, Driver] = {}
    waits: dict[str, float] = {}
    for name, js in by_driver.items():
        if name == REACHY_MINI:
            from hardware.reachy_mini import ReachyMiniDriver

            drivers[name] = ReachyMiniDriver(
                cfg.reachy_mini, {j.name: j.neutral_deg for _, j in js}, name, status
            )
            waits[name] = cfg.reachy_mini.connect_wait_s
            continue
        dcfg = cfg.drivers.get(name, DriverConfig(kind="sim") if name == "sim" else None)
        assert dcfg is not None  # RobotConfig validated every name
        if dcfg.kind == "sim":
            drivers[name] = SimulatedDriver(on_command=on_command, name=name)
        else:
            drivers[name] = make_driver(name, dcfg, js, status, by_id_dir)
            waits[name] = dcfg.connect_wait_s
    joint_driver = {j.name: (j.driver or cfg.driver) for j in cfg.joints}
    driver: Driver = next(iter(drivers.values())) if len(drivers) == 1 else JointRouter(drivers, joint_driver)
    robot = Robot(
        joints, driver, animations, rate_hz=cfg.control_rate_hz, postures=cfg.postures, libraries=libraries
    )
    robot_ref.append(robot)
    for name, wait in waits.items():  # the simulated driver has nothing to connect
        d = drivers[name]
        if d.start(wait if connect_wait_s is None else connect_wait_s) != "online":
            messages.append(
                f"{d.message or d.describe() + ' is not connected yet'}; "
                f"the robot runs speech-only until it connects"
            )
        elif name == REACHY_MINI:  # found asleep or anywhere: come to attention
            robot.move({j.name: j.neutral_deg for j in joints}, WAKE_MS)
    return robot, messages
