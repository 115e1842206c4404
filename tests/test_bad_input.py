"""Bad input at every door, and a full disk, through the real components.

Each door gets the faults a user, a script or a broken client can produce, and each must end
in one clear message (an event and a log line naming what was wrong) while the agent keeps
answering:

* the live web console (the real uvicorn server of ``run --console`` on the real pipeline,
  asked with a real HTTP client and raw sockets): malformed bodies, wrong types, invalid
  UTF-8, oversized and slow bodies, unknown paths and methods;
* typed lines (``bolt-agent chat`` in a subprocess, bytes on its stdin): invalid UTF-8,
  control characters and NUL bytes, an empty line, a 1 MB line;
* user skills (a real skill file in a skills folder, loaded as users add them): one that
  raises, hangs (foreground and background), returns 1 MB or something JSON cannot hold;
* config files with wrong types, unknown keys and sections (``bolt-agent run --config``);
* a full disk (writes to ``/dev/full`` through a symlink fail with ENOSPC) under the reply
  WAVs and under ``--json`` output.

The model is the packaged SmolLM2-135M; a skill is made the only tool of a turn with
``[skills] enabled`` and named by its keyword, so the model calls it.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
import wave
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from waiting import wait_until

from agent.audio_io.fake import FakeBackend
from agent.config import ConsoleConfig, load_config
from agent.console import Console
from agent.console.app import BODY_TIMEOUT_S, MAX_BODY
from agent.console.controls import MAX_TEXT
from agent.events import Error, Notice, Reply, Timing, Transcript
from agent.pipeline import Bus, build_core
from agent.pipeline.pipeline import live_pipeline
from agent.pipeline.sources import MAX_TYPED
from agent.skills.registry import MAX_RESULT_CHARS, STUCK_MAX
from tools.bench.latency import EventLog

ROOT = Path(__file__).resolve().parent.parent
TURN_S = 120.0
CLI_S = 600.0


def cli(*args: str, stdin: bytes = b"", cwd: Path | None = None, timeout: float = CLI_S):
    """``bolt-agent ARGS`` in a subprocess: (exit status, JSON events of stdout, stderr text)."""
    r = subprocess.run(
        [sys.executable, "-m", "agent", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        cwd=cwd or ROOT,
    )
    events = []
    for line in r.stdout.decode("utf-8", "replace").splitlines():
        if line.startswith("{"):
            events.append(json.loads(line))
    return r.returncode, events, r.stderr.decode("utf-8", "replace")


def of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["event"] == kind]


# --- 1. the live console ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live():
    """The agent of ``bolt-agent run --console`` on fake sound devices, its console on a free port."""
    cfg = load_config()
    log = EventLog()
    console = Console(ConsoleConfig(queue_events=64))
    server = console.serve("127.0.0.1", 0)
    bus = Bus(console.tee(log))
    core = build_core(cfg, bus.publish)
    core.warmup()
    pipeline = live_pipeline(core, bus, FakeBackend())
    pipeline.start()
    console.attach(core, bus, pipeline)
    yield SimpleNamespace(
        console=console, server=server, url=server.url, log=log, core=core, pipeline=pipeline
    )
    console.close()
    pipeline.close()
    core.close()


def raw_request(port: int, head: str, body: bytes = b"", close_after: float | None = None) -> bytes:
    """Send ``head`` + ``body`` on a fresh socket and read the answer (b"" if the server said nothing)."""
    with socket.create_connection(("127.0.0.1", port), timeout=BODY_TIMEOUT_S + 20) as s:
        s.sendall(head.encode() + body)
        if close_after is not None:
            time.sleep(close_after)
            return b""
        out = b""
        while chunk := s.recv(65536):
            out += chunk
            if b"\r\n\r\n" in out and out.rstrip().endswith(b"}"):
                break
        return out


def post(live, path: str, body: bytes, method: str = "POST", ctype: str = "application/json"):
    """(status, JSON answer) of one request, as a client that honours 429 Retry-After."""
    import http.client

    port = live.server.port
    deadline = time.monotonic() + 30
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        conn.request(method, path, body=body, headers={"Content-Type": ctype})
        r = conn.getresponse()
        status, data = r.status, r.read()
        conn.close()
        if status != 429 or time.monotonic() > deadline:
            return status, json.loads(data) if data else None
        time.sleep(float(r.headers.get("Retry-After", "1")))


BAD_REQUESTS = [
    # (path, method, body, status, words of the error)
    ("/api/say", "POST", b"hello robot", 400, "not JSON"),
    ("/api/say", "POST", b"[1, 2, 3]", 400, "JSON object, not list"),
    ("/api/say", "POST", b"null", 400, "JSON object, not NoneType"),
    ("/api/say", "POST", b'{"text": 42}', 400, "got int"),
    ("/api/say", "POST", b'{"text": null}', 400, "got NoneType"),
    ("/api/say", "POST", b'{"text": {"a": [1, {"b": null}]}}', 400, "got dict"),
    ("/api/say", "POST", b'{"words": "hello"}', 400, "needs a non-empty 'text'"),
    ("/api/say", "POST", b'{"text": "   "}', 400, "got an empty string"),
    ("/api/say", "POST", b'{"text": "\x00"}', 400, "Invalid control character"),  # raw: not JSON
    ("/api/say", "POST", b'{"text": "\\u0000\\u0001\\u0002\\u001b"}', 400, "nothing printable"),
    ("/api/say", "POST", b'{"text": "caf\xff\xfe"}', 400, "not UTF-8"),
    ("/api/say", "POST", b"[" * 2000 + b"]" * 2000, 400, "nested too deep"),
    ("/api/say", "POST", json.dumps({"text": "a" * (MAX_TEXT + 1)}).encode(), 400, f"the {MAX_TEXT} allowed"),
    ("/api/say", "POST", b'{"text": "' + b"a" * 1_000_000 + b'"}', 413, f"limit of {MAX_BODY} bytes"),
    ("/api/mute", "POST", b'{"muted": "yes"}', 400, "got str"),
    ("/api/animate", "POST", b'{"name": ["wave"]}', 400, "got list"),
    ("/api/animate", "POST", b'{"name": "moonwalk"}', 404, "moonwalk"),
    ("/api/dance", "POST", b"{}", 404, "no such console path: POST /api/dance"),
    ("/api/say", "GET", b"", 405, "method not allowed on this path: GET /api/say"),
    ("/api/mute", "PUT", b'{"muted": true}', 405, "method not allowed"),
    ("/api/say", "POST", b'{"text": "hi"}', 415, "Content-Type: application/json"),
]


def test_malformed_console_requests_get_a_json_4xx_and_one_log_line_and_the_agent_answers_on(live, caplog):
    caplog.set_level(logging.WARNING, logger="agent.console")
    for path, method, body, status, words in BAD_REQUESTS:
        caplog.clear()
        ctype = "text/plain" if status == 415 else "application/json"
        got, answer = post(live, path, body, method, ctype)
        assert got == status, (path, body[:60], got, answer)
        assert isinstance(answer, dict) and words in answer["error"], (path, body[:60], answer)
        lines = [r for r in caplog.records if f"({status})" in r.getMessage()]
        assert len(lines) == 1, (path, body[:60], [r.getMessage() for r in caplog.records])
        assert path in lines[0].getMessage()
    assert not live.core.robot.estopped
    start = len(live.log.events)
    assert post(live, "/api/say", json.dumps({"text": "wave your right hand"}).encode())[0] == 200
    assert live.log.wait_for(lambda e: isinstance(e, Timing), start, TURN_S) is not None


def test_typed_control_characters_are_removed_with_a_notice_and_the_words_answered(live):
    start = len(live.log.events)
    status, answer = post(live, "/api/say", b'{"text": "wave\\u0000 your\\u0007 right\\u001b hand"}')
    assert status == 200 and "3 control characters removed" in answer["note"]
    said = live.log.wait_for(lambda e: isinstance(e, Transcript), start, TURN_S)
    assert said is not None and said.text == "wave your right hand"
    assert any(isinstance(e, Notice) and "control characters" in e.message for e in live.log.events[start:])
    assert live.log.wait_for(lambda e: isinstance(e, Timing), start, TURN_S) is not None


def test_a_chunked_body_past_the_limit_is_refused_before_it_is_read_whole(live):
    port = live.server.port
    chunk = b"a" * 1000
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(8)) + b"0\r\n\r\n"
    head = (
        f"POST /api/say HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    answer = raw_request(port, head, body)
    assert answer.startswith(b"HTTP/1.1 413") and f"limit of {MAX_BODY} bytes".encode() in answer


def test_a_client_that_stops_sending_gets_408_and_one_that_goes_away_is_logged(live, caplog):
    caplog.set_level(logging.WARNING, logger="agent.console")
    port = live.server.port
    head = (
        f"POST /api/say HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\nConnection: close\r\n\r\n"
    )
    answer = raw_request(port, head, b'{"text": "wa')  # and then nothing
    assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within" in answer
    caplog.clear()
    raw_request(port, head, b'{"text": "wa', close_after=0.5)  # gone mid-body
    assert wait_until(lambda: any("went away" in r.getMessage() for r in caplog.records), 15, step=0.1)
    start = len(live.log.events)
    assert post(live, "/api/say", json.dumps({"text": "nod your head"}).encode())[0] == 200
    assert live.log.wait_for(lambda e: isinstance(e, Timing), start, TURN_S) is not None


def test_the_page_shows_a_controls_error_message(live):
    """The page's script shows ``data.error`` of any refused control (no browser needed to see it)."""
    js = (ROOT / "agent" / "console" / "static" / "console.js").read_text()
    assert "data.error || r.status" in js and "r.json().catch" in js


