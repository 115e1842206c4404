"""Operations commands: ``bolt-agent models pull`` and ``bolt-agent doctor``.

``register(app)`` adds them to the main Typer app (``agent/cli.py`` calls it).

- ``models pull [--config PATH]``: downloads every ``hf:`` model of the config
  (:mod:`agent.models_pull`); exit 0 when all are present and verified, 1 when one failed
  (offline: the message names the file and where to copy it), 2 on a bad config.
- ``doctor [--config PATH] [--json]``: every check of :mod:`agent.doctor`, one line each with
  the fix command, or one JSON object ``{"ok": ..., "checks": [...]}``; exit 1 when a check
  that blocks ``run`` failed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

models_app = typer.Typer(help="Manage model files.", no_args_is_help=True)

ConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--config", "-c", help="robot config TOML (default: launch/desktop.toml)"),
]


@models_app.command("pull")
def pull(config: ConfigOpt = None) -> None:
    """Download every hf: model of the config into the Hugging Face cache and verify its SHA-256."""
    from agent.config import ConfigError, load_config
    from agent.models_pull import PullError, config_model_refs, pull_model

    try:
        cfg = load_config(config)
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    refs = [(k, r) for k, r in config_model_refs(cfg) if r.startswith("hf:")]
    if not refs:
        typer.echo("no hf: models in this config; nothing to download")
        return
    failed = 0
    for key, ref in refs:
        try:
            got = pull_model(ref, key, cfg.source)
        except PullError as e:
            typer.echo(f"error: {e}", err=True)
            failed += 1
            continue
        check = "sha256 ok" if got.verified else "no sha256 from the hub"
        typer.echo(f"{key} {ref}: {got.path} ({got.size} bytes, {check})")
    if failed:
        raise typer.Exit(1)


def doctor(
    config: ConfigOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Check this machine for `run`: packages, models, memory, audio, serial, camera, GPU, service."""
    from agent.doctor import run_checks

    checks = run_checks(config)
    blocked = any(not c.ok and c.blocking for c in checks)
    if json_out:
        typer.echo(json.dumps({"ok": not blocked, "checks": [c.as_json() for c in checks]}))
    else:
        for c in checks:
            mark = "ok  " if c.ok else ("FAIL" if c.blocking else "warn")
            typer.echo(f"{mark} {c.name}: {c.detail}")
            if not c.ok and c.fix:
                typer.echo(f"     fix: {c.fix}")
        typer.echo("run can start" if not blocked else "run cannot start: fix the FAIL lines above")
    if blocked:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``models`` and ``doctor`` to the main app."""
    app.add_typer(models_app, name="models")
    app.command("doctor")(doctor)
