"""``bolt-agent run`` killed and started again on one state file: nothing the user was told is lost.

Each test runs ``bolt-agent run --console`` as a process (real models, the console's
``/api/say`` for typed turns and its controls, the in-process fake sound backend at the OS
boundary), kills it with SIGKILL (a crash, a watchdog restart, a power cut) or stops it with
SIGTERM, and starts it again on the same ``[state] path``. The state store's units are in
``test_state.py``.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from test_state import open_store, unwritable_folder
from waiting import wait_until

from agent.state.timers import spoken_length

ROOT = Path(__file__).resolve().parent.parent
# --- helpers ----------------------------------------------------------
DRIVER = r"""
import json, sys
import agent.audio_io.devices as devices
from agent.audio_io.fake import FakeBackend

devices.SoundDeviceBackend = FakeBackend  # the OS boundary: no sound card needed
import agent.cli.live as cli_live

real_build, cores = cli_live.build_agent, []

def build_agent(*args, **kwargs):  # the real one; the core is kept to show its history
    core, bus = real_build(*args, **kwargs)
    cores.append(core)
    return core, bus

def notify(state):
    if state.startswith("READY=1"):
        print("HISTORY " + json.dumps(cores[0].conversation.history, default=str), flush=True)

cli_live.build_agent, cli_live.notify = build_agent, notify
from agent.cli.main import main

