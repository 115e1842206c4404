"""The whole-utterance echo test (:meth:`EchoGate.echo_share`) on real voices.

The robot's voice is the product's piper voice; the user's are the test data's spoken
commands (real people). The default threshold (:data:`ECHO_TEXT_MIN_SHARE`) must sit between
what a person's command scores over the robot's unrelated speech (the mic hears no robot: the
soak's case, issue 22's turn 103) and what the robot's own echo scores through a room.
"""

from __future__ import annotations

import numpy as np
import pytest
import soxr

from agent.config.live import ECHO_TEXT_MIN_SHARE
from agent.listening.echo import EchoGate
from agent.models import resolve_model
from agent.speech.audio import SAMPLE_RATE, decode_file
from tools.bench.turn_set import VOICES, Synthesizer

STORY = (
    "Once upon a time there was a curious cat named Whiskers. Every morning she climbed the old "
    "oak tree to watch the sun come up. One day she found a tiny bird that had lost its way. She "
    "wondered what time it was, and whether the bird's mother would come back."
)
BLOCK = 320  # playback reported in 20 ms blocks, as the speaker does
T0 = 1000.0  # wall time of the first playback sample, s


@pytest.fixture(scope="module")
def robot_voice() -> np.ndarray:
    audio = Synthesizer(resolve_model("packaged:piper-joe-medium")).speak(STORY, VOICES[0])
    assert audio.size > 10 * SAMPLE_RATE
    return audio.astype(np.float32)


def _played(ref: np.ndarray) -> EchoGate:
    """A gate that heard ``ref`` played from :data:`T0` on, block by block."""
    gate = EchoGate(max_delay_ms=800, tail_ms=600, history_s=40.0)
    for i in range(0, ref.size - BLOCK + 1, BLOCK):
        gate.add_reference(ref[i : i + BLOCK], T0 + (i + BLOCK) / SAMPLE_RATE)
    return gate


def _room(rt60_s: float, drr_db: float, rng: np.random.Generator) -> np.ndarray:
    """A speaker-to-mic impulse response: a direct path 20 ms out, then a decaying diffuse tail
    (exponential, ``rt60_s`` to -60 dB) ``drr_db`` below it in energy."""
    n = int(SAMPLE_RATE * rt60_s)
    t = np.arange(n) / SAMPLE_RATE
    tail = rng.standard_normal(n) * np.exp(-6.9 * t / rt60_s)
    tail[: SAMPLE_RATE // 200] = 0.0  # the first reflections come after 5 ms
    h = tail / np.sqrt(np.sum(tail**2)) * 10 ** (-drr_db / 20)
    h[0] += 1.0
    return np.concatenate([np.zeros(SAMPLE_RATE // 50), h]).astype(np.float32)


def test_a_persons_command_over_the_robots_unrelated_speech_is_not_its_echo(fixtures_dir, robot_voice):
    gate = _played(robot_voice)
    shares = []
    for k, wav in enumerate(sorted((fixtures_dir / "commands").glob("*.wav"))):
        user = decode_file(wav)
        for offset_s in (1.0, 4.5):  # said over two stretches of the story
            end = int((offset_s + (0.37 * k) % 3) * SAMPLE_RATE) + user.size
            assert end < robot_voice.size
            shares.append(gate.echo_share(user, T0 + end / SAMPLE_RATE, slack_s=0.464))
    assert len(shares) >= 20
    assert max(shares) < ECHO_TEXT_MIN_SHARE / 1.5, sorted(shares)


@pytest.mark.parametrize("rt60_s", [0.3, 0.6, 1.2])
@pytest.mark.parametrize("drr_db", [-3.0, 0.0, 6.0])
def test_the_robots_own_voice_through_a_room_is_its_echo(robot_voice, rt60_s, drr_db):
    rng = np.random.default_rng(7)
    echo = np.convolve(robot_voice, _room(rt60_s, drr_db, rng))[: robot_voice.size]
    echo = np.tanh(2.0 * echo) / 2.0  # a small speaker's soft clipping
    echo = 0.3 * echo / np.max(np.abs(echo)) + 0.003 * rng.standard_normal(echo.size)
    mic = soxr.resample(soxr.resample(echo, SAMPLE_RATE, 48000), 48000, SAMPLE_RATE).astype(np.float32)
    gate = _played(robot_voice)
    for start_s in (0.5, 3.0, 6.0):  # 2.5 s utterances of the echo
        a, b = int(start_s * SAMPLE_RATE), int((start_s + 2.5) * SAMPLE_RATE)
        share = gate.echo_share(mic[a:b], T0 + b / SAMPLE_RATE + 0.2, slack_s=0.464)
        assert share >= 1.5 * ECHO_TEXT_MIN_SHARE, (start_s, share)


def test_nothing_played_then_nothing_explained(robot_voice):
    gate = _played(robot_voice)
    later = T0 + robot_voice.size / SAMPLE_RATE + 50.0  # the history holds 40 s
    assert gate.echo_share(robot_voice[: 2 * SAMPLE_RATE], later) == 0.0
    assert gate.echo_share(np.zeros(SAMPLE_RATE, np.float32), T0 + 2.0) == 0.0
