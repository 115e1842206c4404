"""The user's speech over the robot's: ask for its words early, stop the robot only for an interruption.

Owned by the turn-taking stage (:mod:`agent.pipeline.turn_taking`, same thread), fed every
:class:`~agent.events.VoiceFrame` while the robot speaks a turn. An *overlap* begins at the first
frame over the VAD threshold (the endpointer's ``min_speech_ms`` is not waited for) and ends
after ``[turn] short_silence_ms`` plus 300 ms without speech. Along the way:

* at ``[live] overlap_words_ms`` of speech its audio so far (with 320 ms of pre-roll) goes to the
  ASR stage (:class:`~agent.events.OverlapCheck`), and again every ``overlap_recheck_ms`` while
  it goes on without having interrupted; the answer says what the words are
  (:func:`agent.listening.floor.early_kind`);
* words that interrupt stop the robot at once; so does speech that has gone on for ``[live]
  barge_in_ms`` before any word is known. The stop is a :class:`~agent.events.Hold` (the turn is
  kept) with ``[live] resume_false_interruption``, else an :class:`~agent.events.Interrupt`;
* speech that ends before ``overlap_words_ms`` ("Stop.", "No.": Silero may hear 160 ms of them)
  is asked about once it has ended (:data:`SHORT_WORD_MS`, :data:`WORD_END_MS`), and words that
  interrupt become an utterance even when too short for the endpointer
  (:meth:`OverlapTracker.interruption_frames`);
* a hold with no utterance behind it (the speech that held it was too short to become one) ends
  after ``false_interruption_ms`` of the user's silence: :class:`~agent.events.Resume`;
* from its first frame until it ends or stops the robot (at most ``barge_in_ms`` plus
  :data:`LISTEN_MARGIN_MS`) it holds the CPU arbiter's listening claim: synthesis ahead of need
  and the model's decoding wait, so that the checks run on free cores.

With ``[live] backchannels`` off any speech over the robot stops it after ``barge_in_ms``, as before
the overlap was judged. Times are the frames' own (``VoiceFrame.t_end``, perf_counter s).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from agent.config import Config
from agent.control import CpuArbiter
from agent.events import Event, Hold, Interrupt, OverlapCheck, OverlapTranscript, Resume, VoiceFrame
from agent.listening.floor import INTERRUPTION, UNDECIDED
from agent.listening.vad import FRAME
from agent.pipeline.queues import StageQueue
from agent.pipeline.work import WorkTracker
from agent.speech.audio import SAMPLE_RATE

log = logging.getLogger(__name__)

FRAME_MS = FRAME * 1000 / SAMPLE_RATE
PRE_ROLL_FRAMES = 10
"""Frames (320 ms) before the first speech frame kept with an overlap's audio: Silero hears a
word's onset a frame or two late."""
END_MARGIN_MS = 300
"""An overlap ends after ``[turn] short_silence_ms`` plus this much silence, ms."""
LISTEN_MARGIN_MS = 400
"""An overlap's listening claim lasts ``[live] barge_in_ms`` plus this much at most, ms."""
SHORT_WORD_MS = 96
"""Speech over the robot that ends before ``[live] overlap_words_ms`` is checked once it has ended
when it lasted at least this long, ms; shorter is a click (docs/turn-taking.md)."""
WORD_END_MS = 96
"""Silence after which such a short word is over, ms."""
ANSWER_WAIT_MS = 1000
"""An overlap whose check is still in flight when its silence would end it waits this much longer
for the words, ms (a check never answered cannot keep it open)."""


class Floor(Protocol):
    """The sink as the overlap sees it: busy while it plays (or holds) a turn's audio, paused while held."""

    @property
    def busy(self) -> bool:
        """Audio is queued or playing (paused included)."""
        ...

    @property
    def paused(self) -> bool:
        """Paused by a hold."""
        ...


@dataclass
class _Overlap:
    """One stretch of user speech over the robot's."""

    onset_t: float  # the end of its first speech frame, perf_counter s
    frames: list[np.ndarray] = field(default_factory=list)
    speech_ms: float = 0.0
    silence_ms: float = 0.0
    asked_at_ms: float = -1.0  # speech_ms when its words were last asked for
    pending: int | None = None  # the check in flight
    kind: str = UNDECIDED  # what its newest words are (agent.listening.floor.early_kind)
    text: str = ""
    stopped: bool = False  # it stopped the robot (held or interrupted)


