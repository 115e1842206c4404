"""The console's parts without a model: the hub's bounded queues, tokens, access checks, parsing,
and what it shows of a Reachy Mini body (nine joints, head x/y/z in millimetres, antennas, the
posture, motion, the driver's state, dances as playable gestures) on a simulated driver.
"""

from __future__ import annotations

import asyncio
import json
import stat
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.cli.main import optional_values
from agent.config import load_config
from agent.console import snapshot
from agent.console.auth import Access, RateLimiter, ensure_token, is_loopback
from agent.console.controls import ControlError, Controls
from agent.console.feed import ConsoleFeed, StateTicker, tee
from agent.console.hub import Hub, dumps
from agent.console.server import parse_bind
from agent.events import RobotCommand, ToolCall, ToolResult, Transcript
from agent.memplan import BudgetVerdict
from hardware.animation import linear_move
from hardware.config import REACHY_JOINTS
from hardware.joints import Joint
from hardware.robot import Robot
from hardware.servos.sim import SimulatedDriver

ROOT = Path(__file__).resolve().parent.parent


def test_a_client_that_does_not_read_loses_the_oldest_messages_and_is_told_how_many():
    hub = Hub(maxlen=4)
    client = hub.connect(None)
    for i in range(10):
        hub.post(dumps({"event": "n", "i": i}))
    got = [json.loads(m) for m in hub.take_now(client)]
    assert got[0] == {"event": "console", "turn_id": -1, "dropped": 6}
    assert [m["i"] for m in got[1:]] == [6, 7, 8, 9]
    assert hub.take_now(client) == []  # the count is reported once
    hub.post(dumps({"event": "n", "i": 10}))
    assert [json.loads(m)["i"] for m in hub.take_now(client)] == [10]


def test_post_never_waits_for_a_stuck_client():
    hub = Hub(maxlen=8)
    stuck = [hub.connect(None) for _ in range(5)]
    msg = dumps({"event": "robot", "x": "y" * 200})
    t0 = time.perf_counter()
    for _ in range(20_000):
        hub.post(msg)
    per_post_us = (time.perf_counter() - t0) / 20_000 * 1e6
    assert all(len(c.queue) == 8 and c.dropped == 20_000 - 8 for c in stuck)
    assert per_post_us < 500  # generous: a few microseconds here


def test_a_new_page_starts_with_info_snapshots_and_history():
    hub = Hub(maxlen=16)
    hub.post(dumps({"event": "transcript", "text": "hi"}), keep=True)
    hub.post(dumps({"event": "body", "v": 1}), latest="body")
    hub.post(dumps({"event": "body", "v": 2}), latest="body")
    hub.post(dumps({"event": "partial", "text": "h"}))  # neither kept nor latest
    client = hub.connect(None, first=(dumps({"event": "info"}),))
    got = [json.loads(m) for m in hub.take_now(client)]
    assert [m["event"] for m in got] == ["info", "body", "transcript"] and got[1]["v"] == 2


def test_a_waiting_reader_is_woken_by_a_post_from_another_thread():
    hub = Hub(maxlen=16)

    async def main() -> list[str]:
        client = hub.connect(asyncio.get_running_loop())
        threading.Timer(0.05, hub.post, args=(dumps({"event": "x"}),)).start()
        t0 = time.perf_counter()
        got = await hub.take(client, 5.0)
        assert time.perf_counter() - t0 < 2.0
        hub.close()
        assert await hub.take(client, 5.0) == []  # closed: the stream ends at once
        return got

    assert [json.loads(m)["event"] for m in asyncio.run(main())] == ["x"]


def test_feed_forwards_public_messages_with_tool_durations_and_keeps_joints_aside():
    hub = Hub(maxlen=64)
    client = hub.connect(None)
    now = [100.0]
    feed = ConsoleFeed(hub, clock=lambda: now[0])
    seen = []
    emit = tee(seen.append, feed)
    emit(Transcript(0, "wave"))
    emit(ToolCall(0, "wave", {"hand": "right"}, "c1"))
    emit(RobotCommand(0, "right_arm", 42.0, 1.0))
    now[0] += 0.025
    emit(ToolResult(0, "wave", True, "waving", "c1"))
    got = [json.loads(m) for m in hub.take_now(client)]
    assert [m["event"] for m in got] == ["transcript", "tool_call", "tool_result"]
    assert got[1]["name"] == "wave" and got[1]["arguments"] == {"hand": "right"}
    assert got[2]["duration_ms"] == 25.0 and all("t" in m for m in got)
    assert feed.positions == {"right_arm": 42.0} and len(seen) == 4


