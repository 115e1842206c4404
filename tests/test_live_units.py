"""Live-mode building blocks on real data: phrase matching, streaming VAD, echo guard."""

from __future__ import annotations

import numpy as np
import pytest

from agent.config import LiveConfig, TurnConfig, VADConfig
from agent.listening.echo import EchoGate
from agent.listening.turns import Attention, echo_of, is_echo, stop_command, strip_wake
from agent.listening.vad import FRAME, Endpointer, SileroFrameVAD
from agent.speech.audio import decode_file


@pytest.mark.parametrize(
    "text,expect",
    [
        ("Stop!", "stop"),
        ("Please be quiet.", "be quiet"),
        ("Freeze", "freeze"),
        ("Tell me a short joke.", None),
        ("Stop the music and then dance slowly now", None),
    ],
)
def test_stop_phrases(text, expect):
    assert stop_command(text, LiveConfig().stop_phrases, 4) == expect


def test_a_stop_phrase_naming_something_else_to_end_is_no_stop_command():
    """A stop phrase with "timer" is for the timer (the model's ``cancel_timer``), not the body."""
    phrases, timers = LiveConfig().stop_phrases, frozenset({"timer", "alarm"})
    assert stop_command("Stop the timer.", phrases, 4, timers) is None
    assert stop_command("Stop the alarm!", phrases, 4, timers) is None
    assert stop_command("Stop the timer.", phrases, 4) == "stop"  # nothing else named
    assert stop_command("Stop! Stop moving.", phrases, 4, timers) == "stop moving"


def test_wake_phrase_tolerates_asr_spelling_and_follow_up_window():
    now = [0.0]
    att = Attention(LiveConfig(attention="wake", follow_up_s=5), clock=lambda: now[0])
    assert att.accept("Hey Robert, wave your hand.") == "wave your hand."
    assert strip_wake("hey bolt", ["hey bolt"], 80) == ""
    assert att.accept("wave your hand") is None
    att.replied()
    now[0] = 4.0
    assert att.accept("and nod") == "and nod"
    now[0] = 6.0
    assert att.accept("and nod") is None
    assert Attention(LiveConfig()).accept("anything") == "anything"


def test_echo_transcript_matching():
    said = ["I am a robot that can tell you a joke. Why did the chicken cross the road?"]
    assert is_echo("why did the chicken cross the road", said, 75)
    assert not is_echo("wave your right hand", said, 75)


def test_a_longer_transcript_is_an_echo_only_when_the_robot_said_all_its_words():
    """Issue 22's soak, turns 283 and 373: "What time is it?" said as the robot's "What is it?"
    ended was dropped as its echo (``ratio`` 80); it has a word the robot did not say."""
    assert not is_echo("What time is it?", ["What is it?"], 75)
    assert is_echo("What is it?", ["What is it?"], 75)
    # An echo that runs over two of the robot's sentences is still the robot's.
    assert is_echo("Sure, I nodded twice.", ["Sure.", "I nodded twice."], 75)
    assert is_echo("Sure I nodded twice", ["Okay, here goes.", "Sure.", "I nodded twice."], 75)
    # ASR spellings of the robot's words still match ("nodded" heard as "noded").
    assert is_echo("Sure, I noded twice.", ["Sure.", "I nodded twice."], 75)
    assert not is_echo("Sure, I nodded twice. Now wave.", ["Sure.", "I nodded twice."], 75)


def test_an_echo_names_what_the_robot_said():
    said = ["Okay.", "Why did the chicken cross the road?"]
    assert echo_of("why did the chicken cross", said, 75) == "Why did the chicken cross the road?"
    # Longer than the sentence, but made of the robot's words: the nearest sentence is named.
    assert echo_of("Okay, why did the chicken cross the road?", said, 75) == said[1]
    assert echo_of("wave your right hand", said, 75) is None


def _feed(audio: np.ndarray, ep: Endpointer) -> list:
    """Every update of Silero VAD + ``ep`` over ``audio``, one 32 ms frame at a time."""
    vad = SileroFrameVAD()
    return [
        ep.feed(audio[i : i + FRAME], vad(audio[i : i + FRAME]))
        for i in range(0, audio.size - FRAME + 1, FRAME)
    ]


