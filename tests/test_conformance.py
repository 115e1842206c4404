"""The plain path against a scripted capable model, on every engine: its calls run, its words said.

Each case of :data:`conformance_cases.CASES` runs through the product's real turn loop on three
engines (:mod:`scripted_model`):

* ``openai`` — an OpenAI-compatible server with no local model file (``[llm] model = ""``): a
  scripted server here that checks every request against OpenAI's protocol;
* ``embedded`` — llama.cpp in process on the tiny Gemma 4 model (Bolt's vocabulary and template),
  each round held to the scripted answer in Bolt's markup by a grammar;
* ``llama-server`` — the same model on llama.cpp's server, the prompt rendered with Bolt's template.

The product must run exactly the model's calls (clamps are the registry's, and said aloud), say
the model's words, and feed results back in each engine's protocol. Every case but the product
rules also shows what the small-model profile's rules would have done otherwise.
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

import pytest
from conformance_cases import CASES, PRODUCT, stand_in_differences
from gemma4_model import tiny_gemma4
from scripted_model import GEMMA_SPECIALS, Script, ScriptedEngine, ScriptedServer

from agent.config import LLMConfig, load_config
from agent.conversation import Conversation
from agent.engines import make_chat_model
from agent.engines.embedded.model import ChatModel
from agent.engines.remote.server_process import find_binary
from agent.events import ToolCall
from agent.skills import SkillContext, load_registry
from agent.state.memory import Memory
from agent.state.timers import TimerBook
from hardware.factory import build_robot

HERE = Path(__file__).resolve().parent
ENGINES = ("openai", "embedded", "llama-server")
CFG = LLMConfig(n_ctx=4096, threads=1, temperature=0.0, max_tokens=96)


@pytest.fixture(scope="module")
def body():
    robot, _ = build_robot(load_config().robot)
    shutdown = threading.Event()
    yield robot, shutdown
    shutdown.set()  # background timers end
    robot.stop()


@pytest.fixture(scope="module")
def registry(body):
    robot, _ = body
    return load_registry([HERE / "conformance_skills"], animations=robot.animations, entry_points=False)


@pytest.fixture(scope="module")
def gemma_path(gemma4_vocab):
    return tiny_gemma4(gemma4_vocab)


@pytest.fixture(scope="module", params=ENGINES)
def engine(request, gemma_path):
    """``(model, script, problems)`` of one engine; ``problems`` lists protocol breaks seen so far."""
    script = Script(CASES)
    if request.param == "openai":
        server = ScriptedServer(script)
        remote = {"url": server.url, "model_name": "scripted-bolt"}
        cfg = CFG.model_copy(
            update={"engine": "openai", "model": "", "openai": CFG.openai.model_copy(update=remote)}
        )
        model = make_chat_model(cfg, None)
        yield model, script, server.problems
        server.close()
        return
    if request.param == "embedded":
        inner = ChatModel(gemma_path, CFG)
        ids = {m: inner.llm.tokenize(m.encode(), add_bos=False, special=True)[0] for m in GEMMA_SPECIALS}
        yield ScriptedEngine(inner, script, ids), script, []
        return
    if find_binary("") is None:
        pytest.skip("llama-server not built: run launch/build_llama_server.sh (launch/setup.sh test does)")
    cfg = CFG.model_copy(update={"engine": "llama-server", "model": str(gemma_path)})
    inner = make_chat_model(cfg, gemma_path)
    ids = {m: inner.vocab.llm.tokenize(m.encode(), add_bos=False, special=True)[0] for m in GEMMA_SPECIALS}
    try:
        yield ScriptedEngine(inner, script, ids), script, []
    finally:
        inner.close()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_product_runs_the_models_calls_and_says_its_words(engine, case, registry, body):
    model, script, protocol = engine
    robot, shutdown = body
    events = []
    cfg = CFG
    ctx = SkillContext(robot=robot, shutdown=shutdown, timers=TimerBook(), memory=Memory())
    conv = Conversation(model, registry, ctx, cfg, events.append)
    assert conv.profile == "plain" and conv.format in ("bolt", "hermes")
    already = (len(script.problems), len(protocol))
    if case.estop:
        robot.estop()
    results = []
    try:
        for n, turn in enumerate(case.turns):
            spoken: list[str] = []
            first = len(events)
            # A pause ends an utterance (the speech stage speaks what came before it on its own).
            res = conv.turn(turn.said, n, on_text=spoken.append, on_pause=partial(spoken.append, " "))
            results.append(res)
            said = " ".join("".join(spoken).split())
            answered = [script.answered.get((turn.said, r)) for r in range(len(turn.steps))]
            assert None not in answered, (
                f"{turn.said!r}: rounds asked for {res.rounds}, planned {len(turn.steps)}"
            )
            wanted = [(c.name, c.args) for step in answered for c in step.calls]
            ran = [(e.tool, e.arguments) for e in events[first:] if isinstance(e, ToolCall)]
            assert ran == wanted, f"{turn.said!r}: ran {ran}, the model called {wanted}"
            words = [step.says for step in answered if step.says] + list(turn.hears)
            for w in words:
                assert " ".join(w.split()) in said, f"{turn.said!r}: {w!r} not said in {said!r}"
            assert res.rounds == len(turn.steps), (turn.said, res.rounds, res.problems)
            assert not res.problems, (turn.said, res.problems)
            assert "{" not in said and "<|" not in said, said
    finally:
        if case.estop:
            robot.clear_estop()
        robot.stop()
    assert script.problems[already[0] :] == [], script.problems[already[0] :]
    assert protocol[already[1] :] == [], protocol[already[1] :]
    _check_history(conv)
    if case.kind != PRODUCT:
        assert stand_in_differences(case, results, registry, conv.ctx, cfg), (
            f"{case.name}: the small-model profile would have done the same"
        )


def _check_history(conv: Conversation) -> None:
    """Every call in the history has an id that exactly one tool message after it answers."""
    for i, m in enumerate(conv.history):
        if m["role"] != "assistant" or not m.get("tool_calls"):
            continue
        ids = [c.get("id") for c in m["tool_calls"]]
        answers = []
        for nxt in conv.history[i + 1 :]:
            if nxt["role"] != "tool":
                break
            answers.append(nxt["tool_call_id"])
        assert all(ids) and sorted(answers) == sorted(ids), (m, answers)


def test_the_suite_has_forty_cases_where_the_stand_in_would_decide_otherwise():
    kinds = {c.kind for c in CASES}
    assert len([c for c in CASES if c.kind != PRODUCT]) >= 40
    assert {
        "counts",
        "durations",
        "sides",
        "angles",
        "several",
        "no call",
        "question",
        "follow-up",
        "chain",
        "retry",
    } <= kinds


def test_chat_on_an_openai_server_with_no_model_file_runs_the_models_calls(tmp_path):
    """``engine = "openai"``, ``model = ""``: ``chat`` starts (warm-up on), runs the calls, says the words."""
    import json
    import subprocess
    import sys

    nod = next(c for c in CASES if c.name == "a nod or two")
    cases = [nod, next(c for c in CASES if c.name == "Ada's potion")]
    server = ScriptedServer(Script(cases))
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "trader.py").write_text((HERE / "conformance_skills" / "trader.py").read_text())
    config = tmp_path / "remote.toml"
    config.write_text(
        "[llm]\n"
        'engine = "openai"\n'
        'model = ""\n'
        "[llm.openai]\n"
        f'url = "{server.url}"\n'
        'model_name = "scripted-bolt"\n'
        "[skills]\n"
        f'folders = ["{skills}"]\n'
    )
    typed = "\n".join(t.said for c in cases for t in c.turns) + "\n"
    try:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "agent",
                "chat",
                "--json",
                "--config",
                str(config),
                "--wait-background",
                "0",
            ],
            input=typed,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=HERE.parent,
        )
    finally:
        server.close()
    assert r.returncode == 0, r.stderr[-3000:]
    evs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    ready = next(e for e in evs if e["event"] == "ready")
    assert ready["profile"] == "plain" and ready["tool_format"] == "hermes", ready
    calls = [(e["name"], e["arguments"]) for e in evs if e["event"] == "tool_call"]
    assert calls == [
        ("nod", {"times": 2}),
        ("check_payment", {"customer": "Ada"}),
        ("lookup_recipe", {"item": "health potion"}),
        ("craft", {"item": "health potion", "ingredients": ["red herb", "spring water"]}),
    ], calls
    replies = [e["text"] for e in evs if e["event"] == "reply"]
    assert replies == ["There you go.", "Here you go, Ada, one health potion!"], replies
    assert server.problems == [] and not [e for e in evs if e["event"] == "error"]
    assert any(req.get("max_tokens") == 2 for req in server.requests)  # the warm-up reached the server
