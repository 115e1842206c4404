"""``bolt-agent`` command line: the only place that reads arguments, sets up logging and takes signals.

Commands: ``demo`` (the main job, no arguments), ``listen FILE...``, ``chat``, ``skills list``;
further commands register themselves from small modules (``register(app)``).
Exit status is non-zero only when nothing could run: a bad config (2), no readable input (1).
Every command that owns a robot runs inside a :class:`Stopper`: SIGTERM or Ctrl-C, at any
moment from the first line (also while the models load), parks the robot at neutral with
torque off and ends the command within 2 s, with status 0.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from agent.config import Config, ConfigError, load_config
from agent.events import Error, Event
from agent.printer import EventPrinter
from agent.stopper import Stopper

if TYPE_CHECKING:
    from agent.pipeline import AgentCore, Bus
    from agent.pipeline.listener import Source
    from agent.pipeline.speech import AudioSink

log = logging.getLogger(__name__)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="bolt-agent: an on-device voice and robot agent (Nemotron 3.5 Bolt E4B).",
)
skills_app = typer.Typer(no_args_is_help=True, help="Inspect and create skills.")
app.add_typer(skills_app, name="skills")

ConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--config", "-c", help="robot config TOML (default: the embedded launch/desktop.toml)"),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON Lines events on stdout")]


def _setup_logging(verbose: bool) -> None:
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


def _load(config: Path | None) -> Config:
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
    cfg: Config, printer: Callable[[Event], None], stopper: Stopper | None = None
) -> tuple[AgentCore, Bus]:
    """Load and warm every model; a missing model or a broken robot is one clear line and exit 2.

    Args:
        cfg: The validated config.
        printer: Where public messages go (the CLI printer, or it teed into the web console).
        stopper: The command's signal handling: the robot is handed to it the moment it
            exists, so a signal while the models load parks it.
    """
    from agent.llm import LLMError
    from agent.models import ModelNotFoundError
    from agent.pipeline import Bus, build_core
    from agent.tts import TTSError
    from hardware.driver import DriverError

    stopper = stopper or Stopper()
    bus = Bus(printer)
    with stopper.loading(bus.publish):
        try:
            core = build_core(cfg, bus.publish, on_robot=stopper.own)
        except (ModelNotFoundError, LLMError, TTSError, DriverError) as e:
            printer(Error(-1, str(e)))
            raise typer.Exit(2) from None
        try:
            core.warmup()
        except BaseException:
            core.close()
            raise
    return core, bus


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
    with (stopper or Stopper()).running(pipeline.stop):
        try:
            return run_to_end(pipeline, wait_background_s)
        except KeyboardInterrupt:
            return False


def fixtures_root() -> Path | None:
    """The shared fixtures folder ($BOLT_FIXTURES, or ../shared/fixtures beside the repo or the cwd)."""
    env = os.environ.get("BOLT_FIXTURES")
    here = Path(__file__).resolve().parent.parent
    for cand in ([Path(env)] if env else []) + [
        here.parent / "shared" / "fixtures",
        Path.cwd().parent / "shared" / "fixtures",
    ]:
        if cand.is_dir():
            return cand
    return None


VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v")]


@app.command()
def demo(
    config: ConfigOpt = None,
    out: Annotated[Path, typer.Option(help="folder for reply WAVs")] = Path("out"),
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run a short spoken conversation on the embedded models and print every step."""
    from agent.demo import demo_inputs
    from agent.pipeline import FileSource, WavSink

    _setup_logging(verbose)
    with Stopper() as stopper:
        cfg = _load(config)
        printer = EventPrinter(json_out)
        core, bus = build_agent(cfg, printer, stopper)
        try:
            inputs, origin = demo_inputs(fixtures_root(), core.tts)
            printer.note(f"demo: {len(inputs)} spoken commands from {origin}")
            source = FileSource([p for p, _ in inputs], False, bus.publish)
            run_pipeline(core, bus, source, WavSink(out), 30.0, stopper)
        finally:
            core.close()
    printer.note(f"\nreply WAVs are in {out.resolve()}")