def test_streaming_vad_finds_the_command_with_pre_roll(fixtures_dir):
    audio = decode_file(fixtures_dir / "commands" / "joke.wav")
    audio = np.concatenate([np.zeros(8000, np.float32), audio, np.zeros(16000, np.float32)])
    ups = [u for u in _feed(audio, Endpointer(VADConfig())) if u.started or u.ended]
    starts, ends = [u for u in ups if u.started], [u for u in ups if u.ended]
    assert len(starts) == 1 and len(ends) == 1
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    cfg = VADConfig()
    batch = get_speech_timestamps(
        audio,
        VadOptions(
            threshold=cfg.threshold,
            min_silence_duration_ms=cfg.min_silence_ms,
            speech_pad_ms=cfg.speech_pad_ms,
        ),
    )[0]  # faster-whisper's batch VAD
    assert abs(ends[0].end_sample / 16 - batch["end"] / 16) < 500
    # pre-roll: the utterance starts at least 300 ms before the confirmed speech start
    assert ends[0].audio.size / 16 >= (ends[0].end_sample - starts[0].start_sample) / 16 + 300


def test_each_pause_is_transcribed_early_then_judged_under_one_id(fixtures_dir):
    """Early ASR: at 96 ms of silence the utterance so far goes to ASR, at 200 ms the same pause is judged."""
    audio = decode_file(fixtures_dir / "audio" / "jfk.flac")  # pauses of 0.64-1.12 s inside one sentence
    ups = [u for u in _feed(audio, Endpointer(VADConfig(), 200, 1600, 96)) if u.early or u.paused]
    early, paused = [u for u in ups if u.early], [u for u in ups if u.paused]
    assert len(paused) >= 3 and [u.pause_id for u in paused] == list(range(1, len(paused) + 1))
    for judged in paused:  # every judged pause was transcribed earlier, three frames shorter
        first = next(u for u in early if u.pause_id == judged.pause_id)
        assert ups.index(first) == ups.index(judged) - 1
        assert judged.audio.size - first.audio.size == 3 * FRAME
    # Without early ASR the same pauses are reported once each, at 200 ms.
    late = _feed(audio, Endpointer(VADConfig(), 200, 1600))
    assert [u.pause_id for u in late if u.paused] == [u.pause_id for u in paused]
    assert not any(u.early for u in late)


def test_smart_turn_hears_each_pause_first_under_the_same_id(fixtures_dir):
    """At 32 ms of silence the pause's audio is reported for Smart Turn, before its early ASR at 96 ms."""
    audio = decode_file(fixtures_dir / "audio" / "jfk.flac")
    ups = _feed(audio, Endpointer(VADConfig(), 200, 1600, 96, 32))
    heard = [u for u in ups if u.audio_check]
    early, paused = [u for u in ups if u.early], [u for u in ups if u.paused]
    assert len(paused) >= 3
    assert {u.pause_id for u in paused} <= {u.pause_id for u in heard}
    for judged in paused:
        first = next(u for u in heard if u.pause_id == judged.pause_id)
        asr = next(u for u in early if u.pause_id == judged.pause_id)
        assert first.audio.size == asr.audio.size - 2 * FRAME == judged.audio.size - 5 * FRAME
        assert ups.index(first) < ups.index(asr) < ups.index(judged)
    # The same pauses under the same ids as without the Smart Turn report.
    plain = _feed(audio, Endpointer(VADConfig(), 200, 1600, 96))
    assert [u.pause_id for u in plain if u.paused] == [u.pause_id for u in paused]
    assert not any(u.audio_check for u in plain)


def test_smart_turn_must_hear_a_pause_by_its_judgement():
    with pytest.raises(ValueError, match="smart_turn_ms"):
        TurnConfig(short_silence_ms=200, smart_turn_ms=232)
    assert TurnConfig(smart_turn_ms=0).smart_turn_ms == 0
    assert TurnConfig(short_silence_ms=200, smart_turn_ms=200).smart_turn_ms == 200


def test_early_asr_must_come_before_the_judgement():
    with pytest.raises(ValueError, match="early_asr_ms"):
        TurnConfig(short_silence_ms=200, early_asr_ms=200)
    assert TurnConfig(early_asr_ms=0).early_asr_ms == 0


def test_echo_gate_tells_playback_from_a_person(fixtures_dir):
    voice = decode_file(fixtures_dir / "commands" / "joke.wav")
    other = decode_file(fixtures_dir / "commands" / "nod.wav")
    gate = EchoGate(max_delay_ms=800, tail_ms=500)
    t = 100.0
    gate.add_reference(voice[:16000], t)
    delay = 3200  # 200 ms speaker-to-mic
    echo = 0.6 * voice[16000 - 4096 - delay : 16000 - delay]
    assert gate.user_share(echo, t) < 0.2
    assert gate.user_share(other[8000 : 8000 + 4096], t) > 0.8
    assert gate.user_share(echo, t + 1.0) == 1.0  # past the tail: no guard
