"""Resource figures of a running process from ``/proc`` (Linux): memory, threads, files, CPU time.

Read by ``bolt-agent soak`` (:mod:`tools.bench.soak`) every few seconds and at each turn.
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
        cpu_s: CPU time the process has used, user + system, s (``/proc/PID/stat`` fields 14
            and 15, in clock ticks; proc(5)): per turn, the work a turn costs.
        maps: Memory mappings (lines of ``/proc/PID/maps``): a slow rise is a heap fragmenting
            into more, smaller mappings.
    """

    t_s: float
    rss_mib: float
    pss_mib: float
    anon_mib: float
    threads: int
    fds: int
    turn: int = -1
    cpu_s: float = 0.0
    maps: int = 0

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
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            cpu_s = _cpu_s(f.read())
        with open(f"/proc/{pid}/maps", encoding="ascii", errors="replace") as f:
            maps = sum(1 for _ in f)
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
        cpu_s=cpu_s,
        maps=maps,
    )


def _cpu_s(stat: str) -> float:
    """User + system CPU time in a ``/proc/PID/stat`` line, s.

    The command name (field 2) may hold spaces and parentheses: fields are counted after its
    last ``)``, where field 3 (state) comes first, so utime and stime (14, 15) are at 11 and 12.
    """
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])
    return round(ticks / os.sysconf("SC_CLK_TCK"), 2)


def _smaps_kb(text: str) -> dict[str, int]:
    """``Key: N kB`` lines of smaps_rollup as ``{key: N}``."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[key.strip()] = int(parts[0])
    return out
