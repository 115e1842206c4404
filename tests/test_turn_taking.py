"""Turn-taking and the work tracker at the stage level: messages in, messages out, no threads.

The turn-taking stage is fed :class:`~agent.events.VoiceFrame` messages with chosen speech
probabilities (32 ms each) and :class:`~agent.events.PauseTranscript` answers, as the listener
and the ASR stage send them; what it puts in the ASR stage's queue and publishes is checked
field by field. Its judge is the real :class:`~agent.listening.end_of_turn.EndOfTurnJudge`
without models, whose word rules (a stop phrase, a trailing conjunction, nothing heard) decide
by themselves; the confirmation tests give it the real text model (SmolLM2-135M).
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from agent.config import load_config
from agent.control import CpuArbiter
from agent.events import (
    Event,
    Hold,
    InputEnded,
    InputStarted,
    Interrupt,
    OverlapCheck,
    OverlapTranscript,
    PauseCheck,
    PauseTranscript,
    PauseVerdict,
    Resume,
    Skipped,
    TurnConfirmed,
    Utterance,
    VoiceFrame,
)
from agent.listening.end_of_turn import EndOfTurnJudge, TextEndOfTurn
from agent.listening.floor import BACKCHANNEL, INTERRUPTION, UNDECIDED
from agent.listening.pace import DOUBTFUL, NORMAL, STRONG, PauseModel, command_wait_ms
from agent.listening.smart_turn import SmartTurn
from agent.listening.vad import FRAME
from agent.models import resolve_model
from agent.pipeline.queues import StageQueue, TurnGate
from agent.pipeline.turn_taking import TurnTaking, confirm_ms
from agent.pipeline.turn_taking import unclear as unclear_words
from agent.pipeline.work import WorkTracker
from agent.speech.asr import ASRResult


class Speaker:
    """The sink's ``busy`` (audio queued or playing) and ``paused`` (held), set by the test."""

    def __init__(self, busy: bool = False) -> None:
        self.busy = busy
        self.paused = False


# --- the work tracker ----------------------------------------------------------------------------------
def test_items_and_the_current_turn_make_the_pipeline_busy():
    work = WorkTracker(Speaker())
    assert not work.busy() and work.quiet() and work.wait_idle(0.01)
    work.started()
    assert work.busy() and not work.quiet() and not work.wait_idle(0.05)
    work.turn_started(3)
    work.finished()
    assert work.busy() and work.current_turn == 3  # the turn itself is in flight
    assert work.take_current() == 3 and work.current_turn is None and work.take_current() is None
    assert not work.busy()
    work.turn_started(4)
    work.turn_over(2)  # an older turn's end changes nothing
    assert work.current_turn == 4
    work.turn_over(4)
    assert not work.busy()
    work.finished()  # never below zero
    assert work.items == 0


def test_the_floor_is_free_only_when_nobody_speaks_and_the_speaker_is_idle():
    speaker = Speaker()
    work = WorkTracker(speaker)
    work.user_speaking = True
    assert not work.quiet() and work.model_free()  # an early start may run while the user pauses
    work.user_speaking = False
    speaker.busy = True
    assert not work.quiet() and not work.model_free()
    speaker.busy = False
    assert work.quiet()
    work.stop()
    assert work.stopping and not work.quiet() and not work.model_free()


def test_wait_idle_ends_when_the_last_item_finishes_or_on_stop():
    work = WorkTracker()
    work.started()
    threading.Timer(0.05, work.finished).start()
    assert work.wait_idle(10.0)
    work.started()
    threading.Timer(0.05, work.stop).start()
    assert not work.wait_idle(10.0)
    assert not work.wait_input_done(0.01)
    work.input_done()
    assert work.wait_input_done(0.01)


