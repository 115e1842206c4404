"""The turn loop on exactly the model output under test, produced by the real model held to a grammar.

A GBNF grammar (``[llm] output_grammar``) makes the embedded model emit exactly the reply under
test — a call repeated forever, a broken second call, a reply that is only thinking — so the
real parser, registry and loop handle real generated text. The same technique checks which calls
of a turn prepared before the user's silence confirmed it (``[turn] confirm_ms``) wait for the
release: a skill that only reads (``@skill(side_effects=False)``: ``get_time``) runs at once, so
the answer that reads it back is ready on release; one with side effects (``nod``) waits, calls
keep their order, and a dropped turn runs none; a waiting call whose arguments fit its skill as the
model wrote them tells the gate the command was clear (``[turn] strong_on_command``).
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


@pytest.fixture(scope="module")
def model():
    return ChatModel(resolve_model("packaged:smollm2-135m"), LLMConfig(n_ctx=4096, temperature=0.0))


@pytest.fixture(scope="module")
def ctx():
    robot, _ = build_robot(load_config().robot)
    yield SkillContext(robot=robot)
    robot.stop()


def run(model, ctx, grammar: str, text: str = "Do it.", **cfg):
    events = []
    conv = Conversation(
        model,
        load_registry([]),
        ctx,
        LLMConfig(tool_format="hermes", temperature=0.0, output_grammar=grammar, **cfg),
        events.append,
    )
    return conv, conv.turn(text, 0), events


def test_a_model_that_repeats_one_call_forever_is_stopped(model, ctx):
    forever = r'root ::= "<tool_call>{\"name\": \"nod\", \"arguments\": {}}</tool_call>"'
    conv, res, events = run(model, ctx, forever, max_tool_rounds=8)
    outcomes = [o for name, _, o in res.calls if name == "nod"]
    assert len(outcomes) == 5
    assert [o.ok for o in outcomes] == [True, True, False, False, False]
    assert "do not call it again" in outcomes[2].result and "stopped" in outcomes[4].result
    assert "stopped a repeated tool call loop" in res.problems
    assert len([e for e in events if isinstance(e, ToolCall)]) == 5
    conv.history.append({"role": "user", "content": "still there?"})  # the conversation goes on


def test_second_call_broken_first_still_runs(model, ctx):
    broken = (
        r'root ::= "<tool_call>{\"name\": \"wave\", \"arguments\": {\"hand\": \"left\"}}</tool_call>'
        r'<tool_call>{\"name\": \"nod\", \"arguments\": {hand: </tool_call>"'
    )
    _, res, events = run(model, ctx, broken, max_tool_rounds=2)
    assert res.calls[0][0] == "wave" and res.calls[0][2].ok
    assert any("nod" in p or "JSON" in p or "arguments" in p for p in res.problems), res.problems
    assert [e.tool for e in events if isinstance(e, ToolResult)][0] == "wave"


def test_unknown_tool_and_wrong_types_become_results(model, ctx):
    bad = (
        r'root ::= "<tool_call>{\"name\": \"fly\", \"arguments\": {}}</tool_call>'
        r'<tool_call>{\"name\": \"look\", \"arguments\": {\"yaw_deg\": \"left\"}}</tool_call>"'
    )
    conv, res, _ = run(model, ctx, bad, max_tool_rounds=2)
    by_name = {name: o for name, _, o in res.calls}
    assert (
        not by_name["fly"].ok and "valid tools" in by_name["fly"].result and "wave" in by_name["fly"].result
    )
    assert not by_name["look"].ok and "yaw_deg" in by_name["look"].result
    tool_msgs = [m for m in conv.history if m["role"] == "tool"]
    assert len(tool_msgs) == 2 and all(m["content"].startswith("ERROR") for m in tool_msgs)


WAVE_THEN_STOP = (
    r'root ::= "<tool_call>{\"name\": \"wave\", \"arguments\": {}}</tool_call>'
    r'<tool_call>{\"name\": \"stop\", \"arguments\": {}}</tool_call>"'
)


@pytest.mark.small_model
@pytest.mark.parametrize("text", ["Don't wave.", "Stop waving!", "Please do not ever wave."])
def test_a_movement_the_user_said_not_to_do_is_not_run_and_the_robot_says_so(model, ctx, text):
    """SmolLM2-135M called ``wave`` for "don't wave" and after ``stop`` for "stop waving" (a new
    user's chat); in the small profile, a movement the words only negate does not run."""
    _, res, events = run(model, ctx, WAVE_THEN_STOP, text=text, max_tool_rounds=2, profile="small")
    by_name = {name: o for name, _, o in res.calls}
    assert not by_name["wave"].ok and by_name["wave"].raised == "I won't wave, as you asked"
    assert "not run: the user asked not to" in by_name["wave"].result
    assert by_name["stop"].ok  # stopping always runs
    assert [e.tool for e in events if isinstance(e, ToolResult)] == ["wave", "stop"]


@pytest.mark.small_model
def test_a_movement_named_apart_from_the_negation_runs(model, ctx):
    _, res, _ = run(model, ctx, WAVE_THEN_STOP, text="Don't nod, wave.", max_tool_rounds=2, profile="small")
    assert [(name, o.ok) for name, _, o in res.calls] == [("wave", True), ("stop", True)]


def test_a_background_result_in_words_ends_its_turns_reply(model, ctx):
    """A timer's result is written for people (``as_written``): said as written, with no model
    round (a model round once added "You can continue to play a game of pasta.")."""
    from agent.events import BackgroundDone
    from agent.state.timers import done_message

    done = done_message("pasta for the dinner with my friends tonight timer", 600)
    said = f"{done} You can continue to play a game of pasta."
    spoken = []
    conv = Conversation(
        model,
        load_registry([]),
        ctx,
        LLMConfig(tool_format="hermes", temperature=0.0, output_grammar=f'root ::= "{said}"'),
    )
    finished = BackgroundDone(0, tool="set_timer", ok=True, result=done, call_id="t0r0c0")
    res = conv.background_turn(finished, 1, on_text=spoken.append)
    assert "".join(spoken).strip() == done and res.text == done


def test_reply_that_is_nothing_but_thinking(model, ctx):
    only_thinking = r'root ::= "<think>The user wants something. I will think about it.</think>"'
    spoken = []
    conv = Conversation(
        model,
        load_registry([]),
        ctx,
        LLMConfig(tool_format="hermes", temperature=0.0, output_grammar=only_thinking),
    )
    res = conv.turn("Hello?", 0, on_text=spoken.append)
    assert res.text == "" and spoken == [] and res.calls == []
    assert conv.history[-1] == {"role": "assistant", "content": ""}
    res2 = conv.turn("Are you there?", 1)  # and the next turn runs normally
    assert res2.rounds == 1


def test_malformed_markup_is_reported_not_spoken(model, ctx):
    truncated = r'root ::= "Sure. <tool_call>{\"name\": \"wave\", \"arguments\": {\"hand\": \"le"'
    spoken = []
    conv = Conversation(
        model,
        load_registry([]),
        ctx,
        LLMConfig(tool_format="hermes", temperature=0.0, output_grammar=truncated),
    )
    res = conv.turn("Wave.", 0, on_text=spoken.append)
    assert "".join(spoken).strip() == "Sure." and res.calls == []
    assert res.problems and "<tool_call>" not in res.text


# --- calls in a turn that waits for its confirmation ([turn] confirm_ms) ---------------------------
GET_TIME = r'"<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>"'
NOD = r'"<tool_call>{\"name\": \"nod\", \"arguments\": {}}</tool_call>"'


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


LOOK_FAR = r'"<tool_call>{\"name\": \"look\", \"arguments\": {\"yaw_deg\": 90}}</tool_call>"'
FLY = r'"<tool_call>{\"name\": \"fly\", \"arguments\": {}}</tool_call>"'


@pytest.mark.parametrize(
    ("grammar", "clear"),
    [
        (NOD, True),  # a skill with side effects, its arguments as the schema asks
        (LOOK_FAR, False),  # 90 degrees: clamped to 60, not what the skill asks for
        (FLY, False),  # no such skill
        (GET_TIME, False),  # only reads: runs at once, no command to confirm
    ],
)
def test_a_waiting_call_that_fits_its_skill_tells_the_gate_the_command_was_clear(model, ctx, grammar, clear):
    held = HeldTurn(model, ctx, f"root ::= {grammar}")
    held.wait_for(held.round_written)
    if clear:
        held.wait_for(lambda: held.gate.command)
    else:
        time.sleep(0.2)  # the round's calls reach the runner right after it is written: none tells the gate
    assert held.gate.command == clear and not held.gate.released
    held.gate.release()
    held.finish()
    assert len(held.result.calls) == 1
