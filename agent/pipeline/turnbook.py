"""Turn bookkeeping from the stage messages: latency marks, what was heard, when a turn is over.

The :class:`TurnBook` is the only place that keeps per-turn state. It does not reach into
any stage: it reads the messages the stages publish (``UserTurn`` opens a turn's record;
``FirstToken``, ``SentenceReady``, ``AudioOut``, ``PlaybackStarted``, ``Spoken``,
``TurnPlayed``, ``TurnGenerated``, ``BargeIn``) and answers with derived messages:

* when a turn is generated and either played or interrupted: its :class:`~agent.events.Reply`
  and its one latency trace, :class:`~agent.events.Timing` (ms from the end of user speech);
* when an interrupted turn's reply is in the history: :class:`~agent.events.CutHistory`
  for the turn driver, with the pieces played to the end (only those stay in the history).

Thread-safe (one lock); every method is short.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from agent.events import (
    AudioOut,
    BargeIn,
    CutHistory,
    Event,
    FirstToken,
    PlaybackStarted,
    Reply,
    SentenceReady,
    Spoken,
    Timing,
    TurnDropped,
    TurnGenerated,
    TurnPlayed,
    UserTurn,
)


@dataclass(eq=False)
class TurnRecord:
    """What is known about one turn (times are perf_counter s)."""

    turn_id: int
    t_speech_end: float
    t_endpoint: float
    t_asr: float
    asr_ms: float
    end_rule: str = ""
    marks: dict[str, float] = field(default_factory=dict)
    pieces: list[str] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)
    tts_ms: float = 0.0
    generated: TurnGenerated | None = None
    audio_path: str | None = None
    played: bool = False
    interrupted: bool = False
    done: bool = False

    def mark(self, stage: str, t: float) -> None:
        """Record the first time ``stage`` happened."""
        self.marks.setdefault(stage, t)


@dataclass
class Said:
    """A sentence the robot played.

    ``t_start``: its first sample out; ``t_end``: its last, or the cut (``inf`` while it
    plays); perf_counter s.
    """

    t_start: float
    text: str
    t_end: float = float("inf")


class TurnBook:
    """Per-turn records, fed with messages; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._turns: dict[int, TurnRecord] = {}
        self.recent_speech: list[Said] = []

    def open(
        self,
        turn_id: int,
        t_speech_end: float,
        t_endpoint: float | None = None,
        t_asr: float | None = None,
        asr_ms: float = 0.0,
        end_rule: str = "",
    ) -> None:
        """Start the record of a turn (a published ``UserTurn`` does: the driver starts the turn)."""
        with self._lock:
            self._turns[turn_id] = TurnRecord(
                turn_id, t_speech_end, t_endpoint or t_speech_end, t_asr or t_speech_end, asr_ms, end_rule
            )
            for old in [k for k in self._turns if k < turn_id - 16]:
                del self._turns[old]

    def is_open(self, turn_id: int) -> bool:
        """The turn started and is not over."""
        with self._lock:
            rec = self._turns.get(turn_id)
            return rec is not None and not rec.done

    def heard_texts(
        self, since_s: float, during: tuple[float, float] | None = None, margin_s: float = 0.0
    ) -> list[str]:
        """What the robot said that could be heard in a stretch of mic audio (echo matching).

        Args:
            since_s: Only sentences started in the last ``since_s`` seconds.
            during: ``(start, end)`` of the audio, perf_counter s: only sentences that played
                within it (started before its end, ended no earlier than ``margin_s`` before its
                start). A sentence said before the user began is not an echo in their words,
                however alike ("Set a timer for two seconds" again, after the robot said "I set
                a timer for 2 seconds" and fell silent). None: every sentence since ``since_s``.
            margin_s: How long after its last sample a sentence can still be in the mic, s (the
                echo's delay and the room's tail).

        Returns:
            The texts, oldest first.
        """
        now = time.perf_counter()
        with self._lock:
            said = [s for s in self.recent_speech if now - s.t_start < since_s]
        if during is not None:
            start, end = during
            said = [s for s in said if s.t_start <= end and s.t_end + margin_s >= start]
        return [s.text for s in said]

    def on(self, msg: Event) -> list[Event]:
        """Update the records from one message; return the messages it completes (maybe none)."""
        if isinstance(msg, UserTurn):
            self.open(msg.turn_id, msg.t_speech_end, msg.t_endpoint, msg.t_asr, msg.asr_ms, msg.end_rule)
            return []
        with self._lock:
            self._track_speech(msg)
            rec = self._turns.get(msg.turn_id)
            if rec is None or rec.done:
                return []
            if isinstance(msg, (TurnGenerated, BargeIn)):
                return self._settle(rec, msg)
            self._record(rec, msg)
            return self._finish(rec)

    def _track_speech(self, msg: Event) -> None:
        """What the robot says now (:attr:`recent_speech`): a sentence starts, or stops reaching the mic."""
        if isinstance(msg, PlaybackStarted):
            self.recent_speech = [*self.recent_speech[-49:], Said(msg.t, msg.text)]
        elif isinstance(msg, Spoken):  # played to its end or cut: it stops reaching the mic
            for said in reversed(self.recent_speech):
                if said.text == msg.text and said.t_end == float("inf"):
                    said.t_end = time.perf_counter()
                    break

    @staticmethod
    def _record(rec: TurnRecord, msg: Event) -> None:
        """A stage's progress on the turn: its marks (first token, sentence, audio, played) and pieces."""
        if isinstance(msg, TurnDropped):
            rec.done = True  # never heard: no reply, no latency record
        elif isinstance(msg, FirstToken):
            rec.mark("first_token", msg.t)
        elif isinstance(msg, SentenceReady):
            rec.mark("first_sentence", time.perf_counter())
            rec.pieces.append(msg.text)
        elif isinstance(msg, AudioOut):
            rec.mark("first_audio", time.perf_counter())
            rec.tts_ms += msg.synth_ms
        elif isinstance(msg, PlaybackStarted):
            rec.mark("first_played", msg.t)
        elif isinstance(msg, Spoken):
            if msg.completed and msg.last_of_piece:
                rec.heard.append(msg.piece)
        elif isinstance(msg, TurnPlayed):
            rec.played, rec.audio_path = True, msg.audio

    def _settle(self, rec: TurnRecord, msg: TurnGenerated | BargeIn) -> list[Event]:
        """The reply is written, or the user barged in: with both, the history keeps what was heard."""
        if isinstance(msg, TurnGenerated):
            rec.generated = msg
            both = rec.interrupted
        else:
            rec.interrupted = True
            both = rec.generated is not None
        return [self._cut(rec), *self._finish(rec)] if both else self._finish(rec)

    @staticmethod
    def _cut(rec: TurnRecord) -> CutHistory:
        return CutHistory(rec.turn_id, tuple(rec.heard), tuple(rec.pieces))

    def _finish(self, rec: TurnRecord) -> list[Event]:
        if rec.done or rec.generated is None or not (rec.played or rec.interrupted):
            return []
        rec.done = True
        return [Reply(rec.turn_id, rec.generated.text, rec.audio_path), self._timing(rec)]

    @staticmethod
    def _timing(rec: TurnRecord) -> Timing:
        m, t0, g = rec.marks, rec.t_speech_end, rec.generated

        def rel(stage: str) -> float:
            return round((m[stage] - t0) * 1000, 1) if stage in m else -1.0

        first_audio, first_sentence = m.get("first_audio"), m.get("first_sentence")
        tts_first = round((first_audio - first_sentence) * 1000, 1) if first_audio and first_sentence else 0.0
        return Timing(
            rec.turn_id,
            asr_ms=round(rec.asr_ms, 1),
            llm_ttft_ms=round(g.ttft_ms, 1) if g else 0.0,
            llm_ms=round(g.llm_ms, 1) if g else 0.0,
            tts_first_audio_ms=tts_first,
            tts_ms=round(rec.tts_ms, 1),
            turn_ms=round((time.perf_counter() - t0) * 1000, 1),
            prompt_tokens=g.prompt_tokens if g else 0,
            endpoint_ms=round((rec.t_endpoint - t0) * 1000, 1),
            asr_done_ms=round((rec.t_asr - t0) * 1000, 1),
            first_token_ms=rel("first_token"),
            first_sentence_ms=rel("first_sentence"),
            first_audio_ms=rel("first_audio"),
            first_played_ms=rel("first_played"),
            tokens_per_s=round(g.tokens_per_s, 1) if g else 0.0,
            draft_acceptance=round(g.draft_accepted / g.draft_tokens, 3) if g and g.draft_tokens else -1.0,
            endpoint_rule=rec.end_rule,
            llm_rounds=g.rounds if g else 0,
        )
