"""Live pipeline faults, in process: real models, fake streams at the OS boundary (agent.audio_io.fake).

None of these faults may stop the agent: after each, a spoken command still gets an answer.
"""

from __future__ import annotations

import numpy as np
import pytest
from rig import AgentRig
from waiting import wait_until

from agent.audio_io.fake import FakeBackend
from agent.config import load_config
from agent.events import DeviceState, Error, Reply, Skipped, Spoken, Timing, Transcript
from agent.speech.audio import decode_file


@pytest.fixture(scope="module")
def voice():
    rig = AgentRig()
    yield rig
    rig.close()


@pytest.fixture()
def rig(voice, request):
    """The live pipeline on fake devices; ``request.param`` = FakeBackend keyword arguments."""
    backend = FakeBackend(**getattr(request, "param", {}))
    voice.core.conversation.history.clear()
    start = len(voice.log.events)
    with voice.live(backend) as pipeline:
        yield pipeline, backend, voice.log, start


def command(fixtures_dir, name):
    return decode_file(fixtures_dir / "commands" / f"{name}.wav")


def say(backend, log, audio, timeout=60):
    """Feed audio (+1 s silence); return the events of the turn it causes, up to its timing."""
    start = len(log.events)
    backend.feed(np.concatenate([audio, np.zeros(16000, np.float32)]))
    ev = log.wait_for(lambda e: isinstance(e, (Timing, Skipped)), start, timeout)
    assert ev is not None, log.events[start:]
    return log.events[start:]


def of(evs, kind):
    return [e for e in evs if isinstance(e, kind)]


def test_answers_on_fake_devices_and_reports_latency(rig, fixtures_dir):
    live, backend, log, _ = rig
    evs = say(backend, log, command(fixtures_dir, "time"))
    assert of(evs, Transcript) and of(evs, Spoken)
    t = of(evs, Timing)[0]
    assert 0 < t.endpoint_ms <= t.asr_done_ms <= t.first_sentence_ms <= t.first_audio_ms <= t.first_played_ms
    # The turn ends by a rule, not by the 1 s of trailing silence running out: the semantic
    # rules end it after the short silence, the long-silence rule at the latest (ASR of the
    # pause and the judges add their time on top, more on a loaded machine).
    assert t.endpoint_rule and t.endpoint_ms < load_config().turn.long_silence_ms + 1000


def test_lost_mic_blocks_are_reported_once_per_burst_and_the_agent_goes_on(rig, fixtures_dir):
    live, backend, log, start = rig
    for _ in range(3):  # PortAudio flags three blocks "input overflow" (the machine was too busy)
        backend.input_status = "input overflow"
        assert wait_until(lambda: backend.input_status is None, 2.0)
    ev = log.wait_for(lambda e: isinstance(e, Error) and "audio block(s) lost" in e.message, start, 20.0)
    assert ev is not None, log.events[start:]
    assert ev.message.startswith("microphone ") and "too busy" in ev.message, ev.message
    backend.input_status = "input overflow"  # within 30 s of the first line: counted, not repeated
    assert wait_until(lambda: backend.input_status is None, 2.0)
    evs = say(backend, log, command(fixtures_dir, "time"))
    assert of(evs, Reply)
    lost = [e for e in log.events[start:] if isinstance(e, Error) and "block(s) lost" in e.message]
    assert len(lost) == 1, lost


def test_mic_of_zeros_and_clipped_audio(rig, fixtures_dir):
    live, backend, log, start = rig
    live.source.zero_warn_s = 0.5
    ev = log.wait_for(lambda e: isinstance(e, Error) and "digital silence" in e.message, start, 5.0)
    assert ev is not None  # the fake mic delivers only zeros
    assert not of(log.events[start:], Transcript)
    clipped = np.clip(command(fixtures_dir, "joke") * 20, -1, 1)
    evs = say(backend, log, clipped)
    assert of(evs, Timing) or of(evs, Skipped)
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


def test_tts_failure_on_one_sentence(fixtures_dir, monkeypatch):
    from agent.config import load_config

    cfg = load_config()
    # The real model, held to a grammar, writes three sentences; piper fails on the second.
    cfg.llm.tool_format = "hermes"
    cfg.llm.max_reply_sentences = 0  # all three sentences are spoken
    cfg.llm.output_grammar = (
        'root ::= "This is the first sentence. This is the second sentence. This is the third sentence."'
    )
    scripted = AgentRig(cfg)
    # piper's voice object (vendor code, not ours): an in-process ONNX voice offers no way to
    # make one sentence fail for real while the next works, so its call raises once.
    voice = scripted.core.tts.voice
    real = voice.synthesize
    broke = []

    def flaky(sentence, *args, **kwargs):
        if "second" in sentence.lower() and not broke:
            broke.append(sentence)
            raise RuntimeError("piper broke")
        return real(sentence, *args, **kwargs)

    monkeypatch.setattr(voice, "synthesize", flaky)
    backend = FakeBackend()
    try:
        with scripted.live(backend):
            evs = say(backend, scripted.log, command(fixtures_dir, "joke"))
            again = say(backend, scripted.log, command(fixtures_dir, "joke"))  # the next turn
    finally:
        scripted.close()
    spoken = [e.text for e in of(evs, Spoken)]
    assert any("first" in s for s in spoken) and any("third" in s for s in spoken)
    assert not any("second" in s for s in spoken)
    errors = [e for e in of(evs, Error) if "synthesis" in e.message]
    assert len(errors) == 1 and "second" in errors[0].message, of(evs, Error)  # one event, naming it
    # Recovered: the next turn is spoken whole, the sentence that failed included.
    heard = " ".join(e.text for e in of(again, Spoken))
    assert all(word in heard for word in ("first", "second", "third")), heard
    assert not [e for e in of(again, Error) if "synthesis" in e.message]


def test_model_exception_mid_stream(rig, fixtures_dir, monkeypatch):
    live, backend, log, _ = rig
    model = live.core.model
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
