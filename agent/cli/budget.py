"""``bolt-agent budget``: the memory plan of a robot config on a device, as a table or JSON.

Added to the ``bolt-agent`` app by :mod:`agent.cli.main`.
Nothing is loaded or downloaded: the plan comes from the GGUF header of ``[llm] model``
(or Bolt E4B's published shape when its file is not on this machine; the output says so),
llama.cpp's sizing formulas and recorded measurements (:mod:`agent.memplan`).

Exit status: 0 the config fits, 1 it does not (the last line names the fix), 2 a bad config
or no plan possible.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from agent.config import ConfigError, load_config


def budget(
    config: Annotated[
        Optional[Path],
        typer.Option("--config", "-c", help="robot config TOML (default: launch/desktop.toml)"),
    ] = None,
    device: Annotated[
        Optional[str],
        typer.Option(
            "--device",
            "-d",
            help="orin-nano-8gb, orin-nx-16gb or this (default: the config's llm.device_profile)",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the plan as one JSON object")] = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="print the table in Markdown")] = False,
) -> None:
    """Show the memory plan (weights, KV cache, compute, ASR, TTS, vision) and whether it fits."""
    from agent.memplan import PlanError, check_budget, plan_config, plan_json, plan_table

    try:
        cfg = load_config(config)
        plan = plan_config(cfg, device)
    except (ConfigError, PlanError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    verdict = check_budget(cfg, plan.device)
    if json_out:
        typer.echo(json.dumps({**plan_json(plan), "message": verdict.message}))
    else:
        typer.echo(plan_table(plan, markdown=markdown))
        if not verdict.fits:
            typer.echo(verdict.message)
    if not plan.fits:
        raise typer.Exit(1)
