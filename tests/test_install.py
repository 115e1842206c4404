"""``jetson/install.sh``: the dry run lists every step; a CPU-only run into a temporary prefix
writes the config, the udev rule and the unit once (a second run changes nothing); the installed
unit passes ``systemd-analyze verify``; the script is shellcheck-clean.

Steps that change the running system (apt, the ``bolt`` user, systemctl, udevadm) only print
"would run: ..." under ``--prefix``; the venv build and the model download are skipped with
``--skip-venv``; the model step runs against a local hub (tests/emu_hub.py, ``HF_ENDPOINT``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agent.models import BOLT_E4B_REF
from tests.emu_hub import HubServer

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "jetson" / "install.sh"
STEPS = ["apt", "user", "venv", "config", "udev", "unit", "models", "start"]


def install(*args: str, env: dict[str, str] | None = None) -> str:
    r = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_dry_run_lists_every_step_and_changes_nothing(tmp_path):
    out = install("--dry-run", "--prefix", str(tmp_path), "--cuda")
    headers = [line.split(":")[0][3:] for line in out.splitlines() if line.startswith("== ")]
    assert headers == STEPS, out
    assert "-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=87" in out
    assert "export CUDACXX=" in out and "BOLT_WHEELHOUSE=" + str(ROOT / "build/wheels-cuda") in out
    # a CPU-only llama-cpp-python already in the venv is replaced by the CUDA wheel
    assert f"pip install -q --force-reinstall --no-deps {ROOT}/build/wheels-cuda/llama_cpp_python-" in out
    assert "BOLT_LLAMA_SERVER=1" in out and "launch/setup.sh run" in out
    assert "audio dialout video render" in out
    assert "would write" in out and "99-bolt-servo.rules" in out and "bolt-agent.service" in out
    assert f"models pull --config {tmp_path}/etc/bolt-agent/robot.toml" in out
    assert "systemctl enable bolt-agent" in out
    assert not any(tmp_path.iterdir()), "a dry run wrote files"


def test_cuda_build_finds_jetpacks_nvcc_off_the_path(tmp_path):
    """JetPack's nvcc is in /usr/local/cuda/bin, not on root's PATH: both builds get it."""
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    out = install("--dry-run", "--prefix", str(tmp_path), "--cuda", env=env)
    assert "export CUDACXX=/usr/local/cuda/bin/nvcc PATH=/usr/local/cuda/bin:$PATH" in out, out
    assert out.index("export CUDACXX=") < out.index("would run: env CMAKE_ARGS=")


def test_dry_run_on_the_real_root_prints_system_commands():
    out = install("--dry-run", "--no-cuda")
    assert "CPU build" in out and "DGGML_CUDA" not in out
    assert "runuser -u bolt" in out and "models pull --config /etc/bolt-agent/robot.toml" in out


def test_prefix_install_writes_files_once(tmp_path):
    args = ("--prefix", str(tmp_path), "--no-cuda", "--skip-models", "--skip-venv")
    out = install(*args)
    config = tmp_path / "etc/bolt-agent/robot.toml"
    rule = tmp_path / "etc/udev/rules.d/99-bolt-servo.rules"
    unit = tmp_path / "etc/systemd/system/bolt-agent.service"
    assert config.read_text() == (ROOT / "jetson/robot.toml").read_text()
    assert 'SYMLINK+="bolt-servo serial/by-id/bolt-servo"' in rule.read_text()
    assert 'ATTRS{idVendor}=="1a86"' in rule.read_text()
    text = unit.read_text()
    assert f"ExecStart={ROOT}/.venv/bin/bolt-agent run --config /etc/bolt-agent/robot.toml" in text
    assert "/opt/bolt-agent" not in text
    assert "would run: useradd" in out or "bolt exists" in out
    assert "would run: systemctl daemon-reload" in out

    config.write_text("# edited on the robot\n")  # the user's edits are kept
    stamps = {p: p.stat().st_mtime_ns for p in (config, rule, unit)}
    out2 = install(*args)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps, out2
    assert config.read_text() == "# edited on the robot\n"
    assert "writing" not in out2 and "daemon-reload" not in out2, out2


def test_installed_unit_passes_systemd_analyze_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    if not (ROOT / ".venv/bin/bolt-agent").exists():
        pytest.skip("no .venv/bin/bolt-agent (launch/setup.sh): the unit's ExecStart must exist")
    install("--prefix", str(tmp_path), "--no-cuda", "--skip-models", "--skip-venv")
    unit = tmp_path / "etc/systemd/system/bolt-agent.service"
    r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "bolt-agent.service" not in r.stderr, r.stderr


def test_install_script_is_shellcheck_clean():
    sc = shutil.which("shellcheck")
    if sc is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck; launch/setup.sh test does)")
    r = subprocess.run([sc, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout


def test_prefix_install_pulls_the_models_from_the_hub(tmp_path):
    """The models step for real: ``bolt-agent models pull`` of the Jetson config against a local hub."""
    if not (ROOT / ".venv/bin/bolt-agent").exists():
        pytest.skip("no .venv/bin/bolt-agent (launch/setup.sh)")
    repo_file = BOLT_E4B_REF.removeprefix("hf:")
    data = b"GGUF" + os.urandom(64 << 10)  # stands in for the 5 GB file
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and "proxy" not in k.lower()}
    args = ("--prefix", str(tmp_path), "--no-cuda", "--skip-venv", "--no-start")
    with HubServer({repo_file: data}) as hub:
        env.update(HF_ENDPOINT=hub.url, HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1")
        out = install(*args, env=env)
        assert "llm.model" in out and "sha256 ok" in out, out
        repo = tmp_path / "var/lib/bolt-agent/hf/hub" / f"models--{'--'.join(repo_file.split('/')[:2])}"
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        assert blob.read_bytes() == data
        again = install(*args, env=env)
    assert "sha256 ok, already in the cache" in again, again
    assert len([r for r in hub.requests if r[0] == "GET"]) == 1
