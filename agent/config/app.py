"""``[agent]``, ``[skills]``, ``[console]``, ``[state]``: the robot's name, skills, console, what is kept."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from hardware.config import StrictModel


class AgentConfig(StrictModel):
    """``[agent]``: who the robot is.

    ``name`` is what it answers to "what's your name?" and what the system prompt calls it:
    ``{name}`` in ``[llm] system_prompt`` (the default's "You are {name}, ...") becomes it when
    the config is loaded.
    """

    name: str = Field("Bolt", min_length=1, max_length=40, description="the robot's name")


class SkillsConfig(StrictModel):
    """Where skills come from and which ones are offered to the model.

    ``folders`` are searched in addition to the packaged ``skills/`` folder; relative paths
    are resolved against the config file's folder. ``enabled`` empty means all found.
    """

    folders: list[Path] = Field(default_factory=list)
    include_builtin: bool = True
    enabled: list[str] = Field(default_factory=list)
    timeout_s: float = Field(10.0, gt=0)


class ConsoleConfig(StrictModel):
    """``bolt-agent run --console``: the live web page served by the agent (off unless asked).

    A bind address other than the loopback one requires a token (created at first start in
    ``token_file``, mode 0600; ``None`` = ``~/.config/bolt-agent/console-token``).
    """

    enabled: bool = Field(False, description="serve the console on every run, without --console")
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535, description="0 = any free port")
    token_file: Path | None = None
    queue_events: int = Field(256, ge=8, le=100_000, description="messages kept per browser before dropping")
    rate_per_s: float = Field(5.0, gt=0, description="control requests per second per client")
    burst: int = Field(10, ge=1, description="control requests allowed at once per client")


class StateConfig(StrictModel):
    """``[state]``: what ``bolt-agent run`` keeps across restarts (timers, conversation tail, e-stop).

    ``path`` None = ``$STATE_DIRECTORY/state.sqlite3`` under systemd (``StateDirectory=``),
    else ``$XDG_STATE_HOME/bolt-agent/state.sqlite3`` (``~/.local/state/...``); see
    :func:`agent.state.keep.state_path`. A relative path is resolved against the config
    file's folder.
    """

    enabled: bool = Field(True, description="keep state across restarts (false: every start is fresh)")
    path: Path | None = Field(None, description="the SQLite file; None = the service's state directory")
    history_turns: int = Field(6, ge=0, le=100, description="user turns restored at start")
