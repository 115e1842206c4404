"""``bolt-agent bench``, ``soak``, ``motion-bench``, ``look-bench``: development tools, from a checkout.

The benchmarks and the soak live in the checkout's ``tools/bench/``, which the installed package
does not ship (the robot never runs them, and the product never imports them). These commands
find that folder — beside this ``agent`` package (a checkout, an editable install), else in the
working folder — and replace this process with ``python -m tools.bench COMMAND ARGS...`` run
with the checkout first on ``PYTHONPATH``: every option, ``-h`` included, is the tool's, and
signals (Ctrl-C, SIGTERM) reach it directly. Without a checkout they say how to get one and
exit 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import typer

from agent.cli.common import echo_error

TOOLS = ("bench", "soak", "motion-bench", "look-bench")
"""The commands of ``tools/bench`` (``python -m tools.bench COMMAND``)."""
REPOSITORY = "the bolt-agent source repository"


def find_checkout(cwd: Path | None = None) -> Path | None:
    """The checkout holding ``tools/bench``: beside this ``agent`` package, else ``cwd`` when it is one.

    Args:
        cwd: The working folder (default: this process's).

    Returns:
        The checkout's root folder, or None when neither holds ``tools/bench/__main__.py``.
    """
    for root in (Path(__file__).resolve().parents[2], (cwd or Path.cwd()).resolve()):
        if (root / "tools" / "bench" / "__main__.py").is_file() and (root / "agent").is_dir():
            return root
    return None


def tool_command(root: Path, command: str, args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The argument vector and environment that run ``tools/bench``'s ``command`` in ``root``.

    Args:
        root: The checkout (:func:`find_checkout`).
        command: One of :data:`TOOLS`.
        args: Its arguments, as given.

    Returns:
        ``(argv, env)``: this Python with ``-m tools.bench``; the environment with ``root``
        first on ``PYTHONPATH``.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return [sys.executable, "-m", "tools.bench", command, *args], env


def run_tool(command: str, args: list[str]) -> NoReturn:
    """Replace this process with the tool (see the module docstring); exit 2 without a checkout."""
    root = find_checkout()
    if root is None:
        echo_error(
            f"`bolt-agent {command}` is a development tool: it lives in tools/bench/ of {REPOSITORY}, "
            "which the installed package does not include. Clone the repository, run `make setup-test` "
            f"there, then `.venv/bin/bolt-agent {command}` in it (or `pip install -e '.[test]'` from the "
            "clone)"
        )
        raise typer.Exit(2)
    argv, env = tool_command(root, command, args)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)


SUMMARIES = {
    "bench": "Development tool (a checkout's tools/bench): latency, --accuracy, --turns, --vision, --peer.",
    "soak": "Development tool (a checkout's tools/bench): a long run on virtual audio; memory, latency.",
    "motion-bench": "Development tool (a checkout's tools/bench): the body's motion loop, latency, parking.",
    "look-bench": "Development tool (a checkout's tools/bench): the turn toward a voice, eye contact.",
}
"""What ``bolt-agent -h`` says of each tool (its own ``-h`` says the rest)."""


def _passthrough(command: str) -> Callable[[typer.Context], None]:
    def cmd(ctx: typer.Context) -> None:
        run_tool(command, list(ctx.args))

    return cmd


def add_tools(app: typer.Typer) -> None:
    """Add :data:`TOOLS` to ``app``; every argument (``-h`` too) goes to the tool."""
    for command in TOOLS:
        app.command(
            command,
            help=SUMMARIES[command],
            add_help_option=False,
            context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        )(_passthrough(command))
