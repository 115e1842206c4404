"""``bolt-agent doctor`` for a Reachy Mini body: daemon, SDK release, motors, recorded emotions.

The command runs as a subprocess (``python -m agent doctor --json``) inside a private network
namespace (tests/reachy_daemon.py) where Pollen's ``reachy-mini-daemon --mockup-sim`` runs,
and once with no daemon there. The version rules (a patch release apart is a warning, another
major.minor a failure, no SDK a failure) are checked with :func:`hardware.reachy_mini.doctor.check_reachy`
against a small stand-in that answers the daemon's two status GETs on 127.0.0.1 (not Pollen's
daemon: no mDNS); the installed SDK's version is passed in.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent.config import load_config
from hardware.reachy_mini.daemon import sdk_version
from hardware.reachy_mini.doctor import check_reachy
from tests.emu_hub import COMMIT, HubServer
from tests.reachy_daemon import netns_problem, run_in_netns
from tests.test_doctor import NAMES
from tests.test_reachy_emotions import CACHE_DIR, DATASET, _dataset, _env, _pull

REPO = Path(__file__).resolve().parents[1]
REACHY = {"reachy-daemon", "reachy-version", "reachy-motors", "reachy-emotions"}
OTHERS = NAMES  # every other check of doctor (tests/test_doctor.py)

DOCTOR_IN_NETNS = """
import json, os, subprocess, sys, urllib.request
import reachy_daemon as rd

CFG, WITH_DAEMON = os.environ["DOCTOR_CONFIG"], os.environ["DOCTOR_WITH_DAEMON"] == "1"
ENV = {k: v for k, v in os.environ.items() if k not in {"INVOCATION_ID", "PULSE_SERVER", "JOURNAL_STREAM"}}


def doctor():
    cmd = [sys.executable, "-m", "agent", "doctor", "--json", "--config", CFG]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=ENV)
    return {"rc": out.returncode, "stdout": out.stdout, "stderr": out.stderr[-3000:]}


runs = {}
if WITH_DAEMON:
    with rd.daemon("mockup"):
        runs["enabled"] = doctor()
        url = f"http://127.0.0.1:{rd.PORT}/api/motors/set_mode/disabled"
        urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=5).read()
        runs["motors"] = rd.get("/api/motors/status")
        runs["disabled"] = doctor()
else:
    runs["none"] = doctor()
print(json.dumps(runs))
"""


def _netns() -> None:
    problem = netns_problem()
    if problem:
        pytest.skip(problem)


def _doctor_in_netns(tmp_path: Path, cfg: Path, with_daemon: bool) -> dict:
    """Run :data:`DOCTOR_IN_NETNS` in a new network namespace with the cache in ``tmp_path``."""
    env = {
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
        "DOCTOR_CONFIG": str(cfg),
        "DOCTOR_WITH_DAEMON": "1" if with_daemon else "0",
    }
    return run_in_netns(DOCTOR_IN_NETNS, timeout=240, env=env)


def _checks(run: dict) -> dict[str, dict]:
    """The doctor's JSON, with the invariants of tests/test_doctor.py: every problem has its fix."""
    assert run["stdout"].strip(), run["stderr"]
    doc = json.loads(run["stdout"])
    checks = {c["name"]: c for c in doc["checks"]}
    assert len(checks) == len(doc["checks"])  # one check per name
    for c in doc["checks"]:
        assert set(c) == {"name", "ok", "detail", "fix", "blocking"}
        assert isinstance(c["ok"], bool) and c["detail"]
        assert c["ok"] or c["fix"], c
    blocked = any(not c["ok"] and c["blocking"] for c in doc["checks"])
    assert doc["ok"] is not blocked
    assert run["rc"] == (1 if blocked else 0)
    return checks


def _config(tmp_path: Path, extra: str = "") -> Path:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[robot]\ndriver = "reachy_mini"\n[robot.reachy_mini]\n{extra}')
    return cfg


def test_doctor_with_the_mockup_daemon(tmp_path: Path) -> None:
    _netns()
    cfg = _config(tmp_path)
    with HubServer({}, datasets={DATASET: _dataset(tmp_path)}) as hub:  # the emotions in the cache first
        pulled = _pull(cfg, _env(tmp_path, hub.url))
    assert pulled.returncode == 0, pulled.stderr

    runs = _doctor_in_netns(tmp_path, cfg, with_daemon=True)
    checks = _checks(runs["enabled"])
    assert set(checks) == OTHERS | REACHY
    assert checks["serial"]["ok"] and "a Reachy Mini" in checks["serial"]["detail"]
    sdk = sdk_version()
    daemon = checks["reachy-daemon"]
    assert daemon["ok"], daemon
    assert daemon["detail"] == f"reachy-mini-daemon at localhost:8000 ({sdk}): running, mockup simulator"
    version = checks["reachy-version"]
    assert version["ok"] and version["detail"] == f"SDK {sdk} and daemon {sdk}: the same release"
    assert checks["reachy-motors"]["ok"] and checks["reachy-motors"]["detail"] == "motors enabled"
    emotions = checks["reachy-emotions"]
    snapshot = tmp_path / "hf" / "hub" / CACHE_DIR / "snapshots" / COMMIT
    assert emotions["ok"] and emotions["detail"] == f"2 recorded moves in {snapshot}"

    assert runs["motors"] == {"mode": "disabled"}
    checks = _checks(runs["disabled"])
    motors = checks["reachy-motors"]
    assert not motors["ok"] and not motors["blocking"]  # a warning: run enables them
    assert motors["detail"] == "motors disabled: bolt-agent run turns them on when it connects"
    assert motors["fix"].startswith("curl -X POST http://localhost:8000/api/motors/set_mode/enabled")
    assert all(checks[name]["ok"] for name in REACHY - {"reachy-motors"})


