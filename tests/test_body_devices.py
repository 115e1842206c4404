"""Offer only what the body can do (issue 50, item 5): skills that need a device the robot lacks.

With no camera configured ``describe_scene`` and ``look_at`` (``@skill(needs=("camera",))``) are
not offered, not promised by "what can you do?", and ``skills list`` and ``doctor`` say they were
left out and why; with a camera they are offered. A skill author's own skill can need a device
the same way. The conversation's answer when asked for one ("I have no camera, so I cannot
see.") is in ``test_everyday.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent.config import load_config
from agent.skills import SkillContext, SkillRegistry, load_registry, skill

ROOT = Path(__file__).resolve().parent.parent


def test_without_a_camera_the_camera_skills_are_not_offered_nor_promised():
    cfg = load_config()  # the embedded default: no [camera] source
    assert cfg.devices() == frozenset()
    reg = load_registry([], entry_points=False, devices=cfg.devices())
    assert "describe_scene" not in reg.skills and "look_at" not in reg.skills
    assert reg.left_out["describe_scene"].startswith("no camera is configured (")
    assert reg.absent["describe_scene"][1] == "I have no camera, so I cannot see."
    said = reg.call("abilities", {}, SkillContext(robot=None, abilities=reg.abilities()))
    assert said.ok and "see" not in said.result and "look at people" not in said.result, said
    assert "tell the time" in said.result


def test_with_a_camera_they_are_offered(tmp_path):
    cfg_file = tmp_path / "robot.toml"
    cfg_file.write_text('[camera]\nsource = "0"\n')
    cfg = load_config(cfg_file)
    assert cfg.devices() == {"camera"}
    reg = load_registry([], entry_points=False, devices=cfg.devices())
    assert {"describe_scene", "look_at"} <= set(reg.skills) and not reg.absent
    assert "tell you what I see" in reg.abilities()


def test_a_skill_author_can_need_a_device():
    @skill(needs=("microphone_array",))
    def where_is_the_sound() -> str:
        """Say where a sound comes from."""
        return "from the left"

    @skill(needs=("head_yaw", "camera"))
    def follow_me() -> str:
        """Follow the person with the head."""
        return "following"

    @skill(needs=("camera",))
    def count_people() -> str:
        """Count the people in view."""
        return "two"

    reg = SkillRegistry(joints=frozenset({"head_yaw"}), devices=frozenset({"camera"}))
    assert reg.register(where_is_the_sound) is None and reg.register(follow_me) is not None
    assert reg.left_out["where_is_the_sound"].startswith("no microphone array is configured")
    # a device alone moves nothing: the e-stop does not refuse a skill that only needs a camera
    assert reg.register(count_people) is not None and not reg.skills["count_people"].moves
    assert reg.skills["follow_me"].moves


def test_skills_list_and_doctor_say_what_was_left_out_and_why():
    listed = subprocess.run(
        [sys.executable, "-m", "agent", "skills", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert listed.returncode == 0, listed.stderr
    assert "left out: describe_scene: no camera is configured" in listed.stderr
    assert "describe_scene(" not in listed.stdout and "get_time(" in listed.stdout
    doctor = subprocess.run(
        [sys.executable, "-m", "agent", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["skills"]["ok"], checks["skills"]
    assert "describe_scene (no camera is configured)" in checks["skills"]["detail"]
    assert "look_at (no camera is configured)" in checks["skills"]["detail"]
