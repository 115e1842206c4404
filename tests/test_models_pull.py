"""``bolt-agent models pull`` against a local hub resolve endpoint (``HF_ENDPOINT``, tests/emu_hub.py).

Each test runs the real command as a subprocess with ``HF_HOME`` / ``HF_HUB_CACHE`` in ``tmp_path``,
so no real cache is touched and huggingface_hub reads the endpoint at import as it does in use.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agent.models_pull import sha256_file
from tests.emu_hub import HubServer

REPO = Path(__file__).resolve().parents[1]
REF = "hf:acme/tiny-gguf/sub/model.gguf"
DATA = os.urandom(1 << 20) + b"bolt"  # 1 MiB + 4 bytes


def _config(tmp_path: Path) -> Path:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[llm]\nmodel = "{REF}"\n')
    return cfg


def _env(tmp_path: Path, endpoint: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and "proxy" not in k.lower()}
    env.update(
        HF_ENDPOINT=endpoint,
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_CACHE=str(tmp_path / "hf" / "hub"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
        **extra,
    )
    return env


def _run(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "agent", *args, "--config", str(_config(tmp_path))]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def _cached(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "hf" / "hub").glob("models--acme--tiny-gguf/blobs/*"))


def test_pull_downloads_verifies_and_skips_when_cached(tmp_path: Path) -> None:
    with HubServer({"acme/tiny-gguf/sub/model.gguf": DATA}) as hub:
        env = _env(tmp_path, hub.url)
        first = _run(tmp_path, env, "models", "pull")
        assert first.returncode == 0, first.stderr
        assert "llm.model" in first.stdout and "sha256 ok" in first.stdout
        (blob,) = _cached(tmp_path)
        assert blob.name == hashlib.sha256(DATA).hexdigest() and blob.read_bytes() == DATA
        gets = [r for r in hub.requests if r[0] == "GET" and "/resolve/" in r[1]]
        assert len(gets) == 1 and gets[0][1] == "/acme/tiny-gguf/resolve/main/sub/model.gguf"

        again = _run(tmp_path, env, "models", "pull")
        assert again.returncode == 0, again.stderr
        assert [r for r in hub.requests if r[0] == "GET" and "/resolve/" in r[1]] == gets  # cached: HEAD only

        doctor = _run(tmp_path, env, "doctor", "--json")
        models = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "models")
        assert models["ok"] and "llm.model ok" in models["detail"] and "sha256 ok" in models["detail"]

        blob.chmod(0o644)
        blob.write_bytes(b"x" + DATA[1:])  # bit rot after the download
        doctor = _run(tmp_path, env, "doctor", "--json")
        models = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "models")
        assert not models["ok"] and "sha256 mismatch" in models["detail"]
        assert models["fix"].startswith("bolt-agent models pull --config ")
        assert doctor.returncode == 1


def test_pull_resumes_an_interrupted_download(tmp_path: Path) -> None:
    # huggingface_hub reads the body in 10 MiB chunks and resumes after the last whole chunk
    # it wrote, so the file must be big enough for the cut (at half) to come after one.
    data = os.urandom(24 << 20)
    with HubServer({"acme/tiny-gguf/sub/model.gguf": data}, cut_first=True) as hub:
        done = _run(tmp_path, _env(tmp_path, hub.url), "models", "pull")
    assert done.returncode == 0, done.stderr
    assert "sha256 ok" in done.stdout and "Trying to resume download" in done.stderr
    ranges = [r[2] for r in hub.requests if r[0] == "GET" and "/resolve/" in r[1]]
    assert len(ranges) == 2 and ranges[0] == ""
    resumed_at = int(ranges[1].removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= len(data) // 2  # only the missing tail was fetched again
    (blob,) = _cached(tmp_path)
    assert sha256_file(blob) == hashlib.sha256(data).hexdigest() == blob.name


def test_pull_checksum_mismatch_deletes_the_file(tmp_path: Path) -> None:
    with HubServer({"acme/tiny-gguf/sub/model.gguf": DATA}, corrupt=True) as hub:
        bad = _run(tmp_path, _env(tmp_path, hub.url), "models", "pull")
    assert bad.returncode == 1
    assert "sha256 mismatch" in bad.stderr and hashlib.sha256(DATA).hexdigest() in bad.stderr
    assert "deleted it" in bad.stderr
    assert _cached(tmp_path) == []
    snap = tmp_path / "hf" / "hub" / "models--acme--tiny-gguf" / "snapshots"
    assert not any(p.is_file() for p in snap.rglob("model.gguf"))


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("offline", [True, False], ids=["HF_HUB_OFFLINE", "unreachable"])
def test_pull_offline_names_the_file_and_where_to_copy_it(tmp_path: Path, offline: bool) -> None:
    env = _env(tmp_path, _closed_port(), **({"HF_HUB_OFFLINE": "1"} if offline else {}))
    out = _run(tmp_path, env, "models", "pull")
    assert out.returncode == 1
    (msg,) = [line for line in out.stderr.splitlines() if line.startswith("error:")]  # one line
    assert ("offline (HF_HUB_OFFLINE=1)" in msg) == offline
    assert ("hub unreachable" in msg) == (not offline)
    assert "sub/model.gguf" in msg and "/acme/tiny-gguf/resolve/main/sub/model.gguf" in msg
    local = Path.home() / "models" / "model.gguf"
    assert f'[llm] model = "{local}"' in msg and str(tmp_path / "robot.toml") in msg
    assert str(tmp_path / "hf" / "hub" / "models--acme--tiny-gguf") in msg


def test_pull_without_hf_models_does_nothing(tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text("")
    cmd = [sys.executable, "-m", "agent", "models", "pull", "--config", str(cfg)]
    out = subprocess.run(cmd, cwd=REPO, env=_env(tmp_path, _closed_port()), capture_output=True, text=True)
    assert out.returncode == 0 and "nothing to download" in out.stdout
