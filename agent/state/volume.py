"""The robot's speaking volume: a level from 0 (muted) to 100 percent, kept across restarts.

The level scales the speech the speaker plays, in software, before the samples reach the sound
device (:class:`agent.audio_io.speaker.Speaker`): it works on every output device, with no
mixer. The gain is the level squared (50 % plays at a quarter of the amplitude, -12 dB), closer
to how loud people hear it than a straight line; 100 % leaves the samples as they are, so the
loudest is the voice as synthesized (no boost that could clip). With a state store the level is
written when it changes and read back at the next start (``settings`` table, key ``volume``).
"""

from __future__ import annotations

import threading

from agent.state.store import StateStore

MUTED, LOUDEST = 0, 100
"""The range of the level, percent."""

DEFAULT_LEVEL = LOUDEST
"""The level of a robot never told otherwise: the voice as synthesized."""

KEY = "volume"
"""The setting the level is kept under in the state store."""


def clamped(level: float) -> int:
    """``level`` as a whole percent within :data:`MUTED` .. :data:`LOUDEST`."""
    return int(round(min(LOUDEST, max(MUTED, level))))


def gain_of(level: float) -> float:
    """The factor the samples are scaled by at ``level`` percent: ``(level / 100) ** 2``."""
    return (clamped(level) / LOUDEST) ** 2


class Volume:
    """The speaking volume; safe from any thread (the speaker's callback reads :attr:`gain`).

    Args:
        store: Where the level is kept across restarts; None (or a disabled store) keeps nothing.
        level: The level when the store holds none, percent.
    """

    def __init__(self, store: StateStore | None = None, level: float = DEFAULT_LEVEL) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._level = clamped(level)
        kept = store.setting(KEY) if store is not None else None
        if kept is not None:
            try:
                self._level = clamped(float(kept))
            except ValueError:  # not a number: the default stands
                pass
        self._gain = gain_of(self._level)

    @property
    def level(self) -> int:
        """The level, percent (0: muted)."""
        return self._level

    @property
    def gain(self) -> float:
        """The factor the speaker scales samples by (0.0 .. 1.0)."""
        return self._gain

    def set(self, level: float) -> int:
        """Set the level (clamped to 0 .. 100, whole percent) and keep it; returns the level set."""
        with self._lock:
            self._level = clamped(level)
            self._gain = gain_of(self._level)
            if self.store is not None:
                self.store.set_setting(KEY, str(self._level))
            return self._level
