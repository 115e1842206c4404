"""Animations: files, the player (blend, loop, cancel), bad files, speech head motion, skills, CLI."""

from __future__ import annotations

import json
import time

import numpy as np
from typer.testing import CliRunner
from waiting import wait_until

from agent.cli import app
from agent.skills import ANIMATIONS, SkillContext, load_registry
from hardware.config import RobotConfig
from hardware.factory import build_robot
from hardware.speech_motion import envelope_keyframes, speak_along


def _write(folder, name, data):
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(data) if not isinstance(data, str) else data)


def test_bad_animation_files_are_reported_and_skipped_or_clamped(tmp_path):
    anims = tmp_path / "anims"
    _write(anims, "broken", "{not json")
    _write(anims, "tail_wag", {"keyframes": [{"t_ms": 100, "pose": {"tail": 30, "head_yaw": 10}}]})
    _write(anims, "too_far", {"keyframes": [{"t_ms": 100, "pose": {"head_yaw": 300}}]})
    cfg = RobotConfig(animation_folders=[anims])
    cmds = []
    robot, msgs = build_robot(cfg, on_command=lambda j, d, t: cmds.append((j, d)))
    text = "\n".join(msgs)
    assert "broken.json: cannot read animation" in text
    assert "moves tail, which this robot lacks" in text
    assert "puts head_yaw at 300 degrees, beyond its limits [-60, 60]; it will be clamped" in text
    assert "broken" not in robot.animations and "tail_wag" in robot.animations
    robot.play("too_far", wait=True)
    assert max(d for j, d in cmds if j == "head_yaw") == 60.0
    robot.play("tail_wag", wait=True)  # the unknown joint is dropped, the rest plays
    robot.close()


def test_player_blends_loops_and_cancels():
    cmds = []
    robot, _ = build_robot(RobotConfig(), on_command=lambda j, d, t: cmds.append((t, j, d)))
    robot.move({"head_yaw": 40}, 300, wait=True)
    cmds.clear()
    robot.play("nod", wait=True)  # nod's first keyframe is at 200 ms: head_pitch blends in from where it is
    assert cmds and abs(cmds[0][2]) < 5
    from hardware.animation import Animation, Keyframe

    loop = Animation("sway", (Keyframe(0, {"head_yaw": -10}), Keyframe(100, {"head_yaw": 10})), loop=True)
    start = len(cmds)
    robot.play(loop)
    # Still playing three and a half 100 ms periods later: a loop does not end.
    assert wait_until(lambda: len(cmds) > start and cmds[-1][0] - cmds[start][0] >= 350)
    assert robot.playing == "sway"
    robot.stop()
    assert robot.playing is None and robot.wait_idle(1)
    n = len(cmds)
    time.sleep(0.1)  # a window in which nothing may happen: the player sends no more commands
    assert len(cmds) == n  # cancelled: nothing more is sent
    robot.close()


def test_a_gesture_keeps_the_label_it_was_started_with():
    """Commands carry who started the gesture (a turn), also once the caller's label has moved on."""
    holder: list = []
    sent: list[tuple[str, object]] = []
    robot, _ = build_robot(RobotConfig(), on_command=lambda j, d, t: sent.append((j, holder[0].sending_tag)))
    holder.append(robot)
    robot.tag = 3
    robot.play("nod")  # started in turn 3
    robot.tag = 4  # turn 4 begins while the nod goes on
    assert wait_until(lambda: len(sent) > 5)
    robot.command({"head_yaw": 5.0})  # a direct command: the caller's current label
    robot.wait_idle(5)
    assert {tag for joint, tag in sent if joint == "head_pitch"} == {3}
    assert ("head_yaw", 4) in sent
    robot.close()


def test_speech_envelope_to_head_pitch_keyframes():
    sr = 22050
    t = np.arange(sr) / sr
    audio = (np.sin(2 * np.pi * 200 * t) * (t > 0.5) * 12000).astype(
        np.int16
    )  # silence, then a loud half second
    anim = envelope_keyframes(audio, sr, max_deg=4.0, frame_ms=100)
    assert anim.joints == {"head_pitch"}
    values = [k.pose["head_pitch"] for k in anim.keyframes]
    assert values[0] == 0.0 and max(values) == 4.0 and values[-1] == 0.0
    assert anim.keyframes[0].t_ms == 100 and anim.duration_ms == (10 + 2) * 100
    assert envelope_keyframes(np.zeros(sr, np.int16), sr) is None
    robot, _ = build_robot(RobotConfig())
    robot.play("wave")
    assert speak_along(robot, audio, sr)  # layered on the gesture, never replacing it
    assert robot.playing == "wave" and robot.moving
    assert not speak_along(robot, audio, sr, enabled=False)
    robot.close()


