"""``bolt-agent doctor``: every check that decides whether ``run`` can start on this machine.

Each check returns :class:`Check` (name, ok, detail, fix command, and whether a failure blocks
``run``). Nothing is downloaded and no model is loaded: models are checked in place
(:func:`agent.models_pull.verify_cached` hashes ``hf:`` files against their cached SHA-256), the
memory plan comes from the GGUF header (:func:`agent.memplan.check_budget`), audio devices from
PortAudio, serial ports from the file system, the GPU from ``tegrastats`` / ``nvidia-smi`` and the
service from ``systemctl``. Under systemd (``INVOCATION_ID`` set) the sound-server variables are
checked too: a service does not inherit ``XDG_RUNTIME_DIR`` / ``PULSE_SERVER`` from a login.
"""

from __future__ import annotations

import grp
import importlib.metadata
import os
import selectors
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PACKAGES = ("llama-cpp-python", "faster-whisper", "piper-tts", "sounddevice", "pyserial", "huggingface-hub")
SERVICE = "bolt-agent"


@dataclass(frozen=True)
class Check:
    """The result of one check.

    Attributes:
        name: Short name (``serial``, ``models``...).
        ok: Whether it passed.
        detail: What was found, one line.
        fix: Shell command (or config edit) that fixes a failure; empty when ok.
        blocking: A failure stops ``bolt-agent run``.
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""
    blocking: bool = True

    def as_json(self) -> dict[str, Any]:
        """The check as a JSON-ready dict."""
        return asdict(self)


def check_venv() -> Check:
    """Python, virtual environment and the runtime packages."""
    in_venv = sys.prefix != sys.base_prefix
    missing = []
    for dist in PACKAGES:
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist)
    py = f"Python {sys.version.split()[0]} at {sys.executable}" + ("" if in_venv else " (not a venv)")
    if missing:
        return Check(
            "packages", False, f"{py}; missing: {', '.join(missing)}", f"pip install {' '.join(missing)}"
        )
    return Check("packages", True, f"{py}; {len(PACKAGES)} runtime packages installed")


def check_models(cfg: Any) -> Check:
    """Every model of the config present on disk, ``hf:`` files verified by SHA-256."""
    from agent.models import ModelNotFoundError, resolve_model
    from agent.models_pull import PullError, config_model_refs, verify_cached

    found, bad, fixes = [], [], []
    for key, ref in config_model_refs(cfg):
        try:
            if ref.startswith("hf:"):
                hit = verify_cached(ref, key)
                if hit is None:
                    bad.append(f"{key} {ref} not downloaded")
                    fixes.append(f"bolt-agent models pull{_config_arg(cfg)}")
                    continue
                found.append(
                    f"{key} ok ({hit.size / 2**30:.2f} GiB, sha256 {'ok' if hit.verified else 'n/a'})"
                )
            else:
                resolve_model(ref, key)
                found.append(f"{key} ok")
        except (ModelNotFoundError, PullError) as e:
            bad.append(str(e))
            fixes.append(f"bolt-agent models pull{_config_arg(cfg)}" if ref.startswith("hf:") else "")
    if bad:
        fix = next((f for f in fixes if f), f"edit the model paths in {cfg.source or 'the config'}")
        return Check("models", False, "; ".join(bad), fix)
    return Check("models", True, "; ".join(found) or "no models configured")


def check_memory(cfg: Any) -> Check:
    """The memory plan of the config on its device profile."""
    from agent.memplan import check_budget

    verdict = check_budget(cfg)
    fix = "" if verdict.fits else f"bolt-agent budget{_config_arg(cfg)}  # then apply the change it names"
    return Check("memory", verdict.fits, verdict.message, fix)


def check_audio(backend: Any | None = None) -> Check:
    """Input and output devices with their default sample rates (Hz)."""
    try:
        if backend is None:
            from agent.live.devices import SoundDeviceBackend

            backend = SoundDeviceBackend()
        devices = backend.query_devices()
    except (OSError, ImportError) as e:
        return Check("audio", False, f"PortAudio unavailable: {e}", "sudo apt-get install -y libportaudio2")
    ins = [
        f"{d['name']} ({d['max_input_channels']} ch, {d['default_samplerate']:.0f} Hz)"
        for d in devices
        if d["max_input_channels"] > 0
    ]
    outs = [
        f"{d['name']} ({d['max_output_channels']} ch, {d['default_samplerate']:.0f} Hz)"
        for d in devices
        if d["max_output_channels"] > 0
    ]
    detail = f"inputs: {', '.join(ins) or 'none'}; outputs: {', '.join(outs) or 'none'}"
    if not ins or not outs:
        return Check(
            "audio",
            False,
            detail,
            "pactl info  # start PulseAudio/PipeWire or plug in a USB microphone and speaker",
        )
    return Check("audio", True, detail)


def check_systemd_env(env: Mapping[str, str]) -> Check | None:
    """Under systemd only: the sound server must be reachable from the service."""
    if not env.get("INVOCATION_ID"):
        return None
    runtime = env.get("XDG_RUNTIME_DIR", "")
    pulse = env.get("PULSE_SERVER", "")
    uid = os.getuid()
    fix = (
        f"sudo systemctl edit {SERVICE}  # add: Environment=XDG_RUNTIME_DIR=/run/user/{uid} "
        f"PULSE_SERVER=unix:/run/user/{uid}/pulse/native"
    )
    sock = (
        Path(pulse.removeprefix("unix:")) if pulse.startswith("unix:") else Path(runtime, "pulse", "native")
    )
    if not runtime or not Path(runtime).is_dir():
        return Check("systemd-env", False, f"XDG_RUNTIME_DIR={runtime or '(unset)'} is not a directory", fix)
    if pulse and not pulse.startswith("unix:"):
        return Check("systemd-env", True, f"XDG_RUNTIME_DIR={runtime}, PULSE_SERVER={pulse}")
    if not sock.exists():
        return Check(
            "systemd-env", False, f"no sound server socket at {sock} (PULSE_SERVER={pulse or '(unset)'})", fix
        )
    return Check("systemd-env", True, f"XDG_RUNTIME_DIR={runtime}, sound server {sock}")


def check_serial(cfg: Any) -> Check:
    """Serial ports of the robot's drivers: present, readable and writable, user in ``dialout``."""
    ports = [(name, d.port) for name, d in cfg.robot.drivers.items() if d.kind != "sim" and d.port]
    if not ports:
        return Check("serial", True, "no serial drivers (simulated robot)")
    problems, fix, seen = [], "", []
    where = cfg.source or "the config"
    for name, port in ports:
        path = Path(port) if "/" in port else Path("/dev/serial/by-id") / port
        if not path.exists():
            problems.append(f"{name}: {path} does not exist")
            fix = fix or f"ls -l /dev/serial/by-id/  # then set [robot.drivers.{name}] port in {where}"
        elif not os.access(path, os.R_OK | os.W_OK):
            problems.append(f"{name}: {path} not readable/writable by this user")
            fix = fix or "sudo usermod -aG dialout $USER  # then log out and in again"
        else:
            seen.append(f"{name}: {path}")
    groups = {grp.getgrgid(g).gr_name for g in os.getgroups()}
    if os.getuid() != 0 and "dialout" not in groups:
        problems.append("user not in group dialout")
        fix = fix or "sudo usermod -aG dialout $USER  # then log out and in again"
    if problems:
        return Check("serial", False, "; ".join(problems), fix)
    return Check("serial", True, "; ".join(seen))


