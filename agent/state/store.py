"""The state store: one SQLite file that keeps what must survive a restart.

What it holds (one table each): pending timers (label, length, wall-clock due time in UTC),
the tail of the conversation (OpenAI-style message dicts as JSON, in order), flags (the
latched e-stop), what the user asked the robot to remember (their name, facts) and settings
changed by voice (the speaking volume); a file made before a table existed gets it at its next
open. Everything else the agent rebuilds at start-up.

Durability: every write is one ``BEGIN IMMEDIATE … COMMIT`` transaction in WAL mode with
``synchronous=FULL``. WAL lets ``bolt-agent state show`` read while the service writes, and
needs one fsync per commit; ``FULL`` makes that fsync happen at every commit, so a timer
confirmed to the user is on disk even if the power is cut the next moment (with ``NORMAL``
a WAL commit may be rolled back by a power loss; see https://sqlite.org/pragma.html#pragma_synchronous).
Writes are rare (a timer, a turn, an e-stop), so the fsync costs nothing that matters.

Faults never stop the agent: a file that is not a database (or fails ``quick_check``) is
moved aside to ``state.sqlite3.corrupt-<UTC time>`` and a fresh one is started; a directory
that cannot be written or a database locked by another process turns persistence off. Each
is reported once through ``on_problem`` (one line naming the file and what happened).
Calls are safe from any thread (one connection under a lock).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 2.0
"""How long a write waits for another process's lock before persistence is turned off, s."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS timers (
    id TEXT PRIMARY KEY, label TEXT NOT NULL, seconds REAL NOT NULL,
    due_utc REAL NOT NULL, set_utc REAL NOT NULL);
CREATE TABLE IF NOT EXISTS history (seq INTEGER PRIMARY KEY, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS flags (key TEXT PRIMARY KEY, since_utc REAL NOT NULL);
CREATE TABLE IF NOT EXISTS facts (key TEXT PRIMARY KEY, text TEXT NOT NULL, set_utc REAL NOT NULL);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL, set_utc REAL NOT NULL);
"""

_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))
"""The tables of ``_SCHEMA``: a database with others is someone else's."""

_SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (https://sqlite.org/fileformat.html)."""

ESTOP = "estop"
"""The flag set while the robot's emergency stop is latched."""


@dataclass(frozen=True)
class PendingTimer:
    """A timer that has been set and has not fired.

    Attributes:
        id: Unique id (hex).
        label: What the user called it ("tea timer").
        seconds: Its length as set, s.
        due_utc: When it fires, s since the Unix epoch (UTC wall clock: a restart keeps it).
        set_utc: When it was set, s since the Unix epoch.
    """

    id: str
    label: str
    seconds: float
    due_utc: float
    set_utc: float


@dataclass(frozen=True)
class StateSnapshot:
    """Everything in the store, for ``bolt-agent state show``.

    Attributes:
        path: The file.
        timers: Pending timers, soonest first.
        turns: User turns in the kept conversation tail.
        messages: Messages in the kept tail.
        estop_since_utc: When the e-stop was latched (s since the epoch), or None when clear.
        facts: What the user asked the robot to remember.
    """

    path: Path
    timers: list[PendingTimer]
    turns: int
    messages: int
    estop_since_utc: float | None
    facts: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    """What the user asked the robot to remember, ``(key, text)``, oldest first."""


def not_a_state_file(path: Path) -> str | None:
    """Why ``path`` is not a state file that may be deleted (``bolt-agent state clear``), or None.

    A state file is an SQLite database with no tables but the store's. A damaged one (the SQLite
    header, pages that fail :meth:`StateStore.open`'s read-only check) still is one, so clearing
    it recovers; so is an empty file (SQLite reads it as an empty database). Reads only.

    Args:
        path: The file, e.g. ``/var/lib/bolt-agent/state.sqlite3``.

    Returns:
        None when ``path`` is a state file or does not exist; else what it is instead, as a phrase
        that follows the path ("is a folder, not a state file"). Never raises: a file that
        cannot be read gives "cannot be read (<reason>)".
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if stat.S_ISDIR(mode):
        return "is a folder, not a state file"
    if not stat.S_ISREG(mode):  # a device or a pipe: even reading its header could block or consume it
        return "is not a regular file, not a state file"
    try:
        with path.open("rb") as f:
            header = f.read(len(_SQLITE_HEADER))
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if header not in (b"", _SQLITE_HEADER):
        return "is not a state file (not an SQLite database)"
    try:
        conn = StateStore(path)._connect_read_only()
    except sqlite3.DatabaseError:
        return None  # our format but damaged: what clearing is for
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError:
        return None
    finally:
        conn.close()
    others = sorted(tables - _TABLES)
    if others:
        return f"is an SQLite database with other tables ({', '.join(others)}), not a state file"
    return None


class StateStore:
    """The SQLite state file; open it with :meth:`open`, which never raises.

    Args:
        path: The database file (its folder is created).
        on_problem: Receives one line for each fault (corrupt file moved aside, unwritable,
            locked); also logged (a warning without a handler, info with one).
    """

    def __init__(self, path: Path, on_problem: Callable[[str], None] | None = None) -> None:
        self.path = path
        self._told = on_problem is not None  # someone says it to people: logged at info only
        self.on_problem = on_problem if on_problem is not None else (lambda _m: None)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    @property
    def enabled(self) -> bool:
        """Whether writes reach the file (False after a fault turned persistence off)."""
        return self._conn is not None

    @classmethod
    def open(
        cls, path: Path, on_problem: Callable[[str], None] | None = None, read_only: bool = False
    ) -> StateStore:
        """Open (or create) the store at ``path``; a fault is reported and leaves it disabled or fresh.

        Args:
            path: The database file, e.g. ``/var/lib/bolt-agent/state.sqlite3``.
            on_problem: Receives one line per fault (see the class).
            read_only: Only read (``bolt-agent state show``): nothing is created, and a corrupt
                file is reported and left where it is (``run`` moves it aside).

        Returns:
            The store; :attr:`enabled` is False when the file cannot be used at all.
        """
        store = cls(path, on_problem)
        if read_only:
            try:
                store._conn = store._connect_read_only()
            except sqlite3.DatabaseError as e:  # OperationalError too: missing, locked, unreadable
                store._problem(f"cannot read {path} ({e}); it is left as it is")
            return store
        try:
            store._conn = store._connect()
        except sqlite3.OperationalError as e:  # locked, read-only or no such folder: keep the file
            store._problem(f"cannot use {path} ({e}); running without saved state")
        except sqlite3.DatabaseError as e:  # not a database, or a damaged one: keep it aside, start fresh
            aside = store._move_aside()
            store._problem(f"{path} is corrupt ({e}); moved it to {aside.name}, starting with no saved state")
            try:
                store._conn = store._connect()
            except sqlite3.DatabaseError as e2:
                store._problem(f"cannot use {path} ({e2}); running without saved state")
        except OSError as e:  # the folder cannot be created
            store._problem(f"cannot use {path} ({e.strerror or e}); running without saved state")
        return store

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: each write is the explicit transaction of _write; any thread, under the lock.
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {check}")
            # A write at once: finds a read-only folder or another process's lock now, not later.
            conn.executescript(f"BEGIN IMMEDIATE;{_SCHEMA}COMMIT;")
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            f"{self.path.resolve().as_uri()}?mode=ro",
            uri=True,
            timeout=BUSY_TIMEOUT_S,
            check_same_thread=False,
        )
        try:
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {check}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _move_aside(self) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        self.path.replace(aside)
        for suffix in ("-wal", "-shm"):  # a stale log must not be replayed into the fresh file
            self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
        return aside

    def _problem(self, message: str) -> None:
        # Once on the screen: a handler that prints it (run's "problem: state: ...") makes a
        # warning line a second copy of the same words.
        log.log(logging.INFO if self._told else logging.WARNING, "state: %s", message)
        self.on_problem(message)

    def _write(self, what: str, statements: list[tuple[str, tuple[Any, ...]]]) -> bool:
        """Run ``statements`` as one transaction; a failure turns persistence off (reported once)."""
        with self._lock:
            if self._conn is None:
                return False
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                for sql, args in statements:
                    self._conn.execute(sql, args)
                self._conn.execute("COMMIT")
                return True
            except sqlite3.Error as e:
                err = e
                conn, self._conn = self._conn, None
                try:
                    conn.close()  # an open transaction is rolled back: the file keeps its last state
                except sqlite3.Error:
                    pass
        self._problem(f"cannot save {what} to {self.path} ({err}); saving no more state until restarted")
        return False

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            if self._conn is None:
                return []
            try:
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.Error as e:
                log.warning("state: cannot read %s (%s)", self.path, e)
                return []

    # --- timers ---------------------------------------------------------------------------
    def add_timer(self, timer: PendingTimer) -> bool:
        """Record a timer that was just set; False when it could not be saved."""
        sql = "INSERT OR REPLACE INTO timers VALUES (?, ?, ?, ?, ?)"
        row = (timer.id, timer.label, timer.seconds, timer.due_utc, timer.set_utc)
        return self._write("a timer", [(sql, row)])

    def remove_timer(self, timer_id: str) -> bool:
        """Forget a timer (it fired, or the user cancelled it)."""
        return self._write("a finished timer", [("DELETE FROM timers WHERE id = ?", (timer_id,))])

    def timers(self) -> list[PendingTimer]:
        """Pending timers, soonest first."""
        rows = self._read("SELECT id, label, seconds, due_utc, set_utc FROM timers ORDER BY due_utc")
        return [PendingTimer(*row) for row in rows]

    # --- conversation tail ---------------------------------------------------------------
    def save_history(self, messages: list[dict[str, Any]]) -> bool:
        """Replace the kept conversation with ``messages`` (JSON-serializable dicts, oldest first)."""
        sql = "INSERT INTO history (seq, message) VALUES (?, ?)"
        rows = [(sql, (i, json.dumps(m, default=str))) for i, m in enumerate(messages)]
        return self._write("the conversation", [("DELETE FROM history", ()), *rows])

    def history(self) -> list[dict[str, Any]]:
        """The kept conversation, oldest first (rows that are not JSON objects are skipped)."""
        out = []
        for (text,) in self._read("SELECT message FROM history ORDER BY seq"):
            try:
                msg = json.loads(text)
            except json.JSONDecodeError:
                continue
            if isinstance(msg, dict) and "role" in msg:
                out.append(msg)
        return out

    # --- facts the user asked the robot to remember ------------------------------------------
    def set_fact(self, key: str, text: str) -> bool:
        """Remember ``text`` under ``key`` (a fact of that key is replaced)."""
        sql = "INSERT OR REPLACE INTO facts VALUES (?, ?, ?)"
        return self._write("a fact", [(sql, (key, text, time.time()))])

    def forget_facts(self, keys: list[str]) -> bool:
        """Forget the facts of ``keys`` (one transaction)."""
        return self._write("a forgotten fact", [("DELETE FROM facts WHERE key = ?", (k,)) for k in keys])

    def facts(self) -> list[tuple[str, str]]:
        """The remembered facts, ``(key, text)``, oldest first (none in a file from before facts)."""
        return [(k, t) for k, t in self._read("SELECT key, text FROM facts ORDER BY set_utc, rowid")]

    # --- settings changed by voice ---------------------------------------------------------------
    def set_setting(self, key: str, value: str) -> bool:
        """Keep ``value`` under ``key`` (the speaking volume: ``volume``, "60")."""
        sql = "INSERT OR REPLACE INTO settings VALUES (?, ?, ?)"
        return self._write("a setting", [(sql, (key, value, time.time()))])

    def setting(self, key: str) -> str | None:
        """The value kept under ``key``, or None (none kept, or a file from before settings)."""
        rows = self._read("SELECT value FROM settings WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    # --- e-stop ------------------------------------------------------------------------------
    def set_estop(self, latched: bool) -> bool:
        """Record that the e-stop is latched (True) or cleared (False)."""
        if latched:
            sql = "INSERT OR IGNORE INTO flags VALUES (?, ?)"
            return self._write("the e-stop", [(sql, (ESTOP, time.time()))])
        return self._write("the e-stop", [("DELETE FROM flags WHERE key = ?", (ESTOP,))])

    def estop_since(self) -> float | None:
        """When the e-stop was latched, s since the epoch; None when it is clear."""
        rows = self._read("SELECT since_utc FROM flags WHERE key = ?", (ESTOP,))
        return rows[0][0] if rows else None

    def snapshot(self) -> StateSnapshot:
        """Everything in the store (for people: ``bolt-agent state show``)."""
        history = self.history()
        turns = sum(m.get("role") == "user" for m in history)
        return StateSnapshot(self.path, self.timers(), turns, len(history), self.estop_since(), self.facts())

    def close(self) -> None:
        """Close the file (later writes are dropped silently)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
