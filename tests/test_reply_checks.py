"""Reply checks of ``bench --accuracy`` and the history helpers behind replies that fit (no models)."""

from __future__ import annotations

import pytest

from agent.config import LLMConfig
from agent.conversation.history import repeats_previous_reply, said_in, same_words, without_say
from agent.conversation.prompt import CHAT_EXAMPLE, Prompter
from agent.events import BackgroundDone, Reply, ToolCall, ToolResult, Transcript
from agent.skills import load_registry
from tools.bench.accuracy import _turn_rows
from tools.bench.reply_checks import answers_chat, carries_result, repeats, reply_check, spoken_words

TIME = "It is 06:49 on Tuesday 01 December 2026."
TIMER_DONE = "Time is up: the timer for 10 seconds is done."


def test_spoken_words_spell_numbers_and_times():
    assert spoken_words("It is 6:49!") == ["it", "is", "six", "forty", "nine"]


def test_a_clock_time_is_carried_in_any_spoken_form():
    assert carries_result("It is 06:49.", TIME)
    assert carries_result("It's 6:49 now", TIME)
    assert carries_result("It is six forty-nine.", TIME)
    assert not carries_result("It is 05:24 on Tuesday 2026.", TIME)  # a stale time copied from earlier
    assert not carries_result("Time is up: the timer is done.", TIME)


def test_numbers_and_words_of_other_results():
    assert carries_result("Your ten seconds are over.", TIMER_DONE)
    assert carries_result("The 10 second timer is done.", TIMER_DONE)
    assert not carries_result("It is 10:59.", TIMER_DONE)  # a 10 inside a clock time is not the 10 seconds
    assert carries_result("I see two people.", {"people": 2, "light": "bright"})
    no_camera = "describe_scene failed: RuntimeError: I have no camera, so I cannot see"
    assert carries_result("I am not able to see anything.", no_camera)
    assert not carries_result("I am dancing for you.", no_camera)


def test_repeats_ignore_case_punctuation_and_number_forms():
    assert repeats("It is 06:49.", "it is six forty-nine")
    assert not repeats("It is 06:50.", "It is 06:49.")
    assert not repeats("", "")


def test_chat_answers_and_what_is_not_one():
    ask = "Tell me a short joke."
    assert answers_chat(ask, "Why did the robot go on holiday? It needed to recharge.")
    for bad in (
        "I am telling you a joke.",
        "No, no, no!",
        "You can tell me a joke if you want to.",
        "I'm not sure what to do.",
        "It is not a joke, it's a lie.",
        "I'm a joke!",
        "Ha.",
    ):
        assert not answers_chat(ask, bad), bad
    assert answers_chat("How are you?", "I am fine, thank you.")  # a question: only refusals fail


def test_reply_check_combines_the_checks():
    assert reply_check("It is 06:49.", "", [("get_time", TIME)]) == (True, "")
    copied = reply_check(
        "Time is up: the timer is done.", "Time is up: the timer is done.", [("get_time", TIME)]
    )
    assert copied == (False, "repeats the previous reply")
    assert (
        reply_check("It is 05:24.", "Hello there.", [("get_time", TIME)])[1]
        == "does not carry the result of get_time"
    )
    # The same time asked twice in a minute may get the same words; "Sure!" may follow "Sure!".
    assert reply_check("It is 06:49.", "It is 06:49.", [("get_time", TIME)])[0]
    assert reply_check("Sure!", "Sure!")[0]
    assert not reply_check("I am waving my hand.", "I am waving my hand.")[0]
    assert reply_check("I am telling you a joke.", "", chat_request="Tell me a joke.")[1] == (
        "does not answer the chat request"
    )
    assert reply_check(None, "", expect_reply=False) == (True, "")  # stop: silence is right
    assert reply_check("", "") == (False, "no reply")


