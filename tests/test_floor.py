"""Holding the floor: what speech over the robot is, the speaker's pause and resume, the pace of waits.

The words' kinds are checked on a table and on real Whisper transcripts of espeak-ng clips (the
early window the turn-taking stage sends, and the whole word); the speaker's pause and resume on a
real :class:`~agent.audio_io.speaker.Speaker` whose callback the test calls, as PortAudio would.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from agent.audio_io.fake import FakeBackend
from agent.audio_io.speaker import PlayItem, Speaker
from agent.config import AudioConfig, load_config
from agent.listening.floor import (
    BACKCHANNEL,
    INTERRUPTION,
    NOTHING,
    UNDECIDED,
    early_kind,
    heard_words,
    is_laugh,
    is_question,
    may_become_acknowledgement,
    overlap_kind,
)
from agent.listening.pace import (
    DOUBTFUL,
    NORMAL,
    STOP,
    STRONG,
    UNFINISHED,
    PauseModel,
    evidence,
    pause_model,
    wait_ms,
)
from tools.bench.turn_set import espeak_ng


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Uh-huh.", BACKCHANNEL),
        ("Mm-hmm.", BACKCHANNEL),
        ("Yeah.", BACKCHANNEL),
        ("Right.", BACKCHANNEL),
        ("Okay.", BACKCHANNEL),
        ("I see.", BACKCHANNEL),
        ("Yeah, yeah, got it.", BACKCHANNEL),
        ("Oh, wow.", BACKCHANNEL),
        ("Hmm.", BACKCHANNEL),
        ("", NOTHING),
        ("(laughs)", NOTHING),
        ("[Laughter]", NOTHING),
        ("Ha ha ha.", NOTHING),
        ("*coughs*", NOTHING),
        ("Wait.", INTERRUPTION),
        ("Stop.", INTERRUPTION),
        ("No, the other hand.", INTERRUPTION),
        ("What time is it?", INTERRUPTION),
        ("Yeah, but wait.", INTERRUPTION),
        ("Okay, now look to the left.", INTERRUPTION),
        ("Hold on.", INTERRUPTION),
        ("Can you wave instead?", INTERRUPTION),
    ],
)
def test_what_speech_over_the_robot_is(text, kind):
    assert overlap_kind(text) == kind


@pytest.mark.parametrize(
    ("text", "heard", "kind"),
    [
        # a loop on a clipped "Got it.", its last repeat cut by the token limit
        ("Got it Got it Got it Got it Got it Got", ["got", "it"], BACKCHANNEL),
        ("Yeah yeah yeah yeah yeah yeah.", ["yeah"], BACKCHANNEL),
        ("I see, I see, I", ["i", "see"], BACKCHANNEL),
        ("the the", ["the"], INTERRUPTION),  # a cough heard as words is still words
        ("No, no, no, no, no, wave.", ["no", "wave"], INTERRUPTION),
        ("Wave, got it, got it, got", ["wave", "got", "it"], INTERRUPTION),  # a loop after other words
        ("Turn your head, turn", ["turn", "your", "head", "turn"], INTERRUPTION),  # no loop: kept
        ("Yeah, yeah, I see, right, okay.", ["yeah", "i", "see", "right", "okay"], BACKCHANNEL),
    ],
)
def test_whispers_loops_count_once(text, heard, kind):
    assert heard_words(text) == heard
    assert overlap_kind(text) == kind


@pytest.mark.parametrize(
    ("text", "laugh"),
    [
        ("Ha ha ha!", True),
        ("Heh heh.", True),
        ("(laughs)", True),
        ("[Laughter]", True),
        ("*coughs*", False),
        ("", False),
        ("Ha ha, wave.", False),
        ("Haha, that's funny.", False),
    ],
)
def test_a_laugh_alone_is_told_from_words(text, laugh):
    assert is_laugh(text) is laugh


def test_an_answer_to_the_robots_question_is_no_acknowledgement():
    assert overlap_kind("Yes.", robot_asked=True) == INTERRUPTION
    assert overlap_kind("Okay.", robot_asked=True) == INTERRUPTION
    assert overlap_kind("Mm-hmm.", robot_asked=True) == BACKCHANNEL  # no answer in it
    assert overlap_kind("Yes.") == BACKCHANNEL
    assert is_question("Shall I dance for you?") and not is_question("I can dance.")


def test_a_guess_at_a_noise_is_nothing_and_a_sure_word_is_not():
    assert overlap_kind("Them.", unsure=True) == NOTHING  # Whisper guessing at a hum
    assert overlap_kind("Them.") == INTERRUPTION


# --- the speaker's pause and resume -------------------------------------------------------------------
def _speaker() -> tuple[Speaker, list[PlayItem]]:
    sp = Speaker(AudioConfig(output_sample_rate=16000), FakeBackend())
    sp.rate, sp._stream = 16000, object()  # opened, without a stream thread: the test is the callback
    items = [PlayItem(1, "One two.", "One two."), PlayItem(1, "Three four.", "Three four.")]
    for i, it in enumerate(items):
        sp.enqueue(it, np.full(1600, 0.1 * (i + 1), np.float32), 16000)
    return sp, items


def _play(sp: Speaker, frames: int) -> np.ndarray:
    out = np.zeros((frames, 1), np.float32)
    sp._fill(out, frames, None)
    return out[:, 0]


def test_a_paused_speaker_falls_silent_keeps_its_queue_and_resumes_from_the_sentence_start():
    sp, (first, second) = _speaker()
    assert np.allclose(_play(sp, 1000), 0.1)
    cut = sp.pause()
    assert cut is first and first.pos == 0 and sp.paused and sp.busy
    assert not np.any(_play(sp, 800))  # silent, nothing consumed
    assert first.pos == 0 and list(sp._items) == [first, second]
    sp.resume()
    out = _play(sp, 2000)
    assert np.allclose(out[:1600], 0.1) and np.allclose(out[1600:], 0.2)  # the whole first sentence again
    assert sp.pause() is second and second.pos == 0  # 400 samples in: cut and rewound
    assert sp.clear() == [second] and not sp.paused  # a clear ends the pause: the next turn plays


def test_pausing_between_sentences_cuts_nothing():
    sp, _ = _speaker()
    assert sp.pause() is None and sp.paused  # nothing played yet
    sp.resume()
    assert np.allclose(_play(sp, 1600), 0.1)


# --- the pace of waits -----------------------------------------------------------------------------------
def test_the_pause_model_is_an_exponential_average_bounded_as_livekits():
    m = PauseModel(0.9, 500, 3000)
    assert m.value_ms == 500 and m.extra_ms == 0
    assert m.observe(300) == 500  # a brisk pause: the lower bound holds
    assert m.observe(1500) == pytest.approx(600)
    for _ in range(200):
        m.observe(10_000)
    assert m.value_ms == 3000 and m.extra_ms == 2500
    m.reset()
    assert m.value_ms == 500 and m.samples == 0
    with pytest.raises(ValueError):
        PauseModel(0.0)
    with pytest.raises(ValueError):
        PauseModel(0.9, 800, 500)
    turn = load_config().turn
    assert (
        pause_model(turn) is not None and pause_model(turn.model_copy(update={"learn_pauses": False})) is None
    )


@pytest.mark.parametrize(
    ("rule", "complete", "text", "smart", "unclear", "heard", "level"),
    [
        ("stop", True, 1.0, 0.1, False, "stop", STOP),
        ("continuation", False, -3.0, 0.9, False, "and then", UNFINISHED),
        ("text", True, -0.2, 0.9, False, "look up", STRONG),  # the words and the sound agree
        ("text", True, -0.2, 0.1, False, "what time is it?", STRONG),  # a question
        ("text", True, -0.2, 0.1, False, "look up", NORMAL),  # flat prosody: the words alone
        ("text", True, -0.48, 0.43, False, "turn your head to the left", NORMAL),  # bench --turns paused_00
        ("text", True, -0.9, 0.97, False, "look up", NORMAL),  # the words less sure
        ("text", True, -0.2, 0.9, True, "come your way", DOUBTFUL),  # Whisper unclear
        ("smart_turn", True, -1.3, 0.97, False, "look at the left", DOUBTFUL),
    ],
)
def test_the_evidence_of_a_verdict(rule, complete, text, smart, unclear, heard, level):
    assert evidence(load_config().turn, rule, complete, text, smart, unclear, heard) == level


def test_waits_by_evidence_grow_with_the_speakers_pauses():
    turn = load_config().turn
    base = {STOP: 0, STRONG: turn.strong_confirm_ms, NORMAL: turn.confirm_ms}
    base |= {DOUBTFUL: turn.doubtful_confirm_ms, UNFINISHED: turn.long_silence_ms}
    assert base[STRONG] < base[NORMAL] < base[DOUBTFUL] < base[UNFINISHED]
    for level, ms in base.items():
        assert wait_ms(turn, level) == ms
        assert wait_ms(turn, level, 400) == (ms + 400 if ms else 0)  # a stop never waits
    longest = turn.pause_max_ms + turn.short_silence_ms
    assert wait_ms(turn, UNFINISHED, 10_000) == longest
    off = turn.model_copy(update={"strong_confirm_ms": 0})
    assert evidence(off, "text", True, -0.2, 0.9, False, "look up") == NORMAL


# --- the words of real clips -------------------------------------------------------------------------------
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")


@pytest.fixture(scope="module")
def asr():
    from agent.models import resolve_model
    from agent.speech.asr import WhisperASR

    cfg = load_config()
    return WhisperASR(resolve_model(cfg.asr.model, "ASR"), cfg.asr, ["wave", "nod", "look", "dance"])


@needs_espeak
@pytest.mark.parametrize(
    ("said", "voice", "kind"),
    [
        ("Uh-huh.", "en-us", BACKCHANNEL),
        ("Yeah.", "en-gb", BACKCHANNEL),
        ("Okay.", "en-us+f3", BACKCHANNEL),
        ("Mm hmm.", "en-us", BACKCHANNEL),
        ("Wait, stop talking.", "en-us", INTERRUPTION),
        ("No, the other hand.", "en-gb", INTERRUPTION),
        ("What time is it?", "en-us+f3", INTERRUPTION),
    ],
)
def test_whisper_hears_what_the_speech_over_the_robot_is(asr, said, voice, kind):
    """The words as the ASR stage takes them: the whole utterance after 320 ms of silence (its
    pre-roll) with 400 ms of padding, as an overlap check sends them."""
    from agent.pipeline.asr_stage import OVERLAP_MAX_TOKENS, PAUSE_PAD

    audio = np.concatenate(
        [np.zeros(5120, np.float32), espeak_ng(said, voice), np.zeros(PAUSE_PAD, np.float32)]
    )
    window = load_config().asr.overlap_context_s
    check = asr.transcribe(audio, context_s=window, fallback=False, max_tokens=OVERLAP_MAX_TOKENS)
    for res in (asr.transcribe(audio), check):
        got = overlap_kind(res.text, res.unsure)  # the whole window, and the overlap check's own
        if (
            kind == BACKCHANNEL
        ):  # a lone "okay" is dropped as a sign-off hallucination: no words, no stop either
            assert got in (BACKCHANNEL, NOTHING), res
        else:
            assert got == kind, res


@pytest.mark.parametrize(
    ("text", "maybe"),
    [
        ("Got", True),  # "got it", cut
        ("I", True),  # "I see"
        ("Yeah, I", True),
        ("That's", True),
        ("Got it.", False),  # whole: an acknowledgement already
        ("I want you to wave.", False),
        ("Wait", False),
        ("No", False),
        ("Turn", False),
        ("", False),
    ],
)
def test_an_acknowledgement_cut_by_the_early_check_is_not_yet_an_interruption(text, maybe):
    assert may_become_acknowledgement(text) is maybe


@pytest.mark.parametrize(
    ("text", "unsure", "asked", "kind"),
    [
        ("Got", False, False, UNDECIDED),  # cut: the next check decides
        ("Got", False, True, INTERRUPTION),  # after the robot's question any word answers
        ("that em", True, False, UNDECIDED),  # a guess at "Wait." is no "nothing" yet
        ("ha ha", True, False, NOTHING),  # a guessed laugh is still a laugh
        ("", False, False, UNDECIDED),  # no words yet: the next check, or barge_in_ms, decides
        ("(coughs)", False, False, UNDECIDED),
        ("Wait.", False, False, INTERRUPTION),
        ("Wait.", True, False, INTERRUPTION),  # a stop word, even guessed
        ("Yeah.", False, False, BACKCHANNEL),
        ("But", True, False, UNDECIDED),  # a lone opener, guessed: a misheard "Uh-huh", or "But the..."
        ("But", False, False, INTERRUPTION),  # heard surely, it wants the floor
        ("and", False, False, INTERRUPTION),
        ("But the", True, False, INTERRUPTION),  # words after it: it opens something
        ("Stop", False, False, INTERRUPTION),  # a stop word alone stays one
    ],
)
def test_the_early_words_are_undecided_where_the_next_check_may_tell(text, unsure, asked, kind):
    assert early_kind(text, unsure, asked) == kind
