"""The bolt-agent command line, run as a user would (subprocess, real models)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from agent.cli.demo import BUILTIN_UTTERANCES

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "agent"]


def run(*args, cwd=None, timeout=300, env=None):
    return subprocess.run(
        [*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT, env=env
    )


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _wav(path: Path, data: np.ndarray, rate: int, channels: int = 1) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(data.astype(np.int16).tobytes())
    return path


def test_listen_json_survives_every_bad_input(tmp_path, fixtures_dir):
    import soxr

    from agent.speech.audio import decode_file

    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    text = tmp_path / "readme.ogg"
    text.write_text("not audio\n" * 100)
    silence = _wav(tmp_path / "silence.wav", np.zeros(32000), 16000)
    rng = np.random.default_rng(0)
    tap = np.zeros(32000)
    tap[10000:14800] = rng.standard_normal(4800) * 12000
    tap = _wav(tmp_path / "tap.wav", tap, 16000)
    src = decode_file(fixtures_dir / "commands" / "wave_right.wav")
    up = soxr.resample(src, 16000, 48000)
    stereo = _wav(tmp_path / "wave48k.wav", np.stack([up, up], axis=1).reshape(-1) * 32000, 48000, channels=2)
    out = tmp_path / "out"
    r = run("listen", empty, text, silence, tap, stereo, "--json", "--out", out)
    assert r.returncode == 0, r.stderr
    evs = events(r.stdout)
    kinds = [e["event"] for e in evs]
    assert "ready" in kinds and not ({"transcript", "error"} & set(kinds[: kinds.index("ready")]))
    errors = [e["message"] for e in evs if e["event"] == "error"]
    assert any("empty.wav: file is empty" in m and "continuing" in m for m in errors), errors
    assert any("readme.ogg: not a readable audio file" in m for m in errors), errors
    skipped = [e["reason"] for e in evs if e["event"] == "skipped"]
    assert any("silence.wav" in s for s in skipped), skipped
    assert not any(e["event"] == "transcript" and "tap" in e.get("text", "") for e in evs)
    transcripts = [e for e in evs if e["event"] == "transcript"]
    assert len(transcripts) == 1 and "wave" in transcripts[0]["text"].lower()
    calls = [e for e in evs if e["event"] == "tool_call"]
    assert any("wave" in c["name"] for c in calls)
    assert all(isinstance(c["arguments"], dict) for c in calls)
    results = [e for e in evs if e["event"] == "tool_result"]
    assert results and all(set(r) >= {"name", "ok", "result"} for r in results)
    robot = [e for e in evs if e["event"] == "robot"]
    assert robot and all(set(x) >= {"joint", "deg", "t_ms"} for x in robot)
    reply = [e for e in evs if e["event"] == "reply"][0]
    assert reply["text"] and Path(reply["audio"]).is_file()
    timing = [e for e in evs if e["event"] == "timing"][0]
    assert set(timing) >= {"asr_ms", "llm_ttft_ms", "llm_ms", "tts_first_audio_ms", "turn_ms"}


def test_broken_config_is_one_clear_line(tmp_path):
    cfg = tmp_path / "robot.toml"
    cfg.write_text("[llm]\nthreads = -1\n")
    r = run("listen", "x.wav", "--config", cfg, "--json")
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert (
        len(lines) == 1
        and "robot.toml" in lines[0]
        and "llm.threads" in lines[0]
        and "greater than" in lines[0]
    )


def test_missing_model_file_is_one_clear_line(tmp_path):
    cfg = tmp_path / "robot.toml"
    cfg.write_text(f'[llm]\nmodel = "{tmp_path / "bolt.gguf"}"\n')
    # A readable input: with none, listen exits 1 before it looks at the models.
    wav = _wav(tmp_path / "x.wav", np.zeros(1600), 16000)
    r = run("listen", wav, "--config", cfg, "--json")
    assert r.returncode == 2
    errors = [e for e in events(r.stdout) if e["event"] == "error"]
    assert (
        len(errors) == 1
        and "LLM file not found" in errors[0]["message"]
        and "bolt.gguf" in errors[0]["message"]
    )


def test_no_readable_input_exits_1(tmp_path):
    bad = tmp_path / "bad.wav"
    bad.write_text("nope")
    r = run("listen", bad, "--json", "--out", tmp_path)
    assert r.returncode == 1
    assert any(e["event"] == "error" and "bad.wav" in e["message"] for e in events(r.stdout))


def test_skills_list_json():
    r = run("skills", "list", "--json")
    assert r.returncode == 0, r.stderr
    skills = {s["name"]: s for s in events(r.stdout)}
    assert {"wave", "nod", "look", "get_time", "stop"} <= set(skills)
    assert skills["look"]["parameters"]["properties"]["yaw_deg"]["maximum"] == 60
    assert "motion.py" in skills["wave"]["source"]


@pytest.mark.timeout(900)
def test_demo_runs_and_prints_every_step(tmp_path):
    # Without $BOLT_FIXTURES, even where the developer running the tests set it for them.
    env = {k: v for k, v in os.environ.items() if k != "BOLT_FIXTURES"}
    r = run("demo", "--out", tmp_path / "out", timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "you said:" in out and "tool call" in out and "robot says:" in out and "timing:" in out
    assert "reply audio:" in out and list((tmp_path / "out").glob("reply_*.wav"))
    # Without $BOLT_FIXTURES the demo speaks its built-in utterances: each is one turn, for people.
    assert out.count("you said:") == len(BUILTIN_UTTERANCES), out
    assert "{'" not in out and "prompt tokens" not in out and "timing: heard back after" in out
