"""Deployment pieces: the Jetson configs validate, systemd notifications reach a real socket.

The Reachy Mini configs (``jetson/reachy_mini.toml``, ``launch/reachy_mini_sim.toml``) load, are
their base configs with only the body's differences, fit the Orin Nano's memory plan with room for
what the plan does not count (Pollen's SDK and a Lite's daemon), and ``doctor``/``budget`` run on
them; ``jetson/bolt-agent.service`` gives a Reachy Mini time to park.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.config import load_config
from agent.config.llm import DEFAULT_SYSTEM_PROMPT
from agent.memplan import check_budget
from agent.systemd import Watchdog, notify
from hardware.config import REACHY_JOINTS, ReachyMiniConfig

ROOT = Path(__file__).resolve().parent.parent
REACHY_OUTSIDE_PLAN_GIB = (64 + 168) / 1024
"""Not in the memory plan, measured on x86-64 (jetson/reachy_mini.toml's header): the SDK in the
agent's process and a Lite's daemon, MiB."""
REACHY_PROMPT = "a head that tilts and turns, two antennas and a body that turns"


@pytest.mark.parametrize("name", ["robot.toml", "reachy_mini.toml"])
def test_jetson_config_is_valid_and_targets_the_gpu(name):
    cfg = load_config(ROOT / "jetson" / name)
    assert cfg.llm.model.startswith("hf:") and cfg.llm.model.endswith(".gguf")
    assert cfg.llm.n_gpu_layers == -1 and cfg.asr.device == "cpu"
    assert cfg.llm.thinking_budget_ms > 0 and cfg.llm.conversational_mode
    unit = (ROOT / "jetson" / "bolt-agent.service").read_text()
    assert "Type=notify" in unit and "dialout" in unit and "ExecStart=" in unit


def test_jetson_reachy_config_is_robot_toml_with_a_reachy_body():
    base = load_config(ROOT / "jetson" / "robot.toml")
    cfg = load_config(ROOT / "jetson" / "reachy_mini.toml")
    for section in ("asr", "vad", "turn", "tts"):
        assert getattr(cfg, section) == getattr(base, section), section
    # OpenCV only: the chat model's vision does not fit next to the SDK and the daemon
    assert cfg.vision.model_dump(exclude={"describer", "vlm"}) == base.vision.model_dump(
        exclude={"describer", "vlm"}
    )
    assert (base.vision.describer, cfg.vision.describer) == ("vlm", "opencv")
    same = {"n_ctx", "system_prompt"}
    assert cfg.llm.model_dump(exclude=same) == base.llm.model_dump(exclude=same)
    assert cfg.llm.n_ctx == 8192 and REACHY_PROMPT in cfg.llm.system_prompt
    assert cfg.robot.driver == "reachy_mini" and tuple(j.name for j in cfg.robot.joints) == REACHY_JOINTS
    assert cfg.robot.reachy_mini.host == "localhost" and cfg.robot.reachy_mini.port == 8000
    assert cfg.camera.source == "reachy_mini" and "reachy mini audio" == cfg.audio.input_device
    # the plan of the agent's models fits with room for the SDK and the daemon it does not count
    verdict = check_budget(cfg, "orin-nano-8gb")
    assert verdict.fits and verdict.plan is not None
    spare = (verdict.plan.budget - verdict.plan.total) / 2**30
    base_plan = check_budget(base, "orin-nano-8gb").plan
    assert base_plan is not None
    assert spare - REACHY_OUTSIDE_PLAN_GIB >= 0.9 * (base_plan.budget - base_plan.total) / 2**30


def test_reachy_sim_config_is_the_desktop_default_with_a_reachy_body():
    base = load_config(ROOT / "launch" / "desktop.toml")
    cfg = load_config(ROOT / "launch" / "reachy_mini_sim.toml")
    for section in ("asr", "vad", "turn", "tts", "skills", "vision"):
        assert getattr(cfg, section).model_dump(exclude={"folders"}) == getattr(base, section).model_dump(
            exclude={"folders"}
        ), section
    assert cfg.llm.model_dump(exclude={"system_prompt"}) == base.llm.model_dump(exclude={"system_prompt"})
    # the default prompt, with this body instead of "a head and two arms"
    assert cfg.llm.system_prompt == DEFAULT_SYSTEM_PROMPT.replace(
        "a head and two arms", REACHY_PROMPT
    ).replace("{name}", "Bolt")
    assert cfg.robot.driver == "reachy_mini" and cfg.robot.motion_vad_weight == 0.6
    assert set(cfg.robot.postures) >= {"listening", "thinking"}
    assert (cfg.robot.reachy_mini.host, cfg.robot.reachy_mini.port) == ("localhost", 8000)
    assert cfg.camera.source == "reachy_mini_sim"
    header = (ROOT / "launch" / "reachy_mini_sim.toml").read_text()
    assert "reachy-mini-daemon --sim --headless --no-media" in header and "--mockup-sim" in header
    assert "REACHY_MINI_TELEMETRY=0" in header and "DO_NOT_TRACK=1" in header and "mDNS" in header
    assert "bolt-agent chat --config launch/reachy_mini_sim.toml" in header


@pytest.mark.parametrize("path", ["jetson/reachy_mini.toml", "launch/reachy_mini_sim.toml"])
def test_doctor_runs_on_the_reachy_configs(path):
    """No daemon runs here: doctor reports it (REST GETs only) and says how to start it."""
    cmd = [sys.executable, "-m", "agent", "doctor", "--json", "--config", str(ROOT / path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["config"]["ok"], checks["config"]
    assert {"reachy-daemon", "reachy-version", "reachy-emotions"} <= set(checks), sorted(checks)
    if not checks["reachy-daemon"]["ok"]:
        assert "reachy-mini-daemon" in checks["reachy-daemon"]["fix"]


def test_an_absent_local_daemon_is_started_for_the_robot_or_the_simulator():
    """doctor on the simulator config offered only the robot's service and its USB cable."""
    from hardware.reachy_mini.doctor import check_reachy_daemon

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = load_config(ROOT / "launch" / "reachy_mini_sim.toml")
    cfg.robot.reachy_mini.host, cfg.robot.reachy_mini.port = "127.0.0.1", port
    check, status = check_reachy_daemon(cfg.robot.reachy_mini, timeout_s=1.0)
    assert not check.ok and status is None and f"127.0.0.1:{port} is not reachable" in check.detail
    assert "sudo systemctl start reachy-mini-daemon" in check.fix
    assert "reachy-mini-daemon --sim --headless --no-media" in check.fix


def test_budget_command_on_the_jetson_reachy_config():
    from agent.cli import app

    cfg = str(ROOT / "jetson" / "reachy_mini.toml")
    res = CliRunner().invoke(app, ["budget", "--config", cfg, "--device", "orin-nano-8gb"])
    assert res.exit_code == 0, res.output
    assert "n_ctx 8192" in res.output and "fits" in res.output


def test_the_stop_timeout_lets_a_reachy_mini_park():
    """SIGTERM → sleep pose: 1 s through the initial pose + the longest sleep_s + 1 s motion-loop
    join + 2 s connection-thread join (hardware/robot.py, hardware/reachy_mini/driver.py), twice over."""
    unit = (ROOT / "jetson" / "bolt-agent.service").read_text()
    stop_s = int(re.search(r"^TimeoutStopSec=(\d+)$", unit, re.M).group(1))
    longest_sleep = next(m.le for m in ReachyMiniConfig.model_fields["sleep_s"].metadata if hasattr(m, "le"))
    assert stop_s >= 2 * (1 + longest_sleep + 1 + 2)
    daemon = (ROOT / "jetson" / "reachy-mini-daemon.service").read_text()
    assert "Before=bolt-agent.service" in daemon  # so it stops after the agent has parked


def test_notify_sends_one_datagram(tmp_path):
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as srv:
        srv.bind(path)
        srv.settimeout(2)
        assert notify("READY=1\nSTATUS=listening", {"NOTIFY_SOCKET": path})
        assert srv.recv(256) == b"READY=1\nSTATUS=listening"
        wd = Watchdog({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "100000"})
        wd()  # the first call pings at once
        assert srv.recv(256) == b"WATCHDOG=1" and wd.pings == 1
    assert not notify("READY=1", {})  # outside systemd: nothing to do
    assert not notify("READY=1", {"NOTIFY_SOCKET": str(tmp_path / "gone.sock")})
    assert not Watchdog({}).enabled
