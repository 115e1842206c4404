"""Small things a new user meets first: ``-h``, ``--version``, and ``listen`` on files that are not there.

The CLI runs as a user would run it (a subprocess from the repository root), as in ``tests/test_cli.py``;
none of these loads a model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "agent"]


def run(*args, timeout=120):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize(
    "args", [(), ("listen",), ("chat",), ("skills",), ("skills", "list"), ("models", "pull"), ("state",)]
)
def test_dash_h_is_help(args):
    short, long = run(*args, "-h"), run(*args, "--help")
    assert short.returncode == 0, short.stderr
    assert "No such option" not in short.stderr
    assert "Usage: bolt-agent" in short.stdout
    assert short.stdout == long.stdout


def test_help_names_both_help_options_and_version():
    r = run("-h")
    assert "--help" in r.stdout and "-h" in r.stdout and "--version" in r.stdout


def test_listen_dash_h_lists_its_arguments():
    r = run("listen", "-h")
    assert r.returncode == 0, r.stderr
    assert "FILES" in r.stdout.upper() and "--out" in r.stdout


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_installed_version(flag):
    r = run(flag)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"bolt-agent {version('bolt-agent')}"
    assert r.stderr == ""


def test_listen_on_missing_files_exits_1_before_loading_models(tmp_path):
    missing = [tmp_path / "nonexist.wav", tmp_path / "also_gone.flac"]
    r = run("listen", *missing, "--out", tmp_path / "out")
    assert r.returncode == 1
    assert r.stdout == ""  # no "ready (models loaded ...)", nothing played
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: no readable input")
    assert all(f"{p}: file not found" in lines[0] for p in missing)
    assert not (tmp_path / "out").exists()


def test_listen_json_on_unreadable_inputs_is_error_events_only(tmp_path):
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    r = run("listen", tmp_path / "nonexist.wav", tmp_path, empty, "--json")
    assert r.returncode == 1
    evs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert [e["event"] for e in evs] == ["error"] * 3, evs  # no "ready": no model was loaded
    messages = [e["message"] for e in evs]
    assert "nonexist.wav: file not found" in messages[0]
    assert "is a folder" in messages[1]
    assert "empty.wav: file is empty" in messages[2]
    assert "error: no readable input" in r.stderr


def test_a_bad_config_still_wins_over_missing_input(tmp_path):
    cfg = tmp_path / "robot.toml"
    cfg.write_text("[llm]\nthreads = -1\n")
    r = run("listen", tmp_path / "nonexist.wav", "--config", cfg)
    assert r.returncode == 2
    assert "llm.threads" in r.stderr and "no readable input" not in r.stderr


def test_one_readable_file_is_enough_to_go_on(tmp_path):
    from agent.cli.printer import EventPrinter
    from agent.cli.talk import exit_unless_readable
    from agent.speech.audio import file_problem

    wav = tmp_path / "a.wav"
    wav.write_bytes(b"RIFF....")  # not checked for audio here: the pipeline decodes it later
    missing = tmp_path / "gone.wav"
    printer = EventPrinter(json_mode=True)
    exit_unless_readable([missing, wav], printer)  # returns: the missing one is skipped later
    assert printer.errors == 0
    assert file_problem(wav) is None
    assert file_problem(missing) == f"{missing}: file not found"


@pytest.mark.parametrize("command", ["chat", "listen", "demo"])
def test_an_out_that_is_a_file_exits_1_before_loading_models(tmp_path, command):
    """`chat --out FILE` loaded the models, then failed every reply WAV ("EEXIST") and exited 0."""
    afile = tmp_path / "afile"
    afile.write_text("mine")
    wav = tmp_path / "a.wav"
    wav.write_bytes(b"RIFF")  # readable (listen checks that first); never decoded here
    args = {"chat": ["chat"], "listen": ["listen", wav], "demo": ["demo"]}[command]
    for out in (afile, afile / "sub"):
        r = subprocess.run(
            [*CLI, *map(str, args), "--out", str(out)],
            input="hello\n",
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert r.returncode == 1 and r.stdout == "", (r.stdout, r.stderr)
        assert (
            r.stderr.strip()
            == f"error: --out {out}: {afile} is not a folder; name a folder for the reply WAVs"
        )
    assert afile.read_text() == "mine"
