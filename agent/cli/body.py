"""CLI commands for the robot body: ``see`` (describe a picture) and ``animate`` (play an animation).

Added to the ``bolt-agent`` app by :mod:`agent.cli.main`. Exit codes:
0 success, 1 the source or animation could not be used, 2 a bad config file.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from agent.config import CameraConfig, ConfigError, load_config


def _fail(msg: str, code: int = 1) -> None:
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
        Path | None, typer.Option("--config", help="robot config TOML (vision settings)")
    ] = None,
) -> None:
    """Describe what a picture, video or camera shows (people, faces, light, motion)."""
    from hardware.camera import CameraError, open_reader
    from hardware.scene import DescriberError
    from hardware.vision import make_describer

    try:
        cfg = load_config(config)
    except ConfigError as e:
        _fail(str(e), 2)
    try:
        describer = make_describer(cfg.vision, cfg.camera.hfov_deg)
        reader, kind, _fps = open_reader(source, CameraConfig(source=source))
    except (CameraError, DescriberError) as e:
        _fail(str(e))
    scene = None
    try:
        n = 1 if kind == "image" else max(1, frames)
        for _ in range(n):
            ok, frame = reader.read()
            if not ok or frame is None:
                break
            scene = describer.describe(frame, time.monotonic())
    except DescriberError as e:
        _fail(str(e))
    finally:
        reader.release()
    if scene is None:
        _fail(f"{source} gave no frame")
    typer.echo(json.dumps(scene.to_json()) if as_json else scene.summary)


def animate(
    name: Annotated[str, typer.Argument(help="animation name (file stem or its 'name')")],
    config: Annotated[Path | None, typer.Option("--config", help="robot config TOML")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per joint command")] = False,
) -> None:
    """Play an animation on the configured robot and print every clamped joint command."""
    from hardware.driver import DriverError
    from hardware.factory import build_robot

    try:
        cfg = load_config(config)
    except ConfigError as e:
        _fail(str(e), 2)
    t0 = time.monotonic()

    def show(joint: str, deg: float, t_ms: float) -> None:
        if as_json:
            typer.echo(json.dumps({"t_ms": round(t_ms, 1), "joint": joint, "deg": deg}))
        else:
            typer.echo(f"{t_ms:8.1f} ms  {joint:<12} {deg:8.3f} deg")

    try:
        robot, messages = build_robot(cfg.robot, on_command=show)
    except DriverError as e:
        _fail(str(e))
    for m in messages:
        typer.echo(f"note: {m}", err=True)
    if name not in robot.animations:
        robot.close()
        _fail(f"no animation {name!r}; known: {', '.join(sorted(robot.animations)) or 'none'}")
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
        robot.play(name, wait=True)
    finally:
        robot.close()
        restore()
