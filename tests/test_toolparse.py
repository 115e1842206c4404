"""Streaming tool-call / thinking parser: recorded replies, every split position, bad input."""

from __future__ import annotations

import pytest
from toolparse_cases import CASES, Case

from agent.toolparse import (
    ParsedToolCall,
    TextDelta,
    ThinkingDelta,
    ToolCallError,
    make_parser,
    merge_deltas,
    parse_all,
)

MARKERS = (
    "<|tool_call>",
    "<tool_call|>",
    '<|"|>',
    "<|channel>",
    "<channel|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<|python_tag|>",
    "<|tool_response>",
    "<tool_response|>",
    "<|turn>",
    "<turn|>",
    "<eos>",
    "<bos>",
    "<|think|>",
    "<|im_end|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|image|>",
)
IDS = [c.id for c in CASES]


def normalise(events):
    """Expected ToolCallErrors are written as ("error", raw); compare those on raw only."""
    return [("error", e.raw) if isinstance(e, ToolCallError) else e for e in events]


def run_chunks(case: Case, chunks):
    parser = make_parser(case.fmt, thinking_forced_open=case.forced)
    raw_events = []
    for chunk in chunks:
        raw_events += parser.feed(chunk)
    raw_events += parser.close()
    return raw_events


def assert_clean(events):
    """No marker in any TextDelta (also across adjacent deltas); no empty or blank deltas."""
    for ev in events:
        if isinstance(ev, (TextDelta, ThinkingDelta)):
            assert ev.text.strip(), ev
        if isinstance(ev, TextDelta):
            for m in MARKERS:
                assert m not in ev.text, (m, ev)
    for ev in merge_deltas(events):
        if isinstance(ev, TextDelta):
            for m in MARKERS:
                assert m not in ev.text, (m, ev)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_recorded_reply(case: Case):
    got = parse_all(case.fmt, case.text, thinking_forced_open=case.forced)
    assert normalise(got) == case.expected
    assert_clean(got)
    for ev in got:
        if isinstance(ev, ToolCallError):
            assert ev.message and "\n" not in ev.message


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_split_position(case: Case):
    whole = parse_all(case.fmt, case.text, thinking_forced_open=case.forced)
    text = case.text
    for i in range(len(text) + 1):
        events = run_chunks(case, [text[:i], text[i:]])
        assert_clean(events)
        assert merge_deltas(events) == whole, f"split at {i}: {text[:i]!r} | {text[i:]!r}"
    events = run_chunks(case, list(text))
    assert_clean(events)
    assert merge_deltas(events) == whole, "one character at a time"


@pytest.mark.parametrize("case", [c for c in CASES if c.forced is not None], ids=lambda c: c.id)
def test_three_way_splits_sampled(case: Case):
    """Three chunks, cuts at every 7th x every 5th index: catches state carried over two feeds."""
    whole = parse_all(case.fmt, case.text, thinking_forced_open=case.forced)
    text = case.text
    for i in range(0, len(text) + 1, 7):
        for j in range(i, len(text) + 1, 5):
            events = run_chunks(case, [text[:i], text[i:j], text[j:]])
            assert merge_deltas(events) == whole, (i, j)


# ---------------------------------------------------------------------- latency


def test_text_is_emitted_promptly():
    p = make_parser("bolt")
    assert p.feed("Hello there, I am") == [TextDelta("Hello there, I am")]
    # trailing space waits for the next word (segment edges are trimmed), then comes with it
    assert p.feed(" the robot ") == [TextDelta(" the robot")]
    assert p.feed("and") == [TextDelta(" and")]


def test_only_a_possible_marker_prefix_is_held_back():
    p = make_parser("bolt")
    assert p.feed("I'll look.<|tool_") == [TextDelta("I'll look.")]
    assert p.feed("call>call:look{}<tool_call|>") == [
        ParsedToolCall("look", {}, "<|tool_call>call:look{}<tool_call|>")
    ]
    p = make_parser("bolt")
    assert p.feed("2 <") == [TextDelta("2")]
    assert p.feed(" 3, and a <x") == [TextDelta(" < 3, and a <x")]  # "<x" is no marker's prefix
    assert p.feed(" <b") == []  # may still become <bos>
    assert p.feed(">") == [TextDelta(" <b>")]


def test_llama3_text_not_starting_with_brace_is_not_held():
    p = make_parser("llama3")
    assert p.feed("Sure, the config is {") == [TextDelta("Sure, the config is {")]


