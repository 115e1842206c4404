"""In-process sampling: the lazy grammar check gives what llama.cpp's full grammar pass gives.

The embedded SmolLM2-135M with the product's own reply grammar (:mod:`agent.conversation.toolgrammar`):
greedy output through :meth:`ChatModel.stream` (:class:`agent.engines.embedded.sampling.TokenSampler`) must be
token for token what llama-cpp-python's ``create_completion`` (grammar over the whole
vocabulary at every step) writes, up to a tie (:data:`TIE_LOGITS`: the stream evaluates text the
grammar forces in one batch, the reference token by token, and the last bits of the logits
differ), and the grammar must still hold where the model's own first choice breaks it.
"""

from __future__ import annotations

import json
import time

import pytest

from agent.config import load_config
from agent.conversation.rounds import REPLY_OPENING, SAY_OPENING, forced_openings
from agent.conversation.toolgrammar import parse_reply, reply_schema, tools_prompt
from agent.engines import Decoding, Generation, LLMError, Thinking
from agent.engines.embedded.compile import jump_forward
from agent.engines.embedded.model import ChatModel, _TextStream
from agent.engines.grammar import gbnf_from_schema
from agent.models import resolve_model
from agent.skills import load_registry

COMMANDS = ("wave your right hand", "what time is it", "look to the left", "tell me a short joke")


@pytest.fixture(scope="module")
def model():
    cfg = load_config().llm.model_copy(update={"temperature": 0.0, "threads": 2})
    return ChatModel(resolve_model(cfg.model), cfg)


SKILLS = list(load_registry([], entry_points=False).skills.values())
OPENINGS = forced_openings(SKILLS, read_from_words=True)  # the small profile: place is read from the words


@pytest.fixture(scope="module")
def grammar():
    """The reply grammar as GBNF text, and the tools prompt."""
    return gbnf_from_schema(reply_schema(SKILLS)), tools_prompt(SKILLS)


def _prompt(model, tools, text):
    return model.render(
        [{"role": "system", "content": "You are a robot.\n" + tools}, {"role": "user", "content": text}]
    )


def _reference(model, prompt, grammar, max_tokens=80):
    """What llama-cpp-python's own create_completion writes: grammar over the whole vocabulary."""
    from llama_cpp import LlamaGrammar

    out = []
    for chunk in model.llm.create_completion(
        model.tokenize(prompt),
        max_tokens=max_tokens,
        temperature=0.0,
        repeat_penalty=model.cfg.repeat_penalty,
        stream=True,
        grammar=LlamaGrammar.from_string(grammar, verbose=False),
    ):
        out.append(chunk["choices"][0]["text"])
    return "".join(out)


TIE_LOGITS = 0.35
"""Two tokens whose logits differ by less than this tie: which one greedy decoding takes depends
on how the prompt was split into batches (measured: "!" 18.783 against "." 18.755 after "Hello,
I'm a robot" once ``nod`` took a count; the KV cache of the stream and of a one-batch evaluation
differ in the last bits). Measured again once ``cancel_timer`` joined the tools (2026-12-05): " a"
against " not" after "tell me a short joke" → ``"say": "I'm``, evaluated in every split of the
reply's 17 tokens into two batches and then one token at a time: the difference ran from -0.08
to +0.27 (0.15 in one batch)."""


def _tie_margin(model, prompt, ref, ours):
    """|logit difference| of the first tokens where ``ours`` and ``ref`` part, after their common tokens.

    The common tokens are evaluated in one batch after the prompt; the repetition penalty the
    sampler applies (llama.cpp's: a positive logit divided, over the generated tokens) is applied.
    """
    import llama_cpp
    import numpy as np

    a, b = (model.llm.tokenize(t.encode(), add_bos=False, special=False) for t in (ref, ours))
    k = next(i for i in range(min(len(a), len(b)) + 1) if i == min(len(a), len(b)) or a[i] != b[i])
    assert k < min(len(a), len(b)), (ref, ours)  # one is not a prefix of the other
    llm = model.llm
    llm.reset()
    llm.eval(model.tokenize(prompt) + a[:k])
    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    logits = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).copy()
    seen = set(a[:k][-64:])

    def penalized(tok):
        x = float(logits[tok])
        return x / model.cfg.repeat_penalty if tok in seen and x > 0 else x

    llm.reset()
    return abs(penalized(a[k]) - penalized(b[k]))


