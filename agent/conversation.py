"""The turn loop: user text → model → tool calls → results → model → spoken reply.

One :class:`Conversation` keeps the history of one conversation and runs turns on one
:class:`~agent.llm.ChatModel`. A turn is at most ``max_tool_rounds`` model rounds; each
round's tool calls run (validated, never raising) and their results go back to the model.
The last allowed round offers no tools, so every turn ends in speech.

Two tool-call paths, chosen by ``[llm] tool_format`` (``auto`` picks from the GGUF):

* ``grammar`` — models without a tool format (the embedded SmolLM2): the reply is JSON
  constrained by a grammar built from the skills' schemas (:mod:`agent.toolgrammar`).
* ``bolt`` / ``hermes`` — models with native markup: tools go into the chat template and
  the reply is parsed by the streaming parsers of :mod:`agent.toolparse`.

Speech streams out through ``on_text`` (text deltas as the model writes them); tool calls
and results go out as events through ``emit``. Guards: identical repeated calls are
answered with a warning after 3 and stop the turn after 5; unknown tools and bad
arguments become error results the model sees. History is a list of OpenAI-style dicts.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.config import LLMConfig
from agent.context import fit_history
from agent.streaming import SentenceCap
from agent.events import BackgroundDone, Event, ToolCall, ToolResult
from agent.llm import ChatModel, Generation
from agent.skills import SkillContext, SkillRegistry, ToolOutcome
from agent.reasoning import ThinkingBudget, ThinkingStats, markers_for, template_knows_thinking
from agent.speech_text import limit_sentences
from agent.toolgrammar import (NO_TOOL, SayStreamer, ToolChoicePrior, as_grammar_messages, parse_reply,
                               reply_schema, tool_prior, tools_prompt)

log = logging.getLogger(__name__)

REPEAT_WARN = 3
REPEAT_STOP = 5


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


def resolve_format(cfg_format: str, model: ChatModel) -> str:
    """The tool-call format to use: the config's, or one detected from the GGUF for ``auto``."""
    if cfg_format != "auto":
        return cfg_format
    from agent.toolparse import detect_format

    fmt = detect_format(model.template if model.has_template else None, model.architecture)
    return fmt if fmt in ("bolt", "hermes") else "grammar"


