"""A small HTTP client for the server engines: JSON requests and Server-Sent-Event streams.

Standard library only (``http.client``), one connection per request. A stream is cancelled by
closing its socket: :class:`EventStream` watches a ``threading.Event`` from a helper thread and
shuts the socket down, which ends a read blocked in the middle of prompt evaluation at once;
llama-server notices the closed connection and stops generating for that slot
(``tools/server/README.md``). SSE framing: ``data: {json}`` lines separated by blank lines,
``data: [DONE]`` at the end (OpenAI's streaming format, which llama-server follows).
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from agent.control import StopSignal


class ServerError(Exception):
    """The server answered with an error status or a body that is not the expected JSON."""


class ServerUnreachable(ServerError):
    """No connection, or the connection broke (the server died, restarted or timed out).

    Attributes:
        before_output: True when nothing had been received yet, so the request may be retried.
    """

    def __init__(self, message: str, before_output: bool = True) -> None:
        super().__init__(message)
        self.before_output = before_output


def _connection(base_url: str, timeout_s: float) -> tuple[http.client.HTTPConnection, str]:
    parts = urlsplit(base_url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    return cls(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s), parts.path.rstrip("/")


def request_json(
    base_url: str,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
) -> tuple[int, Any]:
    """Send one request and read a whole JSON answer.

    Args:
        base_url: ``http://host:port`` (a path prefix is kept).
        method: ``GET`` or ``POST``.
        path: Endpoint, e.g. ``/health``.
        body: JSON body, or None.
        headers: Extra headers (authorization).
        timeout_s: Connect and read timeout, s.

    Returns:
        ``(status, decoded JSON or None when the body is not JSON)``.

    Raises:
        ServerUnreachable: no connection or it broke.
    """
    conn, prefix = _connection(base_url, timeout_s)
    data = json.dumps(body).encode() if body is not None else None
    hdrs = (
        {"Content-Type": "application/json", **(headers or {})} if data is not None else dict(headers or {})
    )
    try:
        conn.request(method, prefix + path, body=data, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
    except (OSError, http.client.HTTPException) as e:
        raise ServerUnreachable(f"{base_url}{path}: {e}") from None
    finally:
        conn.close()
    try:
        return resp.status, json.loads(raw) if raw else None
    except ValueError:
        return resp.status, None


class EventStream:
    """One streaming POST whose answer is an SSE stream of JSON objects.

    Args:
        base_url: ``http://host:port``.
        path: Endpoint (``/v1/completions``, ``/v1/chat/completions``).
        body: JSON body (``"stream": true`` is the caller's business).
        headers: Extra headers.
        timeout_s: Connect timeout and the longest silence between two bytes, s.
        cancel: A round's stop signal (polled every 50 ms): once set, the socket is shut
            down and iteration ends.

    Iterating yields each event's JSON object; ``close()`` (or leaving a ``with`` block) ends the
    request. ``cancelled`` tells whether it ended because of ``cancel``.
    """

    def __init__(
        self,
        base_url: str,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str] | None = None,
        timeout_s: float = 60.0,
        cancel: StopSignal | None = None,
    ) -> None:
        self.url = base_url + path
        self._conn, prefix = _connection(base_url, timeout_s)
        self._cancel = cancel
        self._done = threading.Event()
        self.cancelled = False
        self.received = False
        self.finished = False
        try:
            self._conn.request(
                "POST",
                prefix + path,
                body=json.dumps(body).encode(),
                headers={
                    "Content-Type": "application/json",
                    "Accept": "text/event-stream",
                    **(headers or {}),
                },
            )
            self._resp = self._conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            self._conn.close()
            raise ServerUnreachable(f"{self.url}: {e}") from None
        if self._resp.status != 200:
            raw = self._resp.read()
            self._conn.close()
            raise ServerError(f"{self.url}: HTTP {self._resp.status}: {_error_text(raw)}")
        if cancel is not None:
            threading.Thread(target=self._watch, name="http-cancel", daemon=True).start()

    def _watch(self) -> None:
        assert self._cancel is not None
        while not self._done.wait(0.05):
            if self._cancel.is_set():
                self.cancelled = True
                self._shutdown()
                return

    def _shutdown(self) -> None:
        sock = self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __iter__(self) -> Iterator[dict[str, Any]]:
        data: list[str] = []
        while True:
            try:
                line = self._resp.readline()
            except (OSError, ValueError, http.client.HTTPException) as e:
                if self.cancelled:
                    return
                raise ServerUnreachable(f"{self.url}: stream broke: {e}", not self.received) from None
            if not line:
                if self.cancelled or self.finished:  # llama-server's own /completion sends no [DONE]
                    return
                raise ServerUnreachable(f"{self.url}: the server closed the stream", not self.received)
            self.received = True
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if text.startswith("data:"):
                data.append(text[5:].strip())
                continue
            if text or not data:
                continue  # comments, other fields, keep-alives
            payload, data = "\n".join(data), []
            if payload == "[DONE]":
                return
            try:
                event = json.loads(payload)
            except ValueError:
                raise ServerError(f"{self.url}: not JSON in the stream: {payload[:120]!r}") from None
            if isinstance(event, dict) and "error" in event:
                raise ServerError(f"{self.url}: {_error_text(json.dumps(event).encode())}")
            if isinstance(event, dict) and (
                event.get("stop") is True or any(c.get("finish_reason") for c in event.get("choices") or [])
            ):
                self.finished = True
            yield event

    def close(self) -> None:
        """End the request (closing the connection stops the server's generation)."""
        self._done.set()
        self._shutdown()
        self._conn.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _error_text(raw: bytes) -> str:
    try:
        obj = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")[:300]
    err = obj.get("error", obj) if isinstance(obj, dict) else obj
    if isinstance(err, dict):
        return str(err.get("message") or err)[:300]
    return str(err)[:300]


def is_llama_server(base_url: str, headers: dict[str, str] | None = None, timeout_s: float = 5.0) -> bool:
    """Whether the server at ``base_url`` is llama.cpp's server (it takes llama.cpp's extra fields).

    llama-server answers ``GET /props`` with its settings (``default_generation_settings``,
    ``build_info``; ``tools/server/README.md``); OpenAI, vLLM, Ollama and NIM have no such endpoint.

    Args:
        base_url: ``http://host:port``.
        headers: Extra headers (authorization).
        timeout_s: Connect and read timeout, s.

    Returns:
        True for llama-server; False for any other answer, or when the server cannot be reached.
    """
    try:
        status, answer = request_json(base_url, "GET", "/props", headers=headers, timeout_s=timeout_s)
    except ServerUnreachable:
        return False
    return (
        status == 200
        and isinstance(answer, dict)
        and any(k in answer for k in ("default_generation_settings", "build_info"))
    )