def test_feed_never_raises_into_a_stage():
    class Broken(Hub):
        def post(self, *a, **k):
            raise RuntimeError("boom")

    ConsoleFeed(Broken())(Transcript(0, "x"))  # logged, not raised


def test_token_is_made_once_with_mode_0600(tmp_path):
    path = tmp_path / "cfg" / "console-token"
    token, created = ensure_token(path)
    assert created and len(token) >= 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert ensure_token(path) == (token, False)
    path.chmod(0o644)
    assert ensure_token(path) == (token, False) and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_access_rules():
    with pytest.raises(ValueError):
        Access(None, loopback=False)
    local = Access(None, loopback=True)
    assert local.allowed(None, None)
    assert local.host_ok("127.0.0.1:8080") and local.host_ok("localhost:8080") and local.host_ok("[::1]:80")
    assert not local.host_ok("evil.example:8080") and not local.host_ok(None)
    remote = Access("s3cret", loopback=False)
    assert remote.host_ok("robot.lan:8080")
    assert not remote.allowed(None, None) and not remote.allowed("Bearer nope", "nope")
    assert not remote.allowed("Basic s3cret", None)
    assert remote.allowed("Bearer s3cret", None) and remote.allowed(None, "s3cret")
    assert remote.check_token(" s3cret\n") and not remote.check_token("")
    assert is_loopback("127.0.0.2") and is_loopback("::1") and not is_loopback("0.0.0.0")


def test_rate_limiter_is_a_token_bucket_per_client():
    now = [0.0]
    lim = RateLimiter(2.0, 3, clock=lambda: now[0])
    assert [lim.allow("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert lim.allow("a") == pytest.approx(0.5)
    assert lim.allow("b") == 0.0  # another client has its own bucket
    now[0] += 0.5
    assert lim.allow("a") == 0.0 and lim.allow("a") > 0


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("", ("127.0.0.1", 8080)),
        (":9000", ("127.0.0.1", 9000)),
        ("0.0.0.0", ("0.0.0.0", 8080)),
        ("0.0.0.0:81", ("0.0.0.0", 81)),
        ("[::1]:8081", ("::1", 8081)),
        ("[::]", ("::", 8080)),
    ],
)
def test_parse_bind(text, expect):
    assert parse_bind(text, "127.0.0.1", 8080) == expect


@pytest.mark.parametrize("bad", ["host:http", ":70000", "[::1]:x"])
def test_parse_bind_rejects_bad_ports(bad):
    with pytest.raises(ValueError, match="port"):
        parse_bind(bad, "127.0.0.1", 8080)


def test_bare_console_option_gets_an_empty_value():
    assert optional_values(["run", "--console"]) == ["run", "--console", ""]
    assert optional_values(["run", "--console", "--json"]) == ["run", "--console", "", "--json"]
    assert optional_values(["run", "--console", ":9000", "-v"]) == ["run", "--console", ":9000", "-v"]
    assert optional_values(["run", "--json"]) == ["run", "--json"]


# --- a Reachy Mini body ---------------------------------------------------------------------------


@pytest.fixture
def reachy():
    """The Reachy Mini sim config and a robot with its joints, postures and a dance, on a simulated driver."""
    cfg = load_config(ROOT / "launch" / "reachy_mini_sim.toml")
    joints = [Joint(j.name, j.min_deg, j.max_deg, j.neutral_deg, j.max_speed_dps) for j in cfg.robot.joints]
    neutral = {j.name: j.neutral_deg for j in joints}
    dance = linear_move("chicken_peck", neutral, {**neutral, "head_z": -30.0, "left_antenna": 90.0}, 5000)
    robot = Robot(
        joints,
        SimulatedDriver(),
        {"nod": linear_move("nod", {"head_pitch": 0.0}, {"head_pitch": 10.0}, 5000)},
        postures=cfg.robot.postures,
        libraries={"dances": {"chicken_peck": dance}, "emotions": {}},
    )
    yield SimpleNamespace(cfg=cfg, robot=robot)
    robot.close()


