"""Build the robot the config describes: drivers, joints, animations, libraries.

Every driver comes from its kind's :class:`~hardware.driver.DriverSpec`, looked up in
:mod:`hardware.registry` (an explicit registry with lazy imports): a missing vendor package only
matters to robots that use it, and its message says what to install. A driver whose port is
missing does not stop the build: the robot comes up with that driver ``offline`` (speech-only)
and a message saying so, while the driver keeps trying to connect in the background.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hardware.animation import Animation, load_animations
from hardware.config import JointConfig, RobotConfig
from hardware.driver import (
    Driver,
    DriverRequest,
    DriverSpec,
    DriverState,
    JointRouter,
    Libraries,
    StatusCallback,
)
from hardware.joints import Joint
from hardware.registry import animation_formats, driver_kind, driver_spec
from hardware.robot import Robot
from hardware.servos.serial_link import BY_ID_DIR

BUILTIN_ANIMATIONS = Path(__file__).resolve().parent / "animations"


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


def load_libraries(cfg: RobotConfig) -> Libraries:
    """The body's animation libraries by kind (a Reachy Mini's ``dances`` and ``emotions``).

    They are the libraries of the robot's default driver's kind (:attr:`DriverSpec.libraries`).

    Returns:
        ``(libraries, messages)``: empty for bodies without any; a missing library is a message
        (what to install or download), never an error.

    Raises:
        DriverError: the default driver's package is missing.
    """
    spec = driver_spec(driver_kind(cfg, cfg.driver))
    return spec.libraries(cfg) if spec.libraries is not None else ({}, [])


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
        own, more = load_animations(cfg.animation_folders, animation_formats())
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
        on_command: Called as ``(joint, deg, t_ms)`` for every joint command the safety layer
            sends, whatever the driver (:attr:`hardware.robot.Robot.on_command`).
        on_status: Called as ``(driver, state, message)`` when a driver goes online/offline.
        by_id_dir: Folder of stable serial links (tests point it at a temporary folder).
        connect_wait_s: How long to wait for each driver's first connection, s (default:
            the driver's ``connect_wait_s``).

    Returns:
        ``(robot, messages)``: messages report skipped or clamped animations, missing
        animation libraries and drivers that are offline (the robot then runs speech-only
        until they connect).

    Raises:
        DriverError: a driver cannot be built: its package is missing (a Reachy Mini without
            its SDK).

    """
    joints = [Joint(j.name, j.min_deg, j.max_deg, j.neutral_deg, j.max_speed_dps) for j in cfg.joints]
    animations, messages = body_animations(cfg, {j.name: j for j in joints})
    libraries, more = load_libraries(cfg)
    messages += more
    robot_ref: list[Robot] = []

    def status(name: str, state: DriverState, message: str) -> None:
        if robot_ref:
            robot_ref[0].on_driver_status(name, state, message)
        if on_status is not None:
            on_status(name, state, message)

    drivers: dict[str, Driver] = {}
    waits: dict[str, tuple[float, DriverSpec]] = {}
    for name, js in joints_by_driver(cfg).items():
        spec = driver_spec(driver_kind(cfg, name))
        drivers[name], wait = spec.build(DriverRequest(name, cfg, js, status, by_id_dir))
        if wait is not None:  # the simulated driver has nothing to connect
            waits[name] = (wait, spec)
    joint_driver = {j.name: (j.driver or cfg.driver) for j in cfg.joints}
    driver: Driver = next(iter(drivers.values())) if len(drivers) == 1 else JointRouter(drivers, joint_driver)
    robot = Robot(
        joints, driver, animations, rate_hz=cfg.control_rate_hz, postures=cfg.postures, libraries=libraries
    )
    robot.on_command = on_command
    robot_ref.append(robot)
    for name, (wait, spec) in waits.items():
        d = drivers[name]
        if d.start(wait if connect_wait_s is None else connect_wait_s) != "online":
            messages.append(
                f"{d.message or d.describe() + ' is not connected yet'}; "
                f"the robot runs speech-only until it connects"
            )
        elif spec.wake_ms is not None and not robot.wake(spec.wake_ms):  # found asleep, or anywhere:
            robot.move({j.name: j.neutral_deg for j in joints}, spec.wake_ms)  # come to attention
    return robot, messages


def joints_by_driver(cfg: RobotConfig) -> dict[str, list[tuple[int, JointConfig]]]:
    """Driver name → ``(index, joint)`` of the joints it moves (a joint naming none: the default)."""
    by_driver: dict[str, list[tuple[int, JointConfig]]] = {}
    for i, j in enumerate(cfg.joints):
        by_driver.setdefault(j.driver or cfg.driver, []).append((i, j))
    return by_driver
