"""Words on the screen (issue 50, item 7): what a new user read, and what they read now.

Library lines (OpenCV's ``[ WARN:0@0.028]``, FFmpeg's ``moov atom not found``), raw errnos, notes
printed twice, results with a minus sign for a side, and "I can't set timer". The commands run as
a user runs them (a subprocess from the repository root); the skills' words are checked on the
skills themselves.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.speech.audio import AudioError, decode_file

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "agent"]


def run(*args, stdin: str | None = None, timeout=300):
    return subprocess.run(
        [*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT, input=stdin
    )


@pytest.mark.parametrize("source", ["bad.mp4", "7"])
def test_see_says_what_failed_without_library_lines(tmp_path, source):
    (tmp_path / "bad.mp4").write_bytes(b"junk")
    r = subprocess.run(
        [*CLI, "see", source], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_env(ROOT)
    )
    assert r.returncode == 1
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: cannot open "), r.stderr
    assert "WARN" not in r.stderr and "moov" not in r.stderr and "@ 0x" not in r.stderr


def _env(root: Path) -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(root)
    env.pop("OPENCV_LOG_LEVEL", None)
    env.pop("OPENCV_FFMPEG_LOGLEVEL", None)
    return env


def test_a_file_that_is_not_audio_is_said_without_an_errno(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"junk" * 100)
    with pytest.raises(AudioError) as e:
        decode_file(bad)
    message = str(e.value)
    assert "not a readable audio file (invalid data found when processing input)" in message, message
    assert "Errno" not in message and "InvalidDataError" not in message and "'" not in message


def test_a_note_is_printed_once():
    """A typed line with a control character was one ``WARNING agent.pipeline.sources`` line on
    stderr and one ``note:`` line on stdout, with the same words."""
    r = run("chat", stdin="hello\x07 there\n")
    assert r.returncode == 0, r.stderr
    said = "typed line 1: 1 control character removed"
    assert r.stdout.count(said) == 1 and said not in r.stderr, (r.stdout, r.stderr)


def test_models_list_names_every_model_and_its_file():
    r = run("models", "list", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert {row["key"] for row in rows} >= {"llm.model", "asr.model", "tts.voice"}
    assert all(row["path"] and Path(row["path"]).exists() and row["bytes"] > 1_000_000 for row in rows), rows


def test_models_list_says_what_is_missing(tmp_path):
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[llm]\nmodel = "{tmp_path / "bolt.gguf"}"\n')
    r = run("models", "list", "-c", cfg)
    assert r.returncode == 1
    assert "llm.model" in r.stdout and "missing: LLM file not found" not in r.stdout
    assert f"missing: model file not found: {tmp_path / 'bolt.gguf'}" in r.stdout, r.stdout


@pytest.mark.parametrize(
    ("yaw", "pitch", "said"),
    [
        (-45, 0, "I am looking 45 degrees to the right."),
        (30, -10, "I am looking 30 degrees to the left and 10 degrees down."),
        (0, 0, "I am looking straight ahead."),
        (0, 12, "I am looking 12 degrees up."),
    ],
)
def test_a_look_says_its_side_in_words(yaw, pitch, said):
    from agent.skills import SkillContext, load_registry
    from hardware.config import RobotConfig
    from hardware.factory import build_robot

    robot, _ = build_robot(RobotConfig(), lambda *a: None)
    try:
        out = load_registry([], entry_points=False).call(
            "look", {"yaw_deg": yaw, "pitch_deg": pitch}, SkillContext(robot)
        )
    finally:
        robot.close()
    assert out.ok and out.result == said, out


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("set_timer", "set a timer"),
        ("cancel_timer", "cancel the timer"),
        ("look_at", "look at"),
        ("nod", "nod"),
    ],
)
def test_a_refusal_names_what_it_cannot_do_in_words(name, words):
    from agent.skills.args import doing

    assert doing(name) == words
