"""``bolt-agent doctor``: every check that decides whether ``run`` can start on this machine.

Each check returns a :class:`~hardware.check.Check` (name, ok, detail, fix command, and whether a
failure blocks ``run``). Nothing is downloaded, no model is loaded and nothing moves. Each
subsystem's checks live beside it, typed by its own config section:

* the Python environment — :func:`check_venv`, here;
* models — :mod:`agent.models_doctor`; the model profile — :mod:`agent.conversation.doctor`;
* memory plan, vision projector, GPU — :mod:`agent.memplan.doctor`;
* sound devices, the sound server under systemd — :mod:`agent.audio_io.doctor`;
* serial ports — :mod:`hardware.servos.doctor`;
* which JetPack, with its Python and the Reachy Mini SDK that go with it — :mod:`hardware.jetson`;
* a Reachy Mini body — :mod:`hardware.reachy_mini.doctor` (REST GETs to its daemon);
* the camera — :mod:`hardware.camera.doctor`;
* the systemd service — :func:`agent.systemd.check_service`.

:data:`CHECKS` lists them in the order they run and are shown; :func:`run_checks` runs them.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.audio_io.doctor import check_audio, check_systemd_env
from agent.config import Config
from agent.conversation.doctor import check_profile
from agent.memplan.doctor import check_gpu, check_gpu_access, check_memory, check_projector
from agent.models_doctor import check_models, pull_fix
from agent.skills import SkillRegistry
from agent.systemd import ServiceInfo, check_service
from hardware.camera.doctor import check_camera
from hardware.check import Check
from hardware.config import REACHY_MINI
from hardware.jetson import check_jetpack
from hardware.reachy_mini.daemon import sdk_version
from hardware.reachy_mini.doctor import check_reachy
from hardware.registry import camera_sources
from hardware.servos.doctor import check_serial

PACKAGES = ("llama-cpp-python", "faster-whisper", "piper-tts", "sounddevice", "pyserial", "huggingface-hub")
REPO = Path(__file__).resolve().parents[1]

__all__ = ["CHECKS", "Check", "DoctorCheck", "Situation", "check_venv", "run_checks"]


def check_venv(packages: tuple[str, ...] = PACKAGES) -> Check:
    """Python, virtual environment and the runtime packages.

    Args:
        packages: Distribution names that must be installed.
    """
    in_venv = sys.prefix != sys.base_prefix
    missing = []
    for dist in packages:
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist)
    py = f"Python {sys.version.split()[0]} at {sys.executable}" + ("" if in_venv else " (not a venv)")
    if missing:
        pip = f"{sys.executable} -m pip install {' '.join(missing)}"
        setup = REPO / "launch" / "setup.sh"
        fix = f"bash {setup} run  # or: {pip}" if setup.is_file() else pip
        return Check("packages", False, f"{py}; missing: {', '.join(missing)}", fix)
    return Check("packages", True, f"{py}; {len(packages)} runtime packages installed")


@dataclass(frozen=True)
class Situation:
    """What the checks of a config may look at besides the config.

    Attributes:
        env: The environment (``INVOCATION_ID``, ``XDG_RUNTIME_DIR``, ``PULSE_SERVER``...).
        service: The installed unit (:func:`agent.systemd.service_info`), None when there is none.
    """

    env: Mapping[str, str]
    service: ServiceInfo | None


@dataclass(frozen=True)
class DoctorCheck:
    """One entry of :data:`CHECKS`: a subsystem's checks of a loaded config.

    Attributes:
        subsystem: What it checks (``audio``, ``reachy``...).
        run: ``(config, situation) -> checks``; empty when the subsystem is not in this config.
    """

    subsystem: str
    run: Callable[[Config, Situation], list[Check]]


def _where(cfg: Config) -> str:
    return str(cfg.source) if cfg.source else "the config"


def _present(check: Check | None) -> list[Check]:
    return [check] if check is not None else []


def skills_of(cfg: Config) -> tuple[SkillRegistry, list[str]]:
    """The skills a robot of ``cfg`` is offered, loaded with no robot started, and the libraries' notes.

    As ``run`` loads them (packaged, the config's folders, entry points; the body's joints,
    libraries and devices), with the loader's own log lines held back: the caller reports
    :attr:`~agent.skills.SkillRegistry.load_errors` once.
    """
    import logging

    from agent.skills import load_registry
    from hardware.factory import load_libraries

    libraries, notes = load_libraries(cfg.robot)
    loader = logging.getLogger("agent.skills")
    level = loader.level
    loader.setLevel(logging.CRITICAL)
    try:
        reg = load_registry(
            cfg.skills.folders,
            cfg.skills.include_builtin,
            cfg.skills.enabled,
            cfg.skills.timeout_s,
            joints=[j.name for j in cfg.robot.joints],
            libraries={kind: list(lib) for kind, lib in libraries.items()},
            devices=cfg.devices(),
        )
    finally:
        loader.setLevel(level)
    return reg, notes


def check_skills(cfg: Config) -> Check:
    """The skills this robot is offered, and those left out with the reason (no camera, no arm).

    A skill whose joints or devices the body lacks is never offered to the model nor named by
    "what can you do?"; this line says which and why. Skill files that failed to load fail it
    (not blocking: the other skills run).
    """
    reg, _ = skills_of(cfg)
    detail = f"{len(reg.skills)} offered"
    if reg.left_out:  # each reason without its source line: "no camera is configured"
        detail += "; left out: " + ", ".join(
            f"{n} ({why.rsplit(' (', 1)[0]})" for n, why in reg.left_out.items()
        )
    if reg.load_errors:
        return Check(
            "skills", False, f"{detail}; {'; '.join(reg.load_errors)}", "bolt-agent skills list", False
        )
    return Check("skills", True, detail, blocking=False)


CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck("models", lambda cfg, s: [check_models(cfg, s.service)]),
    DoctorCheck("profile", lambda cfg, s: [check_profile(cfg.llm)]),
    DoctorCheck("memory", lambda cfg, s: [check_memory(cfg)]),
    DoctorCheck("projector", lambda cfg, s: _present(check_projector(cfg, s.service))),
    # Before the audio check: a PulseAudio client creates $XDG_RUNTIME_DIR/pulse when it connects.
    DoctorCheck("systemd-env", lambda cfg, s: _present(check_systemd_env(s.env, cfg.audio, _where(cfg)))),
    DoctorCheck("audio", lambda cfg, s: [check_audio(audio=cfg.audio, where=_where(cfg))]),
    DoctorCheck("serial", lambda cfg, s: [check_serial(cfg.robot, _where(cfg))]),
    DoctorCheck("reachy", lambda cfg, s: check_reachy(cfg.robot, _where(cfg), pull_fix(cfg, s.service))),
    DoctorCheck("camera", lambda cfg, s: [check_camera(cfg.camera, camera_sources(cfg.robot))]),
    DoctorCheck("skills", lambda cfg, s: [check_skills(cfg)]),
    DoctorCheck("gpu", lambda cfg, s: [check_gpu()]),
    DoctorCheck("jetpack", lambda cfg, s: [check_jetpack(cfg.robot.driver == REACHY_MINI, sdk_version())]),
    DoctorCheck("gpu-access", lambda cfg, s: _present(check_gpu_access(cfg.llm))),
    DoctorCheck("service", lambda cfg, s: [check_service(s.service)]),
)
"""Every subsystem's checks of a config, in the order they run and are shown (after
``packages`` and ``config``, which need no config)."""


def run_checks(
    config: Path | None, env: Mapping[str, str] | None = None, service: ServiceInfo | None = None
) -> list[Check]:
    """Run every check for a config.

    Args:
        config: Config TOML (None = the default config).
        env: Environment to read (default ``os.environ``).
        service: The installed unit (:func:`agent.systemd.service_info`), None when there is none.

    Returns:
        The checks in a fixed order; a bad config is one failed ``config`` check.
    """
    from agent.config import ConfigError, load_config

    checks = [check_venv()]
    try:
        cfg = load_config(config)
    except ConfigError as e:
        return [*checks, Check("config", False, str(e), f"edit {config or 'the config'}")]
    checks.append(Check("config", True, str(cfg.source or "default config")))
    situation = Situation(os.environ if env is None else env, service)
    for entry in CHECKS:
        checks += entry.run(cfg, situation)
    return checks