# --- 2. typed lines on stdin (bolt-agent chat) ------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "clean", "problem"),
    [
        # a new user's trial: "\x1b[31m" left "[31m" in the transcript
        ("what\x07 time\x1b[31m is it", "what time is it", "2 control characters removed"),
        ("\x1b[1;32mhello\x1b[0m there", "hello there", "2 control characters removed"),
        ("\x1b]0;my title\x07wave", "wave", "2 control characters removed"),
        ("nod\x00", "nod", "1 control character removed"),
    ],
)
def test_terminal_escape_sequences_are_dropped_whole(typed, clean, problem):
    from agent.pipeline.sources import clean_typed

    assert clean_typed(typed) == (clean, [problem])


def test_chat_stdin_with_invalid_utf8_control_characters_empty_and_a_1mb_line():
    lines = [
        b"\xff\xfehello robot, \xc3\x28 how are you",  # invalid UTF-8 (two sequences + one)
        b"\x00\x01\x02\x07\x1b",  # nothing printable
        b"",  # empty: ignored silently
        b"a" * 1_000_000,  # 1 MB
        b"wave your right hand",
    ]
    code, events, err = cli("chat", "--json", stdin=b"\n".join(lines) + b"\n")
    assert code == 0 and "Traceback" not in err, err[-3000:]
    notices = [e["message"] for e in of(events, "notice") if e["message"].startswith("typed line")]
    assert len(notices) == 3, notices
    assert notices[0].startswith("typed line 1: 3 invalid UTF-8 sequences replaced")
    assert notices[1].startswith("typed line 2: 5 control characters removed") and "ignored" in notices[1]
    assert notices[2] == f"typed line 4: cut from 1000000 to {MAX_TYPED} characters"
    for n in notices:  # said once, as the notice: a warning line printed each a second time (issue 50)
        assert n not in err
    said = [e["text"] for e in of(events, "transcript")]
    assert (
        len(said) == 3 and said[0].startswith("\ufffd\ufffdhello robot") and said[2] == "wave your right hand"
    )
    assert said[1] == "a" * MAX_TYPED
    timings = of(events, "timing")
    assert len(timings) == 3 and len(of(events, "reply")) == 3
    n_ctx = load_config().llm.n_ctx
    assert all(t["prompt_tokens"] < n_ctx for t in timings), timings


