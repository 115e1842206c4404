"""Speech before the tool round: a movement is said and done in one model round, data takes two.

Grammar mode (the embedded SmolLM2-135M): a call to a skill without follow-up
(``@skill(follow_up=False)``: wave, nod, look) carries a short acknowledgement in the same
round, and the call runs as soon as its JSON object is complete, so the reply's first audio
starts while the arm moves; a data skill (``get_time``) takes a second round whose speech
carries the result. The unit tests need no model; the rest run the real embedded models
through the one pipeline (:mod:`rig`).
"""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from rig import AgentRig

from agent.conversation.small.acks import ACKNOWLEDGEMENTS, Acknowledgements
from agent.conversation.small.toolprior import tools_left
from agent.conversation.toolgrammar import (
    NO_TOOL,
    CallStreamer,
    ToolNameSpotter,
    as_grammar_messages,
    parse_reply,
    reply_schema,
)
from agent.engines.grammar import gbnf_from_schema
from agent.events import (
    BackgroundDone,
    PlaybackStarted,
    Reply,
    RobotCommand,
    Timing,
    ToolCall,
    ToolResult,
    Transcript,
)
from agent.skills import build_skill, load_registry, new_skill_file, skill
from hardware.animation import linear_move

pytestmark = pytest.mark.small_model

MOTION = ("wave", "nod", "dance", "look", "look_at", "play_animation")
DATA = ("get_time", "describe_scene", "emergency_stop", "stop")  # stop says its result as written


# --- the skill field and the schema (no model) -----------------------------------------------------
def test_follow_up_is_declared_per_skill_and_defaults_to_true(tmp_path):
    @skill
    def plain() -> str:
        """A skill that says nothing about follow-up."""
        return "x"

    @skill(follow_up=False)
    def quiet() -> str:
        """A skill that only confirms an action."""
        return "x"

    assert build_skill(plain).follow_up and not build_skill(quiet).follow_up
    reg = load_registry([], entry_points=False)
    assert all(not reg.skills[n].follow_up for n in MOTION)
    assert all(reg.skills[n].follow_up for n in DATA)
    new_skill_file("greet_guest", tmp_path)  # the template moves the robot: no follow-up
    assert not load_registry([tmp_path], entry_points=False).skills["greet_guest"].follow_up
    # A data skill that takes a while says its preamble at once; the others say none.
    assert reg.skills["describe_scene"].preamble == "Let me look."
    assert all(not reg.skills[n].preamble for n in (*MOTION, "get_time"))


def _variants(schema):
    out = {}
    for v in schema["anyOf"]:
        out[v["properties"]["call"]["properties"]["tool"]["const"]] = v
    return out


def test_schema_gives_every_tool_a_call_alone_and_speech_to_none():
    skills = list(load_registry([], entry_points=False).skills.values())
    schema = reply_schema(skills)
    variants = _variants(schema)
    assert set(variants) == {s.name for s in skills} | {NO_TOOL}
    wave, get_time, speak = variants["wave"], variants["get_time"], variants[NO_TOOL]
    # a tool reply is the call alone: a movement's acknowledgement is the turn loop's, not the model's
    for v in (wave, get_time):
        assert list(v["properties"]) == ["call"] and v["required"] == ["call"]
    assert wave["properties"]["call"]["properties"]["arguments"]["properties"]["hand"]["enum"] == [
        "left",
        "right",
    ]
    assert list(speak["properties"]) == ["call", "say"] and "enum" not in speak["properties"]["say"]
    # speech only on the last round; every variant compiles to a llama.cpp grammar
    assert reply_schema(skills, allow_tools=False) == speak
    assert "root ::=" in gbnf_from_schema(schema)


def test_tool_name_is_spotted_when_its_closing_quote_is_written():
    reply = '{"call": {"tool": "look_at", "arguments": {"target": "face"}}}'
    spot = ToolNameSpotter()
    got = [(i, n) for i in range(len(reply) + 1) if (n := spot.feed(reply[:i])) is not None]
    assert got == [(reply.index('look_at"') + len('look_at"'), "look_at")]  # not at "look"
    assert spot.feed(reply) is None and spot.name == "look_at"


