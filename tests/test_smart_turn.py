"""Smart Turn v3.2 end-of-turn model on known cases (agent/listening/smart_turn.py).

The model is fed what the endpointer will feed it: the turn's audio up to the end of speech plus
200 ms of the silence that follows (a pause the VAD has just seen). Mid-sentence cuts are
followed by 200 ms of digital silence. Cut times were found with faster-whisper tiny.en word
timestamps; every cut here was checked to give the same verdict anywhere within ±60 ms.

Probabilities measured here (onnxruntime 1.32, x86), complete > 0.5:

* espeak-ng commands at end of speech + 200 ms: dance 0.93, joke 0.93, look_left 0.99, stop 0.63,
  time 0.72, timer 0.86 (complete, right). The model gets these wrong (robotic prosody):
  nod 0.03, turn_then_wave 0.15, wave_right 0.14, what_see 0.04 — not tested.
* espeak-ng commands cut mid-sentence: "... to the right and then" 0.03, "Nod your head if" 0.02,
  "Can you dance" 0.13 (incomplete, right). It gets some short cuts wrong: "What time is" 0.83,
  "Tell me a short" 0.98, "Tell me" 0.97 — not tested.
* Real speech (jfk.flac) at the VAD's pauses (200 ms): "... my fellow Americans," 0.96 (judged
  complete: wrong, and not tested), "... ask not" 0.02, "... can do for you," 0.03 (incomplete,
  right), the whole sentence 0.97 (complete, right).
* Real speech (stereo_diarization.wav): both sentences complete (0.97, 0.98); "He began a confused
  complaint against the" 0.02 and "... the wizard, who" 0.07 incomplete. Wrong, not tested:
  "The horizon seems extremely" 0.88.
* piper en_US-joe-medium, whose output differs from run to run: "Turn your head to the left and
  then" alone 0.09-0.95 (median 0.47 over 12 syntheses) and the whole "... and then wave with
  your right hand." 0.02-0.93 (median 0.46): a coin toss, not tested. The whole sentence cut
  after "then" was 0.01-0.05 in 10 of 10 syntheses: tested.
"""

from __future__ import annotations

import importlib.util
import wave
from pathlib import Path

import numpy as np
import pytest

from agent.config import VADConfig
from agent.listening import smart_turn as st
from agent.listening.smart_turn import EndOfTurnModelMissing, SmartTurn, find_smart_turn_model
from agent.listening.vad import find_utterances
from agent.pipeline.heap import HeapTrimmer
from agent.speech.audio import decode_file

