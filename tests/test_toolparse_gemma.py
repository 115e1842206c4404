"""The Bolt parser against the real Gemma 4 tokenizer and chat template (vocabulary-only GGUF).

Replies are tokenized with the real vocabulary, then detokenized one token at a time, as a
streaming generation would hand them over, and fed to the parser piece by piece.
"""

from __future__ import annotations

import codecs

import pytest
from toolparse_cases import CASES, Case

from agent.toolparse import (
    ParsedToolCall,
    detect_format,
    make_parser,
    merge_deltas,
    parse_all,
    prompt_ends_in_thinking,
)

llama_cpp = pytest.importorskip("llama_cpp")

SINGLE_TOKENS = (
    "<|tool_call>",
    "<tool_call|>",
    '<|"|>',
    "<|channel>",
    "<channel|>",
    "<|tool_response>",
    "<tool_response|>",
    "<|turn>",
    "<turn|>",
    "<eos>",
    "<|think|>",
)
BOLT_CASES = [c for c in CASES if c.fmt == "bolt"]


@pytest.fixture(scope="session")
def gemma(gemma4_vocab):
    return llama_cpp.Llama(model_path=str(gemma4_vocab), vocab_only=True, verbose=False)


def tokenize(llm, text: str) -> list[int]:
    return llm.tokenize(text.encode(), add_bos=False, special=True)


def stream_pieces(llm, tokens: list[int]) -> list[str]:
    """Detokenize one token at a time; an incremental decoder joins UTF-8 split across tokens."""
    dec = codecs.getincrementaldecoder("utf-8")()
    pieces = [dec.decode(llm.detokenize([tok], special=True)) for tok in tokens]
    pieces.append(dec.decode(b"", final=True))
    return pieces


def test_markers_are_single_tokens(gemma):
    for marker in SINGLE_TOKENS:
        toks = tokenize(gemma, marker)
        assert len(toks) == 1, (marker, toks)
        assert gemma.detokenize(toks, special=True).decode() == marker


@pytest.mark.parametrize("case", BOLT_CASES, ids=[c.id for c in BOLT_CASES])
def test_token_stream_matches_unsplit_parse(gemma, case: Case):
    tokens = tokenize(gemma, case.text)
    # every marker in the reply is one token, as the model would emit it
    for marker in SINGLE_TOKENS:
        (tok,) = tokenize(gemma, marker)
        assert tokens.count(tok) == case.text.count(marker), marker
    pieces = stream_pieces(gemma, tokens)
    assert "".join(pieces) == case.text
    parser = make_parser(case.fmt, thinking_forced_open=case.forced)
    events = [ev for piece in pieces for ev in parser.feed(piece)] + parser.close()
    assert merge_deltas(events) == parse_all(case.fmt, case.text, thinking_forced_open=case.forced)


def test_byte_fallback_really_splits_characters(gemma):
    (case,) = [c for c in BOLT_CASES if c.id == "bolt_byte_fallback"]
    raw = [gemma.detokenize([t], special=True) for t in tokenize(gemma, case.text)]
    undecodable = 0
    for b in raw:
        try:
            b.decode()
        except UnicodeDecodeError:
            undecodable += 1
    assert undecodable >= 4  # the incremental decoder path is exercised


@pytest.fixture(scope="session")
def formatter(gemma):
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = gemma.metadata["tokenizer.chat_template"]
    return Jinja2ChatFormatter(template, eos_token="<eos>", bos_token="<bos>")


def test_real_template_is_detected_as_bolt(gemma):
    template = gemma.metadata["tokenizer.chat_template"]
    assert detect_format(template, gemma.metadata["general.architecture"]) == "bolt"
    assert detect_format(template, None) == "bolt"


def test_calls_rendered_by_the_real_template_parse_back(formatter):
    """The template's own ``format_argument`` output (as the model learned it) round-trips."""
    calls = [
        ("set_light", {"room": "kitchen", "on": True, "brightness": 80, "color": {"r": 255, "g": 200}}),
        ("say", {"text": 'Hello, {world}: "hi" [x] <b>a:b</b>', "volume": -0.25, "notes": None}),
        (
            "plan",
            {
                "steps": [{"action": "wave", "times": 2}, {"action": "speak", "text": "日本 🦩"}],
                "tiny": 1e-05,
                "huge": 1e20,
                "empty": {},
                "none": [],
            },
        ),
        ("look", {}),
    ]
    messages = [
        {"role": "user", "content": "do things"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls],
        },
    ]
    prompt = formatter(messages=messages).prompt
    reply = prompt.split("<|turn>model\n")[1]
    assert reply.startswith("<|tool_call>call:set_light{")
    events = parse_all("bolt", reply)
    assert [(e.name, e.arguments) for e in events if isinstance(e, ParsedToolCall)] == calls
    assert all(isinstance(e, ParsedToolCall) for e in events)


def test_thinking_state_of_real_prompts(formatter):
    messages = [{"role": "user", "content": "hi"}]
    off = formatter(messages=messages).prompt
    assert off.endswith("<|channel>thought\n<channel|>")
    assert not prompt_ends_in_thinking(off)
    on = formatter(messages=messages, enable_thinking=True).prompt
    assert "<|think|>" in on and on.endswith("<|turn>model\n")
    assert not prompt_ends_in_thinking(on)
    assert prompt_ends_in_thinking(off[: -len("<channel|>")])