# --- 3. skills that raise, hang, flood ------------------------------------------------------------

FAULTY_SKILLS = '''"""Skills that misbehave, as a user might write them."""

import threading

from agent.skills import skill


@skill(keywords=("freeze",))
def freeze() -> str:
    """Freeze the robot in place."""
    threading.Event().wait()
    return "never"


@skill(keywords=("explode",))
def explode() -> str:
    """Explode into confetti."""
    raise RuntimeError("confetti cannon jammed")


@skill(keywords=("flood",))
def flood() -> str:
    """Flood the room with words."""
    return "word " * 200_000


@skill(keywords=("gadget",))
def gadget() -> object:
    """Show the gadget."""
    return {"gadget": {1, 2}, "lock": threading.Lock()}


@skill(background=True, keywords=("linger",))
def linger() -> str:
    """Linger in the background."""
    threading.Event().wait()
    return "never"
'''


def skills_config(tmp_path: Path, enabled: list[str]) -> Path:
    (tmp_path / "my_skills").mkdir(exist_ok=True)
    (tmp_path / "my_skills" / "faulty.py").write_text(FAULTY_SKILLS)
    (tmp_path / "my_skills" / "broken.py").write_text("def oops(:\n")  # a syntax error: reported, others load
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[skills]\nfolders = ["my_skills"]\nenabled = {json.dumps(enabled)}\ntimeout_s = 1\n')
    return cfg


