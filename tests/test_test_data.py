"""The tests' own data: in the repository with its sources, found first, and missing data fails CI.

``tests/conftest.py`` finds ``tests/data`` (or ``$BOLT_FIXTURES``) and the Gemma 4 vocabulary that
set-up fetched; a skip for missing data becomes a failure under ``$CI`` or ``BOLT_STRICT_DATA=1``.
The hook is checked in a child pytest run on a throwaway test file that loads this conftest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import conftest
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def test_the_data_is_in_the_repository_with_its_sources():
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    files = sorted(p.relative_to(DATA) for p in DATA.rglob("*") if p.is_file())
    data = [f for f in files if f.parts[0] in ("audio", "commands", "images", "video")]
    assert len(data) == 4 + 11 + 5 + 1  # the commands folder holds its manifest too
    for f in data:  # every file is in the table of sources (a command WAV through its row)
        assert f.name in readme or (f.parts[0] == "commands" and "`commands/*.wav`" in readme), f
    assert sum((DATA / f).stat().st_size for f in files) < 8 * 2**20  # small enough to clone
    for lic in ("faster-whisper.txt", "face_recognition.txt", "darknet.txt"):
        assert (DATA / "licenses" / lic).is_file() and f"licenses/{lic}" in readme
    manifest = json.loads((DATA / "commands" / "manifest.json").read_text())
    assert {m["file"] for m in manifest} == {
        f.name for f in data if f.suffix == ".wav" and f.parts[0] == "commands"
    }


def test_the_repository_data_is_found_unless_bolt_fixtures_names_another(monkeypatch, tmp_path):
    monkeypatch.delenv("BOLT_FIXTURES", raising=False)
    assert conftest.find_fixtures() == DATA
    monkeypatch.setenv("BOLT_FIXTURES", str(tmp_path))
    assert conftest.find_fixtures() == tmp_path
    (tmp_path / "gguf").mkdir()
    (tmp_path / "gguf" / conftest.GEMMA4_VOCAB).write_bytes(b"GGUF")
    assert conftest.find_gemma4_vocab() == tmp_path / "gguf" / conftest.GEMMA4_VOCAB
    monkeypatch.setenv("BOLT_FIXTURES", str(tmp_path / "absent"))
    assert conftest.find_fixtures() == DATA


def test_strict_under_ci_or_bolt_strict_data():
    assert conftest.strict_data({"CI": "true"}) and conftest.strict_data({"BOLT_STRICT_DATA": "1"})
    assert not conftest.strict_data({}) and not conftest.strict_data({"CI": "false", "BOLT_STRICT_DATA": "0"})


CHILD_CONFTEST = """
import importlib.util
spec = importlib.util.spec_from_file_location("bolt_conftest", {path!r})
bolt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bolt)
pytest_runtest_makereport = bolt.pytest_runtest_makereport
"""
CHILD_TESTS = """
import pytest

def test_needs_data():
    pytest.skip("test data missing: the thing (fetch it)")

def test_opt_in():
    pytest.skip("the real peer is opt-in")

def test_passes():
    assert 1 + 1 == 2
"""


def _child(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(CHILD_CONFTEST.format(path=str(ROOT / "tests" / "conftest.py")))
    (tmp_path / "test_child.py").write_text(CHILD_TESTS)
    clean = {k: v for k, v in os.environ.items() if k not in ("CI", "BOLT_STRICT_DATA")}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", "test_child.py"]
    return subprocess.run(
        cmd, cwd=tmp_path, env={**clean, **env}, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("env", [{"BOLT_STRICT_DATA": "1"}, {"CI": "true"}], ids=["strict", "ci"])
def test_a_skip_for_missing_data_fails_under_ci(tmp_path, env):
    out = _child(tmp_path, **env)
    assert out.returncode == 1, out.stdout
    assert "1 failed, 1 passed, 1 skipped" in out.stdout
    assert "FAILED test_child.py::test_needs_data" in out.stdout or "test_needs_data" in out.stdout
    assert "fails when CI or BOLT_STRICT_DATA=1 is set" in out.stdout
    assert "SKIPPED [1] test_child.py:8: the real peer is opt-in" in out.stdout  # other skips stay skips


def test_a_skip_for_missing_data_is_listed_with_its_reason_otherwise(tmp_path):
    out = _child(tmp_path)
    assert out.returncode == 0, out.stdout
    assert "1 passed, 2 skipped" in out.stdout
    assert "SKIPPED [1] test_child.py:5: test data missing: the thing (fetch it)" in out.stdout
