"""A Reachy Mini's recorded emotions: ``models pull`` fetches the dataset, the robot loads it offline.

The dataset is served by the local hub emulator (tests/emu_hub.py, ``HF_ENDPOINT``) from a folder
of recorded moves written here in Pollen's format; every command runs as a subprocess with
``HF_HOME`` in ``tmp_path``, as in tests/test_models_pull.py. What the robot loads is checked
with :func:`hardware.reachy_mini.moves.load_emotions` in a fresh, offline process (as ``run`` does).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import load_config
from agent.models_pull import config_datasets
from tests.emu_hub import COMMIT, HubServer, git_blob_sha1

REPO = Path(__file__).resolve().parents[1]
DATASET = "pollen-robotics/reachy-mini-emotions-library"  # the config's default emotions_repo
CACHE_DIR = "datasets--pollen-robotics--reachy-mini-emotions-library"
NOD_PITCH_DEG = [0.0, 10.0, 0.0, -10.0, 0.0]  # the SDK's pitch: + is nose down
NOD_DT_S = 0.25
SHAKE_YAW_DEG = [0.0, 20.0, -20.0, 0.0]
SHAKE_DT_S = 0.2
WAV = b"RIFF" + (36).to_bytes(4, "little") + b"WAVEfmt " + bytes(28)  # an LFS file beside its move


def _head(roll_deg: float = 0.0, pitch_deg: float = 0.0, yaw_deg: float = 0.0) -> list[list[float]]:
    """A 4x4 head pose (metres) rotated about one axis, written out by hand (not with our code)."""
    if pitch_deg:
        c, s = math.cos(math.radians(pitch_deg)), math.sin(math.radians(pitch_deg))
        rot = [[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]]  # about y
    else:
        c, s = math.cos(math.radians(yaw_deg)), math.sin(math.radians(yaw_deg))
        rot = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]  # about z
    return [[*rot[0], 0.0], [*rot[1], 0.0], [*rot[2], 0.0], [0.0, 0.0, 0.0, 1.0]]


def _move(description: str, heads: list[list[list[float]]], dt_s: float) -> dict:
    """A recorded move in Pollen's format: one frame every ``dt_s`` seconds, antennas slightly apart."""
    return {
        "description": description,
        "time": [round(i * dt_s, 6) for i in range(len(heads))],
        "set_target_data": [{"head": h, "antennas": [-0.1745, 0.1745], "body_yaw": 0.0} for h in heads],
    }


def _dataset(tmp_path: Path, broken: bool = False) -> Path:
    """The emotions dataset as the hub holds it: a move at the root (with its sound) and one in data/."""
    root = tmp_path / "hub-dataset"
    (root / "data").mkdir(parents=True)
    nod = _move("a nod", [_head(pitch_deg=p) for p in NOD_PITCH_DEG], NOD_DT_S)
    shake = _move("a head shake", [_head(yaw_deg=y) for y in SHAKE_YAW_DEG], SHAKE_DT_S)
    (root / "nod.json").write_text(json.dumps(nod))
    (root / "nod.wav").write_bytes(WAV)
    (root / "data" / "shake.json").write_text(json.dumps(shake))
    (root / "README.md").write_text("# Emotions (test copy)\n")
    if broken:  # two times, one frame
        bad = {"description": "broken", "time": [0.0, 0.5], "set_target_data": [nod["set_target_data"][0]]}
        (root / "data" / "broken.json").write_text(json.dumps(bad))
    return root


def _config(tmp_path: Path, extra: str = "") -> Path:
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[robot]\ndriver = "reachy_mini"\n[robot.reachy_mini]\n{extra}')
    return cfg


