"""Speech stage: reply text deltas → sentences (chunker) → piper audio → the sink.

One thread. For each turn a :class:`~agent.speech.sentences.SentenceStream` releases a piece as
soon as it is certainly a complete sentence (long ones are cut at a clause), and the piece
is synthesized at once, so the first sentence plays while the model still writes the
second. ``streaming=False`` is the sequential baseline of ``bolt-agent bench``: the whole
reply is collected, synthesized in one go and handed over as one block of audio.

While the speaker has nothing to play (a turn's first sentence), speech synthesis claims the
CPU from the chat model (:class:`~agent.control.CpuArbiter`) until that sentence's audio is
queued: on 2 cores piper and the model decoding side by side each run at about half speed,
and the listener waits for the audio. The turn driver claims it already when it hands over a
whole utterance (an acknowledgement or preamble), so the model's next step waits instead of
racing this thread to the CPU; a flush or the turn's end releases the claim.

Before each synthesis step the turn generation is checked: audio of a cancelled turn is
never made or queued. A turn prepared before the user's silence confirmed it
(:class:`~agent.control.ReleaseGate`, ``[turn] confirm_ms``) is synthesized at once and queued
once its gate opens. A sentence piper fails on is reported and skipped; the rest of the
reply is still spoken.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from agent.control import CpuArbiter
from agent.events import AudioOut, Error, Event, ReplyDelta, ReplyEnd, SentenceReady, Spoken
from agent.pipeline.queues import StageQueue, TurnGate, run_stage
from agent.speech.sentences import SentenceStream
from agent.speech.tts import SynthesisPreempted, TextToSpeech

log = logging.getLogger(__name__)

LOOKAHEAD_POLL_S = 0.05
"""How often the queued audio is looked at while synthesis waits for need, s."""
LISTEN_KEEP_S = 0.5
"""Audio left to play below which synthesis goes on even while the user speaks over the robot, s."""


class AudioSink(Protocol):
    """Where synthesized speech goes (speaker, WAV files, nowhere); see :mod:`agent.pipeline.sinks`."""

    realtime: bool

    def play(self, msg: AudioOut) -> None:
        """Queue one sentence's audio."""
        ...

    def end(self, turn_id: int) -> None:
        """No more audio for ``turn_id``; report ``TurnPlayed`` once the rest has played."""
        ...

    def clear(self) -> list[Spoken]:
        """Drop all queued audio at once; return ``Spoken(completed=False)`` for partly played pieces."""
        ...

    def pause(self) -> list[Spoken]:
        """Fall silent now, keeping what is queued (the sentence cut starts again on :meth:`resume`).

        Returns:
            ``Spoken(completed=False)`` for that sentence.
        """
        ...

    def resume(self) -> None:
        """Play on after :meth:`pause`."""
        ...

    @property
    def paused(self) -> bool:
        """Paused and not resumed or cleared since."""
        ...

    @property
    def busy(self) -> bool:
        """Audio is queued or playing."""
        ...

    @property
    def queued_s(self) -> float:
        """Audio queued and not yet played, s (0 for a sink that does not play in real time)."""
        ...

    def poll(self) -> list[Event]:
        """Playback reports since the last call (started, spoken, turn played, played blocks)."""
        ...

    def close(self) -> None:
        """Release what the sink holds (the pipeline is closing; never raises)."""
        ...


