"""Running the calls a round wrote: the product's rules around each call, and its tool message.

Every call gets an id (the model's own, or ``t{turn}r{round}c{n}``) that its assistant message
and its tool message share, as OpenAI's protocol requires. Before a call runs, the turn's rules
may fix its arguments or answer it without running it (the small-model profile:
:mod:`agent.conversation.small`); then the product's own rules apply: identical repeated calls
are answered with a warning after :data:`REPEAT_WARN` and stop the turn after
:data:`REPEAT_STOP`; the registry validates (and clamps) the arguments and runs the skill, never
raising; a background skill gets its completion callback. A turn prepared before the user's
silence confirmed it (a :class:`~agent.control.ReleaseGate`) runs a call with side effects only
once released, and none once dropped. :class:`~agent.events.ToolCall` and
:class:`~agent.events.ToolResult` go out through ``emit``; what the rules say at once (a clamp, an
emergency stop's refusal) goes to speech before the model's next round.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.control import ReleaseGate, StopSignal
from agent.conversation.background import BackgroundCalls
from agent.conversation.policy import PlainRules
from agent.conversation.records import TurnResult
from agent.conversation.results import failure_reason
from agent.events import Event, ToolCall, ToolResult
from agent.skills import SkillContext, SkillRegistry, ToolOutcome

log = logging.getLogger(__name__)

REPEAT_WARN = 3
"""A call repeated with the same arguments this many times in a turn is answered with a warning."""
REPEAT_STOP = 5
"""... and this many times stops the turn."""


@dataclass
class RoundCalls:
    """The calls one round ran (during generation or after it), with their tool messages in order.

    Attributes:
        id_prefix: Ids of the round's calls without one of their own: this and the call's index.
        first: Index of the round's first call in :attr:`TurnResult.calls`.
        calls: The calls run, each ``{"name", "arguments", "id"}``.
        messages: Their ``tool`` messages, in order.
        said: What was said at once about them (:meth:`PlainRules.at_once`).
        stop: A repeated-call loop must stop the turn.
        release: Calls with side effects wait for it (a turn prepared before its confirmation).
        turn_stop: The turn's stop signal (a dropped turn stops waiting).
    """

    id_prefix: str
    first: int
    calls: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    stop: bool = False
    release: ReleaseGate | None = None
    turn_stop: StopSignal | None = None

    def number(self, calls: list[dict[str, Any]]) -> None:
        """Give each of ``calls`` (the round's, in order) an id unless the model gave it one."""
        for i, call in enumerate(calls):
            call.setdefault("id", f"{self.id_prefix}{i}")


class CallRunner:
    """Runs one turn's calls, round after round.

    Args:
        registry: Validates and runs the skills.
        ctx: Handed to skills.
        background: Counts background calls and queues their results.
        rules: The turn's rules (a profile's may fix or answer a call).
        res: The turn's result (each call is appended to it).
        turn_id: For the messages.
        emit: Receives :class:`~agent.events.ToolCall` and :class:`~agent.events.ToolResult`.
        say: Speaks a sentence now (what the rules say at once about a call).
    """

    def __init__(
        self,
        registry: SkillRegistry,
        ctx: SkillContext,
        background: BackgroundCalls,
        rules: PlainRules,
        res: TurnResult,
        turn_id: int,
        emit: Callable[[Event], None],
        say: Callable[[str], None],
    ) -> None:
        self.registry, self.ctx, self.background, self.rules = registry, ctx, background, rules
        self.res, self.turn_id, self.emit, self.say = res, turn_id, emit, say
        self.seen: dict[str, int] = {}

    def run(self, ran: RoundCalls, call: dict[str, Any], during_round: bool = False) -> None:
        """Run one call of a round and keep it, with its tool message, in ``ran``.

        In a turn waiting for its confirmation a call of a skill with side effects handed out
        while the round is written is left to the end of the round (the round's speech goes on
        meanwhile), and then waits for the release; a dropped turn runs none. Such a call whose
        arguments fit its skill as the model wrote them tells the gate
        (:meth:`~agent.control.ReleaseGate.command_called`). A skill that only
        reads (``side_effects=False``: the clock) runs at once, so the answer that reads its
        result back is prepared before the release too.

        Args:
            ran: The round's calls so far.
            call: ``{"name", "arguments"}`` (and ``id`` where the model gave one); changed in place.
            during_round: Handed out while the round is still generated (grammar mode).
        """
        name = call["name"]
        skill = self.registry.skills.get(name)
        waits = skill is None or skill.side_effects  # an unknown tool's error waits like a call
        pending = ran.release is not None and not ran.release.released
        if pending and waits:
            if skill is not None and self.registry.fits(name, call["arguments"]):
                ran.release.command_called()  # the command was whole: the silence may confirm it sooner
            if during_round:
                return  # run after the round, from its returned calls (a round has one early call)
            if not ran.release.wait(ran.turn_stop):
                return  # dropped: the user went on, nothing is done
        elif pending and ran.release.dropped:
            return  # the user went on: not even a reading is worth taking
        call_id = call.setdefault("id", f"{ran.id_prefix}{len(ran.calls)}")
        if skill is not None and isinstance(call["arguments"], dict):
            fixed = self.rules.fix(skill, call["arguments"])
            if fixed != call["arguments"]:
                log.info("arguments fixed: %s %s -> %s", name, call["arguments"], fixed)
                call["arguments"] = fixed
        args = call["arguments"]
        key = json.dumps([name, args], sort_keys=True, default=str)
        self.seen[key] = self.seen.get(key, 0) + 1
        self.emit(ToolCall(self.turn_id, name, args, call_id))
        outcome, stop = self._outcome(skill, name, args, call_id, self.seen[key])
        ran.stop |= stop
        self.emit(
            ToolResult(self.turn_id, name, outcome.ok, outcome.result, call_id, failure_reason(outcome))
        )
        self.res.calls.append((name, args, outcome))
        ran.calls.append(call)
        now = self.rules.at_once(skill, outcome)
        if now:
            ran.said.append(now)
            self.say(now)
        ran.messages.append(tool_message(call, outcome))

    def _outcome(
        self, skill: Any, name: str, args: Any, call_id: str, repeats: int
    ) -> tuple[ToolOutcome, bool]:
        """The call's outcome, and whether the turn must stop (a repeated-call loop).

        Answered by the rules, refused as a repeat, or run by the registry.
        """
        vetted = self.rules.vet(skill, args) if skill is not None else None
        if vetted is not None:
            log.info("turn %d: not run: %s (%s)", self.turn_id, name, vetted.result)
            return vetted, False
        if repeats >= REPEAT_STOP:
            return ToolOutcome(
                False, f"{name} was called {repeats} times with the same arguments; stopped"
            ), True
        if repeats >= REPEAT_WARN:
            return ToolOutcome(
                False,
                f"{name} already ran {repeats - 1} times with these "
                f"arguments this turn; do not call it again, answer the user",
            ), False
        on_done = self.background.callback(name, call_id)
        asked = self.rules.asked(skill, args) if skill is not None and isinstance(args, dict) else None
        outcome = self.registry.call(name, args, self.ctx, on_done, asked)
        if on_done is not None and not outcome.ok:  # refused: a started call answers "started"
            self.background.not_started()
        return outcome, False


def tool_message(call: dict[str, Any], outcome: ToolOutcome) -> dict[str, Any]:
    """The ``tool`` message of a call: its id, its name, and its result as JSON text (or the error).

    Args:
        call: ``{"name", "arguments", "id"}``.
        outcome: What the call gave.

    Returns:
        ``{"role": "tool", "name", "tool_call_id", "content"}``; a failure's content is
        ``ERROR: <message for the model>``.
    """
    content = json.dumps(outcome.result, default=str) if outcome.ok else f"ERROR: {outcome.result}"
    return {"role": "tool", "name": call["name"], "tool_call_id": call["id"], "content": content}
