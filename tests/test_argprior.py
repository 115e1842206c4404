"""The argument prior (agent/conversation/argprior.py) on the real skills' schemas."""

from __future__ import annotations

from typing import Annotated, Literal

import pytest
from pydantic import Field

from agent.conversation.small.argprior import (
    follow_words,
    length_unsaid,
    limb_sides,
    said_values,
    spoken_count,
    spoken_degrees,
)
from agent.skills import SkillContext, SkillRegistry, build_skill, is_skill, skill

pytestmark = pytest.mark.small_model


def _schema(fn) -> dict:
    """A real skill's JSON schema, as the registry builds it."""
    reg = SkillRegistry()
    return reg.register(fn).parameters


def _motion(name: str) -> dict:
    """The JSON schema of a packaged movement skill (``skills/motion.py``)."""
    import skills.motion

    return _schema(getattr(skills.motion, name))


@pytest.fixture(scope="module")
def look():
    return _motion("look")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Turn your head 30 degrees to the right", 30.0),
        ("turn your head thirty degrees to the right", 30.0),
        ("look forty-five degrees up", 45.0),
        ("look fifteen degrees down", 15.0),
        ("look to the left", None),
        ("turn 30 degrees and then 40 degrees", None),
    ],
)
def test_spoken_degrees(text, expected):
    assert spoken_degrees(text) == expected


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        # "please look to the left" ran look(yaw 0, pitch -1) (the issue): the side decides the sign
        ("please look to the left", {"yaw_deg": 0, "pitch_deg": -1}, {"yaw_deg": 30.0, "pitch_deg": 0.0}),
        # no tilt asked for: the tilt the model wrote goes (it ran look(yaw 0, pitch 90) for this)
        ("look to the left", {"yaw_deg": 0, "pitch_deg": 90}, {"yaw_deg": 30.0, "pitch_deg": 0.0}),
        ("look up", {"yaw_deg": 25, "pitch_deg": 10}, {"yaw_deg": 0.0, "pitch_deg": 10}),
        ("look up and to the left", {"yaw_deg": 20, "pitch_deg": 10}, {"yaw_deg": 20, "pitch_deg": 10}),
        ("look left, then right and up", {"yaw_deg": 20, "pitch_deg": 10}, {"yaw_deg": 20, "pitch_deg": 10}),
        ("look right", {"yaw_deg": 20}, {"yaw_deg": -20.0}),  # the model's magnitude, the words' sign
        ("turn your head thirty degrees to the right", {"yaw_deg": 0}, {"yaw_deg": -30.0}),
        ("look up", {"yaw_deg": 0, "pitch_deg": 0}, {"yaw_deg": 0, "pitch_deg": 15.0}),
        ("look down a bit", {"pitch_deg": -10}, {"pitch_deg": -10}),  # already right: untouched
        ("look left and then right", {"yaw_deg": -25}, {"yaw_deg": -25}),  # both sides: the model decides
        ("look at me", {"yaw_deg": 5}, {"yaw_deg": 5}),  # no side named
        ("turn 90 degrees to the left", {"yaw_deg": 0}, {"yaw_deg": 90.0}),  # as said: the registry clamps
        # the degrees said beat the model's number (turn_then_wave ran look(yaw -45))
        ("turn your head 30 degrees to the right and wave", {"yaw_deg": -45}, {"yaw_deg": -30.0}),
        ("turn your head 30 degrees", {"yaw_deg": -45}, {"yaw_deg": -45}),  # no side named
        # the right sign and a turn nobody sees (the demo ran look(yaw 0.1)): half the range
        ("please look to the left", {"yaw_deg": 0.1}, {"yaw_deg": 30.0}),
        ("turn your head to the right", {"yaw_deg": -0.3}, {"yaw_deg": -30.0}),
        ("look up a little", {"pitch_deg": 3}, {"pitch_deg": 6.0}),  # the least seen: a fifth of 30
        ("look up a little", {"pitch_deg": 8}, {"pitch_deg": 8}),  # seen: the model's own
        ("look down", {"pitch_deg": -3}, {"pitch_deg": -15.0}),  # a new user's chat: 3 degrees unseen
    ],
)
def test_the_named_side_decides_the_sign(look, text, args, expected):
    assert follow_words(text, look, args) == expected


def test_the_schema_states_the_sign_convention(look):
    props = look["properties"]
    assert "positive = left" in props["yaw_deg"]["description"]
    assert "positive = up" in props["pitch_deg"]["description"]


