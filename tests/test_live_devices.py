"""``bolt-agent run`` against real sound devices: a private PulseAudio server with null sinks.

Commands are played into the virtual mic (``paplay --device=mic_in``), the agent runs as a
subprocess with ``--json``, its voice is recorded from ``spk.monitor`` and transcribed back.
The tests share one agent process and run in file order (one turn, two turns, barge-in,
echo, sound server restart); skipped with the reason when PulseAudio is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from waiting import wait_until

from tools.pulse import PulseRig, read_wav, stop_recording, wait_recorded

pytestmark = pytest.mark.audio
ROOT = Path(__file__).resolve().parent.parent
BIN = [sys.executable, "-m", "agent"]
TAIL_S = 0.5  # recorded after a reply's last event: what is still in the sound server's buffers


class Agent:
    """A running ``bolt-agent run --json``; events collected by a reader thread."""

    def __init__(self, pulse: PulseRig, config: Path | None = None) -> None:
        args = [*BIN, "run", "--json"] + (["--config", str(config)] if config else [])
        self.proc = subprocess.Popen(
            args,
            cwd=ROOT,
            # A state store of its own: the module's agent and a test's agent never share one.
            env={**pulse.env, "XDG_STATE_HOME": tempfile.mkdtemp(prefix="bolt-state-")},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            ev = json.loads(line)
            if ev["event"] != "robot":
                self.events.append(ev)

    def wait(self, pred, start: int = 0, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in self.events[start:]:
                if pred(ev):
                    return ev
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"agent exited {self.proc.returncode}: {self.proc.stderr.read()[-2000:]}"
                )
            time.sleep(0.05)
        raise AssertionError(f"timed out; events: {self.events[start:]}")

    def since(self, start: int, name: str) -> list[dict]:
        return [e for e in self.events[start:] if e["event"] == name]


@pytest.fixture(scope="module")
def agent(pulse, tmp_path_factory):
    # Slow speech: even a one-sentence reply from the 135M model plays long enough for the
    # barge-in test to talk over it (a short reply can end before the second utterance starts).
    cfg = tmp_path_factory.mktemp("live") / "robot.toml"
    cfg.write_text("[tts]\nlength_scale = 2.0\n")
    a = Agent(pulse, cfg)
    a.wait(
        lambda e: e["event"] == "device" and e["kind"] == "output" and e["state"] in ("open", "failed"),
        timeout=120,
    )
    yield a
    t0 = time.monotonic()
    a.proc.terminate()  # SIGTERM: a clean stop
    try:
        a.proc.wait(20)
    except subprocess.TimeoutExpired:
        a.proc.kill()
        pytest.fail("agent did not stop on SIGTERM")
    took = time.monotonic() - t0
    a.reader.join(5)  # every line the agent printed before it exited has been read
    parked = [e for e in a.events if e["event"] == "robot_parked"]
    assert took < 2.0 and parked and parked[-1]["torque"] is False, (took, parked)
    assert all(abs(v) < 0.5 for v in parked[-1]["positions"].values()), parked


@pytest.fixture(scope="module")
def asr():
    from agent.config import ASRConfig
    from agent.models import resolve_model
    from agent.speech.asr import WhisperASR

    return WhisperASR(resolve_model("packaged:whisper-tiny.en", "ASR"), ASRConfig())


def _words(text):
    import re

    return set(re.sub(r"[^a-z ]", " ", text.lower()).split())


def test_missing_device_lists_devices(pulse, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[audio]\ninput_device = "no such microphone"\n')
    p = subprocess.run(
        [*BIN, "run", "--config", str(cfg), "--json"],
        cwd=ROOT,
        env=pulse.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2
    assert "no such microphone" in p.stderr and "'pulse'" in p.stderr, p.stderr
    events = [json.loads(line)["event"] for line in p.stdout.splitlines()]
    assert events == ["error"]  # checked before any model loads: no "ready"
    text = subprocess.run(
        [*BIN, "run", "--config", str(cfg)],
        cwd=ROOT,
        env=pulse.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert text.returncode == 2 and text.stdout == ""  # said once, on stderr (it was said twice)
    assert text.stderr.count("no input device matches") == 1, text.stderr


def test_one_turn_spoken_back(agent, pulse, fixtures_dir, asr, tmp_path):
    rec_path = tmp_path / "spk.wav"
    rec = pulse.record(rec_path)
    t_rec = time.monotonic()
    start = len(agent.events)
    pulse.play(fixtures_dir / "commands" / "time.wav")
    timing = agent.wait(lambda e: e["event"] == "timing", start)
    assert wait_recorded(rec_path, time.monotonic() - t_rec + TAIL_S)
    stop_recording(rec)
    assert "time" in agent.since(start, "transcript")[0]["text"].lower()
    reply = agent.since(start, "reply")[0]["text"]
    heard = asr.transcribe(read_wav(rec_path)).text
    overlap = _words(heard) & _words(reply)
    assert len(overlap) >= 2, (heard, reply)
    assert 0 < timing["endpoint_ms"] < timing["asr_done_ms"] < timing["first_played_ms"]


def test_two_turns_in_a_row(agent, pulse, fixtures_dir):
    start = len(agent.events)
    for name in ("nod", "time"):
        n = len(agent.events)
        pulse.play(fixtures_dir / "commands" / f"{name}.wav")
        agent.wait(lambda e: e["event"] == "timing", n)
    turns = [e["turn_id"] for e in agent.since(start, "transcript")]
    assert len(turns) == 2 and turns[1] == turns[0] + 1
    assert not agent.since(start, "barge_in")


def test_barge_in_stops_playback_and_cuts_history(agent, pulse, fixtures_dir):
    start = len(agent.events)
    pulse.play(fixtures_dir / "commands" / "joke.wav")
    first = agent.wait(lambda e: e["event"] == "speaking", start)  # the robot has started to talk
    pulse.play(fixtures_dir / "commands" / "look_left.wav")  # the user talks over the robot
    barge = agent.wait(lambda e: e["event"] == "barge_in" and e["turn_id"] == first["turn_id"], start)
    assert barge["reason"] == "speech" and barge["stop_ms"] < 150
    cut = agent.wait(lambda e: e["event"] == "history_cut" and e["turn_id"] == first["turn_id"], start)
    reply = agent.wait(lambda e: e["event"] == "reply" and e["turn_id"] == first["turn_id"], start)
    assert cut["kept"] != reply["text"] and cut["dropped"]
    agent.wait(lambda e: e["event"] == "transcript" and "left" in e["text"].lower(), start)
    agent.wait(lambda e: e["event"] == "timing" and e["turn_id"] > first["turn_id"], start)


def test_robot_does_not_answer_itself(agent, pulse, fixtures_dir):
    mod = pulse.pactl(
        "load-module", "module-loopback", "source=spk.monitor", "sink=mic_in", "latency_msec=60"
    ).strip()
    try:
        start = len(agent.events)
        pulse.play(fixtures_dir / "commands" / "joke.wav")
        agent.wait(lambda e: e["event"] == "timing", start)
        time.sleep(4.0)  # a window in which nothing may happen: no echo turn shows up in it
        transcripts = agent.since(start, "transcript")
        assert len(transcripts) == 1, (transcripts, agent.since(start, "skipped"))
    finally:
        pulse.pactl("unload-module", mod)


def test_timer_result_is_spoken_when_it_fires(agent, pulse, fixtures_dir, asr, tmp_path):
    start = len(agent.events)
    pulse.play(fixtures_dir / "commands" / "timer.wav")  # "Set a timer for ten seconds."
    call = agent.wait(lambda e: e["event"] == "tool_call" and e["name"] == "set_timer", start)
    agent.wait(lambda e: e["event"] == "timing" and e["turn_id"] == call["turn_id"], start)  # acknowledged
    rec_path = tmp_path / "timer.wav"
    rec = pulse.record(rec_path)
    t_rec = time.monotonic()
    secs = float(call["arguments"]["seconds"])
    done = agent.wait(lambda e: e["event"] == "background_done", start, timeout=secs + 30)
    assert done["call_id"] == call["call_id"] and done["ok"]
    reply = agent.wait(lambda e: e["event"] == "reply" and e["turn_id"] == done["turn_id"], start)
    assert wait_recorded(rec_path, time.monotonic() - t_rec + TAIL_S)
    stop_recording(rec)
    heard = asr.transcribe(read_wav(rec_path)).text
    assert len(_words(heard) & _words(reply["text"])) >= 2, (heard, reply["text"])
    assert len([e for e in agent.since(start, "background_done")]) == 1  # exactly once


def test_sound_server_restart(agent, pulse, fixtures_dir):
    start = len(agent.events)
    pulse.stop()
    agent.wait(lambda e: e["event"] == "device" and e["state"] == "lost", start, timeout=30)
    # The agent has tried to reopen while the server was gone, and keeps trying.
    agent.wait(lambda e: e["event"] == "device" and e["state"] == "retry", start, timeout=30)
    pulse.start()
    agent.wait(
        lambda e: e["event"] == "device" and e["kind"] == "input" and e["state"] == "open", start, timeout=60
    )
    # Listening again once the speaker has been tried too: it is opened right after the mic,
    # and no output event comes between the loss and the reopening.
    agent.wait(lambda e: e["event"] == "device" and e["kind"] == "output", start, timeout=30)
    n = len(agent.events)
    pulse.play(fixtures_dir / "commands" / "time.wav")
    assert "time" in agent.wait(lambda e: e["event"] == "transcript", n)["text"].lower()


def test_sigterm_during_run_parks_a_serial_robot(pulse, fixtures_dir, tmp_path):
    """``run`` on the bolt_serial emulator (a real pty): SIGTERM mid-gesture parks the board."""
    from emu_bolt import BoltBoard

    board = BoltBoard(tmp_path / "ttyBOLT", reset_on_open=False).plug()
    joints = "".join(
        f'\n[[robot.joints]]\nname = "{j}"\nid = {i}\nmin_deg = {lo}\nmax_deg = {hi}\n'
        for i, (j, lo, hi) in enumerate(
            [("head_yaw", -60, 60), ("head_pitch", -30, 30), ("left_arm", 0, 160), ("right_arm", 0, 160)]
        )
    )
    cfg = tmp_path / "serial.toml"
    port = tmp_path / "ttyBOLT"
    cfg.write_text(
        f'[robot]\ndriver = "body"\n[robot.drivers.body]\nkind = "bolt_serial"\nport = "{port}"\n{joints}'
    )
    a = Agent(pulse, cfg)
    try:
        a.wait(lambda e: e["event"] == "device" and e["kind"] == "output", timeout=120)
        pulse.play(fixtures_dir / "commands" / "dance.wav")
        a.wait(lambda e: e["event"] == "tool_call")
        # A starved host can let the board's watchdog fire; the host puts torque back on (< 1 s).
        assert wait_until(lambda: board.torque, 2.0)
        t0 = time.monotonic()
        a.proc.terminate()
        a.proc.wait(10)
        assert time.monotonic() - t0 < 2.0
        assert all(board.pos[i] == 900 for i in range(4)), board.pos
        assert board.frames[-1].endswith("T 0") and not board.torque
    finally:
        if a.proc.poll() is None:
            a.proc.kill()
        board.close()
