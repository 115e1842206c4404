"""``bolt-agent`` command line: the Typer app, assembled from the command modules of this package.

Commands: ``demo`` (the main job, no arguments), ``listen FILE...``, ``chat``, ``skills
list|new`` (:mod:`~agent.cli.talk`, :mod:`~agent.cli.skills`); ``run`` (:mod:`~agent.cli.live`);
``see`` and ``animate`` (:mod:`~agent.cli.see_and_animate`); ``budget`` (:mod:`~agent.cli.budget`);
``state show|clear`` (:mod:`~agent.cli.state`); ``models pull`` and ``doctor``
(:mod:`~agent.cli.ops`); ``estop clear|status|on`` (:mod:`~agent.cli.estop`); ``bench``, ``soak``,
``motion-bench`` and ``look-bench``, development tools started from a checkout's ``tools/bench``
(:mod:`~agent.cli.devtools`). The app is built here by plain
imports: a command module never imports this one.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import typer

from agent.cli import budget, estop, live, ops, see_and_animate, talk
from agent.cli.devtools import add_tools
from agent.cli.helptext import tidy
from agent.cli.skills import skills_app
from agent.cli.state import state_app

DISTRIBUTION = "bolt-agent"
"""The distribution name (``[project] name`` in pyproject.toml) whose version ``--version`` prints."""

app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,  # plain Click layout; helptext.tidy makes every text plain
    no_args_is_help=True,
    help="bolt-agent: an on-device voice and robot agent (Nemotron 3.5 Bolt E4B).",
    # -h everywhere: subcommands and sub-apps (skills, models, state) inherit the context settings.
    context_settings={"help_option_names": ["-h", "--help"]},
)


def installed_version() -> str:
    """The installed version of :data:`DISTRIBUTION`; ``"unknown"`` in a checkout that was never installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"{DISTRIBUTION} {installed_version()}")
        raise typer.Exit()


@app.callback()
def options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_print_version,
            is_eager=True,
            help="print the installed version and exit (loads no model)",
        ),
    ] = False,
) -> None:
    """Options of the program itself, before the command (``bolt-agent --version``)."""


app.command()(talk.demo)
app.command()(talk.listen)
app.command()(talk.chat)
app.add_typer(skills_app, name="skills")
app.command("run")(live.run)
app.command("see")(see_and_animate.see)
app.command("animate")(see_and_animate.animate)
app.command("budget")(budget.budget)
app.add_typer(ops.models_app, name="models")
app.add_typer(state_app, name="state")
app.command("doctor")(ops.doctor)
app.command("estop")(estop.estop)
add_tools(app)


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


def command() -> Any:
    """The Click command of :data:`app`, with every help text made plain (:func:`agent.cli.helptext.tidy`)."""
    return tidy(typer.main.get_command(app))


QUIET_LIBRARIES = {"OPENCV_LOG_LEVEL": "ERROR", "OPENCV_FFMPEG_LOGLEVEL": "-8"}
"""Environment that keeps OpenCV's and its FFmpeg's own lines off the terminal ("[ WARN:0@0.028]
global cap.cpp:212 open VIDEOIO(FFMPEG): ...", "[mov,mp4,... @ 0x...] moov atom not found"): the
command says what failed in words. Set by the entry point before anything imports cv2, unless
the user set them (``OPENCV_LOG_LEVEL=INFO bolt-agent see 0`` shows them again)."""


def main() -> None:
    """Console-script entry point."""
    for key, value in QUIET_LIBRARIES.items():
        os.environ.setdefault(key, value)
    command()(args=optional_values(sys.argv[1:]), prog_name="bolt-agent")