@pytest.fixture(scope="module")
def timer():
    from skills.timer import set_timer

    return _schema(set_timer)


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        # a new user's chat: "two hours" was written as 2.5 seconds
        ("set a timer for two hours", {"seconds": 2.5}, {"seconds": 7200.0}),
        (
            "set a tea timer for 1 minute 30 seconds",
            {"seconds": 130, "label": "tea"},
            {"seconds": 90.0, "label": "tea"},
        ),
        # a length the model left out (cancel_timer's is optional) is the one said
        ("cancel the ten minute timer", {"label": "timer"}, {"label": "timer", "seconds": 600.0}),
        ("set a timer for ten seconds", {"seconds": 10}, {"seconds": 10.0}),
        ("cancel the timer", {"seconds": 10}, {"seconds": 10}),  # no duration said: the model's
        ("set a timer for 0 seconds", {"seconds": 5}, {"seconds": 0.0}),  # said: the check refuses it
    ],
)
def test_a_duration_said_is_the_argument_in_seconds(timer, text, args, expected):
    assert "in seconds" in timer["properties"]["seconds"]["description"]
    assert follow_words(text, timer, args) == expected


def _point(
    ctx: SkillContext,
    side: Literal["left", "right"],
    angle_deg: Annotated[float, Field(ge=0, le=90, description="arm raise in degrees")] = 45,
) -> str:
    """Point to one side with an arm (the README's example skill)."""
    return f"pointing {side}"


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        # a new user's chat: the README's own example ran point(side left) at its default 45
        (
            "point to the left with your arm at 80 degrees",
            {"side": "left"},
            {"side": "left", "angle_deg": 80.0},
        ),
        (
            "point right at forty five degrees",
            {"side": "right", "angle_deg": 10},
            {"side": "right", "angle_deg": 45.0},
        ),
        ("point left 120 degrees", {"side": "left"}, {"side": "left", "angle_deg": 120.0}),  # as said
        ("point to the left", {"side": "left", "angle_deg": 30}, {"side": "left", "angle_deg": 30}),
    ],
)
def test_the_one_angle_without_a_side_is_the_degrees_said(text, args, expected):
    assert follow_words(text, _schema(skill(clamp=True)(_point)), args) == expected


def test_degrees_said_with_a_side_go_to_the_signed_argument(look):
    # look has no unsigned angle: "30 degrees to the right" is the yaw's, as before
    assert follow_words("turn 30 degrees to the right", look, {"yaw_deg": 0}) == {"yaw_deg": -30.0}


@pytest.mark.parametrize(
    ("text", "hand"),
    [
        ("wave", "right"),  # a new user's chat: "wave", "hi there", "goodbye" all waved left
        ("goodbye", "right"),
        ("wave your left hand", "left"),
        ("now the other hand", "left"),  # "other" without a last wave: the model's choice stands
    ],
)
def test_a_side_the_words_do_not_choose_is_the_schema_default(wave, text, hand):
    assert follow_words(text, wave, {"hand": "left"}) == {"hand": hand}


def test_a_magnitude_past_the_range_counts_as_none(look):
    # the bench's misheard "turn your head dirty the breeze to the right": the model wrote yaw 180
    assert follow_words("turn your head to the right", look, {"yaw_deg": 180}) == {"yaw_deg": -30.0}
    # a number the user said is theirs: kept as said (the registry holds it to the range, aloud)
    assert follow_words("turn 90 degrees to the right", look, {"yaw_deg": 180}) == {"yaw_deg": -90.0}


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        # a new user's chat: both turned the head right
        ("what do you see right now", {"pitch_deg": 1.2}, {"pitch_deg": 1.2}),
        (
            "raise your right arm 45 degrees",
            {"yaw_deg": 45, "pitch_deg": -30},
            {"yaw_deg": 45, "pitch_deg": -30},
        ),
        ("all right, look to the left", {"yaw_deg": 0}, {"yaw_deg": 30.0}),
        ("look to the right side", {"yaw_deg": 0}, {"yaw_deg": -30.0}),
    ],
)
def test_a_side_word_that_names_no_direction_turns_nothing(look, text, args, expected):
    assert follow_words(text, look, args) == expected


def test_a_side_before_hand_still_turns_the_head(look):
    # bench --accuracy: Whisper heard "to the right and then wave" as "turn the right hand wave"
    heard = "turn your head 30 degrees turn the right hand wave"
    assert follow_words(heard, look, {"yaw_deg": 30}) == {"yaw_deg": -30.0}


