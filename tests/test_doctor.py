"""``bolt-agent doctor``: the command as a subprocess (``python -m agent doctor``), and each check alone."""

from __future__ import annotations

import grp
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from agent import doctor
from agent.config import load_config
from agent.doctor import check_audio, check_gpu, check_serial, first_line

REPO = Path(__file__).resolve().parents[1]
NAMES = {"packages", "config", "models", "memory", "audio", "serial", "camera", "gpu", "service"}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"INVOCATION_ID", "PULSE_SERVER"}}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_CACHE=str(tmp_path / "hf" / "hub"), HF_HUB_OFFLINE="1")
    env.update(extra)
    return env


def _doctor(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "agent", "doctor", *args]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def _checks(out: subprocess.CompletedProcess[str]) -> dict[str, dict]:
    doc = json.loads(out.stdout)
    assert set(doc) == {"ok", "checks"}
    checks = {c["name"]: c for c in doc["checks"]}
    for c in doc["checks"]:
        assert set(c) == {"name", "ok", "detail", "fix", "blocking"}
        assert isinstance(c["ok"], bool) and c["detail"]
        assert c["ok"] or c["fix"], c  # every problem comes with its fix
    blocked = any(not c["ok"] and c["blocking"] for c in doc["checks"])
    assert doc["ok"] is not blocked
    assert out.returncode == (1 if blocked else 0)
    return checks


def test_default_config_json(tmp_path: Path) -> None:
    checks = _checks(_doctor(_env(tmp_path), "--json"))
    assert set(checks) == NAMES  # no systemd-env check outside systemd
    assert checks["packages"]["ok"] and checks["config"]["ok"]
    assert checks["models"]["ok"], checks["models"]  # the packaged defaults
    assert checks["memory"]["ok"] and "memory plan" in checks["memory"]["detail"]
    assert checks["serial"]["ok"] and "simulated" in checks["serial"]["detail"]
    assert "GStreamer: " in checks["camera"]["detail"]


def test_missing_serial_port_blocks_run(tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(
        '[robot]\ndriver = "body"\n[robot.drivers.body]\nkind = "bolt_serial"\nport = "/dev/ttyNOPE9"\n'
    )
    out = _doctor(_env(tmp_path), "--json", "--config", str(cfg))
    serial = _checks(out)["serial"]
    assert not serial["ok"] and serial["blocking"]
    assert "/dev/ttyNOPE9 does not exist" in serial["detail"]
    assert serial["fix"].startswith("ls -l /dev/serial/by-id/") and str(cfg) in serial["fix"]
    assert out.returncode == 1

    text = _doctor(_env(tmp_path), "--config", str(cfg))
    assert text.returncode == 1
    assert "FAIL serial:" in text.stdout and "fix: ls -l /dev/serial/by-id/" in text.stdout
    assert "run cannot start" in text.stdout


def test_existing_serial_port_passes(tmp_path: Path) -> None:
    master, slave = os.openpty()
    try:
        cfg = tmp_path / "robot.toml"
        port = os.ttyname(slave)
        cfg.write_text(
            f'[robot]\ndriver = "body"\n[robot.drivers.body]\nkind = "bolt_serial"\nport = "{port}"\n'
        )
        check = check_serial(load_config(cfg))
        in_dialout = os.getuid() == 0 or "dialout" in {grp.getgrgid(g).gr_name for g in os.getgroups()}
        assert check.ok == in_dialout, check
        if check.ok:
            assert port in check.detail
    finally:
        os.close(master)
        os.close(slave)


def test_sound_server_checked_under_systemd(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir()
    env = _env(tmp_path, INVOCATION_ID="0123abcd", XDG_RUNTIME_DIR=str(runtime))
    check = _checks(_doctor(env, "--json"))["systemd-env"]
    assert not check["ok"] and check["blocking"]
    assert f"{runtime}/pulse/native" in check["detail"]
    assert "systemctl edit bolt-agent" in check["fix"] and "PULSE_SERVER=unix:" in check["fix"]

    gone = _checks(_doctor(_env(tmp_path, INVOCATION_ID="1", XDG_RUNTIME_DIR=str(tmp_path / "no")), "--json"))
    assert not gone["systemd-env"]["ok"] and "is not a directory" in gone["systemd-env"]["detail"]

    (runtime / "pulse").mkdir(exist_ok=True)  # a PulseAudio client may have made it
    with socket.socket(socket.AF_UNIX) as srv:
        srv.bind(str(runtime / "pulse" / "native"))
        ok = _checks(_doctor(env, "--json"))["systemd-env"]
        assert ok["ok"] and "sound server" in ok["detail"]
        env["PULSE_SERVER"] = f"unix:{runtime}/pulse/native"
        assert _checks(_doctor(env, "--json"))["systemd-env"]["ok"]


class _Backend:
    def __init__(self, devices: list[dict] | Exception) -> None:
        self.devices = devices

    def query_devices(self) -> list[dict]:
        if isinstance(self.devices, Exception):
            raise self.devices
        return self.devices


def test_audio_lists_devices_with_rates() -> None:
    mic = {
        "name": "USB mic",
        "max_input_channels": 1,
        "max_output_channels": 0,
        "default_samplerate": 48000.0,
    }
    spk = {"name": "spk", "max_input_channels": 0, "max_output_channels": 2, "default_samplerate": 44100.0}
    ok = check_audio(_Backend([mic, spk]))
    assert ok.ok and ok.detail == "inputs: USB mic (1 ch, 48000 Hz); outputs: spk (2 ch, 44100 Hz)"
    no_mic = check_audio(_Backend([spk]))
    assert not no_mic.ok and no_mic.blocking and "inputs: none" in no_mic.detail and no_mic.fix
    no_lib = check_audio(_Backend(OSError("PortAudio library not found")))
    assert not no_lib.ok and no_lib.fix == "sudo apt-get install -y libportaudio2"


def test_gpu_from_nvidia_smi_or_tegrastats(monkeypatch) -> None:
    tools: set[str] = {"nvidia-smi"}
    monkeypatch.setattr(doctor.shutil, "which", lambda name: f"/usr/bin/{name}" if name in tools else None)

    def smi(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 0, "NVIDIA H200, 1 MiB, 143771 MiB\n", "")

    gpu = check_gpu(run=smi)
    assert gpu.ok and not gpu.blocking and gpu.detail == "nvidia-smi: NVIDIA H200, 1 MiB, 143771 MiB"

    def broken(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(
            cmd, 9, "", "NVIDIA-SMI has failed because it couldn't communicate\n"
        )

    bad = check_gpu(run=broken)
    assert not bad.ok and "couldn't communicate" in bad.detail and bad.fix

    tools.add("tegrastats")  # a Jetson: tegrastats wins
    line = "RAM 2311/7620MB (lfb 4x4MB) CPU [3%@1510,1%@1510] GR3D_FREQ 0%"
    jet = check_gpu(run=broken, sample=lambda cmd: line if cmd[0] == "tegrastats" else "")
    assert jet.ok and jet.detail == f"Jetson tegrastats: {line}"
    tools.clear()
    assert check_gpu().detail == "no NVIDIA GPU tools (CPU only)"


def test_first_line_stops_a_running_command() -> None:
    script = "import time; print('RAM 1/2MB', flush=True); time.sleep(60)"
    assert first_line([sys.executable, "-c", script], timeout_s=20) == "RAM 1/2MB"
    assert first_line([sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=0.2) == ""
    assert first_line(["/nonexistent/tegrastats"]) == ""
