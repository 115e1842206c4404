"""Context window: exact token accounting, compaction at n_ctx=768, KV-cache reuse across turns."""

from __future__ import annotations

import pytest

from agent.config import LLMConfig, load_config
from agent.conversation import Conversation
from agent.conversation.context import SUMMARY_KEY, split_turns
from agent.conversation.turn import SORRY
from agent.engines.embedded.model import ChatModel
from agent.models import resolve_model
from agent.skills import SkillContext, load_registry
from hardware.factory import build_robot


@pytest.fixture(scope="module")
def ctx():
    robot, _ = build_robot(load_config().robot)
    return SkillContext(robot=robot)


def make(n_ctx: int, ctx, **kw) -> Conversation:
    cfg = LLMConfig(n_ctx=n_ctx, temperature=0.0, max_tokens=64, **kw)
    model = ChatModel(resolve_model(cfg.model), cfg)
    return Conversation(model, load_registry([]), ctx, cfg)


def test_conversation_outgrowing_a_small_context_keeps_going(ctx):
    # 768 tokens: the system prompt and every built-in tool (the camera's too: no devices given)
    # take 650 of them (460 at 576 before the skills of issue 50, 444 before cancel_timer, when 512
    # still fitted), so the history is compacted on nearly every turn.
    conv = make(768, ctx)
    system_tokens = conv.model.count_tokens(conv.render())
    assert 768 - 64 - 80 < system_tokens < 768 - 64 - 8
    said = [
        "Wave your right hand.",
        "What time is it?",
        "Nod your head.",
        "Tell me about the weather today.",
        "Dance for me.",
        "Look to the left.",
        "Stop!",
        "Tell me a joke about cats.",
        "Wave again please.",
    ]
    for i, text in enumerate(said * 2):
        res = conv.turn(text, i)
        assert not [p for p in res.problems if "model error" in p], res.problems
        assert res.text or res.calls
        # A round left no room to read a result back says it as written, not "Sorry, ...".
        assert SORRY not in res.text, res.problems
        prompt = conv.render()
        assert prompt.startswith(conv.render().split("<|im_end|>")[0])  # system prompt + tools kept
        assert "Tools:" in prompt and "- wave(" in prompt
    turns = split_turns(conv.history)
    assert len(turns) <= 3  # old turns were dropped; the conversation went on
    # Every tool result still follows the call that produced it.
    for turn in turns:
        pending = 0
        for m in turn:
            if m["role"] == "assistant":
                pending += len(m.get("tool_calls", []))
            elif m["role"] == "tool":
                assert pending > 0
                pending -= 1


def test_after_the_first_turn_only_new_tokens_are_evaluated(ctx):
    conv = make(4096, ctx)
    conv.warmup()
    first = conv.turn("Tell me a joke.", 0)
    full = conv.model.count_tokens(conv.render())
    last_reply = conv.history[-1].get("raw") or conv.history[-1]["content"]
    second = conv.turn("Tell me another one.", 1)
    assert first.prompt_tokens > 0
    # The static prefix (system prompt + tools + the first user turn) comes from the KV cache:
    # only the new user turn is evaluated, plus the previous reply where re-tokenizing the
    # grammar-constrained output splits it differently from how it was generated.
    new_part = conv.model.count_tokens("Tell me another one.") + conv.model.count_tokens(last_reply) + 24
    assert second.rounds == 1 and second.prompt_tokens <= new_part < full / 4


def test_state_goes_into_the_newest_turn_only(ctx):
    conv = make(4096, ctx)
    conv.turn("Hello.", 0, state="time 10:00")
    before = conv.render()
    conv.turn("How are you?", 1, state="time 10:01")
    after = conv.render()
    assert after.startswith(before[: before.index("Hello.")])
    assert "time 10:00" in after and "time 10:01" in after
    assert "10:0" not in conv.system_prompt()


def test_compaction_keeps_calls_with_results_and_summarizes():
    from agent.conversation.context import compact

    history = []
    for i in range(6):
        history += [
            {"role": "user", "content": f"request {i} " + "x" * 60},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": f"tool{i}", "arguments": {}}}],
            },
            {"role": "tool", "name": f"tool{i}", "content": "ok"},
            {"role": "assistant", "content": f"done {i}"},
        ]
    size = lambda h: sum(len(m["content"]) for m in h)  # noqa: E731 - a stand-in token count
    new, dropped = compact(history, size, target=400)
    assert dropped == 4 and size(new) <= 400
    assert new[0][SUMMARY_KEY] and '"request 0' in new[0]["content"] and "tool0, tool1" in new[0]["content"]
    assert [m["content"][:9] for m in new if m["role"] == "user"][1:] == ["request 4", "request 5"]
    # Calls and their results stay together: each kept turn is whole.
    assert [m["role"] for m in new[1:5]] == ["user", "assistant", "tool", "assistant"]
    again, dropped2 = compact(new + history[-4:], size, target=400)
    assert dropped2 >= 1 and "tool3" in again[0]["content"]  # the earlier summary is carried over
    tiny, _ = compact(history, size, target=10)
    assert tiny == history[-4:]  # nothing but the current turn fits: no summary line either


def test_early_start_leaves_only_the_last_token_for_the_turn(ctx):
    conv = make(4096, ctx)
    conv.warmup()
    conv.turn("Hello there.", 0)
    evaluated = conv.prefill("Tell me a joke about robots.")
    assert evaluated > 5  # the user's words (and the tail of the previous reply) were read early
    assert conv.prefill("Tell me a joke about robots.") == 0  # already cached
    history = list(conv.history)
    res = conv.turn("Tell me a joke about robots.", 1)
    assert conv.history[: len(history)] == history  # prefill changed nothing in the conversation
    assert res.prompt_tokens <= 2, res.prompt_tokens  # llama.cpp re-evaluates the last token only
