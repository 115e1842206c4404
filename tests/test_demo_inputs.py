"""The demo without recorded commands (no $BOLT_FIXTURES): built-in utterances synthesized once and cached."""

from __future__ import annotations

from agent.cli.demo import BUILTIN_UTTERANCES, demo_inputs
from agent.config import load_config
from agent.listening.vad import find_utterances
from agent.models import resolve_model
from agent.speech.audio import decode_file
from agent.speech.tts import PiperTTS


def test_builtin_utterances_are_synthesized_once_and_hold_speech(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tts = PiperTTS(resolve_model("packaged:piper-joe-medium"))
    inputs, origin = demo_inputs(None, tts)
    assert [t for _, t in inputs] == [t for _, t in BUILTIN_UTTERANCES]
    assert str(tmp_path) in origin
    stamps = [p.stat().st_mtime_ns for p, _ in inputs]
    for path, _ in inputs:
        segs = find_utterances(decode_file(path), load_config().vad)
        assert len(segs) == 1  # one utterance per file, with silence around it
    again, _ = demo_inputs(None, tts)
    assert [p.stat().st_mtime_ns for p, _ in again] == stamps  # cached, not synthesized again


def test_fixture_commands_are_used_when_present(fixtures_dir):
    tts = PiperTTS(resolve_model("packaged:piper-joe-medium"))
    inputs, origin = demo_inputs(fixtures_dir, tts)
    assert origin.endswith("commands") and all(p.is_file() for p, _ in inputs)
    assert any("timer" in p.name for p, _ in inputs)