@pytest.fixture(scope="module")
def nod():
    return _motion("nod")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Can you nod your head twice?", 2),
        ("nod three times", 3),
        ("nod your head 4 times", 4),
        ("nod once", 1),
        ("what time is it", None),
        ("nod your head", None),
        ("nod once or twice", None),
    ],
)
def test_spoken_count(text, expected):
    assert spoken_count(text) == expected


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        # the "Can you nod your head twice?" nodded once: the model left the count out
        ("Can you nod your head twice?", {}, {"times": 2}),
        ("nod three times", {"times": 1}, {"times": 3}),
        ("nod ten times", {"times": 10}, {"times": 10}),  # as said: the registry clamps, aloud
        ("nod your head if you can hear me", {"times": 3}, {"times": 1}),  # no count said: one
        ("nod your head", {}, {}),  # nothing to follow: the skill's default applies
    ],
)
def test_a_count_is_the_one_said(nod, text, args, expected):
    assert nod["properties"]["times"]["type"] == "integer"
    assert follow_words(text, nod, args) == expected


@pytest.fixture(scope="module")
def wave():
    return _motion("wave")


@pytest.mark.parametrize(
    ("text", "args", "before", "expected"),
    [
        ("now the other hand", {"hand": "right"}, {"hand": "right"}, {"hand": "left"}),
        ("wave the other hand", {}, {"hand": "left"}, {"hand": "right"}),
        ("now the other hand", {"hand": "left"}, None, {"hand": "left"}),  # no last wave: the model's
        ("the other hand, the right one", {"hand": "right"}, {"hand": "right"}, {"hand": "right"}),  # named
        ("wave again", {"hand": "left"}, {"hand": "left"}, {"hand": "right"}),  # not chosen: default
    ],
)
def test_the_other_side_is_the_one_the_last_call_did_not_take(wave, text, args, before, expected):
    assert follow_words(text, wave, args, before) == expected


def test_the_other_way_mirrors_the_last_turn(look):
    before = {"yaw_deg": 30.0, "pitch_deg": 15.0}
    assert follow_words("now the other way", look, {"yaw_deg": 30}, before) == {
        "yaw_deg": -30.0,
        "pitch_deg": -15.0,
    }
    # a side named decides, as without a last call
    assert follow_words("the other way, to the left", look, {"yaw_deg": 0}, before)["yaw_deg"] > 0
    assert follow_words("now the other way", look, {"yaw_deg": 10}, None) == {"yaw_deg": 10}


@pytest.mark.parametrize(
    ("text", "args", "expected"),
    [
        ("wave twice", {}, {"times": 2}),  # waved once before wave took a count
        # SmolLM2-135M wrote wave(times 3) and left the hand out: the right hand waved
        ("can you wave with your left hand three times", {"times": 3}, {"times": 3, "hand": "left"}),
        ("wave your right hand", {"hand": "left"}, {"hand": "right"}),
        ("wave with your left hand", {"hand": "right"}, {"hand": "left"}),
    ],
)
def test_a_wave_follows_the_count_and_the_hand_said(wave, text, args, expected):
    assert follow_words(text, wave, args) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("wave your left hand", {"left"}),
        ("raise your right arm", {"right"}),
        ("look to the left", set()),
        ("left hand, no, right hand", {"left", "right"}),
        ("on your left side", {"left"}),
    ],
)
def test_limb_sides(text, expected):
    assert limb_sides(text) == expected


@pytest.mark.parametrize(
    ("text", "unsaid"),
    [
        ("set a timer", "seconds"),  # SmolLM2-135M wrote seconds 10 for it
        ("set a timer for the pasta", "seconds"),
        ("set a timer for five minutes", None),
        ("set a ten minute timer", None),
        ("a timer for 1 minute 30 seconds", None),
    ],
)
def test_a_length_nobody_said_is_asked_for(timer, text, unsaid):
    assert length_unsaid(text, timer) == unsaid


def test_only_a_required_length_is_asked_for(nod, look):
    assert length_unsaid("nod your head", nod) is None  # no argument in seconds
    assert length_unsaid("look left", look) is None


@pytest.mark.parametrize(
    ("text", "label", "expected"),
    [
        # SmolLM2-135M's labels (a new user's chat): cancelling by them picked both timers
        ("set a timer for ten minutes", "ten-minute-game", "ten"),  # timer_label drops a length
        ("cancel the timer", "Cancel the game", "cancel the"),
        ("set a timer for the pasta", "game", "timer"),  # none of it said: the default
        ("set a pasta timer for five minutes", "pasta", "pasta"),
    ],
)
def test_a_label_keeps_only_the_words_said(timer, text, label, expected):
    assert follow_words(text, timer, {"seconds": 1, "label": label})["label"] == expected


