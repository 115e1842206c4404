"""``bolt-agent doctor``: the command as a subprocess (``python -m agent doctor``), and each check alone.

The installed service is faked at the OS boundary: a ``systemctl`` executable earlier on ``PATH``
that answers ``systemctl show`` as systemd does (:func:`fake_systemctl`).
"""

from __future__ import annotations

import grp
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agent.audio_io.doctor import check_audio, check_systemd_env
from agent.config import load_config
from agent.doctor import CHECKS, check_venv
from agent.memplan import doctor as device_doctor
from agent.memplan.doctor import check_gpu, check_gpu_access, first_line, llama_gpu_offload
from hardware.servos.doctor import check_serial

REPO = Path(__file__).resolve().parents[1]
NAMES = {
    "packages",
    "config",
    "models",
    "profile",
    "memory",
    "audio",
    "serial",
    "camera",
    "skills",
    "gpu",
    "jetpack",
    "service",
}


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in {"INVOCATION_ID", "PULSE_SERVER", "JOURNAL_STREAM"}
    }
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
    assert checks["profile"]["detail"].startswith("small (auto: a 9"), checks["profile"]  # the stand-in
    # One registry lists every subsystem's checks, in the order they are shown.
    assert list(checks)[:2] == ["packages", "config"]
    assert list(checks)[2:] == [c.subsystem for c in CHECKS if c.subsystem in checks]
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
        check = check_serial(load_config(cfg).robot, str(cfg))
        in_dialout = os.getuid() == 0 or "dialout" in {grp.getgrgid(g).gr_name for g in os.getgroups()}
        assert check.ok == in_dialout, check
        assert port in check.detail  # the working port is named either way
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
    monkeypatch.setattr(
        device_doctor.shutil, "which", lambda name: f"/usr/bin/{name}" if name in tools else None
    )

    def smi(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 0, "NVIDIA H200, 1 MiB, 143771 MiB\n", "")

    gpu = check_gpu(run=smi, offload=lambda: True)
    assert gpu.ok and not gpu.blocking and gpu.detail == "nvidia-smi: NVIDIA H200, 1 MiB, 143771 MiB"
    cpu_wheel = check_gpu(run=smi, offload=lambda: False)  # a GPU, but llama.cpp built for the CPU
    assert not cpu_wheel.ok and not cpu_wheel.blocking and "CPU-only build" in cpu_wheel.detail
    assert "CUDACXX=" in cpu_wheel.fix and "--force-reinstall --no-deps" in cpu_wheel.fix
    assert 'CMAKE_ARGS="-DGGML_CUDA=on"' in cpu_wheel.fix and sys.executable in cpu_wheel.fix

    def broken(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(
            cmd, 9, "", "NVIDIA-SMI has failed because it couldn't communicate\n"
        )

    bad = check_gpu(run=broken)
    assert not bad.ok and "couldn't communicate" in bad.detail and bad.fix

    tools.add("tegrastats")  # a Jetson: tegrastats wins
    line = "RAM 2311/7620MB (lfb 4x4MB) CPU [3%@1510,1%@1510] GR3D_FREQ 0%"
    jet = check_gpu(
        run=broken, sample=lambda cmd: line if cmd[0] == "tegrastats" else "", offload=lambda: True
    )
    assert jet.ok and jet.detail == f"Jetson tegrastats: {line}"
    jet_cpu = check_gpu(run=broken, sample=lambda cmd: line, offload=lambda: False)
    assert not jet_cpu.ok and "jetson/install.sh" in jet_cpu.fix
    tools.clear()
    assert check_gpu().detail == "no NVIDIA GPU tools (CPU only)"


def test_first_line_stops_a_running_command() -> None:
    script = "import time; print('RAM 1/2MB', flush=True); time.sleep(60)"
    assert first_line([sys.executable, "-c", script], timeout_s=20) == "RAM 1/2MB"
    assert first_line([sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=0.2) == ""
    assert first_line(["/nonexistent/tegrastats"]) == ""


def fake_systemctl(tmp_path: Path, **props: object) -> str:
    """Write a ``systemctl`` that answers ``show`` with these properties; return a PATH starting there.

    Keyword names are ``systemctl show`` properties (``ActiveState``...); ``config`` and ``exe`` make
    up ``ExecStart``.
    """
    config = props.pop("config", "/etc/bolt-agent/robot.toml")
    exe = props.pop("exe", "/opt/bolt-agent/.venv/bin/bolt-agent")
    values = {
        "LoadState": "loaded",
        "ActiveState": "active",
        "SubState": "running",
        "Result": "success",
        "NRestarts": 0,
        "User": "bolt",
        "Environment": "PYTHONUNBUFFERED=1 HF_HOME=/var/lib/bolt-agent/hf",
        "ExecStart": f"{{ path={exe} ; argv[]={exe} run --config {config} ; ignore_errors=no ; "
        "start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }",
        **props,
    }
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    out = "\n".join(f"{k}={v}" for k, v in values.items())
    script = bin_dir / "systemctl"
    script.write_text("#!/bin/sh\n[ \"$1\" = show ] || exit 1\ncat <<'EOF'\n" + out + "\nEOF\n")
    script.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


@pytest.mark.parametrize(
    ("active", "sub", "word"),
    [("failed", "failed", "failed"), ("activating", "auto-restart", "restarting")],
    ids=["failed", "restarting"],
)
def test_failed_or_restarting_service_is_a_problem_with_its_fix(tmp_path: Path, active, sub, word) -> None:
    path = fake_systemctl(tmp_path, ActiveState=active, SubState=sub, Result="watchdog", NRestarts=3)
    out = _doctor(_env(tmp_path, PATH=path), "--json")
    service = _checks(out)["service"]
    assert not service["ok"] and not service["blocking"]  # `run` itself can start
    assert word in service["detail"] and "watchdog" in service["detail"] and "3 restarts" in service["detail"]
    assert (
        "journalctl -u bolt-agent -b" in service["fix"] and "systemctl restart bolt-agent" in service["fix"]
    )

    text = _doctor(_env(tmp_path, PATH=path))
    assert "warn service:" in text.stdout and "fix: journalctl -u bolt-agent -b" in text.stdout

    healthy = _checks(_doctor(_env(tmp_path, PATH=fake_systemctl(tmp_path)), "--json"))["service"]
    assert healthy["ok"] and healthy["detail"] == "bolt-agent.service: active (running)"


def test_doctor_and_pull_use_the_service_cache(tmp_path: Path) -> None:
    """Run for the service's config without HF_HOME, both look in the unit's HF_HOME."""
    cfg = tmp_path / "robot.toml"
    cfg.write_text('[llm]\nmodel = "hf:acme/tiny-gguf/model.gguf"\n')
    svc_hf = tmp_path / "svc-hf"
    path = fake_systemctl(tmp_path, Environment=f"PYTHONUNBUFFERED=1 HF_HOME={svc_hf}", config=cfg)
    env = {k: v for k, v in _env(tmp_path, PATH=path).items() if k not in {"HF_HOME", "HF_HUB_CACHE"}}
    env["XDG_CACHE_HOME"] = str(tmp_path / "user-cache")  # where a pull would land without the unit

    out = _doctor(env, "--json", "--config", str(cfg))
    models = _checks(out)["models"]
    assert f"note: HF_HOME={svc_hf}, as bolt-agent.service has it" in out.stderr
    assert not models["ok"] and f"cache {svc_hf}/hub" in models["detail"]
    exe = "/opt/bolt-agent/.venv/bin/bolt-agent"
    assert models["fix"] == f"sudo -u bolt env HF_HOME={svc_hf} {exe} models pull --config {cfg}"

    src = tmp_path / "usb"
    src.mkdir()
    (src / "model.gguf").write_bytes(b"GGUF" + os.urandom(4096))
    cmd = [sys.executable, "-m", "agent", "models", "pull", "--config", str(cfg), "--from-dir", str(src)]
    pulled = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert pulled.returncode == 0, pulled.stderr
    assert list((svc_hf / "hub").glob("models--acme--tiny-gguf/blobs/*"))
    assert not (tmp_path / "user-cache" / "huggingface").exists()
    assert _checks(_doctor(env, "--json", "--config", str(cfg)))["models"]["ok"]

    other = tmp_path / "other.toml"  # not the service's config: the user's own cache
    other.write_text(cfg.read_text())
    out = _doctor(env, "--json", "--config", str(other))
    models = _checks(out)["models"]
    assert not models["ok"] and "note: HF_HOME" not in out.stderr
    assert models["fix"] == f"bolt-agent models pull --config {other}"


def test_configured_audio_devices_must_exist(tmp_path: Path) -> None:
    mic = {"name": "USB mic", "max_input_channels": 1, "max_output_channels": 0, "default_samplerate": 48e3}
    spk = {"name": "hw spk", "max_input_channels": 0, "max_output_channels": 2, "default_samplerate": 44.1e3}
    cfg = tmp_path / "robot.toml"
    cfg.write_text('[audio]\ninput_device = "usb"\noutput_device = "Jabra"\n')
    bad = check_audio(_Backend([mic, spk]), load_config(cfg).audio, str(cfg))
    assert not bad.ok and bad.blocking  # `run` would stop on it
    assert "no output device matches [audio] output_device = 'Jabra'" in bad.detail
    assert bad.fix.startswith(f"edit [audio] output_device in {cfg}") and '"hw spk"' in bad.fix
    cfg.write_text('[audio]\ninput_device = "usb"\noutput_device = 1\n')
    assert check_audio(_Backend([mic, spk]), load_config(cfg).audio).ok


def test_sound_server_only_matters_when_the_config_uses_one(tmp_path: Path) -> None:
    env = {"INVOCATION_ID": "1"}  # under systemd, no XDG_RUNTIME_DIR: a system service
    cfg = tmp_path / "robot.toml"
    cfg.write_text('[audio]\ninput_device = "USB"\noutput_device = "hw:1,0"\n')
    alsa = check_systemd_env(env, load_config(cfg).audio, str(cfg), uid=998)
    assert alsa is not None and alsa.ok and "ALSA" in alsa.detail

    cfg.write_text('[audio]\ninput_device = "USB"\n')  # output: the default device, via PulseAudio
    system_user = check_systemd_env(env, load_config(cfg).audio, str(cfg), uid=998)
    assert system_user is not None and not system_user.ok and system_user.blocking
    assert "/run/user/" not in system_user.fix  # a system user has no login session
    assert "ALSA devices" in system_user.fix and str(cfg) in system_user.fix
    assert "PULSE_SERVER=unix:/run/pulse/native" in system_user.fix
    login_user = check_systemd_env(env, load_config(cfg).audio, str(cfg), uid=1000)
    assert login_user is not None and "PULSE_SERVER=unix:/run/user/1000/pulse/native" in login_user.fix
    assert check_systemd_env({}, load_config(cfg).audio) is None  # not under systemd


def test_gpu_device_groups_on_a_jetson(tmp_path: Path) -> None:
    llm = load_config(REPO / "jetson" / "robot.toml").llm  # every layer on the GPU
    dev = tmp_path / "dev"
    dev.mkdir()
    assert check_gpu_access(llm, dev, groups=set(), uid=1001) is None  # not a Jetson
    (dev / "nvmap").touch()
    (dev / "nvhost-ctrl-gpu").touch()
    bad = check_gpu_access(llm, dev, groups={"audio", "dialout", "video"}, uid=1001)
    assert bad is not None and not bad.ok and bad.blocking
    assert "not in group render" in bad.detail and "Permission denied" in bad.detail
    assert bad.fix.startswith("sudo usermod -aG render 1001 ")  # uid 1001 has no name here
    none = check_gpu_access(llm, dev, groups=set(), uid=1001)
    assert none is not None and none.fix.startswith("sudo usermod -aG video,render ")
    ok = check_gpu_access(llm, dev, groups={"video", "render"}, uid=1001)
    assert ok is not None and ok.ok


def test_cpu_only_llama_wheel_with_a_gpu_present(tmp_path: Path) -> None:
    """A GPU (a ``nvidia-smi`` on PATH) and the venv's real llama-cpp-python."""
    bin_dir = tmp_path / "gpubin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H200, 1 MiB, 143771 MiB'\n")
    smi.chmod(0o755)
    gpu = _checks(_doctor(_env(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}"), "--json"))["gpu"]
    offload = llama_gpu_offload()
    assert offload is not None, "llama-cpp-python does not load"
    assert gpu["ok"] == offload and not gpu["blocking"], gpu
    if not offload:
        assert "CPU-only build" in gpu["detail"] and "--force-reinstall --no-deps" in gpu["fix"]


def test_missing_package_fix_uses_the_venv() -> None:
    check = check_venv(("huggingface-hub", "no-such-dist-for-bolt"))
    assert not check.ok and "missing: no-such-dist-for-bolt" in check.detail
    assert f"bash {REPO}/launch/setup.sh run" in check.fix
    assert f"{sys.executable} -m pip install no-such-dist-for-bolt" in check.fix


def test_the_profile_check_names_the_profile_and_format_a_config_runs(gemma4_vocab) -> None:
    """The stand-in: small in grammar mode; Bolt's template: plain, bolt; a server with no file: plain."""
    from gemma4_model import tiny_gemma4

    from agent.config import LLMConfig
    from agent.conversation.doctor import check_profile

    small = check_profile(LLMConfig())
    assert small.ok and small.detail.startswith("small (auto: a 94 MiB GGUF in grammar mode)"), small
    bolt = check_profile(LLMConfig(model=str(tiny_gemma4(gemma4_vocab))))
    assert bolt.ok and bolt.detail.startswith("plain (auto") and bolt.detail.endswith("tool calls: bolt"), (
        bolt
    )
    remote = check_profile(LLMConfig(engine="openai", model=""))
    assert remote.ok and remote.detail.startswith("plain (an OpenAI-compatible server renders"), remote
    forced = check_profile(LLMConfig(profile="plain"))
    assert forced.detail == "plain; tool calls: grammar", forced
    missing = check_profile(LLMConfig(model="/nowhere/model.gguf"))
    assert not missing.ok and not missing.blocking and "cannot read the model file" in missing.detail
