"""Volume by voice (issue 50, item 5): the speaking volume set and changed through the skills.

The skills run on a real registry; the volume they set is applied by the real speaker stage
(:class:`~agent.pipeline.sinks.SpeakerSink` over :class:`~agent.audio_io.speaker.Speaker`) to the
samples written to the sound device, faked only at the OS boundary (:mod:`agent.audio_io.fake`,
recording what its callback was given); the level is kept in a real state store across a reopen.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from agent.audio_io.fake import FakeBackend
from agent.audio_io.speaker import Speaker
from agent.config import load_config
from agent.events import AudioOut, TurnPlayed
from agent.pipeline.sinks import SpeakerSink
from agent.skills import SkillContext, load_registry
from agent.state.keep import AgentState
from agent.state.store import StateStore
from agent.state.volume import Volume, gain_of
from skills.sound import level_in, step_in


@pytest.fixture(scope="module")
def registry():
    return load_registry([], entry_points=False)


@pytest.fixture()
def ctx():
    return SkillContext(robot=None, volume=Volume())


def test_the_volume_is_set_and_changed_and_said_in_words(registry, ctx):
    assert {"set_volume", "change_volume"} <= set(registry.skills)
    assert "change my volume" in registry.abilities()
    said = [
        registry.call(name, args, ctx).result
        for name, args in (
            ("set_volume", {"level": 60}),
            ("change_volume", {"step": 20}),
            ("change_volume", {"step": -30}),
            ("change_volume", {}),  # "louder": one step up
        )
    ]
    assert said == ["Volume 60 percent.", "Volume 80 percent.", "Volume 50 percent.", "Volume 70 percent."]
    assert ctx.volume.level == 70 and ctx.volume.gain == pytest.approx(0.49)


def test_a_level_out_of_range_is_clamped_with_a_spoken_reason(registry, ctx):
    loud = registry.call("set_volume", {"level": 150}, ctx)
    assert loud.ok and loud.told == "The highest volume is 100 percent." and ctx.volume.level == 100
    assert loud.result["result"] == "Volume 100 percent."
    up = registry.call("change_volume", {"step": 20}, ctx)
    assert up.result == "I am already as loud as I go: volume 100 percent."
    muted = registry.call("set_volume", {"level": -5}, ctx)
    assert muted.told == "The lowest volume is 0 percent, which is muted."
    assert muted.result["result"] == "Volume 0 percent: I am muted." and ctx.volume.gain == 0.0
    assert registry.call("change_volume", {"step": -20}, ctx).result == "I am already muted."
    ctx.volume.set(30)
    assert (
        registry.call("change_volume", {"step": -50}, ctx).result == "That is as quiet as I go: I am muted."
    )
    bare = registry.call("set_volume", {"level": 50}, SkillContext(robot=None))
    assert not bare.ok and "I cannot change my volume here." in str(bare.result)


@pytest.mark.parametrize(
    ("said", "level", "step"),
    [
        ("set the volume to 60 percent", 60, 60),
        ("mute yourself", 0, 20),
        ("full volume please", 100, 20),
        ("volume at half", 50, 50),
        ("louder", None, 20),
        ("a little quieter please", None, -10),
        ("turn it down", None, -20),
        ("much louder", None, 30),
        ("turn the volume down by 30 percent", 30, -30),
    ],
)
def test_the_words_give_the_numbers_for_small_models(said, level, step):
    if level is None:
        with pytest.raises(ValueError):
            level_in(said)
    else:
        assert level_in(said) == level
    assert step_in(said) == step


def _played(volume: Volume | None) -> tuple[np.ndarray, np.ndarray]:
    """A sentence of audio through the speaker sink at ``volume``: ``(as sent, as the device got it)``."""
    cfg = load_config().audio
    backend = FakeBackend(speaker_rate=48_000, record=True)
    speaker = Speaker(cfg, backend, None if volume is None else lambda: volume.gain)
    speaker.open()
    sink = SpeakerSink(speaker)
    t = np.arange(4800) / 48_000
    audio = (np.cos(2 * np.pi * 440 * t) * 16384).astype(np.int16)  # 0.1 s, half of full scale
    try:
        sink.play(AudioOut(7, audio=audio, sample_rate=speaker.rate, text="Volume 25 percent."))
        sink.end(7)
        deadline = time.monotonic() + 10
        while not any(isinstance(e, TurnPlayed) for e in sink.poll()):
            assert time.monotonic() < deadline, "the sentence was never played"
            time.sleep(0.01)
    finally:
        speaker.close()
    out = np.concatenate(backend.played)
    assert out.shape[1] == speaker.channels and np.array_equal(out[:, 0], out[:, -1])
    return audio.astype(np.float32) / 32768.0, out[:, 0]


def test_the_volume_scales_the_samples_written_to_the_sound_device():
    volume = Volume()
    volume.set(50)
    sent, got = _played(volume)
    start = int(np.flatnonzero(got)[0])
    np.testing.assert_allclose(got[start : start + sent.size], sent * 0.25, atol=1e-6)
    assert not np.any(got[start + sent.size :])  # silence after it, nothing else played
    _, full = _played(None)  # no volume: the samples as they came
    assert np.abs(full).max() == pytest.approx(np.abs(sent).max(), abs=1e-6)
    volume.set(0)
    _, muted = _played(volume)
    assert not np.any(muted)


def test_the_level_is_kept_across_restarts(tmp_path):
    path = tmp_path / "state.sqlite3"
    first = AgentState(StateStore.open(path), 4)
    assert first.volume.level == 100 and first.volume.gain == 1.0  # never set: the voice as synthesized
    first.volume.set(35)
    first.close()
    again = AgentState(StateStore.open(path), 4)
    try:
        assert again.volume.level == 35 and again.volume.gain == pytest.approx(gain_of(35))
    finally:
        again.close()
