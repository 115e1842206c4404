"""``bolt-agent run``: the live conversation.

Added to the ``bolt-agent`` app by :mod:`agent.cli.main`. ``run`` checks the input device before
loading any model (a wrong device name fails in a second with the list of devices), then
loads and warms every model, opens the devices and listens until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from agent.cli.common import (
    ConfigOpt,
    JsonOpt,
    VerboseOpt,
    build_agent,
    echo_error,
    load_or_exit,
    setup_logging,
)
from agent.cli.printer import EventPrinter
from agent.events import Error
from agent.stopper import Stopper
from agent.systemd import Watchdog, extend_timeout, notify

if TYPE_CHECKING:
    from agent.audio_io.devices import SoundBackend
    from agent.config import Config
    from agent.console import Console

log = logging.getLogger(__name__)


def run(
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
    console_at: Annotated[
        Optional[str],
        typer.Option(
            "--console",
            metavar="[HOST:PORT]",
            help="serve the live web console; alone: the config's console host and port (default "
            "127.0.0.1:8080); any address but localhost needs the console token",
        ),
    ] = None,
) -> None:
    """Listen and talk in real time on the configured microphone and speaker (Ctrl-C stops)."""
    setup_logging(verbose)
    with Stopper() as stopper:  # from the first line: a signal while the models load parks the robot
        _run(config, json_out, console_at, stopper, verbose)


def _run(
    config: Path | None, json_out: bool, console_at: str | None, stopper: Stopper, verbose: bool
) -> None:
    """Check the budget and the microphone, start the console, then listen (:func:`_listen`)."""
    from agent.audio_io.devices import DeviceError, SoundDeviceBackend, find_device

    cfg = load_or_exit(config)
    printer = EventPrinter(json_out, verbose=verbose)
    from agent.memplan import check_budget

    # From GGUF headers only, before any model is loaded; an "openai" engine runs the model elsewhere.
    verdict = check_budget(cfg) if cfg.llm.engine != "openai" else None
    if verdict is not None and not verdict.fits:
        _report(printer, verdict.message)
        raise typer.Exit(2)
    if verdict is not None and verdict.message.startswith("memory not planned"):
        log.warning("%s", verdict.message)
    try:
        backend = SoundDeviceBackend()
        find_device(backend, cfg.audio.input_device, "input")
    except DeviceError as e:
        _report(printer, str(e))
        raise typer.Exit(2) from None
    console = None
    if console_at is not None or cfg.console.enabled:  # imported only when asked for
        try:
            from agent.cli.console import start_console
        except ModuleNotFoundError as e:
            if e.name not in ("starlette", "uvicorn"):
                raise
            msg = (
                f"the console needs {e.name}: BOLT_CONSOLE=1 bash launch/setup.sh run "
                "(or pip install 'bolt-agent[console]')"
            )
            _report(printer, msg)
            raise typer.Exit(2) from None
        console = start_console(cfg, console_at or "", printer)  # bound now: a busy port fails before loading
    try:
        _listen(cfg, printer, backend, console, verdict, stopper)
    finally:
        if console is not None:
            console.close()
    printer.note("stopped")


def _report(printer: EventPrinter, message: str) -> None:
    """Say why ``run`` cannot start: one ``error:`` line on stderr, and an ``error`` event with ``--json``.

    In text mode the event's own line would say it a second time on the same terminal.
    """
    if printer.json_mode:
        printer(Error(-1, message))
    echo_error(message)


def _listen(
    cfg: Config,
    printer: EventPrinter,
    backend: SoundBackend,
    console: Console | None,
    verdict: Any,
    stopper: Stopper,
) -> None:
    """Load the models, open the devices and run the live pipeline until a signal."""
    from agent.audio_io.devices import DeviceError
    from agent.pipeline.pipeline import live_pipeline

    emit = console.tee(printer) if console is not None else printer  # the console sees every message
    with extend_timeout("loading models..."):  # systemd: a long first load is not a failed start
        # Loads and warms every model (emits "ready"); restores timers, conversation and e-stop.
        core, bus = build_agent(cfg, emit, stopper, state=True)
    # WATCHDOG=1 from the listener loop itself: if it hangs, the pings stop and systemd restarts us.
    pipeline = live_pipeline(core, bus, backend, heartbeat=Watchdog())
    try:
        with stopper.running(pipeline.stop):
            pipeline.start()
            if console is not None:
                console.attach(core, bus, pipeline, verdict)
            log.info("ready: listening")
            printer.note("listening (Ctrl-C stops)")
            notify("READY=1\nSTATUS=listening")  # systemd Type=notify: models are warm, devices open
            while not pipeline.stopping:
                time.sleep(0.1)
    except DeviceError as e:
        _report(printer, str(e))
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass
    finally:
        notify("STOPPING=1\nSTATUS=stopping: parking the robot")
        pipeline.close()
        core.close()
