"""``bolt-agent estop clear|status|on``: a person clears (or latches) the e-stop of a running agent.

The robot never clears its own emergency stop: asked to, it says it is latched and who can clear it.
A person can, on the robot's computer: every command that owns a robot (``run``, ``chat``,
``listen``, ``demo``) listens on a Unix socket, ``estop-PID.sock`` in its runtime folder
(:func:`socket_dirs`: ``$RUNTIME_DIRECTORY`` under systemd, else ``$XDG_RUNTIME_DIR/bolt-agent``,
else ``/tmp/bolt-agent-UID``; the folder is the owner's only, mode 0700, so only that user or
root reaches it: ``sudo bolt-agent estop clear`` for the service). The command sends one line
(``status``, ``clear`` or ``on``) to every such socket it finds and prints each agent's answer,
one JSON object a line: ``{"pid", "estopped", "says"}``.

Exit status: 0 when at least one agent answered, 1 when none runs here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from agent.events import Event, Notice

if TYPE_CHECKING:
    from hardware.robot import Robot

log = logging.getLogger(__name__)

ACTIONS = ("status", "clear", "on")
TIMEOUT_S = 3.0
"""Longest wait for one agent's answer, s."""


def socket_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Where agents put their e-stop sockets, most specific first (the first is where one listens).

    Args:
        env: The environment (default ``os.environ``).

    Returns:
        ``$RUNTIME_DIRECTORY`` (systemd's ``RuntimeDirectory=``), ``$XDG_RUNTIME_DIR/bolt-agent``,
        ``/run/bolt-agent`` (the service's, for ``sudo``) and ``/tmp/bolt-agent-UID``, each once.
    """
    env = os.environ if env is None else env
    dirs = []
    if env.get("RUNTIME_DIRECTORY"):
        dirs.append(Path(env["RUNTIME_DIRECTORY"].split(":")[0]))
    if env.get("XDG_RUNTIME_DIR"):
        dirs.append(Path(env["XDG_RUNTIME_DIR"]) / "bolt-agent")
    dirs += [Path("/run/bolt-agent"), Path(f"/tmp/bolt-agent-{os.getuid()}")]
    return list(dict.fromkeys(dirs))


class EstopSocket:
    """Answers ``bolt-agent estop`` for one running agent (a daemon thread on a Unix socket).

    Args:
        robot: The robot whose e-stop a person clears or latches.
        emit: Receives a ``notice`` for every change (who did what).
        folder: Where the socket goes (default: the first of :func:`socket_dirs`); made 0700.

    Raises:
        OSError: the folder or the socket cannot be made.
    """

    def __init__(self, robot: Robot, emit: Callable[[Event], None], folder: Path | None = None) -> None:
        self.robot, self.emit = robot, emit
        self.folder = folder or socket_dirs()[0]
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        self.path = self.folder / f"estop-{os.getpid()}.sock"
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self._sock.listen(4)
        self._thread = threading.Thread(target=self._serve, name="estop-socket", daemon=True)
        self._thread.start()

    def answer(self, action: str) -> dict:
        """Do ``action`` (``status``, ``clear``, ``on``) and say the e-stop's state afterwards."""
        says = ""
        if action == "clear":
            if self.robot.clear_estop():
                says = "cleared by a person (bolt-agent estop clear); my motors are on"
                self.emit(Notice(-1, f"estop: {says}"))
            else:
                says = "the emergency stop was not on"
        elif action == "on":
            report = self.robot.estop()
            says = report.says()
            if not report.already:
                self.emit(Notice(-1, f"estop: latched by bolt-agent estop on: {says}"))
        elif action != "status":
            return {"pid": os.getpid(), "error": f"unknown action {action!r}; one of {', '.join(ACTIONS)}"}
        if not says:
            says = "latched" if self.robot.estopped else "not on"
        return {"pid": os.getpid(), "estopped": self.robot.estopped, "says": says}

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with conn:
                try:
                    conn.settimeout(TIMEOUT_S)
                    line = conn.makefile("r", encoding="utf-8").readline().strip()
                    conn.sendall((json.dumps(self.answer(line)) + "\n").encode("utf-8"))
                except Exception:  # noqa: BLE001 - one bad client must not end the listener
                    log.exception("estop socket: a request failed")

    def close(self) -> None:
        """Stop listening and remove the socket."""
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def ask(path: Path, action: str, timeout_s: float = TIMEOUT_S) -> dict:
    """Send one action to one agent's socket; returns its answer.

    Raises:
        OSError: nobody listens there (a stale socket of an agent that died), or no answer in time.
        ValueError: the answer is not JSON.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(str(path))
        s.sendall((action + "\n").encode("utf-8"))
        data = s.makefile("r", encoding="utf-8").readline()
    return json.loads(data)


def estop(
    action: Annotated[
        str, typer.Argument(help="clear (a person releases it), status, or on (latch it)")
    ] = "status",
    folder: Annotated[
        Optional[Path], typer.Option("--dir", help="the agents' socket folder (default: the usual places)")
    ] = None,
) -> None:
    """Clear, show or latch the emergency stop of the agents running on this computer (a person's act)."""
    if action not in ACTIONS:
        typer.echo(f"error: unknown action {action!r}; one of {', '.join(ACTIONS)}", err=True)
        raise typer.Exit(2)
    answered = 0
    for d in [folder] if folder is not None else socket_dirs():
        for path in sorted(d.glob("estop-*.sock")) if d.is_dir() else []:
            try:
                reply = ask(path, action)
            except (OSError, ValueError):
                continue  # an agent that is gone left its socket behind
            answered += 1
            typer.echo(json.dumps(reply))
    if not answered:
        typer.echo(
            "error: no bolt-agent with a robot runs here (or it runs as another user: try sudo)", err=True
        )
        raise typer.Exit(1)
