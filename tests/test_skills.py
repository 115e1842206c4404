from datetime import datetime
from typing import Annotated, Literal

import pytest
from pydantic import Field

from agent.config import load_config
from agent.skills import Choices, SkillContext, SkillError, SkillRegistry, load_registry, skill
from hardware.factory import build_robot


@pytest.fixture()
def ctx():
    robot, _ = build_robot(load_config().robot)
    yield SkillContext(robot=robot, now=lambda: datetime(2026, 11, 29, 14, 5))
    robot.stop()


def test_builtin_skills_and_schemas():
    reg = load_registry([])
    assert {"wave", "nod", "look", "get_time", "stop"} <= set(reg.names())
    assert reg.load_errors == []
    wave = reg.skills["wave"].parameters
    assert wave["properties"]["hand"]["enum"] == ["left", "right"]
    assert wave["properties"]["hand"]["description"] == "Which hand waves."
    look = reg.skills["look"].parameters["properties"]
    assert look["yaw_deg"]["minimum"] == -60 and look["yaw_deg"]["maximum"] == 60
    assert "degrees" in look["yaw_deg"]["description"]
    assert "ctx" not in reg.skills["nod"].parameters["properties"]
    assert reg.skills["wave"].description == "Wave hello with one hand."
    # What moves the body (and fails under the emergency stop): a skill that needs joints,
    # and play_animation, which needs none; not the clock, the timer or stop.
    moving = {n for n, s in reg.skills.items() if s.moves}
    assert {"wave", "nod", "look", "dance", "play_animation"} <= moving
    assert not moving & {"get_time", "set_timer", "stop", "emergency_stop", "describe_scene"}


def test_a_wave_repeats_as_many_times_as_asked(ctx):
    reg = load_registry([])
    out = reg.call("wave", {"hand": "left", "times": 3}, ctx)
    assert out.ok and out.result == "I am waving my left hand 3 times.", out
    assert ctx.robot.playing == "wave" and ctx.robot.queued == ["wave", "wave"]
    clamped = reg.call("wave", {"times": 9}, ctx)
    assert clamped.result["result"] == "I am waving my right hand 5 times.", clamped
    assert "clamped to 5" in clamped.result["note"]
    assert clamped.told == "I can wave at most 5 times in a row."  # the person hears it too
    assert reg.call("wave", {"times": 2}, ctx).told == ""


def test_call_validates_and_reports(ctx):
    reg = load_registry([])
    bad = reg.call("wave", {"hand": "middle"}, ctx)
    assert not bad.ok and "hand" in bad.result and "'middle'" in bad.result
    unknown = reg.call("fly", {}, ctx)
    assert not unknown.ok and "unknown tool 'fly'" in unknown.result and "wave" in unknown.result
    extra = reg.call("nod", {"speed": 3}, ctx)
    assert not extra.ok and "speed" in extra.result
    notdict = reg.call("nod", [1, 2], ctx)
    assert not notdict.ok and "must be an object" in notdict.result
    assert reg.call("get_time", {}, ctx).result == "It is 14:05 on Sunday 29 November."


def test_a_call_fits_its_skill_only_as_the_schema_asks():
    reg = load_registry([])
    assert reg.fits("wave", {"hand": "left"}) and reg.fits("nod", {}) and reg.fits("nod", None)
    assert not reg.fits("wave", {"hand": "middle"})  # not one of the hands
    assert not reg.fits("look", {"yaw_deg": 90})  # would be clamped to 60
    assert not reg.fits("nod", {"speed": 3}) and not reg.fits("nod", [1, 2]) and not reg.fits("fly", {})


