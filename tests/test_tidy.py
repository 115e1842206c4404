"""Between turns: the context is compacted ahead of need and read into the KV cache.

A compaction makes the model evaluate everything it keeps again; in the 698-turn soak that
was 1,909 tokens (10 s on 2 cores) inside one turn in 25. These tests run the real
SmolLM2-135M through llama.cpp: a stoppable prefill keeps what it read, a tidied
conversation compacts before the turn that would have, and the turn driver tidies only while
the floor is free.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from rig import AgentRig, DriverThread

from agent.config import LLMConfig, load_config
from agent.conversation import Conversation, Tidied
from agent.conversation.context import SUMMARY_KEY
from agent.conversation.history import assistant_message
from agent.engines import Decoding
from agent.engines.embedded import vendor
from agent.engines.embedded.model import PREFILL_CHUNK_TOKENS, ChatModel
from agent.events import ContextTidied, TurnGenerated, UserTurn
from agent.models import resolve_model
from agent.skills import SkillContext, load_registry
from hardware.factory import build_robot

STORY = (
    "Yesterday I walked to the harbour, counted eleven red boats, bought bread at the corner "
    "bakery, met my neighbour who told me about her garden, her tomatoes and her two cats, and "
    "then I came home and read a long book about lighthouses until it was dark outside. "
)


@pytest.fixture(scope="module")
def ctx():
    robot, _ = build_robot(load_config().robot)
    return SkillContext(robot=robot)


def make(ctx, n_ctx: int = 4096, **kw) -> Conversation:
    cfg = LLMConfig(n_ctx=n_ctx, temperature=0.0, max_tokens=64, **kw)
    return Conversation(ChatModel(resolve_model(cfg.model), cfg), load_registry([]), ctx, cfg)


def old_turns(n: int) -> list[dict]:
    """``n`` spoken exchanges of 84 tokens each (the prompt is 432 + 84 n), as a long conversation leaves."""
    out: list[dict] = []
    for i in range(n):
        out += [
            {"role": "user", "content": f"Story number {i}: {STORY}"},
            assistant_message(f"What a day, number {i}! I like boats and lighthouses too.", []),
        ]
    return out


def test_a_stopped_prefill_keeps_what_it_read_and_the_turn_gives_the_same_reply(ctx):
    conv = make(ctx)
    conv.warmup()
    model = conv.model
    assert isinstance(model, ChatModel)
    conv.history = old_turns(3)
    prompt = conv.render()
    asked = 0

    def after_two_chunks() -> bool:
        nonlocal asked
        asked += 1
        return asked > 2

    first = model.prefill(Decoding(prompt), after_two_chunks)
    assert first == 2 * PREFILL_CHUNK_TOKENS  # stopped between chunks, not inside one
    rest = model.prefill(Decoding(prompt), lambda: False)
    total = model.count_tokens(prompt)
    assert rest > 100 and first + rest < total  # the rest only: the warm-up's prefix was cached too
    assert model.prefill(Decoding(prompt), lambda: False) == 0  # all of it is cached now
    assert model.prefill(Decoding(prompt + "x"), lambda: True) == 0  # stopped before any chunk

    # Evaluating in chunks changes nothing in what the model says (greedy).
    conv.history = old_turns(3)
    chunked = conv.turn("Which colour were the boats?", 0)
    fresh = make(ctx)
    fresh.history = old_turns(3)
    whole = fresh.turn("Which colour were the boats?", 0)
    assert chunked.text == whole.text and (chunked.calls, chunked.text) != ([], "")
    assert chunked.prompt_tokens < whole.prompt_tokens / 5  # the history came from the cache


def test_a_prefill_makes_way_for_a_round_that_waits_for_the_model(ctx):
    conv = make(ctx)
    conv.warmup()
    model = conv.model
    conv.history = old_turns(12)  # about 1,000 tokens past the cached prefix: seconds to read
    prompt = conv.render()
    out: list[int] = []
    reading = threading.Thread(target=lambda: out.append(model.prefill(Decoding(prompt), lambda: False)))
    reading.start()
    time.sleep(0.5)  # the prefill is a chunk or two in
    t0 = time.perf_counter()
    reply = model.complete(Decoding(conv.prompter.render([{"role": "user", "content": "Hi."}]), max_tokens=4))
    waited = time.perf_counter() - t0
    reading.join(30)
    assert reply.text and out and PREFILL_CHUNK_TOKENS <= out[0] < 600, out  # stopped, not finished
    assert waited < 3.0, waited  # one chunk and the round itself, not the whole history


def test_tidy_compacts_before_the_turn_that_would_have_and_keeps_it_short(ctx):
    conv = make(ctx, n_ctx=2048, history_keep_tokens=200)
    conv.warmup()
    system = conv.model.count_tokens(conv.render())
    conv.history = old_turns(16)  # 84 tokens each: over the budget less one turn's headroom
    done = conv.tidy()
    assert done.dropped >= 12 and done.complete, done
    assert conv.history[0].get(SUMMARY_KEY) and '"Story number' in conv.history[0]["content"]
    kept = conv.model.count_tokens(conv.render()) - system
    assert kept <= 200 + 40, kept  # the kept history (plus the summary line) is what was asked for
    assert done.evaluated >= kept - 5  # ... and it is in the KV cache now
    res = conv.turn("Tell me a joke.", 0)
    # The turn compacted nothing and evaluated only its own words and the template around them.
    assert res.prompt_tokens <= conv.model.count_tokens("Tell me a joke.") + 20 < kept, res.prompt_tokens
    assert conv.tidy(lambda: True).complete is False  # a stop before the first chunk: nothing read
    again = conv.tidy()
    assert again.dropped == 0 and again.complete  # under the threshold: nothing more to drop


def test_the_driver_tidies_while_the_floor_is_free_stops_when_the_user_speaks_and_goes_on():
    cfg = load_config()
    cfg.llm.n_ctx = 2048
    cfg.llm.history_keep_tokens = 600
    cfg.llm.cache_reuse = 0  # read the kept turns again (seconds), as an engine that cannot shift
    rig = AgentRig(cfg)
    core = rig.core
    core.conversation.history = old_turns(13)  # fits one more turn, not one more with headroom
    try:
        with DriverThread(core) as d:
            first = core.gate.new_turn()
            d.work.started()
            d.inbox.put(UserTurn(first, "Wave your right hand."))
            assert not d.wait_for(TurnGenerated, 1)[0].prompt_tokens < 500  # it read the long history
            assert not core.conversation.history[0].get(SUMMARY_KEY)  # the turn fit without compacting
            d.work.turn_over(first)  # its reply was spoken: the floor is free
            d.work.finished()
            time.sleep(0.8)  # the driver compacts, then reads the kept turns (~600 tokens, seconds)
            d.work.user_speaking = True  # the user starts talking: the model and the CPU are left alone
            stopped = d.wait_for(ContextTidied, 1, 5)[0]
            assert stopped.dropped >= 5 and not stopped.complete, stopped
            assert stopped.evaluated < 500, stopped  # stopped a chunk after the user spoke, not at the end
            assert core.conversation.history[0].get(SUMMARY_KEY)
            d.work.user_speaking = False  # ... and went quiet again without a turn: it goes on
            rest = d.wait_for(ContextTidied, 2, 60)[1]
            assert rest.dropped == 0 and rest.complete and rest.evaluated > 0, rest
            second = core.gate.new_turn()
            d.work.started()
            d.inbox.put(UserTurn(second, "Wave your left hand."))  # one round
            turns = d.wait_for(TurnGenerated, 2)
    finally:
        rig.close()
    # The next turn compacted nothing and read only its words, the state line and the template.
    words = core.conversation.model.count_tokens("Wave your left hand.")
    assert turns[1].prompt_tokens <= words + 40, turns[1]


def compacted(ctx) -> tuple[Conversation, ChatModel, Tidied]:
    """A 16-turn conversation read into the KV cache, then compacted between turns (n_ctx 2048)."""
    conv = make(ctx, n_ctx=2048, history_keep_tokens=200)
    conv.warmup()
    model = conv.model
    assert isinstance(model, ChatModel)
    conv.history = old_turns(16)
    assert model.prefill(Decoding(conv.render())) > 1000  # the long history is in the cache
    return conv, model, conv.tidy()


def read_afresh(model: ChatModel, prompt: str):
    """Next-token logits of ``prompt`` read from scratch by a second copy of the model, in order."""
    fresh = ChatModel(resolve_model(model.cfg.model), LLMConfig(n_ctx=2048, cache_reuse=0))
    try:
        return fresh.next_token_logits(prompt)
    finally:
        fresh.close()


def test_a_compaction_moves_the_kept_turns_in_the_kv_cache_instead_of_reading_them_again(ctx):
    conv, model, done = compacted(ctx)
    assert done.dropped >= 12 and done.complete, done
    summary = model.count_tokens(conv.history[0]["content"])
    # Only the summary line (and the template around it) was evaluated: the kept turns moved.
    assert done.evaluated <= summary + 30, (done.evaluated, summary)
    # The cache holds exactly the prompt's tokens, at their own positions.
    assert vendor.cached_positions(model.llm) == (0, model.llm.n_tokens - 1)
    assert model.prefill(Decoding(conv.render())) <= 5  # only the template's opening is left to read

    # The moved cells were computed after the dropped turns, and the summary is read after them:
    # an approximation. The next token is still the one a model that read the prompt from
    # scratch would pick (the distributions differ: KL 1.9 nats here, mostly the stale cells).
    question = [*conv.history, {"role": "user", "content": "Which colour were the boats?"}]
    prompt = conv.prompter.render(question)
    moved = model.next_token_logits(prompt)
    assert int(moved.argmax()) == int(read_afresh(model, prompt).argmax())

    # The turn after it reads only its own words, and acts as asked.
    res = conv.turn("Wave your left hand.", 0)
    assert res.prompt_tokens <= model.count_tokens("Wave your left hand.") + 20, res.prompt_tokens
    assert [(name, args.get("hand")) for name, args, _ in res.calls] == [("wave", "left")], res.calls


def test_a_prompt_that_differs_inside_the_moved_stretch_is_read_again_from_its_start(ctx):
    conv, model, done = compacted(ctx)
    assert done.evaluated < 100  # moved, not read again
    # The newest kept user message changed (a transcript corrected): the prompt now differs
    # inside the moved stretch, whose cache positions are not its indices, so everything from
    # its start is read again.
    conv.history[-2] = {"role": "user", "content": "Story number 15: I stayed at home."}
    prompt = conv.render()
    evaluated = model.prefill(Decoding(prompt))
    kept = model.count_tokens(prompt) - model.count_tokens(conv.prompter.render([]))
    assert evaluated >= kept - 60, (evaluated, kept)  # the summary and the kept turns, in order
    assert vendor.cached_positions(model.llm) == (0, model.llm.n_tokens - 1)
    exact = read_afresh(model, prompt)
    got = model.next_token_logits(prompt)
    assert int(got.argmax()) == int(exact.argmax())
    assert float(abs(got - exact).max()) < 0.05 * float(abs(exact).max())  # read in order: exact


def test_a_moved_stretch_that_ends_the_prompt_leaves_its_last_token_to_be_read_in_place():
    # The cache holds prefix + dropped + kept; the new prompt is prefix + summary + kept and
    # ends with the kept stretch itself. The last prompt token must be evaluated at its own
    # position after the summary, not at the moved stretch's end (where the summary now sits).
    model = ChatModel(resolve_model(LLMConfig().model), LLMConfig(n_ctx=2048, cache_reuse=32))
    try:
        prefix = "<|im_start|>system\nYou are a small robot.<|im_end|>\n<|im_start|>user\n"
        kept = f"Story number 7: {STORY}"
        model.next_token_logits(prefix + f"Story number 1: {STORY}" + kept)
        prompt = prefix + "Earlier we talked about a walk. " + kept
        got = model.next_token_logits(prompt)
        n = model.count_tokens(prompt)
        assert model.llm.n_tokens == n, (model.llm.n_tokens, n)
        assert vendor.cached_positions(model.llm) == (0, n - 1)
        assert model.llm.input_ids[:n].tolist() == model.llm.tokenize(prompt.encode(), special=True)
        assert model._reordered is not None  # the kept stretch was moved, not read again
        # Its last token read where the summary now ends gave another next token (34 against
        # 198 here); read in place, the same as a model reading the prompt from scratch.
        assert int(got.argmax()) == int(read_afresh(model, prompt).argmax())
    finally:
        model.close()


def test_a_barge_in_cuts_every_reply_of_the_turn_to_what_was_heard():
    """A turn's speech in two assistant messages (a joke, then the timer result read back after
    the rounds): the cut emptied only the newest and kept the joke whole, unheard (seen in CI);
    and a cut message kept its generated text, which the grammar path renders instead."""
    from agent.conversation.history import truncate_turn
    from agent.conversation.toolgrammar import as_grammar_messages

    joke, done = "Why did the robot go on holiday?", "Time is up: the timer for 2 seconds is done."
    call = {"type": "function", "function": {"name": "wave", "arguments": {}}}

    def turn():
        return [
            {"role": "user", "content": "earlier"},
            {"role": "assistant", "content": "Earlier reply.", "raw": '{"say": "Earlier reply."}'},
            {"role": "user", "content": "[background result] timer done"},
            {"role": "assistant", "content": "", "tool_calls": [call], "raw": '{"call": {"tool": "wave"}}'},
            {
                "role": "assistant",
                "content": joke,
                "raw": '{"call": {"tool": "none"}, "say": "' + joke + '"}',
            },
            {"role": "assistant", "content": done},
        ]

    history = turn()
    assert truncate_turn(history, []) == ""
    assert [m["content"] for m in history[3:]] == ["", "", ""]
    assert "raw" not in history[4] and history[3]["raw"] and history[1]["raw"]  # unchanged ones keep it
    assert history[3]["tool_calls"] == [call]  # the call ran
    assert joke not in json.dumps(as_grammar_messages(history))

    history = turn()
    assert truncate_turn(history, [joke, "Time is up:"]) == f"{joke} Time is up:"
    assert [m["content"] for m in history[4:]] == [joke, "Time is up:"] and "raw" in history[4]
