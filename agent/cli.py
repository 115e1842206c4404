"""``bolt-agent`` command line: the only place that reads arguments and sets up logging.

Commands: ``demo`` (the main job, no arguments), ``listen FILE...``, ``chat``, ``skills list``;
further commands register themselves from small modules (``register(app)``).
Exit status is non-zero only when nothing could run: a bad config (2), no readable input (1).
"""

from __future__ import annotations

import json
import logging
import os
import select
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from agent.config import Config, ConfigError, load_config
from agent.events import Error
from agent.printer import EventPrinter

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="bolt-agent: an on-device voice and robot agent (Nemotron 3.5 Bolt E4B).")
skills_app = typer.Typer(no_args_is_help=True, help="Inspect and create skills.")
app.add_typer(skills_app, name="skills")

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="robot config TOML "
                                                   "(default: the embedded launch/desktop.toml)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print JSON Lines events on stdout")]


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")


def _load(config: Path | None) -> Config:
    try:
        return load_config(config)
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None


def _build_agent(cfg: Config, printer: EventPrinter, out: Path):
    """Load and warm the models; a missing model is one clear line and exit 2."""
    from agent.llm import LLMError
    from agent.models import ModelNotFoundError
    from agent.pipeline import VoiceAgent
    from agent.tts import TTSError

    try:
        agent = VoiceAgent(cfg, printer, out)
    except (ModelNotFoundError, LLMError, TTSError) as e:
        printer(Error(-1, str(e)))
        raise typer.Exit(2) from None
    agent.warmup()
    return agent


def fixtures_root() -> Path | None:
    """The shared fixtures folder ($BOLT_FIXTURES, or ../shared/fixtures beside the repo or the cwd)."""
    env = os.environ.get("BOLT_FIXTURES")
    here = Path(__file__).resolve().parent.parent
    for cand in ([Path(env)] if env else []) + [here.parent / "shared" / "fixtures", Path.cwd().parent / "shared"
                                                / "fixtures"]:
        if cand.is_dir():
            return cand
    return None


@app.command()
def demo(config: ConfigOpt = None, out: Annotated[Path, typer.Option(help="folder for reply WAVs")] = Path("out"),
         json_out: JsonOpt = False, verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False) -> None:
    """Run a short spoken conversation on the embedded models and print every step."""
    from agent.demo import demo_inputs

    _setup_logging(verbose)
    cfg = _load(config)
    printer = EventPrinter(json_out)
    agent = _build_agent(cfg, printer, out)
    try:
        inputs, origin = demo_inputs(fixtures_root(), agent.tts)
        printer.note(f"demo: {len(inputs)} spoken commands from {origin}")
        for path, text in inputs:
            printer.note(f"\n>>> playing {path.name} (\"{text}\")")
            agent.handle_file(path)
        if agent.conversation.background_running:
            printer.note("\n>>> waiting for background tasks (timers) to finish")
        agent.run_background_turns(wait_s=30.0)
    finally:
        agent.close()
    printer.note(f"\nreply WAVs are in {out.resolve()}")


@app.command()
def listen(files: Annotated[list[Path], typer.Argument(help="audio files; every utterance is one user turn")],
           config: ConfigOpt = None, out: Annotated[Path, typer.Option(help="folder for reply WAVs")] = Path("out"),
           json_out: JsonOpt = False, verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
           wait_background: Annotated[float, typer.Option(help="seconds to wait at the end for background "
                                                          "tool calls (timers) to finish")] = 30.0) -> None:
    """Treat speech in audio files as user turns of one conversation."""
    _setup_logging(verbose)
    cfg = _load(config)
    printer = EventPrinter(json_out)
    agent = _build_agent(cfg, printer, out)
    readable = 0
    try:
        for f in files:
            readable += agent.handle_file(f) is not None
        agent.run_background_turns(wait_s=wait_background)
    finally:
        agent.close()
    if readable == 0:
        raise typer.Exit(1)


@app.command()
def chat(config: ConfigOpt = None, out: Annotated[Optional[Path], typer.Option(
        help="also synthesize replies into this folder")] = None, json_out: JsonOpt = False,
         verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
         wait_background: Annotated[float, typer.Option(help="seconds to wait at end of input for "
                                                        "background tool calls")] = 30.0) -> None:
    """Talk to the agent by typing (one line per turn; Ctrl-D ends)."""
    _setup_logging(verbose)
    cfg = _load(config)
    printer = EventPrinter(json_out)
    agent = _build_agent(cfg, printer, out or Path("out"))
    agent.speak = out is not None
    interactive = sys.stdin.isatty()
    try:
        prompt = True
        while True:
            if interactive and prompt:
                typer.echo("you> ", nl=False)
            prompt = False
            # Poll so background results (timers) are spoken while the user types nothing.
            ready, _, _ = select.select([sys.stdin], [], [], 0.25)
            if not ready:
                prompt = agent.run_background_turns() > 0
                continue
            line = sys.stdin.readline()
            prompt = True
            if not line:
                break
            if line.strip():
                agent.handle_text(line.strip())
        agent.run_background_turns(wait_s=wait_background)
    except KeyboardInterrupt:
        pass
    finally:
        agent.close()


@skills_app.command("list")
def skills_list(config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """List the skills the model can call, with their schema and source."""
    from agent.skills import load_registry

    cfg = _load(config)
    reg = load_registry(cfg.skills.folders, cfg.skills.include_builtin, cfg.skills.enabled, cfg.skills.timeout_s)
    for msg in reg.load_errors:
        typer.echo(f"warning: {msg}", err=True)
    for s in reg.skills.values():
        if json_out:
            typer.echo(json.dumps({"name": s.name, "description": s.description, "parameters": s.parameters,
                                   "source": s.source, "background": s.background}))
        else:
            params = ", ".join(s.parameters.get("properties", {}))
            kind = " [background]" if s.background else ""
            typer.echo(f"{s.name}({params}){kind}  {s.description}\n    schema: {json.dumps(s.parameters)}\n"
                       f"    source: {s.source}")


@skills_app.command("new")
def skills_new(name: Annotated[str, typer.Argument(help="skill name, e.g. greet_guest")],
               folder: Annotated[Path, typer.Option("--dir", help="folder to write NAME.py into")] = Path("skills"),
               ) -> None:
    """Write a commented template skill to start from."""
    from agent.skill_authoring import new_skill_file
    from agent.skills import SkillError

    try:
        path = new_skill_file(name, folder)
    except SkillError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"wrote {path}; add its folder to [skills] folders in your config (the packaged skills/ "
               f"folder is always loaded), then check it with: bolt-agent skills list")


def _register_plugins() -> None:
    """Commands that live in their own modules (``register(app)``); absent modules are skipped."""
    import importlib

    for mod in ("agent.cli_body", "agent.cli_live"):
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            continue
        module.register(app)


def main() -> None:
    """Console-script entry point."""
    _register_plugins()
    app()

