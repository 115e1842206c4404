"""``bolt-agent bench --peer``: a popular voice-agent framework (pipecat) timed on our models and WAVs.

The issue's latency target compares ours with pipecat run with its default turn detector
(Silero VAD + Smart Turn v3.2) on the same three models and command WAVs. This module does the
parent's part; the pipeline itself is :mod:`tools.bench.peer_pipecat`, a standalone script run
as a child process with the Python of its own virtual environment, so pipecat never becomes a
dependency of bolt-agent (nothing here imports it).

1. The environment: ``~/.cache/bolt-agent/peer-venv`` (``$BOLT_PEER_VENV`` overrides), made on
   first use with ``python -m venv`` and ``pip install`` of :data:`PEER_REQUIREMENT` from PyPI
   (about 2 minutes and 0.9 GB here); a marker file names the requirement it holds.
2. The end of user speech in each WAV (:func:`speech_end_ms`): where our own pipeline puts it,
   the end of the last Silero frame over ``[vad] threshold``
   (:func:`agent.listening.vad.find_utterances`, the live endpointer's rules run offline).
3. The chat model: the config's GGUF served by llama.cpp's ``llama-server`` on a loopback port
   (:class:`~agent.engines.remote.server_process.LlamaServerProcess`, flags from ``[llm]``),
   which pipecat reaches through its OpenAI-compatible LLM service; with ``[llm] engine =
   "openai"`` the server ours uses (``[llm.openai] url``) instead. Whisper and the piper voice
   are the config's too; the system prompt is ``[llm] system_prompt``; no tools.
4. The child plays the WAVs in real time (the first one once more before, unmeasured, to warm
   every model) and answers JSON: per file ``voice_to_voice_ms`` (end of speech → first reply
   audio handed to the output, as ours), ``endpoint_ms``, ``turns`` and the Smart Turn verdicts.

The report (:func:`peer_report`): p50/p95 of voice-to-voice and of the endpoint, turns per
file, ``waited_on_silence`` (files whose turn Smart Turn judged unfinished at its last pause, so
the turn ended only after its ``stop_secs`` of 3 s of silence) and, given ours (the JSON of
``bolt-agent bench --json``), ``ours / peer`` at p50 and p95 against the issue's targets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.config import Config, VADConfig
from tools.bench.latency import percentiles

PEER_REQUIREMENT = "pipecat-ai[whisper,piper]==1.14.0"
"""What the peer environment holds: pipecat with faster-whisper and piper-tts (its Silero VAD and
Smart Turn v3.2 ONNX files ship in the pipecat wheel and run on its onnxruntime dependency)."""
PEER_VENV_ENV = "BOLT_PEER_VENV"
MARKER = ".bolt-peer-ready"
TARGET_P50, TARGET_P95 = 0.6, 0.4
"""The targets (issue 49; issue 22 asked 0.7 and 0.5): ours ≤ 0.6 × the peer's p50 and ≤ 0.4 × its p95."""


class PeerError(Exception):
    """The peer environment cannot be made, the chat model cannot be served, or the run failed."""


def peer_venv_dir() -> Path:
    """Where the peer's virtual environment lives (``$BOLT_PEER_VENV``, else the bolt-agent cache)."""
    env = os.environ.get(PEER_VENV_ENV)
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bolt-agent" / "peer-venv"


def venv_python(venv: Path) -> Path:
    """The interpreter of a virtual environment."""
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_peer_venv(venv: Path, note: Callable[[str], None], base_python: str = sys.executable) -> Path:
    """The peer environment's Python, making the environment first where it is missing or stale.

    Args:
        venv: The environment's folder.
        note: Progress lines for the user.
        base_python: The interpreter ``venv`` is made from (a venv's own resolves to its base).

    Returns:
        The path of its ``python``.

    Raises:
        PeerError: ``venv`` or ``pip`` failed (the message quotes the end of their output).
    """
    py, marker = venv_python(venv), venv / MARKER
    if py.is_file() and marker.is_file() and marker.read_text(encoding="utf-8").strip() == PEER_REQUIREMENT:
        return py
    note(f"making the peer environment {venv} with {PEER_REQUIREMENT} (from PyPI; about 2 minutes, 0.9 GB)")
    steps = [
        [base_python, "-m", "venv", str(venv)],
        [str(py), "-m", "pip", "install", "-q", "--upgrade", "pip"],
        [str(py), "-m", "pip", "install", "-q", PEER_REQUIREMENT],
    ]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise PeerError(f"{' '.join(argv)} failed (status {done.returncode}):\n{tail}")
    marker.write_text(PEER_REQUIREMENT + "\n", encoding="utf-8")
    return py


