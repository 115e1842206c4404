"""The state store: timers, the conversation tail and a latched e-stop survive a restart.

The store, the timer book and the real ``set_timer`` skill (through the real skill registry
and background calls) on real SQLite files in tmp folders; faults are real too (garbage
bytes, a folder nobody may write, a lock held by another process); ``bolt-agent state``.
Real ``bolt-agent run`` processes killed and restarted are in ``test_state_restart.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from waiting import wait_until

from agent.config import StateConfig
from agent.conversation.background import BackgroundCalls
from agent.skills import SkillContext, ToolOutcome, load_registry
from agent.state import PendingTimer, StateStore, TimerBook
from agent.state.keep import AgentState, history_tail, state_path
from agent.state.timers import missed_message, rearm, spoken_duration, spoken_length, timer_label
from hardware.config import RobotConfig
from hardware.factory import build_robot

ROOT = Path(__file__).resolve().parent.parent


def open_store(path: Path) -> tuple[StateStore, list[str]]:
    problems: list[str] = []
    return StateStore.open(path, problems.append), problems


@pytest.fixture
def registry():
    return load_registry([], True, ["set_timer"], 10.0)


@pytest.fixture
def robot():
    robot, _ = build_robot(RobotConfig())
    yield robot
    robot.close()


def call_timer(registry, ctx: SkillContext, background: BackgroundCalls, seconds: float, label: str):
    out = registry.call(
        "set_timer", {"seconds": seconds, "label": label}, ctx, background.callback("set_timer", "c0")
    )
    assert out.ok and out.result.endswith(" timer."), out  # "10-minute pasta timer."


# --- the store -------------------------------------------------------------------------------------
def test_store_keeps_timers_history_and_estop_across_reopen(tmp_path):
    path = tmp_path / "deep" / "state.sqlite3"
    store, problems = open_store(path)
    assert store.enabled and problems == []
    timer = PendingTimer("t1", "tea timer", 300.0, 2_000_000_300.0, 2_000_000_000.0)
    assert store.add_timer(timer)
    msgs = [
        {"role": "user", "content": "My name is Ada."},
        {
            "role": "assistant",
            "content": "Hi Ada!",
            "tool_calls": [{"function": {"name": "nod", "arguments": {}}}],
        },
        {"role": "tool", "name": "nod", "tool_call_id": "t0r0c0", "content": '"ok"'},
    ]
    assert store.save_history(msgs)
    assert store.set_estop(True)
    store.close()

    again, problems = open_store(path)
    assert problems == []
    assert again.timers() == [timer]
    assert again.history() == msgs
    assert again.estop_since() is not None
    assert again.set_estop(False) and again.estop_since() is None
    assert again.remove_timer("t1") and again.timers() == []
    snap = again.snapshot()
    assert (snap.turns, snap.messages, snap.estop_since_utc, snap.timers) == (1, 3, None, [])
    again.close()
    # WAL is a property of the file: a second reader sees it (and reads while the agent writes).
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_save_replaces_the_tail_in_one_transaction(tmp_path):
    store, _ = open_store(tmp_path / "s.sqlite3")
    store.save_history([{"role": "user", "content": f"turn {i}"} for i in range(5)])
    # Another process holds the write lock: the save fails whole, the old tail stays intact.
    holder = sqlite3.connect(tmp_path / "s.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    assert not store.save_history([{"role": "user", "content": "new"}])
    holder.execute("ROLLBACK")
    holder.close()
    fresh, _ = open_store(tmp_path / "s.sqlite3")
    assert [m["content"] for m in fresh.history()] == [f"turn {i}" for i in range(5)]


def test_history_tail_keeps_the_last_user_turns_whole():
    hist = []
    for i in range(4):
        hist += [
            {"role": "user", "content": f"u{i}"},
            {"role": "assistant", "content": f"a{i}"},
            {"role": "tool", "content": f"r{i}"},
        ]
    assert [m["content"] for m in history_tail(hist, 2)] == ["u2", "a2", "r2", "u3", "a3", "r3"]
    assert history_tail(hist, 10) == hist
    assert history_tail(hist, 0) == []
    assert history_tail([], 3) == []


def test_state_path_prefers_config_then_systemd_then_xdg(tmp_path):
    home_state = Path.home() / ".local" / "state" / "bolt-agent" / "state.sqlite3"
    assert state_path(tmp_path / "x.db", {"STATE_DIRECTORY": "/var/lib/bolt-agent"}) == tmp_path / "x.db"
    assert state_path(None, {"STATE_DIRECTORY": "/var/lib/bolt-agent:/other"}) == Path(
        "/var/lib/bolt-agent/state.sqlite3"
    )
    assert state_path(None, {"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "bolt-agent" / "state.sqlite3"
    assert state_path(None, {}) == home_state
    # The test session itself never points at the user's home (tests/conftest.py).
    assert state_path(None, os.environ) != home_state


# --- faults ------------------------------------------------------------------------------------------
def test_a_corrupt_file_is_moved_aside_and_a_fresh_store_starts(tmp_path):
    path = tmp_path / "state.sqlite3"
    garbage = os.urandom(4096)
    path.write_bytes(garbage)
    store, problems = open_store(path)
    assert store.enabled
    assert len(problems) == 1 and str(path) in problems[0] and "corrupt" in problems[0], problems
    aside = list(tmp_path.glob("state.sqlite3.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == garbage and aside[0].name in problems[0]
    assert store.timers() == [] and store.add_timer(PendingTimer("a", "timer", 1.0, 2.0, 1.0))
    assert [t.id for t in store.timers()] == ["a"]


@contextlib.contextmanager
def unwritable_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder no file can be created in: chmod for a user; root ignores modes, so chattr +i then."""
    folder = tmp_path / "ro"
    folder.mkdir()
    root = os.geteuid() == 0
    if root:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode:
            pytest.skip("running as root without chattr +i on this filesystem: no folder is unwritable")
    else:
        folder.chmod(0o500)
    try:
        try:
            (folder / "probe").touch()
        except OSError:
            pass
        else:
            pytest.skip(f"{folder} is still writable here")
        yield folder
    finally:
        if root:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        else:
            folder.chmod(0o700)