@pytest.mark.parametrize("text", COMMANDS)
def test_greedy_lazy_grammar_equals_the_full_grammar_pass(model, grammar, text):
    g, tools = grammar
    prompt = _prompt(model, tools, text)
    t0 = time.perf_counter()
    ref = _reference(model, prompt, g)
    t_ref = time.perf_counter() - t0
    gen = Generation()
    t0 = time.perf_counter()
    ours = "".join(model.stream(Decoding(prompt, grammar=g, max_tokens=80, temperature=0.0), gen))
    t_ours = time.perf_counter() - t0
    if ours != ref:  # only where the two greedy choices tie (the logits of a batch are not bitwise)
        margin = _tie_margin(model, prompt, ref, ours)
        assert margin < TIE_LOGITS, (margin, ours, ref)
    say, calls, problem = parse_reply(ours)
    assert not problem and (say or calls)
    # the slow path is the exception: most tokens are the model's own first choice
    assert gen.extra["grammar_full_passes"] < gen.completion_tokens / 2, (gen.extra, gen.completion_tokens)
    ms = f"full grammar {t_ref * 1000:.0f} ms, lazy {t_ours * 1000:.0f} ms"
    print(f"{text!r}: {gen.completion_tokens} tokens, {ms}")


def test_forced_opening_is_evaluated_with_the_prompt_and_yielded_first(model, grammar):
    g, tools = grammar
    prompt = _prompt(model, tools, "wave your right hand")
    gen = Generation()
    pieces = list(
        model.stream(Decoding(prompt, grammar=g, max_tokens=80, temperature=0.0, prefix=REPLY_OPENING), gen)
    )
    assert pieces[0] == REPLY_OPENING
    text = "".join(pieces)
    assert text == gen.text and text.startswith(REPLY_OPENING)
    say, calls, problem = parse_reply(text)
    assert not problem and (say or calls), text
    # the opening was evaluated with the prompt, not generated token by token
    n_opening = len(model.llm.tokenize(REPLY_OPENING.encode(), add_bos=False, special=False))
    n_text = len(model.llm.tokenize(text.encode(), add_bos=False, special=False))
    assert gen.prompt_tokens >= n_opening
    assert gen.completion_tokens <= n_text - n_opening + 2  # +2: re-tokenizing may merge differently


NONE_TAIL = 'e"}, "say": "'
"""What the openings force once a tool round has written ``non`` (``n`` and ``no`` may still be ``nod``)."""


def _round(prompt, g, forced=(), max_tokens=80):
    return Decoding(
        prompt, grammar=g, max_tokens=max_tokens, temperature=0.0, prefix=REPLY_OPENING, forced=forced
    )


def test_forced_text_after_none_is_evaluated_with_the_token_that_chose_it(model, grammar):
    """Jump-forward: once the reply chose no tool, ``e"}, "say": "`` costs no decode steps."""
    g, tools = grammar
    prompt = _prompt(model, tools, "tell me a short joke")
    plain, jumped = Generation(), Generation()
    ref = "".join(model.stream(_round(prompt, g), plain))
    assert ref.startswith(REPLY_OPENING + SAY_OPENING), ref  # greedy, the model chooses to talk
    pieces = list(model.stream(_round(prompt, g, OPENINGS), jumped))
    text = "".join(pieces)
    forced = [p for p in pieces if p.endswith('"}, "say": "')]
    assert forced and NONE_TAIL.endswith(forced[0]), pieces  # yielded as one piece
    say, calls, problem = parse_reply(text)
    assert not problem and not calls and say, text
    n_forced = len(model.plain_tokens(forced[0]))
    assert jumped.extra["jump_tokens"] == n_forced >= 3
    # the forced tokens cost no decode steps: counted on the jumped reply's own text, since a
    # batch-evaluated stretch may round differently and change a later greedy token (seen with
    # flash attention: "I can't talk. ..." against "I can only speak ...")
    n_opening = len(model.plain_tokens(REPLY_OPENING))
    n_text = len(model.plain_tokens(text))
    assert jumped.completion_tokens <= n_text - n_opening - n_forced + 2, (text, ref)
    # the same first word, up to where a token boundary fell ("I" + "'m" vs "I'm")
    first, ref_first = say.split()[0], parse_reply(ref)[0].split()[0]
    assert first.startswith(ref_first) or ref_first.startswith(first), (say, ref)


