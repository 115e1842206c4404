"""Where the state file lives, and what of the conversation is kept.

:func:`state_path` picks the file (config, then systemd's ``$STATE_DIRECTORY``, then the XDG
state folder); :func:`history_tail` cuts the history to its last user turns; :class:`AgentState`
is the open store of one running agent, with its timers, what it remembers of the user and
its speaking volume. The
wiring into a running agent (restore at start-up, save after each turn, the e-stop observer) is
:mod:`agent.pipeline.state`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agent.state.memory import Memory
from agent.state.store import StateStore
from agent.state.timers import TimerBook
from agent.state.volume import Volume

FILE_NAME = "state.sqlite3"


def state_path(explicit: Path | None, env: Mapping[str, str]) -> Path:
    """Where the state file lives.

    Order: ``explicit`` (``[state] path``: a choice someone wrote down wins); else
    ``$STATE_DIRECTORY`` (set by systemd from ``StateDirectory=``, a ``:``-separated list: the
    first entry is used); else ``$XDG_STATE_HOME/bolt-agent`` (default
    ``~/.local/state/bolt-agent``, XDG Base Directory spec). The file in a folder is :data:`FILE_NAME`.

    Args:
        explicit: ``[state] path``, or None.
        env: The environment (``os.environ``), passed in by the entry point.
    """
    if explicit is not None:
        return explicit.expanduser()
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0]) / FILE_NAME
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else Path.home() / ".local" / "state"
    return base / "bolt-agent" / FILE_NAME


def history_tail(history: list[dict[str, Any]], turns: int) -> list[dict[str, Any]]:
    """The messages of the last ``turns`` user turns (a turn starts at a ``user`` message); [] for 0."""
    if turns <= 0:
        return []
    starts = [i for i, m in enumerate(history) if m.get("role") == "user"]
    return history[starts[max(0, len(starts) - turns)] :] if starts else []


class AgentState:
    """The open store of one running agent.

    Args:
        store: The state file.
        history_turns: User turns of the conversation kept (``[state] history_turns``).
    """

    def __init__(self, store: StateStore, history_turns: int) -> None:
        self.store, self.history_turns = store, history_turns
        self.timers = TimerBook(store)
        self.memory = Memory(store)
        self.volume = Volume(store)

    def keep_history(self, history: list[dict[str, Any]]) -> None:
        """Save the tail of ``history`` (one transaction); call from the thread that owns it."""
        if self.store.enabled:
            self.store.save_history(history_tail(history, self.history_turns))

    def restored_history(self) -> list[dict[str, Any]]:
        """The kept conversation tail, oldest first."""
        return history_tail(self.store.history(), self.history_turns)

    def on_estop(self, latched: bool) -> None:
        """The robot's e-stop was latched (True) or cleared (False): record it."""
        self.store.set_estop(latched)

    def close(self) -> None:
        """Close the file."""
        self.store.close()
