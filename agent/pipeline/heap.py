"""Give the C heap's free pages back to the system after each turn (glibc's ``malloc_trim``).

Why: the models run in threads of their own (ASR, TTS, the chat model, Smart Turn), and glibc
gives each thread that allocates concurrently a malloc arena of its own (64 MiB regions). What a
turn frees inside those arenas stays mapped: ``free`` returns memory to the system only from the
top of an arena, so a buffer still held above a freed one pins it. ``bolt-agent soak`` showed
the agent's anonymous memory growing 1-2 MiB a turn after warm-up, spread over eight such
arenas (``/proc/PID/smaps``), not in Python's heap (tracemalloc: flat). ``malloc_trim(0)``
releases every whole free page of every arena (``madvise(MADV_DONTNEED)``; glibc >= 2.8,
malloc_trim(3)), so what the next turn needs is mapped again on demand and the resident set
follows what is really in use.

A trim gives back whole free pages only; what is freed in pieces stays spread over the arenas.
:func:`limit_arenas` caps their number (``mallopt(M_ARENA_MAX)``, the same as
``MALLOC_ARENA_MAX``) so the threads reuse each other's freed memory; off by default (see
:data:`ARENAS`: it slows turns).

Elsewhere (musl, macOS) there is no ``malloc_trim``: :class:`HeapTrimmer` is then a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

ARENAS = 2
"""Default cap of :func:`limit_arenas` (glibc's default: up to 8 per core; glibc manual, "Memory
Allocation Tunables", ``glibc.malloc.arena_max``): the main thread's and one the others share.
Not applied by ``bolt-agent run``: measured with ``bolt-agent bench`` it cost ~100 ms at p50 and
~300 ms at p95 voice-to-voice (threads waiting on the shared arenas' locks)."""
M_ARENA_MAX = -8
"""``mallopt`` parameter number of ``M_ARENA_MAX`` (glibc ``malloc/malloc.h``)."""
M_MMAP_THRESHOLD = -3
"""``mallopt`` parameter number of ``M_MMAP_THRESHOLD`` (glibc ``malloc/malloc.h``)."""
MMAP_THRESHOLD = 128 * 1024
"""Blocks this large or larger get a mapping of their own, bytes: glibc's starting value, fixed
(mallopt(3): by default it rises, up to 32 MiB on 64-bit, each time such a block is freed, after
which blocks of that size are carved out of the arenas and fragment them). Measured with
``bolt-agent soak --turns 200`` (flash attention on): PSS 702 -> 737 MiB from turn 50 to 200
(+5.0 %) with the moving threshold, 629 -> 650 MiB (+3.4 %, one step of 19 MiB at turn 78, flat
otherwise) with it fixed; voice-to-voice p50 1606/1649 ms over the first/last 40 turns."""
MIN_INTERVAL_S = 5.0
"""Shortest time between two trims, s: a trim walks every arena's free chunks under its lock."""
DELAY_S = 0.5
"""Wait between a turn's end and its trim, s: the events that end a turn go out first."""


def _libc_function(name: str, argtypes: list[Any]) -> Any | None:
    """The C library's function ``name`` (returning int) through ctypes, or None where it has none."""
    lib = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(lib) if lib else ctypes.CDLL(None)
        fn = getattr(libc, name)
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return fn


def _glibc_trim() -> Callable[[int], int] | None:
    """The C library's ``malloc_trim`` through ctypes, or None where it has none (not glibc)."""
    return _libc_function("malloc_trim", [ctypes.c_size_t])


def limit_arenas(n: int = ARENAS, environ: Mapping[str, str] | None = None) -> bool:
    """Cap glibc's malloc arenas at ``n`` for the rest of the process (``mallopt(M_ARENA_MAX)``).

    Call it before the model threads start: arenas made before stay. ``MALLOC_ARENA_MAX`` or a
    ``GLIBC_TUNABLES`` setting in the environment wins (the user's own choice is left alone).

    Args:
        n: Arenas, >= 1.
        environ: The environment to check (default ``os.environ``).

    Returns:
        True when the cap was set; False without glibc or when the environment sets one.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"arenas must be >= 1, got {n}")
    env = os.environ if environ is None else environ
    if "MALLOC_ARENA_MAX" in env or "arena_max" in env.get("GLIBC_TUNABLES", ""):
        return False
    mallopt = _libc_function("mallopt", [ctypes.c_int, ctypes.c_int])
    return mallopt is not None and bool(mallopt(M_ARENA_MAX, n))


def fix_mmap_threshold(n: int = MMAP_THRESHOLD, environ: Mapping[str, str] | None = None) -> bool:
    """Fix glibc's mmap threshold at ``n`` bytes for the rest of the process (``mallopt(M_MMAP_THRESHOLD)``).

    A freed block at or over the threshold goes back to the system at once (``munmap``), so the
    models' large per-turn buffers no longer stay in the arenas as free, half-resident memory.
    Setting it also stops glibc's dynamic adjustment of the mmap and trim thresholds (mallopt(3)).
    ``MALLOC_MMAP_THRESHOLD_`` or a ``GLIBC_TUNABLES`` ``mmap_threshold`` in the environment wins.

    Args:
        n: Threshold, bytes, 0 to 32 MiB (glibc's ``HEAP_MAX_SIZE / 2`` on 64-bit).
        environ: The environment to check (default ``os.environ``).

    Returns:
        True when the threshold was set; False without glibc or when the environment sets one.

    Raises:
        ValueError: ``n`` out of range.
    """
    if not 0 <= n <= 32 * 1024 * 1024:
        raise ValueError(f"mmap threshold must be 0 to 32 MiB, got {n} bytes")
    env = os.environ if environ is None else environ
    if "MALLOC_MMAP_THRESHOLD_" in env or "mmap_threshold" in env.get("GLIBC_TUNABLES", ""):
        return False
    mallopt = _libc_function("mallopt", [ctypes.c_int, ctypes.c_int])
    return mallopt is not None and bool(mallopt(M_MMAP_THRESHOLD, n))


class HeapTrimmer:
    """Runs ``malloc_trim(0)`` in a thread of its own, ``delay_s`` after a turn ends.

    The trim takes milliseconds to tens of milliseconds (it holds each arena's lock in turn), so
    it never runs on the thread that reports a turn's end: that thread may be in the middle of a
    barge-in, publishing what was cut. Trims are at least ``min_interval_s`` apart; a request
    that comes sooner is served when the interval is over, never dropped.

    Args:
        min_interval_s: Shortest time between two trims, s (:data:`MIN_INTERVAL_S`).
        delay_s: Wait after :meth:`request` before trimming, s (:data:`DELAY_S`).
        clock: Monotonic clock, s.

    Attributes:
        available: The C library has ``malloc_trim`` (glibc).
        trims: Trims done so far.
        last_ms: Duration of the last trim, ms.
    """

    def __init__(
        self,
        min_interval_s: float = MIN_INTERVAL_S,
        delay_s: float = DELAY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._trim = _glibc_trim()
        self.available = self._trim is not None
        self.min_interval_s, self.delay_s, self._clock = min_interval_s, delay_s, clock
        self._last = -float("inf")
        self.trims = 0
        self.last_ms = 0.0
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def request(self, *_: object) -> None:
        """Ask for a trim soon; returns at once (arguments are ignored: it is routed a bus message).

        The trim runs ``delay_s`` later, or ``min_interval_s`` after the last trim when that is
        later; requests made meanwhile are served by that one trim.
        """
        if self._trim is None or self._closed.is_set():
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="heap-trim", daemon=True)
                self._thread.start()
        self._wake.set()

    def trim_now(self) -> bool:
        """Trim now, unless the last trim was less than ``min_interval_s`` ago.

        Returns:
            True when a trim ran.
        """
        now = self._clock()
        if self._trim is None or now - self._last < self.min_interval_s:
            return False
        self._last = now
        t0 = time.perf_counter()
        released = self._trim(0)
        self.last_ms = (time.perf_counter() - t0) * 1000
        self.trims += 1
        log.debug(
            "malloc_trim: %s in %.1f ms",
            "released memory" if released else "nothing to release",
            self.last_ms,
        )
        return True

    def close(self, timeout: float = 1.0) -> None:
        """Stop the trim thread (a trim under way finishes first)."""
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._closed.wait(self.delay_s):
                return
            self._wake.clear()
            # A request inside the interval waits for it instead of being dropped: two turns
            # close together (a barge-in, a typed line) would otherwise leave the second turn's
            # freed buffers resident until some later turn (the soak sampled them as growth).
            if self._closed.wait(max(0.0, self._last + self.min_interval_s - self._clock())):
                return
            self.trim_now()
