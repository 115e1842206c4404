"""``bolt-agent models pull`` against a local hub resolve endpoint (``HF_ENDPOINT``, tests/emu_hub.py).

Each test runs the real command as a subprocess with ``HF_HOME`` / ``HF_HUB_CACHE`` in ``tmp_path``,
so no real cache is touched and huggingface_hub reads the endpoint at import as it does in use.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import socket
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from agent.config import load_config
from agent.models_pull import LOCAL_REVISION, config_model_refs, sha256_file
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


def _run(
    tmp_path: Path, env: dict[str, str], *args: str, tty: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m agent ARGS --config robot.toml``; ``tty``: stderr is a terminal (a pty)."""
    cmd = [sys.executable, "-m", "agent", *args, "--config", str(_config(tmp_path))]
    if not tty:
        return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns, as a terminal
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        with subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=slave, text=True
        ) as proc:
            os.close(slave)
            out, _ = proc.communicate(timeout=120)
        reader.join(10)
    finally:
        os.close(master)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, b"".join(chunks).decode(errors="replace"))


def _cached(tmp_path: Path) -> list[Path]:
    blobs = (tmp_path / "hf" / "hub").glob("models--acme--tiny-gguf/blobs/*")
    return sorted(p for p in blobs if not p.name.endswith(".verified"))


def _models_check(tmp_path: Path, env: dict[str, str]) -> dict:
    doctor = _run(tmp_path, env, "doctor", "--json")
    return next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "models")


def test_pull_downloads_verifies_and_skips_when_cached(tmp_path: Path) -> None:
    with HubServer({"acme/tiny-gguf/sub/model.gguf": DATA}) as hub:
        env = _env(tmp_path, hub.url)
        first = _run(tmp_path, env, "models", "pull", tty=True)  # a terminal: the progress bar shows
        assert first.returncode == 0, first.stderr
        assert "llm.model" in first.stdout and "sha256 ok" in first.stdout
        assert "already in the cache" not in first.stdout
        assert re.search(r"model\.gguf: +100%\|.*\| 1\.05M/1\.05M", first.stderr), first.stderr  # tqdm
        (blob,) = _cached(tmp_path)
        assert blob.name == hashlib.sha256(DATA).hexdigest() and blob.read_bytes() == DATA
        gets = [r for r in hub.requests if r[0] == "GET" and "/resolve/" in r[1]]
        assert len(gets) == 1 and gets[0][1] == "/acme/tiny-gguf/resolve/main/sub/model.gguf"

        seen = len(hub.requests)
        again = _run(tmp_path, env, "models", "pull")
        assert again.returncode == 0, again.stderr
        assert "sha256 ok, already in the cache" in again.stdout
        assert len(hub.requests) == seen  # cached: verified without asking the hub

    models = _models_check(tmp_path, env)
    assert models["ok"] and "llm.model ok" in models["detail"] and "sha256 ok" in models["detail"]

    # The verification is kept next to the blob: an unchanged file (size, mtime, inode) is not
    # hashed again. Proof: new content with the old mtime still passes...
    marker = blob.with_name(blob.name + ".verified")
    assert json.loads(marker.read_text())["sha256"] == blob.name
    st = blob.stat()
    blob.chmod(0o644)
    with open(blob, "r+b") as f:
        f.write(b"y")
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _models_check(tmp_path, env)["ok"]
    # ...and once the mtime moves (bit rot written after the download), it is hashed and caught.
    # The move is set explicitly: a sandbox's file system may report a write's mtime late.
    blob.write_bytes(b"x" + DATA[1:])
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    doctor = _run(tmp_path, env, "doctor", "--json")
    models = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "models")
    assert not models["ok"] and "sha256 mismatch" in models["detail"]
    assert (
        models["fix"]
        == f"HF_HOME={tmp_path / 'hf'} bolt-agent models pull --config {tmp_path / 'robot.toml'}"
    )
    assert doctor.returncode == 1
    assert not marker.exists()


@pytest.mark.parametrize("offline", [True, False], ids=["HF_HUB_OFFLINE", "unreachable"])
def test_pull_offline_succeeds_when_the_files_are_cached(tmp_path: Path, offline: bool) -> None:
    with HubServer({"acme/tiny-gguf/sub/model.gguf": DATA}) as hub:
        assert _run(tmp_path, _env(tmp_path, hub.url), "models", "pull").returncode == 0
    env = _env(tmp_path, _closed_port(), **({"HF_HUB_OFFLINE": "1"} if offline else {}))
    out = _run(tmp_path, env, "models", "pull")
    assert out.returncode == 0, out.stderr
    assert "llm.model" in out.stdout and "sha256 ok, already in the cache" in out.stdout


def test_pull_from_dir_fills_the_cache_for_offline_use(tmp_path: Path) -> None:
    env = _env(tmp_path, _closed_port())
    usb = tmp_path / "usb"
    usb.mkdir()
    missing = _run(tmp_path, env, "models", "pull", "--from-dir", str(usb))
    assert missing.returncode == 1 and f"{usb}/model.gguf not found" in missing.stderr
    assert "/acme/tiny-gguf/resolve/main/sub/model.gguf" in missing.stderr

    (usb / "model.gguf").write_bytes(DATA)
    out = _run(tmp_path, env, "models", "pull", "--from-dir", str(usb))
    assert out.returncode == 0, out.stderr
    assert "llm.model" in out.stdout and "copied" in out.stdout
    (blob,) = _cached(tmp_path)
    assert blob.name == hashlib.sha256(DATA).hexdigest()
    refs = tmp_path / "hf" / "hub" / "models--acme--tiny-gguf" / "refs" / "main"
    assert refs.read_text() == LOCAL_REVISION
    # What `run` does to find the model (agent.models), offline: a cache hit.
    code = "from agent.models import resolve_model; print(resolve_model('%s', 'LLM'))" % REF
    offline = dict(env, HF_HUB_OFFLINE="1")
    found = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=offline, capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).read_bytes() == DATA
    assert _models_check(tmp_path, offline)["ok"]
    again = _run(tmp_path, env, "models", "pull")
    assert again.returncode == 0 and "already in the cache" in again.stdout


def test_turn_text_model_is_a_model_field(tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[turn]\ntext_model = "{REF}"\n')
    assert ("turn.text_model", REF) in config_model_refs(load_config(cfg))


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
    assert f"--from-dir {local.parent}" in msg
    assert str(tmp_path / "hf" / "hub" / "models--acme--tiny-gguf") in msg


def test_pull_without_hf_models_does_nothing(tmp_path: Path) -> None:
    cfg = tmp_path / "robot.toml"
    cfg.write_text("")
    cmd = [sys.executable, "-m", "agent", "models", "pull", "--config", str(cfg)]
    out = subprocess.run(cmd, cwd=REPO, env=_env(tmp_path, _closed_port()), capture_output=True, text=True)
    assert out.returncode == 0 and "nothing to download" in out.stdout
