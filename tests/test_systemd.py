"""systemd for real: ``bolt-agent run`` talking to an ``AF_UNIX`` datagram socket as ``$NOTIFY_SOCKET``.

The live test runs the agent as a subprocess against a private PulseAudio server (skipped with
the reason when PulseAudio is missing) and reads every datagram it sends: ``EXTEND_TIMEOUT_USEC``
while models load, ``READY=1`` only after the ``ready`` event (models warm), ``WATCHDOG=1`` at
half ``WATCHDOG_USEC`` from the listener loop, ``STATUS=`` lines, ``STOPPING=1`` on SIGTERM.
The unit tests check that the watchdog stops when the loop that calls it stalls, that start-up
extensions stop after the load limit, and the journald priority prefixes of the log formatter and
of ``run``'s start-up errors.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.systemd import (
    JournalFormatter,
    Watchdog,
    extend_timeout,
    journal_lines,
    journal_priority,
    under_systemd,
)

ROOT = Path(__file__).resolve().parent.parent


class NotifySocket:
    """A bound ``AF_UNIX`` ``SOCK_DGRAM`` socket; a reader thread records (time, message)."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.2)
        self.messages: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._read, daemon=True)
        self._th.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            self.messages.append((time.monotonic(), data.decode()))

    def lines(self) -> list[tuple[float, str]]:
        """Every ``KEY=VALUE`` assignment received, with its arrival time."""
        return [(t, line) for t, m in list(self.messages) for line in m.split("\n") if line]

    def close(self) -> None:
        self._stop.set()
        self._th.join(1)
        self.sock.close()


@pytest.fixture
def notify_socket(tmp_path):
    s = NotifySocket(tmp_path / "notify.sock")
    yield s
    s.close()


def test_watchdog_pings_at_half_the_interval_and_stops_when_the_loop_stalls(notify_socket):
    env = {"NOTIFY_SOCKET": notify_socket.path, "WATCHDOG_USEC": "200000"}  # pings every 0.1 s
    wd = Watchdog(env)
    assert wd.enabled and wd.period == pytest.approx(0.1)
    stall = threading.Event()
    done = threading.Event()

    def loop() -> None:  # a listener-like loop: one iteration every 10 ms, unless it hangs
        while not done.is_set():
            wd()
            if stall.is_set():
                done.wait()  # blocked: a hung device read
            time.sleep(0.01)

    th = threading.Thread(target=loop, daemon=True)
    th.start()
    time.sleep(0.55)
    stall.set()
    time.sleep(0.05)
    stalled_at = time.monotonic()
    time.sleep(0.5)
    done.set()
    th.join(1)
    pings = [t for t, m in notify_socket.lines() if m == "WATCHDOG=1"]
    before = [t for t in pings if t < stalled_at]
    assert 4 <= len(before) <= 8, len(before)  # ~0.55 s / 0.1 s, rate-limited despite 10 ms iterations
    gaps = [b - a for a, b in zip(before, before[1:], strict=False)]
    assert min(gaps) >= 0.09, gaps
    assert not [t for t in pings if t > stalled_at + 0.02], "pinged while the loop was blocked"


