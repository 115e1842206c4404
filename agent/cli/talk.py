"""The conversation commands: ``demo`` (the main job), ``listen FILE...`` and ``chat``.

Each runs inside a :class:`~agent.stopper.Stopper`: SIGTERM or Ctrl-C, at any moment from the
first line (also while the models load), parks the robot at neutral with torque off and ends
the command within 2 s, with status 0.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from agent.cli.common import (
    ConfigOpt,
    JsonOpt,
    VerboseOpt,
    build_agent,
    echo_error,
    fixtures_root,
    load_or_exit,
    run_pipeline,
    setup_logging,
)
from agent.cli.printer import EventPrinter
from agent.events import Error
from agent.stopper import Stopper


def demo(
    config: ConfigOpt = None,
    out: Annotated[Path, typer.Option(help="folder for reply WAVs")] = Path("out"),
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run a short spoken conversation on the embedded models and print every step."""
    from agent.cli.demo import demo_inputs
    from agent.pipeline import FileSource, WavSink

    setup_logging(verbose)
    with Stopper() as stopper:
        cfg = load_or_exit(config)
        printer = EventPrinter(json_out, verbose=verbose)
        exit_unless_folder(out)
        core, bus = build_agent(cfg, printer, stopper)
        try:
            inputs, origin = demo_inputs(fixtures_root(), core.tts)
            printer.note(f"demo: {len(inputs)} spoken commands from {origin}")
            source = FileSource([p for p, _ in inputs], False, bus.publish)
            run_pipeline(core, bus, source, WavSink(out), 30.0, stopper)
        finally:
            core.close()
    printer.note(f"\nreply WAVs are in {out.resolve()}")


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

    setup_logging(verbose)
    with Stopper() as stopper:
        cfg = load_or_exit(config)
        printer = EventPrinter(json_out, verbose=verbose)
        exit_unless_readable(files, printer)
        exit_unless_folder(out)
        core, bus = build_agent(cfg, printer, stopper)
        source = FileSource(files, False, bus.publish)
        try:
            run_pipeline(core, bus, source, WavSink(out), wait_background, stopper)
        finally:
            core.close()
    if source.unreadable == len(files):
        raise typer.Exit(1)


def exit_unless_folder(out: Path) -> None:
    """Exit 1 before any model loads when ``--out`` cannot be the folder of the reply WAVs.

    Checked before the models load (a file of that name would make every reply an error after
    loading). The folder itself is made when the first reply is written.

    Args:
        out: The ``--out`` folder.

    Raises:
        typer.Exit: Status 1 after one ``error:`` line: ``out`` (or a parent of it) is not a
            folder, or it cannot be written.
    """
    at = out
    while not at.exists() and at.parent != at:
        at = at.parent  # the nearest part that exists is where the folder will be made
    if not at.is_dir():
        echo_error(f"--out {out}: {at} is not a folder; name a folder for the reply WAVs")
        raise typer.Exit(1)
    if not os.access(at, os.W_OK | os.X_OK):
        echo_error(f"--out {out}: {at} is not writable; name a folder you can write to")
        raise typer.Exit(1)


def exit_unless_readable(files: list[Path], printer: EventPrinter) -> None:
    """Exit 1 before any model loads when none of ``files`` can be read; otherwise return.

    When at least one file is readable nothing is said here: the others are reported and
    skipped when the pipeline reaches them, as before.

    Args:
        files: The files given to ``listen``.
        printer: With ``--json``, each unreadable file is also one ``error`` event on stdout.

    Raises:
        typer.Exit: Status 1 (no readable input), after one ``error:`` line on stderr naming the files.
    """
    from agent.speech.audio import file_problem

    reasons = [file_problem(Path(f)) for f in files]
    if not files or any(r is None for r in reasons):
        return
    if printer.json_mode:
        for reason in reasons:
            printer(Error(-1, f"{reason}; no readable input, nothing was loaded"))
    echo_error(f"no readable input: {'; '.join(r for r in reasons if r)}")
    raise typer.Exit(1)


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

    setup_logging(verbose)
    with Stopper() as stopper:
        cfg = load_or_exit(config)
        printer = EventPrinter(json_out, verbose=verbose)
        if out is not None:
            exit_unless_folder(out)
        core, bus = build_agent(cfg, printer, stopper)
        prompt = (lambda: typer.echo("you> ", nl=False)) if sys.stdin.isatty() and not json_out else None
        sink = WavSink(out) if out is not None else NullSink()
        if hasattr(sys.stdin, "reconfigure"):  # bytes that are not UTF-8 become U+FFFD, reported per line
            sys.stdin.reconfigure(errors="replace")
        try:
            source = TextSource(sys.stdin, prompt, bus.publish)
            run_pipeline(core, bus, source, sink, wait_background, stopper, speak=out is not None)
        finally:
            core.close()
