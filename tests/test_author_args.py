"""A skill author's arguments on the stand-in, through ``chat``: the words fill them from the schema.

SmolLM2-135M wrote ``roll_dice(sides 2)`` for "a twenty-sided die" and blinked blue for "blink the
red lights"; the small profile fills any skill's enum said word for word and number said, and the
schema's default where the words say nothing (:func:`agent.conversation.small.argprior.follow_words`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.small_model

SKILLS = '''
from typing import Annotated, Literal

from pydantic import Field

from agent.skills import skill


@skill(keywords=("roll", "die", "dice"), side_effects=False)
def roll_dice(sides: Annotated[int, Field(ge=2, le=100, description="faces of the die")] = 6) -> str:
    """Roll a die and say the number."""
    return f"I rolled a {sides}-sided die."


@skill(keywords=("blink", "lights", "flash"))
def blink(color: Literal["red", "green", "blue"] = "blue") -> str:
    """Blink the lights in a color."""
    return f"Blinking {color}."
'''


def test_the_words_fill_a_skill_authors_arguments(tmp_path):
    folder = tmp_path / "my_skills"
    folder.mkdir()
    (folder / "toys.py").write_text(SKILLS)
    config = tmp_path / "toys.toml"
    config.write_text(f'[skills]\nfolders = ["{folder}"]\n')
    typed = "Roll a twenty-sided die.\nBlink the red lights.\nRoll a die.\n"
    r = subprocess.run(
        [sys.executable, "-m", "agent", "chat", "--json", "--config", str(config)],
        input=typed,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    evs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    calls = [(e["turn_id"], e["name"], e["arguments"]) for e in evs if e["event"] == "tool_call"]
    by_turn = {}
    for turn, name, args in calls:
        by_turn.setdefault(turn, []).append((name, args))
    first, second, third = (by_turn[t] for t in sorted(by_turn))
    assert ("roll_dice", {"sides": 20}) in first, calls
    assert ("blink", {"color": "red"}) in second, calls
    assert all(args.get("sides", 6) == 6 for name, args in third if name == "roll_dice"), calls
