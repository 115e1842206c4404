"""The development tools (``tools/bench``) stay out of the installed package and start from a checkout.

``bolt-agent bench|soak|motion-bench`` replace their process with ``python -m tools.bench`` run
from the checkout (:mod:`agent.cli.devtools`); without a checkout they say how to get one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from setuptools import find_packages

from agent.cli import devtools

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (JetPack 6)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _agent(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "agent", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_package_ships_no_tools_and_no_runtime_dependency_of_theirs():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    find = project["tool"]["setuptools"]["packages"]["find"]
    packages = find_packages(str(ROOT), include=find["include"], exclude=find["exclude"])
    assert {"agent", "agent.cli", "hardware", "hardware.servos", "skills", "launch"} <= set(packages)
    assert [p for p in packages if p.split(".")[0] in ("tools", "tests")] == []
    runtime = " ".join(project["project"]["dependencies"])
    assert "jiwer" not in runtime and "matplotlib" not in runtime  # the tools' own
    assert any(d.startswith("jiwer") for d in project["project"]["optional-dependencies"]["test"])


@pytest.mark.parametrize(
    ("command", "option"), [("bench", "--accuracy"), ("soak", "--hours"), ("motion-bench", "--trials")]
)
def test_each_tool_answers_its_own_help_from_the_checkout(tmp_path, command, option):
    out = _agent(command, "-h", cwd=tmp_path)  # run from elsewhere: found beside the agent package
    assert out.returncode == 0, out.stderr
    assert option in out.stdout and f"bolt-agent {command}" in out.stdout


def test_the_tool_runs_with_the_checkout_first_on_its_path(monkeypatch):
    assert devtools.find_checkout() == ROOT
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    argv, env = devtools.tool_command(ROOT, "soak", ["--turns", "3"])
    assert argv == [sys.executable, "-m", "tools.bench", "soak", "--turns", "3"]
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/elsewhere"]


def test_without_a_checkout_it_says_how_to_get_one(monkeypatch, capsys, tmp_path):
    assert devtools.find_checkout(tmp_path) in (ROOT, None)  # tmp_path itself is no checkout
    monkeypatch.setattr(devtools, "find_checkout", lambda cwd=None: None)
    with pytest.raises(typer.Exit) as e:
        devtools.run_tool("bench", ["--accuracy"])
    assert e.value.exit_code == 2
    err = capsys.readouterr().err
    assert "tools/bench/" in err and "make setup-test" in err and "not include" in err


def test_soak_runs_its_body_and_asks_for_a_length(tmp_path):
    """Past ``-h``: the soak's own imports load (a moved module once broke only this command)."""
    out = _agent("soak", "--turns", "0", "--out", str(tmp_path / "soak"), cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "give --turns or --hours" in out.stderr and "Traceback" not in out.stderr
