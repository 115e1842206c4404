"""``bolt-agent run`` (live conversation) and ``bolt-agent bench`` (latency benchmark).

Registered by :func:`agent.cli._register_plugins`. ``run`` checks the input device before
loading any model (a wrong device name fails in a second with the list of devices), then
loads and warms every model, opens the devices and listens until Ctrl-C or SIGTERM.
``bench`` only parses options; the work is in :mod:`agent.bench` and :mod:`agent.accuracy`.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from agent.cli import ConfigOpt, JsonOpt, _load, _setup_logging, build_agent, fixtures_root, stop_on_signals
from agent.events import Error
from agent.printer import EventPrinter
from agent.systemd import Watchdog, extend_timeout, notify

log = logging.getLogger(__name__)


def run(
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Listen and talk in real time on the configured microphone and speaker (Ctrl-C stops)."""
    from agent.live.devices import DeviceError, SoundDeviceBackend, find_device
    from agent.pipeline.pipeline import live_pipeline

    _setup_logging(verbose)
    cfg = _load(config)
    printer = EventPrinter(json_out)
    from agent.memplan import check_budget

    # From GGUF headers only, before any model is loaded; an "openai" engine runs the model elsewhere.
    verdict = check_budget(cfg) if cfg.llm.engine != "openai" else None
    if verdict is not None and not verdict.fits:
        printer(Error(-1, verdict.message))
        typer.echo(f"error: {verdict.message}", err=True)
        raise typer.Exit(2)
    if verdict is not None and verdict.message.startswith("memory not planned"):
        log.warning("%s", verdict.message)
    try:
        backend = SoundDeviceBackend()
        find_device(backend, cfg.audio.input_device, "input")
    except DeviceError as e:
        printer(Error(-1, str(e)))
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    with extend_timeout("loading models..."):  # systemd: a long first load is not a failed start
        core, bus = build_agent(cfg, printer)  # loads and warms every model, emits "ready"
    # WATCHDOG=1 from the listener loop itself: if it hangs, the pings stop and systemd restarts us.
    pipeline = live_pipeline(core, bus, backend, heartbeat=Watchdog())
    try:
        with stop_on_signals(pipeline.stop):
            pipeline.start()
            log.info("ready: listening")
            printer.note("listening (Ctrl-C stops)")
            notify("READY=1\nSTATUS=listening")  # systemd Type=notify: models are warm, devices open
            while not pipeline.stopping:
                time.sleep(0.1)
    except DeviceError as e:
        printer(Error(-1, str(e)))
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass
    finally:
        notify("STOPPING=1\nSTATUS=stopping: parking the robot")
        pipeline.close()
        core.close()
    printer.note("stopped")


def bench(
    config: ConfigOpt = None,
    fixtures: Annotated[
        Optional[Path], typer.Option(help="folder of command WAVs (default: the shared fixtures' commands/)")
    ] = None,
    runs: Annotated[int, typer.Option(min=1, help="passes over the fixtures")] = 1,
    limit: Annotated[int, typer.Option(min=0, help="use at most this many fixtures (0 = all)")] = 0,
    json_out: JsonOpt = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    accuracy: Annotated[
        bool,
        typer.Option(
            "--accuracy",
            help="measure tool-call accuracy on the spoken "
            "commands (with and without ASR biasing) instead of latency",
        ),
    ] = False,
) -> None:
    """Replay spoken commands through the live pipeline and a sequential baseline; report latency.

    With ``--accuracy``: the fraction of spoken commands whose tool calls match the manifest.
    """
    from agent.bench import format_report, run_bench

    _setup_logging(verbose)
    cfg = _load(config)
    folder = fixtures
    if folder is None:
        root = fixtures_root()
        folder = root / "commands" if root else None
    if folder is None or not folder.is_dir():
        typer.echo("error: no fixtures folder; pass --fixtures DIR (a folder of WAV commands)", err=True)
        raise typer.Exit(2)
    if accuracy:
        from agent.accuracy import format_accuracy, run_accuracy

        if not (folder / "manifest.json").is_file():
            typer.echo(f"error: {folder} has no manifest.json (file, text, expect_any per command)", err=True)
            raise typer.Exit(2)
        report = run_accuracy(cfg, folder)
        typer.echo(json.dumps(report) if json_out else format_accuracy(report))
        return
    report = run_bench(cfg, folder, runs=runs, limit=limit)
    typer.echo(json.dumps(report) if json_out else format_report(report))


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``bench`` to the ``bolt-agent`` app."""
    app.command("run")(run)
    app.command("bench")(bench)
