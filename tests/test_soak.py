"""A short soak: 50 turns of ``bolt-agent run`` through the real harness (:mod:`tools.bench.soak`).

Real models, a real PulseAudio server with null sinks (skipped with the reason where it is
not installed), commands synthesized with the product's piper voice, typed turns through the
live console, a barge-in, a timer and a camera playing an image folder. The agent must never
crash, answer every command, keep its threads and open files flat, and its memory must stop
growing after warm-up (see :data:`GROWTH_PCT` for the bound and where it comes from).

It runs in the default suite (issue 22): about 9 minutes on the 2-core machine, nearly all of
it real time (clips played into the mic, replies played at the speaker's rate, 1 s quiet floors:
about 10 s a turn).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from agent.config import DEFAULT_CONFIG, load_config
from agent.models import resolve_model
from agent.state.keep import state_path
from agent.state.store import StateStore
from agent.state.timers import TimerBook
from tools.bench.procstat import read_sample
from tools.bench.soak import Soak, SoakOptions, SoakRun, run_soak, soak_config
from tools.bench.soak_child import Child, read_pending_timers
from tools.bench.soak_report import build_report, format_summary, summarize, write_report
from tools.bench.soak_set import Command, SoakSet, build_soak_set, camera_frames, load_commands
from tools.pulse import missing

pytestmark = pytest.mark.audio

TURNS = 50
WARMUP = 20
GROWTH_PCT = 15.0
"""Largest PSS growth from turn 20 to turn 50 (medians of five turns), %.

Turns 20-50 are still warm-up: the chat model's KV cache is touched page by page as the history
fills the context (72 MiB at n_ctx 4096), and the malloc arenas reach their working size. Measured
with this harness on the 2-core development machine (2026-12-02, ``bolt-agent soak --turns
1000``): with the heap trimmer (:mod:`agent.pipeline.heap`) PSS went 652 -> 712 MiB from turn 20
to 50 (+9 %), then 712 -> 719 MiB from turn 50 to 96; without it 825 -> 897 MiB from 20 to 50 and
+1.5 MiB a turn after. 15 % = that warm-up plus the noise of single turns (+-20 MiB): it catches
a leak of a few MiB a turn; the issue's target (<= 3 % after the first 50 of 1,000 turns) is the
long ``bolt-agent soak``'s.
"""
DRIFT = 2
"""Threads and open descriptors may differ by this many between warm-up and the end
(a console request or a background skill can hold one for a moment)."""


@pytest.fixture(scope="module")
def soak_report(tmp_path_factory):
    why = missing()
    if why:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("soak")
    cfg = load_config(None)
    clips = build_soak_set(resolve_model(cfg.tts.voice, "voice"))
    config = soak_config(DEFAULT_CONFIG, out, camera_frames(out / "camera"))
    run = run_soak(config, clips, out, SoakOptions(turns=TURNS, sample_s=2.0))
    report = build_report(run, WARMUP, {"test": "test_soak"})
    write_report(report, out)
    print(json.dumps(report["summary"], indent=1))  # the figures, with -s
    return report, out


@pytest.mark.timeout(2400)
def test_soak_50_turns_no_crash_every_command_answered(soak_report):
    report, out = soak_report
    s = report["summary"]
    assert s["turns"] == TURNS, s
    assert s["crashes"] == 0 and s["restarts"] == 0, report["crashes"]
    assert s["final_exit_code"] == 0, s  # SIGTERM at the end is a clean stop
    assert s["unanswered"] == [], [r for r in report["turns"] if not r["answered"]]
    assert s["kinds"]["typed"] > 0 and s["kinds"]["barge"] > 0 and s["kinds"]["timer"] > 0, s["kinds"]
    assert (out / "report.json").is_file() and (out / "report.png").stat().st_size > 10_000


def test_soak_threads_and_fds_flat(soak_report):
    report, _ = soak_report
    rows = [r for r in report["turns"] if "threads" in r]
    warm = next(r for r in rows if r["turn"] >= WARMUP)
    last = rows[-1]
    for key in ("threads", "fds"):
        assert abs(last[key] - warm[key]) <= DRIFT, (key, [r[key] for r in rows])
    assert len(report["samples"]) > TURNS  # periodic samples between the per-turn ones


def test_soak_memory_flat_after_warmup(soak_report):
    report, _ = soak_report
    m = report["summary"]["memory"]
    assert m["warmup_turns"] == WARMUP
    assert m["pss_growth_pct"] <= GROWTH_PCT, m


KILL_PLAN = ("speak", "timer", "typed", "speak")
"""The restart test's turns: one before the kill, the timer turn it kills, two after the restart."""