@app.command()
def listen(
    files: Annotated[list[Path], typer.Argument(help="audio files; every utterance is one user turn")],
    config: ConfigOpt = None,
    out: Annotated[Path, typer.Option(help="folder for reply WAVs")] = Path("out"),
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
    wait_background: Annotated[
        float, typer.Option(help="seconds to wait at the end for background tool calls (timers) to finish")
    ] = 30.0,
) -> None:
    """Treat speech in audio files as user turns of one conversation."""
    from agent.pipeline import FileSource, WavSink

    _setup_logging(verbose)
    with Stopper() as stopper:
        cfg = _load(config)
        printer = EventPrinter(json_out)
        core, bus = build_agent(cfg, printer, stopper)
        source = FileSource(files, False, bus.publish)
        try:
            run_pipeline(core, bus, source, WavSink(out), wait_background, stopper)
        finally:
            core.close()
    if source.unreadable == len(files):
        raise typer.Exit(1)


@app.command()
def chat(
    config: ConfigOpt = None,
    out: Annotated[Optional[Path], typer.Option(help="also synthesize replies into this folder")] = None,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
    wait_background: Annotated[
        float, typer.Option(help="seconds to wait at end of input for background tool calls")
    ] = 30.0,
) -> None:
    """Talk to the agent by typing (one line per turn; Ctrl-D ends)."""
    from agent.pipeline import NullSink, TextSource, WavSink

    _setup_logging(verbose)
    with Stopper() as stopper:
        cfg = _load(config)
        printer = EventPrinter(json_out)
        core, bus = build_agent(cfg, printer, stopper)
        prompt = (lambda: typer.echo("you> ", nl=False)) if sys.stdin.isatty() and not json_out else None
        sink = WavSink(out) if out is not None else NullSink()
        try:
            source = TextSource(sys.stdin, prompt)
            run_pipeline(core, bus, source, sink, wait_background, stopper, speak=out is not None)
        finally:
            core.close()


@skills_app.command("list")
def skills_list(config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """List the skills the model can call, with their schema and source."""
    from agent.skills import load_registry

    cfg = _load(config)
    reg = load_registry(
        cfg.skills.folders, cfg.skills.include_builtin, cfg.skills.enabled, cfg.skills.timeout_s
    )
    for msg in reg.load_errors:
        typer.echo(f"warning: {msg}", err=True)
    for s in reg.skills.values():
        if json_out:
            typer.echo(
                json.dumps(
                    {
                        "name": s.name,
                        "description": s.description,
                        "parameters": s.parameters,
                        "source": s.source,
                        "background": s.background,
                        "follow_up": s.follow_up,
                    }
                )
            )
        else:
            params = ", ".join(s.parameters.get("properties", {}))
            kind = (" [background]" if s.background else "") + ("" if s.follow_up else " [no follow-up]")
            typer.echo(
                f"{s.name}({params}){kind}  {s.description}\n    schema: {json.dumps(s.parameters)}\n"
                f"    source: {s.source}"
            )


@skills_app.command("new")
def skills_new(
    name: Annotated[str, typer.Argument(help="skill name, e.g. greet_guest")],
    folder: Annotated[Path, typer.Option("--dir", help="folder to write NAME.py into")] = Path("skills"),
) -> None:
    """Write a commented template skill to start from."""
    from agent.skills import SkillError, new_skill_file

    try:
        path = new_skill_file(name, folder)
    except SkillError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(
        f"wrote {path}; add its folder to [skills] folders in your config (the packaged skills/ "
        f"folder is always loaded), then check it with: bolt-agent skills list"
    )


def _register_plugins() -> None:
    """Commands that live in their own modules (``register(app)``); absent modules are skipped."""
    import importlib

    for mod in ("agent.cli_body", "agent.cli_live", "agent.cli_budget", "agent.cli_ops"):
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            continue
        module.register(app)


OPTIONAL_VALUE = ("--console",)
"""Options whose value may be left out (``run --console`` = the config's address)."""


def optional_values(argv: list[str]) -> list[str]:
    """Give a bare ``--console`` an empty value, so ``--console`` alone parses (Typer has no such options).

    Args:
        argv: Arguments after the program name.

    Returns:
        The arguments with ``""`` inserted after an option of :data:`OPTIONAL_VALUE` that is
        last or followed by another option.
    """
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg in OPTIONAL_VALUE and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append("")
    return out


def main() -> None:
    """Console-script entry point."""
    _register_plugins()
    app(args=optional_values(sys.argv[1:]), prog_name="bolt-agent")