sys.argv = ["bolt-agent", "run", "--json", *sys.argv[1:]]
main()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    """``bolt-agent run --json --console`` as a process; its events, log and history collected."""

    def __init__(self, config: Path) -> None:
        self.port = free_port()
        self.p = subprocess.Popen(
            [sys.executable, "-c", DRIVER, "--config", str(config), "--console", f"127.0.0.1:{self.port}"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict] = []
        self.history: list[dict] | None = None
        self.log: list[str] = []
        self._ready = threading.Event()
        self._q: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.log.extend(self.p.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:
            if line.startswith("HISTORY "):
                self.history = json.loads(line[len("HISTORY ") :])
                self._ready.set()
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            self.events.append(ev)

    def ready(self, timeout: float = 240.0) -> None:
        """Block until systemd's READY: models warm, devices open, console attached."""
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.2):
            assert self.p.poll() is None, f"exited {self.p.returncode}: {''.join(self.log)[-3000:]}"
            assert time.monotonic() < deadline, "no READY"
        assert wait_until(lambda: self.api("GET", "/api/state")[0] == 200, 30)

    def api(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body or {}).encode() if method == "POST" else None
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def say(self, text: str) -> None:
        status, body = self.api("POST", "/api/say", {"text": text})
        assert status == 200, (status, body)

    def wait(self, pred, start: int = 0, timeout: float = 120.0) -> dict:
        """The first event from index ``start`` on that satisfies ``pred``."""
        found: list[dict] = []

        def seen() -> bool:
            assert self.p.poll() is None, f"exited {self.p.returncode}: {''.join(self.log)[-3000:]}"
            found.extend(e for e in self.events[start:] if pred(e))
            return bool(found)

        assert wait_until(seen, timeout, 0.05), [e["event"] for e in self.events[start:]][-30:]
        return found[0]

    def body(self) -> dict:
        status, state = self.api("GET", "/api/state")
        assert status == 200, state
        return state["body"]

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs (a crash, a watchdog restart, a power cut)."""
        self.p.kill()
        self.p.wait(10)

    def terminate(self) -> int:
        self.p.send_signal(signal.SIGTERM)
        return self.p.wait(30)

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(10)


@pytest.fixture
def runs(tmp_path):
    """Start ``run`` processes on one state file (``[state] path``); any still running are killed."""
    started: list[Run] = []
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[state]\npath = "{tmp_path / "state.sqlite3"}"\n')

    def start() -> Run:
        r = Run(cfg)
        started.append(r)
        return r

    yield start, tmp_path / "state.sqlite3"
    for r in started:
        r.close()


def timer_call(run: Run, start: int) -> dict:
    """The set_timer call of the turn just typed, and its result."""
    call = run.wait(lambda e: e["event"] == "tool_call" and e["name"] == "set_timer", start)
    run.wait(lambda e: e["event"] == "tool_result" and e["call_id"] == call["call_id"], start)
    return call


def announced(run: Run) -> list[dict]:
    return [e for e in run.events if e["event"] == "background_done" and "restarting" in str(e.get("result"))]


def test_kill_9_keeps_timer_estop_and_conversation(runs):
    start, path = runs
    a = start()
    a.ready()
    n = len(a.events)
    a.say("My name is Ada Lovelace.")
    a.wait(lambda e: e["event"] == "reply", n)
    n = len(a.events)
    a.say("Set a timer for 5 seconds.")
    call = timer_call(a, n)
    seconds = float(call["arguments"]["seconds"])
    assert seconds <= 60, call  # the test waits for it to come due
    assert a.api("POST", "/api/estop")[0] == 200
    reader, _ = open_store(path)  # a second reader while the agent writes (WAL)
    assert wait_until(lambda: reader.timers() and reader.estop_since() is not None, 10)
    (timer,) = reader.timers()
    reader.close()
    a.kill()

    time.sleep(max(0.0, timer.due_utc - time.time()) + 0.5)  # it came due while nothing ran
    b = start()
    b.ready()
    said = b.wait(
        lambda e: announced(b) and e["event"] == "reply" and e["turn_id"] == announced(b)[0]["turn_id"]
    )
    assert said["text"], said
    assert (
        announced(b)[0]["result"] == f"While I was restarting, your {spoken_length(seconds)} timer finished."
    )
    assert any("Ada Lovelace" in str(m.get("content")) for m in b.history), b.history
    assert b.body()["estopped"] is True
    status, refused = b.api("POST", "/api/animate", {"name": "nod"})
    assert status == 409, (status, refused)
    assert b.api("POST", "/api/clear")[0] == 200
    assert wait_until(lambda: b.body()["estopped"] is False, 10)  # the page's body message is periodic
    assert b.terminate() == 0
    assert len(announced(b)) == 1

    c = start()  # nothing left to announce, nothing latched, the conversation still there
    c.ready()
    n = len(c.events)
    c.say("Hello.")
    c.wait(lambda e: e["event"] == "reply", n)
    assert announced(c) == []
    assert c.body()["estopped"] is False
    assert any("Ada Lovelace" in str(m.get("content")) for m in c.history)
    assert c.terminate() == 0


def test_sigterm_keeps_a_pending_timer_that_then_fires_on_time(runs):
    start, path = runs
    path.write_bytes(os.urandom(2048))  # garbage from the last run: moved aside, fresh start
    a = start()
    a.ready()
    err = a.wait(lambda e: e["event"] == "error" and "corrupt" in e["message"])
    assert str(path) in err["message"] and "moved it to state.sqlite3.corrupt-" in err["message"]
    assert len(list(path.parent.glob("state.sqlite3.corrupt-*"))) == 1
    n = len(a.events)
    a.say("Set a timer for 90 seconds.")
    call = timer_call(a, n)
    reader, _ = open_store(path)
    assert wait_until(lambda: reader.timers(), 10)
    (timer,) = reader.timers()
    assert timer.seconds == float(call["arguments"]["seconds"]) >= 30, call  # restarts take a while
    assert a.terminate() == 0
    assert reader.timers() == [timer]  # a shutdown is not a cancellation
    assert not any("cancel" in str(e.get("result", "")) for e in a.events if e["event"] == "background_done")

    b = start()
    b.ready()
    assert time.time() < timer.due_utc, "the restart took longer than the timer: nothing to check"
    done = b.wait(lambda e: e["event"] == "background_done", timeout=timer.due_utc - time.time() + 60)
    fired = time.time()
    assert done["result"].startswith("Time is up"), done
    assert timer.due_utc - 0.5 <= fired <= timer.due_utc + 10, fired - timer.due_utc
    assert wait_until(lambda: reader.timers() == [], 10)
    reader.close()
    assert b.terminate() == 0


def test_an_unwritable_state_folder_is_one_error_and_the_agent_runs(tmp_path):
    with unwritable_folder(tmp_path) as folder:
        run_unwritable(folder, tmp_path)


def run_unwritable(unwritable_dir: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[state]\npath = "{unwritable_dir / "state.sqlite3"}"\n')
    r = Run(cfg)
    try:
        r.ready()
        errors = [e for e in r.events if e["event"] == "error" and e["message"].startswith("state:")]
        assert len(errors) == 1 and str(unwritable_dir) in errors[0]["message"], errors
        assert "running without saved state" in errors[0]["message"], errors  # said once, as this event
        n = len(r.events)
        r.say("Set a timer for 2 seconds.")
        timer_call(r, n)
        done = r.wait(lambda e: e["event"] == "background_done", n, timeout=60)
        assert done["result"].startswith("Time is up"), done  # the agent works, only nothing is kept
        assert r.terminate() == 0
    finally:
        r.close()


def test_the_rig_keeps_its_state_where_its_config_says(tmp_path):
    """``AgentRig(cfg, state=True)``: the in-process pipeline saves to ``[state] path``, not to home."""
    from rig import AgentRig

    from agent.config import load_config

    cfg_file = tmp_path / "robot.toml"
    cfg_file.write_text(f'[state]\npath = "{tmp_path / "state.sqlite3"}"\n')
    rig = AgentRig(load_config(cfg_file), state=True)
    try:
        rig.text("My name is Ada Lovelace.")
    finally:
        rig.close()
    store, problems = open_store(tmp_path / "state.sqlite3")
    assert problems == []
    assert store.history()[0] == {"role": "user", "content": "My name is Ada Lovelace."}
    assert store.history()[1]["role"] == "assistant"
