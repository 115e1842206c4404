"""``bolt-agent run`` with ``[live] attention = "wake_word"`` on a private PulseAudio server.

One agent for the module (the default config, the simulated body), driven in order: it starts
in standby; a command without the wake word is not heard (no utterance, no transcript: the VAD
and ASR never see it); "Okay Nabu." (the product's piper voice) wakes it with a chime on the
speaker (the detector's candidate confirmed by the ASR model, ``wake_verify`` on by default);
the next command is a turn and is answered; "Go to sleep." returns to standby without
a reply; woken again, nobody speaking for ``standby_after_s`` returns it to standby too.
"""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest
from test_live_devices import Agent

from agent.config import LiveConfig
from agent.models import resolve_model
from tools.bench.turn_set import Synthesizer, Voice, write_wav
from tools.pulse import read_wav, stop_recording, wait_recorded

pytestmark = pytest.mark.audio
QUIET_S = 8.0
"""``standby_after_s`` of the run."""
NOT_HEARD = ("utterance", "transcript", "user_turn", "pause_check", "end_of_turn_check")
"""Events of the VAD, turn-taking and ASR: none may come in standby."""


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wake-clips")
    syn = Synthesizer(resolve_model("packaged:piper-joe-medium", "voice"))
    pad = np.zeros(8000, np.float32)
    for name, text in (("wake", "Okay Nabu."), ("sleep", "Go to sleep.")):
        write_wav(folder / f"{name}.wav", np.concatenate([pad, syn.speak(text, Voice("joe", "piper")), pad]))
    return folder


@pytest.fixture(scope="module")
def agent(pulse, tmp_path_factory):
    cfg = tmp_path_factory.mktemp("wake-live") / "robot.toml"
    cfg.write_text(f'[live]\nattention = "wake_word"\nwake_word = "okay_nabu"\nstandby_after_s = {QUIET_S}\n')
    a = Agent(pulse, cfg)
    yield a
    a.proc.terminate()
    try:
        assert a.proc.wait(20) == 0
    except subprocess.TimeoutExpired:
        a.proc.kill()
        pytest.fail("agent did not stop on SIGTERM")


def _standby(state: str, reason: str | None = None):
    return lambda e: e["event"] == "standby" and e["state"] == state and reason in (None, e["reason"])


def test_starts_in_standby_and_hears_only_the_wake_word(agent, pulse, fixtures_dir):
    ev = agent.wait(_standby("standby", "start"), timeout=180)
    assert ev["wake_word"] == "Okay Nabu"
    start = len(agent.events)
    pulse.play(fixtures_dir / "commands" / "time.wav")  # returns once played
    time.sleep(1.5)  # as long as a turn's end would take to be judged
    assert [e for e in agent.events[start:] if e["event"] in NOT_HEARD] == []


def test_the_wake_word_wakes_it_and_the_next_utterance_is_a_turn(agent, pulse, fixtures_dir, clips, tmp_path):
    start = len(agent.events)
    rec_path = tmp_path / "spk.wav"
    rec = pulse.record(rec_path)
    t_rec = time.monotonic()
    pulse.play(clips / "wake.wav")
    woke = agent.wait(_standby("awake", "wake_word"), start, timeout=10)
    assert woke["score"] > LiveConfig().wake_candidate_cutoff  # the detector's candidate, then confirmed
    assert wait_recorded(rec_path, time.monotonic() - t_rec + 0.6)
    stop_recording(rec)
    heard = read_wav(rec_path)
    assert np.abs(heard).max() > 0.05, "no chime on the speaker"
    assert not [
        e for e in agent.events[start:] if e["event"] in ("transcript", "reply")
    ]  # the word alone: no turn

    n = len(agent.events)
    pulse.play(fixtures_dir / "commands" / "time.wav")
    said = agent.wait(lambda e: e["event"] == "transcript", n, timeout=30)
    assert "time" in said["text"].lower()
    agent.wait(lambda e: e["event"] == "reply" and e["turn_id"] == said["turn_id"], n, timeout=60)
    agent.wait(lambda e: e["event"] == "timing" and e["turn_id"] == said["turn_id"], n, timeout=60)


def test_go_to_sleep_returns_to_standby(agent, pulse, clips):
    start = len(agent.events)
    pulse.play(clips / "sleep.wav")
    ev = agent.wait(_standby("standby", "asked"), start, timeout=30)
    assert "sleep" in ev["text"].lower()
    time.sleep(0.5)
    assert not agent.since(start, "reply") and not agent.since(start, "tool_call")
    n = len(agent.events)
    pulse.play(clips / "sleep.wav")  # asleep: not even heard
    time.sleep(1.0)
    assert [e for e in agent.events[n:] if e["event"] in NOT_HEARD] == []


def test_quiet_spell_returns_to_standby(agent, pulse, clips):
    start = len(agent.events)
    pulse.play(clips / "wake.wav")
    agent.wait(_standby("awake"), start, timeout=10)
    t0 = time.monotonic()
    agent.wait(_standby("standby", "quiet"), start, timeout=QUIET_S + 20)
    assert time.monotonic() - t0 >= QUIET_S - 1.0