def test_turn_rows_check_every_turn_against_the_one_before():
    evs = [
        BackgroundDone(3, "set_timer", True, TIMER_DONE, "c1"),
        Reply(3, "Time is up: the timer for 10 seconds is done."),
        Transcript(4, "what time is it"),
        ToolCall(4, "get_time", {}, "c2"),
        ToolResult(4, "get_time", True, TIME, "c2"),
        Reply(4, "Time is up: the timer for 10 seconds is done."),
    ]
    item = {"text": "What time is it?", "expect_any": ["time"], "intent": "skill"}
    rows, last = _turn_rows(evs, item, {"get_time"}, "Sure!")
    assert [r["reply_ok"] for r in rows] == [True, False]
    assert rows[0]["background"] == "set_timer" and rows[1]["tools"] == ["get_time"]
    assert rows[1]["reply_why"] == "repeats the previous reply" and last == rows[1]["reply"]


@pytest.mark.small_model
def test_a_data_call_not_run_is_owed_no_words_but_a_failure_owes_its_reason():
    """``bench --accuracy``'s one conversation: "can you dance for me?" had the model write
    ``get_time`` first; it was not run, and the reply "Here I go!" was failed for not saying
    "get_time not run: the user asked for dance, not this"."""
    not_run = "get_time not run: the user asked for dance, not this"
    evs = [
        Transcript(5, "Can you dance for me?"),
        ToolCall(5, "get_time", {}, "t5r0c0"),
        ToolResult(5, "get_time", False, not_run, "t5r0c0"),
        ToolCall(5, "dance", {}, "t5r1c0"),
        ToolResult(5, "dance", True, "I am dancing.", "t5r1c0"),
        Reply(5, "Here I go!"),
        Transcript(6, "What do you see?"),
        ToolCall(6, "describe_scene", {}, "t6r0c0"),
        ToolResult(
            6,
            "describe_scene",
            False,
            "describe_scene raised RuntimeError: no camera",
            "t6r0c0",
            "No camera.",
        ),
        Reply(6, "Let me look."),
    ]
    item = {"text": "Can you dance for me?", "expect_any": ["dance"], "intent": "skill"}
    rows, _ = _turn_rows(evs, item, {"get_time", "describe_scene"}, "")
    assert [r["reply_ok"] for r in rows] == [True, False], rows
    assert rows[1]["reply_why"] == "does not carry the result of describe_scene"


@pytest.mark.small_model
def test_without_say_keeps_the_call_and_its_exact_prefix():
    raw = '{ "call": {"tool": "none"}, "say": "It is \\"fine\\" now."}'
    assert without_say(raw) == '{ "call": {"tool": "none"}}'
    wave = '{"call": {"tool": "wave", "arguments": {"hand": "right"}}, "say": "Sure!"}'
    assert without_say(wave) == '{"call": {"tool": "wave", "arguments": {"hand": "right"}}}'
    assert (
        without_say('{"call": {"tool": "get_time", "arguments": {}}}')
        == '{"call": {"tool": "get_time", "arguments": {}}}'
    )
    cut = '{"call": {"tool": "none"}, "say": "I was cut off by the tok'
    assert without_say(cut) == '{"call": {"tool": "none"}'
    # The KV cache reuses everything before the say: the stripped text is a prefix of the raw one.
    assert raw.startswith(without_say(raw)[:-1])


def test_repeat_guard_function_for_the_turn_loop():
    history = [
        {"role": "user", "content": "Set a timer."},
        {"role": "assistant", "content": "Time is up: the timer is done."},
        {"role": "user", "content": "What time is it?"},
        {"role": "tool", "name": "get_time", "content": TIME},
    ]
    assert repeats_previous_reply(history, "Time is up: the timer is done!")
    assert not repeats_previous_reply(history, "It is 06:49.")
    history[1]["content"] = "It is 06:49 on Tuesday."
    assert not repeats_previous_reply(history, "It is 06:49 on Tuesday.", results=TIME)  # still true
    history[1]["content"] = "Sure!"
    assert not repeats_previous_reply(history, "Sure!")  # acknowledgements may repeat
    assert said_in("it is 06:49", TIME) and not said_in("It is 06:50.", TIME) and not said_in("", TIME)
    assert same_words("Hi, there!", "hi there") and not same_words("", "")


class TemplateModel:
    """Renders messages as ``role: content`` lines (what the prompt shows, no model)."""

    template = ""

    def render(self, messages, tools=None, **kwargs):
        return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


