"""Which tool calls wait for a turn's confirmation (``[turn] confirm_ms``, ``@skill(side_effects=...)``).

A turn prepared before the user's silence confirmed it runs a skill that only reads (``get_time``)
at once, so the answer that reads the result back is ready on release; a skill with side effects
(``nod``) waits for the release, and calls keep their order. The real embedded model is held to a
GBNF grammar (``[llm] output_grammar``) so that it writes exactly the calls under test.
"""

from __future__ import annotations

import threading
import time

import pytest

from agent.config import LLMConfig, load_config
from agent.control import ReleaseGate, StopSignal
from agent.conversation import Conversation
from agent.engines.embedded.model import ChatModel
from agent.events import ToolCall, ToolResult
from agent.models import resolve_model
from agent.skills import SkillContext, load_registry
from hardware.factory import build_robot

GET_TIME = r'"<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>"'
NOD = r'"<tool_call>{\"name\": \"nod\", \"arguments\": {}}</tool_call>"'


@pytest.fixture(scope="module")
def model():
    return ChatModel(resolve_model("packaged:smollm2-135m"), LLMConfig(n_ctx=4096, temperature=0.0))


@pytest.fixture(scope="module")
def ctx():
    robot, _ = build_robot(load_config().robot)
    yield SkillContext(robot=robot)
    robot.stop()


class HeldTurn:
    """One turn run on a thread with a release gate still closed; events stamped when emitted."""

    def __init__(self, model, ctx, grammar: str) -> None:
        self.events: list[tuple[float, object]] = []
        self.conv = Conversation(
            model,
            load_registry([]),
            ctx,
            LLMConfig(tool_format="hermes", temperature=0.0, output_grammar=grammar, max_tool_rounds=2),
            lambda ev: self.events.append((time.monotonic(), ev)),
        )
        self.gate, self.stop = ReleaseGate(), StopSignal()
        self.result = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.result = self.conv.turn("What time is it?", 0, stop=self.stop, release=self.gate)

    def wait_for(self, what, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not what():
            assert time.monotonic() < deadline, f"timed out; events: {[e for _, e in self.events]}"
            time.sleep(0.01)

    def round_written(self) -> bool:
        return any(m["role"] == "assistant" for m in self.conv.history)

    def calls(self) -> list[tuple[float, str]]:
        return [(t, e.tool) for t, e in self.events if isinstance(e, ToolCall)]

    def finish(self) -> None:
        self.thread.join(60)
        assert not self.thread.is_alive()


def test_a_skill_that_only_reads_runs_before_the_release(model, ctx):
    held = HeldTurn(model, ctx, f"root ::= {GET_TIME}")
    held.wait_for(lambda: any(isinstance(e, ToolResult) for _, e in held.events))
    assert not held.gate.released  # the time was read while the turn still waited
    assert [n for _, n in held.calls()] == ["get_time"]
    result = next(e for _, e in held.events if isinstance(e, ToolResult))
    assert result.ok and "It is" in str(result.result)
    held.gate.release()
    held.finish()
    assert [name for name, _, _ in held.result.calls] == ["get_time"]


def test_a_skill_with_side_effects_waits_and_calls_keep_their_order(model, ctx):
    held = HeldTurn(model, ctx, f"root ::= {NOD} {GET_TIME}")
    held.wait_for(held.round_written)  # both calls written: nod waits, and get_time after it
    assert held.calls() == []
    released = time.monotonic()
    held.gate.release()
    held.finish()
    assert [n for _, n in held.calls()] == ["nod", "get_time"]
    assert all(t >= released for t, _ in held.calls())
    assert [name for name, _, _ in held.result.calls] == ["nod", "get_time"]


def test_a_dropped_turn_runs_nothing(model, ctx):
    held = HeldTurn(model, ctx, f"root ::= {NOD} {GET_TIME}")
    held.wait_for(held.round_written)
    held.gate.drop()
    held.stop.set()  # as the driver does when the user goes on
    held.finish()
    assert held.calls() == []