def speech_end_ms(path: Path, vad: VADConfig) -> float:
    """The end of user speech in a recording, ms from its start, as our pipeline finds it.

    The end of the last 32 ms Silero frame over ``vad.threshold`` inside an utterance (the
    endpointer's ``end_sample``; :mod:`agent.listening.vad`).

    Args:
        path: An audio file (any format :func:`agent.speech.audio.decode_file` reads).
        vad: ``[vad]`` thresholds.

    Returns:
        The time in ms; the file's length when no speech is found.

    Raises:
        agent.speech.audio.AudioError: the file cannot be decoded.
    """
    from agent.listening.vad import find_utterances
    from agent.speech.audio import SAMPLE_RATE, decode_file

    audio = decode_file(path)
    found = find_utterances(audio, vad)
    end = found[-1].end_sample if found else audio.size
    return round(min(end, audio.size) * 1000.0 / SAMPLE_RATE, 1)


def peer_spec(
    cfg: Config, files: list[Path], ends_ms: list[float], llm_url: str, runs: int = 1
) -> dict[str, Any]:
    """The child's input (see :mod:`tools.bench.peer_pipecat`).

    Args:
        cfg: The config (models, system prompt).
        files: Command WAVs, 16 kHz mono 16-bit.
        ends_ms: Their ends of speech, ms (:func:`speech_end_ms`).
        llm_url: Base URL of the OpenAI-compatible chat server (``http://127.0.0.1:PORT/v1``).
        runs: Passes over the files.

    Raises:
        agent.models.ModelNotFoundError: a model of the config is missing.
    """
    from agent.models import resolve_model
    from agent.speech.audio import SAMPLE_RATE

    items = [
        {"file": f.name, "path": str(f), "speech_end_ms": e} for f, e in zip(files, ends_ms, strict=True)
    ]
    return {
        "sample_rate": SAMPLE_RATE,
        "chunk_ms": 20,  # what a WebRTC transport delivers
        "whisper_model": str(resolve_model(cfg.asr.model, "ASR model")),
        "piper_voice": str(resolve_model(cfg.tts.voice, "voice")),
        "llm_base_url": llm_url,
        "llm_model": cfg.llm.openai.model_name or Path(cfg.llm.model).name or "local",
        "system_prompt": cfg.llm.system_prompt,
        "max_tokens": cfg.llm.max_tokens,
        "warmup": str(files[0]) if files else None,
        "files": items * runs,
        "after_s": 5.0,  # past Smart Turn's 3 s stop_secs: a turn it held still ends inside the file
        "quiet_s": 1.5,
        "max_wait_s": 20.0,
    }


def serve_chat_model(cfg: Config) -> Any:
    """Start llama-server with the config's chat model on a free loopback port (the caller stops it).

    Returns:
        The running :class:`~agent.engines.remote.server_process.LlamaServerProcess`.

    Raises:
        PeerError: no llama-server binary, or it did not start.
        agent.models.ModelNotFoundError: the GGUF is missing.
    """
    from agent.engines.remote.server_process import (
        LlamaServerProcess,
        ServerStartError,
        find_binary,
        server_args,
    )
    from agent.models import resolve_model

    binary = find_binary(cfg.llm.server.binary)
    if binary is None:
        raise PeerError("llama-server not found: run launch/build_llama_server.sh (about 15 minutes)")
    llm = cfg.llm if isinstance(cfg.llm.n_ctx, int) else cfg.llm.model_copy(update={"n_ctx": 4096})
    model = resolve_model(llm.model, "LLM")
    proc = LlamaServerProcess(binary, lambda port: server_args(llm, model, None, "127.0.0.1", port))
    try:
        proc.start()
    except ServerStartError as e:
        raise PeerError(str(e)) from None
    return proc


