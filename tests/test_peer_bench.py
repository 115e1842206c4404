"""``bolt-agent bench --peer``: pipecat timed on our models and WAVs, in its own environment.

The parts that need no peer environment run always: the end of speech (real Silero VAD on
the test data's command WAVs), the report and its ratios, reading our bench JSON, the child's
input, the environment check, the CLI's refusal of a bad ``--ours``, and that pipecat stays
out of bolt-agent's imports. The real peer (a virtual environment with pipecat from PyPI,
llama-server, two WAVs in real time) runs only with ``BOLT_PEER=1``.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from agent.config import Config, VADConfig
from agent.speech.audio import SAMPLE_RATE, decode_file
from tools.bench import peer as peer_mod
from tools.bench.peer import (
    MARKER,
    PEER_REQUIREMENT,
    TARGET_P50,
    PeerError,
    ensure_peer_venv,
    format_peer,
    load_ours,
    peer_report,
    peer_spec,
    speech_end_ms,
    venv_python,
)

ROOT = Path(__file__).resolve().parent.parent


def _write(path: Path, audio: np.ndarray) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())
    return path


def _row(name: str, v2v: float, endpoint: float, turns: int = 1, held: bool = False) -> dict:
    return {
        "file": name,
        "voice_to_voice_ms": v2v,
        "endpoint_ms": endpoint,
        "turns": turns,
        "held": held,
        "smart_turn": [0.05 if held else 0.9],
        "transcripts": ["What time is it?"],
        "reply": "It is noon.",
    }


# --- the end of speech ------------------------------------------------------------------------


def test_speech_end_moves_with_leading_silence_and_ignores_trailing(tmp_path, fixtures_dir):
    vad = VADConfig()
    speech = decode_file(fixtures_dir / "commands" / "time.wav")
    base = speech_end_ms(_write(tmp_path / "a.wav", speech), vad)
    length_ms = speech.size * 1000 / SAMPLE_RATE
    assert 500 < base <= length_ms
    pad = np.zeros(16 * 512, dtype=np.float32)  # 16 of the VAD's 32 ms frames: the frames stay aligned
    led = speech_end_ms(_write(tmp_path / "b.wav", np.concatenate([pad, speech])), vad)
    trailed = speech_end_ms(_write(tmp_path / "c.wav", np.concatenate([speech, pad, pad])), vad)
    assert abs(led - (base + 512)) <= 64  # Silero's state differs a little after the silence
    assert trailed == base


def test_speech_end_of_silence_is_the_file_length(tmp_path):
    quiet = np.zeros(SAMPLE_RATE, dtype=np.float32)
    assert speech_end_ms(_write(tmp_path / "q.wav", quiet), VADConfig()) == 1000.0


def test_every_shared_command_has_its_speech_end_inside_the_file(fixtures_dir):
    for f in sorted((fixtures_dir / "commands").glob("*.wav")):
        length = decode_file(f).size * 1000 / SAMPLE_RATE
        end = speech_end_ms(f, VADConfig())
        assert 300 < end < length, f.name  # every command has speech and then some silence


# --- the report -------------------------------------------------------------------------------


def test_report_counts_waits_and_compares_with_ours():
    rows = [
        _row("a.wav", 1000.0, 500.0),
        _row("b.wav", 1200.0, 600.0),
        _row("c.wav", 4000.0, 3300.0, held=True),  # judged unfinished: waited for stop_secs
        _row("d.wav", -1.0, -1.0, turns=0),  # no reply at all
    ]
    raw = {"peer": "pipecat-ai 1.14.0", "turn_stack": "x", "per_file": rows, "errors": [], "setup_s": 1.0}
    ours = {"voice_to_voice_ms": {"p50": 700.0, "p95": 1000.0}, "turns_per_file": [1, 1, 1, 1]}
    rep = peer_report(raw, ours)
    assert rep["files"] == 4 and rep["replies"] == 3
    assert rep["voice_to_voice_ms"]["p50"] == 1200.0
    assert rep["voice_to_voice_ms"]["p95"] == pytest.approx(3720.0)  # numpy's linear percentile of 3
    assert rep["endpoint_ms"]["p50"] == 600.0
    assert rep["turns_per_file"] == [1, 1, 1, 0]
    assert rep["waited_on_silence"] == 1 and rep["waited_files"] == ["c.wav"]
    assert rep["ratio"] == {"p50": round(700 / 1200, 3), "p95": round(1000 / 3720, 3)}
    assert rep["meets_target"] is True
    text = format_peer(rep)
    assert "ours / peer: p50 0.583, p95 0.269" in text and "met" in text
    assert "c.wav" in text and "waited on silence" in text


def test_report_without_ours_gives_the_formula_and_misses_a_slow_ours():
    raw = {"per_file": [_row("a.wav", 1000.0, 400.0)]}
    rep = peer_report(raw)
    assert "ratio" not in rep and rep["waited_on_silence"] == 0
    assert "--ours ours.json" in format_peer(rep) and f"{TARGET_P50} x peer p50" in format_peer(rep)
    slow = peer_report(raw, {"voice_to_voice_ms": {"p50": 800.0, "p95": 800.0}, "turns_per_file": []})
    assert slow["ratio"] == {"p50": 0.8, "p95": 0.8} and slow["meets_target"] is False
    assert "not met" in format_peer(slow)


def test_report_with_no_reply_has_no_ratio():
    rep = peer_report({"per_file": [_row("a.wav", -1.0, -1.0)]}, {"voice_to_voice_ms": {"p50": 1, "p95": 1}})
    assert rep["voice_to_voice_ms"] == {"p50": -1.0, "p95": -1.0}
    assert rep["ratio"] == {"p50": None, "p95": None} and rep["meets_target"] is False


def test_ours_is_read_from_the_bench_json(tmp_path):
    good = tmp_path / "ours.json"
    figures = {"voice_to_voice_ms": {"p50": 818.0, "p95": 1178.0}, "turns_per_file": [1, 1]}
    good.write_text(json.dumps(figures))
    assert load_ours(good) == figures
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"accuracy": 0.9}))
    with pytest.raises(PeerError, match="not the JSON of `bolt-agent bench --json`"):
        load_ours(bad)
    with pytest.raises(PeerError, match="missing.json"):
        load_ours(tmp_path / "missing.json")


# --- the child's input and environment ----------------------------------------------------------


def test_spec_names_our_models_and_repeats_the_files_per_run(fixtures_dir):
    files = sorted((fixtures_dir / "commands").glob("*.wav"))[:2]
    spec = peer_spec(Config(), files, [900.0, 1100.0], "http://127.0.0.1:1/v1", runs=2)
    assert spec["sample_rate"] == SAMPLE_RATE
    assert Path(spec["whisper_model"], "model.bin").is_file()  # CTranslate2 folder of tiny.en
    assert spec["piper_voice"].endswith("en_US-joe-medium.onnx") and Path(spec["piper_voice"]).is_file()
    assert Path(spec["piper_voice"] + ".json").is_file()  # pipecat loads the voice from its folder
    assert spec["system_prompt"] == Config().llm.system_prompt
    assert spec["warmup"] == str(files[0])
    assert [f["file"] for f in spec["files"]] == [files[0].name, files[1].name] * 2
    assert [f["speech_end_ms"] for f in spec["files"]] == [900.0, 1100.0] * 2
    assert spec["after_s"] > 3.0  # past Smart Turn's stop_secs, so a held turn still ends in its file


def test_a_ready_environment_is_reused_and_a_failing_one_is_reported(tmp_path):
    venv = tmp_path / "venv"
    py = venv_python(venv)
    py.parent.mkdir(parents=True)
    py.write_text("")
    (venv / MARKER).write_text(PEER_REQUIREMENT + "\n")
    notes: list[str] = []
    assert ensure_peer_venv(venv, notes.append, base_python="/bin/false") == py
    assert notes == []  # nothing was made
    (venv / MARKER).write_text("pipecat-ai==0.0.1\n")  # another requirement: made again
    with pytest.raises(PeerError, match="/bin/false -m venv .* failed"):
        ensure_peer_venv(venv, notes.append, base_python="/bin/false")
    assert len(notes) == 1 and PEER_REQUIREMENT in notes[0]


def test_the_venv_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("BOLT_PEER_VENV", str(tmp_path / "pv"))
    assert peer_mod.peer_venv_dir() == tmp_path / "pv"
    monkeypatch.delenv("BOLT_PEER_VENV")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert peer_mod.peer_venv_dir() == tmp_path / "cache" / "bolt-agent" / "peer-venv"


def test_pipecat_stays_out_of_bolt_agent():
    """Only the child script imports pipecat, and no module of ours imports the script."""
    script = ROOT / "tools" / "bench" / "peer_pipecat.py"
    offenders = []
    for path in sorted((ROOT / "agent").rglob("*.py")) + sorted((ROOT / "tools").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        if path == script:
            assert {n.split(".")[0] for n in names} <= {
                "__future__", "asyncio", "json", "os", "sys", "time", "wave", "dataclasses",
                "pathlib", "typing", "loguru", "numpy", "pipecat",
            }  # fmt: skip
            continue
        if any(n.split(".")[0] == "pipecat" or n.endswith("peer_pipecat") for n in names):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_cli_refuses_a_bad_ours_before_the_long_run(tmp_path, fixtures_dir):
    bad = tmp_path / "ours.json"
    bad.write_text("{}")
    env = {**os.environ, "BOLT_PEER_VENV": str(tmp_path / "never-made")}
    args = ["bench", "--peer", "--ours", str(bad), "--fixtures", str(fixtures_dir / "commands")]
    done = subprocess.run(
        [sys.executable, "-m", "agent", *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
    )
    assert done.returncode == 2
    assert "not the JSON of `bolt-agent bench --json`" in done.stderr
    assert not (tmp_path / "never-made").exists()


# --- the real peer (opt-in) ---------------------------------------------------------------------


@pytest.mark.skipif(os.environ.get("BOLT_PEER") != "1", reason="the real peer is opt-in: BOLT_PEER=1")
def test_real_peer_answers_two_commands(fixtures_dir, tmp_path):
    from agent.engines.remote.server_process import find_binary

    if find_binary() is None:
        pytest.skip("llama-server not built: run launch/build_llama_server.sh")
    for name in ("look_left.wav", "time.wav"):  # pipecat's Whisper hears both (dance.wav it often misses)
        (tmp_path / name).symlink_to(fixtures_dir / "commands" / name)
    notes: list[str] = []
    raw = peer_mod.run_peer(Config(), tmp_path, note=notes.append)
    rep = peer_report(raw)
    assert rep["files"] == 2 and rep["errors"] == []
    for row in rep["per_file"]:
        assert row["turns"] >= 1 and row["smart_turn"], row
        assert row["transcripts"] and row["reply"], row
        assert 0 < row["endpoint_ms"] < row["voice_to_voice_ms"] < 15000, row
    assert rep["replies"] == 2 and rep["voice_to_voice_ms"]["p50"] > 0
    assert "peer voice-to-voice" in format_peer(rep)