@pytest.mark.small_model
def test_grammar_prompt_shows_earlier_replies_without_their_words():
    registry = load_registry([], entry_points=False)
    prompter = Prompter(TemplateModel(), registry, LLMConfig(), "grammar", hide_earlier_speech=True)
    history = [
        {"role": "user", "content": "What time is it?"},
        {
            "role": "assistant",
            "content": "",
            "raw": '{"call": {"tool": "get_time", "arguments": {}}}',
            "tool_calls": [{"type": "function", "function": {"name": "get_time", "arguments": {}}}],
        },
        {"role": "tool", "name": "get_time", "tool_call_id": "c", "content": f'"{TIME}"'},
        {
            "role": "assistant",
            "content": "It is 06:49.",
            "raw": '{"call": {"tool": "none"}, "say": "It is 06:49."}',
        },
        {"role": "user", "content": "Tell me a joke."},
    ]
    prompt = prompter.render(history)
    assert '"say": "It is 06:49."' not in prompt and 'assistant: {"call": {"tool": "none"}}' in prompt
    assert TIME in prompt  # the tool result stays: it is what the next reply passes on
    assert prompt.count('"say"') == prompter.system_prompt().count('"say"')  # only the system prompt's
    assert CHAT_EXAMPLE in prompter.system_prompt()


@pytest.mark.small_model
def test_a_data_reply_ends_with_its_data():
    from tools.bench.reply_checks import tail_after_data

    result = "It is 22:49 on Tuesday 1 December."
    assert tail_after_data("It is 22:49 on Tuesday 1 December.", [result]) == ""
    assert tail_after_data("It is 22:49 on Tuesday 1 December. It needs to recharge.", [result]) == (
        "It needs to recharge."
    )
    assert reply_check("It is 22:49 on Tuesday 1 December. I am a robot.", "", [("get_time", result)]) == (
        False,
        "goes on after the data: 'I am a robot.'",
    )
    assert reply_check("Sure, it is 22:49.", "", [("get_time", result)]) == (True, "")


@pytest.mark.small_model
def test_no_sentence_of_the_system_prompts_example_reaches_a_reply():
    from tools.bench.reply_checks import copies_example

    assert copies_example("It is 22:49. It needs to recharge.")
    assert copies_example("Why did the robot go on holiday? Because.")
    assert not copies_example("Why did the robot cross the road? To charge on the other side.")
    assert reply_check("Why did the robot go on holiday? It needed to recharge.", "") == (
        False,
        "copies the system prompt's example",
    )


@pytest.mark.small_model
def test_a_data_tail_stream_stops_after_the_data_sentence():
    from agent.control import StopSignal
    from agent.conversation.small.readback import DataTail

    out: list[str] = []
    stop = StopSignal()
    tail = DataTail(["It is 22:49 on Tuesday 1 December."], out.append, stop)
    for d in [
        "It",
        " is",
        " 22",
        ":",
        "49",
        " on",
        " Tuesday",
        " 1",
        " December",
        ".",
        " It",
        " needs",
        " to",
    ]:
        tail.feed(d)
    tail.flush()
    assert "".join(out) == "It is 22:49 on Tuesday 1 December." and stop.is_set()
    # The data said in the last sentence: everything is forwarded at the round's end.
    out.clear()
    tail = DataTail(["It is 09:41 on Tuesday 1 December."], out.append, StopSignal())
    for d in ["Sure", "!", " It", " is", " 9", ":", "41", "."]:
        tail.feed(d)
    tail.flush()
    assert "".join(out) == "Sure! It is 9:41." and not tail.closed


@pytest.mark.small_model
def test_a_background_result_in_words_ends_its_reply_once_half_of_it_is_said():
    """A timer the model labelled at length is not exact data, and still ends its reply.

    A new user's chat: "Time is up: ... is done. You can continue to play a game of pasta.";
    one shared word ("time") does not say such a result.
    """
    from agent.control import StopSignal
    from agent.conversation.small.readback import DataTail, carries_data, exact_data, tail_after_data
    from agent.state.timers import done_message

    done = done_message("pasta for the dinner with my friends tonight timer", 600)
    assert not exact_data(done)
    assert not carries_data("Time for a break!", done) and carries_data(done, done)
    out: list[str] = []
    stop = StopSignal()
    tail = DataTail([done], out.append, stop)
    for word in f"Time for pasta! {done} You can continue to play a game of pasta.".split(" "):
        tail.feed(word + " ")
    tail.flush()
    assert "".join(out) == f"Time for pasta! {done}" and stop.is_set()
    assert tail_after_data(f"{done} You can go.", [done], carries_data) == "You can go."


