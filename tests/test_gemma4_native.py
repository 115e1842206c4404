"""Bolt's native path end to end in llama.cpp, on the tiny random ``gemma4`` model.

The model has the real Gemma 4 vocabulary and chat template but random weights, so a GBNF
grammar (``[llm] output_grammar``) holds it to a reply made of the real special tokens,
referenced by id (``<[100]>`` = ``<|channel>``): a thought, one spoken sentence and a
``<|tool_call>call:wave{hand:<|"|>left<|"|>}<tool_call|>``. The real template renders the
prompt (tools declared, thinking on), llama.cpp generates, the Bolt parser splits the
stream, the registry runs the skill on the simulated robot, and nothing but the sentence is
ever handed to speech.
"""

from __future__ import annotations

import pytest
from gemma4_model import tiny_gemma4

from agent.config import LLMConfig, load_config
from agent.conversation import Conversation
from agent.engines.embedded.model import ChatModel
from agent.events import ToolCall, ToolResult
from agent.skills import SkillContext, load_registry
from hardware.factory import build_robot

MARKERS = ("<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>')
SPOKEN = "Sure, waving now."


@pytest.fixture(scope="module")
def model(gemma4_vocab):
    return ChatModel(tiny_gemma4(gemma4_vocab), LLMConfig(n_ctx=4096, threads=1, temperature=0.0))


@pytest.fixture
def robot():
    commands = []
    robot, _ = build_robot(
        load_config().robot, on_command=lambda joint, deg, t_ms: commands.append((joint, deg))
    )
    yield robot, commands
    robot.stop()


def token_ids(model) -> dict[str, int]:
    ids = {}
    for marker in MARKERS:
        toks = model.llm.tokenize(marker.encode(), add_bos=False, special=True)
        assert len(toks) == 1, f"{marker} is not one token in the Gemma 4 vocabulary: {toks}"
        ids[marker] = toks[0]
    return ids


def native_grammar(model) -> str:
    t = {m: f"<[{i}]>" for m, i in token_ids(model).items()}
    q = t['<|"|>']
    thought = '"thought\\nThe user wants me to wave with the left hand."'
    return (
        f'root ::= {t["<|channel>"]} {thought} {t["<channel|>"]} "{SPOKEN}" '
        f'{t["<|tool_call>"]} "call:wave{{hand:" {q} "left" {q} "}}" {t["<tool_call|>"]}'
    )


def test_model_is_a_gemma4_with_bolt_format(model):
    assert model.architecture == "gemma4"
    conv = Conversation(model, load_registry([]), SkillContext(robot=None), LLMConfig(n_ctx=4096))
    assert conv.format == "bolt"


def test_native_tool_call_and_thinking_run_the_tool_and_never_reach_speech(model, robot):
    bot, commands = robot
    events, spoken = [], []
    cfg = LLMConfig(
        n_ctx=4096,
        threads=1,
        temperature=0.0,
        reasoning="on",
        output_grammar=native_grammar(model),
        max_tool_rounds=2,
    )
    conv = Conversation(model, load_registry([]), SkillContext(robot=bot), cfg, events.append)
    res = conv.turn("Please wave with your left hand.", 7, on_text=spoken.append)

    # the call was generated as real special tokens, parsed, validated and run
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.tool, c.arguments) for c in calls] == [("wave", {"hand": "left"})]
    assert calls[0].turn_id == 7
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [(r.tool, r.ok) for r in results] == [("wave", True)] and "left" in results[0].result
    assert [(name, args, o.ok) for name, args, o in res.calls] == [("wave", {"hand": "left"}, True)]
    bot.wait_idle(5)
    assert any(joint == "left_arm" and deg > 100 for joint, deg in commands), commands
    assert not any(joint == "right_arm" and deg > 1 for joint, deg in commands)

    # the round after the result offers no tools; the grammar makes the model call again,
    # which is reported and not run
    assert res.rounds == 2 and any("ignored 1 tool call" in p for p in res.problems), res.problems
    assert res.thinking_tokens > 0

    # speech: the sentence only, never markup or thinking
    said = "".join(spoken)
    assert SPOKEN in said
    for junk in (*MARKERS, "thought", "call:", "wave{", "left hand"):
        assert junk not in said, said
    assert res.text == SPOKEN
    for msg in conv.history:
        if msg["role"] == "assistant":
            assert msg["content"] == SPOKEN
            assert not any(m in msg["content"] for m in MARKERS)
    tool_msgs = [m for m in conv.history if m["role"] == "tool"]
    assert len(tool_msgs) == 1 and "left" in tool_msgs[0]["content"]
