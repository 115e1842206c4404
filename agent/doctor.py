"""``bolt-agent doctor``: every check that decides whether ``run`` can start on this machine.

Each check returns :class:`Check` (name, ok, detail, fix command, and whether a failure blocks
``run``). Nothing is downloaded and no model is loaded: models are checked in place
(:func:`agent.models_pull.verify_cached` hashes ``hf:`` files against their cached SHA-256, once
per file version), the memory plan comes from the GGUF header (:func:`agent.memplan.check_budget`),
audio devices from PortAudio (the configured ones must exist, as ``run`` needs them), serial ports
from the file system, the GPU from ``tegrastats`` / ``nvidia-smi`` (and whether llama-cpp-python
can offload to it; on a Jetson whether the user may open ``/dev/nvmap``), the service from
``systemctl show``. Under systemd (``INVOCATION_ID`` set) the sound server is checked too when the
config goes through one: a service does not inherit ``XDG_RUNTIME_DIR`` / ``PULSE_SERVER`` from a
login; a config naming ALSA devices needs neither.
"""

from __future__ import annotations

import grp
import importlib.metadata
import os
import pwd
import selectors
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agent.systemd import SERVICE, ServiceInfo

PACKAGES = ("llama-cpp-python", "faster-whisper", "piper-tts", "sounddevice", "pyserial", "huggingface-hub")
REPO = Path(__file__).resolve().parents[1]
SYSTEM_UID_MAX = 999
"""System users (``useradd --system``: ``bolt``) have no login session, so no ``/run/user/UID``."""


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


def check_venv(packages: tuple[str, ...] = PACKAGES) -> Check:
    """Python, virtual environment and the runtime packages.

    Args:
        packages: Distribution names that must be installed.
    """
    in_venv = sys.prefix != sys.base_prefix
    missing = []
    for dist in packages:
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            missing.append(dist)
    py = f"Python {sys.version.split()[0]} at {sys.executable}" + ("" if in_venv else " (not a venv)")
    if missing:
        pip = f"{sys.executable} -m pip install {' '.join(missing)}"
        setup = REPO / "launch" / "setup.sh"
        fix = f"bash {setup} run  # or: {pip}" if setup.is_file() else pip
        return Check("packages", False, f"{py}; missing: {', '.join(missing)}", fix)
    return Check("packages", True, f"{py}; {len(packages)} runtime packages installed")


def check_models(cfg: Any, service: ServiceInfo | None = None) -> Check:
    """Every model of the config present on disk, ``hf:`` files verified by SHA-256.

    Args:
        cfg: The config.
        service: The installed unit; when it runs this config, the fix downloads as its user
            into its ``HF_HOME``.
    """
    from huggingface_hub import constants

    from agent.models import ModelNotFoundError, resolve_model
    from agent.models_pull import PullError, config_model_refs, verify_cached

    found, bad, fixes = [], [], []
    for key, ref in config_model_refs(cfg):
        try:
            if ref.startswith("hf:"):
                hit = verify_cached(ref, key)
                if hit is None:
                    bad.append(f"{key} {ref} not downloaded (cache {constants.HF_HUB_CACHE})")
                    fixes.append(pull_fix(cfg, service))
                    continue
                found.append(
                    f"{key} ok ({hit.size / 2**30:.2f} GiB, sha256 {'ok' if hit.verified else 'n/a'})"
                )
            else:
                resolve_model(ref, key)
                found.append(f"{key} ok")
        except (ModelNotFoundError, PullError) as e:
            bad.append(str(e))
            fixes.append(pull_fix(cfg, service) if ref.startswith("hf:") else "")
    if bad:
        fix = next((f for f in fixes if f), f"edit the model paths in {cfg.source or 'the config'}")
        return Check("models", False, "; ".join(bad), fix)
    return Check("models", True, "; ".join(found) or "no models configured")