def test_llama3_leading_brace_held_until_ruled_out():
    p = make_parser("llama3")
    assert p.feed('{"answer": 4') == []
    assert p.feed("2}") == [TextDelta('{"answer": 42}')]  # closed and not call-shaped: text
    p = make_parser("llama3")
    assert p.feed('{"name": "f", "parameters": {}}') == []  # call-shaped: is it the whole reply?
    assert p.feed(" ") == []
    assert p.feed("is an example") == [TextDelta('{"name": "f", "parameters": {}} is an example')]
    p = make_parser("llama3")
    assert p.feed('{"name": "f", "parameters": {}}') == []
    assert p.close() == [ParsedToolCall("f", {}, '{"name": "f", "parameters": {}}')]


def test_undecided_thinking_holds_until_a_tag():
    p = make_parser("bolt", thinking_forced_open=None)
    assert p.feed("Hello, how") == []
    assert p.feed(" are you?<|channel>thought\nhm") == [TextDelta("Hello, how are you?"), ThinkingDelta("hm")]
    p = make_parser("bolt", thinking_forced_open=None)
    assert p.feed("Hello, how") == []
    assert p.close() == [TextDelta("Hello, how")]


def test_default_parser_drops_a_lone_close_without_reclassifying():
    """With the low-latency default, text streams at once; a lone closing tag is just removed."""
    events = parse_all("bolt", "Thinking aloud. <channel|>Hi.", thinking_forced_open=False)
    assert events == [TextDelta("Thinking aloud. Hi.")]


# ---------------------------------------------------------------------- bad input details


def test_error_messages_are_clear():
    def only_error(fmt, text):
        errs = [e for e in parse_all(fmt, text) if isinstance(e, ToolCallError)]
        assert len(errs) == 1, errs
        return errs[0].message

    assert "unclosed tool call" in only_error("bolt", "<|tool_call>call:f{a:1}")
    assert "<tool_call|>" in only_error("bolt", "<|tool_call>call:f{a:1}")
    assert "unterminated" in only_error("bolt", '<|tool_call>call:f{a:<|"|>x}<tool_call|>')
    msg = only_error("bolt", "<|tool_call>call:f{unit:celsius}<tool_call|>")
    assert "celsius" in msg and '<|"|>' in msg
    assert "call:NAME" in only_error("bolt", "<|tool_call>f{}<tool_call|>")
    assert "after the arguments" in only_error("bolt", "<|tool_call>call:f{} extra<tool_call|>")
    assert "not valid JSON" in only_error("hermes", "<tool_call>{name: f, </tool_call>")
    assert "'name'" in only_error("hermes", '<tool_call>{"arguments": {}}</tool_call>')
    bad_args = '<tool_call>{"name": "f", "arguments": [1]}</tool_call>'
    assert "must be an object" in only_error("hermes", bad_args)


def test_parser_never_raises_on_garbage():
    junk = [
        "<|tool_call><|tool_call><tool_call|><tool_call|>",
        '<|tool_call>call:f{a:[{<|"|>}]}<tool_call|>',
        "<|tool_call>call:f{" + "[" * 500 + "<tool_call|>",
        "<tool_call>" + "[" * 5000 + "</tool_call>",
        "<|python_tag|>x.call(1, **k)",
        "<|python_tag|>x.call(a=__import__('os'))",
        "{" * 200,
        '{"name": "f", "parameters": {}} trailing prose',
        "</think></think><channel|><think><|channel>",
    ]
    for fmt in ("bolt", "hermes", "llama3", "none"):
        for text in junk:
            for forced in (False, True, None):
                events = parse_all(fmt, text, thinking_forced_open=forced)
                assert_clean(events)


def test_none_format_drops_call_markers():
    assert parse_all("none", "a <|tool_call>b<tool_call|> c<tool_call>d</tool_call><|python_tag|>e") == [
        TextDelta("a b cde")
    ]


def test_nothing_but_thinking_gives_no_text():
    for fmt in ("bolt", "hermes", "llama3", "none"):
        for text in ("<|channel>thought\nOnly thoughts.<channel|>", "<think>Only thoughts.</think>\n"):
            assert parse_all(fmt, text) == [ThinkingDelta("Only thoughts.")]


def test_feed_after_close_is_an_error_and_close_is_idempotent():
    p = make_parser("hermes")
    assert p.feed("hi <") == [TextDelta("hi")]
    assert p.close() == [TextDelta(" <")]
    assert p.close() == []
    with pytest.raises(RuntimeError):
        p.feed("more")


def test_unknown_format_name():
    with pytest.raises(ValueError, match="unknown tool-call format 'gemma'"):
        make_parser("gemma")
