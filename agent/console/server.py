"""The console's web server: uvicorn on a socket bound here, in a daemon thread of its own.

The socket is bound by :class:`ConsoleServer` itself before uvicorn starts, so a busy port
or a bad address fails at once in the caller with an :class:`OSError` (and port 0 gives a
free port, reported in :attr:`ConsoleServer.port`). uvicorn runs its own asyncio loop in
the thread, installs no signal handlers there (the CLI owns SIGTERM/SIGINT), serves HTTP/1.1
with h11 and no WebSocket stack, leaves logging handlers to the entry point and logs only
warnings.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from starlette.types import ASGIApp


def parse_bind(text: str, default_host: str, default_port: int) -> tuple[str, int]:
    """Parse ``--console [HOST:PORT]``.

    Accepts ``""`` (both defaults), ``HOST``, ``:PORT``, ``HOST:PORT`` and ``[IPv6]:PORT``.

    Raises:
        ValueError: the port is not a number in 0..65535.
    """
    text = text.strip()
    host, port_s = default_host, ""
    if text.startswith("["):
        inner, _, rest = text[1:].partition("]")
        host, port_s = inner, rest.lstrip(":")
    elif text.count(":") == 1:
        h, port_s = text.split(":")
        host = h or default_host
    elif text:
        host = text
    if not port_s:
        return host, default_port
    if not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
        raise ValueError(f"--console: {port_s!r} is not a port number (0..65535); use HOST:PORT")
    return host, int(port_s)


class ConsoleServer:
    """uvicorn serving ``app`` on ``host:port`` from a daemon thread.

    Args:
        app: The ASGI application.
        host: Address to bind (``127.0.0.1``, ``0.0.0.0``, ``::``...).
        port: Port; 0 = any free one.

    Raises:
        OSError: the address cannot be bound (port in use, unknown address).
    """

    def __init__(self, app: ASGIApp, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.sock.bind((host, port))
            self.sock.listen(64)
        except OSError:
            self.sock.close()
            raise
        self.host, self.port = host, self.sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            log_config=None,  # logging is set up by the entry point only; uvicorn's records propagate
            log_level="warning",
            access_log=False,
            lifespan="off",
            loop="asyncio",
            http="h11",
            ws="none",
            timeout_graceful_shutdown=1,
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="console-http", daemon=True)
        self.error: BaseException | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT/`` as a browser on this machine would open it."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"http://[{host}]:{self.port}/" if ":" in host else f"http://{host}:{self.port}/"

    def _run(self) -> None:
        try:
            self.server.run(sockets=[self.sock])
        except BaseException as e:  # reported by start(); SystemExit included
            self.error = e

    def start(self, timeout: float = 10.0) -> None:
        """Start serving; returns once uvicorn accepts connections.

        Raises:
            RuntimeError: uvicorn did not start within ``timeout`` s.
        """
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the console's web server did not start: {self.error or 'timeout'}")
            time.sleep(0.01)

    def stop(self, timeout: float = 3.0) -> None:
        """Stop serving (open streams are cut after at most a second)."""
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self.sock.close()
