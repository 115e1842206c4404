"""The console's HTTP routes (Starlette) and the guard every request passes.

Routes (every one behind :class:`Guard`, except the login form):

* ``GET /`` — the page (``static/index.html``); ``GET /static/...`` — its script and style;
* ``GET /login`` / ``POST /login`` — the login form; a right token sets the cookie;
* ``GET /api/events`` — the live stream (Server-Sent Events, one JSON message per event);
* ``GET /api/state`` — the newest ``info``, ``body`` and ``camera`` messages as one JSON object;
* ``GET /api/frame.jpg`` — the camera's newest frame with boxes;
* ``POST /api/say`` ``{"text"}``, ``/api/mute`` ``{"muted"}``, ``/api/animate`` ``{"name"}``,
  ``/api/estop``, ``/api/clear`` — the controls (JSON bodies; any other method is 405).

:class:`Guard` (plain ASGI, so the event stream is not buffered): a loopback server answers
only loopback ``Host`` names (403); without the right token, 401 (the page gets the login
form with it); a control must be a JSON POST (415 otherwise), from the page's own origin
when the browser says where it comes from (403), and within the rate limit (429; the
emergency stop is never rate-limited).

Every refusal is a JSON object ``{"error": "..."}`` saying what was wrong (also an unknown
path, 404, and a wrong method, 405) and one log line. A control body is read only up to
:data:`MAX_BODY` bytes (413 past it, also when ``Content-Length`` says so before a byte is
read) and within :data:`BODY_TIMEOUT_S` (408 for a client that stops sending); it must be
UTF-8 JSON holding an object (400 otherwise).
"""

from __future__ import annotations

import asyncio
import json
import logging
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from agent.console.auth import COOKIE, Access, RateLimiter
from agent.console.controls import ControlError, Controls
from agent.console.hub import Hub

STATIC = Path(__file__).resolve().parent / "static"
log = logging.getLogger(__name__)


class ConsoleView(Protocol):
    """What the routes read and drive (:class:`agent.console.service.Console`)."""

    hub: Hub
    controls: Controls | None

    def info_message(self) -> str:
        """The static info message every new page starts with (JSON text)."""
        ...

    def state(self) -> dict[str, Any]:
        """Everything the page shows now, as JSON-able data."""
        ...

    def frame_jpeg(self) -> bytes | None:
        """The camera's newest frame with its boxes, JPEG; None without a camera."""
        ...


KEEPALIVE_S = 15.0
"""A comment line is sent on an idle stream this often, s (proxies close silent streams)."""
MAX_BODY = 4096
"""Largest control request body, bytes."""
BODY_TIMEOUT_S = 10.0
"""Longest wait for a control request's body, s (a client that stops sending is answered 408)."""

