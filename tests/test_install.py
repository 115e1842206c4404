"""``jetson/install.sh``: the dry run lists every step; a CPU-only run into a temporary prefix
writes the config, the udev rule and the unit once (a second run changes nothing); the installed
unit passes ``systemd-analyze verify``; the script is shellcheck-clean. A Reachy Mini body (the
installed config's ``[robot] driver = "reachy_mini"``, ``--reachy``) adds the SDK's system
packages and ``BOLT_REACHY=1``, drops the servo udev rule, and for a Lite (daemon host on this
machine) installs the daemon's unit, restarted before the agent; a Wireless gets no daemon unit.

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
STEPS = ["apt", "user", "venv", "config", "udev", "unit", "daemon", "models", "start"]
REACHY_APT = (
    "libgirepository1.0-dev libcairo2-dev pkg-config gir1.2-gstreamer-1.0 gir1.2-gst-plugins-base-1.0"
)


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
    # the default body is no Reachy Mini: no SDK, no daemon
    assert "BOLT_REACHY=0" in out and "libgirepository" not in out
    assert "not needed: the config drives no Reachy Mini" in out and "restart reachy-mini-daemon" not in out
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


def test_dry_run_of_a_reachy_mini_lite(tmp_path):
    out = install("--dry-run", "--prefix", str(tmp_path), "--reachy", "--no-cuda")
    headers = [line.split(":")[0][3:] for line in out.splitlines() if line.startswith("== ")]
    assert headers == STEPS, out
    assert "body: Reachy Mini Lite (daemon here)" in out.splitlines()[0]
    base = "python3-venv python3-dev build-essential cmake git libportaudio2 alsa-utils"
    assert f"system packages: {base} {REACHY_APT}" in out
    assert "BOLT_REACHY=1 bash " + str(ROOT / "launch/setup.sh") + " run" in out
    assert "from jetson/reachy_mini.toml" in out
    assert "not needed: a Reachy Mini's daemon finds the robot's serial port itself" in out
    assert "would write " + str(tmp_path / "etc/systemd/system/reachy-mini-daemon.service") in out
    assert "systemctl enable reachy-mini-daemon" in out
    assert "would run: systemctl restart reachy-mini-daemon bolt-agent" in out  # the daemon first
    assert not any(tmp_path.iterdir()), "a dry run wrote files"


def test_prefix_install_of_a_reachy_mini_lite_writes_the_daemon_unit_once(tmp_path):
    args = ("--prefix", str(tmp_path), "--reachy", "--no-cuda", "--skip-models", "--skip-venv")
    out = install(*args)
    config = tmp_path / "etc/bolt-agent/robot.toml"
    daemon = tmp_path / "etc/systemd/system/reachy-mini-daemon.service"
    assert config.read_text() == (ROOT / "jetson/reachy_mini.toml").read_text()
    assert not (tmp_path / "etc/udev/rules.d/99-bolt-servo.rules").exists()
    text = daemon.read_text()
    assert f"ExecStart={ROOT}/.venv/bin/reachy-mini-daemon --no-media --no-wake-up-on-start" in text
    assert "--fastapi-host 127.0.0.1 --fastapi-port 8000" in text and "/opt/bolt-agent" not in text
    assert "Before=bolt-agent.service" in text and "WantedBy=multi-user.target bolt-agent.service" in text
    assert "REACHY_MINI_TELEMETRY=0" in text and "DO_NOT_TRACK=1" in text
    assert "IPAddressDeny=any" in text and "SupplementaryGroups=dialout" in text
    assert "would run: systemctl enable reachy-mini-daemon" in out

    stamps = {p: p.stat().st_mtime_ns for p in (config, daemon)}
    out2 = install(*args)
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps, out2
    assert f"ok: {daemon} is up to date" in out2 and "writing" not in out2 and "daemon-reload" not in out2


def test_the_installed_config_decides_the_body(tmp_path):
    """A kept config in /etc says what the robot is; --reachy does not overwrite it."""
    etc = tmp_path / "etc/bolt-agent"
    etc.mkdir(parents=True)
    (etc / "robot.toml").write_text((ROOT / "jetson/reachy_mini.toml").read_text())
    out = install("--dry-run", "--prefix", str(tmp_path), "--no-cuda")
    assert "body: Reachy Mini Lite" in out and "BOLT_REACHY=1" in out and "enable reachy-mini-daemon" in out
    (etc / "robot.toml").write_text((ROOT / "jetson/robot.toml").read_text())
    out = install("--dry-run", "--prefix", str(tmp_path), "--no-cuda", "--reachy")
    assert "BOLT_REACHY=0" in out and "enable reachy-mini-daemon" not in out
    assert "jetson/reachy_mini.toml is not installed; move" in out


def test_a_wireless_reachy_mini_gets_the_sdk_but_no_daemon(tmp_path):
    cfg = tmp_path / "wireless.toml"
    text = (ROOT / "jetson/reachy_mini.toml").read_text()
    cfg.write_text(
        text.replace('# host = "reachy-mini.local"', 'host = "reachy-mini.local"').replace(
            'host = "localhost"', "# the Lite's host"
        )
    )
    out = install("--dry-run", "--prefix", str(tmp_path / "root"), "--no-cuda", "--config", str(cfg))
    assert "body: Reachy Mini at reachy-mini.local" in out and "BOLT_REACHY=1" in out and REACHY_APT in out
    assert "not needed: the Reachy Mini at reachy-mini.local runs its own daemon (a Wireless)" in out
    assert "would run: systemctl restart bolt-agent\n" in out and "enable reachy-mini-daemon" not in out


def test_installed_reachy_units_pass_systemd_analyze_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    for exe in ("bolt-agent", "reachy-mini-daemon"):
        if not (ROOT / ".venv/bin" / exe).exists():
            pytest.skip(f"no .venv/bin/{exe} (launch/setup.sh test): the units' ExecStart must exist")
    install("--prefix", str(tmp_path), "--reachy", "--no-cuda", "--skip-models", "--skip-venv")
    units = tmp_path / "etc/systemd/system"
    paths = [str(units / "reachy-mini-daemon.service"), str(units / "bolt-agent.service")]
    r = subprocess.run([analyze, "verify", *paths], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and ".service" not in r.stderr, r.stderr