def _env(tmp_path: Path, endpoint: str | None, **extra: str) -> dict[str, str]:
    """This environment minus HF_* and proxies, the cache in ``tmp_path``; ``endpoint`` None: the real hub."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and "proxy" not in k.lower()}
    env.update(
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_CACHE=str(tmp_path / "hf" / "hub"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
        **({"HF_ENDPOINT": endpoint} if endpoint else {}),
        **extra,
    )
    return env


def _pull(cfg: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "agent", "models", "pull", "--config", str(cfg)]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


LOAD = """
import json, sys
from hardware.reachy_mini.moves import load_emotions
emotions, messages = load_emotions(sys.argv[1])
print(json.dumps({
    "moves": {n: {"duration_ms": a.duration_ms, "t_ms": [k.t_ms for k in a.keyframes],
                  "pose": [k.pose for k in a.keyframes]} for n, a in emotions.items()},
    "messages": messages,
}))
"""


def _load_emotions(env: dict[str, str]) -> dict:
    """What the robot loads: ``load_emotions`` in a new process, offline."""
    offline = dict(env, HF_HUB_OFFLINE="1")
    out = subprocess.run(
        [sys.executable, "-c", LOAD, DATASET],
        cwd=REPO,
        env=offline,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _dataset_line(stdout: str) -> str:
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("robot.reachy_mini.emotions_repo dataset")]
    return line


def test_pull_downloads_the_emotions_then_runs_offline(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    with HubServer({}, datasets={DATASET: _dataset(tmp_path)}) as hub:
        env = _env(tmp_path, hub.url)
        first = _pull(cfg, env)
        assert first.returncode == 0, first.stderr
        line = _dataset_line(first.stdout)
        snapshot = tmp_path / "hf" / "hub" / CACHE_DIR / "snapshots" / COMMIT
        assert line.startswith(f"robot.reachy_mini.emotions_repo dataset {DATASET}: {snapshot} (")
        assert "2 moves, 4 files" in line and "already in the cache" not in line
        asked = [(m, p.split("?")[0]) for m, p, _ in hub.requests]
        assert ("GET", f"/api/datasets/{DATASET}/revision/main") in asked
        assert ("GET", f"/api/datasets/{DATASET}/tree/{COMMIT}") in asked
        for name in ("nod.json", "nod.wav", "data/shake.json", "README.md"):
            assert ("GET", f"/datasets/{DATASET}/resolve/{COMMIT}/{name}") in asked
        # The cache as huggingface_hub lays it out: git files by their blob SHA-1, LFS files by SHA-256.
        nod = (snapshot / "nod.json").resolve()
        assert nod.name == git_blob_sha1(nod.read_bytes())
        assert (snapshot / "nod.wav").resolve().name == hashlib.sha256(WAV).hexdigest()

        seen = len(hub.requests)
        again = _pull(cfg, env)  # the hub is up, but a complete cached snapshot needs no network
        assert again.returncode == 0, again.stderr
        assert "2 moves, 4 files" in _dataset_line(again.stdout)
        assert _dataset_line(again.stdout).endswith(", already in the cache)")
        assert len(hub.requests) == seen

    offline = _pull(cfg, _env(tmp_path, _closed_port(), HF_HUB_OFFLINE="1"))
    assert offline.returncode == 0, offline.stderr
    assert _dataset_line(offline.stdout).endswith(", already in the cache)")

    loaded = _load_emotions(_env(tmp_path, None))
    assert loaded["messages"] == []
    moves = loaded["moves"]
    assert sorted(moves) == ["nod", "shake"]
    assert moves["nod"]["duration_ms"] == pytest.approx(NOD_DT_S * 1000 * (len(NOD_PITCH_DEG) - 1))
    assert moves["shake"]["duration_ms"] == pytest.approx(SHAKE_DT_S * 1000 * (len(SHAKE_YAW_DEG) - 1))
    assert moves["nod"]["t_ms"] == pytest.approx([i * NOD_DT_S * 1000 for i in range(len(NOD_PITCH_DEG))])
    # Our head_pitch is + for looking up: minus the SDK's pitch, frame by frame.
    pitches = [p["head_pitch"] for p in moves["nod"]["pose"]]
    assert pitches == pytest.approx([-p for p in NOD_PITCH_DEG], abs=0.01)
    assert [p["head_yaw"] for p in moves["shake"]["pose"]] == pytest.approx(SHAKE_YAW_DEG, abs=0.01)
    assert moves["nod"]["pose"][0]["left_antenna"] == pytest.approx(10.0, abs=0.01)


def test_a_malformed_move_is_reported_by_name_and_skipped(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    with HubServer({}, datasets={DATASET: _dataset(tmp_path, broken=True)}) as hub:
        env = _env(tmp_path, hub.url)
        out = _pull(cfg, env)
    assert out.returncode == 0, out.stderr  # the other moves are usable
    (warning,) = [ln for ln in out.stderr.splitlines() if ln.startswith("warning:")]
    assert "data/broken.json" in warning and warning.endswith("; skipped")
    assert "2 moves, 5 files" in _dataset_line(out.stdout)

    loaded = _load_emotions(env)
    assert sorted(loaded["moves"]) == ["nod", "shake"]
    (message,) = loaded["messages"]
    assert "broken.json" in message and "same length" in message


@pytest.mark.parametrize("offline", [True, False], ids=["HF_HUB_OFFLINE", "unreachable"])
def test_pull_offline_names_the_dataset_and_a_local_copy(tmp_path: Path, offline: bool) -> None:
    cfg = _config(tmp_path)
    endpoint = None if offline else _closed_port()  # offline: the real hub's URL, never contacted
    env = _env(tmp_path, endpoint, **({"HF_HUB_OFFLINE": "1"} if offline else {}))
    out = _pull(cfg, env)
    assert out.returncode == 1
    assert "robot.reachy_mini.emotions_repo dataset" not in out.stdout
    (msg,) = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]  # one line
    assert msg.startswith(f"error: robot.reachy_mini.emotions_repo dataset {DATASET}: cannot download, ")
    assert ("offline (HF_HUB_OFFLINE=1)" in msg) == offline
    assert ("hub unreachable" in msg) == (not offline)
    url = f"{endpoint or 'https://huggingface.co'}/datasets/{DATASET}"
    assert f"from {url} " in msg
    assert f"hf download {DATASET} --repo-type dataset --local-dir reachy-mini-emotions-library" in msg
    local = Path.home() / "reachy-mini-emotions-library"
    assert f'set [robot.reachy_mini] emotions_dir = "{local}" in {cfg}' in msg
    assert str(tmp_path / "hf" / "hub" / CACHE_DIR) in msg

    loaded = _load_emotions(env)
    assert loaded["moves"] == {}
    (message,) = loaded["messages"]
    assert "not downloaded" in message and "bolt-agent models pull" in message


def test_pull_fills_the_service_cache(tmp_path: Path) -> None:
    """Run for the installed service's config with no HF_HOME: the dataset lands in the unit's cache."""
    from tests.test_doctor import fake_systemctl

    cfg = _config(tmp_path)
    svc_hf = tmp_path / "svc-hf"
    path = fake_systemctl(tmp_path, Environment=f"HF_HOME={svc_hf}", config=cfg)
    with HubServer({}, datasets={DATASET: _dataset(tmp_path)}) as hub:
        env = {
            k: v
            for k, v in _env(tmp_path, hub.url, PATH=path).items()
            if k not in {"HF_HOME", "HF_HUB_CACHE"}
        }
        env["XDG_CACHE_HOME"] = str(tmp_path / "user-cache")  # where it would land without the unit
        out = _pull(cfg, env)
    assert out.returncode == 0, out.stderr
    assert f"note: HF_HOME={svc_hf}, as bolt-agent.service has it" in out.stderr
    snapshot = svc_hf / "hub" / CACHE_DIR / "snapshots" / COMMIT
    assert _dataset_line(out.stdout).startswith(
        f"robot.reachy_mini.emotions_repo dataset {DATASET}: {snapshot} ("
    )
    assert (snapshot / "data" / "shake.json").is_file()
    assert not (tmp_path / "user-cache" / "huggingface").exists()


def test_an_unknown_dataset_is_named(tmp_path: Path) -> None:
    cfg = _config(tmp_path, 'emotions_repo = "acme/no-such-emotions"\n')
    with HubServer({}, datasets={DATASET: _dataset(tmp_path)}) as hub:
        out = _pull(cfg, _env(tmp_path, hub.url))
    assert out.returncode == 1
    assert f"no such dataset at {hub.url}/datasets/acme/no-such-emotions" in out.stderr
    assert f"check [robot.reachy_mini] emotions_repo in {cfg}" in out.stderr


def test_a_local_copy_or_another_body_needs_no_dataset(tmp_path: Path) -> None:
    own = tmp_path / "my-emotions"
    cfg = _config(tmp_path, f'emotions_dir = "{own}"\n')
    assert config_datasets(load_config(cfg)) == []
    out = _pull(cfg, _env(tmp_path, _closed_port()))
    assert out.returncode == 0 and "nothing to download" in out.stdout

    assert config_datasets(load_config(_config(tmp_path))) == [("robot.reachy_mini.emotions_repo", DATASET)]
    other = tmp_path / "sim.toml"
    other.write_text("")
    assert config_datasets(load_config(other)) == []
