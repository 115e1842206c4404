"""Deployment pieces: the Jetson config validates, systemd notifications reach a real socket."""

from __future__ import annotations

import socket
from pathlib import Path

from agent.config import load_config
from agent.systemd import Watchdog, notify

ROOT = Path(__file__).resolve().parent.parent


def test_jetson_config_is_valid_and_targets_the_gpu():
    cfg = load_config(ROOT / "jetson" / "robot.toml")
    assert cfg.llm.model.startswith("hf:") and cfg.llm.model.endswith(".gguf")
    assert cfg.llm.n_gpu_layers == -1 and cfg.asr.device == "cpu"
    assert cfg.llm.thinking_budget_ms > 0 and cfg.llm.conversational_mode
    unit = (ROOT / "jetson" / "bolt-agent.service").read_text()
    assert "Type=notify" in unit and "dialout" in unit and "ExecStart=" in unit


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