def test_watchdog_without_systemd_does_nothing():
    wd = Watchdog({})
    assert not wd.enabled
    wd()
    assert wd.pings == 0
    # WATCHDOG_PID naming another process: the watchdog is not ours.
    assert not Watchdog(
        {"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "1000", "WATCHDOG_PID": str(os.getpid() + 1)}
    ).enabled


def test_extend_timeout_pings_while_the_body_runs(notify_socket):
    env = {"NOTIFY_SOCKET": notify_socket.path}
    with extend_timeout("loading models...", extend_s=0.1, env=env):
        time.sleep(0.35)
    n = len(notify_socket.messages)
    time.sleep(0.2)
    lines = [m for _, m in notify_socket.lines()]
    assert lines[0] == "STATUS=loading models..."
    ext = [m for m in lines if m.startswith("EXTEND_TIMEOUT_USEC=")]
    assert len(ext) >= 3 and all(m == "EXTEND_TIMEOUT_USEC=200000" for m in ext), lines
    assert len(notify_socket.messages) == n, "kept extending after the body ended"
    with extend_timeout(env={}):  # outside systemd: nothing, no thread
        pass


def test_extend_timeout_stops_extending_after_the_limit(notify_socket):
    """A load that hangs past ``limit_s`` gets no more extensions: systemd's start timeout fires."""
    env = {"NOTIFY_SOCKET": notify_socket.path}
    hung = threading.Event()  # never set: the load hangs
    t0 = time.monotonic()
    with extend_timeout("loading models...", extend_s=0.1, env=env, limit_s=0.4):
        hung.wait(1.5)
    ended = time.monotonic()
    lines = notify_socket.lines()
    ext = [(t, m) for t, m in lines if m.startswith("EXTEND_TIMEOUT_USEC=")]
    assert 3 <= len(ext) <= 10, lines  # ~0.4 s / 0.05 s at most, not ~30 over the whole 1.5 s
    assert ext[-1][0] < t0 + 0.4 + 0.3 < ended, (ext[-1][0] - t0, lines)
    # Each extension covers 0.2 s but never past the limit: the last ones ask for less.
    usecs = [int(m.split("=")[1]) for _, m in ext]
    assert max(usecs) == 200000 and usecs[-1] < 200000, usecs
    done = [m for _, m in lines if m.startswith("STATUS=") and "still not done after 0.4 s" in m]
    assert done, lines  # the reason shows in systemctl status


def test_run_start_errors_carry_the_error_priority_under_journald(tmp_path):
    """``run`` refusing to start (over the memory budget) prints ``<3>error: ...`` for journald."""
    text = (ROOT / "jetson" / "robot.toml").read_text()
    cfg = tmp_path / "robot.toml"
    cfg.write_text(text.replace("lazy_per_layer_embd = true", "lazy_per_layer_embd = false"))
    env = {k: v for k, v in os.environ.items() if k not in {"INVOCATION_ID", "NOTIFY_SOCKET"}}
    env.update(JOURNAL_STREAM="8:12345", HF_HUB_OFFLINE="1")
    r = subprocess.run(
        [sys.executable, "-m", "agent", "run", "--config", str(cfg)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [line for line in r.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("<3>error: ") and "over budget" in errors[0], r.stderr
    logged = [x for x in r.stderr.splitlines() if x.strip()]
    assert all(x[:3] in {"<2>", "<3>", "<4>", "<6>", "<7>"} for x in logged), logged


def test_journal_formatter_prefixes_every_line_with_its_priority():
    fmt = JournalFormatter("%(levelname)s %(name)s: %(message)s")

    def line(level: int, msg: str, exc: bool = False) -> str:
        info = None
        if exc:
            try:
                raise ValueError("boom")
            except ValueError:
                info = sys.exc_info()
        return fmt.format(logging.LogRecord("agent.x", level, __file__, 1, msg, (), info))

    assert line(logging.ERROR, "bad") == "<3>ERROR agent.x: bad"
    assert line(logging.WARNING, "hm") == "<4>WARNING agent.x: hm"
    assert line(logging.INFO, "ok") == "<6>INFO agent.x: ok"
    assert line(logging.DEBUG, "d") == "<7>DEBUG agent.x: d"
    assert line(logging.CRITICAL, "c").startswith("<2>")
    tb = line(logging.ERROR, "failed", exc=True).split("\n")
    assert len(tb) > 2 and all(x.startswith("<3>") for x in tb), tb
    assert [journal_priority(v) for v in (50, 40, 30, 20, 10, 5)] == [2, 3, 4, 6, 7, 7]
    assert under_systemd({"JOURNAL_STREAM": "8:1234"}) and under_systemd({"INVOCATION_ID": "ab"})
    assert not under_systemd({})
    assert (
        journal_lines("error: no input device\n  0 USB mic", 3) == "<3>error: no input device\n<3>  0 USB mic"
    )


@pytest.mark.audio
def test_run_under_systemd_notify_protocol(pulse, notify_socket, tmp_path):
    cfg = tmp_path / "robot.toml"
    cfg.write_text("")
    env = dict(pulse.env, NOTIFY_SOCKET=notify_socket.path, WATCHDOG_USEC="1000000", INVOCATION_ID="test")
    env.pop("WATCHDOG_PID", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "--json", "--config", str(cfg)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    events: list[tuple[float, dict]] = []

    def read() -> None:
        for raw in proc.stdout:
            events.append((time.monotonic(), json.loads(raw)))

    threading.Thread(target=read, daemon=True).start()
    stderr = ""
    try:
        deadline = time.monotonic() + 180
        while not any(m == "READY=1" for _, m in notify_socket.lines()):
            assert proc.poll() is None, f"agent exited {proc.returncode}: {proc.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, "no READY=1"
            time.sleep(0.05)
        time.sleep(2.6)  # a few watchdog periods (0.5 s) in the listening state
        t_term = time.monotonic()
        proc.terminate()
        proc.wait(20)
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(0.2)
    lines = notify_socket.lines()
    msgs = [m for _, m in lines]
    t_ready = next(t for t, m in lines if m == "READY=1")
    ready_ev = [t for t, e in events if e["event"] == "ready"]
    assert ready_ev and ready_ev[0] <= t_ready, "READY=1 before the models were warm"
    i_ready = msgs.index("READY=1")
    assert any(m.startswith("EXTEND_TIMEOUT_USEC=") for m in msgs[:i_ready]), msgs
    assert "STATUS=loading models..." in msgs[:i_ready] and "STATUS=listening" in msgs, msgs
    pings = [t for t, m in lines if m == "WATCHDOG=1" and t_ready <= t < t_term]
    assert len(pings) >= 4, msgs
    gaps = [b - a for a, b in zip(pings, pings[1:], strict=False)]
    assert all(0.45 <= g <= 1.0 for g in gaps), gaps
    stopping = [t for t, m in lines if m == "STOPPING=1"]
    assert stopping and stopping[0] >= t_term, msgs
    # Under systemd (INVOCATION_ID set) log lines carry journald priority prefixes.
    logged = [x for x in stderr.splitlines() if x.strip()]
    assert all(x[:3] in {"<2>", "<3>", "<4>", "<6>", "<7>"} for x in logged), logged[:5]
