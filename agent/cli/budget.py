"""``bolt-agent budget``: the memory plan of a robot config on a device, as a table or JSON.

Added to the ``bolt-agent`` app by :mod:`agent.cli.main`.
Nothing is loaded or downloaded: the plan comes from the GGUF header of ``[llm] model``
(or Bolt E4B's published shape when its file is not on this machine; the output says so),
llama.cpp's sizing formulas and recorded measurements (:mod:`agent.memplan`).

``--vision-options`` adds the config planned three ways, changing only ``[vision]``: no
vision-language model, the chat model's own vision (its projector as configured or published,
loaded as the agent loads it: a vision-only copy without any audio encoder) and a separate 2B
VLM (llama-server, flash attention on), each with its total, whether it fits and the fix when
not (:mod:`agent.memplan.options`; e.g.
``bolt-agent budget -c jetson/robot.toml -d orin-nano-8gb --vision-options``).

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
    vision_options: Annotated[
        bool,
        typer.Option(
            "--vision-options",
            help="also plan the config with no VLM, the chat model's own vision, and a separate 2B VLM",
        ),
    ] = False,
) -> None:
    """Show the memory plan (weights, KV cache, compute, ASR, TTS, vision) and whether it fits."""
    from agent.memplan import (
        PlanError,
        check_budget,
        plan_config,
        plan_json,
        plan_table,
        vision_options_table,
    )
    from agent.memplan import vision_options as plan_options

    try:
        cfg = load_config(config)
        plan = plan_config(cfg, device)
        options = plan_options(cfg, plan.device) if vision_options else []
    except (ConfigError, PlanError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    verdict = check_budget(cfg, plan.device)
    if json_out:
        data = {**plan_json(plan), "message": verdict.message}
        if vision_options:
            data["vision_options"] = [
                {
                    "choice": o.choice,
                    "label": o.label,
                    "vision": o.vision_bytes,
                    "total": o.plan.total,
                    "fits": o.fits,
                    "headroom": o.headroom,
                    "n_ctx": o.plan.settings.n_ctx,
                    "message": o.verdict.message,
                }
                for o in options
            ]
        typer.echo(json.dumps(data))
    else:
        typer.echo(plan_table(plan, markdown=markdown))
        if not verdict.fits:
            typer.echo(verdict.message)
        if options:
            typer.echo("\n" + vision_options_table(options))
    if not plan.fits:
        raise typer.Exit(1)
