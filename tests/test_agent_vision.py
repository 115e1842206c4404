"""The agent with a camera fed by a real video file answers "what do you see" from the scene."""

from __future__ import annotations

import pytest
from rig import AgentRig

from agent.config import load_config
from agent.conversation.results import carries_result
from agent.events import Notice, PlaybackStarted, Reply, Timing, ToolCall, ToolResult, Transcript
from agent.pipeline import Bus, build_core
from tools.bench.latency import EventLog


@pytest.fixture(scope="module")
def seeing_agent(fixtures_dir):
    cfg = load_config()
    cfg.camera.source = str(fixtures_dir / "video" / "short_hamilton_clip.mp4")
    rig = AgentRig(cfg)
    yield rig
    rig.close()


def test_spoken_what_do_you_see_uses_the_camera(seeing_agent, fixtures_dir):
    agent = seeing_agent
    assert agent.core.vision is not None
    evs = agent.listen(fixtures_dir / "commands" / "what_see.wav")
    assert len(evs.of(Transcript)) == 1
    calls = [e for e in evs if isinstance(e, ToolCall)]
    assert any(c.tool == "describe_scene" for c in calls), (evs.of(Transcript)[0].text, calls)
    result = next(e for e in evs if isinstance(e, ToolResult) and e.tool == "describe_scene")
    assert result.ok and ("people" in str(result.result) or "person" in str(result.result))
    reply = next(e for e in evs if isinstance(e, Reply))
    # The scene's words reach the user (a new user heard "Let me look. What do you see?").
    assert carries_result(reply.text, result.result["summary"]), (reply.text, result.result["summary"])
    # "Let me look." is heard while the model still writes the round that reads the scene back.
    turn = reply.turn_id
    assert evs.of(PlaybackStarted, turn)[0].text == "Let me look."
    t = evs.of(Timing, turn)[0]
    assert t.llm_rounds == 2 and 0 < t.first_played_ms < t.asr_done_ms + t.llm_ms, t


def test_scene_summary_goes_into_the_newest_user_turn(seeing_agent):
    agent = seeing_agent
    agent.text("Hello.")
    conv = agent.core.conversation
    user = [m for m in conv.history if m["role"] == "user"][-1]
    assert "camera" in user["content"] and "s ago" in user["content"]
    assert " s ago" not in conv.system_prompt()  # the scene never enters the static prefix


def test_without_camera_the_agent_says_so():
    log = EventLog()
    core = build_core(load_config(), Bus(log).publish)
    try:
        assert core.vision is None
        assert any(isinstance(e, Notice) and "without vision" in e.message for e in log.events)
        out = core.registry.call("describe_scene", {}, core.ctx)
        assert not out.ok or "camera" in str(out.result).lower()
    finally:
        core.close()


def test_arrival_greeting_is_spoken_by_the_pipeline(fixtures_dir):
    import time

    from rig import Events

    from agent.events import Timing

    cfg = load_config()
    cfg.camera.source = str(fixtures_dir / "video" / "short_hamilton_clip.mp4")
    cfg.vision.greet_on_arrival = True
    rig = AgentRig(cfg)
    try:
        evs = Events()
        deadline = time.monotonic() + 30
        while not evs.of(Transcript) and time.monotonic() < deadline:
            evs += rig.text()  # an idle pipeline speaks up once the camera sees someone arrive
        greetings = [t for t in evs.of(Transcript) if t.text.startswith("(camera:")]
        assert greetings, evs
        tid = greetings[0].turn_id
        assert evs.of(Reply, tid)[0].text and evs.of(Timing, tid)
        assert not evs.of(ToolCall, tid)  # a greeting offers no tools
    finally:
        rig.close()