def test_clamped_skill_states_unit(ctx):
    reg = load_registry([])
    out = reg.call("look", {"yaw_deg": 200}, ctx)
    assert out.ok
    assert "clamped to 60" in out.result["note"] and "degrees" in out.result["note"]
    assert out.told == "I can turn my head at most 60 degrees to the left."
    ctx.robot.wait_idle(5)
    assert ctx.robot.positions()["head_yaw"] == pytest.approx(60, abs=0.01)
    both = reg.call("look", {"yaw_deg": -90.5, "pitch_deg": -45}, ctx)
    assert both.told == (
        "I can turn my head at most 60 degrees to the right. I can tilt my head at most 30 degrees down."
    )
    assert reg.call("nod", {"times": 0}, ctx).told == "I nod at least once."


def test_a_clamp_sentence_is_not_shown_to_the_model_and_has_a_generic_default(ctx):
    from agent.skills import Clamped

    reg = SkillRegistry()

    @skill(clamp=True)
    def bow(
        ctx: SkillContext,
        times: Annotated[int, Field(ge=1, le=3, description="how many times to bow, one after another")] = 1,
        depth_deg: Annotated[
            float,
            Field(ge=0, le=40, description="bow depth in degrees"),
            Clamped(above="{value} is too deep: {lim}"),
        ] = 20,
    ) -> str:
        """Bow to the person."""
        return f"bowing {times} times"

    reg.register(bow)
    props = reg.skills["bow"].parameters["properties"]
    assert set(props["depth_deg"]) == {"type", "minimum", "maximum", "description", "default"}
    out = reg.call("bow", {"times": 7}, ctx)
    assert out.ok and out.told == "The most I can do for how many times to bow is 3."
    # a sentence with a placeholder it cannot fill: the generic one, never a crash
    assert reg.call("bow", {"depth_deg": 70}, ctx).told == "The most I can do for bow depth in degrees is 40."


def test_exception_in_skill_becomes_result(ctx):
    reg = SkillRegistry()

    @skill
    def explode(ctx: SkillContext, n: Annotated[int, Field(ge=0, le=3)]) -> str:
        """Blow up."""
        raise RuntimeError("fuse lit")

    reg.register(explode)
    out = reg.call("explode", {"n": 1}, ctx)
    assert not out.ok and "RuntimeError: fuse lit" in out.result and out.raised == "fuse lit"
    out = reg.call("explode", {"n": 9}, ctx)
    # A number out of range: the model reads its error, a person hears what the skill needs.
    assert not out.ok and "less than or equal to 3" in out.result
    assert out.raised == "I can't explode: the n should be less than or equal to 3"
    # A wrong type is the model's writing: nothing for a person to hear.
    assert reg.call("explode", {"n": "many"}, ctx).raised == ""
    assert reg.call("explode", {"n": 1, "boom": True}, ctx).raised == ""


def test_a_bad_timer_is_told_as_what_it_needs(ctx):
    """A new user's "cancel the timer" ran set_timer(seconds 0); the reply read its error back:
    "Of course! Error: Invalid arguments for set_timer."."""
    from skills.timer import set_timer

    reg = SkillRegistry()
    reg.register(set_timer)
    out = reg.call("set_timer", {"seconds": 0}, ctx)
    assert (
        not out.ok
        and out.raised == "I can't set a timer: the timer length in seconds should be greater than 0"
    )
    missing = reg.call("set_timer", {}, ctx)
    assert missing.raised == "I can't set a timer: I need the timer length in seconds"


def test_timeout(ctx):
    import time

    reg = SkillRegistry(timeout_s=0.2)

    @skill
    def slow() -> str:
        """Take too long."""
        time.sleep(1)
        return "done"

    reg.register(slow)
    out = reg.call("slow", {}, ctx)
    assert not out.ok and "did not finish within 0.2 s" in out.result


