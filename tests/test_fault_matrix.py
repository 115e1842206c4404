"""The fault matrix (``docs/faults.md``): each fault produced for real, through the real components.

Rows tested here (the others are cited in ``docs/faults.md``):

- a pipeline stage hangs: a ``SIGSTOP``-ed llama-server leaves the turn driver stuck on its
  turn; the systemd watchdog pings (a real ``NOTIFY_SOCKET`` datagram socket) stop, one error
  event and one log line name the stage, and after ``SIGCONT`` the pings resume and the turn
  and the next one are answered;
- the serial port vanishes in the middle of a long animation (the emulated board's pty closes)
  and comes back under the same id;
- piper's voice model breaks on disk and the TTS is reloaded from it (a real ONNX failure);
- the camera's video file disappears and returns.
"""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest
from emu_bolt import BoltBoard
from emu_pty import settle
from hw_util import robot_config
from rig import AgentRig
from test_systemd import NotifySocket
from waiting import wait_until

from agent.audio_io.fake import FakeBackend
from agent.config import load_config
from agent.engines.remote.server_process import find_binary
from agent.events import Error, Notice, Reply, Timing, Transcript
from agent.pipeline.pipeline import live_pipeline
from agent.systemd import Watchdog
from hardware.animation import Animation, Keyframe


def pings(sock: NotifySocket, after: float, before: float = float("inf")) -> list[float]:
    """Arrival times of ``WATCHDOG=1`` datagrams in ``(after, before)``."""
    return [t for t, line in sock.lines() if line == "WATCHDOG=1" and after < t < before]


def stuck_errors(events) -> list[Error]:
    """The stall reports among ``events``."""
    return [e for e in events if isinstance(e, Error) and "stuck" in e.message]


# --- a stage hangs: the watchdog -------------------------------------------------------------------------
@pytest.mark.skipif(
    find_binary() is None,
    reason="llama-server not built: run launch/build_llama_server.sh (launch/setup.sh test does)",
)
def test_a_stopped_model_server_stalls_the_driver_and_withholds_the_watchdog(tmp_path, caplog):
    cfg = load_config()
    cfg.llm.engine = "llama-server"
    cfg.llm.n_ctx, cfg.llm.threads = 2048, 2
    cfg.live.stall_limit_s = 3.0  # the real limit is 45 s; the mechanism is the same
    # The engine's own read timeout must not end the wait first: the hang is what is tested.
    assert cfg.llm.server.request_timeout_s > 5 * cfg.live.stall_limit_s
    sock = NotifySocket(tmp_path / "notify.sock")
    watchdog = Watchdog(env={"NOTIFY_SOCKET": sock.path, "WATCHDOG_USEC": "400000"})  # a ping per 0.2 s
    stopped: list[float] = []
    rig = AgentRig(cfg)
    pid = rig.core.model.server.proc.pid

    def stop_server_on_transcript(ev) -> None:
        if isinstance(ev, Transcript) and not stopped:
            os.kill(pid, signal.SIGSTOP)  # dead silent: the socket stays open, nothing comes back
            stopped.append(time.monotonic())

    rig.observe = stop_server_on_transcript
    pipeline = live_pipeline(rig.core, rig.bus, FakeBackend(), heartbeat=watchdog)
    caplog.set_level(logging.INFO, logger="agent.pipeline.liveness")
    try:
        pipeline.start()
        assert wait_until(lambda: len(pings(sock, 0.0)) >= 3, 10), sock.lines()
        start = len(rig.log.events)
        pipeline.submit_text("Tell me a story about a robot.")
        stall = rig.log.wait_for(lambda e: isinstance(e, Error) and "stuck" in e.message, start, 30)
        assert stall is not None and stopped, rig.log.events[start:]
        assert "'driver'" in stall.message and "user_turn" in stall.message, stall.message
        t_stall = time.monotonic()
        # Pings were flowing up to the stall and none come while it lasts (one every 0.2 s otherwise).
        assert pings(sock, stopped[0] - 1.0, stopped[0])
        assert not wait_until(lambda: pings(sock, t_stall), 2.0)
        records = [r for r in caplog.records if r.levelno == logging.ERROR and "stuck" in r.getMessage()]
        assert len(records) == 1 and "'driver'" in records[0].getMessage()
        assert len(stuck_errors(rig.log.events[start:])) == 1  # one event, no flood

        # The server moves again before WatchdogSec: the pings resume, the turn is answered.
        os.kill(pid, signal.SIGCONT)
        t_cont = time.monotonic()
        assert wait_until(lambda: pings(sock, t_cont), 10), sock.lines()[-5:]
        assert rig.log.wait_for(lambda e: isinstance(e, Timing), start, 60) is not None
        assert any("moving again" in r.getMessage() for r in caplog.records)
        assert stuck_errors(rig.log.events[start:]) == [stall]
        # The turn was waited for, not lost: no model error (a fake mic's silence is reported apart).
        assert not [e for e in rig.log.events[start:] if isinstance(e, Error) and e.turn_id >= 0]
        nxt = len(rig.log.events)
        pipeline.submit_text("What time is it?")
        assert rig.log.wait_for(lambda e: isinstance(e, Timing), nxt, 60) is not None
        assert pings(sock, time.monotonic() - 1.0)  # still pinging after the next turn
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        pipeline.close()
        rig.close()
        sock.close()


