"""``bolt-agent soak``: a long unattended run of ``bolt-agent run`` on virtual audio devices.

Only parses options and prints; the work is in :mod:`agent.bench.soak` (the driver) and
:mod:`agent.bench.soak_report` (figures, ``report.json``, ``report.png``).
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from agent.cli.common import ConfigOpt, JsonOpt, VerboseOpt, load_or_exit, setup_logging


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the soak like Ctrl-C, once: a second signal must not break the report's writing."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _progress(row: dict[str, Any]) -> None:
    """One line per turn: kind, answered, latency, memory."""
    got = f"{row['latency_ms']:.0f} ms" if row["answered"] else "UNANSWERED"
    mem = (
        f"PSS {row['pss_mib']:.0f} MiB, {row['threads']} threads, {row['fds']} fds"
        if "pss_mib" in row
        else ""
    )
    typer.echo(f"turn {row['turn']} {row['kind']}: {got} {row.get('heard', '')} {mem}")


def soak(
    config: ConfigOpt = None,
    turns: Annotated[int, typer.Option(min=0, help="turns to run (0: until --hours)")] = 150,
    hours: Annotated[float, typer.Option(min=0, help="hours to run (0: until --turns)")] = 0.0,
    warmup: Annotated[
        int, typer.Option(min=0, help="turns before memory is compared (0: min(50, 40 percent of --turns))")
    ] = 0,
    out: Annotated[Path, typer.Option(help="folder for report.json, report.png and agent.log")] = Path(
        "soak-report"
    ),
    commands: Annotated[
        Optional[Path],
        typer.Option(help="folder of command WAVs with manifest.json (default: synthesized with piper)"),
    ] = None,
    camera: Annotated[
        Optional[Path],
        typer.Option(
            help="image folder or video file for the camera when the config has none (default: drawn)"
        ),
    ] = None,
    sample_s: Annotated[float, typer.Option(min=0.5, help="seconds between memory samples")] = 5.0,
    console: Annotated[bool, typer.Option(help="typed turns through the live console")] = True,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run the agent for N turns or H hours on virtual audio; report memory, threads, fds, latency.

    The agent is a child process on a private PulseAudio server (null sinks): spoken commands,
    barge-ins, noise, typed lines through the live console, timers, and a camera playing an
    image folder. Writes ``OUT/report.json`` (samples, per-turn rows, summary) and
    ``OUT/report.png`` (memory and latency over turns) and prints the summary.
    """
    from agent.bench.pulse import missing
    from agent.bench.soak import SoakOptions, run_soak, soak_config
    from agent.bench.soak_report import build_report, default_warmup, format_summary, write_report
    from agent.bench.soak_set import build_soak_set, camera_frames, default_folder
    from agent.config import DEFAULT_CONFIG
    from agent.models import resolve_model

    setup_logging(verbose)
    if turns == 0 and hours == 0:
        typer.echo("error: give --turns or --hours", err=True)
        raise typer.Exit(2)
    if (why := missing()) is not None:
        typer.echo(f"error: the soak needs a PulseAudio server: {why}", err=True)
        raise typer.Exit(2)
    cfg = load_or_exit(config)
    if console:
        try:
            import starlette  # noqa: F401
            import uvicorn  # noqa: F401
        except ModuleNotFoundError as e:
            typer.echo(
                f"note: no typed turns: the console needs {e.name} (pip install 'bolt-agent[console]')"
            )
            console = False
    out.mkdir(parents=True, exist_ok=True)
    try:
        clips = build_soak_set(resolve_model(cfg.tts.voice, "voice"), commands=commands)
    except RuntimeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    frames = camera or camera_frames(default_folder() / "camera")
    child_cfg = soak_config(config or DEFAULT_CONFIG, out, frames)
    opts = SoakOptions(
        turns=turns, hours=hours, sample_s=sample_s, console=console, progress=None if json_out else _progress
    )
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    started = time.time()
    try:
        run = run_soak(child_cfg, clips, out, opts)
    except RuntimeError as e:
        typer.echo(f"error: {e} (its log: {out / 'agent.log'})", err=True)
        raise typer.Exit(1) from None
    meta = {
        "config": str(child_cfg),
        "turns_asked": turns,
        "hours_asked": hours,
        "started_unix": round(started),
        "wall_s": round(time.time() - started, 1),
        "camera": str(frames),
        "commands": [c.text for c in clips.commands],
    }
    report = build_report(run, warmup or default_warmup(turns or len(run.rows)), meta)
    path, png = write_report(report, out)
    if json_out:
        typer.echo(json.dumps(report["summary"]))
    else:
        typer.echo(format_summary(report["summary"]))
        typer.echo(
            f"report: {path}" + (f", plot: {png}" if png else " (no plot: pip install 'bolt-agent[soak]')")
        )
    if run.crashes or report["summary"]["unanswered"]:
        raise typer.Exit(1)
