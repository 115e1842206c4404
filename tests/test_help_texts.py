"""Every ``--help`` reads as plain words: no reST markup, no type placeholders, the same options everywhere.

A new user read "With ``--accuracy``: ..." and a ``<bool>`` beside every flag (issue 50, item 7).
Each command and subcommand of the real command tree (:func:`agent.cli.main.command`, what the
``bolt-agent`` entry point runs) is rendered here in-process, as ``bolt-agent ... --help``
prints it; one subprocess run checks the entry point renders the same.
"""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli.devtools import TOOLS
from agent.cli.main import command
from tools.bench.cli import command as tools_command

ROOT = Path(__file__).resolve().parent.parent

MARKUP = re.compile(
    r"``|:(?:func|class|meth|mod|data|attr|exc|obj):|`[^`\n]+`|(?<![\w*])\*\*?[A-Za-z][^*\n]*\*"
)
"""reST markup: literals, roles, interpreted text, *emphasis* and **strong**."""
PLACEHOLDER = re.compile(
    r"<(?:bool|int|float|str|path|dir|file|text|list\[[^\]]*\]|[a-z]+ range)>|\{[A-Z_.]+\}"
)
"""Typer's type placeholders (``<bool>``, ``<int range>``, ``<list[Path]>``) and ``{SOURCE}``."""


def _paths(cmd, path=()):
    yield path
    if hasattr(cmd, "list_commands"):
        for name in cmd.list_commands(None):
            yield from _paths(cmd.get_command(None, name), (*path, name))


PATHS = [p for p in _paths(command()) if not p or p[0] not in TOOLS]
"""Every command but the development tools, which replace this process with ``tools/bench``'s."""
PATHS += [p for p in _paths(tools_command()) if p]  # their own help, as ``bolt-agent bench -h`` shows it


def _help(*path: str) -> str:
    out = io.StringIO()
    tree = tools_command() if path and path[0] in TOOLS else command()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        tree.main(args=[*path, "--help"], prog_name="bolt-agent")
    assert exit_.value.code == 0
    return out.getvalue()


def test_the_tree_has_every_command():
    """The walk sees the subcommands too (a walk that stops at the top would check nothing)."""
    names = {" ".join(p) for p in PATHS}
    assert {"chat", "see", "models list", "models pull", "skills list", "state clear"} <= names, names
    assert len(PATHS) >= 20


@pytest.mark.parametrize("path", PATHS, ids=[" ".join(p) or "bolt-agent" for p in PATHS])
def test_help_is_plain_words(path):
    text = _help(*path)
    assert text.startswith("Usage: bolt-agent"), text
    assert not MARKUP.findall(text), (MARKUP.findall(text), text)
    assert not PLACEHOLDER.findall(text), (PLACEHOLDER.findall(text), text)


@pytest.mark.parametrize("path", [p for p in PATHS if p and p[0] in {"see", "animate", "motion-bench"}])
def test_every_command_with_a_config_takes_dash_c(path):
    text = _help(*path)
    assert re.search(r"-c, --config PATH", text), text


def test_a_section_name_in_brackets_is_kept():
    """Rich markup read "[vision] describer" as a style tag and printed "( describer = ...)"."""
    assert '[vision] describer = "vlm"' in _help("see")


def test_values_are_named_and_flags_show_none():
    text = _help("chat")
    assert "--wait-background NUMBER" in text and "-c, --config PATH" in text
    assert re.search(r"^\s+--json\s+print JSON", text, re.M), text
    assert "Usage: bolt-agent listen [OPTIONS] FILES..." in _help("listen")


def test_the_entry_point_prints_the_same_help():
    r = subprocess.run(
        [sys.executable, "-m", "agent", "see", "-h"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == _help("see")
