"""Operations commands: ``bolt-agent models pull`` and ``bolt-agent doctor``.

Added to the ``bolt-agent`` app by :mod:`agent.cli.main`.

- ``models pull [--config PATH] [--from-dir DIR]``: makes every ``hf:`` model of the config
  present in the cache (:mod:`agent.models_pull`): cached files are only verified, missing ones
  downloaded, or copied from ``DIR`` (offline install); a Reachy Mini's emotions dataset too
  (cached: checked offline; else downloaded; ``DIR`` is for model files only). Exit 0 when all
  are present and verified, 1 when one failed (offline: the message names the file or dataset
  and where to copy it), 2 on a bad config.
- ``models list [--config PATH] [--json]``: every model the config names, where its file is and
  its size, or that it is missing and how to get it; reads only (no download, no network).
- ``doctor [--config PATH] [--json]``: every check of :mod:`agent.doctor`, one line each with
  the fix command, or one JSON object ``{"ok": ..., "checks": [...]}``; exit 1 when a check
  that blocks ``run`` failed.

Both use the installed service's ``HF_HOME`` when run for its config with no ``HF_HOME`` of
their own (:func:`agent.models_pull.service_hf_home`), so they look where the service does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from agent.cli.common import ConfigOpt

if TYPE_CHECKING:
    from agent.systemd import ServiceInfo

models_app = typer.Typer(help="Manage model files.", no_args_is_help=True)


@models_app.command("pull")
def pull(
    config: ConfigOpt = None,
    from_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--from-dir",
            file_okay=False,
            exists=True,
            help="copy the model files from this folder into the cache instead of downloading (offline)",
        ),
    ] = None,
) -> None:
    """Download every hf: model of the config into the Hugging Face cache and verify its SHA-256.

    A Reachy Mini's recorded emotions (a dataset) are fetched too, unless emotions_dir is set.
    A vision projector that cannot be fetched is a warning (the robot runs with OpenCV only).
    """
    use_service_cache(config)  # before huggingface_hub is imported: it reads HF_HOME once
    from agent.config import ConfigError, load_config
    from agent.models_pull import PullError, config_datasets, config_model_refs, pull_dataset, pull_model

    try:
        cfg = load_config(config)
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    refs = [(k, r) for k, r in config_model_refs(cfg) if r.startswith("hf:")]
    datasets = config_datasets(cfg)
    if not refs and not datasets:
        typer.echo("no hf: models in this config; nothing to download")
        return
    failed = 0
    for key, ref in refs:
        try:
            got = pull_model(ref, key, cfg.source, from_dir)
        except PullError as e:
            if key.endswith(".mmproj"):  # vision words are optional: the robot sees with OpenCV
                typer.echo(f"warning: {e}; the robot describes with OpenCV only until it is there", err=True)
                continue
            typer.echo(f"error: {e}", err=True)
            failed += 1
            continue
        if got.origin == "copied":
            check = "copied; no sha256 from the hub offline"
        else:
            check = ("sha256 ok" if got.verified else "no sha256 from the hub") + (
                ", already in the cache" if got.origin == "cached" else ""
            )
        typer.echo(f"{key} {ref}: {got.path} ({got.size} bytes, {check})")
    for key, repo in datasets:
        try:
            ds = pull_dataset(repo, key, cfg.source)
        except PullError as e:
            typer.echo(f"error: {e}", err=True)
            failed += 1
            continue
        for problem in ds.problems:  # the robot skips these files too; the rest is usable
            typer.echo(f"warning: {problem}; skipped", err=True)
        cached = ", already in the cache" if ds.origin == "cached" else ""
        typer.echo(
            f"{key} dataset {repo}: {ds.path} ({len(ds.moves)} moves, {ds.files} files, "
            f"{ds.size} bytes{cached})"
        )
    if failed:
        raise typer.Exit(1)


@models_app.command("list")
def list_models(
    config: ConfigOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="one JSON object per model")] = False,
) -> None:
    """List the models of the config: where each file is and its size, or how to get it.

    Reads only: an hf: model is looked up in the Hugging Face cache, never downloaded. Exit 1
    when one is missing.
    """
    use_service_cache(config)
    from agent.config import ConfigError, load_config
    from agent.models_pull import config_model_refs

    try:
        cfg = load_config(config)
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    missing = 0
    for key, ref in config_model_refs(cfg):
        path, why = _model_file(ref)
        size = _size(path) if path is not None else 0
        missing += path is None
        if json_out:
            typer.echo(
                json.dumps({"key": key, "ref": ref, "path": str(path) if path else None, "bytes": size})
            )
        elif path is not None:
            typer.echo(f"{key}: {ref}\n    {path} ({size / 1e6:.0f} MB)")
        else:
            typer.echo(f"{key}: {ref}\n    missing: {why}")
    if missing:
        raise typer.Exit(1)


def _model_file(ref: str) -> tuple[Path | None, str]:
    """Where a model reference's file is without downloading it: ``(path, "")`` or ``(None, why)``."""
    from agent.models import ModelNotFoundError, resolve_model

    if ref.startswith("hf:"):
        from huggingface_hub import try_to_load_from_cache

        from agent.models_pull import PullError, split_hf

        try:
            hit = try_to_load_from_cache(*split_hf(ref))
        except PullError as e:
            return None, str(e)
        if isinstance(hit, str) and Path(hit).exists():
            return Path(hit), ""
        return None, "not downloaded yet; get it with: bolt-agent models pull"
    try:
        return resolve_model(ref), ""
    except ModelNotFoundError as e:
        return None, str(e)


def _size(path: Path) -> int:
    """Bytes of a model file, or of every file in a model folder (CTranslate2 models are folders)."""
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def doctor(
    config: ConfigOpt = None,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Check this machine for `run`: packages, models, memory, audio, robot, camera, GPU, service."""
    service = use_service_cache(config)
    from agent.doctor import run_checks

    checks = run_checks(config, service=service)
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


def use_service_cache(config: Path | None) -> ServiceInfo | None:
    """Look where the installed service looks: its ``HF_HOME`` when this command is for its config.

    Sets ``HF_HOME`` in this process's environment (this is an entry point, and huggingface_hub
    reads it once, at import) and says so on stderr.

    Args:
        config: The command's ``--config``.

    Returns:
        The installed unit (:func:`agent.systemd.service_info`), or None.
    """
    from agent.models_pull import service_hf_home
    from agent.systemd import SERVICE, service_info

    service = service_info()
    home = service_hf_home(config, service)
    if home:
        os.environ["HF_HOME"] = home
        typer.echo(f"note: HF_HOME={home}, as {SERVICE}.service has it", err=True)
    return service
