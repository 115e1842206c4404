"""Resource figures of a running process from ``/proc`` (Linux): memory, threads, open files.

Read by ``bolt-agent soak`` (:mod:`agent.bench.soak`) every few seconds and at each turn.
RSS counts every resident page of the process; PSS (proportional set size) divides each
shared page by the number of processes mapping it, so the shared libraries and model files
mapped by several processes are not counted twice. Both come from
``/proc/PID/smaps_rollup`` (Linux >= 4.14, ``Documentation/filesystems/proc.rst``), in kB
there and MiB here.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ProcSample:
    """One reading of a process.

    Attributes:
        t_s: When, s since the soak started (monotonic clock).
        rss_mib: Resident set size, MiB.
        pss_mib: Proportional set size, MiB.
        anon_mib: Anonymous resident memory (heap, arenas, KV cache), MiB.
        threads: Threads (entries of ``/proc/PID/task``).
        fds: Open file descriptors (entries of ``/proc/PID/fd``).
        turn: The soak turn the sample was taken at (-1: a periodic sample between turns).
    """

    t_s: float
    rss_mib: float
    pss_mib: float
    anon_mib: float
    threads: int
    fds: int
    turn: int = -1

    def to_json(self) -> dict[str, Any]:
        """The sample as a JSON-able dict (its fields)."""
        return asdict(self)


def read_sample(pid: int, t0: float, turn: int = -1) -> ProcSample | None:
    """Read ``pid``'s memory, threads and descriptors now.

    Args:
        pid: The process.
        t0: The soak's start on :func:`time.monotonic`, s.
        turn: The turn this sample belongs to (-1: periodic).

    Returns:
        The sample, or None when the process is gone (or exits while it is read).
    """
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            kb = _smaps_kb(f.read())
        threads = len(os.listdir(f"/proc/{pid}/task"))
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    return ProcSample(
        t_s=round(time.monotonic() - t0, 3),
        rss_mib=round(kb.get("Rss", 0) / 1024, 2),
        pss_mib=round(kb.get("Pss", 0) / 1024, 2),
        anon_mib=round(kb.get("Anonymous", 0) / 1024, 2),
        threads=threads,
        fds=fds,
        turn=turn,
    )


def _smaps_kb(text: str) -> dict[str, int]:
    """``Key: N kB`` lines of smaps_rollup as ``{key: N}``."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[key.strip()] = int(parts[0])
    return out