def test_broken_skill_file_is_reported_and_others_load(tmp_path):
    (tmp_path / "good.py").write_text(
        "from agent.skills import skill\n\n@skill\ndef beep(times: int = 1) -> str:\n"
        "    '''Beep.'''\n    return 'beep' * times\n"
    )
    (tmp_path / "broken.py").write_text("from agent.skills import skill\n\nx = 1\nraise ValueError('oops')\n")
    (tmp_path / "syntax.py").write_text("def (:\n")
    (tmp_path / "untyped.py").write_text(
        "from agent.skills import skill\n\n@skill\ndef f(a):\n    '''F.'''\n"
    )
    reg = load_registry([tmp_path])
    assert "beep" in reg.names() and "wave" in reg.names()
    joined = "\n".join(reg.load_errors)
    assert f"{tmp_path / 'broken.py'}:4: skill file skipped: ValueError: oops" in joined
    assert f"{tmp_path / 'syntax.py'}:1: skill file skipped: SyntaxError" in joined
    assert "untyped.py:3: skill f: parameter 'a' needs a type annotation; skipped" in joined


def test_literal_and_defaults_in_schema():
    reg = SkillRegistry()

    @skill(name="set_mode")
    def mode(
        m: Literal["a", "b"], level: Annotated[float, Field(ge=0, le=1, description="gain 0..1")] = 0.5
    ) -> str:
        """Pick a mode.

        Args:
            m: The mode.
        """
        return m

    sk = reg.register(mode)
    assert sk.name == "set_mode"
    props = sk.parameters["properties"]
    assert props["m"] == {"enum": ["a", "b"], "type": "string", "description": "The mode."}
    assert props["level"]["default"] == 0.5 and props["level"]["description"] == "gain 0..1"
    assert sk.parameters["required"] == ["m"]


def test_choices_enum_comes_from_names_handed_to_the_registry(ctx):
    @skill
    def pick(
        color: Annotated[str, Choices("colors", default=("red", "blue")), Field(description="paint")],
    ) -> str:
        """Pick a color."""
        return color

    reg = SkillRegistry()
    reg.register(pick)
    assert reg.skills["pick"].parameters["properties"]["color"] == {
        "enum": ["blue", "red"],
        "type": "string",
        "description": "paint",
    }
    assert reg.skills["pick"].choices == ("colors",)
    assert not reg.call("pick", {"color": "green"}, ctx).ok
    reg.set_choices("colors", ["green", "teal", "green"])
    assert reg.skills["pick"].parameters["properties"]["color"]["enum"] == ["green", "teal"]
    assert reg.call("pick", {"color": "green"}, ctx).result == "green"
    assert not reg.call("pick", {"color": "red"}, ctx).ok
    reg.set_choices("colors", ["teal"])  # one name is still an enum (pydantic alone would give "const")
    assert reg.skills["pick"].parameters["properties"]["color"] == {
        "enum": ["teal"],
        "type": "string",
        "description": "paint",
    }
    reg.set_choices("colors", [])
    assert reg.skills["pick"].parameters["properties"]["color"]["enum"] == ["none"]

    @skill
    def count(n: Annotated[int, Choices("colors")]) -> int:
        """Count."""
        return n

    with pytest.raises(SkillError, match="Choices needs one marker on a str"):
        reg.register(count)


def test_abilities_are_the_skills_offered_in_their_own_words(ctx):
    """ "what can you do?" lists what this body can do: each skill's ability, once, in order."""
    reg = load_registry([])
    said = reg.abilities()
    assert said[:5] == ["tell the time anywhere", "remember what you tell me", "wave", "nod", "dance"]
    assert "set timers" in said and "" not in said and len(said) == len(set(said))
    assert not {"stop", "emergency stop", "abilities"} & set(said)  # ability="": not said
    ctx.abilities = said
    out = reg.call("abilities", {}, ctx)
    assert (
        out.ok
        and out.result.startswith("I can tell the time anywhere, remember what you tell me, wave, nod,")
        and out.result.endswith(" and look at people.")  # no devices named: every skill offered
    )

    @skill
    def greet_guest(ctx: SkillContext) -> str:
        """Greet a guest."""
        return "hello"

    own = SkillRegistry()
    own.register(greet_guest)
    assert own.abilities() == ["greet guest"]  # the name's words when none is given
    ctx.abilities = []
    assert reg.call("abilities", {}, ctx).result == "I can talk with you."