def test_repeated_hangs_neither_block_later_calls_nor_the_exit(tmp_path):
    from agent.skills import SkillContext, load_registry

    skills_config(tmp_path, [])
    reg = load_registry([tmp_path / "my_skills"], entry_points=False)
    reg.timeout_s = 0.2
    assert any("broken.py" in e for e in reg.load_errors)
    ctx = SkillContext(robot=None, now=datetime.now)
    outs = [reg.call("freeze", {}, ctx) for _ in range(STUCK_MAX + 3)]
    assert all(not o.ok for o in outs)
    assert all("did not finish within 0.2 s" in o.result for o in outs[:STUCK_MAX])
    assert all(f"still stuck in {STUCK_MAX} earlier calls" in o.result for o in outs[STUCK_MAX:])
    ok = reg.call("get_time", {}, ctx)  # another skill still runs at once
    assert ok.ok and ok.result.startswith("It is ")
    assert reg.stuck == {"freeze": STUCK_MAX}


def test_chat_with_skills_that_hang_raise_flood_and_return_junk(tmp_path):
    cfg = skills_config(tmp_path, ["freeze", "explode", "flood", "gadget", "linger"])
    words = ["freeze", "explode", "flood", "gadget", "linger", "freeze", "freeze"]
    t0 = time.monotonic()
    code, events, err = cli(
        "chat",
        "--json",
        "--config",
        str(cfg),
        "--wait-background",
        "3",
        stdin="\n".join(words).encode() + b"\n",
    )
    took = time.monotonic() - t0
    assert code == 0 and "Traceback" not in err, err[-3000:]
    assert len(of(events, "timing")) == len(words)  # every turn answered
    assert any("broken.py" in e["message"] for e in of(events, "error")), of(events, "error")
    results: dict[str, list[dict]] = {}
    for r in of(events, "tool_result"):
        results.setdefault(r["name"], []).append(r)
    print(f"chat took {took:.0f} s")
    # Each word names one tool: the 135M model calls it (the tool prior's keyword bonus).
    assert [c["name"] for c in of(events, "tool_call")] == words
    frozen = [(r["ok"], r["result"]) for r in results["freeze"]]
    assert frozen == [
        (False, "freeze did not finish within 1 s"),
        (False, "freeze did not finish within 1 s"),
        (False, f"freeze is still stuck in {STUCK_MAX} earlier calls (over 1 s); not started again"),
    ]
    assert err.count("skill freeze did not finish within 1 s; its thread is left running") == 2
    assert err.count("skill freeze not started") == 1
    (explode,) = results["explode"]
    assert not explode["ok"] and explode["result"] == "explode failed: RuntimeError: confetti cannon jammed"
    assert "skill explode raised RuntimeError: confetti cannon jammed" in err
    (flood,) = results["flood"]
    assert flood["ok"] and len(flood["result"]["result"]) == MAX_RESULT_CHARS
    assert "cut: the result had 1000000 characters" in flood["result"]["note"]
    assert f"skill flood returned 1000000 characters; cut to {MAX_RESULT_CHARS}" in err
    (gadget,) = results["gadget"]
    assert gadget["ok"] and gadget["result"]["gadget"] == "{1, 2}" and "lock" in gadget["result"]["lock"]
    (linger,) = results["linger"]
    assert linger["ok"] and linger["result"]["status"] == "started"
    # The hung background call did not hold the end of input past --wait-background, nor the exit.
    assert not of(events, "background_done")
    assert any(
        "1 background tool calls still running after 3 s" in e["message"] for e in of(events, "notice")
    )


