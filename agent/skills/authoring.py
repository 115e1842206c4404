"""Authoring skills: a commented template to start a new skill from.

``bolt-agent skills new NAME`` writes :data:`TEMPLATE` to ``DIR/NAME.py``: one ``@skill``
function whose comments explain where the tool's name, description and argument schema
come from, how the robot is reached (``SkillContext``) and what to return. The file is
picked up like any other skill script once its folder is in ``[skills] folders`` (see
``loader.py``). Depends only on ``skill.py``.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from agent.skills.skill import GENERIC_NAME_WORDS, SkillError

TEMPLATE = '''"""{title}: a bolt-agent skill.

Every function marked with @skill in this file becomes a tool the robot's model can call.
The tool's name is the function name, its description is the first paragraph of the
docstring, and its arguments come from the signature: type hints are checked before the
call, so the function only ever sees valid values.
"""

from typing import Annotated, Literal

from pydantic import Field

from agent.skills import SkillContext, skill


# keywords: words people say when they want this skill; they help the speech recognizer
# and small models pick it. clamp=True clamps numbers into range instead of rejecting them;
# a number the user said is then told ("The most I can do for how far is 90."),
# or in your words with Annotated[..., Clamped(below="...", above="... {{limit}} degrees ...")].
# ability="...": what the robot says it can do with this skill when asked "what can you do?"
# (default: the words of the skill's name).
# follow_up=False: the result only confirms an action, so the robot speaks while it moves and
# the result is not read back. Leave it out (default True) when the user wants to hear the
# result (a reading, a lookup): the model then takes a second round to say it.
@skill(keywords={keywords}, clamp=True, follow_up=False)
def {name}(
    ctx: SkillContext,  # the robot and clock; not shown to the model
    mode: Literal["gentle", "big"] = "gentle",  # Literal -> the model picks one of these
    angle_deg: Annotated[float, Field(ge=0, le=90, description="how far, in degrees")] = 30.0,
) -> str:
    """Say in one line what this skill does (the model reads this)."""
    # Move the robot: joint names come from the config, degrees are clamped to joint limits.
    ctx.robot.move({{"head_pitch": angle_deg if mode == "big" else angle_deg / 2}}, duration_ms=500)
    # Return a short first-person sentence: the model sees it (and reads it back when follow_up).
    return f"I did {name} ({{mode}}, {{angle_deg:g}} degrees)."
'''


def new_skill_file(name: str, folder: Path) -> Path:
    """Write a commented template skill ``folder/NAME.py``.

    Args:
        name: Skill name: a lower-case Python identifier (``greet_guest``).
        folder: Folder to write into (created if missing).

    Returns:
        The path written.

    Raises:
        SkillError: the name is not a valid identifier, or the file exists already.

    """
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise SkillError(f"{name!r} is not a valid skill name: use lower-case letters, digits and _")
    path = Path(folder) / f"{name}.py"
    if path.exists():
        raise SkillError(f"{path} exists already; choose another name")
    path.parent.mkdir(parents=True, exist_ok=True)
    said = [w for w in name.split("_") if w and w not in GENERIC_NAME_WORDS] or [name.replace("_", " ")]
    keywords = "(" + ", ".join(f'"{w}"' for w in said) + ",)"  # words people say, not the identifier
    path.write_text(
        TEMPLATE.format(name=name, title=name.replace("_", " ").capitalize(), keywords=keywords),
        encoding="utf-8",
    )
    return path
