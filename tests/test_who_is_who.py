"""Who is who (issue 50, item 4): the robot's name from the config, the user's name and facts kept.

``[agent] name`` in the system prompt and in the answer to "what's your name?"; ``remember``,
``forget`` and ``recall`` on a real state store in a tmp folder, across a reopen (a restart);
what is remembered reaches the model in the state line of each turn. The conversation on the
stand-in model, and a restart of the whole agent, are in ``test_everyday.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_state import open_store

from agent.config import load_config
from agent.skills import SkillContext, load_registry
from agent.state.memory import Memory, name_said, to_second_person

WHO = ["own_name", "remember", "forget", "recall"]


@pytest.fixture(scope="module")
def registry():
    return load_registry([], True, WHO, entry_points=False)


def test_the_robot_is_called_by_the_configured_name(tmp_path: Path, registry):
    cfg_file = tmp_path / "robot.toml"
    cfg_file.write_text('[agent]\nname = "Robo"\n')
    cfg = load_config(cfg_file)
    assert cfg.llm.system_prompt.startswith("You are Robo, a small friendly robot")
    assert "{name}" not in cfg.llm.system_prompt
    out = registry.call("own_name", {}, SkillContext(robot=None, robot_name=cfg.agent.name))
    assert out.ok and out.result == "My name is Robo."
    assert load_config().llm.system_prompt.startswith("You are Bolt,")  # the default name


def test_a_name_must_be_given(tmp_path: Path):
    from agent.config import ConfigError

    cfg_file = tmp_path / "robot.toml"
    cfg_file.write_text('[agent]\nname = ""\n')
    with pytest.raises(ConfigError, match="agent.name"):
        load_config(cfg_file)


@pytest.mark.parametrize(
    ("said", "name"),
    [
        ("my name is Sam", "Sam"),
        ("call me alex", "Alex"),
        ("I'm Ada Lovelace", "Ada Lovelace"),
        ("I am tired", None),
        ("I like jazz", None),
    ],
)
def test_a_name_is_told_from_how_someone_is(said, name):
    assert name_said(said) == name


def test_facts_are_said_back_to_their_speaker():
    assert to_second_person("I like my cat") == "you like your cat"


def test_the_name_and_facts_are_kept_across_a_restart_and_forgotten_on_request(tmp_path: Path, registry):
    path = tmp_path / "state.sqlite3"
    store, problems = open_store(path)
    ctx = SkillContext(robot=None, memory=Memory(store))
    said = registry.call("remember", {"fact": "my name is Sam"}, ctx)
    assert said.ok and said.result == "Nice to meet you, Sam. I will remember your name.", said
    jazz = registry.call("remember", {"fact": "I like jazz"}, ctx)
    assert jazz.ok and jazz.result == "Okay, I will remember that you like jazz.", jazz
    assert registry.call("remember", {"fact": "call me Sammy"}, ctx).ok  # one name: the new one
    store.close()

    store, _ = open_store(path)  # the next start
    ctx = SkillContext(robot=None, memory=Memory(store))
    assert registry.call("recall", {"about": "name"}, ctx).result == "Your name is Sammy."
    everything = registry.call("recall", {}, ctx)
    assert everything.result == "You told me that your name is Sammy and you like jazz.", everything
    assert ctx.memory.context_line() == "the user's name is Sammy; the user told you: I like jazz"

    gone = registry.call("forget", {"what": "my name"}, ctx)
    assert gone.ok and gone.result == "I forgot that your name is Sammy.", gone
    assert registry.call("recall", {"about": "name"}, ctx).result == (
        "I don't know your name yet. You can tell me."
    )
    nothing = registry.call("forget", {"what": "that I play chess"}, ctx)
    assert nothing.result == "I don't remember that you play chess.", nothing
    assert registry.call("forget", {"what": "jazz"}, ctx).result == "I forgot that you like jazz."
    assert store.facts() == [] and problems == []
    assert registry.call("recall", {}, ctx).result == "You have not told me anything to remember yet."


def test_forget_everything(registry):
    ctx = SkillContext(robot=None, memory=Memory())
    for fact in ("my name is Sam", "I like jazz", "I have a cat"):
        registry.call("remember", {"fact": fact}, ctx)
    out = registry.call("forget", {"what": "everything"}, ctx)
    assert out.result == "I forgot 3 things you told me." and ctx.memory.facts() == []


def test_what_is_remembered_is_in_the_state_line_of_each_turn():
    """The model is told in the line each user message carries, not in the system prompt (the
    prompt prefix stays byte-stable for the KV cache)."""
    from agent.pipeline.core import AgentCore

    memory = Memory()
    core = AgentCore.__new__(AgentCore)  # only what state_line reads: no models loaded
    core.vision, core.narrator = None, None
    core.ctx = SkillContext(robot=None, memory=memory)
    assert core.state_line() is None
    memory.remember("my name is Sam")
    memory.remember("I like jazz")
    assert core.state_line() == "the user's name is Sam; the user told you: I like jazz"


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        ("remember that I like jazz", "I like jazz"),
        ("Please remember: my cat is called Tom.", "my cat is called Tom"),
        ("my name is Sam", "my name is Sam"),
    ],
)
def test_the_fact_is_read_from_the_words(said, fact):
    from skills.memory import fact_in

    assert fact_in(said) == fact
