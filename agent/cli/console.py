"""``bolt-agent run --console [HOST:PORT]``: start the web console before the models load.

Imported by :func:`agent.cli.live.run` only when the console is asked for (``--console`` or
``[console] enabled``), so a run without it imports neither the web stack nor
:mod:`agent.console`. A bad address or a busy port is one line and exit 2, before any model
is loaded. On any address but a loopback one the console token is read from (or, the first
time, made in) the token file and printed once, on stderr.
"""

from __future__ import annotations

import typer

from agent.cli.printer import EventPrinter
from agent.config import Config
from agent.console import Console, default_token_path, ensure_token, is_loopback, parse_bind
from agent.events import Error, Notice


def start_console(cfg: Config, at: str, printer: EventPrinter) -> Console:
    """Serve the console on ``at`` (``HOST:PORT``, ``:PORT``, ``HOST`` or ``""`` for ``[console]``).

    Args:
        cfg: The config (``[console]``).
        at: The ``--console`` value.
        printer: Where the address (a ``notice``) and problems (``error``) go.

    Returns:
        The console, serving; attach the agent to it once the pipeline runs.

    Raises:
        typer.Exit: code 2 for a bad address, a busy port or an unusable token file.
    """
    ccfg = cfg.console
    try:
        host, port = parse_bind(at, ccfg.host, ccfg.port)
        token = None
        if not is_loopback(host):
            path = ccfg.token_file or default_token_path()
            token, created = ensure_token(path)
            if created:
                typer.echo(
                    f"console token (printed only this once; stored in {path}, mode 0600):\n  {token}",
                    err=True,
                )
            else:
                typer.echo(f"console token: in {path}", err=True)
        console = Console(ccfg)
        server = console.serve(host, port, token)
    except (ValueError, OSError, RuntimeError) as e:
        msg = f"console: cannot serve on {at or f'{ccfg.host}:{ccfg.port}'}: {e}"
        printer(Error(-1, msg))
        typer.echo(f"error: {msg}", err=True)
        raise typer.Exit(2) from None
    access = "token required" if token else "localhost only, no token"
    printer(Notice(-1, f"console: {server.url} ({access})"))
    return console