# --- the turn-taking stage -------------------------------------------------------------------------------
class Harness:
    """A turn-taking stage driven from the test thread."""

    def __init__(
        self,
        realtime: bool = True,
        semantic: bool = True,
        early_asr_ms: int = 96,
        text: TextEndOfTurn | None = None,
        live: dict | None = None,
        pauses: PauseModel | None = None,
        smart: SmartTurn | None = None,
    ) -> None:
        cfg = load_config()
        cfg.turn.early_asr_ms = early_asr_ms
        for k, v in (live or {}).items():
            setattr(cfg.live, k, v)
        self.cfg = cfg
        gate = TurnGate()
        self.inbox, self.asr = StageQueue(gate), StageQueue(gate)
        self.published: list[Event] = []
        self.speaker = Speaker()
        self.work = WorkTracker(self.speaker)
        self.arbiter = CpuArbiter()
        judge = EndOfTurnJudge(cfg.turn, smart, text, lambda t: t.strip(" .!").lower() == "stop")
        self.stage = TurnTaking(
            cfg,
            self.inbox,
            self.asr,
            self.published.append,
            self.work,
            self.speaker,
            judge if semantic else None,
            None,
            realtime=realtime,
            barge_in=True,
            pauses=pauses,
            arbiter=self.arbiter,
        )
        self.t = 0.0

    def frames(self, n: int, prob: float, audible: bool = False) -> None:
        """``n`` frames of speech probability ``prob``; ``audible``: the robot could be heard in them."""
        for _ in range(n):
            self.t += FRAME / 16000
            samples = np.full(FRAME, 0.1 if prob else 0.0, np.float32)
            self.stage._handle(VoiceFrame(-1, samples, prob, self.t, "mic", robot_audible=audible))

    def say(self, audio: np.ndarray) -> None:
        """Real speech, ``(n,)`` float32 at 16 kHz, as speech frames (the last partial frame dropped)."""
        for i in range(audio.size // FRAME):
            self.t += FRAME / 16000
            samples = audio[i * FRAME : (i + 1) * FRAME]
            self.stage._handle(VoiceFrame(-1, samples, SPEECH, self.t, "mic"))

    def answer(self, check: PauseCheck, text: str, logprob: float = 0.0) -> None:
        result = ASRResult(text, avg_logprob=logprob, duration_ms=5.0)
        self.stage._handle(PauseTranscript(-1, check.pause_id, result))

    def taken(self) -> list[Event]:
        out = []
        while len(self.asr):
            out.append(self.asr.get(0))
        return out

    def of(self, kind: type) -> list:
        return [e for e in self.published if isinstance(e, kind)]


SPEECH, SILENCE = 0.9, 0.02
SPEECH_FRAMES = 16  # 0.5 s: speech starts after 250 ms (8 frames)
EARLY, PAUSE = 3, 6  # 96 ms and 200 ms of silence, in 32 ms frames


def test_a_finished_pause_ends_the_turn_with_its_transcript_at_once():
    h = Harness()
    h.frames(SPEECH_FRAMES, SPEECH)
    assert h.work.user_speaking
    h.frames(EARLY, SILENCE)
    [check] = h.taken()
    assert isinstance(check, PauseCheck) and check.early and check.pause_id == 1 and check.audio is not None
    h.answer(check, "Stop.")  # back before the short silence: judged when it is reached
    assert not h.of(PauseVerdict)
    h.frames(PAUSE - EARLY, SILENCE)
    [verdict] = h.of(PauseVerdict)
    assert (
        verdict.complete
        and verdict.rule == "stop"
        and verdict.text == "Stop."
        and verdict.name == "end_of_turn_check"
    )
    [utt] = h.taken()
    assert isinstance(utt, Utterance) and utt.end_rule == "stop" and utt.transcript.text == "Stop."
    assert (
        utt.source == "mic" and utt.audio.size > 8 * FRAME and utt.end_ms == pytest.approx(512.0)
    )  # 16 frames
    assert h.work.items == 1 and not h.work.user_speaking  # counted as work when handed over


def test_an_utterance_holds_the_robots_echo_only_when_the_robot_could_be_heard_in_it():
    """The ASR stage's text echo check applies only to audio taken while the robot was audible
    (issue 22's soak: "Set a timer for ten seconds" said after the robot fell silent was dropped
    as an echo of "... timer for two seconds")."""
    h = Harness()
    h.frames(40, SILENCE, audible=True)  # the robot speaks, then falls silent for 1.3 s
    h.frames(40, SILENCE)
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(PAUSE, SILENCE)
    h.answer(h.taken()[0], "Stop.")
    [after] = h.taken()
    assert isinstance(after, Utterance) and not after.robot_audible
    h.frames(SPEECH_FRAMES, SPEECH, audible=True)  # the user talks while the robot is heard
    h.frames(PAUSE, SILENCE)
    h.answer(h.taken()[0], "Stop.")
    [over] = h.taken()
    assert isinstance(over, Utterance) and over.robot_audible


def test_an_unfinished_pause_waits_and_a_silent_end_reuses_its_transcript():
    h = Harness()
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(PAUSE, SILENCE)
    [check] = h.taken()
    h.answer(check, "Turn left and then")  # after the short silence: judged on arrival
    [verdict] = h.of(PauseVerdict)
    assert not verdict.complete and verdict.rule == "continuation"
    assert not h.taken() and h.work.user_speaking
    h.frames(50, SILENCE)  # the long silence (1.6 s) ends it anyway
    [utt] = h.taken()
    assert (
        utt.end_rule == "silence"
        and utt.transcript is not None
        and utt.transcript.text == "Turn left and then"
    )


def test_a_pause_the_user_talks_through_is_stale_and_the_turn_goes_on():
    h = Harness()
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(EARLY, SILENCE)
    [early] = h.taken()
    assert not early.stale.is_set()
    h.frames(4, SPEECH)  # the user goes on before the short silence
    assert early.stale.is_set()  # the ASR stage skips it
    h.answer(early, "Stop.")  # an answer that comes anyway is ignored
    assert not h.of(PauseVerdict) and not h.taken()
    h.frames(EARLY, SILENCE)
    [second] = h.taken()
    assert second.pause_id == early.pause_id + 1
    h.frames(PAUSE - EARLY, SILENCE)
    h.answer(second, "Stop.")
    [utt] = h.taken()
    assert utt.end_rule == "stop" and utt.audio.size > (SPEECH_FRAMES + 4) * FRAME


def test_a_failed_transcript_is_an_error_verdict_and_the_turn_ends_by_silence():
    h = Harness(early_asr_ms=0)
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(PAUSE, SILENCE)
    [check] = h.taken()
    assert not check.early  # no early transcript: asked at the short silence
    h.stage._handle(PauseTranscript(-1, check.pause_id, None, "RuntimeError: boom"))
    [verdict] = h.of(PauseVerdict)
    assert not verdict.complete and verdict.rule == "error"
    assert any("boom" in e.message for e in h.published if e.name == "error")
    h.frames(50, SILENCE)
    [utt] = h.taken()
    assert utt.end_rule == "silence" and utt.transcript is None  # transcribed whole by the ASR stage


def test_silence_only_endpointing_without_a_judge():
    h = Harness(semantic=False)
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(16, SILENCE)  # [vad] min_silence_ms 500
    [utt] = h.taken()
    assert utt.end_rule == "silence" and utt.transcript is None and not h.of(PauseVerdict)


def _robot_speaking(h: Harness) -> None:
    """The user's turn is over and the robot speaks its reply."""
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(PAUSE, SILENCE)
    h.answer(h.taken()[0], "Stop.")
    h.taken()
    h.work.turn_started(7)
    h.speaker.busy = True


def _overlap_checks(h: Harness) -> list[OverlapCheck]:
    got = h.taken()
    assert all(isinstance(m, OverlapCheck) for m in got), got
    return got


def _words(h: Harness, check: OverlapCheck, text: str, kind: str) -> None:
    h.stage._handle(OverlapTranscript(-1, check.check_id, ASRResult(text, duration_ms=5.0), kind))


def test_words_over_the_robot_that_interrupt_hold_its_turn_at_once():
    h = Harness()
    _robot_speaking(h)
    assert not h.arbiter.listening
    h.frames(5, SPEECH)  # 160 ms over the robot: the words are not asked for yet
    assert not h.taken()
    assert h.arbiter.listening  # synthesis ahead of need and decoding wait while its words are checked
    h.frames(1, SPEECH)  # 192 ms: [live] overlap_words_ms
    [check] = _overlap_checks(h)
    assert check.audio.size == (10 + 6) * FRAME  # 320 ms of pre-roll and the speech
    onset = h.t - 6 * FRAME / 16000
    _words(h, check, "Wait.", INTERRUPTION)
    [hold] = h.of(Hold)
    assert hold.onset_t == pytest.approx(onset) and hold.reason == "words: 'Wait.'"
    assert not h.of(Interrupt)  # the turn is kept: the utterance decides
    assert not h.arbiter.listening  # decided: the claim is released
    h.frames(10, SPEECH)
    assert len(h.of(Hold)) == 1 and not _overlap_checks(h)  # decided: no more checks


def test_an_acknowledgement_over_the_robot_never_stops_it_and_is_marked_for_the_asr_stage():
    h = Harness()
    _robot_speaking(h)
    h.frames(6, SPEECH)
    [check] = _overlap_checks(h)
    _words(h, check, "Yeah.", BACKCHANNEL)
    h.frames(4, SPEECH)  # 320 ms: under the recheck interval
    assert not _overlap_checks(h)
    h.frames(6, SPEECH)  # 512 ms of speech: asked again (it goes on: is it still only that?)
    [again] = _overlap_checks(h)
    _words(h, again, "Yeah, yeah.", BACKCHANNEL)
    h.frames(6, SPEECH)  # 704 ms: past [live] barge_in_ms, but the words are known
    assert not h.of(Hold) and not h.of(Interrupt)
    assert h.arbiter.listening  # the test's frames take no time: the claim (1 s) has not lapsed
    h.frames(PAUSE, SILENCE)
    [pause] = [m for m in h.taken() if isinstance(m, PauseCheck)]
    h.answer(pause, "Yeah, yeah.")  # no model: unfinished, the long silence ends it
    h.frames(50, SILENCE)
    [utt] = [m for m in h.taken() if isinstance(m, Utterance)]
    assert utt.overlap and utt.transcript.text == "Yeah, yeah."  # the ASR stage makes no turn of it
    assert not h.arbiter.listening  # the overlap ended: released


def test_an_acknowledgement_the_check_cut_short_waits_for_the_next_check():
    h = Harness()
    _robot_speaking(h)
    h.frames(6, SPEECH)
    [check] = _overlap_checks(h)
    _words(h, check, "Got", UNDECIDED)  # the ASR stage's early_kind of the cut "got it"
    assert not h.of(Hold) and not h.of(Interrupt)
    h.frames(10, SPEECH)  # the recheck
    [again] = _overlap_checks(h)
    _words(h, again, "Got it.", BACKCHANNEL)
    h.frames(6, SPEECH)  # past [live] barge_in_ms: the words are known now
    assert not h.of(Hold) and not h.of(Interrupt)


def test_speech_over_the_robot_with_no_words_yet_stops_it_after_barge_in_ms():
    h = Harness()
    _robot_speaking(h)
    h.frames(6, SPEECH)
    assert len(_overlap_checks(h)) == 1  # its words are slow to come
    h.frames(12, SPEECH)  # 576 ms
    assert not h.of(Hold)
    h.frames(1, SPEECH)  # 608 ms >= [live] barge_in_ms 600
    [hold] = h.of(Hold)
    assert hold.reason == "speech"


def test_a_hold_no_utterance_came_of_resumes_after_the_users_silence():
    """Choppy speech (Silero's frames over and under the threshold in turn) held the robot with no
    words known and no utterance started: nothing will decide it but the silence ([live]
    false_interruption_ms, LiveKit's 2 s)."""
    h = Harness()
    _robot_speaking(h)
    for _ in range(19):  # 608 ms of speech frames, never 8 in a row: no utterance starts
        h.frames(1, SPEECH)
        h.frames(1, SILENCE)
    assert len(_overlap_checks(h)) == 1  # at 192 ms; its words never came
    [hold] = h.of(Hold)
    assert hold.reason == "speech"
    h.speaker.paused = True  # the pipeline held the turn
    h.frames(61, SILENCE)  # 2.0 s after the last speech frame
    assert not h.of(Resume)
    h.frames(2, SILENCE)
    [resume] = h.of(Resume)
    assert resume.reason == "timeout" and not [m for m in h.taken() if isinstance(m, Utterance)]


def test_a_word_over_the_robot_too_short_to_be_checked_early_is_checked_once_it_ends():
    h = Harness()
    _robot_speaking(h)
    h.frames(2, SPEECH)  # 64 ms: a click, never asked about
    h.frames(20, SILENCE)  # the overlap is over
    assert not h.taken()
    h.frames(4, SPEECH)  # 128 ms: under [live] overlap_words_ms, but a word ("No.")
    h.frames(2, SILENCE)
    assert not h.taken()
    h.frames(1, SILENCE)  # 96 ms of silence: it is over
    [check] = _overlap_checks(h)
    assert check.audio.size >= (10 + 4 + 3) * FRAME  # the pre-roll, the word and its end
    h.frames(3, SILENCE)
    assert not h.taken()  # asked once


def test_a_check_in_flight_keeps_the_overlap_open_for_its_words_but_not_forever():
    h = Harness()
    _robot_speaking(h)
    h.frames(4, SPEECH)
    h.frames(3, SILENCE)
    [check] = _overlap_checks(h)  # the short word, asked about at its end
    h.frames(20, SILENCE)  # 736 ms of silence: past short_silence_ms + 300, the words still due
    _words(h, check, "Stop.", INTERRUPTION)
    assert h.of(Hold)  # the late words still decided
    h2 = Harness()
    _robot_speaking(h2)
    h2.frames(4, SPEECH)
    h2.frames(3, SILENCE)
    [never] = _overlap_checks(h2)
    h2.frames(48, SILENCE)  # 1.6 s: over 500 + 1000 ms, the overlap has ended without its words
    assert not h2.arbiter.listening
    _words(h2, never, "Stop.", INTERRUPTION)
    assert not h2.of(Hold)  # an answer to an ended overlap decides nothing


def test_an_interruption_too_short_for_an_utterance_becomes_one():
    """A "Stop." or "No." over the robot shorter than [vad] min_speech_ms (250 ms) is answered,
    not resumed from as a false interruption."""
    h = Harness()
    _robot_speaking(h)
    h.frames(6, SPEECH)  # 192 ms: no utterance starts under 250 ms
    [check] = _overlap_checks(h)
    h.frames(4, SILENCE)  # the word is over before its words come back
    _words(h, check, "No.", INTERRUPTION)
    assert h.of(Hold)
    h.speaker.paused = True  # the pipeline held the turn
    h.frames(PAUSE, SILENCE)  # its pause is reported and transcribed as any other
    pauses = [m for m in h.taken() if isinstance(m, PauseCheck)]
    assert pauses and pauses[-1].audio.size >= (10 + 6 + 4) * FRAME
    h.answer(pauses[-1], "No.")
    h.frames(60, SILENCE)  # no model here: the long silence ends it
    [utt] = [m for m in h.taken() if isinstance(m, Utterance)]
    assert utt.overlap and utt.transcript is not None and utt.transcript.text == "No."
    assert not h.of(Resume)  # the ASR stage answers it: a turn


def test_a_hold_an_utterance_came_of_waits_for_the_asr_stage():
    h = Harness()
    _robot_speaking(h)
    h.frames(6, SPEECH)
    _words(h, _overlap_checks(h)[0], "No,", INTERRUPTION)
    h.speaker.paused = True
    h.frames(10, SPEECH)
    h.frames(PAUSE, SILENCE)
    h.answer(next(m for m in h.taken() if isinstance(m, PauseCheck)), "Stop.")
    [utt] = [m for m in h.taken() if isinstance(m, Utterance)]
    assert utt.overlap
    h.frames(80, SILENCE)  # the ASR stage answers with a turn or a resume; the silence does not
    assert not h.of(Resume)


@pytest.mark.parametrize(
    ("live", "expected"),
    [
        ({"backchannels": False}, Hold),  # any speech, no words asked for: held at barge_in_ms
        ({"backchannels": False, "resume_false_interruption": False}, Interrupt),  # as before
    ],
)
def test_without_backchannels_any_speech_over_the_robot_stops_it(live, expected):
    h = Harness(live=live)
    _robot_speaking(h)
    h.frames(18, SPEECH)
    assert not h.taken() and not h.of(Hold) and not h.of(Interrupt)
    h.frames(1, SPEECH)
    [stop] = h.of(expected)
    assert getattr(stop, "reason", "") == "speech"


def test_speech_while_the_robot_is_silent_is_no_overlap():
    h = Harness()
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(PAUSE, SILENCE)
    h.answer(h.taken()[0], "Stop.")
    [utt] = h.taken()
    assert not utt.overlap and not h.of(Hold)


def test_a_pause_the_user_goes_on_after_is_learned_and_lengthens_the_waits():
    pauses = PauseModel(0.9, 500, 3000)
    h = Harness(pauses=pauses)
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(31, SILENCE)  # 992 ms
    h.answer(next(m for m in h.taken() if isinstance(m, PauseCheck)), "Turn left and then")
    assert pauses.samples == 0
    h.frames(SPEECH_FRAMES, SPEECH)  # the user goes on
    assert pauses.samples == 1 and pauses.value_ms == pytest.approx(0.9 * 500 + 0.1 * 992)
    h.frames(PAUSE, SILENCE)
    h.answer(next(m for m in h.taken() if isinstance(m, PauseCheck)), "Stop.")
    [verdict] = [v for v in h.of(PauseVerdict) if v.complete]
    assert verdict.pause_ms == round(pauses.value_ms)
    extra = pauses.value_ms - 500
    assert confirm_ms(h.cfg.turn, "text", True, False, extra_ms=extra) == round(h.cfg.turn.confirm_ms + extra)
    assert h.stage.endpointer._end_frames == round((1600 + extra) / 32)


def test_an_input_without_speech_is_reported_and_the_last_input_ends_the_source():
    h = Harness()
    h.stage._handle(InputStarted(-1, "quiet.wav"))
    h.frames(20, SILENCE)
    h.stage._handle(InputEnded(-1, "quiet.wav", last=True))
    [skipped] = h.of(Skipped)
    assert "no speech found in quiet.wav" in skipped.reason
    assert h.work.wait_input_done(0.01)


def test_an_input_that_ends_during_an_unfinished_pause_hands_its_words_over():
    """A file whose last words sound unfinished ends before the long silence: they are the turn.

    A new user's espeak-ng "please look to the left" (heard "... at the left", judged unfinished)
    was dropped as "no speech found": the 1.2 s a file source appends is under long_silence_ms.
    """
    h = Harness()
    h.stage._handle(InputStarted(-1, "short.wav"))
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(PAUSE, SILENCE)
    [check] = h.taken()
    h.answer(check, "Turn left and then")
    [verdict] = h.of(PauseVerdict)
    assert not verdict.complete and verdict.rule == "continuation"
    h.frames(30, SILENCE)  # 1 s: under the long silence (1.6 s)
    assert not h.taken()
    h.stage._handle(InputEnded(-1, "short.wav", last=True))
    [utt] = h.taken()
    assert isinstance(utt, Utterance) and utt.end_rule == "input_end" and utt.source == "mic"
    assert utt.transcript is not None and utt.transcript.text == "Turn left and then"  # not transcribed again
    assert not h.of(Skipped) and h.work.items == 1 and not h.work.user_speaking


def test_a_non_real_time_source_waits_for_each_verdict_and_turn_before_the_next_frame():
    """Files as fast as possible: at the short silence the stage takes the transcript from its
    inbox before it returns (the verdict decides before more audio), and a handed-over
    utterance's turn is over before the next frame."""
    h = Harness(realtime=False, early_asr_ms=0)
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(PAUSE - 1, SILENCE)
    got: list[Event] = []

    def asr_and_driver() -> None:  # what the ASR stage and the turn driver do, in order
        check = h.asr.get(10.0)
        got.append(check)
        h.inbox.put(PauseTranscript(-1, check.pause_id, ASRResult("Stop.", duration_ms=5.0)))
        got.append(h.asr.get(10.0))
        h.work.finished()  # the utterance's turn is over

    other = threading.Thread(target=asr_and_driver)
    other.start()
    h.frames(1, SILENCE)  # the short silence: returns once the verdict and the turn are done
    other.join(10)
    assert not other.is_alive()
    assert [type(m) for m in got] == [PauseCheck, Utterance] and got[1].end_rule == "stop"
    [verdict] = h.of(PauseVerdict)
    assert verdict.complete and not h.work.busy()


def test_doubtful_evidence_needs_a_longer_silence_to_confirm_it():
    turn = load_config().turn
    assert not unclear_words(turn, turn.unclear_logprob + 0.3) and unclear_words(
        turn, turn.unclear_logprob - 0.04
    )
    clear, unclear = False, True
    assert confirm_ms(turn, "text", True, clear) == turn.confirm_ms == 600
    assert confirm_ms(turn, "text", True, unclear) == turn.doubtful_confirm_ms == 1400
    assert confirm_ms(turn, "smart_turn", True, clear) == turn.doubtful_confirm_ms  # the words alone: no
    for rule, complete in (("stop", True), ("continuation", False), ("unfinished", False)):
        assert confirm_ms(turn, rule, complete, unclear) == 0  # heard at once, or not a turn yet
    off = turn.model_copy(update={"doubtful_confirm_ms": 0})
    assert confirm_ms(off, "text", True, unclear) == confirm_ms(off, "smart_turn", True, clear) == 600
    # Strong evidence: the words surely complete and Smart Turn (or a question) agreeing.
    assert confirm_ms(turn, "text", True, clear, -0.2, 0.9, "look up") == turn.strong_confirm_ms == 300
    assert confirm_ms(turn, "text", True, clear, -0.2, 0.1, "what time is it?") == 300
    assert confirm_ms(turn, "text", True, clear, -0.2, 0.1, "look up") == 600  # the sound disagrees
    with pytest.raises(ValueError, match="doubtful_confirm_ms"):
        type(turn)(doubtful_confirm_ms=turn.long_silence_ms)


@pytest.fixture(scope="module")
def text_model():
    cfg = load_config()
    model = TextEndOfTurn(resolve_model(cfg.turn.text_model), cfg.llm.system_prompt)
    yield model
    model.close()


@pytest.mark.parametrize(
    ("heard", "logprob", "wait_ms"),
    [
        ("look up", -0.11, 600),  # bench --turns: a plain command, heard clearly
        ("come your way", -0.54, 1400),  # "Can you wave [1.2 s] with your left hand?", misheard
    ],
)
def test_a_finished_verdict_on_unclear_words_is_heard_only_after_the_longer_silence(
    text_model, heard, logprob, wait_ms
):
    """bench --turns: "Can you wave" heard as "come your way" (logprob -0.54) sounded finished and
    was answered 700 ms into the user's 1.2 s pause; unclear words now wait 1.4 s."""
    h = Harness(text=text_model)
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(PAUSE, SILENCE)
    [check] = h.taken()
    h.answer(check, heard, logprob)
    [verdict] = h.of(PauseVerdict)
    assert verdict.complete and verdict.rule == "text", verdict
    assert verdict.asr_logprob == logprob and verdict.unclear == (logprob < h.cfg.turn.unclear_logprob)
    assert verdict.confirm_ms == wait_ms
    confirmed_after = -(-wait_ms // 32)  # frames of silence
    [utt] = h.taken()  # handed over at once, to be prepared
    assert isinstance(utt, Utterance) and utt.release is not None and not utt.release.released
    h.frames(confirmed_after - PAUSE - 1, SILENCE)
    assert not utt.release.released and not utt.release.dropped
    h.frames(1, SILENCE)
    assert utt.release.released


@pytest.mark.parametrize(
    ("wav", "heard", "on", "wait_ms"),
    [
        # Words -0.84 (ordinary), Smart Turn 0.98, a clear command: strong_confirm_ms.
        ("look_left.wav", "Please look to the left.", True, 300),
        ("look_left.wav", "Please look to the left.", False, 600),  # [turn] strong_on_command off
        # Words -0.62 (ordinary) but Smart Turn 0.02 (its voice rises): the sound vetoes, confirm_ms.
        ("wave_right.wav", "Hey robot, wave your right hand.", True, 600),
    ],
)
def test_a_clear_command_in_the_prepared_reply_confirms_an_ordinary_verdict_sooner(
    text_model, fixtures_dir, wav, heard, on, wait_ms
):
    from agent.listening.vad import find_utterances
    from agent.speech.audio import decode_file

    h = Harness(text=text_model, smart=SmartTurn())
    h.cfg.turn.strong_on_command = on
    [utterance] = find_utterances(decode_file(fixtures_dir / "commands" / wav), h.cfg.vad)
    h.say(utterance.audio)
    h.frames(PAUSE, SILENCE)
    [check] = h.taken()
    h.answer(check, heard, -0.2)
    [verdict] = h.of(PauseVerdict)
    assert verdict.evidence == "normal" and verdict.confirm_ms == 600, verdict
    assert verdict.command_ms == wait_ms, verdict
    [utt] = h.taken()
    h.frames(2, SILENCE)
    utt.release.command_called()  # the prepared turn called a skill as it asks (the call runner)
    confirmed_after = -(-wait_ms // 32)
    h.frames(confirmed_after - PAUSE - 3, SILENCE)
    assert not utt.release.released and not utt.release.dropped and not h.of(TurnConfirmed)
    h.frames(1, SILENCE)
    assert utt.release.released
    [confirmed] = h.of(TurnConfirmed)
    assert (confirmed.pause_id, confirmed.silence_ms) == (verdict.pause_id, wait_ms)
    assert confirmed.command == (wait_ms < verdict.confirm_ms)


def test_a_clear_command_does_not_shorten_doubtful_or_vetoed_waits():
    turn = load_config().turn
    assert command_wait_ms(turn, NORMAL, 0.9) == turn.strong_confirm_ms == 300
    assert command_wait_ms(turn, NORMAL, 0.9, extra_ms=200) == 500  # a slow speaker's pauses
    assert command_wait_ms(turn, NORMAL, 0.1) == command_wait_ms(turn, NORMAL, -1.0) == turn.confirm_ms
    assert command_wait_ms(turn, DOUBTFUL, 0.9) == turn.doubtful_confirm_ms  # misheard words stay doubtful
    assert command_wait_ms(turn, STRONG, 0.9) == 300


@pytest.mark.parametrize("early_asr_ms", [96, 0])
def test_every_pause_is_checked_once(early_asr_ms):
    h = Harness(early_asr_ms=early_asr_ms)
    h.frames(SPEECH_FRAMES, SPEECH)
    h.frames(PAUSE, SILENCE)
    checks = h.taken()
    assert len(checks) == 1 and checks[0].early == bool(early_asr_ms)


# --- the ASR stage's echo check ------------------------------------------------------------------------
def _asr_stage_takes(
    command: str,
    robot_said: str,
    audible: bool,
    said_then: tuple[str, ...] = (),
    silent_s: float = 0.0,
    heard: bool = True,
) -> tuple[list[Skipped], list[Event]]:
    """What a real ASR stage does with an utterance ``command`` just after the robot said
    ``robot_said``: (skipped reasons, what it handed the turn driver).

    With ``silent_s``, ``robot_said`` finished playing that long before the user began (a
    ``Spoken``), and the robot is saying ``said_then`` while the user speaks. The robot's
    playback (a noise stand-in for its voice) is in the utterance's audio, 50 ms late and
    quieter, when ``heard``; otherwise the audio is a voice of its own (other noise)."""
    from datetime import datetime

    from agent.events import PlaybackStarted, Spoken
    from agent.listening.echo import EchoGate
    from agent.pipeline.asr_stage import ASRStage
    from agent.pipeline.turnbook import TurnBook
    from agent.skills.registry import SkillRegistry
    from agent.skills.skill import SkillContext

    cfg = load_config(None)
    gate = TurnGate()
    inbox, turn_q, driver_q = StageQueue(gate), StageQueue(gate), StageQueue(gate)
    published: list[Event] = []
    book = TurnBook()
    rng = np.random.default_rng(3)
    now = time.perf_counter() + silent_s + 1.0  # the utterance is 1 s long
    playback = rng.standard_normal(3 * 16000).astype(np.float32) * 0.1
    echo_gate = EchoGate()
    echo_gate.add_reference(playback, now)
    audio = (
        0.5 * playback[-16000 - 800 : -800] if heard else 0.1 * rng.standard_normal(16000).astype(np.float32)
    )
    book.on(PlaybackStarted(7, robot_said, t=time.perf_counter()))
    if silent_s:
        book.on(Spoken(7, robot_said))
    for text in said_then:
        book.on(PlaybackStarted(8, text, t=time.perf_counter() + silent_s))
    stage = ASRStage(
        None,  # the transcript comes with the utterance: nothing to decode
        cfg.live,
        inbox,
        turn_q,
        driver_q,
        gate,
        published.append,
        WorkTracker(Speaker()),
        book,
        SkillRegistry(),
        SkillContext(robot=None, now=datetime.now),
        realtime=True,
        echo=echo_gate,
        post_roll_ms=0,
    )
    said = ASRResult(command, duration_ms=5.0)
    stage._one(Utterance(-1, "mic", 0.0, 1000.0, audio, now, now, "text", said, robot_audible=audible))
    return [e for e in published if isinstance(e, Skipped)], [driver_q.get(0) for _ in range(len(driver_q))]


ROBOT_SAID = "Your timer for two seconds is done."
COMMAND = "Set a timer for ten seconds."


def test_words_like_the_robots_said_after_it_fell_silent_start_a_turn():
    """Issue 22's soak: "Set a timer for ten seconds" said a second after the robot's "... timer
    for two seconds ..." was dropped as an echo; only audio the robot could be heard in holds one."""
    from agent.events import UserTurn

    skipped, turns = _asr_stage_takes(COMMAND, ROBOT_SAID, audible=False)
    assert skipped == []
    [turn] = turns
    assert isinstance(turn, UserTurn) and turn.text == COMMAND


def _echo_reason(command: str, robot_said: str) -> str:
    return f"echo of the robot's own speech: {command!r} (like its {robot_said!r}; 100% of the audio)"


def test_words_like_the_robots_heard_while_it_speaks_are_its_echo():
    skipped, turns = _asr_stage_takes(COMMAND, ROBOT_SAID, audible=True)
    assert [s.reason for s in skipped] == [_echo_reason(COMMAND, ROBOT_SAID)]
    assert turns == []


def test_words_like_the_robots_over_a_mic_that_did_not_hear_it_are_the_users():
    """Issue 22's 1,000-turn soak (turn 103): "What time is it?" said over the robot's cat story
    was dropped as its echo, though the mic held none of the story (the soak's microphone hears
    only the user). Words alone cannot tell: only where the playback explains some of the mic
    audio (``[live] echo_text_min_share``) can the transcript be the robot's."""
    from agent.events import UserTurn

    command = "What time is it?"
    story = "She wondered what time it was, and whether the bird would come back."
    skipped, turns = _asr_stage_takes(command, story, audible=True, heard=False)
    assert skipped == []
    [turn] = turns
    assert isinstance(turn, UserTurn) and turn.text == command
    # The same words where the mic did hear the robot: its echo, and the skip names the sentence.
    skipped, turns = _asr_stage_takes(command, story, audible=True)
    assert [s.reason for s in skipped] == [_echo_reason(command, story)]
    assert turns == []


def test_words_like_a_sentence_the_robot_finished_before_the_user_began_are_the_users():
    """Issue 22's 1,000-turn soak (turn 307): "Set a timer for two seconds" was dropped as an echo
    two turns after "Set a timer for ten seconds", most likely of the robot's "I set a timer for
    10 seconds" (fuzzy score 91) while the ten-second timer's announcement played. Only what the
    robot said while the user spoke (or just before: the echo's delay and tail) can be in the mic."""
    from agent.events import UserTurn

    command, robot_said = "Set a timer for two seconds.", "I set a timer for 10 seconds."
    now_saying = ("Time is up: the timer for 10 seconds is done.",)
    skipped, turns = _asr_stage_takes(command, robot_said, True, now_saying, silent_s=3.0)
    assert skipped == []
    [turn] = turns
    assert isinstance(turn, UserTurn) and turn.text == command
    # Finished within the echo's delay and tail (1.4 s by default) before: still its echo.
    skipped, turns = _asr_stage_takes(command, robot_said, True, now_saying, silent_s=0.5)
    assert [s.reason for s in skipped] == [_echo_reason(command, robot_said)]
    assert turns == []