def test_info_lists_a_reachy_minis_nine_joints_with_their_units(reachy):
    info = snapshot.info(reachy.cfg, reachy.robot, None, BudgetVerdict(True, "plan"))
    joints = {j["name"]: j for j in info["joints"]}
    assert tuple(joints) == REACHY_JOINTS and len(joints) == 9
    assert {n for n, j in joints.items() if j["unit"] == "mm"} == {"head_x", "head_y", "head_z"}
    assert joints["head_z"]["min_deg"] == -45 and joints["head_z"]["max_deg"] == 20  # millimetres
    assert joints["right_antenna"]["neutral_deg"] == -10 and joints["left_antenna"]["neutral_deg"] == 10
    assert joints["left_antenna"]["unit"] == "deg" and joints["body_yaw"]["unit"] == "deg"
    assert info["libraries"] == {"dances": ["chicken_peck"], "emotions": []}
    assert info["animations"] == ["nod"] and info["driver"] == "sim"
    assert {"listening", "thinking"} <= set(info["postures"])
    # any other body is in degrees only
    assert set(snapshot.joint_units(load_config()).values()) == {"deg"}


def test_body_shows_posture_motion_and_the_driver_state(reachy):
    robot = reachy.robot
    body = snapshot.body(robot, {"head_z": -30.04, "left_antenna": 90.0}, False, True)
    assert body["positions"] == {"head_z": -30.0, "left_antenna": 90.0}  # mm and degrees as they are
    assert body["posture"] == "idle" and not body["moving"] and body["playing"] is None
    assert body["driver"] == {"state": "online", "message": "", "notes": []}
    robot.set_posture("listening")
    robot.play(robot.libraries["dances"]["chicken_peck"])
    body = snapshot.body(robot, {}, False, True)
    assert body["posture"] == "listening" and body["moving"] and body["playing"] == "chicken_peck"
    robot.stop()
    assert not snapshot.body(robot, {}, False, True)["moving"]
    robot.driver.state, robot.driver.message = (
        "offline",
        "reachy-mini-daemon at localhost:8000 is not reachable",
    )
    body = snapshot.body(robot, {}, False, True)
    assert body["driver"]["state"] == "offline" and "not reachable" in body["driver"]["message"]


def test_ticker_sends_the_reachy_body_with_millimetres_and_antennas(reachy):
    hub = Hub(maxlen=16)
    client = hub.connect(None)
    feed = ConsoleFeed(hub)
    feed(RobotCommand(0, "head_z", -12.5, 1.0))
    feed(RobotCommand(0, "right_antenna", -40.0, 1.0))
    ticker = StateTicker(hub, feed, reachy.robot, None, lambda: (False, False))
    ticker.tick()
    ticker.tick()  # nothing changed: nothing sent
    (msg,) = [json.loads(m) for m in hub.take_now(client)]
    assert msg["event"] == "body" and msg["positions"] == {"head_z": -12.5, "right_antenna": -40.0}
    assert msg["posture"] == "idle" and msg["driver"]["state"] == "online"
    reachy.robot.set_posture("thinking")
    ticker.tick()
    assert json.loads(hub.take_now(client)[0])["posture"] == "thinking"


def test_animate_control_plays_a_dance_of_the_bodys_library(reachy):
    notices = []
    controls = Controls(SimpleNamespace(robot=reachy.robot), SimpleNamespace(publish=notices.append), None)
    assert controls.animate("chicken_peck") == {"ok": True, "playing": "chicken_peck"}
    assert reachy.robot.playing == "chicken_peck" and "chicken_peck" in notices[-1].message
    # A gesture plays to its end: the next one waits (issue 48: gestures run in full, in order).
    assert controls.animate("nod")["playing"] == "nod" and reachy.robot.queued == ["nod"]
    with pytest.raises(ControlError) as e:
        controls.animate("moonwalk")
    assert e.value.status == 404 and "moonwalk" in str(e.value)
