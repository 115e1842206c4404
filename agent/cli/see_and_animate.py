"""CLI commands for the robot body: ``see`` and ``animate``.

``see`` describes a picture, ``animate`` plays an animation (a Reachy Mini's dances and
emotions too); ``motion-bench``, which measures the motion loop, is a development tool
(``tools/bench/``, :mod:`agent.cli.devtools`).

Added to the ``bolt-agent`` app by :mod:`agent.cli.main`. Exit codes:
0 success, 1 the source or animation could not be used, 2 a bad config file.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from agent.config import CameraConfig, Config, ConfigError, load_config

if TYPE_CHECKING:
    from hardware.robot import Robot


PLAY_WAIT_S = 30.0
"""How long ``animate`` waits for a gesture to end (a looping one ends here), s."""


def _fail(msg: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def see(
    source: Annotated[
        str,
        typer.Argument(help="image file, video file, image folder, camera index/path or GStreamer pipeline"),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of the summary line")] = False,
    frames: Annotated[int, typer.Option(help="frames to read from a video or camera (motion needs 2+)")] = 5,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="robot config TOML (vision settings)")
    ] = None,
) -> None:
    """Describe what a picture, video or camera shows (people, faces, light, motion).

    With ``[vision] describer = "vlm"`` in the config, the vision-language model also describes
    the last frame in words (the check that a model's vision works: one known image).
    """
    from hardware.camera.base import CameraError
    from hardware.camera.sources import open_reader
    from hardware.perception.scene import DescriberError
    from hardware.perception.watcher import make_describer
    from hardware.registry import camera_sources

    cfg = _config(config)
    try:
        describer = make_describer(cfg.vision, cfg.camera.hfov_deg)
        reader, kind, _fps = open_reader(source, CameraConfig(source=source), camera_sources(cfg.robot))
    except (CameraError, DescriberError) as e:
        _fail(str(e))
    scene = last = None
    try:
        n = 1 if kind == "image" else max(1, frames)
        for _ in range(n):
            ok, frame = reader.read()
            if not ok or frame is None:
                break
            scene, last = describer.describe(frame, time.monotonic()), frame
    except DescriberError as e:
        _fail(str(e))
    finally:
        reader.release()
    if scene is None:
        _fail(f"{source} gave no frame")
    out = scene.to_json()
    if cfg.vision.describer == "vlm":
        out |= _describe_in_words(cfg, last)
    if as_json:
        typer.echo(json.dumps(out))
    else:
        typer.echo(scene.summary)
        if "description" in out:
            typer.echo(
                f"{out['description']}  ({out['describe_ms']:.0f} ms, {out['image_tokens']} image tokens)"
            )


def _describe_in_words(cfg: Config, frame: Any) -> dict[str, Any]:
    """``[vision.vlm]``'s description of one frame (exit 1: the model failed; 2: the config to fix).

    A config that names no model or projector, or a file that is not there, is a bad config.
    """
    from agent.vision.build import make_vlm_describer
    from agent.vision.describer import DescribeError, VisionConfigError

    try:
        describer = make_vlm_describer(cfg)
    except VisionConfigError as e:
        _fail(f"vision-language model: {e}", 2)  # the config file to fix
    except DescribeError as e:
        _fail(f"vision-language model: {e}")
    try:
        d = describer.describe([frame], time.monotonic())
    except DescribeError as e:
        _fail(str(e))
    finally:
        describer.close()
    if d is None:  # only a stop signal ends a description early, and none was given
        _fail("the description was stopped")
    return {"description": d.text, "describe_ms": round(d.took_ms, 1), "image_tokens": d.image_tokens}


def _robot(cfg: Config, on_command: Callable[[str, float, float], None] | None = None) -> Robot:
    """Build the configured robot; notes go to stderr, a driver that cannot be built exits 1."""
    from hardware.driver import DriverError
    from hardware.factory import build_robot

    try:
        robot, messages = build_robot(cfg.robot, on_command=on_command)
    except DriverError as e:
        _fail(str(e))
    for m in messages:
        typer.echo(f"note: {m}", err=True)
    return robot


def _config(path: Path | None) -> Config:
    """The config at ``path`` (or the embedded default); a bad one exits 2."""
    try:
        return load_config(path)
    except ConfigError as e:
        _fail(str(e), 2)


def _gestures_without_opening(cfg: Config) -> tuple[set[str], list[str]]:
    """The names ``animate`` can play on this body and the loading notes; no driver starts, nothing moves."""
    from hardware.factory import body_animations, load_libraries

    # The loaders build_robot uses, so the names are the robot's (a joint's limits only feed notes).
    animations, messages = body_animations(cfg.robot, {j.name: j for j in cfg.robot.joints})
    libraries, more = load_libraries(cfg.robot)
    names = set(animations).union(*libraries.values())
    return names, messages + more


def _quiet_stdout() -> None:
    """Send what stdout still gets to /dev/null: its reader left (``| head``), so no later write fails."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture): nothing to redirect
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def animate(
    name: Annotated[str, typer.Argument(help="animation name (file stem or its 'name')")],
    config: Annotated[Path | None, typer.Option("--config", "-c", help="robot config TOML")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per joint command")] = False,
) -> None:
    """Play an animation on the configured robot and print every clamped joint command.

    An unknown name exits 1 before the robot is opened (nothing moves). When stdout's reader
    goes away (``| head``) the animation stops, the robot parks and the command exits 0 quietly.
    """
    cfg = _config(config)
    names, notes = _gestures_without_opening(cfg)
    if name not in names:
        for m in notes:  # e.g. the dances' package is missing: why a dance is not there
            typer.echo(f"note: {m}", err=True)
        _fail(f"no animation {name!r}; known: {', '.join(sorted(names)) or 'none'}")
    t0 = time.monotonic()
    reader_gone = threading.Event()

    def show(joint: str, deg: float, t_ms: float) -> None:
        if reader_gone.is_set():
            return
        line = (
            json.dumps({"t_ms": round(t_ms, 1), "joint": joint, "deg": deg})
            if as_json
            else f"{t_ms:8.1f} ms  {joint:<12} {deg:8.3f} deg"
        )
        try:
            typer.echo(line)
        except BrokenPipeError:  # raised in the motion loop (or parking): must not stop the robot there
            _quiet_stdout()
            reader_gone.set()

    robot = _robot(cfg, show)
    gestures = dict(robot.animations)
    for lib in robot.libraries.values():  # a Reachy Mini's dances and emotions
        gestures.update(lib)
    if name not in gestures:  # the loaders disagreed with the check above (files changed meanwhile)
        robot.close()
        _fail(f"no animation {name!r}; known: {', '.join(sorted(gestures)) or 'none'}")
    real = cfg.robot.driver != "sim" or any(d.kind != "sim" for d in cfg.robot.drivers.values())
    if real:  # serial drivers do not report each command: wrap the safety layer's output instead
        inner = robot.command

        def traced(targets: dict[str, float]) -> dict[str, float]:
            sent = inner(targets)
            for j, d in sent.items():
                show(j, d, (time.monotonic() - t0) * 1000.0)
            return sent

        robot.command = traced  # type: ignore[method-assign]
    import signal

    from hardware.safety import install_shutdown

    restore = install_shutdown(robot, signals=(signal.SIGTERM, signal.SIGINT))  # park on Ctrl-C and SIGTERM
    try:
        robot.play(gestures[name])
        deadline = time.monotonic() + PLAY_WAIT_S
        while not robot.wait_idle(0.05) and time.monotonic() < deadline:
            if reader_gone.is_set():  # as a program killed by SIGPIPE would, but parked (the finally)
                robot.stop()
                break
    finally:
        robot.close()
        restore()
