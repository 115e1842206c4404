"""Every driver kind, named camera source and animation format the body knows, by config name.

An explicit registry with lazy imports: each entry imports its package only when asked for, so
a robot loads only the drivers it uses, and a missing package is a message saying what to
install. Nothing registers itself by being imported. A new driver kind is one module exporting
a :class:`~hardware.driver.DriverSpec` and one line in :data:`DRIVERS`.
"""

from __future__ import annotations

from collections.abc import Callable

from hardware.animation import AnimationFormat
from hardware.camera.base import NamedSource
from hardware.config import RobotConfig
from hardware.doa import DoaSource
from hardware.driver import DriverError, DriverSpec


def _sim() -> DriverSpec:
    from hardware.servos.sim import SPEC

    return SPEC


def _bolt_serial() -> DriverSpec:
    from hardware.servos.bolt_serial import SPEC

    return SPEC


def _maestro() -> DriverSpec:
    from hardware.servos.maestro import SPEC

    return SPEC


def _feetech() -> DriverSpec:
    from hardware.servos.feetech import SPEC  # its vendor SDK (scservo_sdk) is imported when it opens

    return SPEC


def _reachy_mini() -> DriverSpec:
    from hardware.reachy_mini.driver import SPEC  # Pollen's SDK is imported when it connects

    return SPEC


DRIVERS: dict[str, tuple[Callable[[], DriverSpec], str]] = {
    "sim": (_sim, "bolt-agent"),
    "bolt_serial": (_bolt_serial, "pyserial"),
    "maestro": (_maestro, "pyserial"),
    "feetech": (_feetech, "feetech-servo-sdk"),
    "reachy_mini": (_reachy_mini, "bolt-agent[reachy]"),
}
"""Driver kind → (loader of its spec, the package to install when the loader fails)."""


def driver_spec(kind: str) -> DriverSpec:
    """The spec of a driver kind, its module imported now.

    Raises:
        DriverError: an unknown kind, or its package is missing (the message says what to install).
    """
    if kind not in DRIVERS:
        raise DriverError(f"unknown driver kind {kind!r} (known: {', '.join(DRIVERS)})")
    load, package = DRIVERS[kind]
    try:
        return load()
    except ImportError as e:
        raise DriverError(
            f"driver kind {kind!r} needs the package {package!r} (pip install {package}): {e}"
        ) from None


def driver_kind(cfg: RobotConfig, name: str) -> str:
    """The kind of the driver ``name``: its ``[robot.drivers]`` entry's, else the built-in of that name."""
    section = cfg.drivers.get(name)
    return section.kind if section is not None else name


def camera_sources(cfg: RobotConfig) -> dict[str, NamedSource]:
    """The named camera sources of every robot known here (``reachy_mini``, ``reachy_mini_sim``).

    Offered whatever the body: a Reachy Mini's simulated camera may watch a simulated daemon
    while another body moves. Bound to ``cfg``'s sections (the daemon a rendered camera is
    posed from).
    """
    from hardware.reachy_mini.camera import camera_sources as reachy_sources

    return reachy_sources(cfg.reachy_mini)


def doa_source(cfg: RobotConfig) -> DoaSource | None:
    """The direction-of-arrival source of the robot's body (a Reachy Mini's daemon), or None.

    Raises:
        DriverError: the default driver's package is missing.
    """
    spec = driver_spec(driver_kind(cfg, cfg.driver))
    return spec.doa(cfg) if spec.doa is not None else None


def animation_formats() -> dict[str, AnimationFormat]:
    """The animation file formats beyond our keyframes, by key (Pollen's recorded moves)."""
    from hardware.reachy_mini.moves import RECORDED_MOVE

    return dict(RECORDED_MOVE)
