"""The turn loop: user text → model rounds → tool calls → results → model → the reply.

A turn is at most ``max_tool_rounds`` model rounds; each round's tool calls run (validated,
never raising) and their results go back to the model. The last allowed round offers no
tools, so every turn ends in speech. In grammar mode a call runs the moment its JSON object
is complete, while the model still writes the words it says with it; a round whose calls
all went to skills without follow-up (``@skill(follow_up=False)``: movements), all
succeeded, and that spoke, ends the turn, unless the user's words still point at a tool not
yet called ("turn left and then wave"). Guards: identical repeated calls are answered with a
warning after 3 and stop the turn after 5; unknown tools and bad arguments become error
results the model sees; calls after the round budget are not run. Speech streams out
through ``on_text`` (after conversational mode's sentence cap); tool calls and results go
out as messages through ``emit``.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.config import LLMConfig
from agent.control import ReleaseGate, StopSignal
from agent.conversation import history as hist
from agent.conversation.argprior import follow_words, length_unsaid, said_values, spoken_seconds
from agent.conversation.background import BackgroundCalls
from agent.conversation.claims import CANNOT, MISSED, ClaimGuard, asked_for
from agent.conversation.context import fit_history
from agent.conversation.prompt import EXAMPLE_SAY, Prompter, resolve_format
from agent.conversation.results import (
    DataHead,
    DataTail,
    carries_data,
    said_as_written,
    short_sentence,
    spoken_result,
    tail_after_data,
)
from agent.conversation.rounds import (
    REPLY_OPENING,
    GrammarRounds,
    NativeRounds,
    RoundIO,
    RoundOutput,
    RoundPlan,
)
from agent.conversation.toolgrammar import NO_TOOL
from agent.conversation.toolprior import follow_on, said_not_to, takes_a_length, tool_prior, tools_left
from agent.engines import ChatEngine, Decoding, Generation
from agent.engines.base import ContextFull
from agent.events import BackgroundDone, Event, ToolCall, ToolResult
from agent.skills import Skill, SkillContext, SkillRegistry, ToolOutcome
from agent.speech.sentences import SentenceCap, limit_sentences

log = logging.getLogger(__name__)

REPEAT_WARN = 3
REPEAT_STOP = 5
SORRY = "Sorry, I had a problem thinking about that."
"""What the robot says when a turn fails (a model error): the conversation goes on."""

ASK_LENGTH = "For how long?"
"""Said instead of running a skill that takes a length ("in seconds") when the user said none."""

TURN_HEADROOM_TOKENS = 256
"""What a turn adds besides its replies, tokens: the user's words with the state line, a tool
call and its result (the soak's turns added 25-120 prompt tokens a round)."""


@dataclass(frozen=True)
class Tidied:
    """What :meth:`Conversation.tidy` did between turns.

    Attributes:
        dropped: Old turns compacted into the summary line.
        evaluated: Prompt tokens evaluated into the KV cache.
        complete: The evaluation ran to the end (False: stopped early; the rest is left for later).
    """

    dropped: int
    evaluated: int
    complete: bool


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


def _last_turn_speech(history: list[dict[str, Any]]) -> list[str]:
    """What the assistant said in the newest turn of ``history``, one entry per round that spoke."""
    out: list[str] = []
    for msg in reversed(history):
        if msg["role"] == "user":
            break
        if msg["role"] == "assistant" and msg.get("content"):
            out.append(msg["content"].strip())
    return out


def _last_turn_calls(history: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The calls of the newest turn of ``history``, in order: ``(tool, arguments)``.

    Arguments that are not an object are given as ``{}``.
    """
    out: list[tuple[str, dict[str, Any]]] = []
    for msg in reversed(history):
        if msg["role"] == "user":
            break
        if msg["role"] == "assistant":
            calls = [c["function"] for c in msg.get("tool_calls") or ()]
            out[:0] = [(f["name"], f["arguments"] if isinstance(f["arguments"], dict) else {}) for f in calls]
    return out


def _not_within(replies: list[str], results: str) -> list[str]:
    """``replies`` except those whose words this turn's tool results contain (a repeat that is true)."""
    return [r for r in replies if not hist.said_in(r, results)]


def _ended_with_data(say: str, tail: DataTail) -> str:
    """``say`` cut where its data round's speech was cut (the history keeps what was spoken)."""
    if not tail.closed:
        return say
    rest = tail_after_data(say, tail.results, tail.carried)
    return say[: len(say) - len(rest)].rstrip() if rest and say.endswith(rest) else say


def _carries(whole: frozenset[str], text: str, result: Any) -> bool:
    """Whether ``text`` says ``result`` (:func:`carries_data`; every word of one of ``whole``).

    Exact data by its time or numbers, a short sentence (a failure's reason, a confirmation) by
    all of its words, a longer result (a description) by half: one shared word does not say it
    ("I'm sorry, I can't help you. You're not allowed to use the emergency stop." shares
    "emergency stop" with "Emergency stop: my motors are off until someone clears it.", a new
    user's chat).
    """
    return carries_data(text, result, whole=result in whole)


def _moved(res: TurnResult, registry: SkillRegistry) -> bool:
    """A call of the turn that moves worked (a skill with side effects): the robot may say it moves.

    A reading (``describe_scene``, ``get_time``) moves nothing: after "look at me", "who is in
    front of you" was answered "I am turning toward the person ..." (a copied ``look_at``
    result) while only ``describe_scene`` ran (a new user's chat).
    """
    for name, _, outcome in res.calls:
        skill = registry.skills.get(name)
        if outcome.ok and (skill is None or skill.side_effects):
            return True
    return False


def _release(cap: SentenceCap, on_pause: Callable[[], None] | None, guard: ClaimGuard | None = None) -> None:
    """A whole utterance went through ``cap`` (an acknowledgement): count it and have it spoken now."""
    if guard is not None:
        guard.flush()  # an acknowledgement it holds is whole now
    cap.flush()
    if on_pause is not None:
        on_pause()


@dataclass
class _RoundCalls:
    """The calls one round ran (during generation or after it), with their tool messages in order."""

    id_prefix: str
    first: int  # index of the round's first call in ``TurnResult.calls``
    calls: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    stop: bool = False  # a repeated-call loop must stop the turn
    user_text: str = ""  # what the user said (the argument prior reads it)
    release: ReleaseGate | None = None  # calls wait for it (a turn prepared before its confirmation)
    turn_stop: StopSignal | None = None  # the turn's stop signal (a dropped turn stops waiting)
    earlier: dict[str, dict[str, Any]] = field(default_factory=dict)  # the last turn's calls: tool -> args


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
        model: ChatEngine,
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
        self._grammar_rounds = GrammarRounds(model, registry, cfg)
        self._native_rounds = NativeRounds(model, cfg, self.format)

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

    def look_prompt(self, question: str) -> str:
        """The prompt of a look at the camera that reuses this conversation's KV cache.

        The system prompt, tools and history are rendered as a turn renders them (so the KV cache
        already holds them), then ``question`` (image markers + the describe prompt) as a user
        message. The history is not changed.

        Raises:
            LLMError: the template rejected the messages (e.g. mid-turn, after a tool call).
        """
        msgs = [*self.history, {"role": "user", "content": question}]
        return self.prompter.render(msgs, bool(self.registry.skills), False)

    def warmup(self) -> float:
        """Evaluate the static prompt prefix once (fills the KV cache, pays first-batch cost); ms."""
        self.history.append({"role": "user", "content": "Hello."})
        try:
            return self.model.warmup(self.render())
        finally:
            self.history.pop()

    def prefill(self, text: str, state: str | None = None, stop: Callable[[], bool] | None = None) -> int:
        """Early model start: evaluate the first round's prompt for ``text`` before the turn starts.

        Renders the prompt exactly as :meth:`turn` would for ``text`` (same ``state``) without
        changing the history, and hands it to the model's KV cache. If the turn then starts
        with the same words only the rest is evaluated; if the user went on, the history
        before this turn is still cached, so a discard is cheap.

        Args:
            text: The transcript so far.
            state: The app state line the turn would carry.
            stop: Asked between chunks of the evaluation (:meth:`ChatEngine.prefill`): True
                ends it early, keeping what was evaluated; None runs it to the end.

        Returns:
            Prompt tokens evaluated (0 when skipped: busy model or an engine without a cache).

        Raises:
            LLMError: the template rejected the messages.
        """
        content = f"{text}\n\n[{state}]" if state else text
        msgs = [*self.history, {"role": "user", "content": content}]
        allow_tools = bool(self.registry.skills)
        opening = REPLY_OPENING if self.format == "grammar" else ""
        prompt = self.prompter.render(msgs, allow_tools, self.thinks(allow_tools))
        return self.model.prefill(Decoding(prompt, prefix=opening), stop)

    def fit_context(self, allow_tools: bool = True, think: bool = False, headroom: int = 0) -> int:
        """Compact the history when the next prompt leaves no room to answer; returns turns dropped.

        Args:
            allow_tools: The round declares the tools.
            think: The round opens a thinking block (its budget is reserved too).
            headroom: Tokens more to leave free (:meth:`tidy`: what the next turn may add).
        """

        def tokens(candidate: list[dict[str, Any]]) -> int:
            return self.model.count_tokens(self.prompter.render(candidate, allow_tools, think))

        reserve = self.cfg.max_tokens + (self.cfg.thinking_budget_tokens if think else 0)
        self.history, dropped = fit_history(
            self.history, tokens, self.model.n_ctx, reserve, self.cfg.history_keep_tokens, headroom
        )
        return dropped

    def tidy(self, stop: Callable[[], bool] | None = None) -> Tidied:
        """Between turns: compact ahead of need and read the history into the KV cache.

        A turn that compacts the history must evaluate everything after the first dropped turn
        again (seconds on a small CPU), so the history is compacted here, while nobody waits,
        once the next turn could outgrow the budget: what a turn adds at most (two rounds'
        replies and a tool call, :data:`TURN_HEADROOM_TOKENS` more) is kept free. Then the
        prompt of a next turn, up to its user message, is evaluated into the KV cache (also the
        previous reply as the template renders it, which differs from the generated tokens), so
        the next turn evaluates only its own words.

        Args:
            stop: Asked between chunks of the evaluation (:meth:`ChatEngine.prefill`): True
                ends it early, keeping what was evaluated; None runs it to the end.

        Returns:
            Turns dropped, prompt tokens evaluated, and whether the evaluation ran to the end.

        Raises:
            LLMError: the template rejected the messages.
        """
        allow_tools = bool(self.registry.skills)
        think = self.thinks(allow_tools)
        reserve = self.cfg.max_tokens + (self.cfg.thinking_budget_tokens if think else 0)
        dropped = self.fit_context(allow_tools, think, headroom=reserve + TURN_HEADROOM_TOKENS)
        if dropped:
            log.info("context: compacted %d old turns between turns", dropped)
        stopped = False

        def stopping() -> bool:
            nonlocal stopped
            stopped = stopped or (stop is not None and stop())
            return stopped

        evaluated = self.prefill("", stop=stopping if stop else None)  # up to the next user's words
        return Tidied(dropped, evaluated, not stopped)

    # --- the turn ----------------------------------------------------------------------------------
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
                call's): read back like them (the copy prior, nothing after the data, said
                verbatim when the reply left them out; grammar mode).

        Returns:
            The :class:`TurnResult`; never raises for model or tool problems.
        """
        content = f"{text}\n\n[{state}]" if state else text
        before = _last_turn_speech(self.history)  # not acknowledged the same way twice in a row
        earlier = _last_turn_calls(self.history)  # "and now to the right" goes on the last call
        self.history.append({"role": "user", "content": content})
        res = TurnResult()
        if self.format == "grammar" and tools and (cannot := self._body_cannot(text)):
            res.text = self._say_after([cannot], on_text, None)  # no round: nothing to call
            return res
        cap = SentenceCap(self.cfg.max_reply_sentences if self.cfg.conversational_mode else 0, on_text, stop)
        seen: dict[str, int] = {}
        spoken: list[str] = []
        # A finished background call's result is all its turn is for: said whole.
        carried = functools.partial(_carries, frozenset(data))
        claims: list[str] = []  # movements claimed while no call worked (left unsaid)
        skills = list(self.registry.skills.values())
        for rnd in range(self.cfg.max_tool_rounds):
            allow_tools = tools and rnd < self.cfg.max_tool_rounds - 1 and bool(self.registry.skills)
            bonuses: dict[str, float] = {}
            done = frozenset(name for name, _, _ in res.calls)
            if self.format == "grammar" and allow_tools:
                prior = tool_prior if rnd == 0 else tools_left
                bonuses = prior(text, skills, set(done), self.cfg.tool_prior_bonus)
                if rnd == 0:
                    named = [name for name, _ in earlier]
                    bonuses = follow_on(text, skills, named, self.cfg.tool_prior_bonus) or bonuses
                # After the first round a small model tends to repeat itself or wander off:
                # offer tools again only when the user's words still point at one not yet
                # called, and then only those.
                if rnd > 0 and self.cfg.tool_prior_bonus > 0:
                    if bonuses.get(NO_TOOL, 0) > 0:
                        allow_tools = False
                    else:
                        done = frozenset(n for n in self.registry.skills if n not in bonuses)
            if spoken and on_pause is not None:
                on_pause()
            res.rounds += 1
            gen = Generation()
            tail: DataTail | None = None
            head: DataHead | None = None
            guard: ClaimGuard | None = None
            ran = _RoundCalls(
                f"t{turn_id}r{rnd}c",
                len(res.calls),
                user_text=text,
                release=release,
                turn_stop=stop,
                earlier=dict(earlier),
            )
            run_now = functools.partial(self._run_call, ran, turn_id, seen, res)
            on_call = functools.partial(self._run_call, ran, turn_id, seen, res, during_round=True)
            try:
                # A round after a tool result reads the result back: decoded greedily, since at
                # temperature 0.2 SmolLM2-135M copied "It is 08:18 ..." as "It is 08:19" (seen in CI).
                greedy = bool(res.calls or data) and self.format == "grammar"
                results = [*data, *self._data_results(res)]
                plan = RoundPlan(
                    allow_tools,
                    bonuses,
                    done,
                    frozenset(spoken + before),
                    0.0 if greedy else None,
                    tuple(results),
                    tuple(_not_within(before, " ".join(results))),
                    examples=tuple(self._examples()),
                    no_ack=self._cannot_move() | self._asks_length(text) | self._not_asked(text),
                )
                # A round that reads data back ends with the sentence that carries it: nothing
                # after the result that was not asked for ("... 1 December. It needs to recharge.");
                # a background result is all its turn is for ("Time is up: ... done. You can
                # continue to play a game of pasta.", a new user's chat).
                ends = plan.copy_from and all(short_sentence(r) or r in data for r in plan.copy_from)
                tail = DataTail(list(plan.copy_from), cap.feed, cap.cancel, carried) if ends else None
                feed = tail.feed if tail is not None else cap.feed
                # ... and starts with it (grammar mode: the small model's words before the data
                # did not fit, the system prompt's example joke first of all).
                reasons = {_reason(o) for _, _, o in res.calls}
                read_back = [r for r in plan.copy_from if r not in reasons]
                if read_back and self.format == "grammar":
                    head = DataHead(read_back, feed, carried)
                    feed = head.feed
                # A user's turn without a movement that worked says none ("I am waving" copied
                # from an earlier result); once one worked, its speech goes straight on.
                if tools and self.format == "grammar" and not _moved(res, self.registry):
                    guard = ClaimGuard(feed, functools.partial(_moved, res, self.registry))
                io = RoundIO(
                    guard.feed if guard is not None else feed,
                    cap.cancel,
                    cap.user_cancel,
                    on_call if allow_tools else None,
                    functools.partial(_release, cap, on_pause, guard),
                )
                say, calls, problem = self._round(plan, gen, io)
            except Exception as e:  # a model failure must not lose the conversation
                say, calls, problem = self._round_failed(turn_id, e, bool(results), res)
                cap.feed(say)
            calls = ran.calls + calls[len(ran.calls) :]  # a call that ran stays, even if the round failed
            if guard is not None:
                guard.flush()
                say = guard.kept(say)
                claims += guard.dropped
                if guard.dropped:
                    log.info("turn %d: left out a movement no call made: %r", turn_id, guard.dropped)
            if head is not None:
                head.flush()
                say = head.kept(say)
                if head.dropped:
                    log.info("turn %d: left out before the data: %r", turn_id, head.dropped)
            if tail is not None:
                tail.flush()
                say = _ended_with_data(say, tail)
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
            # The generated text as it is (its KV cache is reused), unless words were left out of it.
            cut = (guard is not None and guard.dropped) or (head is not None and head.dropped)
            raw = gen.text if self.format == "grammar" and not cut else ""
            self.history.append(hist.assistant_message(say, calls, raw))
            for call in calls[len(ran.calls) :]:  # calls not handed out during the round run now
                run_now(call)
            self.history.extend(ran.messages)  # tool results after the assistant message that called
            if not calls or cap.user_cancelled():
                break
            if ran.stop:
                res.problems.append("stopped a repeated tool call loop")
                break
            if not self._needs_next_round(text, say, res, ran.first, rnd, tools, not cap.cancel.is_set()):
                break
        res.text = limit_sentences(hist.join_unique(spoken), cap.limit)
        owed: list[str] = []
        if self.format == "grammar" and not cap.user_cancelled():
            so_far = " ".join(spoken)
            owed = [r for r in [*data, *self._data_results(res)] if not carried(so_far, r)]
            if claims and not any(o.ok for _, _, o in res.calls):  # a reading that worked answered
                owed.append(self._instead_of_claims(text, claims))
        if owed:
            said = self._say_after(owed, on_text, on_pause)
            res.text = f"{res.text} {said}".strip()
        return res

    def _instead_of_claims(self, text: str, claims: list[str]) -> str:
        """What a turn says whose only words claimed a movement no call made (they were left out).

        "Okay, I won't dance." where the user said not to ("don't dance" got "I'm holding still.
        Sorry, I can't do that.", a new user's chat); :data:`CANNOT` where they asked for that
        movement ("fly to the moon"); :data:`MISSED` otherwise (a copied result).
        """
        refused = [s.name for s in self.registry.skills.values() if s.side_effects and said_not_to(text, s)]
        if refused:
            return f"Okay, I won't {refused[0].replace('_', ' ')}."
        return CANNOT if any(asked_for(text, c) for c in claims) else MISSED

    def _needs_next_round(
        self,
        text: str,
        say: str,
        res: TurnResult,
        first: int,
        rnd: int,
        tools: bool,
        may_speak: bool,
    ) -> bool:
        """After a round with calls: whether the model takes another round.

        Always in native formats. In grammar mode: when the round's calls need words (a
        skill with follow-up, a failed call, or a round that said nothing) and the sentence
        cap leaves room for them; otherwise only when the user's words still point at a
        tool not yet called and the next round could still call it.

        A call that failed with a reason its skill raised for people needs no words of the
        model: the reason is said as written after the rounds. The round that read it back
        added words that do not fit (SmolLM2-135M, greedy, no camera: "Let me look. Why did the
        robot...? I have no camera, so I cannot see."), and cost a model round. Nor does a data
        result that is a sentence written for people (:func:`said_as_written`: "It is 02:11 on
        Sunday 6 December."): it is said as written after the rounds too, a model round sooner.
        """
        if self.format != "grammar":
            return True
        written = [self._written(name, outcome) for name, _, outcome in res.calls[first:]]
        needs_words = not say.strip() and not any(written)
        for (name, _, outcome), words in zip(res.calls[first:], written, strict=True):
            sk = self.registry.skills.get(name)
            needs_words |= not words and (sk is None or sk.follow_up or not outcome.ok)
        if needs_words and may_speak:
            return True
        if not tools or rnd + 1 >= self.cfg.max_tool_rounds - 1:  # the next round could only talk
            return False
        called = {name for name, _, _ in res.calls}
        left = tools_left(text, list(self.registry.skills.values()), called, self.cfg.tool_prior_bonus)
        return any(v > 0 for name, v in left.items() if name != NO_TOOL)

    def _written(self, name: str, outcome: ToolOutcome) -> str:
        """What a call's skill wrote for people to hear as it is ("" for none).

        A failed call's reason (:func:`_reason`), or a data skill's (``follow_up``) result that
        is a sentence written for people (:func:`said_as_written`) or that its skill says is
        (``@skill(as_written=True)``).
        """
        if reason := _reason(outcome):
            return reason
        sk = self.registry.skills.get(name)
        if sk is None or not sk.follow_up or not outcome.ok:
            return ""
        words = spoken_result(outcome.result).strip()
        return words if sk.as_written or said_as_written(outcome.result) else ""

    def _examples(self) -> list[str]:
        """Example speech of the system prompt, held back by the repeat guard like an earlier reply."""
        return [EXAMPLE_SAY] if self.format == "grammar" else []

    def _data_results(self, res: TurnResult) -> list[str]:
        """What of this turn's calls a reply reads back.

        The words of a data skill's result (``follow_up``) that worked (:func:`spoken_result`: a
        dict's description or summary; a new user heard "Let me look. What do you see?" while
        ``describe_scene`` had counted 2 people), and the message any skill
        raised when it failed: a user who asked "what do you see" without a camera hears "I have
        no camera, so I cannot see." (measured on SmolLM2-135M: "Let me look. Why did the
        robot...?" without it), and one who asks for a wave while the e-stop is latched hears
        why nothing moves ("Sure! You can't clear the emergency stop, it's a bug in your code."
        without it, a new user's ``chat``). Each is said once: two moves the e-stop refused
        ("play the dance animation" ran ``play_animation``, then ``dance``) said its reason twice.
        A call that worked but did less than asked adds what its skill told about it
        (:attr:`ToolOutcome.told`): "nod ten times" nodded five times, and said "Sure!" only.
        """
        out: dict[str, None] = {}
        for name, _, outcome in res.calls:
            skill = self.registry.skills.get(name)
            if skill is not None and outcome.ok and skill.follow_up and spoken_result(outcome.result):
                out[spoken_result(outcome.result)] = None
            elif skill is not None and _reason(outcome):
                out[_reason(outcome)] = None
            if skill is not None and outcome.ok and outcome.told.strip():
                out[_as_sentence(outcome.told)] = None
        return list(out)

    def _say_after(
        self,
        owed: list[str],
        on_text: Callable[[str], None] | None,
        on_pause: Callable[[], None] | None,
    ) -> str:
        """Say ``owed`` after the rounds and keep it in the history; returns it.

        ``owed``: data results the turn fetched and left unsaid, as the tools wrote them, and
        :data:`~agent.conversation.claims.CANNOT` (or ``MISSED`` where the user asked for no
        movement) after a movement claimed without a call.

        Grammar mode: a user who asked for data hears it, past the reply cap if need be.
        Measured on SmolLM2-135M: "Nod your head and tell me the time" called ``get_time``, then
        ``nod`` with "Sure!", and stopped there ("Sure!"); a third round read the latest result
        instead ("I am not nodding."), even when offered no tools. Acknowledgements ("Sure!",
        "Let me look.") can also spend the two-sentence cap before a data round. The result
        itself is what a data round aims at (the copy prior, :class:`DataTail`), so it is said
        without another model round. A dict is said by its words (:func:`spoken_result`), never
        as JSON.
        """
        say = " ".join(owed)
        if on_pause is not None:
            on_pause()  # what was said so far is finished
        if on_text is not None:
            on_text(say)
        raw = json.dumps({"call": {"tool": NO_TOOL}, "say": say})
        self.history.append(hist.assistant_message(say, [], raw))
        return say

    @staticmethod
    def _round_failed(turn_id: int, e: Exception, owed: bool, res: TurnResult) -> tuple[str, list, str]:
        """``(say, calls, problem)`` of a round that raised (called while ``e`` is handled).

        A round left only to read data back, with no room in the context for a reply, says
        nothing: the data is said as the tool wrote it after the rounds (:meth:`_say_after`).
        Seen at ``n_ctx`` 512, where the built-in tools take 444 tokens: "Sorry, I had a
        problem thinking about that. It is 19:40 on Saturday 5 December.". Any other failure
        says :data:`SORRY`.
        """
        if isinstance(e, ContextFull) and owed:
            log.warning(
                "turn %d: no room left to read the result back (%s); it is said as written", turn_id, e
            )
            res.problems.append(f"context full: {e}")
            return "", [], ""
        log.exception("turn %d: model round failed", turn_id)
        res.problems.append(f"model error: {e}")
        return SORRY, [], ""

    def _unasked(self, text: str, skill: Skill) -> str:
        """The tools the words ask for instead, when they point at other tools and not at ``skill``.

        Grammar mode (the small model) only: SmolLM2-135M repeats the last turn's call before
        the one asked for. "what time is it?" then "can you dance for me?" called ``get_time``
        and ``dance`` and read the time out again ("what can you do?" then "can you dance?": the
        list of abilities); "what do you see?" after a dance danced again. A call the user's
        words (:func:`tool_prior`) do not point at, while they point at other tools, is not run;
        nothing is said about it, and the round after calls what was asked. A call the words
        point at no tool for runs (the model's own choice: "I'm bored"), and so does a stop
        (stopping is always safe).

        Returns:
            The tools asked for ("dance"), or "" when ``skill`` runs.
        """
        pointed = self._asked_for(text)
        return ", ".join(pointed) if _left_out(skill.name, pointed) else ""

    def _body_cannot(self, text: str) -> str:
        """What the robot says when the words ask only for skills this body was not given a device for.

        Grammar mode (the small model): with no camera configured ``describe_scene`` is not
        offered, and SmolLM2-135M answered "what do you see right now?" with a joke ("Why did the
        robot get a holiday?"). Where every tool the words point at (:func:`tool_prior`) is one
        left out for a device (:attr:`~agent.skills.SkillRegistry.absent`), the turn says why
        ("I have no camera, so I cannot see."), with no model round.

        Returns:
            The sentence, or "" when the words point at no such skill or also at an offered one.
        """
        absent = self.registry.absent
        if not absent or not text.strip():
            return ""
        skills = [*self.registry.skills.values(), *(sk for sk, _ in absent.values())]
        bonuses = tool_prior(text, skills, set(), 1.0)
        pointed = [n for n, v in bonuses.items() if v > 0 and n != NO_TOOL]
        return absent[pointed[0]][1] if pointed and all(n in absent for n in pointed) else ""

    def _asked_for(self, text: str) -> list[str]:
        """The tools the user's words point at (:func:`tool_prior`; grammar mode, else none)."""
        if self.format != "grammar" or not text.strip():
            return []
        bonuses = tool_prior(text, list(self.registry.skills.values()), set(), 1.0)
        return [n for n, v in bonuses.items() if v > 0 and n != NO_TOOL]

    def _not_asked(self, text: str) -> frozenset[str]:
        """Skills whose call is not run because the words ask for others (:meth:`_unasked`).

        Such a call gets no acknowledgement: "what do you see right now?" after "look to the
        left" had the model write ``look`` again, which was not run, yet the robot said "Of
        course! Let me look. ..." (``bench --accuracy``, one conversation; a new user's chat).
        """
        pointed = self._asked_for(text)
        return frozenset(name for name in self.registry.skills if _left_out(name, pointed))

    def _asks_length(self, text: str) -> frozenset[str]:
        """Skills the user's words give no usable length for: none (:func:`length_unsaid`), or one below zero.

        A call of one is answered :data:`ASK_LENGTH` alone, or its refusal alone, with no
        acknowledgement first ("Sure! For how long?"; "set a timer for minus 5 seconds" got
        "Sure! I can't set timer: ...", a new user's chat).
        """
        below_zero = (spoken_seconds(text) or 0) < 0
        return frozenset(
            s.name
            for s in self.registry.skills.values()
            if length_unsaid(text, s.parameters) or (below_zero and takes_a_length(text, s))
        )

    def _cannot_move(self) -> frozenset[str]:
        """Skills that move the body (``moves``) while the robot's emergency stop is latched: they fail.

        ``play_animation`` needs no joint and moves: a new user's ``chat`` heard "Sure! My
        emergency stop is on, ..." for "play the dance animation".
        """
        if not getattr(self.ctx.robot, "estopped", False):
            return frozenset()
        return frozenset(s.name for s in self.registry.skills.values() if s.moves)

    def _round(self, plan: RoundPlan, gen: Generation, io: RoundIO) -> RoundOutput:
        """Run one round of ``plan`` in the conversation's format, fitting the context first."""
        think = self.thinks(plan.allow_tools)
        gen.extra["dropped_turns"] = self.fit_context(plan.allow_tools, think)
        prompt = self.prompter.prompt(self.history, plan.allow_tools, think)
        if self.format == "grammar":
            return self._grammar_rounds.run(prompt, gen, plan, io)
        native = RoundPlan(plan.allow_tools, think=think, temperature=plan.temperature)
        return self._native_rounds.run(prompt, gen, native, RoundIO(io.on_text, io.speech_done))

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

    def _run_call(
        self,
        ran: _RoundCalls,
        turn_id: int,
        seen: dict[str, int],
        res: TurnResult,
        call: dict[str, Any],
        during_round: bool = False,
    ) -> None:
        """Run one call of a round (repeat guards included), report it, keep its tool message in ``ran``.

        In a turn waiting for its confirmation a call of a skill with side effects handed out
        while the round is written is left to the end of the round (the round's speech goes on
        meanwhile), and then waits for the release; a dropped turn runs none. A skill that only
        reads (``side_effects=False``: the clock) runs at once, so the answer that reads its
        result back is prepared before the release too.
        """
        skill = self.registry.skills.get(call["name"])
        waits = skill is None or skill.side_effects  # an unknown tool's error waits like a call
        pending = ran.release is not None and not ran.release.released
        if pending and waits:
            if during_round:
                return  # run after the round, from its returned calls (a round has one early call)
            if not ran.release.wait(ran.turn_stop):
                return  # dropped: the user went on, nothing is done
        elif pending and ran.release.dropped:
            return  # the user went on: not even a reading is worth taking
        call_id = f"{ran.id_prefix}{len(ran.calls)}"
        if skill is not None and ran.user_text and isinstance(call["arguments"], dict):
            before = ran.earlier.get(call["name"])  # "now the other hand" turns on the last wave
            fixed = follow_words(ran.user_text, skill.parameters, call["arguments"], before)
            if self.format == "grammar":  # left out of the grammar: read from the words (from_words)
                for name, read in skill.from_words.items():
                    try:
                        fixed[name] = read(ran.user_text)
                    except Exception:  # noqa: BLE001 - a skill author's reader: the default stands
                        log.exception("from_words %s of %s failed on %r", name, call["name"], ran.user_text)
            if fixed != call["arguments"]:  # "look to the left" written as yaw 0 or a negative yaw
                log.info("argument prior: %s %s -> %s", call["name"], call["arguments"], fixed)
                call["arguments"] = fixed
        key = json.dumps([call["name"], call["arguments"]], sort_keys=True, default=str)
        seen[key] = seen.get(key, 0) + 1
        self.emit(ToolCall(turn_id, call["name"], call["arguments"], call_id))
        stop_turn = False
        if skill is not None and skill.side_effects and said_not_to(ran.user_text, skill):
            # "stop waving", "don't dance": SmolLM2-135M called wave and dance (a new user's chat).
            log.info("turn %d: not run: %s, the user said not to", turn_id, call["name"])
            outcome = ToolOutcome(
                False,
                f"{call['name']} not run: the user asked not to",
                raised=f"I won't {call['name'].replace('_', ' ')}, as you asked",
            )
        elif skill is not None and ran.user_text and length_unsaid(ran.user_text, skill.parameters):
            # "set a timer" ran set_timer(seconds 10): a length nobody said. The robot asks, and
            # "five minutes" next goes on this call (follow_on).
            log.info("turn %d: not run: %s, the user said no length", turn_id, call["name"])
            outcome = ToolOutcome(
                False, f"{call['name']} not run: the user said no length", raised=ASK_LENGTH
            )
        elif skill is not None and (wanted := self._unasked(ran.user_text, skill)):
            # "can you dance for me?" after "what time is it?" ran get_time again, then dance,
            # and the time was read out (SmolLM2-135M copies the last turn's call).
            log.info("turn %d: not run: %s, the user asked for %s", turn_id, call["name"], wanted)
            outcome = ToolOutcome(False, f"{call['name']} not run: the user asked for {wanted}, not this")
        elif seen[key] >= REPEAT_STOP:
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
            on_done = self.background.callback(call["name"], call_id)
            asked = None
            if skill is not None and isinstance(call["arguments"], dict):
                asked = said_values(ran.user_text, skill.parameters, call["arguments"])
            outcome = self.registry.call(call["name"], call["arguments"], self.ctx, on_done, asked)
            if on_done is not None and not outcome.ok:  # refused: a started call answers "started"
                self.background.not_started()
        self.emit(ToolResult(turn_id, call["name"], outcome.ok, outcome.result, call_id, _reason(outcome)))
        res.calls.append((call["name"], call["arguments"], outcome))
        ran.calls.append(call)
        ran.messages.append(
            {
                "role": "tool",
                "name": call["name"],
                "tool_call_id": call_id,
                "content": json.dumps(outcome.result, default=str)
                if outcome.ok
                else f"ERROR: {outcome.result}",
            }
        )
        ran.stop |= stop_turn

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
        stop: StopSignal | None = None,
    ) -> TurnResult:
        """Tell the model a background call finished and let it speak about it (no new tools).

        A text result that worked is data the reply carries (``turn``'s ``data``): SmolLM2-135M
        answered a finished timer with "I am done with the task. I will tell you when it is
        finished." (a new user's ``chat``, measured), which the user cannot act on. In grammar
        mode a result that is a sentence written for people (:func:`said_as_written`) is said as
        written, without a model round.
        """
        status = "finished" if done.ok else "failed"
        note = f"(The background task {done.tool} {status}: {done.result})"
        data = (spoken_result(done.result),) if done.ok and spoken_result(done.result) else ()
        if self.format == "grammar" and data and said_as_written(done.result):
            # A sentence written for people is all this turn is for: said as written, with no
            # model round that could only say it again ("Time is up: the timer ... is done.").
            self.history.append({"role": "user", "content": note})
            res = TurnResult()
            res.text = self._say_after(list(data), on_text, None)
            return res
        return self.turn(note, turn_id, on_text=on_text, stop=stop, tools=False, data=data)

    def forget_since(self, length: int) -> None:
        """Drop every history message after the first ``length`` (a dropped turn leaves no trace)."""
        del self.history[length:]

    def forget(self, messages: list[dict[str, Any]]) -> None:
        """Drop ``messages`` (by identity) from the history, wherever they are now.

        A turn the user continued leaves no trace, while what came after it (a background
        result spoken between the two parts) stays; messages compaction already dropped are skipped.
        """
        gone = {id(m) for m in messages}
        self.history[:] = [m for m in self.history if id(m) not in gone]

    def truncate_turn(self, heard: list[str]) -> str:
        """Keep only the ``heard`` pieces of the newest turn's replies; returns what is kept.

        See :func:`agent.conversation.history.truncate_turn` (barge-in: the rest was never played).
        """
        return hist.truncate_turn(self.history, heard)


def _left_out(name: str, pointed: list[str]) -> bool:
    """A call of tool ``name`` is not run: the words point at other tools (a stop always runs)."""
    return bool(pointed) and name not in pointed and "stop" not in name.split("_")


def _reason(outcome: ToolOutcome) -> str:
    """What the skill of a failed call raised, as a spoken sentence ("" for none, or a success)."""
    return _as_sentence(outcome.raised) if not outcome.ok and outcome.raised.strip() else ""


def _as_sentence(message: str) -> str:
    """A skill's message as a spoken sentence: capital first letter, a full stop at the end."""
    message = message.strip()
    message = message[0].upper() + message[1:]
    return message if message[-1] in ".!?" else message + "."
