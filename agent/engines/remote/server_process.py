"""llama.cpp's ``llama-server`` as a child process: flags from config, start, health, restart, stop.

:class:`LlamaServerProcess` starts the server with flags derived from ``[llm]`` and
``[llm.server]`` (:func:`server_args`), waits until ``GET /health`` answers 200 (it answers 503
while the model loads; ``tools/server/README.md``), and writes the server's output to a log file
whose path every error names. :meth:`LlamaServerProcess.ensure_running` is called before each
request: a server that has died is started again, after a back-off that doubles with every
restart in a row (reset by :meth:`LlamaServerProcess.mark_healthy`). :meth:`LlamaServerProcess.stop`
sends SIGTERM, then SIGKILL after a grace period; it also runs at interpreter exit, and on Linux
the child gets SIGTERM from the kernel if bolt-agent itself dies (``PR_SET_PDEATHSIG``).

The binary: ``[llm.server] binary``, else the one ``launch/build_llama_server.sh`` cached under
``~/.cache/bolt-agent/llama-server/VERSION-ARCH[-cuda]/`` (newest first), else ``llama-server``
on ``$PATH``.

Threading: one model (one conversation thread) drives a process; ``stop`` may come from any
thread or from ``atexit``.
"""

from __future__ import annotations

import atexit
import logging
import os
import platform
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agent.engines.remote.http import ServerUnreachable, request_json

if TYPE_CHECKING:
    from agent.config import LLMConfig

log = logging.getLogger(__name__)

CACHE_ENV = "BOLT_LLAMA_SERVER_CACHE"


class ServerStartError(Exception):
    """llama-server is missing, exited during start, or did not become healthy in time."""


