"""``bolt-agent run`` (live conversation) and ``bolt-agent bench`` (latency benchmark).

Added to the ``bolt-agent`` app by :mod:`agent.cli.main`. ``run`` checks the input device before
loading any model (a wrong device name fails in a second with the list of devices), then
loads and warms every model, opens the devices and listens until Ctrl-C or SIGTERM.
``bench`` only parses options; the work is in :mod:`agent.bench.latency`, :mod:`agent.bench.accuracy`
and the other :mod:`agent.bench` modules (``--peer``: :mod:`agent.bench.peer`).
"""

from __future__ import annotations

import json
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
    fixtures_root,
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


def bench(
    config: ConfigOpt = None,
    fixtures: Annotated[
        Optional[Path],
        typer.Option(help="folder of command WAVs with manifest.json (default: $BOLT_FIXTURES/commands)"),
    ] = None,
    runs: Annotated[int, typer.Option(min=1, help="passes over the fixtures")] = 1,
    limit: Annotated[int, typer.Option(min=0, help="use at most this many fixtures (0 = all)")] = 0,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
    accuracy: Annotated[
        bool,
        typer.Option(
            "--accuracy",
            help="measure tool-call accuracy and reply checks on the spoken "
            "commands (with and without ASR biasing, and as one conversation) instead of latency",
        ),
    ] = False,
    vision: Annotated[
        bool,
        typer.Option(
            "--vision",
            help='time the vision-language model ([vision] describer = "vlm"): describe time per '
            'frame, and voice-to-voice of a spoken "what do you see" (what_see.wav in the fixtures)',
        ),
    ] = False,
    frames: Annotated[int, typer.Option(min=1, help="--vision: descriptions timed")] = 5,
    turns: Annotated[
        bool,
        typer.Option(
            "--turns",
            help="play the turn-taking set (paused sentences, hesitations, plain commands in "
            "piper and espeak-ng voices; synthesized once into ~/.cache/bolt-agent/turn-set, or "
            "--fixtures DIR) and report the share kept whole, fillers answered and the extra "
            "wait of each end-of-turn rule",
        ),
    ] = False,
    realtime: Annotated[
        bool,
        typer.Option(
            "--realtime",
            help="--turns: play each file in real time to a real-time speaker (replies may start "
            "while the user goes on), instead of as fast as possible",
        ),
    ] = False,
    peer: Annotated[
        bool,
        typer.Option(
            "--peer",
            help="time the peer framework (pipecat 1.14 with its default Silero VAD + Smart Turn "
            "v3.2) on the same models and WAVs, in real time, in its own environment "
            "(~/.cache/bolt-agent/peer-venv, made from PyPI on first use); needs llama-server",
        ),
    ] = False,
    ours: Annotated[
        Optional[Path],
        typer.Option(help="--peer: our figures (the JSON of `bolt-agent bench --json`) beside the peer's"),
    ] = None,
) -> None:
    """Replay spoken commands through the live pipeline and a sequential baseline; report latency.

    Latency includes the floor (the unavoidable work at the model's measured raw speeds) and
    voice-to-voice over it. With ``--accuracy``: the fraction of spoken commands whose tool
    calls match the manifest, and of replies that fit (data passed on, no copy of the
    previous reply, chat answered). With ``--vision``: describe time per frame and the
    voice-to-voice time of a "what do you see" turn (first audio and the answer). With
    ``--turns``: turn-taking on paused sentences, hesitations and plain commands. With
    ``--peer``: the peer framework's voice-to-voice on the same WAVs, beside ours (``--ours``).
    """
    from agent.bench.accuracy import format_accuracy, run_accuracy
    from agent.bench.latency import format_report, run_bench

    setup_logging(verbose)
    cfg = load_or_exit(config)
    if turns:
        _bench_turns(cfg, fixtures, json_out, realtime)
        return
    folder = fixtures
    if folder is None:
        root = fixtures_root()
        folder = root / "commands" if root else None
    if vision:
        _bench_vision(cfg, folder, frames, runs, json_out)
        return
    if folder is None or not folder.is_dir():
        typer.echo("error: no fixtures folder; pass --fixtures DIR (a folder of WAV commands)", err=True)
        raise typer.Exit(2)
    if peer:
        _bench_peer(cfg, folder, limit, runs, ours, json_out)
        return
    if accuracy and not (folder / "manifest.json").is_file():
        typer.echo(f"error: {folder} has no manifest.json (file, text, expect_any per command)", err=True)
        raise typer.Exit(2)
    report: dict[str, Any] | None = None
    with Stopper() as stopper:  # a signal parks the robot, also while the models load; no report then
        if accuracy:
            report = run_accuracy(cfg, folder, stopper)
        else:
            report = run_bench(cfg, folder, runs=runs, limit=limit, stopper=stopper)
    if report is not None:
        text = format_accuracy(report) if accuracy else format_report(report)
        typer.echo(json.dumps(report) if json_out else text)


def _bench_turns(cfg: Any, folder: Optional[Path], json_out: bool, realtime: bool = False) -> None:
    """``bench --turns``: the turn-taking set through the pipeline."""
    from agent.bench.turns import format_turns, run_turns

    report = None  # stays None when a signal stopped the run
    with Stopper() as stopper:
        try:
            report = run_turns(cfg, folder, stopper, realtime=realtime)
        except RuntimeError as e:  # a synthesizer failed: nothing to measure
            typer.echo(f"error: cannot synthesize the turn-taking set: {e}", err=True)
            raise typer.Exit(2) from None
    if report is not None:
        typer.echo(json.dumps(report) if json_out else format_turns(report))


def _bench_peer(cfg: Any, folder: Path, limit: int, runs: int, ours: Optional[Path], json_out: bool) -> None:
    """``bench --peer``: pipecat on the same WAVs (:mod:`agent.bench.peer`), with ours beside it."""
    from agent.bench.peer import PeerError, format_peer, load_ours, peer_report, run_peer
    from agent.models import ModelNotFoundError

    try:
        mine = load_ours(ours) if ours is not None else None  # a bad file fails before the long run
        raw = run_peer(cfg, folder, limit, runs, note=lambda s: typer.echo(s, err=True))
    except (PeerError, ModelNotFoundError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    report = peer_report(raw, mine)
    typer.echo(json.dumps(report) if json_out else format_peer(report))


def _bench_vision(cfg: Any, folder: Optional[Path], frames: int, runs: int, json_out: bool) -> None:
    """``bench --vision``: the question is ``what_see.wav`` in the commands folder, when there is one."""
    from agent.bench.vision import VisionBenchError, format_vision, run_vision_bench

    question = folder / "what_see.wav" if folder is not None else None
    if question is not None and not question.is_file():
        question = None
    if question is None:
        typer.echo("note: no what_see.wav in the fixtures folder; timing descriptions only", err=True)
    try:
        report = run_vision_bench(cfg, question, frames=frames, runs=runs)
    except VisionBenchError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(report) if json_out else format_vision(report))
