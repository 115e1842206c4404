"""A Reachy Mini's direction of arrival: the daemon's ``GET /api/state/doa``, or the SDK's media.

The daemon polls its microphone array (XVF3800, firmware 2.1.0 or later) at about 10 Hz while
someone asks (``DOA_POLL_INTERVAL_S`` = 0.1 in reachy-mini 1.13) and answers
``{"angle": rad, "speech_detected": bool}``, or ``null`` when it has no array (``--no-media``,
the simulators) or no reading yet. :class:`DaemonDoa` reads it; :class:`SdkDoa` wraps the SDK's
``media.get_DoA()`` for an agent that owns the media itself (bolt-agent connects with
``media_backend="no_media"``, so it reads the daemon's).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from hardware.config import ReachyMiniConfig
from hardware.doa import DoaReading
from hardware.reachy_mini.daemon import daemon_get

log = logging.getLogger(__name__)

DOA_PATH = "/api/state/doa"
TIMEOUT_S = 0.3
"""One request, s: a reading older than this is no longer where the voice is."""
QUIET_AFTER_FAIL_S = 2.0
"""After a failed request the next is not made for this long, s (the daemon may be down)."""


class DaemonDoa:
    """The daemon's direction-of-arrival reading (a :class:`~hardware.doa.DoaSource`).

    Args:
        cfg: ``[robot.reachy_mini]``: the daemon's host and port.
    """

    def __init__(self, cfg: ReachyMiniConfig) -> None:
        self.host, self.port = cfg.host, cfg.port
        self.problem = ""
        self._retry_at = 0.0

    def read(self) -> DoaReading | None:
        """The newest reading, or None (no array, no reading yet, daemon unreachable: :attr:`problem`)."""
        now = time.monotonic()
        if now < self._retry_at:
            return None
        try:
            data = daemon_get(self.host, self.port, DOA_PATH, TIMEOUT_S)
        except (OSError, ValueError) as e:
            if not self.problem:
                log.info(
                    "direction of arrival: the daemon at %s:%s does not answer (%s)", self.host, self.port, e
                )
            self.problem = str(e)
            self._retry_at = now + QUIET_AFTER_FAIL_S
            return None
        self.problem = ""
        return parse_doa(data)


def parse_doa(data: Any) -> DoaReading | None:
    """The daemon's answer (``{"angle", "speech_detected"}`` or null) as a reading; None when it has none."""
    if not isinstance(data, dict):
        return None
    try:
        return DoaReading(float(data["angle"]), bool(data.get("speech_detected", False)))
    except (KeyError, TypeError, ValueError):
        return None


class SdkDoa:
    """The SDK's ``media.get_DoA()`` (``(angle, speech)`` or None) as a :class:`~hardware.doa.DoaSource`.

    Args:
        media: A ``ReachyMini(...).media`` the agent owns (its audio backend opened the array).
    """

    def __init__(self, media: Any) -> None:
        self.media = media

    def read(self) -> DoaReading | None:
        """The array's newest reading, or None."""
        try:
            got = self.media.get_DoA()
        except Exception:  # noqa: BLE001 - a USB read that fails is no reading
            return None
        if got is None:
            return None
        angle, speech = got
        return DoaReading(float(angle), bool(speech))