def test_acknowledgements_take_turns_and_skip_what_was_said():
    acks = Acknowledgements()
    assert [acks.next() for _ in ACKNOWLEDGEMENTS] == list(ACKNOWLEDGEMENTS)
    assert all(acks.next(frozenset({"Sure!", "Okay!"})) not in ("Sure!", "Okay!") for _ in range(8))
    assert acks.next(frozenset(ACKNOWLEDGEMENTS)) in ACKNOWLEDGEMENTS  # all said: any again


def test_call_is_spotted_the_moment_its_object_closes():
    reply = '{"call": {"tool": "wave", "arguments": {"hand": "right", "x": "a}\\"{"}}, "say": "Sure!"}'
    spot = CallStreamer()
    got = [(i, c) for i, ch in enumerate(reply) if (c := spot.feed(ch)) is not None]
    closes = reply.index('}}, "say"') + 1  # the brace that closes "call", not one inside a string
    assert got == [(closes, {"name": "wave", "arguments": {"hand": "right", "x": 'a}"{'}})]
    assert spot.done and spot.feed("}") is None
    assert parse_reply(reply) == (
        "Sure!",
        [{"name": "wave", "arguments": {"hand": "right", "x": 'a}"{'}}],
        "",
    )
    speak = CallStreamer()
    assert speak.feed('{"call": {"tool": "none"}, "say": "Hi"}') is None and speak.done
    cut = CallStreamer()
    assert cut.feed('{"call": {"tool": "nod", "argum') is None and not cut.done and cut.call is None
    assert cut.closing('{"call": {"tool": "nod", "argum') == ""  # not complete: nothing to close
    # a reply stopped once its call is complete is closed with the braces the grammar forces
    stopped = CallStreamer()
    text = '{"call": {"tool": "wave", "arguments": {"x": "}{"}}'
    assert stopped.feed(text) == {"name": "wave", "arguments": {"x": "}{"}} == stopped.call
    assert stopped.closing(text) == "}" and stopped.closing(text + "}") == ""
    assert speak.call is None


def test_only_tools_the_words_still_point_at_are_left():
    skills = list(load_registry([], entry_points=False).skills.values())
    left = tools_left("Turn your head to the left and then wave.", skills, {"wave"}, 6.0)
    assert left == {"look": 6.0, NO_TOOL: -6.0}
    # "look" points at look and look_at alike: one of them answers it
    assert tools_left("Please look to the left.", skills, {"look_at"}, 6.0) == {NO_TOOL: 6.0}
    assert tools_left("Wave your hand.", skills, {"wave"}, 6.0) == {NO_TOOL: 6.0}
    assert tools_left("Wave your hand.", skills, set(), 0.0) == {}


TIMER_WORDS = ["add_to_timer", "change_timer", "get_time", "set_timer", "timers_left"]
"""The skills a negated "timer" names: none of them is what "cancel the timer" asks for."""
NEGATED = [
    ("stop waving", {"stop": 6.0, NO_TOOL: -6.0}, ["wave"]),
    ("Stop dancing!", {"stop": 6.0, NO_TOOL: -6.0}, ["dance"]),
    ("don't wave", {NO_TOOL: 6.0}, ["wave"]),
    ("don\u2019t nod", {NO_TOOL: 6.0}, ["nod"]),  # a typographic apostrophe
    ("please do not ever dance", {NO_TOOL: 6.0}, ["dance"]),
    ("Don't nod, wave.", {"wave": 6.0, NO_TOOL: -6.0}, ["nod"]),
    ("Stop. Wave your hand.", {"stop": 6.0, "wave": 6.0, NO_TOOL: -6.0}, []),
    ("no, wave the other hand", {"wave": 6.0, NO_TOOL: -6.0}, []),
    ("don't stop", {NO_TOOL: 6.0}, []),  # stopping is never held back
    # "timer" is set_timer's keyword: "cancel the timer" must not point at it, nor run it, nor
    # any other timer skill (get_time shares the stem "time"; skills that only read, it and
    # timers_left, are never refused: said_not_to is asked only of skills with side effects)
    ("cancel the timer", {"cancel_timer": 6.0, NO_TOOL: -6.0}, TIMER_WORDS),
    ("please cancel my tea timer", {"cancel_timer": 6.0, NO_TOOL: -6.0}, TIMER_WORDS),
    (
        "cancel the timer and wave",
        {"cancel_timer": 6.0, "wave": 6.0, NO_TOOL: -6.0},
        TIMER_WORDS,
    ),
    ("cancel the dance", {NO_TOOL: 6.0}, ["dance"]),  # no timer named: not cancel_timer
    # "stop the timer" ran stop (the body halted) and set_timer ("For how long?"): a new user's chat
    ("stop the timer", {"cancel_timer": 6.0, NO_TOOL: -6.0}, TIMER_WORDS),
    ("quit my timer", {"cancel_timer": 6.0, NO_TOOL: -6.0}, TIMER_WORDS),
    (
        "stop the timer and wave",
        {"cancel_timer": 6.0, "wave": 6.0, NO_TOOL: -6.0},
        TIMER_WORDS,
    ),
    ("stop the dance", {"stop": 6.0, NO_TOOL: -6.0}, ["dance"]),  # "the" no longer takes the negation
    ("don't stop the timer", {NO_TOOL: 6.0}, ["cancel_timer"]),
    ("don't cancel the timer", {NO_TOOL: 6.0}, ["cancel_timer"]),
]


