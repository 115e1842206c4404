"""Waiting costs no CPU: ``chat`` at the end of its input, waiting for a timer, sleeps.

A new user's ``chat`` with a timer pending at the end of its input used a core at 100 % while
it waited (37 s of CPU in a 35 s run): ``Pipeline.finish`` looped on a wait that returned at
once when nothing was in flight. Measured here on the real command (a subprocess, the embedded
models), from ``/proc/PID/stat``, over a few seconds of the wait.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MAX_CORE_SHARE = 0.02
"""Most CPU the waiting process may use, as a share of one core (issue 50: 2 %)."""


def _cpu_s(pid: int) -> float:
    """CPU time of process ``pid`` so far (user + system, all threads), s."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_chat_waiting_for_a_timer_at_the_end_of_its_input_sleeps(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "chat", "--json", "--wait-background", "60"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    lines: queue.Queue[dict] = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            if line.strip():
                lines.put(json.loads(line))

    threading.Thread(target=read, daemon=True).start()
    try:
        proc.stdin.write("set a timer for 20 seconds\n")
        proc.stdin.close()  # end of input: chat now waits for the timer
        seen: list[dict] = []
        deadline = time.monotonic() + 240
        # After the turn the context is tidied (the reply read into the KV cache: 2 s here), then
        # nothing is left to do but wait.
        while not any(e["event"] == "context_tidied" for e in seen):
            assert time.monotonic() < deadline, seen
            seen.append(lines.get(timeout=240))
        assert any(e["event"] == "tool_result" and e["name"] == "set_timer" and e["ok"] for e in seen), seen
        assert not any(e["event"] == "background_done" for e in seen), "the timer fired before the wait"
        time.sleep(0.2)
        t0, c0 = time.monotonic(), _cpu_s(proc.pid)
        time.sleep(4.0)
        share = (_cpu_s(proc.pid) - c0) / (time.monotonic() - t0)
        assert share <= MAX_CORE_SHARE, f"{share:.1%} of a core while waiting for the timer"
        # ... and the wait still ends when the timer fires, which is announced.
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
        while not lines.empty():
            seen.append(lines.get())
        done = [e for e in seen if e["event"] == "background_done"]
        assert len(done) == 1 and done[0]["ok"], seen
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
