"""Writing a new skill from the template, and skills from installed packages (entry points)."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime

import pytest

from agent.config import load_config
from agent.skills import ENTRY_POINT_GROUP, SkillContext, SkillError, load_registry, new_skill_file
from hardware.factory import build_robot


def test_template_skill_loads_validates_and_moves_the_robot(tmp_path):
    path = new_skill_file("greet_guest", tmp_path)
    text = path.read_text()
    assert "@skill" in text and "SkillContext" in text and text.count("#") >= 4  # commented
    reg = load_registry([tmp_path], entry_points=False)
    sk = reg.skills["greet_guest"]
    assert sk.parameters["properties"]["mode"]["enum"] == ["gentle", "big"]
    assert sk.parameters["properties"]["angle_deg"]["maximum"] == 90
    assert sk.keywords == ("greet", "guest") and sk.clamp
    robot, _ = build_robot(load_config().robot)
    ctx = SkillContext(robot=robot, now=datetime.now)
    out = reg.call("greet_guest", {"mode": "big", "angle_deg": 500}, ctx)
    assert out.ok and "90 degrees" in out.result["result"] and "clamped to 90" in out.result["note"]
    robot.wait_idle(5)
    assert robot.positions()["head_pitch"] == pytest.approx(30, abs=0.01)  # joint limit, not 90
    with pytest.raises(SkillError, match="exists already"):
        new_skill_file("greet_guest", tmp_path)
    with pytest.raises(SkillError, match="not a valid skill name"):
        new_skill_file("Greet-Guest", tmp_path)


def test_skills_from_an_installed_package_entry_point(tmp_path, monkeypatch):
    pkg = tmp_path / "bolt_extra_skills"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from agent.skills import skill\n\n@skill\ndef beep(times: int = 1) -> str:\n"
        "    '''Beep a few times.'''\n    return 'beep ' * times\n"
    )
    bad = tmp_path / "bolt_broken_skills.py"
    bad.write_text("raise ImportError('missing driver')\n")
    dist = tmp_path / "bolt_extra_skills-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bolt-extra-skills\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nextra = bolt_extra_skills\nbroken = bolt_broken_skills\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = load_registry([])
    assert "beep" in reg.names() and "wave" in reg.names()
    assert any("broken = bolt_broken_skills" in e and "missing driver" in e for e in reg.load_errors)
    assert reg.skills["beep"].description == "Beep a few times."
    sys.modules.pop("bolt_extra_skills", None)


def _skills_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``bolt-agent skills ARGS`` in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "agent", "skills", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_skills_new_and_list(tmp_path):
    r = _skills_cli("new", "wiggle", "--dir", str(tmp_path / "s"))
    assert r.returncode == 0 and "wiggle.py" in r.stdout
    cfg = tmp_path / "robot.toml"
    cfg.write_text('[skills]\nfolders = ["s"]\n')
    r = _skills_cli("list", "--config", str(cfg))
    assert r.returncode == 0
    assert "wiggle(mode, angle_deg)" in r.stdout and '"maximum": 90' in r.stdout and "wiggle.py:" in r.stdout


def test_cli_skills_new_refuses_a_name_the_robot_has_already(tmp_path):
    """A second skill of one name never loads: the template would be written for nothing."""
    r = _skills_cli("new", "wave", "--dir", str(tmp_path / "s"))
    assert r.returncode == 2 and not (tmp_path / "s" / "wave.py").exists()
    assert "'wave' is a skill already" in r.stderr and "skills/motion.py:" in r.stderr, r.stderr


def test_cli_skills_list_says_each_load_error_once(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "broken.py").write_text("def broken(:\n")
    cfg = tmp_path / "robot.toml"
    cfg.write_text('[skills]\nfolders = ["s"]\n')
    r = _skills_cli("list", "--config", str(cfg))
    assert r.returncode == 0 and "wave(" in r.stdout
    assert r.stderr.count("broken.py:1: skill file skipped: SyntaxError") == 1, r.stderr


def test_the_templates_keywords_are_words_people_say(tmp_path):
    """A new user's trial: ``skills new get_battery`` wrote ``keywords=("get_battery",)``."""
    text = new_skill_file("get_battery", tmp_path).read_text()
    assert '@skill(keywords=("battery",), clamp=True, follow_up=False)' in text
    assert '@skill(keywords=("wiggle",),' in new_skill_file("wiggle", tmp_path).read_text()