@pytest.mark.timeout(900)
def test_a_child_killed_with_a_timer_pending_is_restarted_and_announces_the_timer(tmp_path):
    """kill -9 while a timer is pending (issue 22): the soak records the crash, restarts the
    agent, the restarted agent announces the timer from its state store, the turns go on."""
    why = missing()
    if why:
        pytest.skip(why)
    clips = build_soak_set(resolve_model(load_config(None).tts.voice, "voice"))
    config = soak_config(DEFAULT_CONFIG, tmp_path, camera_frames(tmp_path / "camera"))
    killed: list[int] = []

    def kill_once_the_timer_is_saved(turn: int, kind: str, child: Child) -> None:
        if kind != "timer" or killed:
            return
        deadline = time.monotonic() + 120
        while not (pending := child.pending_timers()):  # the skill saves it on its own thread
            assert time.monotonic() < deadline, "the timer was never saved to the state store"
            time.sleep(0.05)
        child.proc.kill()
        child.proc.wait()
        killed.append(turn)
        # Stay down until the timer is due: a restart quicker than the 2 s timer (a warm cache)
        # would find it still running and announce it on time instead ("Time is up").
        time.sleep(max(0.0, max(t.due_utc for t in pending) - time.time()) + 0.2)

    opts = SoakOptions(turns=len(KILL_PLAN), plan=KILL_PLAN, after_input=kill_once_the_timer_is_saved)
    run = run_soak(config, clips, tmp_path, opts)
    s = build_report(run, 1, {"test": "restart"})["summary"]

    assert killed == [1]
    assert s["crashes"] == 1 and s["restarts"] == 1, run.crashes
    crash = run.crashes[0]
    assert crash["turn"] == 1 and crash["exit_code"] == -9, crash
    assert crash["pending_timers"] == 1, crash
    (restored,) = crash["restored_timers"]
    assert restored["overdue"] and restored["played"], restored  # due while the agent was down
    assert "While I was restarting" in restored["result"], restored
    assert s["restored_timers"] == {"pending": 1, "announced": 1}, s
    assert [r["turn"] for r in run.rows] == [0, 1, 2, 3]
    assert run.rows[1]["crashed"] and not run.rows[1]["answered"], run.rows[1]
    after = run.rows[2:]
    assert [r["kind"] for r in after] == ["typed", "speak"]
    assert all(r["answered"] and not r.get("crashed") for r in after), after
    assert s["unanswered"] == [1], s
    assert s["final_exit_code"] == 0, s  # the restarted agent stops cleanly at the end
    assert "crashes 1, restarts 1" in format_summary(s)
    # Announced once: the restarted agent removed it from the store (the soak's own state folder).
    store = StateStore.open(state_path(None, {"XDG_STATE_HOME": str(tmp_path / "state")}))
    assert store.enabled and store.timers() == []
    store.close()


def test_read_sample_counts_a_real_process_and_none_once_it_is_gone(tmp_path):
    # A child that holds 64 MiB of touched memory and an extra open file.
    code = "import time; b = bytearray(64 << 20); f = open(%r, 'w'); print('up', flush=True); time.sleep(60)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code % str(tmp_path / "held")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "up"
        s = read_sample(proc.pid, time.monotonic(), turn=3)
        assert s is not None and s.turn == 3
        assert s.rss_mib >= 64 and s.pss_mib >= 64 and s.anon_mib >= 64
        assert s.threads == 1 and s.fds >= 4  # stdin, stdout, stderr and the file
    finally:
        proc.kill()
        proc.wait()
    assert read_sample(proc.pid, time.monotonic()) is None


def test_summary_growth_and_latency_windows():
    rows = [
        {
            "turn": i,
            "kind": "speak",
            "answered": True,
            "latency_ms": 1000.0 + i,
            "pss_mib": 500.0 + (i >= 20) * 10,
            "rss_mib": 700.0,
            "threads": 30,
            "fds": 31,
        }
        for i in range(50)
    ]
    rows[7]["answered"] = False
    rows[30].update(tidy_dropped=9, tidy_tokens=700, tidy_stopped=1)  # a compaction between turns
    rows[31].update(tidy_dropped=0, tidy_tokens=40, tidy_stopped=0)
    s = summarize(SoakRun(rows=rows), warmup=20)
    assert s["context"] == {
        "compactions": 1,
        "turns_dropped": 9,
        "tokens_read_ahead": 740,
        "stopped_early": 1,
    }
    assert "between turns: 1 compactions (9 old turns), 740 prompt tokens read ahead" in format_summary(s)
    assert s["unanswered"] == [7] and s["answered"] == 49
    m = s["memory"]
    assert m["pss_warm_mib"] == 500.0 and m["pss_end_mib"] == 510.0 and m["pss_growth_pct"] == 2.0
    assert m["pss_slope_mib_per_100_turns"] == 0.0  # flat after warm-up
    lat = s["latency_ms"]
    assert lat["window_turns"] == 10 and lat["first_p50"] < lat["last_p50"]
    assert s["threads"] == {"first": 30, "last": 30, "max": 30}