@pytest.mark.parametrize("text,bonuses,refused", NEGATED, ids=[t for t, _, _ in NEGATED])
def test_a_negated_movement_gets_no_bonus_and_its_call_is_refused(text, bonuses, refused):
    """A new user's chat: "stop waving" called stop and then wave, "don't wave" called wave."""
    from agent.conversation.small.toolprior import said_not_to, tool_prior

    skills = list(load_registry([], entry_points=False).skills.values())
    assert tool_prior(text, skills, set(), 6.0) == bonuses
    assert tools_left(text, skills, {"stop"}, 6.0).get("wave", 0.0) == bonuses.get("wave", 0.0)
    assert sorted(s.name for s in skills if said_not_to(text, s)) == refused


ASKED_ABOUT = [
    ("What does the emergency stop do?", {NO_TOOL: 6.0}),
    ("what's the emergency stop do", {NO_TOOL: 6.0}),
    ("How does your wave work?", {NO_TOOL: 6.0}),
    ("What does the emergency stop do? Emergency stop!", {"emergency_stop": 6.0, "stop": 6.0, NO_TOOL: -6.0}),
    ("What do you see?", {"describe_scene": 6.0, NO_TOOL: -6.0}),  # "you" is no thing asked about
    ("What is the time?", {"get_time": 6.0, NO_TOOL: -6.0}),
    ("What is a timer?", {NO_TOOL: 6.0}),  # a new user's question started a one-second timer
    ("What's an emergency stop?", {NO_TOOL: 6.0}),
    ("What\u2019s the emergency stop do?", {NO_TOOL: 6.0}),  # a typographic apostrophe splits "what s"
    ("Set a timer for what is a minute", {"set_timer": 6.0, NO_TOOL: -6.0}),
]


@pytest.mark.parametrize("text,bonuses", ASKED_ABOUT, ids=[t for t, _ in ASKED_ABOUT])
def test_a_tool_asked_about_gets_no_bonus(text, bonuses):
    """A new user's "what does the emergency stop do?" latched the emergency stop (its keyword)."""
    from agent.conversation.small.toolprior import said_not_to, tool_prior

    skills = list(load_registry([], entry_points=False).skills.values())
    prior = tool_prior(text, skills, set(), 6.0)
    assert prior == bonuses
    assert not [s.name for s in skills if said_not_to(text, s)]  # a question refuses nothing


def test_history_without_raw_text_keeps_speech_and_call_together():
    history = [
        {"role": "user", "content": "Wave."},
        {
            "role": "assistant",
            "content": "Sure!",
            "tool_calls": [{"type": "function", "function": {"name": "wave", "arguments": {"hand": "left"}}}],
        },
        {"role": "tool", "name": "wave", "tool_call_id": "t1r0c0", "content": '"I am waving"'},
    ]
    msgs = as_grammar_messages(history)
    assert json.loads(msgs[1]["content"]) == {
        "call": {"tool": "wave", "arguments": {"hand": "left"}},
        "say": "Sure!",
    }
    assert msgs[2] == {"role": "user", "content": 'Result of wave: "I am waving"'}