@pytest.mark.small_model
@pytest.mark.parametrize(
    ("said", "calls", "ok"),
    [
        ("Please look to the left.", [("look", {"yaw_deg": 30, "pitch_deg": 0})], True),
        ("Please look to the left.", [("look", {"yaw_deg": 0, "pitch_deg": -1})], False),
        ("Please look to the left.", [("look", {"yaw_deg": 0.1})], False),  # a turn nobody sees
        ("Please look to the left.", [("look", {"yaw_deg": 30, "pitch_deg": 30})], False),  # no tilt asked
        ("Please look to the left.", [("look", {"yaw_deg": 30, "pitch_deg": 2})], True),  # none seen
        ("Look up and to the left.", [("look", {"yaw_deg": 30, "pitch_deg": 15})], True),
        ("Please look to the left.", [("look", {"yaw_deg": 12})], True),  # a tenth of -60..60
        ("Please look to the left.", [("look", {"yaw_deg": 6})], False),
        (
            "Turn your head thirty degrees to the right and then wave.",
            [("look", {"yaw_deg": -30}), ("wave", {})],
            True,
        ),
        ("Turn your head thirty degrees to the right and then wave.", [("look", {"yaw_deg": -45})], False),
        ("Turn your head thirty degrees to the right and then wave.", [("wave", {"hand": "left"})], True),
        ("Hey robot, wave your right hand.", [("wave", {"hand": "right"})], True),
        ("Hey robot, wave your right hand.", [("wave", {"hand": "left"})], False),
        ("Set a timer for ten seconds.", [("set_timer", {"seconds": 10})], True),
        ("Set a timer for five minutes.", [("set_timer", {"seconds": 5})], False),
        ("Nod your head if you can hear me.", [("nod", {})], True),
        ("Can you nod your head twice?", [("nod", {"times": 2})], True),
        ("Can you nod your head twice?", [("nod", {})], False),  # one nod, the default
        ("Wave twice.", [("wave", {"times": 2})], True),
        ("Wave twice.", [("wave", {})], False),
        # the hand left out: the skill's default (right) waves, not the left hand said
        ("Wave with your left hand three times.", [("wave", {"times": 3})], False),
        ("Wave with your left hand three times.", [("wave", {"times": 3, "hand": "left"})], True),
    ],
)
def test_arguments_follow_the_words(said, calls, ok):
    from agent.skills import SkillRegistry
    from skills.motion import look, nod, wave
    from skills.timer import set_timer
    from tools.bench.reply_checks import arguments_fit

    reg = SkillRegistry()
    for fn in (look, nod, wave, set_timer):
        reg.register(fn)
    schemas = {n: s.parameters for n, s in reg.skills.items()}
    fit, why = arguments_fit(said, calls, schemas)
    assert fit is ok, why


@pytest.mark.small_model
def test_only_exact_data_ends_a_reply():
    from agent.conversation.small.readback import exact_data

    assert exact_data("It is 22:49 on Tuesday 1 December.") and exact_data({"seconds": 10})
    assert not exact_data("A man holds a red mug. He smiles.")
    assert not exact_data("2 people sit at a table in a bright kitchen; one of them holds a red mug.")
    description = "A man holds a red mug. He smiles."
    assert reply_check(
        "I see a man with a red mug. He is smiling.", "", [("describe_scene", description)]
    ) == (
        True,
        "",
    )


ESTOP = "look failed: RuntimeError: my emergency stop is on, so I cannot move until someone clears it"