def test_summary_says_where_a_slower_end_went():
    """``drift`` compares stage medians and CPU per turn over the first and last windows: here
    the end is 100 ms slower at the first token with the same endpoint and CPU per turn."""
    rows = [
        {
            "turn": i,
            "kind": "speak",
            "answered": True,
            "latency_ms": 1500.0 + (i >= 40) * 100,
            "endpoint_ms": 650.0,
            "asr_done_ms": 700.0,
            "first_token_ms": 1300.0 + (i >= 40) * 100,
            "llm_ttft_ms": 500.0 + (i >= 40) * 100,
            "tokens_per_s": 40.0,
            "cpu_s": 3.0 * i,
            "maps": 900 + i // 10,
            "threads": 30,
            "fds": 31,
        }
        for i in range(50)
    ]
    rows[25]["cpu_s"] = 1.0  # a restarted child counts from 0 again: no negative turn
    d = summarize(SoakRun(rows=rows), warmup=20)["drift"]
    assert d["window_turns"] == 10
    assert d["endpoint_ms"] == {"first": 650.0, "last": 650.0}
    assert d["first_token_ms"] == {"first": 1300.0, "last": 1400.0}
    assert d["llm_ttft_ms"] == {"first": 500.0, "last": 600.0}
    assert d["cpu_s_per_turn"] == {"first": 3.0, "last": 3.0}
    s = summarize(SoakRun(rows=rows), warmup=20)
    assert s["maps"] == {"first": 900, "last": 904, "max": 904}
    assert "first_token_ms 1300.0 -> 1400.0" in format_summary(s)


def test_a_process_sample_reads_cpu_time_and_mappings():
    import os

    from tools.bench.procstat import read_sample

    sum(i * i for i in range(300_000))  # some CPU time of our own
    sample = read_sample(os.getpid(), 0.0)
    assert sample is not None
    assert 0.0 < sample.cpu_s <= sum(os.times()[:2]) + 0.05
    assert sample.maps > 10  # the interpreter, its libraries, the heap, the stack


def test_pending_timers_are_read_from_a_live_store_without_touching_it(tmp_path):
    path = tmp_path / "state.sqlite3"
    assert read_pending_timers(path) == []  # no file yet
    store = StateStore.open(path)
    book = TimerBook(store, clock=lambda: 1000.0)
    later, sooner = book.start("tea timer", 300), book.start("timer", 5)
    assert read_pending_timers(path) == [sooner, later]  # soonest first, while the store is open
    book.fired(sooner)
    assert read_pending_timers(path) == [later]
    store.close()
    assert read_pending_timers(path) == [later]  # as a killed agent leaves it
    path.write_bytes(b"not a database")
    assert read_pending_timers(path) == []


def test_summary_counts_the_timers_a_crash_left_and_the_restart_announced():
    crashes = [
        {
            "turn": 7,
            "exit_code": -9,
            "pending_timers": 2,
            "restored_timers": [{"played": True}, {"played": False}],
        },
        {"turn": 30, "exit_code": 1, "pending_timers": 0},  # past max_restarts: nothing restored
    ]
    rows = [{"turn": i, "kind": "speak", "answered": i != 7, "latency_ms": 900.0} for i in range(10)]
    s = summarize(SoakRun(rows=rows, crashes=crashes, restarts=2), warmup=4)
    assert s["crashes"] == 2 and s["restored_timers"] == {"pending": 2, "announced": 1}
    assert "timers left pending by crashes 2, announced after the restart 1" in format_summary(s)


def test_a_plan_with_an_unknown_kind_is_refused(tmp_path):
    clips = SoakSet(
        (), Command(tmp_path / "s.wav", "s"), Command(tmp_path / "t.wav", "t"), tmp_path / "n.wav"
    )
    with pytest.raises(ValueError, match="sing"):
        Soak(DEFAULT_CONFIG, clips, tmp_path, SoakOptions(plan=("speak", "sing")))


def test_a_fixtures_commands_folder_is_rotated_without_its_stop_phrase(fixtures_dir):
    commands = load_commands(fixtures_dir / "commands")
    names = {c.wav.name for c in commands}
    assert "stop.wav" not in names and {"wave_right.wav", "timer.wav"} <= names
    assert all(c.wav.is_file() and c.text for c in commands)
