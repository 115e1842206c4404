"""``bolt-agent doctor``'s models check, and the ``models pull`` command that fixes it.

Models are checked in place: nothing is downloaded and nothing is loaded
(:func:`agent.models_pull.verify_cached` hashes ``hf:`` files against their cached SHA-256, once
per file version). The fix runs where ``run`` reads: as the installed service's user, with its
``HF_HOME``, when the service runs this config.
"""

from __future__ import annotations

import os

from agent.config import Config
from agent.models import ModelNotFoundError, resolve_model
from agent.models_pull import PullError, config_model_refs, serves_config, verify_cached
from agent.systemd import ServiceInfo
from hardware.check import Check


def check_models(cfg: Config, service: ServiceInfo | None = None) -> Check:
    """Every model of the config present on disk, ``hf:`` files verified by SHA-256.

    Args:
        cfg: The config.
        service: The installed unit; when it runs this config, the fix downloads as its user
            into its ``HF_HOME``.
    """
    from huggingface_hub import constants

    found, bad, fixes = [], [], []
    for key, ref in config_model_refs(cfg):
        try:
            if ref.startswith("hf:"):
                hit = verify_cached(ref, key)
                if hit is None:
                    bad.append(f"{key} {ref} not downloaded (cache {constants.HF_HUB_CACHE})")
                    fixes.append(pull_fix(cfg, service))
                    continue
                found.append(
                    f"{key} ok ({hit.size / 2**30:.2f} GiB, sha256 {'ok' if hit.verified else 'n/a'})"
                )
            else:
                resolve_model(ref, key)
                found.append(f"{key} ok")
        except (ModelNotFoundError, PullError) as e:
            bad.append(str(e))
            fixes.append(pull_fix(cfg, service) if ref.startswith("hf:") else "")
    if bad:
        fix = next((f for f in fixes if f), f"edit the model paths in {cfg.source or 'the config'}")
        return Check("models", False, "; ".join(bad), fix)
    return Check("models", True, "; ".join(found) or "no models configured")


def pull_fix(cfg: Config, service: ServiceInfo | None = None) -> str:
    """The ``models pull`` command that fills the cache ``run`` reads.

    For the config of the installed service: as the unit's user, with its ``HF_HOME`` and its
    ``bolt-agent``; otherwise with this process's ``HF_HOME`` when one is set.

    Args:
        cfg: The config.
        service: The installed unit, or None.
    """
    hf_home = os.environ.get("HF_HOME", "")
    if service is not None and serves_config(service, cfg.source):
        home = service.environment.get("HF_HOME", hf_home)
        who = f"sudo -u {service.user}" if service.user else "sudo"
        env = f" env HF_HOME={home}" if home else ""
        return f"{who}{env} {service.exec_path or 'bolt-agent'} models pull --config {cfg.source}"
    cmd = f"bolt-agent models pull{config_arg(cfg)}"
    return f"HF_HOME={hf_home} {cmd}" if hf_home else cmd


def config_arg(cfg: Config) -> str:
    """`` --config FILE`` for a command about this config; empty for the default config."""
    return f" --config {cfg.source}" if cfg.source else ""
