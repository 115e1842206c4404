"""The result of one ``bolt-agent doctor`` check, shared by every subsystem's checks.

It lives at the bottom of the body (``hardware/`` imports nothing from ``agent/``) so that the
body's own checks (serial ports, the Reachy Mini, the camera) can sit beside their code, and the
agent's checks (models, memory, audio, GPU, service) use the same type; ``agent/doctor.py``
lists them all in one registry.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    """The result of one check.

    Attributes:
        name: Short name (``serial``, ``models``...).
        ok: Whether it passed.
        detail: What was found, one line.
        fix: Shell command (or config edit) that fixes a failure; empty when ok.
        blocking: A failure stops ``bolt-agent run``.
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""
    blocking: bool = True

    def as_json(self) -> dict[str, Any]:
        """The check as a JSON-ready dict."""
        return asdict(self)
