"""The small-model profile's turn rules: how the plain loop is helped to carry a tiny model.

Every rule here steps in at one of the plain loop's points (:class:`~agent.conversation.policy.PlainRules`);
none is on the path of a capable model. Per turn it reads the user's words once and:

* **plans each round** (grammar mode): a logit bonus toward the tools the words point at
  (:mod:`.toolprior`; after the first round only tools still wanted are offered), greedy
  decoding when a round reads a result back, the copy prior and drafting on that result, the
  repeat guard against the previous replies and the prompt's example, and a short
  acknowledgement (:mod:`.acks`) the moment a movement's name is written, except where the call
  cannot work (emergency stop, no length said, words that ask for another tool);
* **filters the speech**: a round that reads data back starts (grammar mode) and ends with the
  sentence that carries it (:mod:`.readback`), and a sentence that claims a movement no call
  made is left out (:mod:`.claims`);
* **fixes a call's arguments** from the words (:mod:`.argprior`: sides, angles, counts,
  lengths, "the other hand") and **vets a call**: not run when the user said not to, when a
  length it needs was never said ("For how long?"), or when the words ask for other tools;
* **decides the next round** (grammar mode): only when the round's calls need words, or the
  words still point at a tool not yet called;
* **says after the rounds** the data the rounds left unsaid, as the tools wrote it, and what
  stands instead of a claimed movement.

Why each rule exists, with the measurements on SmolLM2-135M: ``docs/small-model.md``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection
from typing import Any

from agent.config import LLMConfig
from agent.control import StopSignal
from agent.conversation import history as hist
from agent.conversation.policy import Answer, PlainRules, TurnStart
from agent.conversation.prompt import EXAMPLE_SAY
from agent.conversation.records import TurnResult
from agent.conversation.results import as_sentence, failure_reason, spoken_result
from agent.conversation.rounds import RoundPlan
from agent.conversation.small.acks import Acknowledgements
from agent.conversation.small.again import asks_again, asks_what_was_said
from agent.conversation.small.argprior import follow_words, length_unsaid, said_values
from agent.conversation.small.claims import CANNOT, MISSED, ClaimGuard, asked_for
from agent.conversation.small.quantities import spoken_seconds
from agent.conversation.small.readback import (
    DataHead,
    DataTail,
    carries_data,
    said_as_written,
    short_sentence,
    tail_after_data,
)
from agent.conversation.small.toolprior import follow_on, said_not_to, takes_a_length, tool_prior, tools_left
from agent.conversation.toolgrammar import NO_TOOL
from agent.engines.base import ContextFull
from agent.events import BackgroundDone
from agent.skills import Skill, SkillContext, SkillRegistry, ToolOutcome

log = logging.getLogger(__name__)

ASK_LENGTH = "For how long?"
"""Said instead of running a skill that takes a length ("in seconds") when the user said none."""


class SmallPolicy:
    """The ``small`` profile (:mod:`agent.conversation.policy`).

    Args:
        registry: The skills on offer.
        ctx: What skills get (the robot: its emergency stop).
        cfg: ``[llm]`` (the priors' bonuses, the round budget).
        fmt: The resolved tool-call format (most rules act in grammar mode only).
    """

    name = "small"
    hides_earlier_speech = True
    reads_free_text = True
    """Grammar mode: a skill's ``from_words`` parameters are not in the grammar; read from the words."""

    def __init__(self, registry: SkillRegistry, ctx: SkillContext, cfg: LLMConfig, fmt: str) -> None:
        self.registry, self.ctx, self.cfg, self.format = registry, ctx, cfg, fmt
        self.acks = Acknowledgements()  # in turn over the whole conversation

    def begin(self, start: TurnStart) -> SmallRules:
        """The small profile's rules for this turn."""
        return SmallRules(start, self)

    def as_written(self, done: BackgroundDone) -> bool:
        """A finished background call whose result is a sentence written for people (grammar mode)."""
        return (
            self.format == "grammar"
            and done.ok
            and bool(spoken_result(done.result))
            and said_as_written(done.result)
        )


class SmallRules(PlainRules):
    """The small profile's rules for one turn (see the module docstring).

    Args:
        start: The turn's words and history.
        policy: The profile (registry, context, config, format, acknowledgements).
    """

    def __init__(self, start: TurnStart, policy: SmallPolicy) -> None:
        super().__init__(start, policy.registry, policy.ctx)
        self.cfg, self.policy = policy.cfg, policy
        self.grammar = policy.format == "grammar"
        self.text = start.text
        self.skills = list(self.registry.skills.values())
        self.before = _last_turn_speech(start.history)  # not acknowledged the same way twice in a row
        self.earlier = _last_turn_calls(start.history)  # "and now to the right" goes on the last call
        self.worked = _last_turn_calls(start.history, worked_only=True)  # what "again" repeats
        self.carried = functools.partial(_carries, frozenset(start.data))
        self.claims: list[str] = []  # movements claimed while no call worked (left unsaid)
        self.replaying = False  # the turn repeats the last one's calls as they were (:meth:`answer`)

    # --- a turn the rules answer ---------------------------------------------------------------
    def answer(self) -> Answer | None:
        """Grammar mode: "what did you just say?" and "do that again" are answered without the model.

        The last turn's words are said again as they were; the last turn's calls run again with
        their arguments (a movement with an acknowledgement first; a reading's result is read
        back after the rounds). Words that ask only for skills this body has no device for get
        the device's sentence (:meth:`_body_cannot`). None otherwise.
        """
        if not self.grammar:
            return None
        if self.start.tools and (cannot := self._body_cannot()):
            return Answer(cannot)  # no round: nothing on offer can do it
        if asks_what_was_said(self.text):
            last = " ".join(reversed(self.before))
            return Answer(last or "I haven't said anything yet.")
        if asks_again(self.text) and self.worked:
            self.replaying = True
            calls = tuple({"name": n, "arguments": dict(a)} for n, a in self.worked)
            moves = any(
                not self.registry.skills[n].follow_up for n, _ in self.worked if n in self.registry.skills
            )
            return Answer(self.policy.acks.next(frozenset(self.before)) if moves else "", calls)
        return None

    # --- a round -------------------------------------------------------------------------------
    def plan(self, rnd: int, plan: RoundPlan, res: TurnResult, spoken: list[str]) -> RoundPlan:
        """Round ``rnd``'s tool prior, greedy read-back, copy prior, repeat guard and acknowledgements."""
        allow_tools, bonus = plan.allow_tools, self.cfg.tool_prior_bonus
        bonuses: dict[str, float] = {}
        done = frozenset(name for name, _, _ in res.calls)
        if self.grammar and allow_tools:
            prior = tool_prior if rnd == 0 else tools_left
            bonuses = prior(self.text, self.skills, set(done), bonus)
            if rnd == 0:
                bonuses = follow_on(self.text, self.skills, [n for n, _ in self.earlier], bonus) or bonuses
            # After the first round offer tools only while the words point at one not yet called.
            if rnd > 0 and bonus > 0:
                if bonuses.get(NO_TOOL, 0) > 0:
                    allow_tools = False
                else:
                    done = frozenset(n for n in self.registry.skills if n not in bonuses)
        results = [*self.start.data, *self._data_results(res)]
        greedy = bool(res.calls or self.start.data) and self.grammar
        no_ack = self._cannot_move() | self._asks_length() | self._not_asked()
        return RoundPlan(
            allow_tools,
            temperature=0.0 if greedy else None,
            bonuses=bonuses,
            done=done,
            copy_from=tuple(results),
            avoid=tuple(_not_within(self.before, " ".join(results))),
            examples=(EXAMPLE_SAY,) if self.grammar else (),
            ack=functools.partial(self._ack, frozenset(spoken + self.before), no_ack),
        )

    def _ack(self, said: frozenset[str], no_ack: frozenset[str], skill: Skill) -> str:
        """A movement's acknowledgement, a slow look-up's preamble, or "" (see :meth:`plan`)."""
        if skill.name in no_ack or skill.as_written or (skill.follow_up and not skill.preamble):
            return ""  # a result written for people is the answer: no "Sure!" before it
        return skill.preamble or self.policy.acks.next(said)

    def speech(
        self, plan: RoundPlan, downstream: Callable[[str], None], stop: StopSignal, res: TurnResult
    ) -> _ReadBack | None:
        """Data read back first and last; claimed movements without a call left out."""
        data = self.start.data
        ends = plan.copy_from and all(short_sentence(r) or r in data for r in plan.copy_from)
        tail = DataTail(list(plan.copy_from), downstream, stop, self.carried) if ends else None
        feed = tail.feed if tail is not None else downstream
        reasons = {failure_reason(o) for _, _, o in res.calls}
        read_back = [r for r in plan.copy_from if r not in reasons]
        head = DataHead(read_back, feed, self.carried) if read_back and self.grammar else None
        feed = head.feed if head is not None else feed
        guard = None
        if self.start.tools and self.grammar and not moved(res, self.registry):
            guard = ClaimGuard(feed, functools.partial(moved, res, self.registry))
        if tail is None and head is None and guard is None:
            return None
        return _ReadBack(tail, head, guard, self.claims)

    # --- a call --------------------------------------------------------------------------------
    def fix(self, skill: Skill, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments the words give (:func:`~.argprior.follow_words`), the last turn's call as a base.

        In grammar mode a skill's ``from_words`` parameters, left out of the grammar, are read
        from the words by the skill's own readers (a reader that raises leaves the default).
        """
        if not self.text or self.replaying:
            return arguments
        fixed = follow_words(self.text, skill.parameters, arguments, dict(self.earlier).get(skill.name))
        for name, read in skill.from_words.items() if self.grammar else ():
            try:
                fixed[name] = read(self.text)
            except Exception:  # noqa: BLE001 - a skill author's reader: the default stands
                log.exception("from_words %s of %s failed on %r", name, skill.name, self.text)
        return fixed

    def vet(self, skill: Skill, arguments: Any) -> ToolOutcome | None:
        """Not run: the user said not to, said no length the skill needs, or asked for other tools."""
        if self.replaying:
            return None
        name = skill.name
        if skill.side_effects and said_not_to(self.text, skill):
            return ToolOutcome(
                False,
                f"{name} not run: the user asked not to",
                raised=f"I won't {name.replace('_', ' ')}, as you asked",
            )
        if self.text and length_unsaid(self.text, skill.parameters):
            return ToolOutcome(False, f"{name} not run: the user said no length", raised=ASK_LENGTH)
        wanted = self._unasked(skill)
        if wanted:
            return ToolOutcome(False, f"{name} not run: the user asked for {wanted}, not this")
        return None

    def asked(self, skill: Skill, arguments: dict[str, Any]) -> Collection[str] | None:
        """The arguments the words say (:func:`~.argprior.said_values`): only their clamps are told."""
        return said_values(self.text, skill.parameters, arguments)

    def at_once(self, skill: Skill | None, outcome: ToolOutcome) -> str:
        """Nothing: clamps and refusals are said after the rounds with the data (:meth:`after`)."""
        return ""

    def written(self, skill: Skill | None, outcome: ToolOutcome) -> str:
        """A failure's reason, or a data result that is a sentence written for people, said as written."""
        reason = failure_reason(outcome)
        if reason:
            return reason
        if skill is None or not outcome.ok or not (skill.follow_up or skill.as_written):
            return ""
        words = spoken_result(outcome.result).strip()
        return words if skill.as_written or said_as_written(outcome.result) else ""

    # --- the turn ------------------------------------------------------------------------------
    def next_round(self, say: str, res: TurnResult, first: int, rnd: int, may_speak: bool) -> bool:
        """Grammar mode: a round only when the calls need words, or the words want another tool.

        A call whose result is said as written (:meth:`written`) needs no words of the model;
        a skill with follow-up, a failed call without a reason, and a round that said nothing
        do. In native formats every round with calls is followed by one.
        """
        if not self.grammar:
            return True
        calls = res.calls[first:]
        written = [self.written(self.registry.skills.get(n), o) for n, _, o in calls]
        needs_words = not say.strip() and not any(written)
        for (name, _, outcome), words in zip(calls, written, strict=True):
            sk = self.registry.skills.get(name)
            needs_words |= not words and (sk is None or sk.follow_up or not outcome.ok)
        if needs_words and may_speak:
            return True
        if not self.start.tools or rnd + 1 >= self.cfg.max_tool_rounds - 1:  # the next could only talk
            return False
        called = {name for name, _, _ in res.calls}
        left = tools_left(self.text, self.skills, called, self.cfg.tool_prior_bonus)
        return any(v > 0 for name, v in left.items() if name != NO_TOOL)

    def round_failed(self, error: Exception, plan: RoundPlan) -> str | None:
        """A data round with no room left in the context says nothing: the data is said after the rounds."""
        return "" if isinstance(error, ContextFull) and plan.copy_from else None

    def after(self, res: TurnResult, spoken: list[str], user_cancelled: bool) -> list[str]:
        """Grammar mode: data the rounds left unsaid, and what stands instead of a claimed movement."""
        if not self.grammar or user_cancelled:
            return []
        so_far = " ".join(spoken)
        owed = [r for r in [*self.start.data, *self._data_results(res)] if not self.carried(so_far, r)]
        if self.claims and not any(o.ok for _, _, o in res.calls):  # a reading that worked answered
            owed.append(self._instead_of_claims())
        return owed

    # --- what the words ask for ------------------------------------------------------------------
    def _data_results(self, res: TurnResult) -> list[str]:
        """What of this turn's calls a reply reads back, each once.

        A data skill's result that worked (its words: :func:`spoken_result`), the reason any skill
        raised for people when it failed, and what a clamped call told (:attr:`ToolOutcome.told`).
        """
        out: dict[str, None] = {}
        for name, _, outcome in res.calls:
            skill = self.registry.skills.get(name)
            if skill is None:
                continue
            if outcome.ok and (skill.follow_up or skill.as_written) and spoken_result(outcome.result):
                out[spoken_result(outcome.result)] = None
            elif failure_reason(outcome):
                out[failure_reason(outcome)] = None
            if outcome.ok and outcome.told.strip():
                out[as_sentence(outcome.told)] = None
        return list(out)

    def _instead_of_claims(self) -> str:
        """What a turn says whose only words claimed a movement no call made.

        "Okay, I won't dance." where the user said not to; :data:`~.claims.CANNOT` where they asked
        for that movement ("fly to the moon"); :data:`~.claims.MISSED` otherwise.
        """
        refused = [s.name for s in self.skills if s.side_effects and said_not_to(self.text, s)]
        if refused:
            return f"Okay, I won't {refused[0].replace('_', ' ')}."
        return CANNOT if any(asked_for(self.text, c) for c in self.claims) else MISSED

    def _body_cannot(self) -> str:
        """What the robot says when the words ask only for skills this body has no device for.

        With no camera configured ``describe_scene`` is not offered, and SmolLM2-135M answered
        "what do you see right now?" with a joke. Where every tool the words point at
        (:func:`~.toolprior.tool_prior`) is one left out for a device
        (:attr:`~agent.skills.SkillRegistry.absent`), the turn says why ("I have no camera, so I
        cannot see."). "" when the words point at no such skill or also at an offered one.
        """
        absent = self.registry.absent
        if not absent or not self.text.strip():
            return ""
        skills = [*self.skills, *(sk for sk, _ in absent.values())]
        bonuses = tool_prior(self.text, skills, set(), 1.0)
        pointed = [n for n, v in bonuses.items() if v > 0 and n != NO_TOOL]
        return absent[pointed[0]][1] if pointed and all(n in absent for n in pointed) else ""

    def _asked_for(self) -> list[str]:
        """The tools the user's words point at (:func:`~.toolprior.tool_prior`; grammar mode, else none)."""
        if not self.grammar or not self.text.strip():
            return []
        bonuses = tool_prior(self.text, self.skills, set(), 1.0)
        return [n for n, v in bonuses.items() if v > 0 and n != NO_TOOL]

    def _unasked(self, skill: Skill) -> str:
        """The tools the words ask for instead, when they point at others and not at ``skill`` ("": it runs).

        A call the words point at no tool for runs (the model's own choice), and so does a stop.
        """
        pointed = self._asked_for()
        return ", ".join(pointed) if _left_out(skill.name, pointed) else ""

    def _not_asked(self) -> frozenset[str]:
        """Skills whose call is not run because the words ask for others: no acknowledgement."""
        pointed = self._asked_for()
        return frozenset(name for name in self.registry.skills if _left_out(name, pointed))

    def _asks_length(self) -> frozenset[str]:
        """Skills the words give no usable length for: none (:func:`length_unsaid`), or one below zero.

        A call of one is answered :data:`ASK_LENGTH` alone, or its refusal alone, with no
        acknowledgement first.
        """
        below_zero = (spoken_seconds(self.text) or 0) < 0
        return frozenset(
            s.name
            for s in self.skills
            if length_unsaid(self.text, s.parameters) or (below_zero and takes_a_length(self.text, s))
        )

    def _cannot_move(self) -> frozenset[str]:
        """Skills that move the body while the emergency stop is latched: no acknowledgement."""
        if not getattr(self.ctx.robot, "estopped", False):
            return frozenset()
        return frozenset(s.name for s in self.skills if s.moves)


class _ReadBack:
    """The small profile's speech filter for one round: claims guard → data head → data tail.

    Args:
        tail: Ends the round with the sentence that carries its data, or None.
        head: Starts it with that sentence (grammar mode), or None.
        guard: Leaves out claimed movements no call made, or None.
        claims: Receives the claims the guard left out (the turn says what stands instead).
    """

    def __init__(
        self, tail: DataTail | None, head: DataHead | None, guard: ClaimGuard | None, claims: list[str]
    ) -> None:
        self.tail, self.head, self.guard, self.claims = tail, head, guard, claims
        outer = guard or head or tail
        assert outer is not None
        self.feed = outer.feed

    @property
    def cut(self) -> bool:
        """Words of the round were left out (a claim, or words before the data)."""
        return bool(
            (self.guard is not None and self.guard.dropped) or (self.head is not None and self.head.dropped)
        )

    def flush(self) -> None:
        """An acknowledgement the claims guard holds is whole now."""
        if self.guard is not None:
            self.guard.flush()

    def finish(self, say: str) -> str:
        """End of the round: flush each part in order; ``say`` without what they left out."""
        if self.guard is not None:
            self.guard.flush()
            say = self.guard.kept(say)
            self.claims += self.guard.dropped
            if self.guard.dropped:
                log.info("left out a movement no call made: %r", self.guard.dropped)
        if self.head is not None:
            self.head.flush()
            say = self.head.kept(say)
            if self.head.dropped:
                log.info("left out before the data: %r", self.head.dropped)
        if self.tail is not None:
            self.tail.flush()
            say = _ended_with_data(say, self.tail)
        return say


def _last_turn_speech(history: list[dict[str, Any]]) -> list[str]:
    """What the assistant said in the newest turn of ``history``, one entry per round that spoke."""
    out: list[str] = []
    for msg in reversed(history):
        if msg["role"] == "user":
            break
        if msg["role"] == "assistant" and msg.get("content"):
            out.append(msg["content"].strip())
    return out


def _last_turn_calls(
    history: list[dict[str, Any]], worked_only: bool = False
) -> list[tuple[str, dict[str, Any]]]:
    """The calls of the newest turn of ``history``, in order: ``(tool, arguments)``.

    Arguments that are no object are ``{}``. With ``worked_only`` a call whose tool message is an
    error (refused as not asked for, failed) is left out: what "again" repeats ("a bit quieter"
    had the stand-in call ``abilities`` first, refused, and "again" read the list out). A refused
    call still names what a follow-on goes on ("set a timer" → "For how long?" → "three seconds").
    """
    out: list[tuple[str, dict[str, Any]]] = []
    failed: set[str] = set()
    for msg in reversed(history):
        if msg["role"] == "user":
            break
        if worked_only and msg["role"] == "tool" and str(msg.get("content", "")).startswith("ERROR: "):
            failed.add(str(msg.get("tool_call_id")))
        if msg["role"] == "assistant":
            calls = [c for c in msg.get("tool_calls") or () if str(c.get("id")) not in failed]
            out[:0] = [
                (f["name"], f["arguments"] if isinstance(f["arguments"], dict) else {})
                for f in (c["function"] for c in calls)
            ]
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
    """Whether ``text`` says ``result`` (:func:`carries_data`); every word of one of ``whole``."""
    return carries_data(text, result, whole=result in whole)


def moved(res: TurnResult, registry: SkillRegistry) -> bool:
    """A call of the turn with side effects worked: the robot may say it moves (a reading moves nothing)."""
    for name, _, outcome in res.calls:
        skill = registry.skills.get(name)
        if outcome.ok and (skill is None or skill.side_effects):
            return True
    return False


def _left_out(name: str, pointed: list[str]) -> bool:
    """A call of tool ``name`` is not run: the words point at other tools (a stop always runs)."""
    return bool(pointed) and name not in pointed and "stop" not in name.split("_")