# --- the real models -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    stamped: list[tuple[float, object]] = []

    def stamp(ev):  # when each public message arrived (robot commands carry only robot time)
        stamped.append((time.perf_counter(), ev))

    rig = AgentRig(out=tmp_path_factory.mktemp("replies"), observe=stamp)
    rig.stamped = stamped
    yield rig
    rig.close()


def _run(agent, fn, *args):
    agent.core.robot.wait_idle(10)
    agent.core.conversation.history.clear()  # each command on its own, as in bench --accuracy
    start = len(agent.stamped)
    evs = fn(*args)
    return evs, agent.stamped[start:]


def _rounds(evs):
    """Model rounds of the run's (one) user turn, as its ``Timing`` reports them."""
    turn = evs.of(Transcript)[-1].turn_id
    return evs.of(Timing, turn)[0].llm_rounds


def _assert_spoken_while_moving(evs, stamped, tool):
    turn = evs.of(Transcript)[-1].turn_id
    assert [c.tool for c in evs.of(ToolCall, turn)] == [tool]
    assert all(r.ok for r in evs.of(ToolResult, turn))
    reply = evs.of(Reply, turn)[0]
    assert reply.text in ACKNOWLEDGEMENTS and reply.audio
    first_audio = min(e.t for e in evs.of(PlaybackStarted, turn))
    moves = [t for t, e in stamped if isinstance(e, RobotCommand) and e.turn_id == turn]
    assert moves, "the skill moved nothing"
    assert first_audio < moves[-1], (
        f"first audio {1000 * (first_audio - moves[0]):.0f} ms after the first joint command, "
        f"animation done at {1000 * (moves[-1] - moves[0]):.0f} ms"
    )
    assert evs.of(Timing, turn)[0].first_audio_ms > 0


def test_a_question_during_a_long_animation_is_answered_while_it_runs(agent):
    """A turn is over when its speech is: the robot's motion goes on by itself, so neither the
    turn that starts a gesture nor a question asked during one waits for the gesture."""
    robot, stamp = agent.core.robot, agent.observe
    playing: dict[int, str | None] = {}

    def observe(ev):
        stamp(ev)
        if isinstance(ev, Timing):  # the turn is over: what is the robot doing now?
            playing[ev.turn_id] = robot.playing

    agent.observe = observe
    try:
        evs, stamped = _run(agent, agent.text, "Dance for me.")
        started = evs.of(Transcript)[-1].turn_id
        # A slow gesture (8 s), as a skill leaves one running: it returns at once. It cuts the
        # dance (queue=False: gestures otherwise wait for the one running, issue 48).
        robot.play(
            linear_move("long_turn", {"head_yaw": robot.positions()["head_yaw"]}, {"head_yaw": 40.0}, 8000),
            queue=False,
        )
        agent.core.conversation.history.clear()
        asked = agent.text("What time is it?")
    finally:
        agent.observe = stamp
    assert [c.tool for c in evs.of(ToolCall, started)] == ["dance"]
    assert playing[started] == "dance"  # the dance (2 s) outlives the turn that started it
    assert any(isinstance(e, RobotCommand) and e.turn_id == started for _, e in stamped)
    turn = asked.of(Transcript)[-1].turn_id
    assert [c.tool for c in asked.of(ToolCall, turn)] == ["get_time"] and asked.of(Reply, turn)[0].text
    assert playing[turn] == "long_turn"  # answered while the gesture ran


def test_typed_motion_command_speaks_in_one_round_while_the_arm_moves(agent):
    evs, stamped = _run(agent, agent.text, "Wave your right hand.")
    assert _rounds(evs) == 1
    _assert_spoken_while_moving(evs, stamped, "wave")
    assert any(e.joint == "right_arm" and e.deg > 90 for e in evs.of(RobotCommand))
    # the history holds the speech and the call in one assistant message, then the result
    hist = agent.core.conversation.history
    assert [m["role"] for m in hist] == ["user", "assistant", "tool"]
    assert (
        hist[1]["content"] == evs.of(Reply)[0].text and hist[1]["tool_calls"][0]["function"]["name"] == "wave"
    )
    raw = json.loads(hist[1]["raw"])  # exactly what the model wrote: the call alone
    assert raw["call"]["tool"] == "wave" and "say" not in raw and hist[2]["name"] == "wave"
    # the next turn reuses the KV cache: only the new messages are evaluated
    conv = agent.core.conversation
    res = conv.turn("Thank you.", 99)
    assert res.text and 0 < res.prompt_tokens < conv.model.count_tokens(conv.render()) / 2