# --- the serial port vanishes mid-motion -----------------------------------------------------------------
def moves(board: BoltBoard, since: int = 0) -> list[str]:
    """The move frames (``M``) the emulated board received from index ``since`` of its frames."""
    return [f for f in board.frames[since:] if f.split()[1:2] == ["M"]]


def robot_news(events) -> tuple[list[Error], list[Notice]]:
    """The robot's error events and back-online notices among ``events``."""
    errors = [e for e in events if isinstance(e, Error) and e.message.startswith("robot:")]
    return errors, [e for e in events if isinstance(e, Notice) and e.message.startswith("robot:")]


def test_serial_port_gone_mid_motion_then_back_under_the_same_name(tmp_path, caplog):
    link = tmp_path / "ttyBOLT"  # the configured name; the pty behind it changes on replug
    board = BoltBoard(link).plug()
    cfg = load_config()
    cfg.robot = robot_config("bolt_serial", link)
    rig = AgentRig(cfg)
    robot = rig.core.robot
    # A long gesture (it loops until stopped): the pty closes while it runs.
    sway = Animation(
        "sway",
        (
            Keyframe(0, {"head_yaw": 0.0, "left_arm": 20.0}),
            Keyframe(400, {"head_yaw": 30.0, "left_arm": 90.0}),
            Keyframe(800, {"head_yaw": 0.0, "left_arm": 20.0}),
        ),
        loop=True,
    )
    caplog.set_level(logging.INFO, logger="hardware.servos.serial_link")
    try:
        assert robot.status()[0] == "online" and board.torque
        robot.play(sway)
        assert wait_until(lambda: len(moves(board)) >= 5, 10)
        start = len(rig.log.events)
        warned = len([r for r in caplog.records if r.levelno >= logging.WARNING])
        board.unplug()
        assert wait_until(lambda: robot.status()[0] == "offline", 5)
        # No link: the gesture is cancelled (the board's own watchdog parks it), not left running.
        assert wait_until(lambda: robot.playing is None and not robot.moving, 5)
        # The conversation goes on without the body.
        evs = rig.text("What time is it?")
        assert evs.of(Reply) and evs.of(Reply)[0].text.strip(), evs
        assert robot.status()[0] == "offline"  # it was answered during the outage

        mark = len(board.frames)
        board.replug()  # the same device name, a new pty behind it
        back = rig.log.wait_for(lambda e: isinstance(e, Notice) and "back online" in e.message, start, 15)
        assert back is not None, rig.log.events[start:]
        assert wait_until(lambda: board.torque, 5)  # torque re-enabled by the handshake
        settle(board)
        assert not moves(board, mark)  # the cancelled gesture did not resume on its own
        before = dict(board.pos)
        robot.play("wave", wait=True)  # the next gesture works
        assert robot.driver.sync(2.0)
        assert moves(board, mark) and board.pos != before

        errors, notices = robot_news(rig.log.events[start:])
        assert len(errors) == 1 and "lost" in errors[0].message, errors  # one event for the outage
        assert len(notices) == 1
        warnings = [r for r in caplog.records[warned:] if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "lost" in warnings[0].getMessage(), warnings  # one log line
    finally:
        rig.close()
        board.close()


# --- the camera disappears and returns ---------------------------------------------------------------------
def test_camera_file_gone_then_back(tmp_path, fixtures_dir):
    import cv2

    frames = [
        cv2.resize(cv2.imread(str(fixtures_dir / "images" / n)), (320, 240))
        for n in ("person.jpg", "dog.jpg")
    ]
    video = tmp_path / "feed.avi"
    out = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (320, 240))
    for i in range(20):
        out.write(frames[i // 10])
    out.release()
    cfg = load_config()
    cfg.camera.source = str(video)
    cfg.camera.backoff_initial_s, cfg.camera.backoff_max_s = 0.1, 0.5
    rig = AgentRig(cfg)
    vision = rig.core.ctx.scene
    try:
        camera = vision.camera
        assert camera.state == "online" and vision.describe_now() is not None
        start = len(rig.log.events)
        video.rename(tmp_path / "unplugged.avi")  # the path goes away while the file is open
        gone = rig.log.wait_for(lambda e: isinstance(e, Error) and e.message.startswith("camera:"), start, 10)
        assert gone is not None and "is gone" in gone.message, rig.log.events[start:]
        # Meanwhile: no picture, and the reason (not a stale frame described as now).
        assert camera.latest() is None and vision.describe_now() is None
        assert "is gone" in vision.message
        assert wait_until(lambda: "(camera offline)" in (rig.core.state_line() or ""), 10)
        evs = rig.text("Hello there!")  # the conversation goes on
        assert evs.of(Reply) and evs.of(Reply)[0].text.strip(), evs

        (tmp_path / "unplugged.avi").rename(video)
        t_back = time.monotonic()
        back = rig.log.wait_for(
            lambda e: isinstance(e, Notice) and e.message.startswith("camera:"), start, 15
        )
        assert back is not None and "back online" in back.message
        assert wait_until(lambda: (camera.latest() or (None, 0.0))[1] > t_back, 10)  # frames resume
        assert vision.describe_now() is not None
        camera_events = [
            e for e in rig.log.events[start:] if isinstance(e, (Error, Notice)) and "camera" in e.message
        ]
        assert camera_events == [gone, back]  # one error for the outage, however many retries
    finally:
        rig.close()
