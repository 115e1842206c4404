"""One model round, two strategies: grammar-constrained JSON, or a model's native tool-call markup.

* :class:`GrammarRounds` — for models without a tool format (the embedded SmolLM2): the
  reply is JSON held to a grammar built from the skills' schemas (:mod:`agent.conversation.toolgrammar`),
  tools already called this turn left out; a movement's acknowledgement is spoken as soon as
  its tool name is written, the call is handed out as soon as its JSON object is complete,
  a reply without a call streams its ``say`` to speech as it is written; a lexical *tool
  prior* biases the tool-name position toward tools the user named. Text the grammar
  forces (after ``none`` or a tool name) is evaluated in one batch, not generated token by
  token (:func:`forced_after_names`); a reply after a data tool is biased to copy its result
  as written, and every reply away from repeating the previous one (:mod:`agent.engines.priors`).
* :class:`NativeRounds` — Bolt / Gemma 4 and Hermes markup, parsed by the streaming parsers
  of :mod:`agent.toolparse` (markup and thinking never reach speech), with the thinking
  budget as a logits processor.

Both return ``(speech, calls, problem)`` where ``calls`` are ``{"name", "arguments"}`` dicts
(in grammar mode including a call already handed to ``on_call`` during the round).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from agent.config import LLMConfig
from agent.conversation.prompt import Prompter
from agent.conversation.toolgrammar import (
    NO_TOOL,
    Acknowledgements,
    CallStreamer,
    SayStreamer,
    ToolNameSpotter,
    parse_reply,
    reply_schema,
)
from agent.engines.base import Generation
from agent.engines.embedded.model import ChatModel
from agent.engines.priors import (
    LOOKBACK,
    REPEAT_MIN_MATCH,
    CopyPrior,
    ProcessorChain,
    ToolChoicePrior,
    continuation,
)
from agent.engines.thinking import ThinkingBudget, ThinkingStats, markers_for
from agent.skills import Skill, SkillRegistry

RoundOutput = tuple[str, list[dict[str, Any]], str]

REPLY_OPENING = '{"call": {"tool": "'
"""How every grammar reply starts (the schema's fixed opening, spaced as ``json.dumps`` spaces the
replies in the history): evaluated with the prompt in one batch, not token by token."""

SAY_OPENING = f'{NO_TOOL}"}}, "say": "'
"""What follows :data:`REPLY_OPENING` in a reply that only speaks, up to its first word: the
whole opening of a speech-only round, and forced at once (``stream``'s ``jump``) when a tool
round writes ``none``."""
DRAFT_CHARS = 60
"""Characters of a tool result drafted at a time (the model checks at most
:data:`agent.engines.embedded.model.DRAFT_MAX_TOKENS` of them per batch)."""


class GrammarRounds:
    """Rounds whose output is JSON held to a grammar.

    Args:
        model: The chat model.
        registry: Skills (the grammar's tool names and argument schemas).
    """

    def __init__(self, model: ChatModel, registry: SkillRegistry) -> None:
        self.model, self.registry = model, registry
        self._grammars: dict[tuple[bool, frozenset[str]], Any] = {}
        self.acks = Acknowledgements()

    def grammar(self, allow_tools: bool, exclude: frozenset[str] = frozenset()) -> Any:
        """Grammar for a round; tools in ``exclude`` are left out."""
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
        on_call: Callable[[dict[str, Any]], None] | None = None,
        barge_in: threading.Event | None = None,
        said: frozenset[str] = frozenset(),
        temperature: float | None = None,
        on_utterance: Callable[[], None] | None = None,
        copy_from: list[str] | None = None,
        copy_bonus: float = 0.0,
        avoid: list[str] | None = None,
        avoid_penalty: float = 0.0,
    ) -> RoundOutput:
        """Generate one round; the ``say`` text streams to ``on_text`` while it is written.

        Args:
            prompt: The rendered prompt.
            gen: Receives the round's text and timings.
            allow_tools: Offer the tool variants (else speech only).
            on_text: Receives speech deltas.
            cancel: Set when no more speech is wanted (sentence cap or barge-in); a tool
                round still writes its call to the end first.
            barge_in: Set to stop at once, call or not (the user interrupted).
            said: What earlier rounds of the turn said (not offered again as an acknowledgement).
            temperature: Sampling temperature for this round (None: the configured one).
            bonuses: Tool prior, tool name → logit bonus.
            done: Tools called earlier this turn (left out of the grammar).
            on_call: Receives the call the moment its JSON object is complete, before
                ``say`` is written; None: the caller runs the returned calls after the round.
            on_utterance: Called after a movement's acknowledgement went to ``on_text``: it is
                a whole utterance, to be spoken now (a sentence chunker otherwise holds a
                sentence until the next one begins).
            copy_from: Tool results this round reads back (:class:`~agent.engines.priors.CopyPrior`).
            copy_bonus: Its logit bonus (0 = off).
            avoid: Earlier replies this round must not repeat word for word (the repeat guard,
                :data:`~agent.engines.priors.REPEAT_MIN_MATCH`).
            avoid_penalty: Its logit penalty (0 = off).

        Returns:
            ``(speech, calls, problem)``; ``calls`` holds the call handed to ``on_call`` too.
        """
        streamer = SayStreamer()
        spotter = CallStreamer()
        names = ToolNameSpotter()
        ack = ""
        early: dict[str, Any] | None = None
        llm = self.model.llm

        def tokenize(text: str) -> list[int]:
            return llm.tokenize(text.encode(), add_bos=False, special=False)

        def detokenize(ids: list[int]) -> str:
            return llm.detokenize(ids).decode("utf-8", "ignore")

        # Logits processors of this round, each made per prompt length: tool prior, copy prior,
        # repeat guard (the copy lookup with a penalty).
        makers: list[Callable[[int], Callable[[Any, Any], Any]]] = []
        if allow_tools and bonuses:
            offered = [n for n in self.registry.skills if n not in done] + [NO_TOOL]
            makers.append(lambda n: ToolChoicePrior(tokenize, detokenize, n, bonuses, offered))
        if copy_from and copy_bonus:
            makers.append(lambda n: CopyPrior(tokenize, detokenize, n, copy_from, copy_bonus))
        if avoid and avoid_penalty:
            makers.append(
                lambda n: CopyPrior(tokenize, detokenize, n, avoid, -avoid_penalty, REPEAT_MIN_MATCH)
            )

        def processor(n_prompt: int) -> Callable[[Any, Any], Any]:
            parts = [make(n_prompt) for make in makers]
            # A lone part goes as itself: a remote engine recognises a tool prior by its type.
            return parts[0] if len(parts) == 1 else ProcessorChain(parts)

        forced = forced_after_names([s for s in self.registry.skills.values() if s.name not in done])
        # The result a reply reads back is also its draft (prompt-lookup decoding): taken in
        # one batch where the model copies it (greedy rounds only; see ChatModel.stream).
        draft = None
        if copy_from and copy_bonus:
            as_written = [json.dumps(r)[1:-1] for r in copy_from]  # as it appears inside "say"

            def draft(text: str) -> str:
                return continuation(as_written, text[-LOOKBACK:], ahead=DRAFT_CHARS)

        # A multi-step command's later round may start with the sentence cap already spent:
        # its call still counts, so the cap stops it only once the call is written.
        stop = _StopAfterCall(cancel, barge_in, spotter) if allow_tools else cancel
        for piece in self.model.stream(
            prompt,
            gen,
            grammar=self.grammar(allow_tools, done),
            cancel=stop,
            logits_processor=processor if makers else None,
            temperature=temperature,
            prefix=REPLY_OPENING if allow_tools else REPLY_OPENING + SAY_OPENING,
            jump=forced if allow_tools else None,
            draft=draft,
        ):
            if allow_tools and names.name is None:
                name = names.feed(gen.text)
                skill = self.registry.skills.get(name or "")
                # A movement: say so while it starts; a slow look-up: its preamble while it runs.
                if skill is not None and (not skill.follow_up or skill.preamble):
                    ack = skill.preamble or self.acks.next(said)
                    if on_text:
                        on_text(ack)
                    if on_utterance:
                        on_utterance()
            if not spotter.done:
                call = spotter.feed(piece)
                if call is not None and on_call is not None:
                    early = call
                    on_call(call)
            delta = streamer.feed(piece)
            if delta and on_text:
                on_text(delta)
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


def forced_after_names(skills: list[Skill]) -> Callable[[str], str]:
    """What the reply grammar forces once a tool name is written, as ``stream``'s ``jump``.

    After ``{"call": {"tool": "NAME`` the grammar of :func:`~agent.conversation.toolgrammar.reply_schema`
    leaves no choice up to the next decision: ``"}, "say": "`` for ``none``; for a skill
    ``", "arguments": {`` followed by ``}}}`` when it takes no arguments (the call is complete
    and runs at once), or by its first required argument's key (and a string's opening quote).
    A name is forced as soon as what is written of it starts no other name (``da`` → ``dance``);
    a name that is the start of another (``look``, ``look_at``) only once its closing quote is
    written. Keys and spacing are as llama.cpp's JSON-schema grammar orders them
    (required properties first, in schema order) and as ``json.dumps`` spaces the replies in
    the history.

    Args:
        skills: The tools the round's grammar offers.

    Returns:
        A function from the output so far to the text now forced (``""``: none).
    """
    tails = {NO_TOOL: SAY_OPENING[len(NO_TOOL) :]}
    for s in skills:
        props = s.parameters.get("properties", {})
        required = [k for k in props if k in s.parameters.get("required", [])]
        tail = '", "arguments": {'
        if not props:
            tail += "}}}"
        elif required:
            first = props[required[0]]
            quoted = first.get("type") == "string" or all(isinstance(v, str) for v in first.get("enum", [0]))
            tail += json.dumps(required[0]) + ": " + ('"' if quoted else "")
        tails[s.name] = tail
    names = sorted(tails)

    def jump(text: str) -> str:
        if not text.startswith(REPLY_OPENING):
            return ""
        rest = text[len(REPLY_OPENING) :]
        if rest and '"' not in rest:
            started = [n for n in names if n.startswith(rest)]
            if len(started) == 1:  # no other name begins so: the rest of it is forced too
                return started[0][len(rest) :] + tails[started[0]]
        for name in names:
            written = rest[len(name) :]
            if not rest.startswith(name) or not tails[name].startswith(written):
                continue
            if written == tails[name]:
                return ""  # already there
            if not written and any(n != name and n.startswith(name) for n in names):
                continue  # the name may go on ("look" → "look_at")
            return tails[name][len(written) :]
        return ""

    return jump


class _StopAfterCall:
    """Event-like stop for a tool round.

    A barge-in stops it at once, ``speech_done`` only after the call; a complete tool call
    stops it too, since the grammar leaves nothing after it but closing braces (the round's
    text is closed by :meth:`CallStreamer.closing`; on 2 cores the forced tokens and the one
    sampled after them took 120 ms of a data turn, bench time.wav).
    """

    def __init__(self, speech_done: Any, barge_in: Any, spotter: CallStreamer) -> None:
        self.speech_done, self.barge_in, self.spotter = speech_done, barge_in, spotter

    def is_set(self) -> bool:
        """Whether generation should stop now."""
        if self.barge_in is not None and self.barge_in.is_set():
            return True
        if self.spotter.call is not None:
            return True
        return self.speech_done is not None and self.speech_done.is_set() and self.spotter.done


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