def test_spoken_motion_command_speaks_in_one_round_while_the_arm_moves(agent, fixtures_dir):
    evs, stamped = _run(agent, agent.listen, fixtures_dir / "commands" / "wave_right.wav")
    assert len(evs.of(Transcript)) == 1 and _rounds(evs) == 1
    _assert_spoken_while_moving(evs, stamped, "wave")


def test_an_acknowledgement_claims_the_cpu_until_its_audio_is_out(agent, monkeypatch):
    """The driver claims the CPU for speech as it hands the acknowledgement over: the arguments
    are decoded after its audio is queued, not beside its synthesis on the same 2 cores."""
    model, arbiter, log = agent.core.model, agent.core.arbiter, []
    real_claim, real_release, real_run = arbiter.claim_for_speech, arbiter.release, model._decoder.run

    def claim():
        held = real_claim()
        log.append(("claim", held, threading.current_thread().name))
        return held

    def release():
        was = arbiter.claimed
        real_release()
        if was:
            log.append(("release",))

    def run(fn, *args):
        log.append(("eval",))
        return real_run(fn, *args)

    monkeypatch.setattr(arbiter, "claim_for_speech", claim)
    monkeypatch.setattr(arbiter, "release", release)
    monkeypatch.setattr(model._decoder, "run", run)
    evs, _ = _run(agent, agent.text, "Look to the left.")
    calls = evs.of(ToolCall)
    assert [c.tool for c in calls] == ["look"] and calls[0].arguments  # arguments follow the name
    held = log.index(("claim", True, "driver"))  # before the speech stage has the sentence
    released = next(i for i in range(held, len(log)) if log[i] == ("release",))
    assert ("eval",) not in log[held:released], log
    assert ("eval",) in log[released:]  # the arguments were decoded after the acknowledgement's audio


def test_a_data_result_written_for_people_is_said_as_written_without_a_second_round(agent):
    """The round that read "It is 02:11 on Sunday 6 December." back could only say it again (or
    garble it: "23:19 is 23:19 on Saturday 5 December."), and cost about 300 ms (0.7 s -> 0.2 s
    a turn in ``chat``)."""
    evs, _ = _run(agent, agent.text, "What time is it?")
    assert _rounds(evs) == 1 and [c.tool for c in evs.of(ToolCall)] == ["get_time"]
    result = evs.of(ToolResult)[0]
    assert result.ok and re.fullmatch(r"It is \d\d:\d\d on \w+ \d+ \w+\.", result.result)
    assert evs.of(Reply)[0].text == result.result


def test_a_finished_background_call_written_for_people_is_said_as_written(agent):
    conv = agent.core.conversation
    conv.history.clear()
    done = "Time is up: the timer for 10 seconds is done."
    res = conv.background_turn(BackgroundDone(-1, tool="set_timer", ok=True, result=done, call_id="t1"), 98)
    assert res.rounds == 0 and res.text == done, res
    assert conv.history[-1]["role"] == "assistant" and done in conv.history[-1]["content"]
    conv.history.clear()


def test_a_result_read_back_by_the_model_is_its_draft(agent):
    """A round that reads a result back (a finished background call's, too long to be said as
    written) drafts it: read in batches, not one decode step per token."""
    conv = agent.core.conversation
    conv.history.clear()
    # An egg timer: with the tools prompt of issue 50 the greedy model answered the tea timer's
    # result with a sentence of its own ("I'm glad you're enjoying the tea. ..."), left out before
    # the data, which was then said as written: nothing of the model's was a read back to draft.
    done = "Time is up: the egg timer for five minutes is done, so your eggs are ready to eat now."
    res = conv.background_turn(BackgroundDone(-1, tool="set_timer", ok=True, result=done, call_id="t1"), 99)
    assert res.rounds == 1 and "five minutes" in res.text, res
    assert res.draft_acceptance is not None and res.draft_acceptance >= 0.5, res  # None: nothing drafted
    conv.history.clear()


