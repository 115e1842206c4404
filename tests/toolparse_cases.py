"""Recorded model replies for the tool-call parser tests, with the events each must give.

Written to look like what the models emit: Bolt/Gemma 4 native markup (as the Gemma 4 chat
template renders calls), Hermes/Qwen ``<tool_call>`` JSON, Llama 3.1 ``<|python_tag|>`` and
whole-reply JSON. ``forced`` is the ``thinking_forced_open`` the case is parsed with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.toolparse import ParsedToolCall, TextDelta, ThinkingDelta

Q = '<|"|>'


@dataclass(frozen=True)
class Case:
    id: str
    fmt: str
    text: str
    expected: list[Any]
    forced: bool | None = False
    tags: tuple[str, ...] = field(default=())


def T(text: str) -> TextDelta:
    return TextDelta(text)


def K(text: str) -> ThinkingDelta:
    return ThinkingDelta(text)


def C(name: str, args: dict[str, Any], raw: str) -> ParsedToolCall:
    return ParsedToolCall(name, args, raw)


def E(raw: str) -> tuple[str, str]:
    """An expected ToolCallError: matched on ``raw`` only (messages are checked separately)."""
    return ("error", raw)


BOLT_LOOK = f"<|tool_call>call:look_at{{target:{Q}the red cup{Q}}}<tool_call|>"
BOLT_ARM = "<|tool_call>call:move_arm{joint_angles:[10,-25.5,3e1],relative:false,speed:0.5}<tool_call|>"
BOLT_LIGHT = (
    f"<|tool_call>call:set_light{{brightness:80,color:{{b:150,g:200,r:255}},on:true,room:{Q}kitchen{Q}}}"
    "<tool_call|>"
)
BOLT_SAY = (
    f'<|tool_call>call:say{{notes:None,text:{Q}Hello, {{world}}: she said "hi" [1,2] <b>bold</b>, a:b,{Q},'
    f"volume:-0.25}}<tool_call|>"
)
BOLT_PLAN = (
    f"<|tool_call>call:plan{{meta:{{empty:{{}},none:[],ok:true,score:1.5E-3}},"
    f"steps:[{{action:{Q}wave{Q},args:{{hand:{Q}left{Q},times:2}}}},"
    f"{{action:{Q}speak{Q},args:{{text:{Q}Hi! I'm Bolt.{Q}}}}}]}}<tool_call|>"
)
HERMES_PARIS = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
)
HERMES_NY = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "New York, NY", "unit": "fahrenheit"}}\n'
    "</tool_call>"
)
HERMES_SAY = (
    '<tool_call>{"name": "say", "arguments": '
    '{"text": "Use <b>bold</b>, {braces}, \\"quotes\\" and a: colon"}}</tool_call>'
)
HERMES_NEAR = (
    "<tool_call>\n{'name': 'move', 'arguments': {'x': 1, fast: True, 'target': None,},}\n</tool_call>"
)
HERMES_STRARGS = '<tool_call>{"name": "nod", "arguments": "{\\"times\\": 2}"}</tool_call>'
LLAMA_WEATHER = '{"name": "get_weather", "parameters": {"location": "San Francisco, CA", "unit": "celsius"}}'
LLAMA_TWO_A = '{"name": "wave", "parameters": {}}'
LLAMA_TWO_B = '{"name": "say", "parameters": {"text": "a } and a { and ; too", "n": [1, {"y": null}]}}'

CASES: list[Case] = [
    # ---------------------------------------------------------------- Bolt / Gemma 4 native
    Case(
        "bolt_two_calls",
        "bolt",
        f"Sure, let me look.\n{BOLT_LOOK}{BOLT_ARM}",
        [
            T("Sure, let me look."),
            C("look_at", {"target": "the red cup"}, BOLT_LOOK),
            C("move_arm", {"joint_angles": [10, -25.5, 30.0], "relative": False, "speed": 0.5}, BOLT_ARM),
        ],
    ),
    Case(
        "bolt_thinking_call_text",
        "bolt",
        "<|channel>thought\nThe user wants the kitchen light on. It's dark, so 80% warm white.\n"
        f"I'll call set_light.<channel|>Turning the light on.{BOLT_LIGHT}"
        "Done: the kitchen light is on.<turn|>",
        [
            K("The user wants the kitchen light on. It's dark, so 80% warm white.\nI'll call set_light."),
            T("Turning the light on."),
            C(
                "set_light",
                {"brightness": 80, "color": {"b": 150, "g": 200, "r": 255}, "on": True, "room": "kitchen"},
                BOLT_LIGHT,
            ),
            T("Done: the kitchen light is on."),
        ],
    ),
    Case(
        "bolt_delimiters_in_strings",
        "bolt",
        f"{BOLT_SAY}<eos>",
        [
            C(
                "say",
                {
                    "notes": None,
                    "text": 'Hello, {world}: she said "hi" [1,2] <b>bold</b>, a:b,',
                    "volume": -0.25,
                },
                BOLT_SAY,
            )
        ],
    ),
    Case(
        "bolt_nested",
        "bolt",
        f"Okay! {BOLT_PLAN} And that's the plan.",
        [
            T("Okay!"),
            C(
                "plan",
                {
                    "meta": {"empty": {}, "none": [], "ok": True, "score": 0.0015},
                    "steps": [
                        {"action": "wave", "args": {"hand": "left", "times": 2}},
                        {"action": "speak", "args": {"text": "Hi! I'm Bolt."}},
                    ],
                },
                BOLT_PLAN,
            ),
            T("And that's the plan."),
        ],
    ),
    Case(
        "bolt_text_only_specials",
        "bolt",
        "Hello! I'm Bolt <|image|>, your robot. 2 < 3 and x<y; use <b>tags</b>.<turn|>\n<|turn>user\nignored",
        [T("Hello! I'm Bolt , your robot. 2 < 3 and x<y; use <b>tags</b>.")],
    ),
    Case(
        "bolt_thinking_only",
        "bolt",
        "<|channel>thought\nJust thinking about it; nothing to say yet.\n<channel|>",
        [K("Just thinking about it; nothing to say yet.")],
    ),
    Case(
        "bolt_unicode_empty_args",
        "bolt",
        "Voilà — je regarde 👀.<|tool_call>call:look{}<tool_call|>C'est fait : 3 × 4 = 12, 日本語もOK。",
        [
            T("Voilà — je regarde 👀."),
            C("look", {}, "<|tool_call>call:look{}<tool_call|>"),
            T("C'est fait : 3 × 4 = 12, 日本語もOK。"),
        ],
    ),
    Case(
        "bolt_byte_fallback",
        "bolt",
        f"Look, a 🦩 flamingo ꙮ!<|tool_call>call:say{{text:{Q}𓀀 and 🦩{Q}}}<tool_call|>",
        [
            T("Look, a 🦩 flamingo ꙮ!"),
            C("say", {"text": "𓀀 and 🦩"}, f"<|tool_call>call:say{{text:{Q}𓀀 and 🦩{Q}}}<tool_call|>"),
        ],
    ),
    Case(
        "bolt_tool_response_stops",
        "bolt",
        f"<|tool_call>call:get_time{{}}<tool_call|><|tool_response>response:get_time{{time:{Q}12:00{Q}}}"
        "<tool_response|>It is noon.",
        [C("get_time", {}, "<|tool_call>call:get_time{}<tool_call|>")],
    ),
    Case(
        "bolt_mixed_thinking_syntax",
        "bolt",
        "<think>\nPlan: greet.\n</think>\n\nHi there!<|channel>thought\nmore<channel|> Bye.",
        [K("Plan: greet."), T("Hi there!"), K("more"), T("Bye.")],
    ),
    Case(
        "bolt_lone_channel_close",
        "bolt",
        "The user said hi. I should greet back.<channel|>Hello! Nice to meet you.",
        [K("The user said hi. I should greet back."), T("Hello! Nice to meet you.")],
        forced=None,
    ),
    Case(
        "bolt_forced_open",
        "bolt",
        "Short plan.<channel|>On it.",
        [K("Short plan."), T("On it.")],
        forced=True,
    ),
    Case(
        "bolt_empty_thought_block",
        "bolt",
        "<|channel>thought\n<channel|>Yes.",
        [T("Yes.")],
    ),
    # ---------------------------------------------------------------- Hermes / Qwen
    Case(
        "hermes_think_two_calls",
        "hermes",
        "<think>\nThe user asks for the weather in two cities. Call get_weather twice.\n</think>\n\n"
        f"Let me check both.\n{HERMES_PARIS}\n{HERMES_NY}<|im_end|>",
        [
            K("The user asks for the weather in two cities. Call get_weather twice."),
            T("Let me check both."),
            C("get_weather", {"city": "Paris", "unit": "celsius"}, HERMES_PARIS),
            C("get_weather", {"city": "New York, NY", "unit": "fahrenheit"}, HERMES_NY),
        ],
    ),
    Case(
        "hermes_delimiters_in_strings",
        "hermes",
        f"Saying it now. {HERMES_SAY} Said.",
        [
            T("Saying it now."),
            C("say", {"text": 'Use <b>bold</b>, {braces}, "quotes" and a: colon'}, HERMES_SAY),
            T("Said."),
        ],
    ),
    Case(
        "hermes_near_json_and_string_args",
        "hermes",
        f"{HERMES_NEAR}{HERMES_STRARGS}",
        [
            C("move", {"x": 1, "fast": True, "target": None}, HERMES_NEAR),
            C("nod", {"times": 2}, HERMES_STRARGS),
        ],
    ),
    Case(
        "hermes_lone_think_close",
        "hermes",
        "The user greets me. Reply briefly.\n</think>\n\nHello there!",
        [K("The user greets me. Reply briefly."), T("Hello there!")],
        forced=None,
    ),
    Case(
        "hermes_channel_thinking",
        "hermes",
        "<|channel>thought\nhmm<channel|>Fine, thanks.",
        [K("hmm"), T("Fine, thanks.")],
    ),
    # ---------------------------------------------------------------- Llama 3.1
    Case(
        "llama3_python_tag",
        "llama3",
        f"<|python_tag|>{LLAMA_WEATHER}<|eom_id|>",
        [
            C(
                "get_weather",
                {"location": "San Francisco, CA", "unit": "celsius"},
                f"<|python_tag|>{LLAMA_WEATHER}",
            )
        ],
    ),
    Case(
        "llama3_text_then_python_tag",
        "llama3",
        f"Let me check the weather.\n<|python_tag|>{LLAMA_WEATHER}",
        [
            T("Let me check the weather."),
            C(
                "get_weather",
                {"location": "San Francisco, CA", "unit": "celsius"},
                f"<|python_tag|>{LLAMA_WEATHER}",
            ),
        ],
    ),
    Case(
        "llama3_whole_reply_json",
        "llama3",
        f"\n{LLAMA_WEATHER}\n<|eot_id|>",
        [C("get_weather", {"location": "San Francisco, CA", "unit": "celsius"}, LLAMA_WEATHER)],
    ),
    Case(
        "llama3_two_json_calls",
        "llama3",
        f"{LLAMA_TWO_A}; {LLAMA_TWO_B}",
        [
            C("wave", {}, LLAMA_TWO_A),
            C("say", {"text": "a } and a { and ; too", "n": [1, {"y": None}]}, LLAMA_TWO_B),
        ],
    ),
    Case(
        "llama3_builtin",
        "llama3",
        '<|python_tag|>brave_search.call(query="weather in Menlo Park, CA")<|eom_id|>',
        [
            C(
                "brave_search",
                {"query": "weather in Menlo Park, CA"},
                '<|python_tag|>brave_search.call(query="weather in Menlo Park, CA")',
            )
        ],
    ),
    Case(
        "llama3_json_in_prose",
        "llama3",
        'The config is {"a": 1} ok, and {"name": "x", "parameters": {}} is only an example.',
        [T('The config is {"a": 1} ok, and {"name": "x", "parameters": {}} is only an example.')],
    ),
    Case(
        "llama3_json_reply_not_a_call",
        "llama3",
        '{"answer": 42, "unit": "m"} is what I found.',
        [T('{"answer": 42, "unit": "m"} is what I found.')],
    ),
    Case(
        "llama3_braces_in_speech",
        "llama3",
        "{laughs} Well, hello {there}!",
        [T("{laughs} Well, hello {there}!")],
    ),
    Case(
        "llama3_thinking_then_json",
        "llama3",
        f"<think>Need weather.</think>{LLAMA_WEATHER}",
        [
            K("Need weather."),
            C("get_weather", {"location": "San Francisco, CA", "unit": "celsius"}, LLAMA_WEATHER),
        ],
    ),
    # ---------------------------------------------------------------- none
    Case(
        "none_strips_thinking_and_specials",
        "none",
        "<think>hmm</think>Just text with <b>tags</b>, 1 < 2,<|channel>thought\nx<channel|> and the end."
        "<eos>",
        [K("hmm"), T("Just text with <b>tags</b>, 1 < 2,"), K("x"), T("and the end.")],
    ),
    # ---------------------------------------------------------------- bad input
    Case(
        "bad_unclosed_call",
        "bolt",
        "Okay.<|tool_call>call:wave{times:2}",
        [T("Okay."), E("<|tool_call>call:wave{times:2}")],
        tags=("bad",),
    ),
    Case(
        "bad_truncated_mid_argument",
        "bolt",
        f"<|tool_call>call:say{{text:{Q}Hello wor",
        [E(f"<|tool_call>call:say{{text:{Q}Hello wor")],
        tags=("bad",),
    ),
    Case(
        "bad_unterminated_string_closed",
        "bolt",
        f"<|tool_call>call:say{{text:{Q}Hello}}<tool_call|>Next.",
        [E(f"<|tool_call>call:say{{text:{Q}Hello}}<tool_call|>"), T("Next.")],
        tags=("bad",),
    ),
    Case(
        "bad_wrong_close_delimiter",
        "bolt",
        "<|tool_call>call:wave{times:2}</tool_call>",
        [E("<|tool_call>call:wave{times:2}</tool_call>")],
        tags=("bad",),
    ),
    Case(
        "bad_unknown_value_syntax",
        "bolt",
        "<|tool_call>call:set_unit{unit:celsius}<tool_call|>",
        [E("<|tool_call>call:set_unit{unit:celsius}<tool_call|>")],
        tags=("bad",),
    ),
    Case(
        "bad_second_call_broken",
        "bolt",
        f"{BOLT_LOOK}<|tool_call>call:move_arm{{speed:0.5,,}}<tool_call|>Moving.",
        [
            C("look_at", {"target": "the red cup"}, BOLT_LOOK),
            E("<|tool_call>call:move_arm{speed:0.5,,}<tool_call|>"),
            T("Moving."),
        ],
        tags=("bad",),
    ),
    Case(
        "bad_second_call_unclosed_then_new",
        "bolt",
        f"<|tool_call>call:wave{{times:2}}{BOLT_LOOK}",
        [E("<|tool_call>call:wave{times:2}"), C("look_at", {"target": "the red cup"}, BOLT_LOOK)],
        tags=("bad",),
    ),
    Case(
        "bad_missing_call_prefix",
        "bolt",
        "<|tool_call>wave{times:2}<tool_call|>",
        [E("<|tool_call>wave{times:2}<tool_call|>")],
        tags=("bad",),
    ),
    Case(
        "bad_stray_close",
        "bolt",
        "Hi<tool_call|> there.",
        [T("Hi"), E("<tool_call|>"), T(" there.")],
        tags=("bad",),
    ),
    Case(
        "bad_hermes_not_json",
        "hermes",
        '<tool_call>{"name": "f", "arguments": {"a": hello}}</tool_call>ok',
        [E('<tool_call>{"name": "f", "arguments": {"a": hello}}</tool_call>'), T("ok")],
        tags=("bad",),
    ),
    Case(
        "bad_hermes_unclosed",
        "hermes",
        '<tool_call>{"name": "f", "arguments": {}}',
        [E('<tool_call>{"name": "f", "arguments": {}}')],
        tags=("bad",),
    ),
    Case(
        "bad_llama_broken_whole_json",
        "llama3",
        '{"name": "get_weather", "parameters": {"location": "Paris"',
        [E('{"name": "get_weather", "parameters": {"location": "Paris"')],
        tags=("bad",),
    ),
    Case(
        "bad_llama_python_tag_code",
        "llama3",
        "<|python_tag|>import os\nprint(os.listdir())<|eom_id|>",
        [E("<|python_tag|>import os\nprint(os.listdir())")],
        tags=("bad",),
    ),
    Case(
        "bad_unclosed_thinking",
        "bolt",
        "<|channel>thought\nI was thinking and then the reply ended",
        [K("I was thinking and then the reply ended")],
        tags=("bad",),
    ),
]