@pytest.fixture
def unwritable_dir(tmp_path):
    with unwritable_folder(tmp_path) as folder:
        yield folder


def test_an_unwritable_folder_leaves_persistence_off(unwritable_dir):
    path = unwritable_dir / "state.sqlite3"
    store, problems = open_store(path)
    assert not store.enabled
    assert len(problems) == 1 and str(path) in problems[0] and "running without saved state" in problems[0]
    # Everything still answers: nothing is kept, nothing raises.
    assert not store.add_timer(PendingTimer("a", "timer", 1.0, 2.0, 1.0))
    assert store.timers() == [] and store.history() == [] and store.estop_since() is None
    assert len(problems) == 1  # reported once


def test_a_database_locked_by_another_process_leaves_persistence_off(tmp_path):
    path = tmp_path / "state.sqlite3"
    open_store(path)[0].close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        store, problems = open_store(path)
        assert not store.enabled
        assert len(problems) == 1 and "locked" in problems[0] and str(path) in problems[0], problems
        assert list(tmp_path.glob("*.corrupt-*")) == []  # a locked file is not a corrupt one
    finally:
        holder.stdin.close()
        holder.wait(10)


def test_a_failed_write_turns_persistence_off_once_and_keeps_going(tmp_path):
    store, problems = open_store(tmp_path / "state.sqlite3")
    holder = sqlite3.connect(tmp_path / "state.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert not store.set_estop(True)
        assert not store.add_timer(PendingTimer("a", "timer", 1.0, 2.0, 1.0))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(problems) == 1 and "cannot save the e-stop" in problems[0] and "locked" in problems[0]
    assert not store.enabled


# --- timers ------------------------------------------------------------------------------------------
def test_set_timer_records_its_due_time_and_forgets_it_when_it_fires(tmp_path, registry, robot):
    store, _ = open_store(tmp_path / "state.sqlite3")
    ctx = SkillContext(robot=robot, timers=TimerBook(store))
    background = BackgroundCalls(registry)
    t0 = time.time()
    call_timer(registry, ctx, background, 1.5, "tea timer")
    assert wait_until(lambda: store.timers(), 5)
    (timer,) = store.timers()
    assert (timer.label, timer.seconds) == ("tea timer", 1.5)
    assert abs(timer.due_utc - (t0 + 1.5)) < 0.5
    done = background.next(timeout=10)
    assert done is not None and done.ok and done.result.startswith("Time is up"), done
    assert time.time() >= timer.due_utc
    assert store.timers() == []


def test_shutdown_keeps_a_pending_timer(tmp_path, registry, robot):
    store, _ = open_store(tmp_path / "state.sqlite3")
    ctx = SkillContext(robot=robot, timers=TimerBook(store))
    background = BackgroundCalls(registry)
    call_timer(registry, ctx, background, 600, "pasta timer")
    assert wait_until(lambda: store.timers(), 5)
    ctx.shutdown.set()
    done = background.next(timeout=10)
    assert done is not None and "cancel" not in done.result and "still set" in done.result, done
    assert [t.label for t in store.timers()] == ["pasta timer"]


def test_with_persistence_off_a_shutdown_says_the_timer_is_cancelled(unwritable_dir, registry, robot):
    store, _ = open_store(unwritable_dir / "state.sqlite3")
    assert not store.enabled
    ctx = SkillContext(robot=robot, timers=TimerBook(store))
    background = BackgroundCalls(registry)
    call_timer(registry, ctx, background, 600, "timer")
    ctx.shutdown.set()
    done = background.next(timeout=10)
    assert done is not None and done.result == "The timer was cancelled because I am shutting down.", done


def test_a_cancelled_timer_is_forgotten_and_reports_nothing(tmp_path, robot):
    registry = load_registry([], True, ["set_timer", "cancel_timer"], 10.0)
    store, _ = open_store(tmp_path / "state.sqlite3")
    ctx = SkillContext(robot=robot, timers=TimerBook(store))
    background = BackgroundCalls(registry)
    call_timer(registry, ctx, background, 600, "pasta timer")
    assert wait_until(lambda: store.timers(), 5)
    t0 = time.monotonic()
    out = registry.call("cancel_timer", {}, ctx)
    assert out.ok and out.result == "I cancelled the pasta timer for 10 minutes.", out
    assert store.timers() == [] and ctx.timers.running() == []
    # the timer's wait ends at once, and its background call reports nothing ("Time is up")
    assert wait_until(lambda: background.running == 0, 2), background.running
    assert time.monotonic() - t0 < 1.0
    assert background.next(timeout=0.5) is None
    again = registry.call("cancel_timer", {}, ctx)
    assert not again.ok and again.raised == "No timer is running.", again


def test_a_timer_cancelled_before_its_wait_began_never_fires():
    book = TimerBook()
    timer = book.start("timer", 0.2)
    assert book.cancel() == [timer]  # the background thread has not reached run() yet
    t0 = time.monotonic()
    assert book.run(timer, threading.Event()) is None
    assert time.monotonic() - t0 < 0.05 and book.running() == []
    # a timer that fired, or one cancelled while it waited, leaves no id behind (weeks of timers)
    fired = book.start("timer", 0.05)
    assert book.run(fired, threading.Event()) == "Time is up: the timer for 0.05 seconds is done."
    waiting = book.start("timer", 5.0)
    threading.Timer(0.1, book.cancel).start()
    assert book.run(waiting, threading.Event()) is None
    assert book._over == set()  # the memory a long run would grow


def test_of_several_timers_the_one_named_or_of_the_length_said_is_cancelled(tmp_path, robot):
    registry = load_registry([], True, ["set_timer", "cancel_timer"], 10.0)
    ctx = SkillContext(robot=robot, timers=TimerBook())  # no store: timers still cancel
    background = BackgroundCalls(registry)
    for seconds, label in ((600, "timer"), (300, "timer"), (120, "tea")):
        call_timer(registry, ctx, background, seconds, label)
    assert wait_until(lambda: len(ctx.timers.running()) == 3, 5)
    which = registry.call("cancel_timer", {"label": "timer"}, ctx)  # two are called "timer": which?
    assert not which.ok and which.raised == (
        "There are 3 timers, the tea timer for 2 minutes and the timer for 5 minutes and the timer for "
        "10 minutes. Which one should I cancel?"
    ), which
    out = registry.call("cancel_timer", {"seconds": 300}, ctx)
    assert out.result == "I cancelled the timer for 5 minutes.", out
    out = registry.call("cancel_timer", {"label": "tea"}, ctx)
    assert out.result == "I cancelled the tea timer for 2 minutes.", out
    out = registry.call("cancel_timer", {"label": "timer"}, ctx)  # the only one left
    assert out.result == "I cancelled the timer for 10 minutes.", out
    assert wait_until(lambda: background.running == 0, 2) and background.next(timeout=0.2) is None


def test_a_timer_due_while_down_is_announced_once(tmp_path, registry):
    path = tmp_path / "state.sqlite3"
    store, _ = open_store(path)
    now = time.time()
    store.add_timer(PendingTimer("t1", "timer", 300.0, now - 5, now - 305))
    store.close()

    def report_into(background: BackgroundCalls):
        def report_as(name: str, call_id: str):
            done = background.callback(name, call_id, always=True)
            return lambda text: done(ToolOutcome(True, text))

        return report_as

    first = BackgroundCalls(registry)
    store, _ = open_store(path)
    assert rearm(TimerBook(store), threading.Event(), report_into(first)) == (1, 0)
    done = first.next(timeout=1)
    assert done is not None and done.tool == "set_timer"
    assert done.result == "While I was restarting, your 5 minute timer finished."
    assert first.next() is None
    store.close()

    second = BackgroundCalls(registry)
    store, _ = open_store(path)  # the next restart
    assert rearm(TimerBook(store), threading.Event(), report_into(second)) == (0, 0)
    assert second.next(timeout=0.5) is None


def test_a_pending_timer_fires_at_its_original_due_time_after_a_restart(tmp_path, registry):
    store, _ = open_store(tmp_path / "state.sqlite3")
    due = time.time() + 2.0
    store.add_timer(PendingTimer("t1", "egg timer", 120.0, due, due - 120.0))
    background = BackgroundCalls(registry)

    def report_as(name: str, call_id: str):
        done = background.callback(name, call_id, always=True)
        return lambda text: done(ToolOutcome(True, text))

    assert rearm(TimerBook(store), threading.Event(), report_as) == (0, 1)
    done = background.next(timeout=15)
    fired = time.time()
    assert done is not None and done.result == "Time is up: the egg timer for 2 minutes is done."
    assert due <= fired < due + 1.5, fired - due
    assert store.timers() == []


def test_spoken_lengths():
    assert [spoken_length(s) for s in (300, 90, 7200, 2.5)] == [
        "5 minute",
        "90 second",
        "2 hour",
        "2.5 second",
    ]
    assert missed_message(PendingTimer("x", "tea timer", 60, 0, 0)) == (
        "While I was restarting, your 1 minute tea timer finished."
    )


# --- e-stop ------------------------------------------------------------------------------------------
def test_the_robot_reports_its_estop_to_the_state(tmp_path, robot):
    store, _ = open_store(tmp_path / "state.sqlite3")
    state = AgentState(store, 6)
    robot.on_estop = state.on_estop
    robot.estop()
    assert store.estop_since() is not None
    with pytest.raises(RuntimeError):
        robot.play("nod")  # refused while latched
    robot.clear_estop()
    assert store.estop_since() is None


def test_state_config_defaults():
    cfg = StateConfig()
    assert cfg.enabled and cfg.path is None and cfg.history_turns == 6


def test_state_command_shows_and_clears_the_file(tmp_path):
    path = tmp_path / "state.sqlite3"
    store, _ = open_store(path)
    store.add_timer(PendingTimer("t1", "tea timer", 300.0, time.time() + 200, time.time() - 100))
    store.set_estop(True)
    store.save_history([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}])
    store.close()
    bolt = [sys.executable, "-m", "agent", "state"]
    out = subprocess.run([*bolt, "show", "--path", str(path)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert (
        "LATCHED" in out.stdout and "tea timer, 300 s: due in" in out.stdout and "1 user turns" in out.stdout
    )
    shown = json.loads(
        subprocess.run(
            [*bolt, "show", "--json", "--path", str(path)], capture_output=True, text=True, cwd=ROOT
        ).stdout
    )
    assert [t["label"] for t in shown["timers"]] == ["tea timer"] and shown["estop_since_utc"] is not None
    assert shown["saved"] is True
    out = subprocess.run([*bolt, "clear", "--path", str(path)], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "removed" in out.stdout
    assert list(tmp_path.glob("state.sqlite3*")) == []


def test_showing_a_damaged_file_leaves_it_alone(tmp_path):
    """`state show` on a damaged file renamed it aside and made a new empty one (a new user's
    trial): a read command changed files. `run` still moves it aside (the tests above)."""
    path = tmp_path / "state.sqlite3"
    path.write_bytes(b"not a database at all" * 100)
    bolt = [sys.executable, "-m", "agent", "state", "show", "--path", str(path)]
    out = subprocess.run(bolt, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 1 and out.stderr.count("cannot read") == 1, out.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["state.sqlite3"]
    assert path.read_bytes() == b"not a database at all" * 100
    missing = subprocess.run([*bolt[:-1], str(tmp_path / "none")], capture_output=True, text=True, cwd=ROOT)
    assert json.loads(
        subprocess.run(
            [*bolt[:-1], str(tmp_path / "none"), "--json"], capture_output=True, text=True, cwd=ROOT
        ).stdout
    ) == {"path": str(tmp_path / "none"), "saved": False}
    assert missing.returncode == 0 and "no saved state" in missing.stdout


def test_clear_deletes_a_state_file_even_damaged_and_nothing_else(tmp_path):
    """`state clear --path /tmp/precious.toml` deleted a config and said "removed"; a folder gave
    an IsADirectoryError traceback; `state show` on a folder said "no saved state" (a new user's
    trial). A damaged state file is still cleared: that is how a user recovers."""
    env = {k: v for k, v in os.environ.items() if k not in ("JOURNAL_STREAM", "INVOCATION_ID")}

    def bolt(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "agent", "state", *args], capture_output=True, text=True, cwd=ROOT, env=env
        )

    config = tmp_path / "precious.toml"
    config.write_text('[robot]\ndriver = "sim"\n')
    out = bolt("clear", "--path", str(config))
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == f"error: {config} is not a state file (not an SQLite database); left as it is\n"
    assert config.read_text() == '[robot]\ndriver = "sim"\n'

    folder = tmp_path / "folder"
    folder.mkdir()
    for command in ("clear", "show"):
        out = bolt(command, "--path", str(folder))
        assert (out.returncode, out.stdout) == (1, "")
        assert out.stderr == f"error: {folder} is a folder, not a state file; left as it is\n"
    assert folder.is_dir()

    other = tmp_path / "places.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE moz_places (url TEXT)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    out = bolt("clear", "--path", str(other))
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == (
        f"error: {other} is an SQLite database with other tables (moz_places), not a state file; "
        f"left as it is\n"
    )
    assert other.read_bytes() == before

    damaged = tmp_path / "state.sqlite3"
    store, _ = open_store(damaged)
    store.add_timer(PendingTimer("t1", "tea timer", 300.0, time.time() + 200, time.time()))
    store.close()
    data = bytearray(damaged.read_bytes())
    data[100:] = b"\xff" * (len(data) - 100)  # the SQLite header stays, every page is garbage
    damaged.write_bytes(bytes(data))
    assert bolt("show", "--path", str(damaged)).returncode == 1  # `show` calls it damaged
    out = bolt("clear", "--path", str(damaged))
    assert (out.returncode, out.stdout, out.stderr) == (0, f"{damaged}: removed\n", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "places.sqlite", "precious.toml"]


def test_spoken_durations_and_timer_labels():
    assert [spoken_duration(s) for s in (300, 60, 7200, 1, 2.5, 90)] == [
        "5 minutes",
        "1 minute",
        "2 hours",
        "1 second",
        "2.5 seconds",
        "90 seconds",
    ]
    # The 135M model labels a timer with the user's command ("the Set a timer for 5 seconds").
    labels = [
        "Set a timer",
        "Cancel the timer",
        "egg timer",
        "tea",
        "",
        "Set a timer for 5 seconds",
        "Set a timer.",
        "ten-minutes",  # a length is not a name ("the ten-minutes timer for 10 minutes")
        "Cancelled",
    ]
    assert [timer_label(x) for x in labels] == [
        "timer",
        "timer",
        "egg timer",
        "tea timer",
        "timer",
        "timer",
        "timer",
        "timer",
        "timer",
    ]