@pytest.mark.parametrize(
    ("reply", "carried"),
    [
        ("I'm sorry, I can't move until someone clears the emergency stop.", True),
        ("My emergency stop is on, so I cannot move until someone clears it.", True),
        ("Of course! I'm sorry, I can only move 10% of the way.", False),  # one word: no reason
        ("Sure! Why did the robot do that?", False),
    ],
)
def test_a_reason_is_carried_by_half_its_words(reply, carried):
    from agent.conversation.results import carries_reason

    assert carries_reason(reply, ESTOP) is carried


def test_a_dict_result_is_said_by_its_description_or_summary():
    from agent.conversation.results import spoken_result

    scene = {"people": 2, "summary": "2 people: one on the left", "description": ""}
    assert spoken_result(scene) == "2 people: one on the left"
    assert spoken_result({**scene, "description": " A man holds a mug. "}) == "A man holds a mug."
    assert spoken_result({"status": "started"}) == "" and spoken_result(3) == ""
    assert spoken_result("It is 10:41.") == "It is 10:41."
    assert (
        spoken_result({"summary": "nobody in view; the room is dark"}) == "Nobody in view; the room is dark"
    )


@pytest.mark.small_model
def test_a_data_round_starts_with_its_data_and_a_short_sentence_is_said_whole():
    from agent.conversation.small.readback import DataHead, carries_data, short_sentence

    estop = "Emergency stop: my motors are off until someone clears it."
    assert short_sentence(estop) and not short_sentence("A man holds a red mug. " * 3)
    assert not carries_data("The robot needs to recharge, so it's off until someone clears it.", estop)
    assert carries_data(f"Okay. {estop}", estop)
    out: list[str] = []
    head = DataHead(["It is 10:41 on Saturday 5 December."], out.append)
    for word in "Why did the robot go on holiday? It is 10:41 on Saturday 5 December. Bye.".split(" "):
        head.feed(word + " ")
    head.flush()
    assert "".join(out) == "It is 10:41 on Saturday 5 December. Bye. "
    assert head.dropped == "Why did the robot go on holiday?"
    assert head.kept("Why did the robot go on holiday? It is 10:41.") == "It is 10:41."
    # A round that never says its data forwards nothing: the turn reads the data back after it.
    out.clear()
    head = DataHead([estop], out.append)
    wrong = "The robot needs to recharge, so it's off until someone clears it."
    head.feed(wrong)
    head.flush()
    assert out == [] and head.kept(wrong) == ""


@pytest.mark.small_model
def test_exact_data_is_said_by_all_its_numbers_and_a_background_result_whole():
    """A new user's custom battery skill: "I'm sorry, I only have 2 hours left." left out 73 %;
    a timer's turn said "I'm done. I'll play 10 seconds of your game." for its result."""
    from agent.conversation.small.readback import carries_data

    battery = "My battery is at 73 percent, about 2 hours left."
    assert not carries_data("I'm sorry, I only have 2 hours left.", battery)
    assert carries_data("It is at seventy-three percent, two hours left.", battery)
    done = "Time is up: the time left to play timer for 10 seconds is done."
    assert carries_data("I'm done. I'll play 10 seconds of your game.", done)  # half its words
    assert not carries_data("I'm done. I'll play 10 seconds of your game.", done, whole=True)
    assert carries_data(done, done, whole=True)
    assert carries_data("It is 10:41.", "It is 10:41 on Saturday 5 December.")  # a clock: its time


@pytest.mark.small_model
@pytest.mark.parametrize(
    ("result", "expected"),
    [
        ("It is 02:11 on Sunday 6 December.", True),
        ("Time is up: the timer for 10 seconds is done.", True),
        ({"summary": "Nobody in view; a red mug on the table.", "people": 0}, True),
        ({"status": "started", "note": "Okay, it is running."}, False),  # a status: no words to say
        ("73", False),  # a bare value: the model's round puts it in a sentence
        ("Done.", False),
        ("It is 02:11", False),  # not a whole sentence
        ("2 people sit at a table; one holds a red mug, the other a blue one and a pen.", False),  # long
    ],
)
def test_a_result_said_as_written_is_a_short_whole_sentence(result, expected):
    from agent.conversation.small.readback import said_as_written

    assert said_as_written(result) is expected