class SpeechStage:
    """The chunker + TTS thread body.

    Args:
        tts: The voice.
        sink: Where audio goes.
        inbox: ``ReplyDelta`` / ``ReplyEnd`` / ``Shutdown`` messages.
        gate: Turn generation (stale turns are dropped).
        publish: The bus.
        clause_chars: A sentence longer than this many characters is cut at a clause.
        streaming: False: synthesize the whole reply at its end (sequential baseline).
        speak: False: no synthesis at all (typed chat without output, accuracy runs).
        arbiter: Shares the CPU with the chat model (speech claims it while the speaker waits)
            and with the listening path (a synthesis ahead of need is preempted when the user
            speaks over the robot); None = no claims.
        lookahead_s: The next sentence is synthesized once less than this much audio is left
            to play, s; 0 = at once. Synthesis ahead of need takes the CPU from the listening
            path (the checks of speech over the robot) and is wasted when the turn is cut.
    """

    def __init__(
        self,
        tts: TextToSpeech,
        sink: AudioSink,
        inbox: StageQueue,
        gate: TurnGate,
        publish: Callable[[Event], None],
        clause_chars: int = 120,
        streaming: bool = True,
        speak: bool = True,
        arbiter: CpuArbiter | None = None,
        lookahead_s: float = 0.0,
    ) -> None:
        self.tts, self.sink, self.inbox, self.gate, self.publish = tts, sink, inbox, gate, publish
        self.lookahead_s = lookahead_s
        self.clause_chars, self.streaming, self.speak = clause_chars, streaming, speak
        self.arbiter = arbiter if arbiter is not None else CpuArbiter()
        self.arbiter.on_listening(self._listening)
        self._ahead = False  # a synthesis ahead of need is running (it may be preempted)
        self._streams: dict[int, SentenceStream] = {}
        self._whole: dict[int, list[str]] = {}

    def run(self) -> None:
        """Process messages until ``Shutdown``."""
        run_stage(self.inbox, self._handle, self._failed)

    def _failed(self, msg: Event, e: Exception) -> None:
        log.exception("speech stage failed on %s", msg.name)
        self.publish(Error(msg.turn_id, f"speech stage failed: {e.__class__.__name__}: {e}; continuing"))

    def _handle(self, msg: Event) -> None:
        tid = msg.turn_id
        if isinstance(msg, ReplyDelta):
            if not self.streaming:
                # A flush ends a round: the next round's words are a new sentence, not glued on.
                self._whole.setdefault(tid, []).append(msg.text + (" " if msg.flush else ""))
                return
            stream = self._streams.setdefault(tid, SentenceStream(self.clause_chars))
            for piece in stream.feed(msg.text) + (stream.flush() if msg.flush else []):
                self._piece(tid, piece)
            if msg.flush:  # a claim made ahead of this utterance ends with it, spoken or not
                self.arbiter.release()
        elif isinstance(msg, ReplyEnd):
            if self.streaming:
                stream = self._streams.pop(tid, None)
                for piece in stream.flush() if stream else []:
                    self._piece(tid, piece)
            else:
                whole = "".join(self._whole.pop(tid, [])).strip()
                if whole:
                    self._piece(tid, whole, one_block=True)
            for old in [k for k in self._streams if k < tid]:  # turns cancelled before their end
                del self._streams[old]
            if not self.gate.stale(tid):
                self.sink.end(tid)
            self.arbiter.release()

    def _piece(self, tid: int, piece: str, one_block: bool = False) -> None:
        if self.gate.stale(tid):
            return
        self.publish(SentenceReady(tid, piece))
        if not self.speak:
            return
        text = piece
        while text:
            self._await_need(tid)
            if self.gate.stale(tid):  # cancelled while it waited: nothing to make
                return
            # Nothing queued or playing: the listener hears silence until this audio is out.
            self.arbiter.claim_for_speech()
            try:
                text = self._synthesize(tid, text, piece, one_block)
            except Exception as e:  # one bad piece must not silence the rest
                log.exception("turn %d: TTS failed on %r", tid, piece)
                self.publish(Error(tid, f"speech synthesis failed on {piece!r}: {e}; continuing"))
                text = ""
            finally:
                self.arbiter.release()

    def _listening(self) -> None:
        """The user began to speak over the robot: a synthesis ahead of need stops.

        It is made again once their words are known, so that the checks of their words run on
        free cores (piper beside them doubles their time).
        """
        if self._ahead and self.sink.queued_s > LISTEN_KEEP_S:
            self.tts.preempt()

    def _await_need(self, tid: int) -> None:
        """Wait while more than ``lookahead_s`` of audio is left to play (or held), the turn alive.

        Held (the speaker paused for the user) the audio does not drain: the wait lasts until
        the turn resumes or is cancelled. While the user speaks over the robot (the arbiter's
        listening claim) the wait goes on until only :data:`LISTEN_KEEP_S` is left: the checks
        of their words decide a stop, and piper beside them doubles their time.
        """
        while not self.gate.stale(tid):
            queued = self.sink.queued_s
            ahead = self.lookahead_s > 0 and queued > self.lookahead_s
            if not ahead and not (self.arbiter.listening and queued > LISTEN_KEEP_S):
                return
            time.sleep(LOOKAHEAD_POLL_S)

    def _synthesize(self, tid: int, text: str, piece: str, one_block: bool) -> str:
        """Make and queue ``text`` of ``piece``; return what is left to make ("" when all was made).

        A synthesis ahead of need (streaming, more than :data:`LISTEN_KEEP_S` queued) stops when
        the user starts to speak over the robot (:meth:`_listening`): what it made is queued and
        the rest is returned, to be made once the listening claim is over.
        """
        prev: AudioOut | None = None
        parts: list[np.ndarray] = []
        texts: list[str] = []
        t0, total = time.perf_counter(), 0.0
        rate = self.tts.sample_rate

        def failed(sentence: str, e: Exception) -> None:  # piper logged it; the event says it once
            self.publish(
                Error(tid, f"speech synthesis failed on {sentence!r} ({e.__class__.__name__}: {e}); skipped")
            )

        left = ""
        self._ahead = not one_block and self.sink.queued_s > LISTEN_KEEP_S
        try:
            for chunk in self.tts.synthesize(text, on_error=failed):  # lazy: one sentence per step
                ms = (time.perf_counter() - t0) * 1000
                total += ms
                if self.gate.stale(tid):
                    return ""
                if one_block:
                    parts.append(chunk.audio)
                    texts.append(chunk.text)
                else:
                    if prev is not None:
                        self._out(prev)
                    prev = AudioOut(tid, chunk.text, piece, False, chunk.audio, chunk.sample_rate, ms)
                t0 = time.perf_counter()
        except SynthesisPreempted as e:
            log.info("turn %d: synthesis ahead of need stopped for the user's speech", tid)
            left = e.remaining
        finally:
            self._ahead = False
        if one_block and parts:
            prev = AudioOut(tid, " ".join(texts), piece, True, np.concatenate(parts), rate, total)
        if prev is not None and not self.gate.stale(tid):
            last = not left  # the piece is heard at the end of its last audio
            self._out(AudioOut(tid, prev.text, piece, last, prev.audio, prev.sample_rate, prev.synth_ms))
        return left

    def _out(self, msg: AudioOut) -> None:
        release = self.gate.release_of(msg.turn_id)
        if release is not None and not release.released:
            self.arbiter.release()  # the model goes on at full speed while the sound waits
            if not release.wait(self.gate.stop_signal(msg.turn_id)):
                return  # dropped (the user went on): never heard
        self.publish(msg)
        self.sink.play(msg)
        self.arbiter.release()  # audio is queued: the model and the rest of the synthesis share the CPU
