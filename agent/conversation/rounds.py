"""One model round, two strategies: grammar-constrained JSON, or a model's native tool-call markup.

* :class:`GrammarRounds` — for models without a tool format (the embedded SmolLM2): the
  reply is JSON held to a grammar built from the skills' schemas (:mod:`agent.toolgrammar`),
  tools already called this turn left out; the ``say`` field streams to speech as it is
  written; a lexical *tool prior* biases the tool-name position toward tools the user named.
* :class:`NativeRounds` — Bolt / Gemma 4 and Hermes markup, parsed by the streaming parsers
  of :mod:`agent.toolparse` (markup and thinking never reach speech), with the thinking
  budget as a logits processor.

Both return ``(speech, calls, problem)`` where ``calls`` are ``{"name", "arguments"}`` dicts.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from agent.config import LLMConfig
from agent.conversation.prompt import Prompter
from agent.llm import ChatModel, Generation
from agent.reasoning import ThinkingBudget, ThinkingStats, markers_for
from agent.skills import SkillRegistry
from agent.toolgrammar import NO_TOOL, SayStreamer, ToolChoicePrior, parse_reply, reply_schema

RoundOutput = tuple[str, list[dict[str, Any]], str]


class GrammarRounds:
    """Rounds whose output is JSON held to a grammar.

    Args:
        model: The chat model.
        registry: Skills (the grammar's tool names and argument schemas).
    """

    def __init__(self, model: ChatModel, registry: SkillRegistry) -> None:
        self.model, self.registry = model, registry
        self._grammars: dict[tuple[bool, frozenset[str]], Any] = {}

    def grammar(self, allow_tools: bool, exclude: frozenset[str] = frozenset()) -> Any:
        """Grammar for a round; tools in ``exclude`` (called this turn) are left out."""
        key = (allow_tools, exclude)
        if key not in self._grammars:
            from llama_cpp import LlamaGrammar

            skills = [s for s in self.registry.skills.values() if s.name not in exclude]
            schema = reply_schema(skills, allow_tools and bool(skills))
            self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        return self._grammars[key]

    def run(
        self,
        prompt: str,
        gen: Generation,
        allow_tools: bool,
        on_text: Callable[[str], None] | None,
        cancel: threading.Event | None,
        bonuses: dict[str, float],
        done: frozenset[str],
    ) -> RoundOutput:
        """Generate one round; the ``say`` text streams to ``on_text`` while it is written."""
        streamer = SayStreamer()
        llm = self.model.llm

        def prior(n_prompt: int) -> ToolChoicePrior:
            names = [n for n in self.registry.skills if n not in done] + [NO_TOOL]
            return ToolChoicePrior(
                lambda t: llm.tokenize(t.encode(), add_bos=False, special=False),
                lambda ids: llm.detokenize(ids).decode("utf-8", "ignore"),
                n_prompt,
                bonuses,
                names,
            )

        for piece in self.model.stream(
            prompt,
            gen,
            grammar=self.grammar(allow_tools, done),
            cancel=cancel,
            logits_processor=prior if allow_tools and bonuses else None,
        ):
            delta = streamer.feed(piece)
            if delta and on_text:
                on_text(delta)
        return parse_reply(gen.text)


class NativeRounds:
    """Rounds in the model's own markup, parsed while streaming.

    Args:
        model: The chat model.
        prompter: Renders a round with the thinking block opened when reasoning.
        cfg: ``[llm]`` (thinking budget, optional output grammar).
        fmt: ``bolt`` or ``hermes``.
    """

    def __init__(self, model: ChatModel, prompter: Prompter, cfg: LLMConfig, fmt: str) -> None:
        self.model, self.prompter, self.cfg, self.format = model, prompter, cfg, fmt

    def run(
        self,
        prompt: str,
        gen: Generation,
        think: bool,
        on_text: Callable[[str], None] | None,
        cancel: threading.Event | None,
    ) -> RoundOutput:
        """Generate one round from ``prompt`` (already rendered with thinking when ``think``)."""
        from agent.toolparse import (
            ParsedToolCall,
            TextDelta,
            ToolCallError,
            make_parser,
            prompt_ends_in_thinking,
        )

        starts_inside = prompt_ends_in_thinking(prompt)
        parser = make_parser(self.format, thinking_forced_open=starts_inside)
        budget = None
        if think:
            stats = gen.extra["thinking"] = ThinkingStats()
            llm = self.model.llm

            def budget(n_prompt: int) -> ThinkingBudget:
                return ThinkingBudget(
                    lambda t: llm.tokenize(t.encode(), add_bos=False, special=True),
                    lambda ids: llm.detokenize(ids, special=True).decode("utf-8", "ignore"),
                    n_prompt,
                    markers_for(self.model.template),
                    starts_inside,
                    self.cfg.thinking_budget_tokens,
                    self.cfg.thinking_budget_ms,
                    stats,
                )

        text: list[str] = []
        calls: list[dict[str, Any]] = []
        problems: list[str] = []

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