def check_camera(cfg: Any) -> Check:
    """The configured camera source and whether OpenCV was built with GStreamer."""
    source = cfg.camera.source
    try:
        import cv2
    except ImportError:
        return Check(
            "camera",
            not source,
            "OpenCV not installed",
            "pip install 'opencv-python-headless<5'",
            bool(source),
        )
    info = cv2.getBuildInformation()
    gst = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if "GStreamer" in ln), "NO")
    has_gst = gst.upper().startswith("YES")
    head = f"OpenCV {cv2.__version__}, GStreamer: {'YES' if has_gst else 'NO'}"
    if not source:
        return Check("camera", True, f"{head}; no camera configured", blocking=False)
    if "!" in source and not has_gst:
        return Check(
            "camera",
            False,
            f"{head}; source is a GStreamer pipeline",
            "sudo apt-get install -y python3-opencv && pip uninstall -y opencv-python-headless",
            blocking=False,
        )
    if not source.isdigit() and "!" not in source and not Path(source).expanduser().exists():
        return Check(
            "camera", False, f"{head}; {source} does not exist", "v4l2-ctl --list-devices", blocking=False
        )
    return Check("camera", True, f"{head}; source {source}", blocking=False)


def check_gpu(
    run: Callable[..., Any] = subprocess.run, sample: Callable[[list[str]], str] | None = None
) -> Check:
    """The GPU: one ``tegrastats`` sample on a Jetson (RAM is shared), else ``nvidia-smi`` memory.

    Args:
        run: ``subprocess.run`` (replaced in tests).
        sample: Returns the first output line of a command (default: :func:`first_line`).

    Returns:
        A non-blocking check: ``run`` also works on the CPU.
    """
    if shutil.which("tegrastats"):
        line = (sample or first_line)(["tegrastats", "--interval", "500"])
        return Check("gpu", True, f"Jetson tegrastats: {line[:200] or 'no sample'}", blocking=False)
    if shutil.which("nvidia-smi"):
        query = ["nvidia-smi", "--query-gpu=name,memory.used,memory.total", "--format=csv,noheader"]
        try:
            res = run(query, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError) as e:
            return Check("gpu", False, f"nvidia-smi failed: {e}", "nvidia-smi", blocking=False)
        if res.returncode != 0:
            why = (res.stderr or res.stdout).strip().splitlines()[:1] or [f"exit status {res.returncode}"]
            return Check(
                "gpu", False, f"nvidia-smi: {why[0]}", "nvidia-smi  # check the driver", blocking=False
            )
        return Check("gpu", True, f"nvidia-smi: {res.stdout.strip() or 'no GPU listed'}", blocking=False)
    return Check("gpu", True, "no NVIDIA GPU tools (CPU only)", blocking=False)