RATE = st.SAMPLE_RATE
PAUSE = np.zeros(RATE // 5, dtype=np.float32)  # 200 ms: the short silence before the model is asked
VAD_200MS = VADConfig(min_silence_ms=200, speech_pad_ms=0)


@pytest.fixture(scope="module")
def model() -> SmartTurn:
    return SmartTurn()


def ends_of_speech(audio: np.ndarray) -> list[int]:
    """Sample index of each end of speech the VAD finds after a 200 ms pause."""
    return [u.end_sample for u in find_utterances(audio, VAD_200MS)]


def at_pause(audio: np.ndarray, end: int) -> np.ndarray:
    """The audio up to ``end`` plus the 200 ms after it, as the endpointer will see it."""
    return audio[: end + PAUSE.size]


def cut(audio: np.ndarray, seconds: float) -> np.ndarray:
    """The audio up to ``seconds``, then 200 ms of silence."""
    return np.concatenate([audio[: int(seconds * RATE)], PAUSE])


def stereo_channels(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with wave.open(str(path)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (2, 2, RATE)
        x = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).reshape(-1, 2)
    x = x.astype(np.float32) / 32768
    return np.ascontiguousarray(x[:, 0]), np.ascontiguousarray(x[:, 1])


# --- the model file and its input -------------------------------------------------------------


def test_packaged_model_is_found():
    path = find_smart_turn_model()
    assert path is not None, f"install the model: {st.INSTALL_HINT}"
    assert path.name == "smart-turn-v3.2-cpu.onnx"
    assert path.stat().st_size == 8_679_182


def test_missing_model_file_raises_clear_error(tmp_path):
    missing = tmp_path / "smart-turn.onnx"
    with pytest.raises(EndOfTurnModelMissing, match="smart-turn.onnx") as info:
        SmartTurn(model_path=missing)
    assert isinstance(info.value, FileNotFoundError)
    assert "pipecat-ai" in str(info.value)


def test_missing_package_raises_install_hint(monkeypatch):
    monkeypatch.setattr(st, "find_smart_turn_model", lambda: None)
    with pytest.raises(EndOfTurnModelMissing, match=r"launch/setup\.sh run .*pipecat-ai 1\.14\.0 wheel") as e:
        SmartTurn()
    assert str(st.UNPACKED) in str(e.value) and "smart_turn_model" in str(e.value)


def test_the_file_set_up_unpacked_is_found_without_pipecat(monkeypatch, tmp_path):
    """Set-up unpacks only the model (launch/setup.sh): no pipecat package needs to be installed."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "pipecat" else real(name))
    assert find_smart_turn_model(tmp_path) is None
    onnx = tmp_path / "data" / "smart-turn-v3.2-cpu.onnx"
    onnx.parent.mkdir()
    onnx.write_bytes(b"model")
    assert find_smart_turn_model(tmp_path) == onnx


def test_not_an_onnx_file_raises(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(RuntimeError, match="cannot load the Smart Turn model"):
        SmartTurn(model_path=bad)


def test_window_keeps_the_last_8_s_and_pads_at_the_start():
    short = np.ones(RATE, dtype=np.float32)
    w = st.last_window(short)
    assert w.shape == (st.WINDOW_SAMPLES,) and w.dtype == np.float32
    assert not w[:-RATE].any() and w[-RATE:].all()
    long = np.arange(10 * RATE, dtype=np.float32)
    assert np.array_equal(st.last_window(long), long[-st.WINDOW_SAMPLES :])
    with pytest.raises(ValueError, match="mono"):
        st.last_window(np.zeros((2, RATE), dtype=np.float32))


def test_features_match_pipecat(fixtures_dir):
    """faster-whisper's extractor, set up as in smart_turn.py, equals pipecat's own features."""
    path = find_smart_turn_model()
    assert path is not None
    ref_file = path.parent.parent / "_whisper_features.py"  # pipecat's numpy copy of transformers'
    spec = importlib.util.spec_from_file_location("pipecat_whisper_features", ref_file)
    assert spec is not None and spec.loader is not None
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)  # numpy only: pipecat itself is not imported
    for audio in (
        decode_file(fixtures_dir / "audio/jfk.flac"),
        decode_file(fixtures_dir / "commands/joke.wav"),
    ):
        ours = st.smart_turn_features(audio)
        theirs = ref.compute_whisper_log_mel_features(st.last_window(audio), do_normalize=True)
        assert ours.shape == theirs.shape == (st.N_MELS, st.N_FRAMES)
        assert np.abs(ours - theirs).max() < 1e-4


def test_probability_api(model):
    with pytest.raises(ValueError, match="no audio"):
        model.probability(np.zeros(0, dtype=np.float32))
    with pytest.raises(ValueError, match="mono"):
        model.probability(np.zeros((2, RATE), dtype=np.float32))
    p = model.probability(np.zeros(RATE, dtype=np.float32))
    assert 0.0 <= p <= 1.0
    assert model.last_ms > 0


def _resident_mib() -> float:
    """This process's resident set, MiB (``VmRSS`` in /proc/self/status), after glibc gives
    back its free pages (so freed numpy buffers do not count)."""
    HeapTrimmer().trim_now()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS line in /proc/self/status")


@pytest.mark.skipif(
    not Path("/proc/self/status").is_file() or not HeapTrimmer().available,
    reason="needs Linux /proc and glibc's malloc_trim",
)
def test_loaded_model_does_not_grow_on_its_first_calls():
    # The judge may first ask Smart Turn hundreds of turns into a run: that call must not grow
    # the process (without the warm-up at load: +25 MiB on the first call, +17 on the second).
    rng = np.random.default_rng(7)
    clips = [rng.standard_normal(int(s * RATE)).astype(np.float32) * 0.1 for s in (0.5, 3, 8, 11)]
    fresh = SmartTurn()
    before = _resident_mib()
    for clip in clips:
        assert 0.0 <= fresh.probability(clip) <= 1.0
    assert _resident_mib() - before < 6.0


# --- known cases --------------------------------------------------------------------------------


# Not "timer": Smart Turn gives its 200 ms pause 0.35 (0.87 at 400 ms) with onnxruntime 1.32,
# which is why the judge never ends or holds a turn on Smart Turn alone; its words end it
# (test_end_of_turn.py::test_finished_commands_score_as_finished_text).
@pytest.mark.parametrize("name", ["dance", "joke", "look_left", "stop", "time"])
def test_complete_command_is_complete(model, fixtures_dir, name):
    audio = decode_file(fixtures_dir / "commands" / f"{name}.wav")
    (end,) = ends_of_speech(audio)
    assert model.is_complete(at_pause(audio, end))


@pytest.mark.parametrize(
    ("name", "seconds", "heard"),
    [
        ("turn_then_wave", 3.42, "Turn your head thirty degrees to the right and then"),
        ("nod", 1.42, "Nod your head if"),
        ("dance", 1.24, "Can you dance"),
    ],
)
def test_command_cut_mid_sentence_is_not_complete(model, fixtures_dir, name, seconds, heard):
    audio = decode_file(fixtures_dir / "commands" / f"{name}.wav")
    assert not model.is_complete(cut(audio, seconds)), heard


def test_jfk_pauses_before_the_end_are_not_complete(model, fixtures_dir):
    audio = decode_file(fixtures_dir / "audio/jfk.flac")
    ends = ends_of_speech(audio)
    # "And so my fellow Americans, | ask | not | what your country can do for you, | ask what you
    # can do for your country." The model judges the first pause complete (0.96), not tested.
    # The short "ask" starts speech of its own since the VAD starts with Silero's hysteresis.
    assert [round(e / RATE, 1) for e in ends] == [2.2, 3.7, 4.3, 7.6, 10.5]
    probs = [model.probability(at_pause(audio, e)) for e in ends]
    assert all(p < 0.5 for p in probs[1:-1]), probs
    assert probs[-1] > 0.5, probs


def test_real_speech_sentences(model, fixtures_dir):
    left, right = stereo_channels(fixtures_dir / "audio/stereo_diarization.wav")
    for audio in (left, right):  # two whole sentences, one per channel
        assert model.is_complete(at_pause(audio, ends_of_speech(audio)[-1]))
    # "He began a confused complaint against the wizard, who had vanished behind the curtain on the left."
    assert not model.is_complete(cut(left, 2.18)), "He began a confused complaint against the"
    assert not model.is_complete(cut(left, 2.88)), "He began a confused complaint against the wizard, who"


def test_piper_sentence_cut_after_and_then_is_not_complete(model):
    import soxr
    from faster_whisper import WhisperModel

    from agent.models import resolve_model
    from agent.speech.tts import PiperTTS

    tts = PiperTTS(resolve_model("packaged:piper-joe-medium"))
    chunks = list(tts.synthesize("Turn your head to the left and then wave with your right hand."))
    pcm = np.concatenate([c.audio for c in chunks]).astype(np.float32) / 32768
    audio = soxr.resample(pcm, chunks[0].sample_rate, RATE).astype(np.float32)
    asr = WhisperModel(
        str(resolve_model("packaged:whisper-tiny.en")), device="cpu", compute_type="int8", cpu_threads=2
    )
    segments, _ = asr.transcribe(audio, word_timestamps=True, beam_size=1, language="en")
    words = [(w.word.strip(" ,.").lower(), w.end) for s in segments for w in s.words]
    then_end = next(end for word, end in words if word == "then")
    assert not model.is_complete(cut(audio, then_end)), words
