"""Loading skills: the packaged folder, config folders, installed packages' entry points.

Skills come from three places, in this order: the packaged ``skills/`` folder (at the
repository root, beside ``agent/``), the folders named in ``[skills] folders``, and
installed Python packages that declare an entry point in the group ``bolt_agent.skills``
(the entry point names a module, or one function; its ``@skill`` functions are loaded).
Nothing is registered by importing: the built-in skills are found only here, by path.

A skill file that fails to import, or a function that fails to build, is recorded in the
registry's ``load_errors`` with its path and line (``file.py:12: ...``) and skipped; the
other skills still load. :func:`load_registry` builds the registry the config asks for.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import sys
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path

from agent.skills.registry import SkillRegistry
from agent.skills.skill import Skill, SkillError, is_skill

log = logging.getLogger(__name__)

BUILTIN_SKILLS = Path(__file__).resolve().parents[2] / "skills"
ENTRY_POINT_GROUP = "bolt_agent.skills"
ANIMATIONS = "animations"  # the Choices key of the robot's animation names
DANCES = "dances"  # ... of a Reachy Mini's dances (reachy-mini-dances-library)
EMOTIONS = "emotions"  # ... of its recorded emotions (the emotions dataset)


def load_file(registry: SkillRegistry, path: Path) -> list[Skill]:
    """Import one skill script and register its marked functions.

    A file that fails to import, or a function that fails to register, is recorded in
    ``registry.load_errors`` (with path and line) and skipped; nothing is raised.

    Args:
        registry: Where the skills go.
        path: A ``*.py`` file.

    Returns:
        The skills registered from this file.

    """
    mod_name = f"bolt_skills_{abs(hash(str(path.resolve())))}_{path.stem}"
    try:
        spec = importlib.util.spec_from_file_location(mod_name, path)
        if spec is None or spec.loader is None:
            raise ImportError("not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
    except Exception as e:  # a user's script may raise anything at import
        sys.modules.pop(mod_name, None)
        line = _error_line(e, path)
        msg = f"{path}:{line}: skill file skipped: {type(e).__name__}: {e}"
        log.error(msg)
        registry.load_errors.append(msg)
        return []
    loaded = []
    for obj in vars(module).values():
        if is_skill(obj) and getattr(obj, "__module__", None) == mod_name:
            try:
                sk = registry.register(obj, f"{path}:{obj.__code__.co_firstlineno}")
                if sk is not None:
                    loaded.append(sk)
            except SkillError as e:  # message already names path:line
                msg = f"{e}; skipped"
                log.error(msg)
                registry.load_errors.append(msg)
            except (TypeError, ValueError) as e:  # e.g. an annotation pydantic cannot handle
                msg = f"{path}:{obj.__code__.co_firstlineno}: skill {obj.__name__} skipped: {e}"
                log.error(msg)
                registry.load_errors.append(msg)
    return loaded


def load_folder(registry: SkillRegistry, folder: Path) -> list[Skill]:
    """Load every ``*.py`` (not starting with ``_``) in a folder, sorted by name.

    Args:
        registry: Where the skills go.
        folder: The folder; a missing one is recorded in ``registry.load_errors``.

    Returns:
        The skills registered from the folder.

    """
    if not folder.is_dir():
        msg = f"{folder}: skills folder not found; skipped"
        log.warning(msg)
        registry.load_errors.append(msg)
        return []
    out = []
    for path in sorted(folder.glob("*.py")):
        if not path.name.startswith("_"):
            out.extend(load_file(registry, path))
    return out


def load_entry_points(registry: SkillRegistry, group: str = ENTRY_POINT_GROUP) -> int:
    """Register the ``@skill`` functions of every module named by an installed entry point.

    Args:
        registry: Where the skills go.
        group: The entry-point group.

    Returns:
        Number of skills registered. Failures go to ``registry.load_errors``.

    """
    count = 0
    for ep in importlib.metadata.entry_points(group=group):
        where = f"entry point {ep.name} = {ep.value} ({ep.dist.name if ep.dist else 'unknown package'})"
        try:
            obj = ep.load()
        except Exception as e:  # a third-party package may raise anything at import
            registry.load_errors.append(f"{where}: skipped: {type(e).__name__}: {e}")
            continue
        funcs = [obj] if callable(obj) else [v for v in vars(obj).values() if is_skill(v)]
        for fn in funcs:
            try:
                count += registry.register(fn) is not None
            except (SkillError, TypeError, ValueError) as e:
                registry.load_errors.append(f"{where}: skill {getattr(fn, '__name__', fn)} skipped: {e}")
    return count


def _error_line(e: BaseException, path: Path) -> int:
    if isinstance(e, SyntaxError) and e.lineno:
        return e.lineno
    line = 0
    for fr in traceback.extract_tb(e.__traceback__):
        if Path(fr.filename).resolve() == path.resolve():
            line = fr.lineno or 0
    return line


def load_registry(
    folders: list[Path],
    include_builtin: bool = True,
    enabled: list[str] | None = None,
    timeout_s: float = 10.0,
    entry_points: bool = True,
    animations: Iterable[str] | None = None,
    joints: Iterable[str] | None = None,
    libraries: Mapping[str, Iterable[str]] | None = None,
    devices: Iterable[str] | None = None,
) -> SkillRegistry:
    """Build the registry the config asks for.

    Skills load from the packaged ``skills/`` folder, then ``folders``, then installed
    packages' ``bolt_agent.skills`` entry points; then only ``enabled`` are kept.

    Args:
        folders: Extra skill folders (``[skills] folders``, already resolved).
        include_builtin: Load the packaged ``skills/`` folder.
        enabled: Skill names to keep; empty or None keeps all.
        timeout_s: Longest a foreground skill may run, s.
        entry_points: Load installed packages' entry points.
        animations: The robot's animation names (``robot.animations``), handed to the
            registry under the ``"animations"`` key before loading: ``play_animation``'s
            ``name`` enum lists them. None: the skill's own default (the packaged animations).
        joints: The body's joints (``robot.joints``): skills that need others are left out.
            None: the default robot's (``RobotConfig()``: a head and two arms).
        libraries: The body's animation libraries' names by kind (``robot.libraries``:
            ``"dances"``, ``"emotions"``), the enums of the skills that play them.
        devices: The devices of :data:`~agent.skills.skill.DEVICES` the robot is configured
            with (``Config.devices()``): skills that need others are left out. None: all offered.

    Returns:
        The registry; problems are in its ``load_errors`` (nothing is raised).

    """
    if joints is None:
        from hardware.config import RobotConfig

        joints = [j.name for j in RobotConfig().joints]
    reg = SkillRegistry(
        timeout_s=timeout_s, joints=frozenset(joints), devices=None if devices is None else frozenset(devices)
    )
    if animations is not None:
        reg.choices[ANIMATIONS] = tuple(animations)
    for key, names in (libraries or {}).items():
        reg.choices[key] = tuple(names)
    if include_builtin:
        load_folder(reg, BUILTIN_SKILLS)
    for f in folders:
        load_folder(reg, Path(f))
    if entry_points:
        load_entry_points(reg)
    reg.restrict(enabled or [])
    return reg