def test_play_animation_skill_enum_from_the_robots_animations(tmp_path):
    anims = tmp_path / "anims"
    _write(
        anims,
        "bow",
        {"keyframes": [{"t_ms": 200, "pose": {"head_pitch": -20}}, {"t_ms": 400, "pose": {"head_pitch": 0}}]},
    )
    robot, _ = build_robot(RobotConfig(animation_folders=[anims]))
    packaged = load_registry([])  # no names handed over: the packaged animations
    enum = packaged.skills["play_animation"].parameters["properties"]["name"]["enum"]
    assert enum == ["dance", "nod", "wave"]
    reg = load_registry([], animations=robot.animations)  # the robot's names, handed to the registry
    assert reg.skills["play_animation"].parameters["properties"]["name"]["enum"] == [
        "bow",
        "dance",
        "nod",
        "wave",
    ]
    # Names handed over later rebuild the skill in place (same position, same source).
    order, source = packaged.names(), packaged.skills["play_animation"].source
    packaged.set_choices(ANIMATIONS, ["bow", "wave", "bow"])
    assert packaged.names() == order and packaged.skills["play_animation"].source == source
    assert packaged.skills["play_animation"].parameters["properties"]["name"]["enum"] == ["bow", "wave"]
    assert packaged.skills["wave"].parameters == reg.skills["wave"].parameters
    ctx = SkillContext(robot=robot)
    assert reg.call("play_animation", {"name": "bow"}, ctx).ok
    assert robot.playing == "bow"
    bad = reg.call("play_animation", {"name": "moonwalk"}, ctx)
    assert not bad.ok and "bow" in bad.result
    assert reg.call("emergency_stop", {}, ctx).ok and robot.estopped
    assert not reg.call("play_animation", {"name": "nod"}, ctx).ok
    robot.close()


def test_cli_animate_and_see(fixtures_dir, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["animate", "nod", "--json"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.stdout.splitlines()]
    assert {x["joint"] for x in lines} >= {"head_pitch"} and all(
        -30 <= x["deg"] <= 30 for x in lines if x["joint"] == "head_pitch"
    )
    # An unknown name is refused before the robot opens: it printed ~100 joint commands (the
    # simulated robot parking) before the error (a new user's trial).
    res = runner.invoke(app, ["animate", "moonwalk"])
    assert (res.exit_code, res.stdout) == (1, "")
    assert res.stderr == "error: no animation 'moonwalk'; known: dance, nod, wave\n"
    bad = tmp_path / "bad.toml"
    bad.write_text("[robot]\ncontrol_rate_hz = -1\n")
    res = runner.invoke(app, ["animate", "nod", "--config", str(bad)])
    assert res.exit_code == 2 and "control_rate_hz" in res.output
    res = runner.invoke(app, ["see", str(fixtures_dir / "images" / "two_people.jpg"), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["people"] == 2 and data["faces"] == 2 and {"brightness", "motion", "summary"} <= set(data)
    res = runner.invoke(app, ["see", str(fixtures_dir / "video" / "short_hamilton_clip.mp4")])
    assert res.exit_code == 0 and "moving" in res.stdout
    corrupt = tmp_path / "c.jpg"
    corrupt.write_bytes(b"\xff\xd8junk")
    res = runner.invoke(app, ["see", str(corrupt)])
    assert res.exit_code == 1 and "could not be decoded" in res.output


def test_nod_times_nods_one_after_the_other():
    """``nod(times=3)`` queues three nods: the head comes up to the nod's top three times."""
    cmds: list[tuple[float, float]] = []  # (ms, head_pitch degrees)

    def sent(joint: str, degrees: float, t_ms: float) -> None:
        if joint == "head_pitch":
            cmds.append((t_ms, degrees))

    robot, _ = build_robot(RobotConfig(), on_command=sent)
    reg = load_registry([], animations=robot.animations)
    res = reg.call("nod", {"times": 3}, SkillContext(robot=robot))
    assert res.ok and res.result == "I am nodding my head 3 times.", res.result
    assert robot.wait_idle(10)
    pitch = np.array([d for _, d in cmds])
    tops = np.flatnonzero((pitch[1:-1] >= pitch[:-2]) & (pitch[1:-1] > pitch[2:]) & (pitch[1:-1] > 10))
    assert len(tops) == 6, pitch.round(1)  # two tops (15 degrees) per nod
    span_ms = cmds[-1][0] - cmds[0][0]
    assert span_ms > 2 * 1250, span_ms  # three nods of 1.25 s, not one
    clamped = reg.call("nod", {"times": 9}, SkillContext(robot=robot))
    assert clamped.ok and clamped.result == {
        "result": "I am nodding my head 5 times.",
        "note": "times=9 is above the maximum 5 (how many times to nod); clamped to 5",
    }
    robot.close()
