"""Device profiles: how much memory a board has for bolt-agent and how its GPU shares it.

The unified-memory rule: on a Jetson the CPU and the GPU share one DRAM, so GPU buffers
(weights, KV cache, compute) and host memory (mapped weights, Python, ASR, TTS, vision)
all come out of the same budget; llama.cpp even reports the iGPU's free "VRAM" as
``MemAvailable`` (``docs/facts.md``). On a machine without a GPU backend the same single
budget applies and ``n_gpu_layers`` is ignored, as in a CPU build of llama.cpp.

Board figures are public numbers, not measured here, and are labelled as such in reports;
``this`` reads ``/proc/meminfo`` (``MemAvailable`` is what is free now) and
``/proc/cpuinfo`` (which weight types the CPU repacks) of the machine it runs on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent.memplan.llm import REPACK_ARM_DOTPROD, REPACK_X86_AVX2, GiB, MiB

__all__ = ["PROFILES", "DeviceProfile", "UnknownDeviceError", "get_device", "this_machine"]


class UnknownDeviceError(ValueError):
    """A device profile name that is not known; the message lists the valid ones."""


@dataclass(frozen=True)
class DeviceProfile:
    """Memory available to bolt-agent on one kind of machine (bytes).

    Attributes:
        name: Profile name (``orin-nano-8gb``, ``orin-nx-16gb``, ``this``).
        description: One line for reports.
        ram: RAM the OS sees (``MemTotal``).
        reserve: Kept for the OS and other services (or, for ``this``, in use right now).
        unified: GPU buffers are carved out of the same RAM.
        has_gpu: llama.cpp has a GPU backend here (else ``n_gpu_layers`` is ignored).
        gpu_runtime: Fixed cost of the GPU runtime (CUDA context, cuBLAS), counted once.
        repack_types: ggml types the CPU repacks for matrix products (extra host copies).
        source: Where the figures come from.

    """

    name: str
    description: str
    ram: int
    reserve: int
    unified: bool
    has_gpu: bool
    gpu_runtime: int
    repack_types: frozenset[str]
    source: str

    @property
    def budget(self) -> int:
        """Bytes bolt-agent may use: ``ram - reserve``."""
        return max(0, self.ram - self.reserve)


PROFILES: dict[str, DeviceProfile] = {
    "orin-nano-8gb": DeviceProfile(
        name="orin-nano-8gb",
        description="Jetson Orin Nano 8 GB (JetPack 6, headless; unified memory)",
        ram=int(7.4 * GiB),
        reserve=int(1.2 * GiB),
        unified=True,
        has_gpu=True,
        gpu_runtime=400 * MiB,
        repack_types=REPACK_ARM_DOTPROD,
        source="public figures, not measured here: MemTotal ~7.4 GiB of the 8 GB module; ~1.2 GiB kept for "
        "JetPack 6 without a desktop; CUDA context + cuBLAS ~0.4 GiB (estimate)",
    ),
    "orin-nx-16gb": DeviceProfile(
        name="orin-nx-16gb",
        description="Jetson Orin NX 16 GB (JetPack 6, headless; unified memory)",
        ram=int(15.3 * GiB),
        reserve=int(1.2 * GiB),
        unified=True,
        has_gpu=True,
        gpu_runtime=400 * MiB,
        repack_types=REPACK_ARM_DOTPROD,
        source="public figures, not measured here: MemTotal ~15.3 GiB of the 16 GB module; ~1.2 GiB kept for "
        "JetPack 6 without a desktop; CUDA context + cuBLAS ~0.4 GiB (estimate)",
    ),
}


def _meminfo(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    return out


def this_machine(
    meminfo: str | None = None, cpuinfo: str | None = None, tegra: bool | None = None
) -> DeviceProfile:
    """Build the profile of the machine this runs on.

    Args:
        meminfo: ``/proc/meminfo`` text (read when None).
        cpuinfo: ``/proc/cpuinfo`` text (read when None).
        tegra: Whether this is a Jetson (unified memory, CUDA); detected from
            ``/etc/nv_tegra_release`` when None.

    Returns:
        A profile whose budget is ``MemAvailable`` (memory free now, page cache included).

    Raises:
        OSError: ``/proc/meminfo`` cannot be read (not Linux).

    """
    info = _meminfo(meminfo if meminfo is not None else Path("/proc/meminfo").read_text())
    total = info.get("MemTotal", 0)
    available = info.get("MemAvailable", info.get("MemFree", 0))
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    flags = set(cpuinfo.replace(":", " ").split())
    repack = REPACK_X86_AVX2 if "avx2" in flags else REPACK_ARM_DOTPROD if "asimddp" in flags else frozenset()
    if tegra is None:
        tegra = Path("/etc/nv_tegra_release").exists()
    return DeviceProfile(
        name="this",
        description=f"this machine ({'Jetson, unified memory' if tegra else 'CPU only'})",
        ram=total,
        reserve=total - available,
        unified=True,
        has_gpu=bool(tegra),
        gpu_runtime=400 * MiB if tegra else 0,
        repack_types=repack,
        source="/proc/meminfo now: budget = MemAvailable"
        + ("; CUDA runtime ~0.4 GiB (estimate)" if tegra else ""),
    )


def get_device(name: str) -> DeviceProfile:
    """Look up a profile by name (``this`` = the machine this runs on).

    Raises:
        UnknownDeviceError: not a known profile; the message lists the known ones.

    """
    if name == "this":
        return this_machine()
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownDeviceError(
            f"unknown device profile {name!r}; choose one of {', '.join([*PROFILES, 'this'])}"
        ) from None