def run_peer(
    cfg: Config,
    folder: Path,
    limit: int = 0,
    runs: int = 1,
    note: Callable[[str], None] = lambda _s: None,
    venv: Path | None = None,
) -> dict[str, Any]:
    """Time pipecat on the command WAVs in ``folder``; the child's raw result (``per_file``, ...).

    Args:
        cfg: The config (models, ``[vad]``, ``[llm]``).
        folder: Command WAVs (the same as ``bolt-agent bench``: sorted, at most ``limit``).
        limit: At most this many WAVs (0 = all).
        runs: Passes over them.
        note: Progress lines for the user.
        venv: The peer environment (default :func:`peer_venv_dir`).

    Raises:
        PeerError: see :class:`PeerError`; also when ``folder`` holds no WAV.
        agent.models.ModelNotFoundError: a model of the config is missing.
    """
    files = sorted(Path(folder).glob("*.wav"))[: limit or None]
    if not files:
        raise PeerError(f"{folder} holds no WAV")
    t0 = time.monotonic()
    py = ensure_peer_venv(venv or peer_venv_dir(), note)
    setup_s = time.monotonic() - t0
    ends = [speech_end_ms(f, cfg.vad) for f in files]
    # [llm] engine = "openai": the peer talks to the same server as ours; else one of its own.
    server = serve_chat_model(cfg) if cfg.llm.engine != "openai" else None
    url = server.url if server is not None else cfg.llm.openai.url.rstrip("/")
    log = Path(tempfile.gettempdir()) / f"bolt-peer-{os.getpid()}.log"
    script = Path(__file__).with_name("peer_pipecat.py")
    spec = peer_spec(cfg, files, ends, f"{url}/v1", runs)
    timeout = 180.0 + len(spec["files"]) * (spec["max_wait_s"] + 15.0)
    note(f"playing {len(spec['files'])} WAVs in real time through pipecat (log: {log})")
    try:
        with open(log, "w", encoding="utf-8") as err:
            done = subprocess.run(
                [str(py), str(script)],
                input=json.dumps(spec),
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                timeout=timeout,
                check=False,
            )
    except subprocess.TimeoutExpired:
        raise PeerError(f"the peer did not finish within {timeout:.0f} s; see {log}") from None
    finally:
        if server is not None:
            server.stop()
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise PeerError(f"the peer failed (status {done.returncode}); see {log}:\n{tail}")
    raw = json.loads(lines[-1])
    raw["setup_s"] = round(setup_s, 1)
    raw["run_s"] = round(time.monotonic() - t0 - setup_s, 1)
    return raw


