"""``bolt-agent run --json`` as a child process of the soak, and its event stream.

The child runs in the sound server's environment (:class:`agent.bench.pulse.PulseRig`) with
the live console on a loopback port (typed turns); its stderr goes to a log file. A reader
thread parses its JSON Lines and keeps the events a soak needs (:data:`KEPT`): robot joint
commands (50 per second) and per-sentence detail are dropped. Events are addressed by an
absolute index; :meth:`Child.forget` drops those before an index so a week-long soak does
not keep them all.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

KEPT = frozenset(
    {
        "ready",
        "transcript",
        "timing",
        "speaking",
        "tool_call",
        "barge_in",
        "background_done",
        "turn_dropped",
        "skipped",
        "error",
        "device",
    }
)
"""Event names the soak reads (see :mod:`agent.events`)."""


class ChildExited(RuntimeError):
    """The agent process exited while the soak waited on it.

    Attributes:
        code: Its exit status (negative: killed by that signal).
    """

    def __init__(self, code: int, tail: str) -> None:
        super().__init__(f"bolt-agent run exited with {code}: {tail}")
        self.code = code
        self.tail = tail


class Child:
    """One ``bolt-agent run --json --console 127.0.0.1:PORT --config CONFIG`` process.

    Args:
        config: The robot config.
        env: Its environment (the sound server's).
        port: The console's loopback port (0: no console).
        log: Where its stderr goes (appended).
    """

    def __init__(self, config: Path, env: dict[str, str], port: int, log: Path) -> None:
        args = [sys.executable, "-m", "agent", "run", "--json", "--config", str(config)]
        if port:
            args += ["--console", f"127.0.0.1:{port}"]
        self.port = port
        self.log = log
        self._err: IO[bytes] = open(log, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=self._err, text=True)
        self._events: list[dict[str, Any]] = []
        self._base = 0  # absolute index of _events[0]
        self._cv = threading.Condition()
        self.errors = 0
        self._reader = threading.Thread(target=self._read, name="soak-reader", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        """The process id."""
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue  # a stray print: not an event
            if ev.get("event") not in KEPT:
                continue
            ev["t"] = time.monotonic()
            with self._cv:
                self.errors += ev["event"] == "error"
                self._events.append(ev)
                self._cv.notify_all()
        with self._cv:
            self._cv.notify_all()

    def mark(self) -> int:
        """The index the next event will have."""
        with self._cv:
            return self._base + len(self._events)

    def forget(self, before: int) -> None:
        """Drop the events before absolute index ``before``."""
        with self._cv:
            n = max(0, min(before - self._base, len(self._events)))
            del self._events[:n]
            self._base += n

    def since(self, start: int, name: str) -> list[dict[str, Any]]:
        """The kept events named ``name`` from absolute index ``start`` on."""
        with self._cv:
            return [e for e in self._events[max(0, start - self._base) :] if e["event"] == name]

    def wait(
        self, pred: Callable[[dict[str, Any]], bool], start: int, timeout: float
    ) -> dict[str, Any] | None:
        """The first event from absolute index ``start`` on that satisfies ``pred``.

        Returns:
            The event, or None after ``timeout`` s.

        Raises:
            ChildExited: the process exited first.
        """
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for ev in self._events[max(0, start - self._base) :]:
                    if pred(ev):
                        return ev
                if self.proc.poll() is not None:
                    raise ChildExited(self.proc.returncode, self.stderr_tail())
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cv.wait(min(left, 0.5))

    def quiet(self, for_s: float, timeout: float) -> bool:
        """Wait until no kept event has arrived for ``for_s`` s; False after ``timeout`` s.

        Raises:
            ChildExited: the process exited first.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._cv:
                last = self._events[-1]["t"] if self._events else 0.0
            if self.proc.poll() is not None:
                raise ChildExited(self.proc.returncode, self.stderr_tail())
            if time.monotonic() - last >= for_s:
                return True
            time.sleep(0.1)
        return False

    def say(self, text: str) -> int:
        """Type a line into the live console (``POST /api/say``); the HTTP status (0: no answer)."""
        body = json.dumps({"text": text}).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/say",
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def stderr_tail(self, n: int = 2000) -> str:
        """The last ``n`` characters of its log."""
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def close(self, timeout: float = 30.0) -> int:
        """Stop it with SIGTERM (SIGKILL after ``timeout`` s); its exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        self._err.close()
        return self.proc.returncode
