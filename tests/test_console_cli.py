"""``bolt-agent run`` with and without ``--console``, as a process (real models, fake sound devices).

Each test runs ``bolt-agent run`` in a subprocess whose sound backend is the in-process fake
(the OS boundary), waits for systemd's READY (the models are warm and the devices open), does
its checks from inside the process and sends itself SIGTERM. Without ``--console`` neither
the web stack nor :mod:`agent.console` may be imported.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DRIVER = r"""
import json, os, signal, sys, threading, urllib.error, urllib.request
import agent.audio_io.devices as devices
from agent.audio_io.fake import FakeBackend

devices.SoundDeviceBackend = FakeBackend  # the OS boundary: no sound card needed
import agent.cli.live as cli_live

checks = {}

def fetch(path, headers=None):
    req = urllib.request.Request(os.environ["CHECK_URL"] + path, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code

def notify(state):
    if state.startswith("READY=1"):
        if os.environ.get("CHECK_URL"):
            token = os.environ.get("CHECK_TOKEN")
            checks["page"] = fetch("/")
            checks["page_with_token"] = fetch("/", {"Authorization": f"Bearer {token}"}) if token else None
            checks["state"] = fetch("/api/state", {"Authorization": f"Bearer {token}"} if token else {})
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()

cli_live.notify = notify
from agent.cli.main import main

sys.argv = ["bolt-agent", "run", "--json", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    checks["exit"] = e.code
web = sorted(m for m in sys.modules if m.split(".")[0] in ("starlette", "uvicorn", "agent.console")
             or m.startswith("agent.console"))
print("CHECKS " + json.dumps({**checks, "web_modules": web}), flush=True)
"""


def run_agent(*args: str, env: dict[str, str] | None = None) -> tuple[dict, str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **(env or {})},
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("CHECKS ")), None)
    assert line is not None, (
        f"no result; rc={proc.returncode}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-3000:]}"
    )
    return json.loads(line[len("CHECKS ") :]), proc.stdout, proc.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_run_without_console_imports_none_of_it():
    checks, out, _ = run_agent()
    assert checks["web_modules"] == [], checks
    assert checks.get("exit") in (None, 0), checks
    assert '"event": "ready"' in out


def test_run_with_console_on_a_lan_address_prints_the_token_once_and_requires_it(tmp_path):
    cfg = tmp_path / "robot.toml"
    cfg.write_text(
        (ROOT / "launch" / "desktop.toml").read_text() + '\n[console]\ntoken_file = "secret/console-token"\n'
    )
    port = free_port()
    token_file = tmp_path / "secret" / "console-token"
    # The token does not exist before the first start, so the driver cannot send it: 401 for the page.
    checks, out, err = run_agent(
        "--config", str(cfg), "--console", f"0.0.0.0:{port}", env={"CHECK_URL": f"http://127.0.0.1:{port}"}
    )
    assert {"starlette", "uvicorn"} <= {m.split(".")[0] for m in checks["web_modules"]}
    assert "agent.console" in checks["web_modules"]
    assert checks["page"] == 401 and checks["state"] == 401, checks
    token = token_file.read_text().strip()
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert err.count(token) == 1 and "printed only this once" in err
    assert token not in out  # never on the JSON Lines stream
    notices = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    assert any(n["event"] == "notice" and f":{port}/" in n["message"] for n in notices)

    # Second start: the same token, not printed again, and it opens the page.
    checks, out, err = run_agent(
        "--config",
        str(cfg),
        "--console",
        f"0.0.0.0:{port}",
        env={"CHECK_URL": f"http://127.0.0.1:{port}", "CHECK_TOKEN": token},
    )
    assert checks["page"] == 401 and checks["page_with_token"] == 200 and checks["state"] == 200, checks
    assert token not in err and "console token: in" in err


def test_run_with_a_busy_console_port_fails_before_loading_models():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER, "--console", f"127.0.0.1:{port}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert '"exit": 2' in proc.stdout, proc.stdout + proc.stderr
    assert "console: cannot serve" in proc.stderr and '"event": "ready"' not in proc.stdout