def test_forced_text_is_handed_out_before_it_is_evaluated(model, grammar):
    """A call the forced text completes can start while the batch that evaluates it runs."""
    g, tools = grammar
    prompt = _prompt(model, tools, "tell me a short joke")
    stream = model.stream(_round(prompt, g, OPENINGS, max_tokens=40), Generation())
    cached = [(piece, model.llm.n_tokens) for piece in stream]  # KV cache length as each piece arrives
    at = next(i for i, (p, _) in enumerate(cached) if p.endswith('"}, "say": "'))
    n_forced = len(model.plain_tokens(cached[at][0]))
    # When the forced piece arrived, neither it nor the token before it was in the KV cache yet;
    # the next piece came after both were evaluated in one batch.
    assert cached[at + 1][1] >= cached[at][1] + n_forced + 1, cached


def test_a_jump_the_grammar_rejects_is_generated_instead(model, grammar, caplog):
    g, tools = grammar
    prompt = _prompt(model, tools, "tell me a short joke")
    ref = "".join(model.stream(_round(prompt, g), Generation()))
    gen = Generation()
    # '"}, "' is allowed, '"]' is not: the check covers the whole text, not its first token
    bad = (REPLY_OPENING + 'none"}, "say"]', REPLY_OPENING + 'nod", "arguments": {}}}')
    with caplog.at_level("WARNING", logger="agent.engines.embedded.model"):
        text = "".join(model.stream(_round(prompt, g, bad), gen))
    assert text == ref  # nothing of the rejected text was accepted
    assert "jump_tokens" not in gen.extra
    assert "does not allow the forced text" in caplog.text


def test_forced_text_after_each_tool_name():
    jump = jump_forward(OPENINGS)
    cases = {
        "none": '"}, "say": "',
        "get_time": '", "arguments": {}}}',  # no arguments: the call is complete
        "wave": '", "arguments": {',  # only optional arguments: the model decides
        "set_timer": '", "arguments": {"seconds": ',  # a required number
        "play_animation": '", "arguments": {"name": "',  # a required string
        "look": "",  # may still become look_at
        'look"': ', "arguments": {',
        "look_at": '", "arguments": {',
        "get_ti": 'me", "arguments": {}}}',  # no other name starts so: the rest is forced
        "d": "",  # dance or describe_scene
        "da": 'nce", "arguments": {}}}',
        "de": 'scribe_scene", "arguments": {}}}',
        "s": "",  # set_timer or stop
        "lo": "",  # look or look_at
        "n": "",  # nod or none
        "no": "",
        "non": 'e"}, "say": "',
        'nod", "': 'arguments": {',  # only optional arguments (times)
        'nod", "arguments": {}}}': "",
    }
    for written, forced in cases.items():
        assert jump(REPLY_OPENING + written) == forced, written
    assert jump("not a reply") == ""
    assert jump_forward(()) is None
    for written, forced in cases.items():  # every forced text is valid reply JSON once finished
        if forced.endswith("}}}"):
            assert json.loads(REPLY_OPENING + written + forced)["call"]["arguments"] == {}


def test_a_speech_only_round_starts_at_the_first_word(model):
    """Without tools the whole opening up to ``"say": "`` is forced, evaluated with the prompt."""
    g = gbnf_from_schema(reply_schema([], allow_tools=False))
    prompt = _prompt(model, tools_prompt([]), "tell me a short joke")
    gen = Generation()
    opening = REPLY_OPENING + SAY_OPENING
    pieces = list(
        model.stream(Decoding(prompt, grammar=g, max_tokens=60, temperature=0.0, prefix=opening), gen)
    )
    assert pieces[0] == opening
    say, calls, problem = parse_reply("".join(pieces))
    assert not problem and not calls and say


def test_a_prefix_the_grammar_rejects_is_an_error(model, grammar):
    g, tools = grammar
    with pytest.raises(LLMError, match="forced prefix"):
        list(
            model.stream(
                Decoding(_prompt(model, tools, "hi"), grammar=g, prefix='["not an object'), Generation()
            )
        )


def test_an_invalid_grammar_is_an_error(model):
    with pytest.raises(LLMError, match="rejected the grammar"):
        list(model.stream(Decoding("hi", grammar="root ::= nothing-defined"), Generation()))


