"""Value syntax (Gemma 4 notation, lenient JSON), format detection, and a property test of chunking."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.toolparse import (
    TextDelta,
    detect_format,
    loads_lenient,
    make_parser,
    merge_deltas,
    parse_all,
    parse_gemma_call,
    parse_gemma_value,
    prompt_ends_in_thinking,
)
from agent.toolparse.formats import SPECS

Q = '<|"|>'

# ---------------------------------------------------------------------- Gemma 4 values


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3", 3),
        ("-3", -3),
        ("0", 0),
        ("2.5", 2.5),
        ("-0.25", -0.25),
        ("1e-05", 1e-05),
        ("1e+20", 1e20),
        ("3E2", 300.0),
        ("-1.5e-3", -0.0015),
        (".5", 0.5),
        ("true", True),
        ("false", False),
        ("null", None),
        ("None", None),
        (f"{Q}{Q}", ""),
        (f"{Q}a, b: {{c}} [d] \"e\" 'f'{Q}", "a, b: {c} [d] \"e\" 'f'"),
        (f"{Q}multi\nline{Q}", "multi\nline"),
        ("[]", []),
        ("{}", {}),
        ('"json string"', "json string"),
        (f"[1,{Q}x{Q},[true,null],{{a:1}}]", [1, "x", [True, None], {"a": 1}]),
        (f"{{a:{{b:{{c:[{Q}deep{Q}]}}}}}}", {"a": {"b": {"c": ["deep"]}}}),
        (f"{{{Q}quoted key{Q}:1,bare_key:2,dash-key:3}}", {"quoted key": 1, "bare_key": 2, "dash-key": 3}),
        (" { a : 1 ,\n b : [ 1 , 2 ] , } ", {"a": 1, "b": [1, 2]}),
    ],
)
def test_gemma_values(text, value):
    got = parse_gemma_value(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("celsius", "unknown value syntax 'celsius'"),
        (f"{Q}open", "unterminated"),
        ("{a:1", "unclosed object"),
        ("[1,2", "unclosed array"),
        ("{a 1}", "expected ':'"),
        ("{a:1 b:2}", "expected ',' or '}'"),
        ("[1 2]", "expected ',' or ']'"),
        ("1 2", "unexpected text after the value"),
        ("3px", "unknown value syntax '3px'"),
        ("nan", "unknown value syntax 'nan'"),
        ("{a:}", "where a value was expected"),
        ("", "expected a value"),
        ("[" * 100, "nesting deeper"),
    ],
)
def test_gemma_value_errors(text, fragment):
    with pytest.raises(ValueError, match="offset|end of input") as info:
        parse_gemma_value(text)
    assert fragment in str(info.value)


def test_gemma_call_head():
    assert parse_gemma_call(f"call:get_weather{{city:{Q}Paris{Q}}}") == ("get_weather", {"city": "Paris"})
    assert parse_gemma_call(" call: ns.tool-name {} \n") == ("ns.tool-name", {})
    for bad, fragment in [
        ("get_weather{}", "call:NAME"),
        ("call:f", "expected '{'"),
        ("call:f[1]", "expected '{'"),
        ("call:f{}{}", "after the arguments"),
        ("call:{a:1}", "call:NAME"),
    ]:
        with pytest.raises(ValueError) as info:
            parse_gemma_call(bad)
        assert fragment in str(info.value), (bad, info.value)


# ---------------------------------------------------------------------- lenient JSON


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": [1, 2.5, "x"], "b": null}', {"a": [1, 2.5, "x"], "b": None}),
        ("{'a': 'single'}", {"a": "single"}),
        ("{'a': 'it\\'s', 'b': 'say \"hi\"'}", {"a": "it's", "b": 'say "hi"'}),
        ('{"a": [1, 2,], "b": {"c": 1,},}', {"a": [1, 2], "b": {"c": 1}}),
        ("{'t': True, 'f': False, 'n': None}", {"t": True, "f": False, "n": None}),
        ("{name: 'wave', arguments: {times: 2}}", {"name": "wave", "arguments": {"times": 2}}),
        ('{"esc": "tab\\tnew\\nline \\u00e9"}', {"esc": "tab\tnew\nline é"}),
        ("[]", []),
        ('"just a string"', "just a string"),
    ],
)
def test_loads_lenient_repairs(text, value):
    assert loads_lenient(text) == value


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{'city': Paris}", "unknown value syntax 'Paris'; strings must be quoted"),
        ('{"a": 1', "unclosed object"),
        ('{"a": 1} extra', "unexpected text after the value"),
        ('{"a": NaN}', "unknown value syntax 'NaN'"),
        ("{'a': 'it's'}", "expected ',' or '}'"),  # ambiguous quote: refused, not guessed
        ('{"a" 1}', "expected ':'"),
        ('{"a": "\\x"}', "bad escape"),
        ("{1: 2}", "expected a key"),
        (f"{{a: {Q}x{Q}}}", "where a value was expected"),  # Gemma strings are not JSON
    ],
)
def test_loads_lenient_errors(text, fragment):
    with pytest.raises(ValueError) as info:
        loads_lenient(text)
    assert fragment in str(info.value), info.value


# ---------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("template", "arch", "fmt"),
    [
        (None, "gemma4", "bolt"),
        ("", "gemma4_assistant", "bolt"),
        ("{{ '<|tool_call>call:' + name }}", "llama", "bolt"),
        ("{% for t in tools %}<tool_call>{{ t }}</tool_call>{% endfor %}", "qwen2", "hermes"),
        ("<|start_header_id|>ipython<|end_header_id|>", "llama", "llama3"),
        ("{{ '<|python_tag|>' + call }}", None, "llama3"),
        ("<|start_header_id|>ipython<|end_header_id|>", "qwen2", "none"),
        ("{{ messages }}", "llama", "none"),
        (None, None, "none"),
    ],
)
def test_detect_format(template, arch, fmt):
    assert detect_format(template, arch) == fmt


def test_prompt_ends_in_thinking():
    assert prompt_ends_in_thinking("<|turn>model\n<|channel>thought\n")
    assert not prompt_ends_in_thinking("<|turn>model\n<|channel>thought\n<channel|>")
    assert prompt_ends_in_thinking("<|im_start|>assistant\n<think>\n")
    assert not prompt_ends_in_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert not prompt_ends_in_thinking("<|turn>model\n")


# ---------------------------------------------------------------------- property: chunking never matters

_PIECES = [
    "<|tool_call>",
    "<tool_call|>",
    "call:f{",
    "a:",
    Q,
    "}",
    "{",
    "1",
    "x",
    " ",
    "\n",
    "<|channel>",
    "thought\n",
    "<channel|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    '{"name": "g", "arguments": {}}',
    "<|python_tag|>",
    "<eos>",
    "<|image|>",
    "<",
    "<|",
    "|>",
    "hello",
    ",",
    ";",
    "'",
    '"',
    "é",
    "👀",
]


@settings(max_examples=250, deadline=None)
@given(
    pieces=st.lists(st.sampled_from(_PIECES), max_size=25),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
    fmt=st.sampled_from(sorted(SPECS)),
    forced=st.sampled_from([False, True, None]),
)
def test_chunking_never_changes_the_result(pieces, cuts, fmt, forced):
    text = "".join(pieces)
    whole = parse_all(fmt, text, thinking_forced_open=forced)
    bounds = sorted({min(c, len(text)) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)], strict=False)]
    parser = make_parser(fmt, thinking_forced_open=forced)
    events = [ev for chunk in chunks for ev in parser.feed(chunk)] + parser.close()
    assert merge_deltas(events) == whole
    markers = (
        "<|tool_call>",
        "<tool_call|>",
        Q,
        "<|channel>",
        "<channel|>",
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<|python_tag|>",
        "<eos>",
        "<|image|>",
    )
    for ev in whole:
        if isinstance(ev, TextDelta):
            assert ev.text.strip()
            assert not any(m in ev.text for m in markers), ev