def test_a_tool_round_stops_the_moment_its_call_is_complete(agent):
    """Nothing but closing braces can follow a call: they are written here, not generated."""
    from agent.conversation.rounds import RoundIO, RoundPlan
    from agent.conversation.small.toolprior import tool_prior
    from agent.engines import Generation

    conv = agent.core.conversation
    conv.history.clear()
    conv.history.append({"role": "user", "content": "What time is it?"})
    skills = list(conv.registry.skills.values())
    bonuses = tool_prior("What time is it?", skills, set(), conv.cfg.tool_prior_bonus)
    gen, handed = Generation(), []
    prompt = conv.prompter.prompt(conv.history)
    plan = RoundPlan(allow_tools=True, bonuses=bonuses)
    say, calls, problem = conv._grammar_rounds.run(prompt, gen, plan, RoundIO(on_call=handed.append))
    assert calls == handed == [{"name": "get_time", "arguments": {}}] and not problem
    assert gen.cancelled and json.loads(gen.text) == {"call": {"tool": "get_time", "arguments": {}}}
    # The forced '_time", "arguments": {}}}' was handed out, not evaluated: the KV cache ends
    # before it (the prompt and the reply opening, then the sampled tokens).
    model = conv.model
    n_reply = model.count_tokens(gen.text)
    assert model.llm.n_tokens < len(model.tokenize(prompt.text)) + n_reply - 2
    conv.history.clear()


def test_asking_to_see_without_a_camera_says_why_with_no_round(agent, fixtures_dir):
    """No camera here: describe_scene is not offered, and the spoken question gets the device's
    sentence at once, with no model round and no call (its preamble "Let me look." is tested with
    a camera in test_agent_vision)."""
    evs, _ = _run(agent, agent.listen, fixtures_dir / "commands" / "what_see.wav")
    turn = evs.of(Transcript)[-1].turn_id
    assert evs.of(ToolCall, turn) == [] and _rounds(evs) == 0
    assert evs.of(Reply, turn)[0].text == "I have no camera, so I cannot see."


def test_multi_step_command_calls_both_tools(agent):
    evs, _ = _run(agent, agent.text, "Turn your head to the left and then wave.")
    assert sorted(c.tool for c in evs.of(ToolCall)) == ["look", "wave"] and _rounds(evs) == 2
    assert all(r.ok for r in evs.of(ToolResult))
    said = evs.of(Reply)[0].text
    assert said and all(p.strip() in ACKNOWLEDGEMENTS for p in re.findall(r"[^!]+!", said))


FOLLOW_ON = [
    ("and now to the right", ["look"], {"look": 6.0, NO_TOOL: -6.0}),
    ("now the right one", ["wave"], {"wave": 6.0, NO_TOOL: -6.0}),  # an enum's value
    ("now the other hand", ["wave"], {"wave": 6.0, NO_TOOL: -6.0}),  # the side it did not take
    ("and the opposite way", ["look", "get_time"], {"look": 6.0, NO_TOOL: -6.0}),
    ("tell me the other joke", ["get_time"], {}),  # the last call takes no side
    ("and to the left", ["get_time"], {}),  # the last call takes no side
    ("and now to the right", [], {}),
    ("now nod to the right", ["look"], {}),  # the words name a tool of their own
    ("tell me a joke", ["look"], {}),
    # a length after "set a timer" was answered "For how long?"
    ("five minutes", ["set_timer"], {"set_timer": 6.0, NO_TOOL: -6.0}),
    ("for ten seconds please", ["set_timer"], {"set_timer": 6.0, NO_TOOL: -6.0}),
    ("five minutes", ["look"], {}),  # the last call takes no length
    ("the blue one", ["set_timer"], {}),  # no length said
]


@pytest.mark.parametrize("text,earlier,bonuses", FOLLOW_ON, ids=[f"{t} after {e}" for t, e, _ in FOLLOW_ON])
def test_words_that_name_only_a_side_go_on_the_last_call(text, earlier, bonuses):
    from agent.conversation.small.toolprior import follow_on

    skills = list(load_registry([], entry_points=False).skills.values())
    assert follow_on(text, skills, earlier, 6.0) == bonuses