@pytest.mark.parametrize(
    ("tool", "text", "args", "expected"),
    [
        ("nod", "nod ten times", {"times": 10}, {"times"}),
        ("look", "turn your head 200 degrees to the left", {"yaw_deg": 200.0, "pitch_deg": 0.0}, {"yaw_deg"}),
        ("look", "look down 50 degrees", {"pitch_deg": -50.0}, {"pitch_deg"}),
        # the model's own number: "dance" ran look(pitch 200) too (bench --accuracy, measured)
        ("look", "can you dance for me", {"pitch_deg": 200.0}, set()),
        ("nod", "nod twice", {"times": 5}, set()),
        ("wave", "wave", {"times": 1}, set()),
    ],
)
def test_said_values_are_the_numbers_the_user_said(tool, text, args, expected):
    assert said_values(text, _motion(tool), args) == expected


def test_only_a_clamp_the_user_asked_for_is_told():
    from datetime import datetime

    from agent.config import load_config
    from agent.skills import load_registry
    from hardware.factory import build_robot

    robot, _ = build_robot(load_config().robot)
    ctx = SkillContext(robot=robot, now=lambda: datetime(2026, 12, 5, 14, 5))
    try:
        reg = load_registry([])
        mine = reg.call("look", {"pitch_deg": 200.0}, ctx, asked=frozenset())
        assert mine.ok and "clamped to 30" in mine.result["note"] and mine.told == ""
        theirs = reg.call("look", {"pitch_deg": 200.0}, ctx, asked=frozenset({"pitch_deg"}))
        assert theirs.told == "I can tilt my head at most 30 degrees up."
    finally:
        robot.stop()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("set a timer for minus 5 seconds", -5.0),
        ("a timer for negative two minutes", -120.0),
        ("minus forty five seconds", -45.0),
        ("set a timer for 5 seconds", 5.0),
        ("minus the wait, 5 seconds", 5.0),  # "minus" that says no sign of the length
    ],
)
def test_a_length_said_below_zero_stays_below_zero(text, seconds):
    """A new user's chat: "set a timer for minus 5 seconds" started a 5 s timer and said "All right!"."""
    from agent.conversation.small.argprior import spoken_seconds

    assert spoken_seconds(text) == seconds


# --- any skill's arguments from its schema (a skill author's own) -----------------------------------
def _author_skill(source: str):
    ns: dict = {}
    exec(
        "from typing import Annotated, Literal\nfrom pydantic import Field\n"
        "from agent.skills import skill\n" + source,
        ns,
    )
    fn = next(v for v in ns.values() if is_skill(v))
    return build_skill(fn, "author.py:1", {})


DICE = (
    "@skill\n"
    "def roll_dice(sides: Annotated[int, Field(ge=2, le=100, description='faces of the die')] = 6) -> str:\n"
    "    '''Roll a die.'''\n"
    "    return 'rolled'\n"
)
BLINK = (
    "@skill\n"
    "def blink(color: Literal['red', 'green', 'blue', 'light blue'] = 'blue', times: int = 1) -> str:\n"
    "    '''Blink the lights.'''\n"
    "    return 'blinked'\n"
)


@pytest.mark.parametrize(
    ("said", "written", "expected"),
    [
        ("Roll a twenty-sided die.", {"sides": 2}, {"sides": 20}),
        ("Roll a 12 sided die for me.", {"sides": 2}, {"sides": 12}),
        ("Roll a die.", {"sides": 2}, {"sides": 6}),  # nothing said: the default
        ("Roll a die.", {}, {}),  # left out by the model: the registry's default
    ],
)
def test_a_number_said_fills_any_skills_number(said, written, expected):
    sk = _author_skill(DICE)
    assert follow_words(said, sk.parameters, written) == expected


@pytest.mark.parametrize(
    ("said", "written", "expected"),
    [
        ("Blink the red lights.", {"color": "blue"}, {"color": "red"}),
        ("Blink in light blue please.", {"color": "green"}, {"color": "light blue"}),
        ("Blink the lights.", {"color": "green"}, {"color": "blue"}),  # nothing said: the default
        ("Blink red or green.", {"color": "green"}, {"color": "green"}),  # two said: the model decides
    ],
)
def test_a_choice_said_word_for_word_fills_any_skills_enum(said, written, expected):
    sk = _author_skill(BLINK)
    assert follow_words(said, sk.parameters, written)["color"] == expected["color"]