def load_ours(path: Path) -> dict[str, Any]:
    """Our figures from the JSON ``bolt-agent bench --json`` printed.

    Returns:
        ``voice_to_voice_ms`` (``p50``, ``p95``) and ``turns_per_file``.

    Raises:
        PeerError: unreadable, or not a latency report.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        v2v = data["voice_to_voice_ms"]
        return {"voice_to_voice_ms": {"p50": float(v2v["p50"]), "p95": float(v2v["p95"])},
                "turns_per_file": list(data.get("turns_per_file", []))}  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PeerError(f"{path}: not the JSON of `bolt-agent bench --json` ({e})") from None


def peer_report(raw: dict[str, Any], ours: dict[str, Any] | None = None) -> dict[str, Any]:
    """The peer's figures, and ours beside them when given.

    Args:
        raw: The child's result (:func:`run_peer`).
        ours: :func:`load_ours`'s figures, or None.

    Returns:
        ``peer``, ``turn_stack``, ``files``, ``replies``, ``voice_to_voice_ms`` and
        ``endpoint_ms`` (p50/p95 over files with a reply / a turn end, ms), ``turns_per_file``,
        ``waited_on_silence`` (count) and ``waited_files``, ``per_file``, ``errors``,
        ``setup_s``/``run_s``/``load_s``; with ours also ``ours`` and ``ratio`` (``p50``,
        ``p95``: ours / peer; None where the peer has no figure) and ``meets_target``.
    """
    rows = raw["per_file"]
    v2v = [r["voice_to_voice_ms"] for r in rows if r["voice_to_voice_ms"] >= 0]
    waited = [r["file"] for r in rows if r.get("held")]
    rep: dict[str, Any] = {
        "peer": raw.get("peer", ""),
        "turn_stack": raw.get("turn_stack", ""),
        "files": len(rows),
        "replies": len(v2v),
        "voice_to_voice_ms": percentiles(v2v),
        "endpoint_ms": percentiles([r["endpoint_ms"] for r in rows if r["endpoint_ms"] >= 0]),
        "turns_per_file": [r["turns"] for r in rows],
        "waited_on_silence": len(waited),
        "waited_files": waited,
        "per_file": rows,
        "errors": raw.get("errors", []),
        **{k: raw[k] for k in ("setup_s", "run_s", "load_s") if k in raw},
    }
    if ours is not None:
        peer = rep["voice_to_voice_ms"]
        ratio = {
            k: round(ours["voice_to_voice_ms"][k] / peer[k], 3) if peer[k] > 0 else None
            for k in ("p50", "p95")
        }
        rep["ours"] = ours
        rep["ratio"] = ratio
        rep["meets_target"] = (
            ratio["p50"] is not None
            and ratio["p95"] is not None
            and ratio["p50"] <= TARGET_P50
            and ratio["p95"] <= TARGET_P95
        )
    return rep


def format_peer(r: dict[str, Any]) -> str:
    """The report as a few readable lines."""
    v, e = r["voice_to_voice_ms"], r["endpoint_ms"]
    lines = [
        f"peer: {r['peer']}, turn detection {r['turn_stack']}",
        f"files: {r['files']}, replies: {r['replies']} (user turns per file: {r['turns_per_file']})",
        f"peer voice-to-voice  p50 {v['p50']:.0f} ms  p95 {v['p95']:.0f} ms",
        f"peer endpoint        p50 {e['p50']:.0f} ms  p95 {e['p95']:.0f} ms",
        f"waited on silence (Smart Turn judged the turn unfinished): {r['waited_on_silence']} of "
        f"{r['files']}" + (f" ({', '.join(r['waited_files'])})" if r["waited_files"] else ""),
    ]
    if "ours" in r:
        o, q = r["ours"]["voice_to_voice_ms"], r["ratio"]
        lines += [
            f"ours voice-to-voice  p50 {o['p50']:.0f} ms  p95 {o['p95']:.0f} ms "
            f"(user turns per file: {r['ours']['turns_per_file']})",
            f"ours / peer: p50 {q['p50']}, p95 {q['p95']} (target <= {TARGET_P50} and <= {TARGET_P95}: "
            f"{'met' if r['meets_target'] else 'not met'})",
        ]
    else:
        lines.append(
            f"ours / peer: run `bolt-agent bench --json > ours.json` and pass --ours ours.json "
            f"(target: ours p50 <= {TARGET_P50} x peer p50, ours p95 <= {TARGET_P95} x peer p95)"
        )
    lines.append("per file (ms from end of speech):")
    lines += [
        f"  {p['file']:<22} voice-to-voice {p['voice_to_voice_ms']:6.0f}  endpoint {p['endpoint_ms']:6.0f}  "
        f"turns {p['turns']}  smart turn {p['smart_turn']}  heard {' | '.join(p['transcripts'])!r}"
        for p in r["per_file"]
    ]
    if r["errors"]:
        lines.append(f"errors in the peer: {r['errors'][:3]}")
    if "setup_s" in r:
        lines.append(f"setup {r['setup_s']:.0f} s, run {r.get('run_s', 0):.0f} s")
    return "\n".join(lines)