class OverlapTracker:
    """See the module docstring.

    Args:
        cfg: ``[live]`` (overlap and barge-in), ``[vad]`` threshold, ``[turn]`` short silence.
        asr_inbox: The ASR stage's queue (the checks).
        publish: The bus (holds, resumes, interruptions).
        work: The pipeline's work (the current turn, what is in flight).
        floor: The sink.
        arbiter: Claimed for listening while an overlap is judged; None = no claims.
    """

    def __init__(
        self,
        cfg: Config,
        asr_inbox: StageQueue,
        publish: Callable[[Event], None],
        work: WorkTracker,
        floor: Floor,
        arbiter: CpuArbiter | None = None,
    ) -> None:
        self.live, self.thr = cfg.live, cfg.vad.threshold
        self.arbiter = arbiter if arbiter is not None else CpuArbiter()
        self.end_ms = cfg.turn.short_silence_ms + END_MARGIN_MS
        self.asr_inbox, self.publish, self.work, self.floor = asr_inbox, publish, work, floor
        self._ring: collections.deque[np.ndarray] = collections.deque(maxlen=PRE_ROLL_FRAMES + 1)
        self._cur: _Overlap | None = None
        self._checks = 0
        self._held_at: float | None = None  # when this tracker held the robot's turn (perf_counter s)
        self._last_speech_t = 0.0
        self.handed_over = False  # an utterance over the robot went to the ASR stage since the hold

    @property
    def active(self) -> bool:
        """An overlap is in progress."""
        return self._cur is not None

    def robot_speaking(self) -> bool:
        """The robot is speaking (or holding) a turn: speech now is over its own."""
        return self.work.current_turn is not None and self.floor.busy

    def frame(self, f: VoiceFrame, user_in_utterance: bool) -> None:
        """Advance by one frame.

        Args:
            f: The frame (its echo-gated probability).
            user_in_utterance: The endpointer is inside an utterance (a hold resumes only once
                the user is silent).
        """
        self._ring.append(f.samples)
        speech, going_on = f.prob >= self.thr, f.prob >= self.thr - 0.15
        if going_on:
            self._last_speech_t = f.t_end
        cur = self._cur
        if cur is None:
            if speech and self.robot_speaking():
                cur = self._cur = _Overlap(f.t_end - FRAME_MS / 1000, list(self._ring))
                cur.speech_ms = FRAME_MS
                self.arbiter.claim_for_listening((self.live.barge_in_ms + LISTEN_MARGIN_MS) / 1000)
            else:
                self._resume_if_silent(f.t_end, user_in_utterance)
                return
        else:
            cur.frames.append(f.samples)
            cur.silence_ms = 0.0 if going_on else cur.silence_ms + FRAME_MS
            cur.speech_ms += FRAME_MS if speech else 0.0
            waited = cur.pending is None or cur.silence_ms >= self.end_ms + ANSWER_WAIT_MS
            if cur.silence_ms >= self.end_ms and waited:  # a check in flight may still decide
                self._cur = None
                self.arbiter.release_listening()
                return
        self._decide(cur)

    def words(self, msg: OverlapTranscript) -> None:
        """The ASR stage's answer to a check: what the words are, and maybe a stop."""
        cur = self._cur
        if cur is None or msg.check_id != cur.pending:
            return
        cur.pending = None
        cur.text = msg.result.text if msg.result is not None else ""
        cur.kind = msg.kind
        ms = msg.result.duration_ms if msg.result is not None else 0.0
        log.info(
            "speech over the robot: %r is %s (%.0f ms of speech, decoded in %.0f ms)",
            cur.text,
            cur.kind,
            cur.speech_ms,
            ms,
        )
        self._decide(cur)

    def _decide(self, cur: _Overlap) -> None:
        live = self.live
        if cur.stopped:
            return
        if not live.backchannels:
            if cur.speech_ms >= live.barge_in_ms and self.robot_speaking():
                self._stop(cur, "speech")
            return
        if cur.kind == INTERRUPTION and self.robot_speaking():
            self._stop(cur, f"words: {cur.text!r}")
            return
        if cur.kind == UNDECIDED and cur.speech_ms >= live.barge_in_ms:
            if self.robot_speaking():  # no words yet: the speech alone has gone on long enough
                self._stop(cur, "speech")
            return
        due = cur.asked_at_ms < 0 or cur.speech_ms - cur.asked_at_ms >= live.overlap_recheck_ms
        # A word over before overlap_words_ms ("Stop.", "No.") is asked about once it has ended.
        short_word = cur.asked_at_ms < 0 and cur.speech_ms >= SHORT_WORD_MS and cur.silence_ms >= WORD_END_MS
        if cur.pending is None and ((cur.speech_ms >= live.overlap_words_ms and due) or short_word):
            self._checks += 1
            cur.pending, cur.asked_at_ms = self._checks, cur.speech_ms
            self.asr_inbox.put(OverlapCheck(-1, self._checks, np.concatenate(cur.frames)))

    def interruption_frames(self) -> list[np.ndarray] | None:
        """The audio of the overlap in progress when its words stopped the robot, else None.

        Returns:
            Its ``(512,)`` float32 16 kHz frames, oldest first: 320 ms of pre-roll, the speech
            and the silence since. The turn-taking stage makes an utterance of them when the
            endpointer has none (words shorter than ``[vad] min_speech_ms``): an interruption is
            answered, not resumed from. None when no overlap is in progress or its words did not
            stop the robot.
        """
        cur = self._cur
        if cur is None or not cur.stopped or cur.kind != INTERRUPTION:
            return None
        return cur.frames

    def _stop(self, cur: _Overlap, reason: str) -> None:
        cur.stopped = True
        self.arbiter.release_listening()
        if self.live.resume_false_interruption:
            self._held_at = self._last_speech_t
            self.handed_over = False
            self.publish(Hold(-1, cur.onset_t, reason))
        else:
            self.publish(Interrupt(-1, "speech"))

    def _resume_if_silent(self, now: float, user_in_utterance: bool) -> None:
        """A hold no utterance came of ends after ``false_interruption_ms`` of silence."""
        if self._held_at is None:
            return
        if not self.floor.paused:  # resumed or interrupted meanwhile
            self._held_at = None
            return
        if self.handed_over or user_in_utterance:
            return  # the utterance decides (a turn, or a resume from the ASR stage)
        if (now - self._last_speech_t) * 1000 >= self.live.false_interruption_ms:
            self._held_at = None
            log.info("no words came of the speech that held the robot: it goes on")
            self.publish(Resume(-1, "timeout"))

    def reset(self) -> None:
        """Forget the overlap in progress (a new stream)."""
        if self._cur is not None:
            self.arbiter.release_listening()
        self._cur = None
        self._ring.clear()
