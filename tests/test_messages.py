"""Message normalization, checked by rendering with real chat templates and tokenizers."""

from __future__ import annotations

import pytest

from agent.config import LLMConfig
from agent.conversation.messages import normalize_for_template
from agent.engines.base import LLMError
from agent.engines.embedded.model import ChatModel
from agent.models import resolve_model

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "wave",
            "description": "Wave hello.",
            "parameters": {
                "type": "object",
                "properties": {"hand": {"type": "string", "enum": ["left", "right"]}},
                "required": ["hand"],
            },
        },
    }
]

HISTORY = [
    {"role": "system", "content": "You are Bolt."},
    {"role": "user", "content": "Wave your left hand!"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "wave", "arguments": {"hand": "left"}}}],
    },
    {"role": "tool", "name": "wave", "tool_call_id": "c0", "content": '"I am waving my left hand."'},
    {"role": "assistant", "content": "I am waving."},
    {"role": "user", "content": None},
    {"role": "user", "content": "Thanks."},
]


@pytest.fixture(scope="module")
def gemma(gemma4_vocab):
    return ChatModel(gemma4_vocab, LLMConfig(n_ctx=4096), vocab_only=True)


@pytest.fixture(scope="module")
def smol():
    return ChatModel(resolve_model("packaged:smollm2-135m"), LLMConfig(n_ctx=2048), vocab_only=True)


def test_gemma4_tool_results_ride_on_the_calling_model_message(gemma):
    assert gemma.architecture == "gemma4"
    msgs = normalize_for_template(HISTORY, gemma.template)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[2]["tool_responses"] == [{"name": "wave", "response": "I am waving my left hand."}]
    assert msgs[2]["content"] == "I am waving." and msgs[3]["content"] == "Thanks."
    prompt = gemma.render(msgs, tools=TOOLS)
    assert prompt == (
        '<bos><|turn>system\nYou are Bolt.<|tool>declaration:wave{description:<|"|>Wave hello.<|"|>,'
        'parameters:{properties:{hand:{enum:[<|"|>left<|"|>,<|"|>right<|"|>],type:<|"|>STRING<|"|>}},'
        'required:[<|"|>hand<|"|>],type:<|"|>OBJECT<|"|>}}<tool|><turn|>\n'
        "<|turn>user\nWave your left hand!<turn|>\n"
        '<|turn>model\n<|tool_call>call:wave{hand:<|"|>left<|"|>}<tool_call|>'
        '<|tool_response>response:wave{value:<|"|>I am waving my left hand.<|"|>}<tool_response|>'
        "I am waving.<turn|>\n"
        "<|turn>user\nThanks.<turn|>\n"
        "<|turn>model\n<|channel>thought\n<channel|>"
    )
    toks = gemma.tokenize(prompt)
    pieces = [gemma.llm.detokenize([t], special=True).decode() for t in toks]
    for marker in (
        "<bos>",
        "<|turn>",
        "<turn|>",
        "<|tool_call>",
        "<tool_call|>",
        "<|tool_response>",
        "<tool_response|>",
        '<|"|>',
        "<|channel>",
        "<channel|>",
    ):
        assert marker in pieces, marker
    assert toks[0] == gemma.llm.token_bos() and toks.count(gemma.llm.token_bos()) == 1
    assert gemma.count_tokens(prompt) == len(toks)


def test_gemma4_generation_continues_the_model_turn_after_tool_results(gemma):
    msgs = normalize_for_template(HISTORY[:4], gemma.template)
    prompt = gemma.render(msgs, tools=TOOLS)
    assert prompt.endswith("<tool_response|><|channel>thought\n<channel|>")
    assert prompt.count("<|turn>model") == 1
    thinking = gemma.render(msgs, tools=TOOLS, enable_thinking=True)
    assert "<|think|>" in thinking and not thinking.endswith("<channel|>")


def _call(call_id, name, **args):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


