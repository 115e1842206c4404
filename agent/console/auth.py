"""Who may use the console: the token file, the request checks and the control rate limit.

Policy (issue 12): bound to a loopback address the console needs no token, but it answers
only requests whose ``Host`` is a loopback name (a web page elsewhere cannot reach it by
DNS rebinding). Bound to any other address, every request except the login form needs the
token: ``Authorization: Bearer TOKEN``, or the ``bolt_console`` cookie that the login form
sets (HttpOnly, SameSite=Strict). Tokens are compared in constant time.

The token is made once (:func:`ensure_token`: 32 random bytes, URL-safe) and stored in a
file with mode 0600 in a folder with mode 0700; later starts reuse it. Controls are
rate-limited per client address with a token bucket (:class:`RateLimiter`).
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import logging
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

COOKIE = "bolt_console"
"""Name of the login cookie."""


def default_token_path() -> Path:
    """``$XDG_CONFIG_HOME/bolt-agent/console-token`` (``~/.config`` when unset)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "bolt-agent" / "console-token"


MAX_TOKEN_FILE = 4096
"""Most characters read from a token file (a token is 43)."""


def ensure_token(path: Path) -> tuple[str, bool]:
    """Read the console token from ``path``, or make one and store it there with mode 0600.

    Args:
        path: The token file.

    Returns:
        ``(token, created)``: ``created`` is True when the token was made now (print it once).

    Raises:
        OSError: the file cannot be read or written.
    """
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            token = f.read(MAX_TOKEN_FILE).strip()  # bounded: the path may be a device or a huge file
    except FileNotFoundError:
        token = ""
    if token and not token.isprintable():
        log.warning("console token file %s holds no usable token; making a new one", path)
        token = ""
    if token:
        if path.is_file() and stat.S_IMODE(path.stat().st_mode) & 0o077:
            log.warning("console token file %s was readable by others; now mode 0600", path)
            path.chmod(0o600)
        return token, False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(token + "\n")
        path.chmod(0o600)  # O_CREAT's mode does not change an existing (empty) file
    except OSError as e:  # a full disk, a read-only folder: name the file and the errno
        code = errno.errorcode.get(e.errno or 0, "?")
        raise OSError(e.errno, f"cannot write the console token file {path}: {code} ({e.strerror})") from None
    return token, True


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    h = host.strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8080`` → ``::1``, ``a:80`` → ``a``)."""
    if host_header.startswith("["):
        return host_header[1:].split("]", 1)[0]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class Access:
    """The token check of one server.

    Args:
        token: Required token; None only for a loopback bind.
        loopback: The server is bound to a loopback address.

    Raises:
        ValueError: a non-loopback bind without a token.
    """

    def __init__(self, token: str | None, loopback: bool) -> None:
        if token is None and not loopback:
            raise ValueError("a console on a non-local address needs a token")
        self.token = token
        self.loopback = loopback

    def host_ok(self, host_header: str | None) -> bool:
        """A loopback server answers only requests addressed to a loopback name."""
        if not self.loopback:
            return True
        return host_header is not None and is_loopback(_host_name(host_header))

    def allowed(self, authorization: str | None, cookie: str | None) -> bool:
        """True when no token is needed, or the request carries the right one."""
        if self.token is None:
            return True
        for given in (_bearer(authorization), cookie):
            if given and hmac.compare_digest(given.encode(), self.token.encode()):
                return True
        return False

    def check_token(self, given: str) -> bool:
        """Constant-time comparison of a token typed into the login form."""
        return self.token is None or hmac.compare_digest(given.strip().encode(), self.token.encode())


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


class RateLimiter:
    """Token bucket per client: ``rate_per_s`` requests a second, ``burst`` at once.

    Args:
        rate_per_s: Sustained requests per second.
        burst: Bucket size.
        clock: Monotonic clock, s.
    """

    def __init__(self, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = rate_per_s, float(burst), clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def allow(self, key: str) -> float:
        """Take one request for ``key``.

        Returns:
            0.0 when allowed, else the seconds until the next request would be.
        """
        now = self.clock()
        with self._lock:
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            if len(self._buckets) > 1024:  # forget idle clients
                self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < 60}
            return (1.0 - tokens) / self.rate
