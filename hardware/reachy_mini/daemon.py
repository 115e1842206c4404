"""The Reachy Mini daemon's REST API, as the doctor and the simulated camera read it, and the SDK's release.

``reachy-mini-daemon`` (FastAPI, port 8000) answers JSON under ``/api``: ``daemon/status``,
``motors/status``, ``state/full``. Only GETs are made here: nothing moves. Client and daemon
must be the same release (Pollen: "Install matching reachy_mini versions for the SDK and
daemon"); :func:`same_release` is the rule the driver and the doctor share.
"""

from __future__ import annotations

import json
import urllib.request
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from hardware.config import ReachyMiniConfig

SDK_PACKAGE = "reachy-mini"
"""The distribution of Pollen's SDK (client and daemon)."""


def sdk_version() -> str | None:
    """Installed version of the Reachy Mini SDK, or None when it is not installed."""
    try:
        return version(SDK_PACKAGE)
    except PackageNotFoundError:
        return None


def same_release(a: str, b: str) -> bool:
    """Whether two versions share major.minor (``1.13.0`` and ``1.13.2`` do; ``1.12.0`` does not)."""
    return a.split(".")[:2] == b.split(".")[:2]


def daemon_get(host: str, port: int, path: str, timeout_s: float = 2.0) -> Any:
    """GET one of the daemon's REST endpoints (``/api/daemon/status``) and parse its JSON.

    Raises:
        OSError: the daemon is not reachable (``urllib.error.URLError`` is one), or answered
            with an HTTP error.
        ValueError: the answer is not JSON.
    """
    with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=timeout_s) as resp:
        return json.loads(resp.read().decode("utf-8"))


def motor_mode(cfg: ReachyMiniConfig, timeout_s: float = 2.0) -> str:
    """The daemon's motor mode (``enabled``, ``disabled``, ``gravity_compensation``).

    Raises:
        OSError: the daemon is not reachable.
        ValueError: an unexpected answer.
    """
    data = daemon_get(cfg.host, cfg.port, "/api/motors/status", timeout_s)
    if not isinstance(data, dict) or "mode" not in data:
        raise ValueError(f"unexpected motor status {data!r}")
    return str(data["mode"])
