"""``bolt-agent state show`` and ``bolt-agent state clear``: what ``run`` keeps across restarts.

The file is the one ``run`` uses (:func:`agent.state.keep.state_path`: ``[state] path``, else
``$STATE_DIRECTORY``, else ``$XDG_STATE_HOME/bolt-agent``). Under systemd the service's
environment is not the shell's: ``sudo -u bolt STATE_DIRECTORY=/var/lib/bolt-agent bolt-agent
state show`` (or ``--path``) reads the service's file.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer

from agent.cli.common import ConfigOpt, JsonOpt, echo_error, load_or_exit, setup_logging

state_app = typer.Typer(no_args_is_help=True, help="Show or clear what `run` keeps across restarts.")

PathOpt = Annotated[
    Optional[Path], typer.Option("--path", help="the state file (default: the one `run` uses)")
]


def _path(config: Path | None, path: Path | None) -> Path:
    from agent.state.keep import state_path

    return path if path is not None else state_path(load_or_exit(config).state.path, os.environ)


def _refuse(file: Path, problem: str) -> NoReturn:
    echo_error(f"{file} {problem}; left as it is")
    raise typer.Exit(1)


@state_app.command("show")
def state_show(config: ConfigOpt = None, path: PathOpt = None, json_out: JsonOpt = False) -> None:
    """Print the pending timers, the kept conversation, what the robot remembers and the e-stop.

    Only reads: a damaged file or a folder is reported (exit status 1) and left where it is.
    """
    from agent.state import StateStore

    file = _path(config, path)
    if file.is_dir():
        _refuse(file, "is a folder, not a state file")
    if not file.is_file():
        typer.echo(json.dumps({"path": str(file), "saved": False}) if json_out else f"{file}: no saved state")
        return
    setup_logging(False)  # the store's one warning line on a fault
    # Read only: showing a damaged file must not move it aside (``run`` does that).
    store = StateStore.open(file, read_only=True)
    if not store.enabled:
        raise typer.Exit(1)
    snap = store.snapshot()
    store.close()
    if json_out:
        typer.echo(json.dumps({**asdict(snap), "path": str(snap.path), "saved": True}))
        return
    now = time.time()
    typer.echo(f"{snap.path}")
    latched = "clear" if snap.estop_since_utc is None else f"LATCHED since {time.ctime(snap.estop_since_utc)}"
    typer.echo(f"  e-stop: {latched}")
    typer.echo(f"  conversation: {snap.turns} user turns ({snap.messages} messages)")
    typer.echo(f"  remembered: {'; '.join(text for _, text in snap.facts) or 'nothing'}")
    typer.echo(f"  timers: {len(snap.timers) or 'none'}")
    for t in snap.timers:
        left = t.due_utc - now
        when = f"in {left:.0f} s" if left > 0 else f"{-left:.0f} s overdue (announced at the next start)"
        typer.echo(f"    {t.label}, {t.seconds:g} s: due {when}")


@state_app.command("clear")
def state_clear(config: ConfigOpt = None, path: PathOpt = None) -> None:
    """Delete the state file: the next start forgets timers, the conversation and a latched e-stop.

    Stop the service first (``sudo systemctl stop bolt-agent``): a running agent keeps writing.
    A damaged state file is deleted too (that is how to recover); a folder or a file that is not
    a state database (a config, text) is reported (exit status 1) and left where it is.
    """
    from agent.state import not_a_state_file

    file = _path(config, path)
    problem = not_a_state_file(file)
    if problem is not None:  # `--path` may name anything: delete only what the store wrote
        _refuse(file, problem)
    removed = [p for p in (file, Path(f"{file}-wal"), Path(f"{file}-shm")) if p.exists()]
    for p in removed:
        try:
            p.unlink()
        except OSError as e:  # a folder we may not write: say so, no traceback
            _refuse(p, f"cannot be removed ({e.strerror or e})")
    typer.echo(f"{file}: {'removed' if removed else 'no saved state'}")
