"""The turn loop: user text → model rounds → tool calls → results → model → the reply.

A turn is at most ``max_tool_rounds`` model rounds; each round's tool calls run (validated,
never raising) and their results go back to the model. The last allowed round offers no
tools, so every turn ends in speech. Guards: identical repeated calls are answered with a
warning after 3 and stop the turn after 5; unknown tools and bad arguments become error
results the model sees; calls after the round budget are not run. Speech streams out
through ``on_text`` (after conversational mode's sentence cap); tool calls and results go
out as messages through ``emit``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.config import LLMConfig
from agent.context import fit_history
from agent.conversation import history as hist
from agent.conversation.background import BackgroundCalls
from agent.conversation.prompt import Prompter, resolve_format
from agent.conversation.rounds import GrammarRounds, NativeRounds, RoundOutput
from agent.events import BackgroundDone, Event, ToolCall, ToolResult
from agent.llm import ChatModel, Generation
from agent.sentences import SentenceCap, limit_sentences
from agent.skills import SkillContext, SkillRegistry, ToolOutcome
from agent.toolgrammar import NO_TOOL, tool_prior

log = logging.getLogger(__name__)

REPEAT_WARN = 3
REPEAT_STOP = 5
SORRY = "Sorry, I had a problem thinking about that."


@dataclass
class TurnResult:
    """What one turn produced.

    Attributes:
        text: The full reply text to speak (no markup).
        calls: ``(name, arguments, outcome)`` per tool call, in order.
        ttft_ms: First round's time to first token, ms.
        llm_ms: Time spent in the model over all rounds, ms.
        prompt_tokens: Prompt tokens evaluated over all rounds (KV-cache reuse excluded).
        rounds: Model rounds run.
        problems: Messages about malformed output or stopped loops.
        thinking_tokens: Tokens spent thinking over all rounds.
        thinking_forced: The thinking budget ran out and the runtime closed the block.
        tokens_per_s: Decoding speed of the turn's longest round, tokens/s (0 when no round made
            more than one token).
        draft_tokens: Tokens proposed by a draft model over all rounds (server engines).
        draft_accepted: Of those, tokens the model accepted.
    """

    text: str = ""
    calls: list[tuple[str, dict[str, Any], ToolOutcome]] = field(default_factory=list)
    ttft_ms: float = 0.0
    llm_ms: float = 0.0
    prompt_tokens: int = 0
    rounds: int = 0
    problems: list[str] = field(default_factory=list)
    thinking_tokens: int = 0
    thinking_forced: bool = False
    tokens_per_s: float = 0.0
    draft_tokens: int = 0
    draft_accepted: int = 0
    _longest: int = field(default=0, repr=False)

    @property
    def draft_acceptance(self) -> float | None:
        """Accepted share of drafted tokens, 0..1; None without a drafter."""
        return self.draft_accepted / self.draft_tokens if self.draft_tokens else None


class Conversation:
    """History plus the turn loop for one conversation.

    Args:
        model: The chat model.
        registry: Skills offered as tools.
        ctx: Handed to skills.
        cfg: ``[llm]`` settings (system prompt, rounds, format).
        emit: Receives ``ToolCall``/``ToolResult`` messages.
    """

    def __init__(
        self,
        model: ChatModel,
        registry: SkillRegistry,
        ctx: SkillContext,
        cfg: LLMConfig,
        emit: Callable[[Event], None] | None = None,
    ) -> None:
        self.model, self.registry, self.ctx, self.cfg = model, registry, ctx, cfg
        self.emit = emit if emit is not None else (lambda e: None)
        self.format = resolve_format(cfg.tool_format, model)
        self.history: list[dict[str, Any]] = []
        self.prompter = Prompter(model, registry, cfg, self.format)
        self.background = BackgroundCalls(registry)
        self._grammar_rounds = GrammarRounds(model, registry)
        self._native_rounds = NativeRounds(model, self.prompter, cfg, self.format)

    # --- prompt ------------------------------------------------------------------------------------
    def system_prompt(self) -> str:
        """The system prompt as sent (see :class:`~agent.conversation.prompt.Prompter`)."""
        return self.prompter.system_prompt()

    def thinks(self, allow_tools: bool) -> bool:
        """Whether a round reasons first (config ``reasoning``; never in grammar mode)."""
        return self.prompter.thinks(allow_tools)

    def render(self, allow_tools: bool = True, think: bool = False) -> str:
        """Render the system prompt and the history for the next model round."""
        return self.prompter.render(self.history, allow_tools, think)

    def warmup(self) -> float:
        """Evaluate the static prompt prefix once (fills the KV cache, pays first-batch cost); ms."""
        self.history.append({"role": "user", "content": "Hello."})
        try:
            return self.model.warmup(self.render())
        finally:
            self.history.pop()

    def fit_context(self, allow_tools: bool = True, think: bool = False) -> int:
        """Compact the history when the next prompt leaves no room to answer; returns turns dropped."""

        def tokens(candidate: list[dict[str, Any]]) -> int:
            return self.model.count_tokens(self.prompter.render(candidate, allow_tools, think))

        reserve = self.cfg.max_tokens + (self.cfg.thinking_budget_tokens if think else 0)
        self.history, dropped = fit_history(self.history, tokens, self.model.n_ctx, reserve)
        return dropped

    # --- the turn ----------------------------------------------------------------------------------
    def turn(
        self,
        text: str,
        turn_id: int,
        state: str | None = None,
        on_text: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        tools: bool = True,
    ) -> TurnResult:
        """Run one user turn to the end.

        Args:
            text: What the user said.
            turn_id: Turn number for messages.
            state: Dynamic app state (time, robot, scene) added to this user message only,
                so the earlier prompt stays byte-identical for KV-cache reuse.
            on_text: Receives speech text deltas as they are generated.
            cancel: Set to stop generation (barge-in); the turn ends with what was produced.
            tools: Offer tools (False for turns that only report a background result).

        Returns:
            The :class:`TurnResult`; never raises for model or tool problems.
        """
        content = f"{text}\n\n[{state}]" if state else text
        self.history.append({"role": "user", "content": content})
        res = TurnResult()
        cap = SentenceCap(
            self.cfg.max_reply_sentences if self.cfg.conversational_mode else 0, on_text, cancel
        )
        seen: dict[str, int] = {}
        spoken: list[str] = []
        for rnd in range(self.cfg.max_tool_rounds):
            allow_tools = tools and rnd < self.cfg.max_tool_rounds - 1 and bool(self.registry.skills)
            bonuses: dict[str, float] = {}
            if self.format == "grammar" and allow_tools:
                bonuses = tool_prior(
                    text,
                    list(self.registry.skills.values()),
                    {name for name, _, _ in res.calls},
                    self.cfg.tool_prior_bonus,
                )
                # After the first round a small model tends to repeat itself: offer tools again
                # only when the user's words still point at one not yet called.
                if rnd > 0 and self.cfg.tool_prior_bonus > 0 and bonuses.get(NO_TOOL, 0) > 0:
                    allow_tools = False
            res.rounds += 1
            gen = Generation()
            try:
                say, calls, problem = self._round(
                    allow_tools, gen, cap, bonuses, frozenset(name for name, _, _ in res.calls)
                )
            except Exception as e:  # a model failure must not lose the conversation
                log.exception("turn %d: model round failed", turn_id)
                res.problems.append(f"model error: {e}")
                say, calls, problem = SORRY, [], ""
                cap.feed(say)
            cap.flush()
            self._account(res, gen, rnd)
            if problem and not cap.cancel.is_set():  # output cut by the cap or a barge-in is expected
                res.problems.append(problem)
            if say:
                spoken.append(say)
            if calls and not allow_tools:  # the round budget is spent: calls now are not run
                res.problems.append(
                    f"ignored {len(calls)} tool call(s) after the tool-round budget was spent"
                )
                calls = []
            self.history.append(
                hist.assistant_message(say, calls, gen.text if self.format == "grammar" else "")
            )
            if not calls or cap.user_cancelled():
                break
            if self._run_calls(calls, turn_id, rnd, seen, res):
                res.problems.append("stopped a repeated tool call loop")
                break
        res.text = limit_sentences(hist.join_unique(spoken), cap.limit)
        return res

    def _round(
        self,
        allow_tools: bool,
        gen: Generation,
        cap: SentenceCap,
        bonuses: dict[str, float],
        done: frozenset[str],
    ) -> RoundOutput:
        think = self.thinks(allow_tools)
        gen.extra["dropped_turns"] = self.fit_context(allow_tools, think)
        if self.format == "grammar":
            return self._grammar_rounds.run(
                self.render(allow_tools), gen, allow_tools, cap.feed, cap.cancel, bonuses, done
            )
        return self._native_rounds.run(self.render(allow_tools, think), gen, think, cap.feed, cap.cancel)

    @staticmethod
    def _account(res: TurnResult, gen: Generation, rnd: int) -> None:
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

    def _run_calls(
        self, calls: list[dict[str, Any]], turn_id: int, rnd: int, seen: dict[str, int], res: TurnResult
    ) -> bool:
        """Run one round's calls; True when a repeated-call loop must stop the turn."""
        stop_turn = False
        for i, call in enumerate(calls):
            key = json.dumps([call["name"], call["arguments"]], sort_keys=True, default=str)
            seen[key] = seen.get(key, 0) + 1
            call_id = f"t{turn_id}r{rnd}c{i}"
            self.emit(ToolCall(turn_id, call["name"], call["arguments"], call_id))
            if seen[key] >= REPEAT_STOP:
                outcome = ToolOutcome(
                    False, f"{call['name']} was called {seen[key]} times with the same arguments; stopped"
                )
                stop_turn = True
            elif seen[key] >= REPEAT_WARN:
                outcome = ToolOutcome(
                    False,
                    f"{call['name']} already ran {seen[key] - 1} times with these "
                    f"arguments this turn; do not call it again, answer the user",
                )
            else:
                outcome = self.registry.call(
                    call["name"], call["arguments"], self.ctx, self.background.callback(call["name"], call_id)
                )
            self.emit(ToolResult(turn_id, call["name"], outcome.ok, outcome.result, call_id))
            res.calls.append((call["name"], call["arguments"], outcome))
            self.history.append(
                {
                    "role": "tool",
                    "name": call["name"],
                    "tool_call_id": call_id,
                    "content": json.dumps(outcome.result, default=str)
                    if outcome.ok
                    else f"ERROR: {outcome.result}",
                }
            )
        return stop_turn

    # --- background results and history surgery ------------------------------------------------------
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
        cancel: threading.Event | None = None,
    ) -> TurnResult:
        """Tell the model a background call finished and let it speak about it (no new tools)."""
        status = "finished" if done.ok else "failed"
        note = f"(The background task {done.tool} {status}: {done.result})"
        return self.turn(note, turn_id, on_text=on_text, cancel=cancel, tools=False)

    def last_reply(self) -> str:
        """The newest assistant message's text ("" when there is none)."""
        return hist.last_reply(self.history)

    def truncate_last_reply(self, heard: str) -> None:
        """Keep only ``heard`` of the newest assistant message (barge-in: the rest was never played)."""
        hist.truncate_last_reply(self.history, heard)
