"""The agent with a camera fed by a real video file answers "what do you see" from the scene."""

from __future__ import annotations

import pytest

from agent.config import load_config
from agent.events import Notice, Reply, ToolCall, ToolResult
from agent.pipeline import VoiceAgent


class Recorder(list):
    def __call__(self, ev):
        self.append(ev)


@pytest.fixture(scope="module")
def seeing_agent(fixtures_dir, tmp_path_factory):
    cfg = load_config()
    cfg.camera.source = str(fixtures_dir / "video" / "short_hamilton_clip.mp4")
    rec = Recorder()
    agent = VoiceAgent(cfg, rec, tmp_path_factory.mktemp("out"))
    agent.warmup()
    yield agent, rec
    agent.close()


def test_spoken_what_do_you_see_uses_the_camera(seeing_agent, fixtures_dir):
    agent, rec = seeing_agent
    assert agent.vision is not None
    start = len(rec)
    assert agent.handle_file(fixtures_dir / "commands" / "what_see.wav") == 1
    evs = rec[start:]
    calls = [e for e in evs if isinstance(e, ToolCall)]
    assert any(c.tool == "describe_scene" for c in calls), calls
    result = next(e for e in evs if isinstance(e, ToolResult) and e.tool == "describe_scene")
    assert result.ok and ("people" in str(result.result) or "person" in str(result.result))
    reply = next(e for e in evs if isinstance(e, Reply))
    assert reply.text


def test_scene_summary_goes_into_the_newest_user_turn(seeing_agent):
    agent, _ = seeing_agent
    agent.handle_text("Hello.")
    user = [m for m in agent.conversation.history if m["role"] == "user"][-1]
    assert "camera" in user["content"] and "s ago" in user["content"]
    assert " s ago" not in agent.conversation.system_prompt()  # the scene never enters the static prefix


def test_without_camera_the_agent_says_so(tmp_path):
    rec = Recorder()
    agent = VoiceAgent(load_config(), rec, tmp_path)
    try:
        assert agent.vision is None
        assert any(isinstance(e, Notice) and "without vision" in e.message for e in rec)
        out = agent.registry.call("describe_scene", {}, agent.ctx)
        assert not out.ok or "camera" in str(out.result).lower()
    finally:
        agent.close()