def default_cache_dir() -> Path:
    """Where ``launch/build_llama_server.sh`` puts its builds (``$BOLT_LLAMA_SERVER_CACHE`` overrides)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bolt-agent" / "llama-server"


def find_binary(configured: str = "") -> Path | None:
    """The llama-server executable to run, or None when there is none.

    Args:
        configured: ``[llm.server] binary`` ("" = search the build cache, then ``$PATH``).

    Returns:
        An existing executable file, or None.
    """
    if configured:
        p = Path(configured).expanduser()
        return p if p.is_file() and os.access(p, os.X_OK) else None
    cache = default_cache_dir()
    if cache.is_dir():
        arch = platform.machine()

        def version(d: Path) -> tuple[int, ...]:
            head = d.name.split("-", 1)[0]
            return tuple(int(x) for x in head.split(".") if x.isdigit())

        builds = [d for d in cache.iterdir() if d.is_dir() and f"-{arch}" in d.name]
        for d in sorted(builds, key=version, reverse=True):
            exe = d / "llama-server"
            if exe.is_file() and os.access(exe, os.X_OK):
                return exe
    found = shutil.which("llama-server")
    return Path(found) if found else None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host`` (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def server_args(
    cfg: LLMConfig,
    model: Path,
    draft: Path | None,
    host: str,
    port: int,
    mmproj: Path | None = None,
    mmproj_offload: bool = True,
) -> list[str]:
    """llama-server's command-line flags for a config (without the binary).

    Flags as documented by llama-server 11434 (``common/arg.cpp``): context ``-c``, threads
    ``-t``/``-tb``, GPU layers ``-ngl`` (-1 → ``all``), batch ``-b``, cache types ``-ctk``/``-ctv``,
    ``-fa on|off``, ``--seed``, one slot ``-np``, ``--ctx-checkpoints``, ``--cache-ram``,
    lazy per-layer embeddings ``-lzm``, ``--jinja`` (the GGUF's template for
    ``/v1/chat/completions``), ``--fit off`` (the memory plan chose the context; the server must
    not shrink it silently), no web UI; with a draft model ``-md``, ``--spec-type``,
    ``--spec-draft-n-max``, ``-ngld``, ``-td`` and the draft KV cache types ``-ctkd``/``-ctvd``
    (the chat model's; llama-server's own default is f16), as the memory plan counts them
    (:mod:`agent.memplan.draft`); with a vision projector ``--mmproj`` (and
    ``--no-mmproj-offload`` to keep it on the CPU).

    Args:
        cfg: ``[llm]`` (with ``[llm.server]``); ``n_ctx`` must already be a number.
        model: The GGUF to serve.
        draft: The draft GGUF, or None.
        host: Listen address.
        port: Listen port.
        mmproj: The vision projector GGUF, or None (text only).
        mmproj_offload: The projector may run on the GPU (False: ``--no-mmproj-offload``).

    Returns:
        The argument list.
    """
    srv = cfg.server
    ngl = "all" if cfg.n_gpu_layers < 0 else str(cfg.n_gpu_layers)
    lazy = "on" if cfg.lazy_per_layer_embd else srv.lazy_mode
    args = [
        "-m", str(model),
        "--host", host,
        "--port", str(port),
        "-c", str(cfg.n_ctx),
        "-t", str(cfg.threads),
        "-tb", str(cfg.threads),
        "-ngl", ngl,
        "-b", str(cfg.n_batch),
        "-ctk", cfg.cache_type_k,
        "-ctv", cfg.cache_type_v,
        "-fa", "on" if cfg.flash_attn else "off",
        "--seed", str(cfg.seed),
        "-np", str(srv.parallel),
        "--ctx-checkpoints", str(srv.ctx_checkpoints),
        "--cache-ram", str(srv.cache_ram),
        "-lzm", lazy,
        "--jinja",
        "--fit", "off",
        "--no-webui",
    ]  # fmt: skip
    if cfg.swa_full:
        args.append("--swa-full")
    spec = srv.spec_type
    if spec == "auto":
        spec = "draft-simple" if draft is not None else "none"
    if draft is not None:
        dngl = ngl if srv.draft_gpu_layers < 0 else str(srv.draft_gpu_layers)
        args += ["-md", str(draft), "--spec-draft-n-max", str(srv.draft_n_max), "-ngld", dngl]
        args += ["-td", str(cfg.threads), "-ctkd", cfg.cache_type_k, "-ctvd", cfg.cache_type_v]
    if spec != "none":
        args += ["--spec-type", spec]
    if mmproj is not None:
        args += ["--mmproj", str(mmproj)]
        if not mmproj_offload:
            args.append("--no-mmproj-offload")
    return args + list(srv.extra_args)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LlamaServerProcess:
    """One llama-server child process, kept alive.

    Args:
        binary: The executable.
        args_for_port: Builds the flags for a port (:func:`server_args` bound to a config).
        host: Listen address (health checks go there).
        port: Listen port; 0 = a free one, chosen at each start.
        startup_timeout_s: Longest wait for ``/health`` at a start, s.
        backoff_s: First wait before a restart, s (doubles for restarts in a row).
        backoff_max_s: Longest wait before a restart, s.
        log_file: Where the server's stdout and stderr go ("" = ``llama-server-PID.log`` in the
            temp folder).
        clock: Monotonic clock, s (tests inject one).
        sleep: Sleep function, s.
    """

    def __init__(
        self,
        binary: Path,
        args_for_port: Callable[[int], list[str]],
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout_s: float = 120.0,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        log_file: str = "",
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.binary = binary
        self.args_for_port = args_for_port
        self.host = host
        self.want_port = port
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.backoff_s, self.backoff_max_s = backoff_s, backoff_max_s
        self.log_path = (
            Path(log_file) if log_file else Path(tempfile.gettempdir()) / f"llama-server-{os.getpid()}.log"
        )
        self.clock, self.sleep = clock, sleep
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._failures = 0
        self._lock = threading.Lock()
        self._closed = False
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        """Base URL of the running server, ``http://host:port``."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def alive(self) -> bool:
        """The child process exists and has not exited."""
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the server and wait until it is healthy.

        Raises:
            ServerStartError: the process exited during start or ``/health`` did not answer 200
                within ``startup_timeout_s``; the message names the log file and quotes its end.
        """
        with self._lock:
            self._start_locked()

    def _start_locked(self) -> None:
        if self._closed:
            raise ServerStartError("llama-server was stopped (the model is closed)")
        self._terminate()
        self.port = self.want_port or free_port(
            self.host if self.host not in ("0.0.0.0", "") else "127.0.0.1"
        )
        argv = [str(self.binary), *self.args_for_port(self.port)]
        log.info("starting llama-server: %s (log: %s)", " ".join(argv), self.log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            out.write(f"\n--- bolt-agent starts: {' '.join(argv)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in a terminal reaches bolt-agent, which stops the server
                preexec_fn=_die_with_parent if os.name == "posix" else None,
            )
        self.starts += 1
        deadline = self.clock() + self.startup_timeout_s
        while True:
            code = self.proc.poll()
            if code is not None:
                raise ServerStartError(
                    f"llama-server exited with status {code} during start; "
                    f"see {self.log_path}:\n{self.log_tail()}"
                )
            try:
                status, _ = request_json(self.url, "GET", "/health", timeout_s=2.0)
                if status == 200:
                    log.info("llama-server ready at %s (pid %d)", self.url, self.proc.pid)
                    return
            except ServerUnreachable:
                pass
            if self.clock() > deadline:
                self._terminate()
                raise ServerStartError(
                    f"llama-server did not become healthy within {self.startup_timeout_s:g} s "
                    f"([llm.server] startup_timeout_s); see {self.log_path}:\n{self.log_tail()}"
                )
            self.sleep(0.1)

    def ensure_running(self) -> bool:
        """Restart the server if it has died (with back-off); True when it was restarted.

        Raises:
            ServerStartError: the restart failed.
        """
        with self._lock:
            if self.alive():
                return False
            code = self.proc.returncode if self.proc is not None else None
            wait = min(self.backoff_max_s, self.backoff_s * (2**self._failures))
            self._failures += 1
            log.warning(
                "llama-server is not running (exit status %s); restarting in %.1f s (log: %s)",
                code,
                wait,
                self.log_path,
            )
            self.sleep(wait)
            self._start_locked()
            return True

    def mark_healthy(self) -> None:
        """A request succeeded: the next restart starts again from the shortest back-off."""
        self._failures = 0

    def log_tail(self, n: int = 15) -> str:
        """The last ``n`` lines of the server log ("" when unreadable)."""
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def _terminate(self, grace_s: float = 5.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            log.warning("llama-server (pid %d) ignored SIGTERM for %.0f s; killing it", proc.pid, grace_s)
            proc.kill()
            proc.wait(5.0)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s); later calls do nothing."""
        with self._lock:
            self._closed = True
            self._terminate()
        atexit.unregister(self.stop)