LOGIN_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>bolt-agent console: log in</title>
<style>body{{font:16px system-ui,sans-serif;background:#111;color:#eee;
display:grid;place-items:center;height:90vh}}form{{background:#222;padding:2em;border-radius:8px}}
input{{font:inherit;padding:.4em;width:22em}}button{{font:inherit;padding:.4em 1em}}.err{{color:#f77}}</style>
</head><body><form method="post" action="/login"><h2>bolt-agent console</h2>
<p>This console needs the token printed at its first start<br>(stored in the console token file).</p>
<p class="err">{error}</p><input type="password" name="token" id="token" autofocus placeholder="token">
<button type="submit" id="login">Log in</button></form></body></html>"""


def _cookie(headers: Headers) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except Exception:  # a malformed cookie header is simply no cookie
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


class Guard:
    """ASGI middleware: host check, token check, control method/type/origin/rate checks.

    Args:
        app: The routes.
        access: The token policy of this server.
        limiter: Rate limit for controls and login attempts.
    """

    def __init__(self, app: ASGIApp, access: Access, limiter: RateLimiter) -> None:
        self.app, self.access, self.limiter = app, access, limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check one request, then pass it on or answer it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path, method = scope["path"], scope["method"]
        client = (scope.get("client") or ("?", 0))[0]
        refusal = self._refusal(headers, path, method, client)
        if refusal is not None:
            why = (
                json.loads(refusal.body).get("error", "") if refusal.media_type == "application/json" else ""
            )
            # Refused without reading the body; a rate-limited flood is logged quietly.
            log.log(
                logging.INFO if refusal.status_code in (401, 429) else logging.WARNING,
                "console: %s %s from %s refused (%d): %s",
                method,
                path,
                client,
                refusal.status_code,
                why or "log in",
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, headers: Headers, path: str, method: str, client: str) -> Response | None:
        if not self.access.host_ok(headers.get("host")):
            return JSONResponse({"error": "this console answers only on localhost"}, 403)
        if path == "/login":
            if method == "POST" and (wait := self.limiter.allow(client)) > 0:
                return _too_many(wait)
            return None
        if not self.access.allowed(headers.get("authorization"), _cookie(headers)):
            if method == "GET" and "text/html" in headers.get("accept", ""):
                return HTMLResponse(LOGIN_PAGE.format(error=""), 401)
            return JSONResponse(
                {"error": "a token is required: Authorization: Bearer TOKEN, or log in at /login"},
                401,
                headers={"WWW-Authenticate": 'Bearer realm="bolt-agent console"'},
            )
        if method != "POST" or not path.startswith("/api/"):
            return None
        origin = headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != headers.get("host"):
            return JSONResponse({"error": "controls are accepted only from the console's own page"}, 403)
        if headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return JSONResponse({"error": "controls take a JSON body (Content-Type: application/json)"}, 415)
        if path != "/api/estop" and (wait := self.limiter.allow(client)) > 0:
            return _too_many(wait)
        return None


def _too_many(wait: float) -> Response:
    return JSONResponse(
        {"error": "too many requests; slow down"}, 429, headers={"Retry-After": str(max(1, round(wait)))}
    )


async def _read_body(request: Request) -> bytes:
    """The body, at most :data:`MAX_BODY` bytes, within :data:`BODY_TIMEOUT_S`.

    Raises:
        ControlError: 413 over the limit (by ``Content-Length`` or by what arrived), 408 when
            the body does not arrive in time, 400 when the client went away mid-body.
    """
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY:
        raise ControlError(413, f"request body of {length} bytes is over the limit of {MAX_BODY} bytes")
    body = bytearray()

    async def read() -> None:
        async for chunk in request.stream():
            body.extend(chunk)
            if len(body) > MAX_BODY:
                raise ControlError(413, f"request body over the limit of {MAX_BODY} bytes")

    try:
        await asyncio.wait_for(read(), BODY_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise ControlError(408, f"the request body did not arrive within {BODY_TIMEOUT_S:g} s") from None
    except ClientDisconnect:
        raise ControlError(400, "the client went away before its request body was complete") from None
    return bytes(body)


async def _json_body(request: Request) -> dict[str, Any]:
    body = await _read_body(request)
    if not body.strip():
        return {}
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ControlError(400, f"the body is not UTF-8 (byte {e.start} is 0x{body[e.start]:02x})") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ControlError(400, f"the body is not JSON ({e})") from None
    except RecursionError:
        raise ControlError(400, "the body is JSON nested too deep") from None
    if not isinstance(data, dict):
        raise ControlError(400, f"the body must be a JSON object, not {type(data).__name__}")
    return data


async def _http_error(request: Request, exc: Exception) -> Response:
    """404 (no such path) and 405 (wrong method) as JSON, with one log line."""
    assert isinstance(exc, HTTPException)
    what = {404: "no such console path", 405: "method not allowed on this path"}.get(
        exc.status_code, exc.detail
    )
    log.warning("console: %s %s refused (%d): %s", request.method, request.url.path, exc.status_code, what)
    return JSONResponse(
        {"error": f"{what}: {request.method} {request.url.path}"}, exc.status_code, headers=exc.headers
    )


def build_app(console: ConsoleView, access: Access, limiter: RateLimiter) -> ASGIApp:
    """The console's ASGI application for one server.

    Args:
        console: The console (hub, controls, snapshots).
        access: This server's token policy.
        limiter: This server's control rate limit.
    """
    routes = [
        *_page_routes(access),
        *_feed_routes(console),
        *_control_routes(console),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    return Guard(app, access, limiter)


def _page_routes(access: Access) -> list[Route]:
    """The page and its login (the token form, and the cookie it sets)."""

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    async def login_form(request: Request) -> Response:
        if access.token is None:
            return RedirectResponse("/", 303)
        return HTMLResponse(LOGIN_PAGE.format(error=""))

    async def login(request: Request) -> Response:
        try:
            body = (await _read_body(request)).decode("utf-8", "replace")
        except ControlError as e:
            log.warning("console: login refused (%d): %s", e.status, e)
            return HTMLResponse(LOGIN_PAGE.format(error=str(e)), e.status)
        given = (parse_qs(body).get("token") or [""])[0]
        if not access.check_token(given):
            return HTMLResponse(LOGIN_PAGE.format(error="wrong token"), 401)
        resp = RedirectResponse("/", 303)
        if access.token is not None:
            resp.set_cookie(COOKIE, access.token, httponly=True, samesite="strict", path="/")
        return resp

    return [
        Route("/", page, methods=["GET"]),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
    ]


def _feed_routes(console: ConsoleView) -> list[Route]:
    """What the page shows: the event stream (SSE), the state snapshot, the newest camera frame."""

    async def events(request: Request) -> Response:
        hub = console.hub
        client = hub.connect(asyncio.get_running_loop(), first=(console.info_message(),))

        async def stream():  # an async generator of SSE text
            try:
                yield "retry: 1000\n\n"
                while not hub.closed and not client.closed:
                    msgs = await hub.take(client, KEEPALIVE_S)
                    yield "".join(f"data: {m}\n\n" for m in msgs) if msgs else ": keepalive\n\n"
            finally:
                hub.disconnect(client)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def state(request: Request) -> Response:
        return JSONResponse(console.state())

    async def frame(request: Request) -> Response:
        jpeg = await run_in_threadpool(console.frame_jpeg)
        if jpeg is None:
            return JSONResponse({"error": "no camera frame"}, 404)
        return Response(jpeg, media_type="image/jpeg", headers={"Cache-Control": "no-store"})

    return [
        Route("/api/events", events, methods=["GET"]),
        Route("/api/state", state, methods=["GET"]),
        Route("/api/frame.jpg", frame, methods=["GET"]),
    ]


def _control_routes(console: ConsoleView) -> list[Route]:
    """The controls: say, mute, animate, e-stop and its clearing (JSON in, JSON out)."""

    def control(name: str, field: str | None):  # a Starlette endpoint
        async def endpoint(request: Request) -> Response:
            try:
                data = await _json_body(request)
                controls = console.controls
                if controls is None:
                    raise ControlError(503, "the agent is still loading")
                fn = getattr(controls, name)
                args = (data.get(field),) if field else ()
                return JSONResponse(await run_in_threadpool(fn, *args))
            except ControlError as e:
                log.warning("console: %s refused (%d): %s", request.url.path, e.status, e)
                return JSONResponse({"error": str(e)}, e.status)

        return endpoint

    return [
        Route("/api/say", control("say", "text"), methods=["POST"]),
        Route("/api/mute", control("mute", "muted"), methods=["POST"]),
        Route("/api/animate", control("animate", "name"), methods=["POST"]),
        Route("/api/estop", control("estop", None), methods=["POST"]),
        Route("/api/clear", control("clear", None), methods=["POST"]),
    ]