def test_doctor_without_a_daemon_says_how_to_start_it(tmp_path: Path) -> None:
    _netns()
    cfg = _config(tmp_path)
    runs = _doctor_in_netns(tmp_path, cfg, with_daemon=False)
    checks = _checks(runs["none"])
    assert set(checks) == OTHERS | REACHY - {"reachy-motors"}  # the motors are not asked: no daemon
    daemon = checks["reachy-daemon"]
    assert not daemon["ok"] and daemon["blocking"]
    assert daemon["detail"].startswith("reachy-mini-daemon at localhost:8000 is not reachable (")
    assert "Connection refused" in daemon["detail"]
    assert daemon["fix"] == (
        "start reachy-mini-daemon on this computer: with the robot (a Lite: its USB cable goes "
        "here; installed by jetson/install.sh) sudo systemctl start reachy-mini-daemon; without "
        "it, the simulator: REACHY_MINI_TELEMETRY=0 DO_NOT_TRACK=1 .venv/bin/reachy-mini-daemon "
        f"--sim --headless --no-media, or check [robot.reachy_mini] host and port in {cfg}"
    )
    assert runs["none"]["rc"] == 1
    version = checks["reachy-version"]
    assert version["ok"] and "the daemon's version is unknown (it did not answer)" in version["detail"]
    emotions = checks["reachy-emotions"]
    assert not emotions["ok"] and not emotions["blocking"]
    assert f"({DATASET}) are not downloaded (cache {tmp_path / 'hf' / 'hub'})" in emotions["detail"]
    assert emotions["fix"] == f"HF_HOME={tmp_path / 'hf'} bolt-agent models pull --config {cfg}"


@contextmanager
def _status_server(status: dict, mode: str = "enabled") -> Iterator[int]:
    """Answer ``GET /api/daemon/status`` and ``/api/motors/status`` as the daemon does; yields the port."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            doc = {"/api/daemon/status": status, "/api/motors/status": {"mode": mode}}.get(self.path)
            body = json.dumps(doc).encode()
            self.send_response(200 if doc is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _status(version: str, state: str = "running", error: str | None = None) -> dict:
    return {"state": state, "version": version, "error": error, "mockup_sim_enabled": False}


def _by_name(checks: list) -> dict:
    return {c.name: c for c in checks}


def test_versions_motors_and_a_local_copy(tmp_path: Path) -> None:
    emotions = tmp_path / "my-emotions"
    (emotions / "data").mkdir(parents=True)
    (emotions / "data" / "wave.json").write_text("{}")  # counted, not parsed: `run` reports bad files

    def check(version: str, sdk: str | None, **status: object) -> dict:
        with _status_server({**_status(version), **status}, mode="gravity_compensation") as port:
            extra = f'host = "127.0.0.1"\nport = {port}\nemotions_dir = "{emotions}"\n'
            cfg = _config(tmp_path, extra)
            return _by_name(check_reachy(load_config(cfg).robot, str(cfg), sdk=lambda: sdk))

    same = check("1.13.0", "1.13.0")
    assert same["reachy-daemon"].ok and same["reachy-daemon"].detail.endswith("(1.13.0): running, robot")
    assert same["reachy-version"].ok
    assert same["reachy-emotions"].ok and same["reachy-emotions"].detail == f"1 recorded moves in {emotions}"
    motors = same["reachy-motors"]
    assert not motors.ok and not motors.blocking and motors.detail.startswith("motors gravity_compensation:")

    patch = check("1.13.2", "1.13.0")["reachy-version"]
    assert not patch.ok and not patch.blocking  # a warning
    assert "differ in their patch release" in patch.detail
    assert patch.fix.startswith(f"{sys.executable} -m pip install 'reachy-mini==1.13.2'")

    release = check("1.12.0", "1.13.0")["reachy-version"]
    assert not release.ok and release.blocking  # the driver refuses to connect
    assert "SDK 1.13.0 and daemon 1.12.0 are different releases" in release.detail
    assert "pip install 'reachy-mini==1.12.0'" in release.fix

    no_sdk = check("1.13.0", None)["reachy-version"]
    assert not no_sdk.ok and no_sdk.blocking
    assert "pip install 'bolt-agent[reachy]'" in no_sdk.fix
    assert f"BOLT_REACHY=1 bash {REPO}/launch/setup.sh run" in no_sdk.fix

    broken = check("1.13.0", "1.13.0", state="error", error="motor 12 not responding")["reachy-daemon"]
    assert not broken.ok and broken.blocking
    assert broken.detail.endswith(": error, robot: motor 12 not responding")
    assert broken.fix.startswith("restart reachy-mini-daemon on 127.0.0.1")


def test_missing_local_copy_and_other_bodies(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    with _status_server(_status("1.13.0")) as port:
        extra = f'host = "127.0.0.1"\nport = {port}\nemotions_dir = "{gone}"\n'
        cfg = _config(tmp_path, extra)
        checks = _by_name(check_reachy(load_config(cfg).robot, str(cfg), sdk=lambda: "1.13.0"))
    assert checks["reachy-motors"].ok
    emotions = checks["reachy-emotions"]
    assert (
        not emotions.ok
        and not emotions.blocking
        and f"emotions_dir {gone} is not a folder" in emotions.detail
    )
    assert emotions.fix == f"edit [robot.reachy_mini] emotions_dir in {cfg}"

    other = tmp_path / "sim.toml"
    other.write_text("")
    assert check_reachy(load_config(other).robot) == []
