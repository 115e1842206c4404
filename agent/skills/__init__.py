"""Skills: typed Python functions the model can call as tools.

The package is split by concern, each module depending only on those before it:

- ``skill.py``: what a skill is — the ``@skill`` marker, :class:`SkillContext`,
  :class:`Choices`, :class:`Clamped`, :class:`Skill` and :func:`build_skill` (schema from the signature),
  :class:`ToolOutcome`, :class:`SkillError`;
- ``args.py``: checking a call's arguments (clamping, the message for bad ones);
- ``registry.py``: :class:`SkillRegistry` — the skills by name, their tool schemas, running
  a call with validation and a timeout (never raises);
- ``loader.py``: where skills come from — the packaged ``skills/`` folder, config folders,
  entry points — and :func:`load_registry`;
- ``authoring.py``: the template behind ``bolt-agent skills new``.

The agent core never imports the built-in ``skills/`` package: it finds those skills only
through :func:`load_registry`, and hands the registry what they need from the robot (its
animation names, ``load_registry(..., animations=robot.animations)``).
"""

from agent.skills.authoring import new_skill_file
from agent.skills.loader import (
    ANIMATIONS,
    BUILTIN_SKILLS,
    DANCES,
    EMOTIONS,
    ENTRY_POINT_GROUP,
    load_entry_points,
    load_file,
    load_folder,
    load_registry,
)
from agent.skills.registry import SkillRegistry
from agent.skills.skill import (
    GENERIC_NAME_WORDS,
    Choices,
    Clamped,
    Skill,
    SkillContext,
    SkillError,
    ToolOutcome,
    build_skill,
    is_skill,
    skill,
)

__all__ = [
    "ANIMATIONS",
    "BUILTIN_SKILLS",
    "DANCES",
    "EMOTIONS",
    "ENTRY_POINT_GROUP",
    "GENERIC_NAME_WORDS",
    "Choices",
    "Clamped",
    "Skill",
    "SkillContext",
    "SkillError",
    "SkillRegistry",
    "ToolOutcome",
    "build_skill",
    "is_skill",
    "load_entry_points",
    "load_file",
    "load_folder",
    "load_registry",
    "new_skill_file",
    "skill",
]
