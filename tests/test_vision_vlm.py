"""The vision-language layer: frames to words through real llama.cpp, into the chat model's context.

No package ships a VLM's weights, so the words are whatever a test projector (random weights in
a real projector's shapes, ``tests/vision_models.py``) makes SmolLM2 say: tests assert the
plumbing (the image reaches the model, the words reach the context with their age, nothing
waits for a slow describer, a broken projector leaves OpenCV running), never the wording.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from rig import AgentRig
from vision_models import idefics3_projector, smollm2_vision_model

from agent.config import load_config
from agent.events import Error, Notice, Reply, SceneDescribed, ToolCall, ToolResult
from agent.pipeline import Bus, build_core
from agent.vision.describer import DescribeError, bound, clean, frame_jpeg, native_image_size
from agent.vision.narrator import change, thumbnail
from hardware.camera.sources import read_image
from tools.bench.latency import EventLog


def words(text: str) -> int:
    return len(text.split())


def test_clean_leaves_plain_sentences():
    raw = (
        "<|channel>thought hmm<channel|>\n- A man at a desk.\n- He holds a mug."
        "<|tool_call>call:x{}<tool_call|>"
    )
    assert clean(raw) == "A man at a desk. He holds a mug."
    assert clean("<end_of_turn>") == ""
    assert clean('"A dog on a sofa."') == "A dog on a sofa."


def test_bound_cuts_at_a_sentence_then_a_word():
    text = "One two three. Four five six seven. Eight."
    assert bound(text, 20, words) == text
    assert bound(text, 5, words) == "One two three."
    assert bound("one two three four five six", 3, words) == "one two three…"
    assert words(bound("a b c d e f g h", 4, words)) <= 4


def test_frames_go_out_at_the_projectors_native_size(fixtures_dir):
    frame = read_image(fixtures_dir / "images" / "two_people.jpg")
    assert max(frame.shape[:2]) > 256
    proj = idefics3_projector(image_size=128, preproc_image_size=256)
    assert native_image_size(proj) == 256  # the tile size, not the encoder's patch grid
    assert native_image_size(None, 384) == 384
    import cv2

    jpg = cv2.imdecode(np.frombuffer(frame_jpeg(frame, 256), np.uint8), cv2.IMREAD_COLOR)
    assert max(jpg.shape[:2]) == 256
    with pytest.raises(DescribeError, match="empty"):
        frame_jpeg(np.zeros((0, 0, 3), np.uint8), 256)


def test_thumbnail_change_sees_a_new_picture_not_noise(fixtures_dir):
    a = read_image(fixtures_dir / "images" / "two_people.jpg")
    b = read_image(fixtures_dir / "images" / "dog.jpg")
    noisy = np.clip(a.astype(np.int16) + np.random.default_rng(0).integers(-8, 9, a.shape), 0, 255).astype(
        np.uint8
    )
    assert change(thumbnail(a), thumbnail(noisy)) < 0.02
    assert change(thumbnail(a), thumbnail(b)) > 0.1


@pytest.fixture(scope="module")
def photo_folder(fixtures_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("camera")
    shutil.copy(fixtures_dir / "images" / "person.jpg", folder / "person.jpg")
    return folder


def vlm_config(photo_folder: Path, **vlm):
    cfg = load_config()
    cfg.llm.model = str(smollm2_vision_model())
    cfg.camera.source = str(photo_folder)
    cfg.vision.describer = "vlm"
    cfg.vision.vlm.mmproj = str(idefics3_projector())
    cfg.vision.vlm.min_interval_s = 1.0
    for k, v in vlm.items():
        setattr(cfg.vision.vlm, k, v)
    return cfg


@pytest.fixture(scope="module")
def seeing(photo_folder):
    rig = AgentRig(vlm_config(photo_folder))
    yield rig
    rig.close()


def test_the_chat_models_own_vision_answers_what_do_you_see(seeing):
    agent = seeing
    assert agent.core.narrator is not None and agent.core.model.vision
    evs = agent.text("What do you see?")
    calls = evs.of(ToolCall)
    assert [c.tool for c in calls][:1] == ["describe_scene"], calls
    result = next(e for e in evs.of(ToolResult) if e.tool == "describe_scene")
    assert result.ok and result.result["description"], result.result
    described = [e for e in agent.events if isinstance(e, SceneDescribed) and e.trigger == "asked"]
    assert described and described[-1].image_tokens > 0 and described[-1].took_ms > 0
    assert described[-1].text == result.result["description"]
    json.dumps(result.result)


def test_the_description_enters_the_next_turn_with_its_age(seeing):
    agent = seeing
    narrator = agent.core.narrator
    first = narrator.describe_now()
    time.sleep(1.1)
    line = agent.core.state_line()
    age = narrator.age_s(first)  # from the frame's capture, not from the answer
    got = re.search(r"; described (\d+) s ago: (.*)$", line)
    assert line.startswith("camera, ") and got and got.group(2) == first.text, line
    assert age >= 1.1 and abs(int(got.group(1)) - age) <= 1.0
    agent.text("Hello.")
    user = [m for m in agent.core.conversation.history if m["role"] == "user"][-1]
    assert "described" in user["content"] and first.text in user["content"]
    assert "described" not in agent.core.conversation.system_prompt()
    # A newer description replaces the older one; its length is bounded in the chat model's tokens.
    narrator.describer.context_tokens = 6
    second = narrator.describe_now()
    assert agent.core.model.count_tokens(second.text) <= 6
    assert agent.core.state_line().count("described") == 1 and second.text in agent.core.state_line()
    narrator.describer.context_tokens = 80


def test_a_background_look_waits_for_quiet_stops_for_a_turn_and_comes_back(seeing):
    from agent.vision.narrator import SceneNarrator

    core = seeing.core  # its own narrator is idle between pipelines; this one is driven by hand
    floor_free = threading.Event()
    narrator = SceneNarrator(core.vision, core.narrator.describer, shares_model=True, quiet_s=0.3)
    narrator.idle = floor_free.is_set
    narrator.request("arrived")
    assert narrator.step() is None  # nobody may look while the floor is taken
    floor_free.set()
    assert narrator.step() is None  # ...nor the moment it is free
    time.sleep(0.35)
    # The floor is taken again right after the look starts: the round stops between tokens.
    threading.Timer(0.05, floor_free.clear).start()
    assert narrator.step() is None and narrator.preempted == 1 and narrator.latest() is None
    floor_free.set()
    narrator.step()
    time.sleep(0.35)
    d = narrator.step()  # the trigger waited for the next quiet moment
    assert d is not None and d.trigger == "arrived" and narrator.latest() is d


class SlowVision(BaseHTTPRequestHandler):
    """An OpenAI-compatible vision endpoint that takes ``delay_s`` to answer (a busy GPU box)."""

    delay_s = 4.0
    images: list[str] = []
    answered: list[float] = []

    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self):  # http.server's naming
        self.send_error(404)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        parts = body["messages"][-1]["content"]
        SlowVision.images += [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
        time.sleep(self.delay_s)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for chunk in (
            {"choices": [{"delta": {"content": "A person stands in a room."}}]},
            {"choices": [{"delta": {}, "finish_reason": "stop"}]},
        ):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        SlowVision.answered.append(time.monotonic())


@pytest.fixture
def slow_endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowVision)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_a_slow_describer_never_delays_a_turn(photo_folder, slow_endpoint):
    cfg = vlm_config(photo_folder, engine="openai", url=slow_endpoint, mmproj="", model="a-vlm")
    cfg.llm.model = "packaged:smollm2-135m"
    rig = AgentRig(cfg)
    try:
        narrator = rig.core.narrator
        assert narrator is not None and not narrator.shares_model
        SlowVision.answered.clear()
        narrator.request("arrived")
        narrator.start(lambda: True)
        deadline = time.monotonic() + narrator.quiet_s + 4
        while not SlowVision.images and time.monotonic() < deadline:
            time.sleep(0.05)
        assert SlowVision.images and SlowVision.images[-1].startswith("data:image/jpeg;base64,")
        t0 = time.monotonic()
        evs = rig.text("What time is it?")
        turn_s = time.monotonic() - t0
        replies = evs.of(Reply)
        assert len(replies) == 1 and replies[0].text, evs  # the turn ran to its end and answered
        assert not SlowVision.answered, f"the turn ({turn_s:.1f} s) waited for the describer"
        deadline = time.monotonic() + 15
        while narrator.latest() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert narrator.latest() is not None and narrator.latest().text == "A person stands in a room."
        assert "described" in rig.core.state_line()
    finally:
        rig.close()


def test_a_broken_projector_leaves_opencv_running(photo_folder, tmp_path):
    garbage = tmp_path / "mmproj.gguf"
    garbage.write_bytes(b"GGUF" + bytes(100))
    for mmproj, said in ((garbage, "not a readable GGUF"), (tmp_path / "absent.gguf", "not found")):
        log = EventLog()
        cfg = vlm_config(photo_folder, mmproj=str(mmproj))
        core = build_core(cfg, Bus(log).publish)
        try:
            notes = [e.message for e in log.events if isinstance(e, (Notice, Error))]
            assert any(said in m and "OpenCV only" in m for m in notes), notes
            assert core.narrator is None and core.vision is not None and not core.model.vision
            out = core.registry.call("describe_scene", {}, core.ctx)
            deadline = time.monotonic() + 5
            while not out.ok and time.monotonic() < deadline:  # the camera's first frame
                time.sleep(0.2)
                out = core.registry.call("describe_scene", {}, core.ctx)
            assert out.ok and "people" in out.result and "description" not in out.result
        finally:
            core.close()


SIM_SEE = """
import json, time
import reachy_daemon as rd
from rig import AgentRig
from vision_models import idefics3_projector, smollm2_vision_model
from agent.config import load_config
from agent.events import SceneDescribed, ToolCall, ToolResult

