"""One model round, two strategies: grammar-constrained JSON, or a model's native tool-call markup.

A round is planned by the turn loop (:class:`RoundPlan`: what it may do) and streams into a
:class:`RoundIO` (where its speech and calls go, and its stop signals); the strategy turns the
plan into one :class:`~agent.engines.request.Decoding` for the engine and parses what streams
back.

* :class:`GrammarRounds` — for models without a tool format (the embedded SmolLM2): the
  reply is JSON held to a grammar built from the skills' schemas
  (:mod:`agent.conversation.toolgrammar`); what the plan says when a tool's name is written
  (its ``ack``, else the skill's preamble) is spoken then, the call is handed out as soon as its
  JSON object is complete, a reply without a call streams its ``say`` to speech as it is
  written. The request carries the openings the grammar forces after each tool name
  (:func:`forced_openings`, for jump-forward decoding) and what the plan adds (the small-model
  profile's tool prior, copy prior, drafting and repeat guard).
* :class:`NativeRounds` — Bolt / Gemma 4 and Hermes markup, parsed by the streaming parsers
  of :mod:`agent.toolparse` (markup and thinking never reach speech), with the thinking budget.

Both return ``(speech, calls, problem)`` where ``calls`` are ``{"name", "arguments"}`` dicts
(in grammar mode including a call already handed to ``on_call`` during the round).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.config import LLMConfig
from agent.control import StopSignal
from agent.conversation.prompt import Prompt
from agent.conversation.toolgrammar import (
    NO_TOOL,
    CallStreamer,
    SayStreamer,
    ToolNameSpotter,
    parse_reply,
    reply_schema,
    written_parameters,
)
from agent.engines import ChatEngine, Decoding, Generation, Thinking
from agent.engines.grammar import gbnf_from_schema
from agent.skills import Skill, SkillRegistry

RoundOutput = tuple[str, list[dict[str, Any]], str]

REPLY_OPENING = '{"call": {"tool": "'
"""How every grammar reply starts (the schema's fixed opening, spaced as ``json.dumps`` spaces the
replies in the history): evaluated with the prompt in one batch, not token by token."""

SAY_OPENING = f'{NO_TOOL}"}}, "say": "'
"""What follows :data:`REPLY_OPENING` in a reply that only speaks, up to its first word: the
whole opening of a speech-only round, and forced at once when a tool round writes ``none``."""


@dataclass(frozen=True)
class RoundPlan:
    """What one round of a turn may do (decided by the turn loop and its profile's rules).

    Attributes:
        allow_tools: Offer tools (else speech only).
        think: Reason first (native formats; the prompt was rendered with the block open).
        temperature: Sampling temperature (None: the configured one; 0: greedy).
        bonuses: Tool prior: tool name → logit bonus where the name is written (grammar mode).
        done: Tools left out of the grammar (grammar mode: not wanted now).
        copy_from: Tool results this round reads back (copy prior, drafting; grammar mode).
        avoid: Earlier replies this round must not repeat word for word (repeat guard).
        examples: Example replies of the system prompt, never to be copied (repeat guard).
        ack: What the robot says the moment the model writes a skill's name (grammar mode), ""
            for nothing; None says the skill's own ``preamble``.
    """

    allow_tools: bool = True
    think: bool = False
    temperature: float | None = None
    bonuses: Mapping[str, float] = field(default_factory=dict)
    done: frozenset[str] = frozenset()
    copy_from: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    ack: Callable[[Skill], str] | None = None


@dataclass(frozen=True)
class RoundIO:
    """Where a round's output goes while it is generated, and what stops it.

    Attributes:
        on_text: Receives speech deltas (after the reply cap), or None.
        speech_done: Set when no more speech is wanted (the reply cap, or a barge-in); a tool
            round still writes its call to the end first.
        barge_in: Set when the user interrupted: stop at once, call or not.
        on_call: Receives a grammar-mode call the moment its JSON object is complete, before
            ``say`` is written; None: the caller runs the returned calls after the round.
        on_utterance: Called after a movement's acknowledgement went to ``on_text``: it is a
            whole utterance, to be spoken now (a sentence chunker otherwise holds a sentence
            until the next one begins).
    """

    on_text: Callable[[str], None] | None = None
    speech_done: StopSignal | None = None
    barge_in: StopSignal | None = None
    on_call: Callable[[dict[str, Any]], None] | None = None
    on_utterance: Callable[[], None] | None = None


class GrammarRounds:
    """Rounds whose output is JSON held to a grammar.

    Args:
        model: The chat model.
        registry: Skills (the grammar's tool names and argument schemas).
        cfg: ``[llm]`` (the priors' bonus and penalty).
        read_from_words: Each skill's ``from_words`` parameters are left out of the grammar
            (the small-model profile reads them from the user's words).
    """

    def __init__(
        self, model: ChatEngine, registry: SkillRegistry, cfg: LLMConfig, read_from_words: bool = False
    ) -> None:
        self.model, self.registry, self.cfg = model, registry, cfg
        self.read_from_words = read_from_words

    def grammar(self, allow_tools: bool, exclude: frozenset[str] = frozenset()) -> str:
        """GBNF of a round's reply; tools in ``exclude`` are left out."""
        skills = [s for s in self.registry.skills.values() if s.name not in exclude]
        return gbnf_from_schema(reply_schema(skills, allow_tools and bool(skills), self.read_from_words))

    def request(self, prompt: Prompt, plan: RoundPlan) -> Decoding:
        """The round's request to the engine: grammar, forced openings, priors, drafting.

        Args:
            prompt: The rendered prompt.
            plan: What the round may do.
        """
        cfg = self.cfg
        offered = [s for s in self.registry.skills.values() if s.name not in plan.done]
        # The results as they appear inside the reply's "say" string: the copy prior compares
        # them with what is written there, and drafting writes them there.
        as_written = tuple(json.dumps(r)[1:-1] for r in plan.copy_from)
        return Decoding(
            prompt.text,
            messages=prompt.messages,
            template_vars=prompt.template_vars,
            grammar=self.grammar(plan.allow_tools, plan.done),
            prefix=REPLY_OPENING if plan.allow_tools else REPLY_OPENING + SAY_OPENING,
            forced=forced_openings(offered, self.read_from_words) if plan.allow_tools else (),
            tool_bonuses=dict(plan.bonuses) if plan.allow_tools else {},
            tool_names=(*(s.name for s in offered), NO_TOOL),
            copy_from=as_written if cfg.copy_prior_bonus else (),
            copy_bonus=cfg.copy_prior_bonus,
            avoid=plan.avoid if cfg.repeat_guard_penalty else (),
            avoid_penalty=cfg.repeat_guard_penalty,
            avoid_examples=plan.examples if cfg.repeat_guard_penalty else (),
            temperature=plan.temperature,
            # The result a reply reads back is also its draft (greedy rounds: the engine checks).
            draft=bool(as_written and cfg.copy_prior_bonus),
        )

    def _acknowledge(self, names: ToolNameSpotter, text: str, plan: RoundPlan, io: RoundIO) -> str:
        """Once the tool's name is written: say what the plan says then (``ack``, else the preamble).

        Returns:
            What was said ("" for nothing, or while the name is not whole yet).
        """
        skill = self.registry.skills.get(names.feed(text) or "")
        if skill is None:
            return ""
        # A slow look-up says its preamble while it runs (the small profile: a movement its
        # acknowledgement while it starts).
        ack = plan.ack(skill) if plan.ack is not None else skill.preamble
        if ack and io.on_text:
            io.on_text(ack)
        if ack and io.on_utterance:
            io.on_utterance()
        return ack

    def run(self, prompt: Prompt, gen: Generation, plan: RoundPlan, io: RoundIO) -> RoundOutput:
        """Generate one round; the ``say`` text streams to ``io.on_text`` while it is written.

        Args:
            prompt: The rendered prompt.
            gen: Receives the round's text and timings.
            plan: What the round may do.
            io: Where speech and calls go, and what stops the round.

        Returns:
            ``(speech, calls, problem)``; ``calls`` holds the call handed to ``on_call`` too.
        """
        streamer = SayStreamer()
        spotter = CallStreamer()
        names = ToolNameSpotter()
        ack = ""
        early: dict[str, Any] | None = None
        # A tool round stops at a barge-in, once its call is complete (the grammar allows nothing
        # after it but closing braces, written by CallStreamer.closing: on 2 cores the forced
        # tokens and the one sampled after them took 120 ms of a data turn, bench time.wav), and
        # at the reply cap only once its call is written: a multi-step command's later round may
        # start with the cap already spent, and its call still counts.
        stop = (
            StopSignal(*(s for s in (io.barge_in,) if s is not None)) if plan.allow_tools else io.speech_done
        )
        for piece in self.model.stream(self.request(prompt, plan), gen, stop):
            if plan.allow_tools and names.name is None:
                ack = self._acknowledge(names, gen.text, plan, io) or ack
            if not spotter.done:
                call = spotter.feed(piece)
                if call is not None and io.on_call is not None:
                    early = call  # runs once the stream has let go of the model (below)
            delta = streamer.feed(piece)
            if delta and io.on_text:
                io.on_text(delta)
            if plan.allow_tools and stop is not None:
                if spotter.call is not None:
                    stop.set("call complete")
                elif spotter.done and io.speech_done is not None and io.speech_done.is_set():
                    stop.set("reply cap")
        if early is not None and io.on_call is not None:
            # The round stopped at the call (nothing evaluated after it), so the call starts a few
            # microseconds later than inside the loop, and a skill that needs the model itself
            # (the chat model's own vision) finds it free instead of waiting on this stream.
            io.on_call(early)
        if spotter.call is not None:  # stopped once the call was complete: only braces were left
            gen.text += spotter.closing(gen.text)
        say, calls, problem = parse_reply(gen.text)
        say = say or ack
        if early is not None:  # the call ran; only its speech can have been cut short
            calls = [early]
            problem = (
                "reply was cut off after its tool call ran; its speech may be incomplete" if problem else ""
            )
        return say, calls, problem


def forced_openings(skills: list[Skill], read_from_words: bool = False) -> tuple[str, ...]:
    """The openings a tool round's reply takes, up to where the grammar next leaves a choice.

    After ``{"call": {"tool": "NAME`` the grammar of :func:`~agent.conversation.toolgrammar.reply_schema`
    leaves no choice up to the next decision: ``"}, "say": "`` for ``none``; for a skill
    ``", "arguments": {`` followed by ``}}}`` when it takes no arguments (the call is complete
    and runs at once), or by its first required argument's key (and a string's opening quote).
    Keys and spacing are as llama.cpp's JSON-schema grammar orders them (required properties
    first, in schema order) and as ``json.dumps`` spaces the replies in the history. The engine
    forces the rest of an opening once what is written fits no other
    (:func:`~agent.engines.embedded.compile.jump_forward`: ``da`` → ``dance``; ``look`` and
    ``look_at`` only once the closing quote is written).

    Args:
        skills: The tools the round's grammar offers.
        read_from_words: Parameters read from the user's words are not written (:func:`written_parameters`).

    Returns:
        One opening per tool and one for ``none``, each starting with :data:`REPLY_OPENING`.
    """
    tails = {NO_TOOL: SAY_OPENING[len(NO_TOOL) :]}
    for s in skills:
        params = written_parameters(s, read_from_words)
        props = params.get("properties", {})
        required = [k for k in props if k in params.get("required", [])]
        tail = '", "arguments": {'
        if not props:
            tail += "}}}"
        elif required:
            first = props[required[0]]
            quoted = first.get("type") == "string" or all(isinstance(v, str) for v in first.get("enum", [0]))
            tail += json.dumps(required[0]) + ": " + ('"' if quoted else "")
        tails[s.name] = tail
    return tuple(REPLY_OPENING + name + tails[name] for name in sorted(tails))


class NativeRounds:
    """Rounds in the model's own markup, parsed while streaming.

    Args:
        model: The chat model.
        cfg: ``[llm]`` (thinking budget, optional output grammar).
        fmt: ``bolt`` or ``hermes``.
    """

    def __init__(self, model: ChatEngine, cfg: LLMConfig, fmt: str) -> None:
        self.model, self.cfg, self.format = model, cfg, fmt

    def run(self, prompt: Prompt, gen: Generation, plan: RoundPlan, io: RoundIO) -> RoundOutput:
        """Generate one round from ``prompt`` (rendered with the thinking block open when ``plan.think``).

        Args:
            prompt: The rendered prompt.
            gen: Receives the round's text and timings (``extra["thinking"]``: the budget's stats).
            plan: What the round may do (``think``, ``temperature``).
            io: Where speech goes (``on_text``) and what stops it: a barge-in (``barge_in``) stops
                the round at once; the reply cap (``speech_done``) ends the words only, so a call
                the model writes after them still comes (the round stops at the next words).

        Returns:
            ``(speech, calls, problem)``.
        """
        from agent.toolparse import (
            ParsedToolCall,
            TextDelta,
            ToolCallError,
            make_parser,
            prompt_ends_in_thinking,
        )

        starts_inside = prompt_ends_in_thinking(prompt.text)
        parser = make_parser(self.format, thinking_forced_open=starts_inside)
        cfg = self.cfg
        thinking = (
            Thinking(cfg.thinking_budget_tokens, cfg.thinking_budget_ms, starts_inside)
            if plan.think
            else None
        )
        request = Decoding(
            prompt.text,
            messages=prompt.messages,
            tools=prompt.tools,
            template_vars=prompt.template_vars,
            grammar=cfg.output_grammar,
            thinking=thinking,
            temperature=plan.temperature,
        )
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        problems: list[str] = []
        # The reply cap ends the words, not the round: a call written after them still runs.
        halt = StopSignal(*(s for s in (io.barge_in,) if s is not None))

        def handle(evs: list[Any]) -> None:
            for ev in evs:
                if isinstance(ev, TextDelta):
                    if io.speech_done is not None and io.speech_done.is_set():
                        halt.set("reply cap")  # more words past the cap: nothing more is wanted
                        continue
                    text.append(ev.text)
                    if io.on_text:
                        io.on_text(ev.text)
                elif isinstance(ev, ParsedToolCall):
                    made = {"name": ev.name, "arguments": ev.arguments}
                    calls.append({**made, "id": ev.id} if ev.id else made)
                elif isinstance(ev, ToolCallError):
                    problems.append(ev.message)

        for piece in self.model.stream(request, gen, halt):
            handle(parser.feed(piece))
        handle(parser.close())
        return "".join(text).strip(), calls, "; ".join(problems)
