"""Reasoning on/off, the thinking budget and conversational mode, on the real embedded model."""

from __future__ import annotations

import re

import pytest

from agent.config import LLMConfig, load_config
from agent.conversation import Conversation
from agent.engines.embedded.model import ChatModel
from agent.models import resolve_model
from agent.skills import SkillContext, load_registry
from hardware.factory import build_robot


@pytest.fixture(scope="module")
def model():
    return ChatModel(resolve_model("packaged:smollm2-135m"), LLMConfig(n_ctx=2048, temperature=0.0))


@pytest.fixture(scope="module")
def ctx():
    robot, _ = build_robot(load_config().robot)
    return SkillContext(robot=robot)


def conversation(model, ctx, **overrides):
    cfg = LLMConfig(n_ctx=2048, temperature=0.0, tool_format="hermes", **overrides)
    return Conversation(model, load_registry([]), ctx, cfg)


MARKUP = re.compile(r"</?think>|<\|channel>|<channel\|>")


def test_budget_in_tokens_closes_a_block_the_model_never_closes(model, ctx):
    conv = conversation(
        model,
        ctx,
        reasoning="on",
        thinking_budget_tokens=12,
        thinking_budget_ms=60_000,
        max_reply_sentences=0,
    )
    prompt = conv.render(think=True)
    assert prompt.endswith(
        "<|im_start|>assistant\n<think>\n"
    )  # pre-filled: SmolLM2's template has no thinking
    spoken = []
    res = conv.turn("Why is the sky blue?", 0, on_text=spoken.append)
    assert res.thinking_forced
    assert 12 <= res.thinking_tokens <= 12 + len(model.llm.tokenize(b"</think>", add_bos=False, special=True))
    assert not any(MARKUP.search(d) for d in spoken)
    assert not MARKUP.search(res.text)


def test_budget_in_milliseconds(model, ctx):
    conv = conversation(
        model,
        ctx,
        reasoning="on",
        thinking_budget_tokens=10_000,
        thinking_budget_ms=1.0,
        max_reply_sentences=0,
    )
    res = conv.turn("Tell me about robots.", 0)
    assert res.thinking_forced and res.thinking_tokens <= 6


def test_reasoning_off_never_thinks(model, ctx):
    conv = conversation(model, ctx, reasoning="off")
    assert "<think>" not in conv.render()
    res = conv.turn("Hello!", 0)
    assert res.thinking_tokens == 0 and not res.thinking_forced


def test_reasoning_only_when_tools_are_offered(model, ctx):
    conv = conversation(model, ctx, reasoning="tools", max_tool_rounds=2)
    assert conv.thinks(allow_tools=True) and not conv.thinks(allow_tools=False)
    grammar = Conversation(model, load_registry([]), ctx, LLMConfig(reasoning="on", tool_format="grammar"))
    assert not grammar.thinks(allow_tools=True)  # JSON replies have no room for thinking


def test_conversational_mode_caps_spoken_sentences(model, ctx):
    conv = conversation(model, ctx, conversational_mode=True, max_reply_sentences=1, max_tokens=200)
    assert "at most 1 short spoken sentence" in conv.system_prompt()  # fallback: template lacks the flag
    spoken = []
    res = conv.turn("Tell me a long story about a robot and a cat.", 0, on_text=spoken.append)
    said = "".join(spoken)
    assert len(re.findall(r"[.!?](?:\s|$)", said)) <= 1
    assert res.text and len(re.findall(r"[.!?](?:\s|$)", res.text)) <= 1
    off = conversation(model, ctx, conversational_mode=False)
    assert "Conversational mode" not in off.system_prompt()
