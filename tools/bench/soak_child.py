"""``bolt-agent run --json`` as a child process of the soak, and its event stream.

The child runs in the sound server's environment (``tools/pulse.py``'s ``PulseRig``) with
the live console on a loopback port (typed turns); its stderr goes to a log file. A reader
thread parses its JSON Lines and keeps the events a soak needs (:data:`KEPT`): robot joint
commands (50 per second) and per-sentence detail are dropped. Events are addressed by an
absolute index; :meth:`Child.forget` drops those before an index so a week-long soak does
not keep them all. :func:`read_pending_timers` reads the timers a child has saved in its
state store (:mod:`agent.state.store`), read-only, while it runs or after it died.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from agent.state.store import PendingTimer

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


def read_pending_timers(path: Path) -> list[PendingTimer]:
    """The timers saved in the state store at ``path`` and not yet fired, soonest first.

    Read-only (``mode=ro``), so a live agent's writes and the file are left alone; the
    ``timers`` table is :mod:`agent.state.store`'s.

    Returns:
        The timers; [] when there is no file yet, no table yet (the agent is creating it), or
        the agent holds the file locked for longer than the 1 s busy timeout.
    """
    if not path.is_file():
        return []
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return []
    try:
        rows = conn.execute(
            "SELECT id, label, seconds, due_utc, set_utc FROM timers ORDER BY due_utc"
        ).fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    return [PendingTimer(*row) for row in rows]


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
        state_file: The state store it uses (``[state]``: :func:`agent.state.keep.state_path`),
            or None when persistence is off.
        kept: The event names kept (default :data:`KEPT`).
        verbose: Run it with ``--verbose`` (its decisions logged to ``log``).
    """

    def __init__(
        self,
        config: Path,
        env: dict[str, str],
        port: int,
        log: Path,
        state_file: Path | None = None,
        kept: frozenset[str] = KEPT,
        verbose: bool = False,
    ) -> None:
        args = [sys.executable, "-m", "agent", "run", "--json", "--config", str(config)]
        args += ["--verbose"] if verbose else []
        if port:
            args += ["--console", f"127.0.0.1:{port}"]
        self.port = port
        self.log = log
        self.state_file = state_file
        self.kept = kept
        self._err: IO[bytes] = open(log, "ab")  # closed in close()
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=self._err, text=True)
        self._events: list[dict[str, Any]] = []
        self._base = 0  # absolute index of _events[0]
        self._cv = threading.Condition()
        self.errors = 0
        self._tidied: list[dict[str, Any]] = []  # context_tidied events not yet taken
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
            if ev.get("event") == "context_tidied":  # counted, not kept: it must not delay quiet()
                with self._cv:
                    self._tidied.append(ev)
                continue
            if ev.get("event") not in self.kept:
                continue
            ev["t"] = time.monotonic()
            with self._cv:
                self.errors += ev["event"] == "error"
                self._events.append(ev)
                self._cv.notify_all()
        with self._cv:
            self._cv.notify_all()

    def take_tidied(self) -> list[dict[str, Any]]:
        """The ``context_tidied`` events (the driver's work between turns) since the last call."""
        with self._cv:
            out, self._tidied = self._tidied, []
            return out

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

    def pending_timers(self) -> list[PendingTimer]:
        """The timers the child has saved and not yet fired (:func:`read_pending_timers`)."""
        return read_pending_timers(self.state_file) if self.state_file is not None else []

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


def restored_timers(child: Child, pending: list[PendingTimer], timeout_s: float) -> list[dict[str, Any]]:
    """Wait for a restarted child to report each timer in ``pending`` and to play that turn.

    The agent re-arms its store's timers at start-up (:func:`agent.state.timers.rearm`) and
    reports each as the background call ``restored-<timer id>``: one that came due while it
    was down at once ("While I was restarting, ..."), one still running at its due time
    (waited for only when that is within ``timeout_s``).

    Args:
        child: The restarted child (its events are searched from its start).
        pending: The timers the dead child left (:func:`read_pending_timers`).
        timeout_s: Longest wait for each report, and then for its reply to be played, s.

    Returns:
        One record per timer: ``id``, ``label``, ``overdue`` (already due once the new child
        had opened its devices),
        ``result`` (what the agent reported; None: nothing) and ``played`` (its turn's reply
        was played).

    Raises:
        ChildExited: the child exited meanwhile.
    """
    out = []
    now = time.time()  # the store's due times are UTC wall-clock seconds
    for timer in pending:
        rec: dict[str, Any] = {
            "id": timer.id,
            "label": timer.label,
            "overdue": timer.due_utc <= now,
            "result": None,
            "played": False,
        }
        out.append(rec)
        due_in = max(0.0, timer.due_utc - now)
        if due_in > timeout_s:
            continue  # fires long after the restart: not waited for
        call_id = f"restored-{timer.id}"
        done = child.wait(
            lambda e, c=call_id: e["event"] == "background_done" and e.get("call_id") == c,
            0,
            due_in + timeout_s,
        )
        if done is None:
            continue
        rec["result"] = done.get("result")
        played = child.wait(
            lambda e, t=done["turn_id"]: e["event"] == "timing" and e["turn_id"] == t, 0, timeout_s
        )
        rec["played"] = played is not None
    return out