def pull_fix(cfg: Any, service: ServiceInfo | None = None) -> str:
    """The ``models pull`` command that fills the cache ``run`` reads.

    For the config of the installed service: as the unit's user, with its ``HF_HOME`` and its
    ``bolt-agent``; otherwise with this process's ``HF_HOME`` when one is set.

    Args:
        cfg: The config.
        service: The installed unit, or None.
    """
    from agent.models_pull import serves_config

    hf_home = os.environ.get("HF_HOME", "")
    if service is not None and serves_config(service, cfg.source):
        home = service.environment.get("HF_HOME", hf_home)
        who = f"sudo -u {service.user}" if service.user else "sudo"
        env = f" env HF_HOME={home}" if home else ""
        return f"{who}{env} {service.exec_path or 'bolt-agent'} models pull --config {cfg.source}"
    cmd = f"bolt-agent models pull{_config_arg(cfg)}"
    return f"HF_HOME={hf_home} {cmd}" if hf_home else cmd


def check_memory(cfg: Any) -> Check:
    """The memory plan of the config on its device profile."""
    from agent.memplan import check_budget

    verdict = check_budget(cfg)
    fix = "" if verdict.fits else f"bolt-agent budget{_config_arg(cfg)}  # then apply the change it names"
    return Check("memory", verdict.fits, verdict.message, fix)


def check_audio(backend: Any | None = None, cfg: Any | None = None) -> Check:
    """Input and output devices with their default sample rates (Hz); the configured ones must exist.

    Args:
        backend: A :class:`~agent.audio_io.devices.SoundBackend` (default: PortAudio).
        cfg: The config: its ``[audio] input_device`` / ``output_device`` are looked up as ``run``
            does (None: only the device list).
    """
    from agent.audio_io.devices import DeviceError, find_device

    try:
        if backend is None:
            from agent.audio_io.devices import SoundDeviceBackend

            backend = SoundDeviceBackend()
        devices = backend.query_devices()
    except (OSError, ImportError, DeviceError) as e:
        return Check("audio", False, f"PortAudio unavailable: {e}", "sudo apt-get install -y libportaudio2")
    names = {}
    for kind in ("input", "output"):
        names[kind] = [
            f"{d['name']} ({d[f'max_{kind}_channels']} ch, {d['default_samplerate']:.0f} Hz)"
            for d in devices
            if d[f"max_{kind}_channels"] > 0
        ]
    detail = f"inputs: {', '.join(names['input']) or 'none'}; outputs: {', '.join(names['output']) or 'none'}"
    if not names["input"] or not names["output"]:
        return Check(
            "audio",
            False,
            detail,
            "pactl info  # start PulseAudio/PipeWire or plug in a USB microphone and speaker",
        )
    for kind in ("input", "output"):
        spec = getattr(cfg.audio, f"{kind}_device") if cfg is not None else None
        if spec is None:
            continue
        try:
            find_device(backend, spec, kind)
        except DeviceError:
            example = names[kind][0].rsplit(" (", 1)[0]
            return Check(
                "audio",
                False,
                f"no {kind} device matches [audio] {kind}_device = {spec!r}; {detail}",
                f"edit [audio] {kind}_device in {cfg.source or 'the config'}  # a name or index listed "
                f'here, e.g. "{example}"',
            )
    return Check("audio", True, detail)


def uses_sound_server(cfg: Any | None) -> bool:
    """Whether the config's audio goes through PulseAudio/PipeWire rather than ALSA devices directly.

    A device left at the system default, ``default`` or a name with ``pulse`` / ``pipewire``
    goes through the sound server; two named hardware devices (``USB``, ``hw:1,0``) do not.

    Args:
        cfg: The config (None: assume a sound server).
    """
    if cfg is None:
        return True
    for spec in (cfg.audio.input_device, cfg.audio.output_device):
        if spec is None:
            return True
        name = str(spec).lower()
        if name in ("default", "sysdefault") or "pulse" in name or "pipewire" in name:
            return True
    return False