def first_line(cmd: list[str], timeout_s: float = 3.0) -> str:
    """The first line a long-running command prints (e.g. ``tegrastats``), then stop it.

    Args:
        cmd: Command and arguments.
        timeout_s: Longest wait for the line, s.

    Returns:
        The line without its newline; empty when none came in time or the command failed.
    """
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return ""
    try:
        if proc.stdout is None:
            return ""
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            return proc.stdout.readline().strip() if sel.select(timeout_s) else ""
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check_service(run: Callable[..., Any] = subprocess.run) -> Check:
    """The state of the ``bolt-agent`` systemd service, where systemd is present."""
    if not shutil.which("systemctl"):
        return Check("service", True, "systemctl not present", blocking=False)
    try:
        out = run(
            ["systemctl", "is-active", SERVICE], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        out = f"unknown ({e})"
    return Check("service", True, f"{SERVICE}.service: {out or 'unknown'}", blocking=False)


def run_checks(config: Path | None, env: Mapping[str, str] | None = None) -> list[Check]:
    """Run every check for a config.

    Args:
        config: Config TOML (None = the default config).
        env: Environment to read (default ``os.environ``).

    Returns:
        The checks in a fixed order; a bad config is one failed ``config`` check.
    """
    from agent.config import ConfigError, load_config

    env = os.environ if env is None else env
    checks = [check_venv()]
    try:
        cfg = load_config(config)
    except ConfigError as e:
        return [*checks, Check("config", False, str(e), f"edit {config or 'the config'}")]
    checks.append(Check("config", True, str(cfg.source or "default config")))
    checks += [check_models(cfg), check_memory(cfg)]
    # Before the audio check: a PulseAudio client creates $XDG_RUNTIME_DIR/pulse when it connects.
    sd = check_systemd_env(env)
    checks += ([sd] if sd else []) + [
        check_audio(),
        check_serial(cfg),
        check_camera(cfg),
        check_gpu(),
        check_service(),
    ]
    return checks


def _config_arg(cfg: Any) -> str:
    return f" --config {cfg.source}" if getattr(cfg, "source", None) else ""