def test_the_grammar_wins_over_a_processor_that_masks_everything_it_allows(model, grammar):
    """A thinking budget forcing its closing marker where the grammar wants JSON gives way."""
    g, tools = grammar
    # A budget of 0 thinking tokens, the block open: the budget masks every token but its
    # closing marker's from the first one on, and the reply grammar allows that marker nowhere.
    spent = Thinking(max_tokens=0, max_ms=1000.0, starts_inside=True)
    gen = Generation()
    text = "".join(
        model.stream(
            Decoding(_prompt(model, tools, "nod"), grammar=g, max_tokens=80, temperature=0.0, thinking=spent),
            gen,
        )
    )
    assert text.lstrip().startswith("{") and not parse_reply(text)[2], text
    assert gen.extra["grammar_full_passes"] >= 1
    assert gen.extra["thinking"].forced


def test_sampling_at_a_temperature_stays_inside_the_grammar(model, grammar):
    g, tools = grammar
    for seed_text in COMMANDS:
        gen = Generation()
        text = "".join(
            model.stream(
                Decoding(_prompt(model, tools, seed_text), grammar=g, max_tokens=300, temperature=0.8), gen
            )
        )
        assert gen.finish_reason == "stop", text
        assert not parse_reply(text)[2], text


def test_a_raw_newline_in_say_is_still_a_reply():
    """The grammar lets raw control characters into strings; strict JSON would drop the reply."""
    say, calls, problem = parse_reply('{"call": {"tool": "none"}, "say": "One.\n\nTwo."}')
    assert not problem and say == "One.\n\nTwo." and calls == []


def test_stop_strings_end_the_text_and_are_not_emitted():
    ts = _TextStream(["</s>", "User:"])
    out = []
    for piece in ["Hello", " Us", "e", "r", ":", " more"]:
        text, stopped = ts.feed(piece.encode())
        out.append(text)
        if stopped:
            break
    assert "".join(out) == "Hello " and ts.stopped and ts.flush() == ""
    ts = _TextStream(["User:"])
    assert ts.feed(b"a Us") == ("a ", False)
    assert ts.flush() == "Us"  # a partial stop string at the end is text after all
    # bytes of one character split over two tokens come out whole
    ts = _TextStream([])
    e = "é".encode()
    assert ts.feed(e[:1]) == ("", False) and ts.feed(e[1:]) == ("é", False)


def test_a_drafted_tool_result_gives_the_same_reply_in_fewer_decode_steps(model, monkeypatch):
    """Prompt-lookup drafting (greedy): a right draft is taken in batches, a wrong one costs
    only time; the reply is exactly what decoding one token at a time writes."""
    result = "It is 19:21 on Tuesday 1 December."
    prompt = model.render(
        [
            {"role": "system", "content": "You are a robot. Tell the user the tool result."},
            {"role": "user", "content": "What time is it?"},
            {"role": "user", "content": f'Result of get_time: "{result}"'},
        ]
    )
    decodes: list[int] = []
    run = model._decoder.run

    def counting(fn, *args):
        decodes.append(1)
        return run(fn, *args)

    monkeypatch.setattr(model._decoder, "run", counting)

    def reply(copy_from, bonus, draft):
        gen, decodes[:] = Generation(), []
        request = Decoding(
            prompt,
            temperature=0.0,
            max_tokens=24,
            prefix="It is",
            copy_from=copy_from,
            copy_bonus=bonus,
            draft=draft,
        )
        pieces = model.stream(request, gen)
        return "".join(pieces), gen, len(decodes)

    plain, plain_gen, plain_steps = reply((result,), 3.0, False)
    assert plain.startswith(result), plain  # the model copies the result (the copy prior's job)
    drafted, gen, steps = reply((result,), 3.0, True)
    assert drafted == plain and gen.completion_tokens == plain_gen.completion_tokens
    assert gen.draft_accepted >= 8 and gen.draft_acceptance == 1.0, gen
    assert steps <= plain_steps - 7, (steps, plain_steps)
    # A draft from a text the reply does not follow (and no copy prior): the same reply as none.
    unbiased, _, _ = reply((), 0.0, False)
    misleading = ("It is 19:21 and the moon is made of cheese, said the robot.",)
    wrong, wrong_gen, _ = reply(misleading, 0.0, True)
    assert (
        wrong == unbiased and wrong_gen.draft_tokens > 0 and wrong_gen.draft_accepted < wrong_gen.draft_tokens
    )
    # Sampling at a temperature draws: nothing is drafted there.
    warm = Generation()
    list(model.stream(Decoding(prompt, temperature=0.7, max_tokens=8, copy_from=(result,), draft=True), warm))
    assert warm.draft_tokens == 0