def check_systemd_env(env: Mapping[str, str], cfg: Any | None = None, uid: int | None = None) -> Check | None:
    """Under systemd only: the sound server must be reachable from the service, if the config uses one.

    Args:
        env: The environment (``INVOCATION_ID``, ``XDG_RUNTIME_DIR``, ``PULSE_SERVER``).
        cfg: The config; naming ALSA devices in ``[audio]`` needs no sound server.
        uid: The service's user id (default: this process's).

    Returns:
        None outside systemd.
    """
    if not env.get("INVOCATION_ID"):
        return None
    if not uses_sound_server(cfg):
        devs = f"{cfg.audio.input_device!r} / {cfg.audio.output_device!r}"
        return Check("systemd-env", True, f"[audio] names ALSA devices ({devs}): no sound server needed")
    runtime = env.get("XDG_RUNTIME_DIR", "")
    pulse = env.get("PULSE_SERVER", "")
    uid = os.getuid() if uid is None else uid
    where = getattr(cfg, "source", None) or "the config"
    if uid <= SYSTEM_UID_MAX:  # no login session: no /run/user/UID/pulse to point at
        fix = (
            f"set [audio] input_device and output_device in {where} to ALSA devices "
            '(arecord -l; aplay -l; e.g. "USB"), '
            f"or run PulseAudio system-wide and: sudo systemctl edit {SERVICE}  # add: "
            "Environment=PULSE_SERVER=unix:/run/pulse/native"
        )
    else:
        fix = (
            f"sudo systemctl edit {SERVICE}  # add: Environment=XDG_RUNTIME_DIR=/run/user/{uid} "
            f"PULSE_SERVER=unix:/run/user/{uid}/pulse/native"
        )
    if pulse and not pulse.startswith("unix:"):
        return Check("systemd-env", True, f"PULSE_SERVER={pulse}")
    if pulse:
        sock = Path(pulse.removeprefix("unix:"))
    elif not runtime or not Path(runtime).is_dir():
        return Check("systemd-env", False, f"XDG_RUNTIME_DIR={runtime or '(unset)'} is not a directory", fix)
    else:
        sock = Path(runtime, "pulse", "native")
    if not sock.exists():
        return Check(
            "systemd-env", False, f"no sound server socket at {sock} (PULSE_SERVER={pulse or '(unset)'})", fix
        )
    return Check("systemd-env", True, f"XDG_RUNTIME_DIR={runtime or '(unset)'}, sound server {sock}")


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
    if problems:  # the ports that are fine are listed too
        return Check("serial", False, "; ".join(problems + seen), fix)
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
    run: Callable[..., Any] = subprocess.run,
    sample: Callable[[list[str]], str] | None = None,
    offload: Callable[[], bool | None] | None = None,
) -> Check:
    """The GPU: one ``tegrastats`` sample on a Jetson (RAM is shared), else ``nvidia-smi`` memory.

    With a GPU present, llama-cpp-python must be a GPU build: a CPU-only wheel (built before CUDA
    was set up, or from PyPI) runs the LLM on the CPU.

    Args:
        run: ``subprocess.run`` (replaced in tests).
        sample: Returns the first output line of a command (default: :func:`first_line`).
        offload: Whether llama-cpp-python can offload to a GPU (default: :func:`llama_gpu_offload`).

    Returns:
        A non-blocking check: ``run`` also works on the CPU.
    """
    jetson = bool(shutil.which("tegrastats"))
    if jetson:
        line = (sample or first_line)(["tegrastats", "--interval", "500"])
        found = f"Jetson tegrastats: {line[:200] or 'no sample'}"
    elif shutil.which("nvidia-smi"):
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
        if not res.stdout.strip():
            return Check("gpu", True, "nvidia-smi: no GPU listed", blocking=False)
        found = f"nvidia-smi: {res.stdout.strip()}"
    else:
        return Check("gpu", True, "no NVIDIA GPU tools (CPU only)", blocking=False)
    if (offload or llama_gpu_offload)() is False:
        return Check(
            "gpu",
            False,
            f"{found}; llama-cpp-python is a CPU-only build (llama_supports_gpu_offload() is False): "
            "the LLM runs on the CPU",
            _cuda_rebuild_fix(jetson),
            blocking=False,
        )
    return Check("gpu", True, found, blocking=False)


def llama_gpu_offload() -> bool | None:
    """Whether the installed llama-cpp-python was built with GPU offload (CUDA, Metal...).

    Returns:
        ``llama_cpp.llama_supports_gpu_offload()``; None when llama-cpp-python does not load.
    """
    try:
        import llama_cpp

        return bool(llama_cpp.llama_supports_gpu_offload())
    except (ImportError, OSError, AttributeError, RuntimeError):
        return None


