"""Live pipeline faults, in process: real models, fake streams at the OS boundary (agent.live.fake).

None of these faults may stop the agent: after each, a spoken command still gets an answer.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from agent.audio import decode_file
from agent.config import load_config
from agent.events import DeviceState, Error, LiveTiming, Reply, Skipped, Spoken, Transcript
from agent.live import live as live_mod
from agent.live.bench import EventLog
from agent.live.fake import FakeBackend
from agent.live.live import LiveAgent
from agent.pipeline import VoiceAgent


@pytest.fixture(scope="module")
def voice(tmp_path_factory):
    log = EventLog()
    a = VoiceAgent(load_config(), log, tmp_path_factory.mktemp("out"))
    a.warmup()
    yield a, log
    a.close()


@pytest.fixture()
def rig(voice, request):
    """A LiveAgent on fake devices; ``request.param`` = FakeBackend keyword arguments."""
    agent, log = voice
    backend = FakeBackend(**getattr(request, "param", {}))
    agent.conversation.history.clear()
    live = LiveAgent(agent, log, backend)
    start = len(log.events)
    live.open_devices()
    th = threading.Thread(target=live.run, daemon=True)
    th.start()
    yield live, backend, log, start
    live.stop()
    th.join(5)


def command(fixtures_dir, name):
    return decode_file(fixtures_dir / "commands" / f"{name}.wav")


def say(backend, log, audio, timeout=60):
    """Feed audio (+1 s silence); return the events of the turn it causes, up to its timing."""
    start = len(log.events)
    backend.feed(np.concatenate([audio, np.zeros(16000, np.float32)]))
    ev = log.wait_for(lambda e: isinstance(e, (LiveTiming, Skipped)), start, timeout)
    assert ev is not None, log.events[start:]
    return log.events[start:]


def of(evs, kind):
    return [e for e in evs if isinstance(e, kind)]


def test_answers_on_fake_devices_and_reports_latency(rig, fixtures_dir):
    live, backend, log, _ = rig
    evs = say(backend, log, command(fixtures_dir, "time"))
    assert of(evs, Transcript) and of(evs, Spoken)
    t = of(evs, LiveTiming)[0]
    assert 0 < t.endpoint_ms <= t.asr_done_ms <= t.first_sentence_ms <= t.first_audio_ms <= t.first_played_ms
    assert t.endpoint_ms < 1000  # default endpoint silence is 500 ms


def test_mic_of_zeros_and_clipped_audio(rig, fixtures_dir, monkeypatch):
    live, backend, log, start = rig
    monkeypatch.setattr(live_mod, "ZERO_WARN_S", 0.5)
    time.sleep(1.5)  # the fake mic delivers only zeros
    assert any("digital silence" in e.message for e in of(log.events[start:], Error))
    assert not of(log.events[start:], Transcript)
    clipped = np.clip(command(fixtures_dir, "joke") * 20, -1, 1)
    evs = say(backend, log, clipped)
    assert of(evs, LiveTiming) or of(evs, Skipped)
    evs = say(backend, log, command(fixtures_dir, "time"))
    assert of(evs, Reply)


@pytest.mark.parametrize("rig", [{"mic_rate": 48000, "refuse_rates": (48000,)}], indirect=True)
def test_refused_sample_rate_falls_back(rig, fixtures_dir):
    live, backend, log, start = rig
    dev = [e for e in of(log.events[start:], DeviceState) if e.kind == "input"][0]
    assert dev.state == "open" and dev.sample_rate != 48000 and "refused" in dev.message
    assert of(say(backend, log, command(fixtures_dir, "time")), Reply)


@pytest.mark.parametrize("rig", [{"fail_output": True}], indirect=True)
def test_output_that_fails_to_open(rig, fixtures_dir):
    live, backend, log, start = rig
    assert any(e.kind == "output" and e.state == "failed" for e in of(log.events[start:], DeviceState))
    evs = say(backend, log, command(fixtures_dir, "time"))
    assert of(evs, Reply) and not of(evs, Spoken)
    assert of(say(backend, log, command(fixtures_dir, "time")), Reply)  # still listening


def test_tts_failure_on_one_sentence(rig, fixtures_dir, monkeypatch):
    live, backend, log, _ = rig
    tts = live.agent.tts
    real = tts._sentence_audio

    def flaky(sentence):
        if "second" in sentence.lower():
            raise RuntimeError("piper broke")
        return real(sentence)

    def scripted_turn(text, turn_id, state=None, on_text=None, cancel=None):
        from agent.conversation import TurnResult

        reply = "This is the first sentence. This is the second sentence. This is the third sentence."
        for i in range(0, len(reply), 5):
            on_text(reply[i:i + 5])
        return TurnResult(text=reply)

    monkeypatch.setattr(tts, "_sentence_audio", flaky)
    monkeypatch.setattr(live.agent.conversation, "turn", scripted_turn)
    evs = say(backend, log, command(fixtures_dir, "joke"))
    spoken = [e.text for e in of(evs, Spoken)]
    assert any("first" in s for s in spoken) and any("third" in s for s in spoken)
    assert not any("second" in s for s in spoken)


def test_model_exception_mid_stream(rig, fixtures_dir, monkeypatch):
    live, backend, log, _ = rig
    model = live.agent.model
    real = model.stream

    def broken(*args, **kwargs):
        for i, piece in enumerate(real(*args, **kwargs)):
            if i == 3:
                raise RuntimeError("llama.cpp failed")
            yield piece

    monkeypatch.setattr(model, "stream", broken)
    evs = say(backend, log, command(fixtures_dir, "joke"))
    assert any("problem" in e.text.lower() for e in of(evs, Spoken)), of(evs, Spoken)
    monkeypatch.setattr(model, "stream", real)
    assert of(say(backend, log, command(fixtures_dir, "time")), Spoken)  # still listening