# --- 4. config ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("toml", "expect"),
    [
        ('[turn]\nconfirm_ms = "soon"\n', "turn.confirm_ms: Input should be a valid integer"),
        ("[lm]\nmodel = 3\n", "[lm]: unknown section (check its spelling; sections: agent, asr, audio"),
        ("llm = 3\n", "llm: must be a section ([llm] table), got 3"),
        (
            '[llm.server]\nspec_typ = "x"\n',
            "llm.server.spec_typ: unknown key (check its spelling and section: ",
        ),
        ("[robot.reachy_mini]\nbogus = 1\n", "robot.reachy_mini.bogus: unknown key"),
        ("[[robot.joints]]\nname = 5\n", "robot.joints.0.name: Input should be a valid string (got 5)"),
        ("[robot]\njoints = 3\n", "robot.joints: Input should be a valid list (got 3)"),
    ],
)
def test_bad_config_through_run_is_one_line_and_exit_2(tmp_path, toml, expect):
    bad = tmp_path / "bad.toml"
    bad.write_text(toml)
    code, events, err = cli("run", "--config", str(bad), timeout=120)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"error: {bad}: ") and expect in lines[0], lines[0]


def test_unknown_section_and_nested_key_name_what_the_section_takes(tmp_path):
    from agent.config import ConfigError

    p = tmp_path / "robot.toml"
    p.write_text("[skils]\nfolders = []\n[llm.openai]\nurll = 'http://x'\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert "[skils]: unknown section" in msg and "skills" in msg
    assert "llm.openai.urll: unknown key" in msg and "[llm.openai] takes" in msg and "url" in msg


# --- 6. a full disk -------------------------------------------------------------------------------


def test_reply_wav_on_a_full_disk_is_one_error_the_turn_answered_and_written_when_space_returns(tmp_path):
    """``reply_000.wav`` is a symlink to /dev/full (ENOSPC); once it is gone the kept reply is written."""
    from rig import AgentRig

    out = tmp_path / "out"
    out.mkdir()
    full = out / "reply_000.wav"
    full.symlink_to("/dev/full")

    def space_returns(ev) -> None:
        if isinstance(ev, Error) and "reply_000.wav" in ev.message:
            full.unlink()  # the disk has room again

    rig = AgentRig(out=out, observe=space_returns)
    try:
        evs = rig.text("wave your right hand", "nod your head")
    finally:
        rig.close()
    errors = evs.of(Error)
    assert len(errors) == 1 and errors[0].turn_id == 0, errors
    assert "reply_000.wav: ENOSPC (No space left on device)" in errors[0].message
    assert len(evs.of(Timing)) == 2 and len(evs.of(Reply)) == 2  # both turns answered
    assert evs.of(Reply)[0].audio is None and evs.of(Reply)[1].audio == str(out / "reply_001.wav")
    assert any(isinstance(e, Notice) and "2 kept replies written now" in e.message for e in evs)
    for name in ("reply_000.wav", "reply_001.wav"):  # the first reply was not lost
        with wave.open(str(out / name)) as w:
            assert w.getnframes() > 2205


def test_reply_wav_sink_reports_one_error_per_episode_not_per_reply(tmp_path):
    import numpy as np

    from agent.events import AudioOut
    from agent.pipeline import WavSink

    out = tmp_path / "out"
    out.mkdir()
    for n in (1, 2, 3):
        (out / f"reply_{n:03d}.wav").symlink_to("/dev/full")
    sink = WavSink(out)
    reports = []
    for n in (1, 2, 3):
        sink.play(AudioOut(n, f"sentence {n}", audio=np.full(2205, 1000, dtype=np.int16)))
        sink.end(n)
        reports += sink.poll()
    assert sum(isinstance(r, Error) for r in reports) == 1
    for n in (1, 2, 3):
        (out / f"reply_{n:03d}.wav").unlink()
    sink.play(AudioOut(4, "sentence 4", audio=np.full(2205, 1000, dtype=np.int16)))
    sink.end(4)
    reports = sink.poll()
    assert any(isinstance(r, Notice) and "4 kept replies written" in r.message for r in reports)
    assert sorted(p.name for p in out.iterdir()) == [f"reply_{n:03d}.wav" for n in (1, 2, 3, 4)]


def test_json_events_to_a_full_disk_are_one_log_line_and_the_run_goes_on(tmp_path):
    with open("/dev/full", "wb") as full:
        r = subprocess.run(
            [sys.executable, "-m", "agent", "chat", "--json", "--out", str(tmp_path / "out")],
            input=b"wave your right hand\nnod your head\n",
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=CLI_S,
            cwd=ROOT,
        )
    err = r.stderr.decode()
    assert r.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert err.count("cannot write events to <stdout>: ENOSPC") == 1, err[-3000:]
    # The turns were still answered and spoken into their WAVs.
    assert len(list((tmp_path / "out").glob("reply_*.wav"))) == 2


def test_console_token_file_on_a_full_disk_is_one_error_naming_the_file(tmp_path):
    """``run --console`` on a LAN address makes its token file first: a full disk there is exit 2."""
    import io

    import typer

    from agent.cli.console import start_console
    from agent.cli.printer import EventPrinter

    token = tmp_path / "token"
    token.symlink_to("/dev/full")
    cfg = load_config()
    cfg.console.token_file = token
    out = io.StringIO()
    with pytest.raises(typer.Exit) as e:
        start_console(cfg, "0.0.0.0:0", EventPrinter(True, out))
    assert e.value.exit_code == 2
    (line,) = out.getvalue().splitlines()
    error = json.loads(line)
    assert error["event"] == "error"
    assert (
        f"cannot write the console token file {token}: ENOSPC (No space left on device)" in error["message"]
    )


def test_skill_results_are_cut_and_made_json(tmp_path):
    """The registry's own contract, on the skill file users write (no model needed)."""
    from agent.skills import SkillContext, load_registry

    skills_config(tmp_path, [])
    reg = load_registry([tmp_path / "my_skills"], entry_points=False)
    ctx = SkillContext(robot=None, now=datetime.now)
    flood = reg.call("flood", {}, ctx)
    assert flood.ok and len(json.dumps(flood.result)) < MAX_RESULT_CHARS + 200
    gadget = reg.call("gadget", {}, ctx)
    assert gadget.ok and json.loads(json.dumps(gadget.result))["gadget"] == "{1, 2}"
    explode = reg.call("explode", {}, ctx)
    assert not explode.ok and "confetti cannon jammed" in explode.result