cfg = load_config()
cfg.llm.model = str(smollm2_vision_model())
cfg.robot.driver = "reachy_mini"
cfg.robot.reachy_mini.host = "127.0.0.1"
cfg.camera.source = "reachy_mini_sim"
cfg.vision.describer = "vlm"
cfg.vision.vlm.mmproj = str(idefics3_projector())
out = {}
with rd.daemon("sim"):
    rig = AgentRig(cfg)
    try:
        deadline = time.monotonic() + 30
        while rig.core.vision.camera.latest() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        evs = rig.text("What do you see?")
        out["tools"] = [e.tool for e in evs.of(ToolCall)]
        result = next((e for e in evs.of(ToolResult) if e.tool == "describe_scene"), None)
        out["result"] = result.result if result is not None else None
        out["described"] = [
            [e.trigger, e.image_tokens, e.text] for e in rig.events if isinstance(e, SceneDescribed)
        ]
        frame, _ = rig.core.vision.camera.latest()
        out["frame"] = list(frame.shape)
        out["state_line"] = rig.core.state_line()
    finally:
        rig.close()
print(json.dumps(out))
"""


def test_see_describes_the_simulated_eye_camera_end_to_end():
    import reachy_daemon as rd

    problem = rd.netns_problem()
    if problem:
        pytest.skip(problem)
    out = rd.run_in_netns(SIM_SEE, timeout=300)
    print(out)
    assert out["frame"] == [360, 640, 3]  # the MuJoCo eye camera's render
    assert "describe_scene" in out["tools"], out
    assert out["result"]["description"], out["result"]
    asked = [d for d in out["described"] if d[0] == "asked"]
    assert asked and asked[-1][1] > 0 and asked[-1][2] == out["result"]["description"]
    assert "described" in out["state_line"]


def test_see_prints_the_vision_models_words_for_a_known_image(fixtures_dir, tmp_path):
    import subprocess
    import sys

    image = fixtures_dir / "images" / "kite.jpg"

    def see(config: Path, *flags: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "agent", "see", str(image), "--config", str(config), *flags]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180)

    config = tmp_path / "see.toml"
    config.write_text(
        f'[llm]\nmodel = "{smollm2_vision_model()}"\n\n[vision]\ndescriber = "vlm"\n\n'
        f'[vision.vlm]\nmmproj = "{idefics3_projector()}"\n'
    )
    r = see(config, "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["description"] and out["image_tokens"] > 0 and out["describe_ms"] > 0
    assert "people" in out  # the OpenCV layer's facts stay
    broken = tmp_path / "broken.toml"
    broken.write_text(config.read_text().replace(str(idefics3_projector()), str(tmp_path / "none.gguf")))
    r = see(broken)
    # a file the config names that is not there: a config to fix (exit 2, as docs/command-line.md says)
    assert r.returncode == 2 and "none.gguf" in r.stderr and "not found" in r.stderr
    (tmp_path / "junk.gguf").write_bytes(b"not a projector" * 64)
    broken.write_text(config.read_text().replace(str(idefics3_projector()), str(tmp_path / "junk.gguf")))
    r = see(broken)
    assert r.returncode == 1 and "junk.gguf" in r.stderr, r.stderr  # a broken model: it failed
    broken.write_text('[vision]\ndescriber = "vlm"\n')
    r = see(broken)
    assert r.returncode == 2 and "needs [vision.vlm] mmproj" in r.stderr, r.stderr


def test_a_separate_vlm_runs_as_its_own_llama_server(photo_folder):
    from agent.engines.remote.server_process import find_binary

    if find_binary("") is None:
        pytest.skip("llama-server not built: run launch/build_llama_server.sh (launch/setup.sh test does)")
    cfg = vlm_config(
        photo_folder,
        engine="llama-server",
        model=str(smollm2_vision_model()),
        n_ctx=2048,
        threads=2,
    )
    cfg.llm.model = "packaged:smollm2-135m"
    log = EventLog()
    core = build_core(cfg, Bus(log).publish)
    try:
        narrator = core.narrator
        assert narrator is not None, [getattr(e, "message", "") for e in log.events]
        assert narrator.describer.engine is not core.model and not narrator.shares_model
        deadline = time.monotonic() + 10
        while core.vision.camera.latest() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        d = narrator.describe_now()
        assert d.text and d.prompt_tokens > d.image_tokens > 0
        server = narrator.describer.engine.server
        assert server.alive()
    finally:
        core.close()
    assert not server.alive()  # the VLM's server stops with the agent


def test_a_model_that_takes_a_clip_gets_the_newest_frames_in_order(fixtures_dir, tmp_path):
    folder = tmp_path / "clip"
    folder.mkdir()
    for name in ("dog.jpg", "kite.jpg"):  # the folder source cycles through them at 2 Hz
        shutil.copy(fixtures_dir / "images" / name, folder / name)
    log = EventLog()
    core = build_core(vlm_config(folder, frames=2, frame_gap_s=0.4), Bus(log).publish)
    try:
        narrator = core.narrator
        narrator.idle = lambda: False  # sample only: no background look
        deadline = time.monotonic() + 5
        while len(narrator.clip_times) < 2 and time.monotonic() < deadline:
            narrator.step()
            time.sleep(0.1)
        older, newer = narrator.clip_times
        assert newer - older >= 0.4  # spaced by frame_gap_s, oldest first
        one = core.narrator.describer.describe([core.vision.camera.latest()[0]], 0.0)
        both = narrator.describe_now()
        assert both.frames == 2 and both.image_tokens == 2 * one.image_tokens > 0
    finally:
        core.close()