def _cuda_rebuild_fix(jetson: bool) -> str:
    if jetson and (REPO / "jetson" / "install.sh").is_file():
        return f"sudo {REPO}/jetson/install.sh --skip-models  # rebuilds llama-cpp-python for CUDA (sm_87)"
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    try:
        version = "==" + importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        version = ""
    return (
        f'CUDACXX={nvcc} CMAKE_ARGS="-DGGML_CUDA=on" {sys.executable} -m pip install --force-reinstall '
        f"--no-deps --no-cache-dir --no-binary llama-cpp-python llama-cpp-python{version}"
    )


def check_gpu_access(
    cfg: Any, dev: Path = Path("/dev"), groups: set[str] | None = None, uid: int | None = None
) -> Check | None:
    """On a Jetson: the user is in ``video`` and ``render``, which own ``/dev/nvmap`` and ``/dev/nvhost-*``.

    Without them CUDA fails with "NvRmMemInitNvmap failed ... Permission denied".

    Args:
        cfg: The config; the check blocks ``run`` when the LLM runs here with layers on the GPU.
        dev: The device folder.
        groups: Group names of the user (default: this process's).
        uid: The user id (default: this process's; root needs no group).

    Returns:
        None when there are no Tegra GPU device nodes.
    """
    nodes = sorted(dev.glob("nvhost*")) + ([dev / "nvmap"] if (dev / "nvmap").exists() else [])
    if not nodes:
        return None
    uid = os.getuid() if uid is None else uid
    have = {grp.getgrgid(g).gr_name for g in os.getgroups()} if groups is None else groups
    missing = [g for g in ("video", "render") if g not in have and _group_exists(g)]
    if uid == 0 or not missing:
        return Check("gpu-access", True, f"{len(nodes)} GPU device nodes; user may open them")
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    on_gpu = cfg.llm.engine != "openai" and cfg.llm.n_gpu_layers != 0
    return Check(
        "gpu-access",
        False,
        f"{user} is not in group {', '.join(missing)}: cannot open {nodes[0]} "
        "(CUDA fails: NvRmMemInitNvmap ... Permission denied)",
        f"sudo usermod -aG {','.join(missing)} {user}  # then log in again; sudo systemctl restart {SERVICE}",
        blocking=on_gpu,
    )


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


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True


def check_service(service: ServiceInfo | None) -> Check:
    """The state of the ``bolt-agent`` systemd service; failed or restarting is a problem with its fix.

    Args:
        service: :func:`agent.systemd.service_info` (None: not installed, or no systemd here).
    """
    if service is None:
        return Check("service", True, f"{SERVICE}.service not installed (or no systemd here)", blocking=False)
    state = f"{SERVICE}.service: {service.active} ({service.sub})"
    fix = (
        f"journalctl -u {SERVICE} -b -n 50 --no-pager  # read why, fix it, then: "
        f"sudo systemctl restart {SERVICE}"
    )
    restarts = f", {service.restarts} restarts" if service.restarts else ""
    if service.active == "failed":
        return Check("service", False, f"{state}: failed ({service.result}{restarts})", fix, blocking=False)
    if service.sub == "auto-restart" or (service.active == "activating" and service.restarts):
        return Check(
            "service",
            False,
            f"{state}: restarting after a failure ({service.result}{restarts})",
            fix,
            blocking=False,
        )
    return Check("service", True, state, blocking=False)


def run_checks(
    config: Path | None, env: Mapping[str, str] | None = None, service: ServiceInfo | None = None
) -> list[Check]:
    """Run every check for a config.

    Args:
        config: Config TOML (None = the default config).
        env: Environment to read (default ``os.environ``).
        service: The installed unit (:func:`agent.systemd.service_info`), None when there is none.

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
    checks += [check_models(cfg, service), check_memory(cfg)]
    # Before the audio check: a PulseAudio client creates $XDG_RUNTIME_DIR/pulse when it connects.
    sd = check_systemd_env(env, cfg)
    gpu_access = check_gpu_access(cfg)
    checks += ([sd] if sd else []) + [check_audio(cfg=cfg), check_serial(cfg), check_camera(cfg), check_gpu()]
    checks += ([gpu_access] if gpu_access else []) + [check_service(service)]
    return checks


def _config_arg(cfg: Any) -> str:
    return f" --config {cfg.source}" if getattr(cfg, "source", None) else ""
