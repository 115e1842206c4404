"""What every ``bolt-agent`` command shares: options, logging, loading the config and the agent.

The entry point is the only place that reads arguments, sets up logging and takes signals
(:mod:`agent.cli.main`); these helpers are what its commands call. Exit status is non-zero only
when nothing could run: a bad config (2), no readable input (1).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from agent.config import Config, ConfigError, load_config
from agent.events import Error, Event
from agent.stopper import Stopper

if TYPE_CHECKING:
    from agent.pipeline import AgentCore, Bus
    from agent.pipeline.listener import Source
    from agent.pipeline.speech import AudioSink

log = logging.getLogger(__name__)

ConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--config", "-c", help="robot config TOML (default: the embedded launch/desktop.toml)"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON Lines events on stdout")]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="log what the agent decides (turn-taking, tools) on stderr")
]


def setup_logging(verbose: bool) -> None:
    """Log warnings (``verbose``: also info lines) to stderr, with journald priorities under systemd."""
    from agent.systemd import JournalFormatter, under_systemd

    fmt = "%(levelname)s %(name)s: %(message)s"
    handler = logging.StreamHandler(sys.stderr)
    # Under systemd: "<N>" priority prefixes (sd-daemon(3)) so journald records each line's level.
    handler.setFormatter(JournalFormatter(fmt) if under_systemd() else logging.Formatter(fmt))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, handlers=[handler])


def echo_error(message: str) -> None:
    """Print ``error: MESSAGE`` on stderr; under systemd each line carries journald's ``<3>`` (error) prefix.

    Args:
        message: What went wrong and what to do; may span lines (a device list).
    """
    from agent.systemd import journal_lines, under_systemd

    text = f"error: {message}"
    typer.echo(journal_lines(text, 3) if under_systemd() else text, err=True)


def load_or_exit(config: Path | None) -> Config:
    """Load and validate the config; ``[llm] n_ctx = "fit"`` becomes the largest context that fits."""
    try:
        cfg = load_config(config)
    except ConfigError as e:
        echo_error(str(e))
        raise typer.Exit(2) from None
    if not isinstance(cfg.llm.n_ctx, int):
        if cfg.llm.engine == "openai":
            echo_error(
                '[llm] n_ctx = "fit" plans memory for a model that runs here; with engine = '
                '"openai" the model runs on another machine: give n_ctx as a number'
            )
            raise typer.Exit(2)
        from agent.memplan import resolve_n_ctx

        cfg = cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"n_ctx": resolve_n_ctx(cfg)})})
    return cfg


def build_agent(
    cfg: Config, printer: Callable[[Event], None], stopper: Stopper | None = None, state: bool = False
) -> tuple[AgentCore, Bus]:
    """Load and warm every model; a missing model or a broken robot is one clear line and exit 2.

    Args:
        cfg: The validated config.
        printer: Where public messages go (the CLI printer, or it teed into the web console).
        stopper: The command's signal handling: the robot is handed to it the moment it
            exists, so a signal while the models load parks it.
        state: Restore from and save to the state store of ``[state]`` (``run``: the service).
    """
    from agent.engines.base import LLMError
    from agent.models import ModelNotFoundError
    from agent.pipeline import Bus, build_core
    from agent.pipeline.heap import fix_mmap_threshold
    from agent.speech.tts import TTSError
    from hardware.driver import DriverError

    fix_mmap_threshold()  # before the models allocate: their large buffers go back when freed
    stopper = stopper or Stopper()
    bus = Bus(printer)
    with stopper.loading(bus.publish):
        try:
            core = build_core(cfg, bus.publish, on_robot=stopper.own, state=state)
        except (ModelNotFoundError, LLMError, TTSError, DriverError) as e:
            printer(Error(-1, str(e)))
            raise typer.Exit(2) from None
        try:
            core.warmup()
        except BaseException:
            core.close()
            raise
    listen_for_estop(core, bus)
    return core, bus


def listen_for_estop(core: AgentCore, bus: Bus) -> None:
    """Let a person clear (or latch) the robot's e-stop with ``bolt-agent estop`` while this command runs.

    A socket that cannot be made is a notice: the console (``run --console``) still clears it.
    """
    from agent.cli.estop import EstopSocket
    from agent.events import Notice

    try:
        sock = EstopSocket(core.robot, bus.publish)
    except OSError as e:
        bus.publish(Notice(-1, f"estop: bolt-agent estop cannot reach this agent ({e})"))
        return
    core.closers.append(sock.close)


def run_pipeline(
    core: AgentCore,
    bus: Bus,
    source: Source,
    sink: AudioSink,
    wait_background_s: float,
    stopper: Stopper | None = None,
    **options: bool,
) -> bool:
    """Run ``source`` through the pipeline to the end (or a signal); the caller closes ``core``.

    Returns:
        False when a signal stopped it early.
    """
    from agent.pipeline import Pipeline
    from agent.pipeline.pipeline import run_to_end

    pipeline = Pipeline(core, bus, source, sink, **options)

    def stop() -> None:
        # A signal: the robot parks at once, beside the stages ending (its motors off soonest:
        # a Reachy Mini's sleep move takes seconds); closing the core then finds it parked.
        pipeline.stop()
        threading.Thread(target=core.robot.close, name="park", daemon=True).start()

    with (stopper or Stopper()).running(stop):
        try:
            return run_to_end(pipeline, wait_background_s)
        except KeyboardInterrupt:
            return False


def fixtures_root() -> Path | None:
    """A folder of recorded commands for ``demo`` and ``bench``: ``$BOLT_FIXTURES``, when it is a folder.

    The folder holds ``commands/*.wav`` with ``commands/manifest.json`` (file, text, intent,
    expected tools per command); the project's test fixtures have that shape. Without it the
    demo synthesizes its own utterances and ``bench`` needs ``--fixtures DIR``.

    Returns:
        The folder, or None when ``$BOLT_FIXTURES`` is unset or not a folder.
    """
    env = os.environ.get("BOLT_FIXTURES")
    return Path(env) if env and Path(env).is_dir() else None
