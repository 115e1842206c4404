"""Turn driver: user turns, background results and arrival greetings, one at a time.

One thread owns the conversation (history, model, skills): nothing else edits the
history, so a barge-in's history cut (``CutHistory``, a control message) never races a
generation. For each :class:`~agent.events.UserTurn` it runs the conversation's turn loop
(model rounds, tool calls on the robot) and streams the reply text to the speech stage as
``ReplyDelta`` messages while it is written, then ``ReplyEnd``.

A turn is over when its speech is: the robot's motion goes on by itself (the skills start
animations and return; the robot's safety layer handles a new motion command that arrives
while one runs), so a question asked during a long animation is answered while it runs.

When no user turn is waiting and the floor is free (:meth:`~agent.pipeline.work.WorkTracker.quiet`:
the user is not speaking, nothing is being said, no utterance is being transcribed), it speaks
about what happened meanwhile: background tool calls that finished (in finishing order, each
once) and people the camera saw arrive (``[vision] greet_on_arrival``). These are turns like
any other: streamed, timed, and cut by barge-in. After them, still with the floor free, it tidies
the context (:meth:`~agent.conversation.Conversation.tidy`): compacts the history ahead of need
and reads it into the KV cache, in chunks it stops between once the user speaks, so neither a
compaction nor the previous reply's tokens are paid inside the next turn.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.control import CpuArbiter, StopSignal
from agent.conversation import SORRY, TurnResult
from agent.events import (
    BackgroundDone,
    ContextTidied,
    CutHistory,
    Error,
    Event,
    FirstToken,
    HistoryCut,
    ReplyDelta,
    ReplyEnd,
    Shutdown,
    Transcript,
    TurnDropped,
    TurnGenerated,
    UserTurn,
)
from agent.pipeline.core import AgentCore
from agent.pipeline.posture import changes_mind
from agent.pipeline.queues import StageQueue, TurnGate
from agent.pipeline.work import WorkTracker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _LastTurn:
    """The newest user turn: what a continuation ('... and then wave') drops."""

    turn_id: int
    text: str
    messages: list[dict[str, Any]]  # the history messages it added, by identity


class TurnDriver:
    """The turn-driver thread body.

    Args:
        core: Conversation, skills, robot, camera.
        inbox: ``UserTurn`` / ``CutHistory`` / ``Shutdown``.
        speech: The speech stage's queue.
        gate: Turn ids and cancellation.
        publish: The bus (the turn book opens a turn when its ``UserTurn`` is published).
        work: The pipeline's work in flight (the current turn; when the floor is free).
        arbiter: Speech claims the CPU from the model as a whole utterance (an acknowledgement)
            is handed over, until its audio is out; the claim ends with the turn's generation.
    """

    def __init__(
        self,
        core: AgentCore,
        inbox: StageQueue,
        speech: StageQueue,
        gate: TurnGate,
        publish: Callable[[Event], None],
        work: WorkTracker,
        arbiter: CpuArbiter | None = None,
    ) -> None:
        self.core, self.inbox, self.speech, self.gate, self.publish = core, inbox, speech, gate, publish
        self.work = work
        self.arbiter = arbiter if arbiter is not None else CpuArbiter()
        # The newest user turn and the history messages it added: what a continuation drops. A
        # background announcement spoken between the two parts leaves it in place.
        self._last: _LastTurn | None = None
        # The history changed since the context was last tidied (a restored one: not read yet).
        self._untidy = bool(core.conversation.history)

    def run(self) -> None:
        """Run turns until ``Shutdown``."""
        while True:
            msg = self.inbox.get(timeout=0.1)
            if isinstance(msg, Shutdown):
                return
            clock = self.inbox.clock  # each item is watched: a silent model server stalls it
            try:
                if msg is None:
                    if self.work.quiet():
                        if clock is not None:
                            clock.begin("background")
                        self._speak_up()
                        if self._untidy and self.work.quiet():
                            self._tidy()
                    continue
                if clock is not None:
                    clock.begin(msg.name)
                if isinstance(msg, CutHistory):
                    self._cut_history(msg)
                elif isinstance(msg, UserTurn):
                    self._run(msg, msg.text, state=self.core.state_line())
            except Exception as e:  # the conversation guards its rounds; this is the last line
                log.exception("turn driver failed")
                self.publish(Error(msg.turn_id if msg else -1, f"turn failed: {e.__class__.__name__}: {e}"))
            finally:
                if clock is not None:
                    clock.end()
                if msg is not None:
                    self.inbox.done()

    # --- turns ------------------------------------------------------------------------------------------
    def _run(
        self,
        turn: UserTurn,
        text: str,
        state: str | None = None,
        tools: bool = True,
        background: BackgroundDone | None = None,
    ) -> None:
        tid = turn.turn_id
        release = turn.release
        stop = self._open(turn, text, background)
        if stop is None:
            return
        clock = self.inbox.clock

        def on_text(delta: str) -> None:
            if clock is not None:
                clock.progress()  # the reply moves: a long one is not a stall
            self.speech.put(ReplyDelta(tid, delta))

        def on_pause() -> None:  # a whole utterance (or round) was said: speak it now
            if clock is not None:
                clock.progress()
            self.arbiter.claim_for_speech()
            self.speech.put(ReplyDelta(tid, "", flush=True))

        t0 = time.perf_counter()
        conv = self.core.conversation
        if background is None:
            self._forget_continued(turn)
        kept = len(conv.history)  # a dropped turn leaves no trace in the history
        before = {id(m) for m in conv.history}
        result: TurnResult | None
        try:
            if background is not None:
                result = conv.background_turn(background, tid, on_text=on_text, stop=stop)
            else:
                result = conv.turn(
                    text,
                    tid,
                    state=state,
                    on_text=on_text,
                    stop=stop,
                    tools=tools,
                    on_pause=on_pause,
                    release=release,
                )
        except Exception as e:  # never lose the turn: apologise
            log.exception("turn %d failed", tid)
            self.publish(Error(tid, f"model error: {e}"))
            result = None
            on_text(SORRY)
        finally:
            self.arbiter.release()  # a flush of a cancelled turn is dropped unhandled
        self.speech.put(ReplyEnd(tid))
        if release is not None:
            # A reply written before the silence decided (a joke in 0.3 s, [turn] doubtful_confirm_ms
            # 1.4 s) is over only once it has: a user who goes on drops it like any other.
            release.wait(stop)
        if release is not None and release.dropped:
            conv.forget_since(kept)
            self.publish(TurnDropped(tid, text))
            return
        self._publish_outcome(tid, result, t0)
        if background is None:
            self._last = _LastTurn(tid, text, [m for m in conv.history if id(m) not in before])
        self.core.keep_history()  # the state store keeps the tail across a restart

    def _open(self, turn: UserTurn, text: str, background: BackgroundDone | None) -> StopSignal | None:
        """Open a turn: its stop signal, the robot's turn, the turn book's record (None: it was dropped).

        A turn prepared before the silence confirmed it is held until released, and cancelled
        when the user went on before it even started.
        """
        tid, release = turn.turn_id, turn.release
        self._untidy = True
        if release is not None:  # prepared before the silence confirmed it: heard once released
            if release.dropped:  # the user went on before the turn even started
                self.gate.cancel(tid)
                self.publish(TurnDropped(tid, text))
                return None
            self.gate.hold(tid, release)
            release.on_drop(lambda: self.gate.cancel(tid))
        stop = self.gate.stop_signal(tid)  # set when the turn is cancelled (barge-in, new turn)
        self.core.turn_id = tid
        # Gestures started now are this turn's; "no, nod instead" cuts what an earlier turn plays.
        self.core.robot.begin_turn(tid, changed_mind=background is None and changes_mind(text))
        if background is None:
            self.core.robot.wake()  # talking to a sleeping robot wakes it, as go_to_sleep promises
        self.publish(turn)  # the turn book opens the turn's latency record
        self.work.turn_started(tid)
        return stop

    def _forget_continued(self, turn: UserTurn) -> None:
        """A turn that goes on with the last one's sentence: the last turn's exchange leaves the history."""
        last, self._last = self._last, None
        if last is not None and turn.continues == last.turn_id:
            self.core.conversation.forget(last.messages)  # the sentence it answered is answered whole now
            self.publish(TurnDropped(last.turn_id, last.text, continued=True))

    def _publish_outcome(self, tid: int, result: TurnResult | None, t0: float) -> None:
        """The turn's problems, its first token's time and :class:`TurnGenerated` (an apology when it failed).

        Args:
            tid: The turn.
            result: What the conversation returned; None when the model failed (:data:`SORRY` was said).
            t0: When the turn started, ``perf_counter`` s.
        """
        if result is None:
            self.publish(TurnGenerated(tid, SORRY, 0.0, 0.0, 0, 0.0, 0, 0, 0))
            return
        for problem in result.problems:
            self.publish(Error(tid, problem))
        self.publish(FirstToken(tid, t0 + result.ttft_ms / 1000))
        self.publish(
            TurnGenerated(
                tid,
                result.text,
                round(result.llm_ms, 1),
                round(result.ttft_ms, 1),
                result.prompt_tokens,
                result.tokens_per_s,
                result.draft_tokens,
                result.draft_accepted,
                result.rounds,
            )
        )

    def _speak_up(self) -> None:
        """One background result or greeting, if there is one: an item of work until its turn is over."""
        self.work.started()  # counted before it is taken: no instant shows neither it nor its turn
        conv = self.core.conversation
        done = conv.next_background()
        if done is not None:
            tid = self.gate.new_turn()
            self.publish(BackgroundDone(tid, done.tool, done.ok, done.result, done.call_id))
            now = time.perf_counter()
            self._run(UserTurn(tid, "", now, now, now, 0.0), "", background=done)
            return
        cfg = self.core.cfg.vision
        while True:
            try:
                change = self.core.scene_changes.get_nowait()
            except queue.Empty:
                self.work.finished()
                return
            if change.kind == "arrived" and cfg.greet_on_arrival:
                break
        tid = self.gate.new_turn()
        self.publish(Transcript(tid, f"(camera: {change.summary})"))
        now = time.perf_counter()
        self._run(
            UserTurn(tid, "", now, now, now, 0.0),
            f"(Someone just arrived. The camera sees: {change.summary}. Greet them in one short sentence.)",
            tools=False,
        )

    def _tidy(self) -> None:
        """While the floor is free: compact the context ahead of need and read it into the KV cache.

        Stops within one prefill chunk once the floor is not free (the user speaks, an utterance,
        a typed line or a background result arrives, the speaker plays) or a round wants the
        model; the next quiet moment goes on from there. It stops as soon as the user speaks,
        not only at the first pause: reading on beside the user's speech left a chunk running
        into the pause's transcription and early start (soak, 243 turns: spoken turns' median
        voice-to-voice 1744 ms against 1606 ms).
        """
        clock = self.inbox.clock

        def stop() -> bool:
            if clock is not None:
                clock.progress()  # a long history read in chunks is no stall
            return not self.work.quiet() or self.inbox.waiting or self.has_news()

        t0 = time.perf_counter()
        try:
            done = self.core.conversation.tidy(stop)
        except Exception:  # an optimisation: the next turn compacts and evaluates by itself
            log.exception("tidying the context between turns failed")
            self._untidy = False
            return
        self._untidy = not done.complete
        if done.dropped:
            self.core.keep_history()
        took = (time.perf_counter() - t0) * 1000
        self.publish(ContextTidied(-1, done.dropped, done.evaluated, done.complete, round(took, 1)))

    def has_news(self) -> bool:
        """A background result or a scene change is waiting to be spoken about."""
        return self.core.conversation.has_background() or not self.core.scene_changes.empty()

    def _cut_history(self, msg: CutHistory) -> None:
        """Keep only what the user heard of an interrupted reply."""
        self._untidy = True
        kept = self.core.conversation.truncate_turn(list(msg.heard))
        self.core.keep_history()
        dropped = " ".join(p for p in msg.generated if p not in msg.heard)
        self.publish(HistoryCut(msg.turn_id, kept, dropped))
