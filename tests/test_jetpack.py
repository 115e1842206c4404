"""JetPack 7.2 (Python 3.12) by default, JetPack 6 (Python 3.10: reachy-mini 1.8.4) kept (issue 48, item 7).

``bolt-agent doctor`` says which JetPack it found, from L4T's release file and the
``nvidia-jetpack`` package's version (written here as a Jetson has them); ``jetson/install.sh``
reads the same and picks the Python its venv is made with (its dry run).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hardware.jetson import Jetpack, check_jetpack, find_jetpack, l4t_release

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "jetson" / "install.sh"
R36 = "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64"
R38 = "# R38 (release), REVISION: 4.0, GCID: 41000000, BOARD: generic, EABI: aarch64"


def test_the_jetpack_is_read_from_the_package_or_l4t(tmp_path):
    release = tmp_path / "nv_tegra_release"
    release.write_text(R36 + "\n")
    assert l4t_release(R36) == "36.4.3" and l4t_release("KERNEL_VARIANT=oot") == ""
    assert find_jetpack(release, "6.2.1+b38") == Jetpack(6, "6.2.1", "36.4.3")
    assert find_jetpack(release, "") == Jetpack(6, "6.x", "36.4.3")
    release.write_text(R38 + "\n")
    assert find_jetpack(release, "7.2-b35") == Jetpack(7, "7.2", "38.4.0")
    assert find_jetpack(tmp_path / "absent", "") is None


def test_doctor_says_which_jetpack_and_whether_the_python_fits():
    jp7, jp6 = Jetpack(7, "7.2", "38.4.0"), Jetpack(6, "6.2.1", "36.4.3")
    ok = check_jetpack(True, "1.13.0", jp7, (3, 12))
    assert (
        ok.ok and ok.detail == "JetPack 7.2 (L4T 38.4.0), Python 3.12; reachy-mini 1.13.0 in this environment"
    )
    old = check_jetpack(True, "1.8.4", jp6, (3, 10))
    assert old.ok and "JetPack 6.2.1" in old.detail and "daemon must be a 1.8 release" in old.detail
    wrong = check_jetpack(False, None, jp7, (3, 10))
    assert not wrong.ok and not wrong.blocking and "JetPack 7's Python is 3.12" in wrong.detail
    assert "install.sh" in wrong.fix
    here = check_jetpack(False, None, None, (3, 11), found=False)
    assert here.ok and here.detail.startswith("not a Jetson")


def _dry(*args: str, release: str | None = None, tmp_path: Path) -> str:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if release is not None:
        (tmp_path / "nv").write_text(release + "\n")
        env["NV_TEGRA_RELEASE"] = str(tmp_path / "nv")
    else:
        env["NV_TEGRA_RELEASE"] = str(tmp_path / "none")
    r = subprocess.run(
        ["bash", str(SCRIPT), "--dry-run", "--prefix", str(tmp_path / "root"), "--no-cuda", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_install_targets_jetpack_7_with_python_3_12_and_keeps_jetpack_6(tmp_path):
    out = _dry("--reachy", release=R38, tmp_path=tmp_path)
    assert "JetPack 7 (L4T 38.4.0), Python 3.12" in out, out
    assert "PYTHON=python3.12" in out and "BOLT_REACHY=1" in out
    assert "reachy-mini 1.13 (Python 3.12) in the same .venv" in out
    out = _dry("--reachy", release=R36, tmp_path=tmp_path)
    assert "JetPack 6 (L4T 36.4.3), Python 3.10" in out and "PYTHON=python3.10" in out
    assert "reachy-mini 1.8.4 (Python 3.10) in the same .venv" in out
    out = _dry(tmp_path=tmp_path)  # not a Jetson (this machine): the default, said so
    assert "JetPack 7 (not found here: the default), Python 3.12" in out
    out = _dry("--jetpack", "6", release=R38, tmp_path=tmp_path)  # a person's choice wins
    assert "JetPack 6 (--jetpack, L4T 38.4.0), Python 3.10" in out