CHAIN = [
    {"role": "system", "content": "You are Bolt."},
    {"role": "user", "content": "Make Ada a potion."},
    {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [_call("c0", "check_payment", customer="Ada")],
    },
    {"role": "tool", "name": "check_payment", "tool_call_id": "c0", "content": '{"paid": true}'},
    {"role": "assistant", "content": "", "tool_calls": [_call("c1", "craft", item="potion")]},
    {"role": "tool", "name": "craft", "tool_call_id": "c1", "content": '"Crafted 1 potion."'},
]


def test_gemma4_rounds_of_a_turn_are_one_model_message_that_goes_on_after_its_responses(gemma):
    """A chain of rounds renders as Bolt writes it: calls, responses, and the model going on."""
    msgs = normalize_for_template(CHAIN, gemma.template)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant"]
    turn = msgs[2]
    assert [c["function"]["name"] for c in turn["tool_calls"]] == ["check_payment", "craft"]
    assert [r["name"] for r in turn["tool_responses"]] == ["check_payment", "craft"]
    assert turn["content"] == ""  # words written before a call have no place where the turn goes on
    prompt = gemma.render(msgs)
    assert prompt.count("<|turn>model") == 1 and prompt.endswith(
        "<tool_response|><|channel>thought\n<channel|>"
    )
    assert "Let me check." not in prompt


def test_gemma4_a_finished_turn_keeps_its_words_and_one_without_words_is_closed(gemma):
    done = [*CHAIN, {"role": "assistant", "content": "Here you go."}, {"role": "user", "content": "Thanks."}]
    msgs = normalize_for_template(done, gemma.template)
    assert msgs[2]["content"] == "Let me check. Here you go."
    assert gemma.render(msgs).count("<turn|>\n<|turn>user\nThanks.") == 1
    quiet = [*CHAIN, {"role": "user", "content": "Thanks."}]
    quiet[2] = {**quiet[2], "content": ""}  # the turn ended with no words at all
    prompt = gemma.render(normalize_for_template(quiet, gemma.template))
    assert "<tool_response|><turn|>\n<|turn>user\nThanks." in prompt


def test_template_without_tool_role_gets_results_as_user_text(smol):
    msgs = normalize_for_template(HISTORY, smol.template)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[3]["content"] == 'Result of wave: "I am waving my left hand."'
    assert msgs[5]["content"] == "Thanks."  # None content dropped, consecutive user turns merged
    prompt = smol.render(msgs)
    assert prompt.startswith(
        "<|im_start|>system\nYou are Bolt.<|im_end|>\n<|im_start|>user\nWave your left hand!"
    )
    assert prompt.endswith("<|im_start|>user\nThanks.<|im_end|>\n<|im_start|>assistant\n")
    assert "None" not in prompt
    assert len(smol.tokenize(prompt)) == smol.count_tokens(prompt)  # add_bos_token=false: nothing prepended


STRICT = (
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def test_strict_template_system_merges_into_first_user_and_roles_alternate(smol):
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": "Hello"},
        {"role": "user", "content": "there"},
    ]
    msgs = normalize_for_template(history, STRICT)
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[0]["content"] == "Be brief."
    assert msgs[2]["content"] == "Hello\n\nthere"
    prompt = Jinja2ChatFormatter(STRICT, eos_token="", bos_token="")(messages=msgs).prompt
    assert prompt.startswith("<start_of_turn>user\nBe brief.<end_of_turn>")
    with pytest.raises(Exception, match="System role not supported"):
        Jinja2ChatFormatter(STRICT, eos_token="", bos_token="")(messages=history)


def test_render_error_is_clear(gemma):
    # The Gemma 4 template reads ``messages[0]`` unguarded: an empty conversation is a real
    # template failure, and the error names the model file and what jinja said.
    with pytest.raises(
        LLMError, match=r"ggml-vocab-gemma-4\.gguf rejected the conversation: list object has no element 0"
    ):
        gemma.render([])
