"""The turn loop: the user's words → model rounds → the calls it wrote → results → the model → its reply.

The plain loop of every capable model: the tools are offered natively, each round's calls run,
each result goes back in the engine's protocol, and the model speaks. A turn is at most
``max_tool_rounds`` rounds; the last one offers no tools, so every turn ends in speech. Speech
streams out through ``on_text`` after conversational mode's sentence cap; tool calls and results
go out as messages through ``emit``. Running a call (ids, the repeat guard, validation and
clamps, background skills, a turn waiting for its confirmation) is :mod:`agent.conversation.calls`.

The model profile (:mod:`agent.conversation.policy`) gives each turn its rules; the plain ones
take the model as it is, and the loop asks them at fixed points: a round's plan, a filter on its
speech, a call before and after it runs, whether another round follows, and what is said after
the rounds. The small-model profile (:mod:`agent.conversation.small`) steps in at those points.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.config import LLMConfig
from agent.control import ReleaseGate, StopSignal
from agent.conversation import history as hist
from agent.conversation.background import BackgroundCalls
from agent.conversation.calls import CallRunner, RoundCalls
from agent.conversation.policy import (
    Answer,
    PlainPolicy,
    PlainRules,
    SpeechFilter,
    TurnPolicy,
    TurnStart,
    choose_profile,
)
from agent.conversation.prompt import resolve_format
from agent.conversation.records import TurnResult
from agent.conversation.results import spoken_result
from agent.conversation.rounds import GrammarRounds, NativeRounds, RoundIO, RoundOutput, RoundPlan
from agent.conversation.small import SmallPolicy
from agent.conversation.toolgrammar import NO_TOOL
from agent.conversation.window import ContextWindow
from agent.engines import ChatEngine, Generation
from agent.engines.base import ContextFull
from agent.events import BackgroundDone, Event
from agent.skills import SkillContext, SkillRegistry, ToolOutcome
from agent.speech.sentences import SentenceCap, limit_sentences

log = logging.getLogger(__name__)

SORRY = "Sorry, I had a problem thinking about that."
"""What the robot says when a turn fails (a model error): the conversation goes on."""


class Conversation(ContextWindow):
    """History plus the turn loop for one conversation.

    Args:
        model: The chat model.
        registry: Skills offered as tools.
        ctx: Handed to skills.
        cfg: ``[llm]`` settings (system prompt, rounds, format, profile).
        emit: Receives ``ToolCall``/``ToolResult`` messages.

    Attributes:
        format: The tool-call format (:func:`~agent.conversation.prompt.resolve_format`).
        profile: ``plain`` or ``small`` (:func:`~agent.conversation.policy.choose_profile`).
        policy: The profile's :class:`~agent.conversation.policy.TurnPolicy`.

    Raises:
        ValueError: an unknown ``[llm] profile``.
    """

    def __init__(
        self,
        model: ChatEngine,
        registry: SkillRegistry,
        ctx: SkillContext,
        cfg: LLMConfig,
        emit: Callable[[Event], None] | None = None,
    ) -> None:
        fmt = resolve_format(cfg.tool_format, model)
        self.profile = choose_profile(cfg.profile, fmt, model)
        self.policy: TurnPolicy = (
            SmallPolicy(registry, ctx, cfg, fmt) if self.profile == "small" else PlainPolicy(registry, ctx)
        )
        words = self.policy.reads_free_text
        super().__init__(model, registry, cfg, fmt, self.policy.hides_earlier_speech, words)
        self.ctx = ctx
        self.emit = emit if emit is not None else (lambda e: None)
        self.background = BackgroundCalls(registry)
        self._grammar_rounds = GrammarRounds(model, registry, cfg, words)
        self._native_rounds = NativeRounds(model, cfg, fmt)

    def turn(
        self,
        text: str,
        turn_id: int,
        state: str | None = None,
        on_text: Callable[[str], None] | None = None,
        stop: StopSignal | None = None,
        tools: bool = True,
        on_pause: Callable[[], None] | None = None,
        release: ReleaseGate | None = None,
        data: tuple[str, ...] = (),
    ) -> TurnResult:
        """Run one user turn to the end.

        Args:
            text: What the user said.
            turn_id: Turn number for messages.
            state: Dynamic app state (time, robot, scene) added to this user message only,
                so the earlier prompt stays byte-identical for KV-cache reuse.
            on_text: Receives speech text deltas as they are generated.
            stop: Set to stop generation (barge-in); the turn ends with what was produced.
            tools: Offer tools (False for turns that only report a background result).
            on_pause: Called before a round when an earlier round spoke: what was said so
                far is finished and can be synthesized without waiting for more text.
            release: Calls of skills with side effects wait for this gate (a turn prepared
                before the user's silence confirmed it); a dropped gate runs none. Skills that
                only read (``side_effects=False``) run at once. None: every call runs at once.
            data: Results the reply must carry besides this turn's own (a finished background
                call's; the small-model profile reads them back).

        Returns:
            The :class:`TurnResult`; never raises for model or tool problems.
        """
        rules = self.policy.begin(TurnStart(text, list(self.history), data, tools))
        self.history.append({"role": "user", "content": f"{text}\n\n[{state}]" if state else text})
        res = TurnResult()
        cap = SentenceCap(self.cfg.max_reply_sentences if self.cfg.conversational_mode else 0, on_text, stop)
        say_now = functools.partial(_say_now, on_text, on_pause)
        runner = CallRunner(self.registry, self.ctx, self.background, rules, res, turn_id, self.emit, say_now)
        now = _TurnState(turn_id, rules, runner, cap, res, tools, on_pause, release, stop)
        direct = rules.answer() if tools else None
        for rnd in range(0 if direct is not None else self.cfg.max_tool_rounds):
            say, ran, calls = self._one_round(now, rnd)
            if say:
                now.spoken.append(say)
            if not calls or cap.user_cancelled():
                break
            if ran.stop:
                res.problems.append("stopped a repeated tool call loop")
                break
            if not rules.next_round(say, res, ran.first, rnd, not cap.cancel.is_set()):
                break
        if direct is not None:
            self._answered(now, direct)
        res.text = limit_sentences(hist.join_unique(now.spoken), cap.limit)
        owed = rules.after(res, now.spoken, cap.user_cancelled())
        if owed:
            said = self._say_after(owed, on_text, on_pause)
            res.text = f"{res.text} {said}".strip()
        return res

    def _one_round(self, now: _TurnState, rnd: int) -> tuple[str, RoundCalls, list[dict[str, Any]]]:
        """Round ``rnd`` of a turn: plan it, generate, run its calls, keep it in the history.

        Returns:
            ``(say, ran, calls)``: what it said (with what was said at once about its calls),
            the calls run, and every call it wrote that the round budget allowed.
        """
        cap, res, rules = now.cap, now.res, now.rules
        allow_tools = now.tools and rnd < self.cfg.max_tool_rounds - 1 and bool(self.registry.skills)
        plan = rules.plan(rnd, RoundPlan(allow_tools), res, now.spoken)
        if now.spoken and now.on_pause is not None:
            now.on_pause()
        res.rounds += 1
        gen = Generation()
        ran = RoundCalls(f"t{now.turn_id}r{rnd}c", len(res.calls), release=now.release, turn_stop=now.stop)
        speech = rules.speech(plan, cap.feed, cap.cancel, res)
        io = RoundIO(
            speech.feed if speech is not None else cap.feed,
            cap.cancel,
            cap.user_cancel,
            functools.partial(now.runner.run, ran, during_round=True) if plan.allow_tools else None,
            functools.partial(_release, cap, now.on_pause, speech),
        )
        try:
            say, calls, problem = self._round(plan, gen, io)
        except Exception as e:  # a model failure must not lose the conversation
            say, calls, problem = self._round_failed(now.turn_id, e, rules, plan, res)
            cap.feed(say)
        calls = ran.calls + calls[len(ran.calls) :]  # a call that ran stays, even if the round failed
        if speech is not None:
            say = speech.finish(say)
        cap.flush()
        _account(res, gen, rnd)
        if problem and not cap.cancel.is_set():  # output cut by the cap or a barge-in is expected
            res.problems.append(problem)
        if calls and not plan.allow_tools:  # the round budget is spent: calls now are not run
            res.problems.append(f"ignored {len(calls)} tool call(s) after the tool-round budget was spent")
            calls = []
        ran.number(calls)
        # The generated text as it is (its KV cache is reused), unless words were left out of it.
        raw = gen.text if self.format == "grammar" and not (speech is not None and speech.cut) else ""
        message = hist.assistant_message(say, calls, raw)
        self.history.append(message)
        for call in calls[len(ran.calls) :]:  # calls not handed out during the round run now
            now.runner.run(ran, call)
        if ran.said:  # the turn's speech, and the model sees that it was said
            say = " ".join([say, *ran.said]).strip()
            message["content"] = say
            message.pop("raw", None)
        self.history.extend(ran.messages)  # tool results after the assistant message that called
        return say, ran, calls

    def _answered(self, now: _TurnState, direct: Answer) -> None:
        """A turn the rules answer without the model: its words said, its calls run, both kept in history."""
        calls = [dict(c) for c in direct.calls]
        ran = RoundCalls(f"t{now.turn_id}a", 0, release=now.release, turn_stop=now.stop)
        ran.number(calls)
        if direct.say:
            now.cap.feed(direct.say)
            now.cap.flush()
            now.spoken.append(direct.say)
        self.history.append(hist.assistant_message(direct.say, calls))
        for call in calls:
            now.runner.run(ran, call)
        self.history.extend(ran.messages)

    def _round(self, plan: RoundPlan, gen: Generation, io: RoundIO) -> RoundOutput:
        """Run one round of ``plan`` in the conversation's format, fitting the context first."""
        plan = dataclasses.replace(plan, think=self.thinks(plan.allow_tools))
        gen.extra["dropped_turns"] = self.fit_context(plan.allow_tools, plan.think)
        prompt = self.prompter.prompt(self.history, plan.allow_tools, plan.think)
        if self.format == "grammar":
            return self._grammar_rounds.run(prompt, gen, plan, io)
        return self._native_rounds.run(prompt, gen, plan, RoundIO(io.on_text, io.speech_done, io.barge_in))

    @staticmethod
    def _round_failed(
        turn_id: int, e: Exception, rules: PlainRules, plan: RoundPlan, res: TurnResult
    ) -> RoundOutput:
        """``(say, calls, problem)`` of a round that raised (called while ``e`` is handled).

        The rules may say something else than :data:`SORRY` (the small-model profile says
        nothing when the context has no room left to read a result back: it says the result
        as written after the rounds).
        """
        instead = rules.round_failed(e, plan)
        if instead is not None:
            log.warning("turn %d: model round failed (%s); %r said instead", turn_id, e, instead)
            res.problems.append(f"{'context full' if isinstance(e, ContextFull) else 'model error'}: {e}")
            return instead, [], ""
        log.exception("turn %d: model round failed", turn_id)
        res.problems.append(f"model error: {e}")
        return SORRY, [], ""

    def _say_after(
        self,
        owed: list[str],
        on_text: Callable[[str], None] | None,
        on_pause: Callable[[], None] | None,
    ) -> str:
        """Say ``owed`` after the rounds (past the reply cap) and keep it in the history; returns it.

        ``owed``: sentences the turn's rules say after the rounds: results written for people that
        no model round read back (:meth:`~agent.conversation.policy.PlainRules.after`).
        """
        say = " ".join(owed)
        _say_now(on_text, on_pause, say)
        raw = json.dumps({"call": {"tool": NO_TOOL}, "say": say}) if self.format == "grammar" else ""
        self.history.append(hist.assistant_message(say, [], raw))
        return say

    # --- background results --------------------------------------------------------------------
    @property
    def background_running(self) -> int:
        """Background calls started and not finished."""
        return self.background.running

    def background_callback(self, name: str, call_id: str) -> Callable[[ToolOutcome], None] | None:
        """The completion callback for a call of ``name`` (None: not a background skill)."""
        return self.background.callback(name, call_id)

    def next_background(self, timeout: float = 0.0) -> BackgroundDone | None:
        """The next finished background call (FIFO, each returned once), or None."""
        return self.background.next(timeout)

    def has_background(self) -> bool:
        """A finished background call is waiting to be spoken about."""
        return self.background.waiting()

    def background_turn(
        self,
        done: BackgroundDone,
        turn_id: int,
        on_text: Callable[[str], None] | None = None,
        stop: StopSignal | None = None,
    ) -> TurnResult:
        """Tell the model a background call finished and let it speak about it (no new tools).

        A result its profile says is written for people (:meth:`TurnPolicy.as_written`: a
        skill's ``as_written`` result, such as a timer's "Time is up: ...") is said as written,
        with no model round.
        """
        status = "finished" if done.ok else "failed"
        note = f"(The background task {done.tool} {status}: {done.result})"
        data = (spoken_result(done.result),) if done.ok and spoken_result(done.result) else ()
        if self.policy.as_written(done):
            self.history.append({"role": "user", "content": note})
            res = TurnResult()
            res.text = self._say_after([spoken_result(done.result)], on_text, None)
            return res
        return self.turn(note, turn_id, on_text=on_text, stop=stop, tools=False, data=data)


@dataclass
class _TurnState:
    """What the rounds of one turn share."""

    turn_id: int
    rules: PlainRules
    runner: CallRunner
    cap: SentenceCap
    res: TurnResult
    tools: bool
    on_pause: Callable[[], None] | None
    release: ReleaseGate | None
    stop: StopSignal | None
    spoken: list[str] = field(default_factory=list)


def _say_now(on_text: Callable[[str], None] | None, on_pause: Callable[[], None] | None, say: str) -> None:
    """Speak ``say`` now, as an utterance of its own (what was said before it is finished)."""
    if on_pause is not None:
        on_pause()
    if on_text is not None:
        on_text(say)


def _release(cap: SentenceCap, on_pause: Callable[[], None] | None, speech: SpeechFilter | None) -> None:
    """A whole utterance went through ``cap`` (an acknowledgement): count it and have it spoken now."""
    if speech is not None:
        speech.flush()  # an acknowledgement it holds is whole now
    cap.flush()
    if on_pause is not None:
        on_pause()


def _account(res: TurnResult, gen: Generation, rnd: int) -> None:
    """Add round ``rnd``'s statistics (``gen``) to the turn's."""
    res.llm_ms += gen.total_ms
    res.prompt_tokens += gen.prompt_tokens
    res.draft_tokens += gen.draft_tokens
    res.draft_accepted += gen.draft_accepted
    if gen.tokens_per_s and gen.completion_tokens > res._longest:
        res.tokens_per_s, res._longest = gen.tokens_per_s, gen.completion_tokens
    thinking = gen.extra.get("thinking")
    if thinking is not None:
        res.thinking_tokens += thinking.tokens
        res.thinking_forced |= thinking.forced
    if rnd == 0:
        res.ttft_ms = gen.ttft_ms