class Conversation:
    """History plus the turn loop for one conversation.

    Args:
        model: The chat model.
        registry: Skills offered as tools.
        ctx: Handed to skills.
        cfg: ``[llm]`` settings (system prompt, rounds, format).
        emit: Receives ``ToolCall``/``ToolResult`` events.
    """

    def __init__(self, model: ChatModel, registry: SkillRegistry, ctx: SkillContext, cfg: LLMConfig,
                 emit: Callable[[Event], None] | None = None) -> None:
        self.model = model
        self.registry = registry
        self.ctx = ctx
        self.cfg = cfg
        self.emit = emit if emit is not None else (lambda e: None)
        self.format = resolve_format(cfg.tool_format, model)
        self.history: list[dict[str, Any]] = []
        self._background: queue.Queue[BackgroundDone] = queue.Queue()
        self._bg_lock = threading.Lock()
        self.background_running = 0
        self._grammars: dict[tuple[bool, frozenset[str]], Any] = {}

    # --- prompt ---------------------------------------------------------------------
    def system_prompt(self) -> str:
        """The system prompt as sent.

        Grammar mode appends the tool list and reply format. ``conversational_mode`` reaches
        templates that read it as a variable; for the others one line is added here instead.
        """
        text = self.cfg.system_prompt
        if self.cfg.conversational_mode and "conversational_mode" not in self.model.template:
            n = self.cfg.max_reply_sentences
            text += (f"\nConversational mode: answer in at most {n} short spoken sentence{'s' if n != 1 else ''}"
                     if n else "\nConversational mode: answer in short spoken sentences") + \
                ", with no lists, markdown or emoji."
        if self.format == "grammar" and self.registry.skills:
            text += f"\n{tools_prompt(list(self.registry.skills.values()))}"
        return text

    def thinks(self, allow_tools: bool) -> bool:
        """Whether this round reasons first (config ``reasoning``; never in grammar mode)."""
        if self.format == "grammar":
            return False
        return self.cfg.reasoning == "on" or (self.cfg.reasoning == "tools" and allow_tools)

    def render(self, allow_tools: bool = True, think: bool = False) -> str:
        """Render the system prompt and history for the next model round.

        Args:
            allow_tools: Declare the tools (native formats).
            think: Open a thinking block: ``enable_thinking`` for templates that know it,
                otherwise the opening marker is pre-filled after the generation prompt.
        """
        messages = [{"role": "system", "content": self.system_prompt()}]
        if self.format == "grammar":
            messages += as_grammar_messages(self.history)
            return self.model.render(messages, conversational_mode=self.cfg.conversational_mode)
        from agent.messages import normalize_for_template

        msgs = normalize_for_template(messages + self.history, self.model.template)
        tools = self.registry.tool_schemas() if allow_tools else None
        prompt = self.model.render(msgs, tools=tools, enable_thinking=think,
                                   conversational_mode=self.cfg.conversational_mode)
        if think and not template_knows_thinking(self.model.template):
            prompt += markers_for(self.model.template).open
        return prompt

    def _grammar(self, allow_tools: bool, exclude: frozenset[str] = frozenset()) -> Any:
        """Grammar for a round; tools already called this turn are left out (no loops by construction)."""
        key = (allow_tools, exclude)
        if key not in self._grammars:
            from llama_cpp import LlamaGrammar

            skills = [s for s in self.registry.skills.values() if s.name not in exclude]
            schema = reply_schema(skills, allow_tools and bool(skills))
            self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        return self._grammars[key]

    def warmup(self) -> float:
        """Evaluate the static prompt prefix once (fills the KV cache, pays first-batch cost); ms."""
        self.history.append({"role": "user", "content": "Hello."})
        try:
            return self.model.warmup(self.render())
        finally:
            self.history.pop()

    # --- the turn ---------------------------------------------------------------------
    def turn(self, text: str, turn_id: int, state: str | None = None,
             on_text: Callable[[str], None] | None = None, cancel: threading.Event | None = None,
             tools: bool = True) -> TurnResult:
        """Run one user turn to the end.

        Args:
            text: What the user said.
            turn_id: Turn number for events.
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
        cap = SentenceCap(self.cfg.max_reply_sentences if self.cfg.conversational_mode else 0, on_text, cancel)
        on_text, cancel = cap.feed, cap.cancel
        seen: dict[str, int] = {}
        spoken: list[str] = []
        for rnd in range(self.cfg.max_tool_rounds):
            allow_tools = tools and rnd < self.cfg.max_tool_rounds - 1 and bool(self.registry.skills)
            bonuses: dict[str, float] = {}
            if self.format == "grammar" and allow_tools:
                bonuses = tool_prior(text, list(self.registry.skills.values()),
                                     {name for name, _, _ in res.calls}, self.cfg.tool_prior_bonus)
                # After the first round a small model tends to repeat itself: offer tools again
                # only when the user's words still point at one not yet called.
                if rnd > 0 and self.cfg.tool_prior_bonus > 0 and bonuses.get(NO_TOOL, 0) > 0:
                    allow_tools = False
            res.rounds += 1
            gen = Generation()
            try:
                say, calls, problem = self._round(allow_tools, gen, on_text, cancel, bonuses,
                                                  frozenset(name for name, _, _ in res.calls))
            except Exception as e:  # a model failure must not lose the conversation
                log.exception("turn %d: model round failed", turn_id)
                res.problems.append(f"model error: {e}")
                say, calls, problem = "Sorry, I had a problem thinking about that.", [], ""
                if on_text:
                    on_text(say)
            res.llm_ms += gen.total_ms
            res.prompt_tokens += gen.prompt_tokens
            thinking = gen.extra.get("thinking")
            if thinking is not None:
                res.thinking_tokens += thinking.tokens
                res.thinking_forced |= thinking.forced
            if rnd == 0:
                res.ttft_ms = gen.ttft_ms
            if problem and not cancel.is_set():  # output cut by the cap or a barge-in is expected
                res.problems.append(problem)
            if say:
                spoken.append(say)
            if calls and not allow_tools:  # the round budget is spent: calls now are not run
                res.problems.append(f"ignored {len(calls)} tool call(s) after the tool-round budget was spent")
                calls = []
            self.history.append(self._assistant_message(say, calls, gen.text if self.format == "grammar" else ""))
            if not calls or cap.user_cancelled():
                break
            stop_turn = False
            for i, call in enumerate(calls):
                key = json.dumps([call["name"], call["arguments"]], sort_keys=True, default=str)
                seen[key] = seen.get(key, 0) + 1
                call_id = f"t{turn_id}r{rnd}c{i}"
                self.emit(ToolCall(turn_id, call["name"], call["arguments"], call_id))
                if seen[key] >= REPEAT_STOP:
                    outcome = ToolOutcome(False, f"{call['name']} was called {seen[key]} times with the same "
                                                 f"arguments; stopped")
                    stop_turn = True
                elif seen[key] >= REPEAT_WARN:
                    outcome = ToolOutcome(False, f"{call['name']} already ran {seen[key] - 1} times with these "
                                                 f"arguments this turn; do not call it again, answer the user")
                else:
                    outcome = self.registry.call(call["name"], call["arguments"], self.ctx,
                                                 self._background_callback(call["name"], call_id))
                self.emit(ToolResult(turn_id, call["name"], outcome.ok, outcome.result, call_id))
                res.calls.append((call["name"], call["arguments"], outcome))
                self.history.append({"role": "tool", "name": call["name"], "tool_call_id": call_id,
                                     "content": json.dumps(outcome.result, default=str)
                                     if outcome.ok else f"ERROR: {outcome.result}"})
            if stop_turn:
                res.problems.append("stopped a repeated tool call loop")
                break
        res.text = limit_sentences(_join_unique(spoken), cap.limit)
        return res

    def fit_context(self, allow_tools: bool = True, think: bool = False) -> int:
        """Compact the history when the next prompt leaves no room to answer; returns turns dropped."""
        def tokens(candidate: list[dict[str, Any]]) -> int:
            current, self.history = self.history, candidate
            try:
                return self.model.count_tokens(self.render(allow_tools, think))
            finally:
                self.history = current

        reserve = self.cfg.max_tokens + (self.cfg.thinking_budget_tokens if think else 0)
        self.history, dropped = fit_history(self.history, tokens, self.cfg.n_ctx, reserve)
        return dropped

    def _round(self, allow_tools: bool, gen: Generation, on_text: Callable[[str], None] | None,
               cancel: threading.Event | None, bonuses: dict[str, float], done: frozenset[str]
               ) -> tuple[str, list[dict[str, Any]], str]:
        gen.extra["dropped_turns"] = self.fit_context(allow_tools, self.thinks(allow_tools))
        prompt = self.render(allow_tools)
        if self.format == "grammar":
            streamer = SayStreamer()
            llm = self.model.llm

            def prior(n_prompt: int) -> ToolChoicePrior:
                names = [n for n in self.registry.skills if n not in done] + [NO_TOOL]
                return ToolChoicePrior(lambda t: llm.tokenize(t.encode(), add_bos=False, special=False),
                                       lambda ids: llm.detokenize(ids).decode("utf-8", "ignore"), n_prompt, bonuses,
                                       names)

            for piece in self.model.stream(prompt, gen, grammar=self._grammar(allow_tools, done), cancel=cancel,
                                           logits_processor=prior if allow_tools and bonuses else None):
                delta = streamer.feed(piece)
                if delta and on_text:
                    on_text(delta)
            return parse_reply(gen.text)
        from agent.toolparse import ParsedToolCall, TextDelta, ToolCallError, make_parser, prompt_ends_in_thinking

        think = self.thinks(allow_tools)
        if think:
            prompt = self.render(allow_tools, think=True)
        starts_inside = prompt_ends_in_thinking(prompt)
        parser = make_parser(self.format, thinking_forced_open=starts_inside)
        budget = None
        if think:
            stats = gen.extra["thinking"] = ThinkingStats()
            llm = self.model.llm

            def budget(n_prompt: int) -> ThinkingBudget:
                return ThinkingBudget(lambda t: llm.tokenize(t.encode(), add_bos=False, special=True),
                                      lambda ids: llm.detokenize(ids, special=True).decode("utf-8", "ignore"),
                                      n_prompt, markers_for(self.model.template), starts_inside,
                                      self.cfg.thinking_budget_tokens, self.cfg.thinking_budget_ms, stats)
        text, calls, problems = [], [], []

        def handle(evs: list[Any]) -> None:
            for ev in evs:
                if isinstance(ev, TextDelta):
                    text.append(ev.text)
                    if on_text:
                        on_text(ev.text)
                elif isinstance(ev, ParsedToolCall):
                    calls.append({"name": ev.name, "arguments": ev.arguments})
                elif isinstance(ev, ToolCallError):
                    problems.append(ev.message)

        grammar = None
        if self.cfg.output_grammar:
            from llama_cpp import LlamaGrammar

            grammar = LlamaGrammar.from_string(self.cfg.output_grammar, verbose=False)
        for piece in self.model.stream(prompt, gen, cancel=cancel, logits_processor=budget, grammar=grammar):
            handle(parser.feed(piece))
        handle(parser.close())
        return "".join(text).strip(), calls, "; ".join(problems)

    # --- asynchronous tool calls ---------------------------------------------------------
    def _background_callback(self, name: str, call_id: str) -> Callable[[ToolOutcome], None] | None:
        sk = self.registry.skills.get(name)
        if sk is None or not sk.background:
            return None
        with self._bg_lock:
            self.background_running += 1

        def done(outcome: ToolOutcome) -> None:
            with self._bg_lock:
                self.background_running -= 1
                # Enqueued under the lock: results enter in the order they finished, once each.
                self._background.put(BackgroundDone(-1, name, outcome.ok, outcome.result, call_id))

        return done

    def next_background(self, timeout: float = 0.0) -> BackgroundDone | None:
        """The next finished background call (FIFO, each returned once), or None.

        Args:
            timeout: Seconds to wait for one; 0 returns at once.
        """
        try:
            return self._background.get(timeout=timeout) if timeout > 0 else self._background.get_nowait()
        except queue.Empty:
            return None

    def background_turn(self, done: BackgroundDone, turn_id: int,
                        on_text: Callable[[str], None] | None = None,
                        cancel: threading.Event | None = None) -> TurnResult:
        """Tell the model a background call finished and let it speak about it (no new tools)."""
        status = "finished" if done.ok else "failed"
        note = f"(The background task {done.tool} {status}: {done.result})"
        return self.turn(note, turn_id, on_text=on_text, cancel=cancel, tools=False)

    def _assistant_message(self, say: str, calls: list[dict[str, Any]], raw: str = "") -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "assistant", "content": say}
        if raw:
            msg["raw"] = raw
        if calls:
            msg["tool_calls"] = [{"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                                 for c in calls]
        return msg

    def truncate_last_reply(self, heard: str) -> None:
        """Keep only ``heard`` of the last assistant message (barge-in: the rest was never played)."""
        for msg in reversed(self.history):
            if msg["role"] == "assistant":
                msg["content"] = heard
                return


def _join_unique(parts: list[str]) -> str:
    seen, out = set(), []
    for p in parts:
        key = p.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(p.strip())
    return " ".join(out)
