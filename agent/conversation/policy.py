"""Model profiles: the plain loop's decisions, and where a profile may change them.

``[llm] profile`` (:func:`choose_profile`) picks how the turn loop treats the model:

* ``plain`` — the product. The tools are offered, the calls the model wrote run (within their
  schema's clamps), each result goes back in the engine's protocol and the model speaks. The
  loop itself keeps only product rules: schema validation and clamps (a clamp is said aloud),
  the safety layer (an emergency stop's refusal is said aloud), the repeat-call guard, the round
  budget, conversational mode's sentence cap, and a skill whose result is written for people
  (``@skill(as_written=True)``) said as written without a second model round.
* ``small`` — a tiny model in grammar mode (the embedded stand-in SmolLM2-135M): the same loop
  with the rules of :mod:`agent.conversation.small` stepping in.

``auto`` picks ``small`` only for a small model (its GGUF under :data:`SMALL_MODEL_BYTES`) in
grammar mode, and ``plain`` for everything else: Bolt, any native tool template, and a server
with no local model file.

A profile is a :class:`TurnPolicy`. Each turn it reads the user's words once
(:meth:`TurnPolicy.begin`) and returns the turn's rules, a :class:`PlainRules` (whose methods are
the plain loop's own answers) or a subclass of it. The loop asks them at fixed points: whether
the turn needs the model at all (:meth:`PlainRules.answer`), the plan of each round
(:meth:`PlainRules.plan`), a filter on its speech (:meth:`PlainRules.speech`), each
call before it runs (:meth:`PlainRules.fix`, :meth:`PlainRules.vet`, :meth:`PlainRules.asked`)
and after (:meth:`PlainRules.at_once`, :meth:`PlainRules.written`), whether another round
follows (:meth:`PlainRules.next_round`), what a failed round says (:meth:`PlainRules.round_failed`)
and what is said after the rounds (:meth:`PlainRules.after`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Protocol

from agent.control import StopSignal
from agent.conversation.records import TurnResult
from agent.conversation.results import failure_reason, spoken_result
from agent.conversation.rounds import RoundPlan
from agent.engines import ChatEngine
from agent.events import BackgroundDone
from agent.skills import Skill, SkillContext, SkillRegistry, ToolOutcome

PROFILES = ("auto", "plain", "small")
"""Values of ``[llm] profile``."""

SMALL_MODEL_BYTES = 1 << 30
"""A GGUF under this size (1 GiB: about 1.5 billion parameters at 4-5 bits a weight) in grammar
mode is a small model for ``profile = "auto"`` (SmolLM2-135M Q4_1: 95 MB; Bolt E4B Q4_K_M:
3.1-4.3 GB, native anyway)."""


def choose_profile(setting: str, fmt: str, model: ChatEngine) -> str:
    """The profile a conversation runs: ``setting`` itself, or the one ``auto`` picks.

    Args:
        setting: ``[llm] profile`` (:data:`PROFILES`).
        fmt: The resolved tool-call format (``grammar``, ``bolt``, ``hermes``, ``llama3``).
        model: The chat model (its :attr:`~agent.engines.base.ChatEngine.model_bytes`).

    Returns:
        ``plain`` or ``small``.

    Raises:
        ValueError: an unknown ``setting``.
    """
    if setting not in PROFILES:
        raise ValueError(f"unknown [llm] profile {setting!r}; expected one of {', '.join(PROFILES)}")
    if setting != "auto":
        return setting
    size = int(getattr(model, "model_bytes", 0) or 0)
    return "small" if fmt == "grammar" and 0 < size < SMALL_MODEL_BYTES else "plain"


@dataclass(frozen=True)
class TurnStart:
    """What a profile reads once at the start of a turn.

    Attributes:
        text: What the user said (without the state line).
        history: The conversation before this turn's user message (read only).
        data: Results the reply must carry besides its own (a finished background call's).
        tools: The turn offers tools.
    """

    text: str
    history: list[dict[str, Any]]
    data: tuple[str, ...] = ()
    tools: bool = True


@dataclass(frozen=True)
class Answer:
    """A turn the rules answer without a model round.

    Attributes:
        say: The words said (through the reply cap), or "".
        calls: Calls to run, each ``{"name", "arguments"}``, in order (their results are read back
            as the rules' :meth:`PlainRules.after` says).
    """

    say: str = ""
    calls: tuple[dict[str, Any], ...] = ()


class SpeechFilter(Protocol):
    """A profile's filter on one round's speech (:meth:`PlainRules.speech`).

    Attributes:
        cut: Words of the round were left out, so its generated text is no longer what was said.
    """

    cut: bool

    def feed(self, delta: str) -> None:
        """Take one speech delta of the round; pass on what is to be said."""
        ...

    def flush(self) -> None:
        """What it holds is a whole utterance now (an acknowledgement): decide and pass it on."""
        ...

    def finish(self, say: str) -> str:
        """End of the round: pass on what is held; returns ``say`` (the round's speech) as kept."""
        ...


class PlainRules:
    """The plain loop's decisions for one turn; a profile's rules override some of them.

    Args:
        start: The turn's words and history.
        registry: The skills on offer.
        ctx: What skills get (the robot: its emergency stop).
    """

    def __init__(self, start: TurnStart, registry: SkillRegistry, ctx: SkillContext) -> None:
        self.start, self.registry, self.ctx = start, registry, ctx
        self._owed: list[str] = []

    def answer(self) -> Answer | None:
        """The turn answered without the model, or None: the plain loop always asks the model."""
        return None

    def plan(self, rnd: int, plan: RoundPlan, res: TurnResult, spoken: list[str]) -> RoundPlan:
        """The plan of round ``rnd`` (0-based); the plain loop's is taken as it comes.

        Args:
            rnd: The round.
            plan: What the loop offers (tools while the budget lasts, thinking).
            res: The turn so far (its calls).
            spoken: What earlier rounds of the turn said.
        """
        return plan

    def speech(
        self, plan: RoundPlan, downstream: Callable[[str], None], stop: StopSignal, res: TurnResult
    ) -> SpeechFilter | None:
        """A filter between the round's speech and ``downstream`` (the sentence cap); None: none.

        Args:
            plan: The round's plan.
            downstream: Receives what is to be said.
            stop: Set by a filter that wants no more words from the model this round.
            res: The turn so far.
        """
        return None

    def fix(self, skill: Skill, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments a call of ``skill`` runs with: the model's, as written."""
        return arguments

    def vet(self, skill: Skill, arguments: dict[str, Any]) -> ToolOutcome | None:
        """A call's outcome without running it, or None to run it: every call the model wrote runs."""
        return None

    def asked(self, skill: Skill, arguments: dict[str, Any]) -> Collection[str] | None:
        """The arguments whose values the person said (their clamps are told); None: all of them."""
        return None

    def at_once(self, skill: Skill | None, outcome: ToolOutcome) -> str:
        """What the robot says the moment a call returns, before the model's next round ("" for nothing).

        A clamped value's sentence (:attr:`ToolOutcome.told`: "I can nod at most 5 times in a
        row.") and the reason a movement was refused while the emergency stop is latched: the
        person hears both whatever the model says next. The model's tool result says they
        were said.
        """
        said = [outcome.told.strip()] if outcome.ok and outcome.told.strip() else []
        if (
            skill is not None
            and skill.moves
            and not outcome.ok
            and getattr(self.ctx.robot, "estopped", False)
        ):
            said.append(failure_reason(outcome))
        return " ".join(s for s in said if s)

    def written(self, skill: Skill | None, outcome: ToolOutcome) -> str:
        """What of a call's outcome is said as written, with no model round to read it ("" for none).

        The result of a skill that says it is written for people (``@skill(as_written=True)``:
        the ``abilities`` list), when it worked (pipecat's ``run_llm=False``).
        """
        if skill is None or not skill.as_written or not outcome.ok:
            return ""
        return spoken_result(outcome.result).strip()

    def next_round(self, say: str, res: TurnResult, first: int, rnd: int, may_speak: bool) -> bool:
        """After a round with calls: whether the model takes another round.

        Always, unless every call of the round has a result said as written (:meth:`written`):
        those are said after the rounds instead.

        Args:
            say: What the round said.
            res: The turn so far; its calls from index ``first`` are the round's.
            first: Index of the round's first call in ``res.calls``.
            rnd: The round (0-based).
            may_speak: The sentence cap and the user leave room for more words.
        """
        written = [self.written(self.registry.skills.get(n), o) for n, _, o in res.calls[first:]]
        if written and all(written):
            self._owed = written
            return False
        return True

    def round_failed(self, error: Exception, plan: RoundPlan) -> str | None:
        """What a round that raised says instead: None for the loop's apology (:data:`SORRY`)."""
        return None

    def after(self, res: TurnResult, spoken: list[str], user_cancelled: bool) -> list[str]:
        """Sentences said after the rounds: results written for people that ended the turn."""
        return [] if user_cancelled else list(dict.fromkeys(self._owed))


class TurnPolicy(Protocol):
    """A model profile: the rules of each turn.

    Attributes:
        name: ``plain`` or ``small``.
        hides_earlier_speech: Grammar mode shows earlier replies by their calls only.
    """

    name: str
    hides_earlier_speech: bool

    def begin(self, start: TurnStart) -> PlainRules:
        """The rules of a turn that starts so."""
        ...

    def as_written(self, done: BackgroundDone) -> bool:
        """Whether a finished background call is announced as written, with no model round."""
        ...


class PlainPolicy:
    """The ``plain`` profile: the loop's own rules, nothing else.

    Args:
        registry: The skills on offer.
        ctx: What skills get.
    """

    name = "plain"
    hides_earlier_speech = False
    reads_free_text = False

    def __init__(self, registry: SkillRegistry, ctx: SkillContext) -> None:
        self.registry, self.ctx = registry, ctx

    def begin(self, start: TurnStart) -> PlainRules:
        """The plain loop's rules for this turn."""
        return PlainRules(start, self.registry, self.ctx)

    def as_written(self, done: BackgroundDone) -> bool:
        """A background skill written for people (``as_written``) that finished is announced as written."""
        skill = self.registry.skills.get(done.tool)
        return done.ok and skill is not None and skill.as_written and bool(spoken_result(done.result))
