"""Which JetPack this is, and whether the Python and the Reachy Mini SDK fit it (``bolt-agent doctor``).

JetPack 7.2 (Ubuntu 24.04, Python 3.12, CUDA 13) is the default target, as for NVIDIA's own Reachy
Mini assistant on the Orin Nano; JetPack 6 (Ubuntu 22.04, Python 3.10) is kept: there
``reachy-mini`` stops at 1.8.4 (1.9 and later need Python 3.11), so the robot's daemon must be a
1.8 release too. Read, in order: the ``nvidia-jetpack`` package's version (``6.2.1+b38`` →
6.2.1) and ``/etc/nv_tegra_release``'s L4T release (``# R36 (release), REVISION: 4.3`` → L4T
36.4.3: JetPack 6; R38 and later: JetPack 7). ``jetson/install.sh`` reads the same two.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from hardware.check import Check

TEGRA_RELEASE = Path("/etc/nv_tegra_release")
DEFAULT_JETPACK = 7
"""The JetPack installs target by default (7.2: Python 3.12)."""
PYTHON_OF = {6: (3, 10), 7: (3, 12)}
"""JetPack major → its Ubuntu's Python, the one the venv is made with."""


@dataclass(frozen=True)
class Jetpack:
    """A JetPack release as found on this machine.

    Attributes:
        major: 5, 6 or 7.
        version: ``6.2.1`` from the ``nvidia-jetpack`` package, else ``6.x`` from L4T alone.
        l4t: ``36.4.3`` (the L4T release), or ``""`` when the file is missing.
    """

    major: int
    version: str
    l4t: str


def l4t_release(text: str) -> str:
    """``# R36 (release), REVISION: 4.3, ...`` → ``36.4.3``; ``""`` when it is not that line."""
    m = re.match(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)", text.strip())
    return f"{m.group(1)}.{m.group(2)}" if m else ""


def major_of_l4t(l4t: str) -> int | None:
    """L4T 35 → JetPack 5, 36 → 6, 38 and later → 7; None for other text."""
    try:
        r = int(l4t.split(".")[0])
    except ValueError:
        return None
    return 5 if r == 35 else 6 if r == 36 else 7 if r >= 38 else None


def find_jetpack(tegra_release: Path = TEGRA_RELEASE, package_version: str | None = None) -> Jetpack | None:
    """The JetPack of this machine, or None when it is no Jetson.

    Args:
        tegra_release: L4T's release file.
        package_version: The ``nvidia-jetpack`` package's version; None: asked of ``dpkg-query``.
    """
    try:
        l4t = l4t_release(tegra_release.read_text(encoding="utf-8", errors="replace").splitlines()[0])
    except (OSError, IndexError):
        l4t = ""
    if package_version is None:
        try:
            r = subprocess.run(
                ["dpkg-query", "-W", "-f=${Version}", "nvidia-jetpack"],
                capture_output=True,
                text=True,
                timeout=5,
            )
            package_version = r.stdout.strip() if r.returncode == 0 else ""
        except (OSError, subprocess.TimeoutExpired):
            package_version = ""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", package_version or "")
    if m:
        version = ".".join(g for g in m.groups() if g is not None)
        return Jetpack(int(m.group(1)), version, l4t)
    major = major_of_l4t(l4t)
    return Jetpack(major, f"{major}.x", l4t) if major is not None else None


def check_jetpack(
    reachy: bool,
    sdk_version: str | None,
    jetpack: Jetpack | None = None,
    python: tuple[int, int] = (sys.version_info[0], sys.version_info[1]),
    found: bool = True,
) -> Check:
    """Which JetPack this is, with the Python and (for a Reachy Mini) the SDK release that go with it.

    Args:
        reachy: The config drives a Reachy Mini.
        sdk_version: The installed ``reachy-mini``, or None.
        jetpack: What :func:`find_jetpack` found (default: look now).
        python: This interpreter's (major, minor).
        found: False to skip looking (``jetpack`` None then means no Jetson).

    Returns:
        ``jetpack``: ok unless the venv's Python is not the one of this JetPack (a venv made with
        another Python than ``jetson/install.sh`` uses).
    """
    if jetpack is None and found:
        jetpack = find_jetpack()
    py = f"Python {python[0]}.{python[1]}"
    sdk = f"; reachy-mini {sdk_version} in this environment" if reachy and sdk_version else ""
    if jetpack is None:
        return Check("jetpack", True, f"not a Jetson (no {TEGRA_RELEASE}); {py}{sdk}")
    l4t = f" (L4T {jetpack.l4t})" if jetpack.l4t else ""
    detail = f"JetPack {jetpack.version}{l4t}, {py}{sdk}"
    want = PYTHON_OF.get(jetpack.major)
    if want is not None and python != want:
        return Check(
            "jetpack",
            False,
            f"{detail}: JetPack {jetpack.major}'s Python is {want[0]}.{want[1]}",
            "sudo jetson/install.sh  # makes the venv with this JetPack's Python",
            blocking=False,
        )
    if reachy and python < (3, 11):
        detail += "; on Python 3.10 reachy-mini stops at 1.8.4: the robot's daemon must be a 1.8 release"
    return Check("jetpack", True, detail)
