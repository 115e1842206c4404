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
login; a config naming ALSA devices needs neither. A Reachy Mini body (``[robot] driver =
"reachy_mini"``) adds its daemon, the SDK's release against the daemon's, its motors and its
recorded emotions (:func:`check_reachy`; REST GETs only, nothing moves).
"""

from __future__ import annotations

import grp
import http.client
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
    from hardware.config import REACHY_MINI

    ports = [(name, d.port) for name, d in cfg.robot.drivers.items() if d.kind != "sim" and d.port]
    if not ports:
        body = "a Reachy Mini, through its daemon" if cfg.robot.driver == REACHY_MINI else "simulated robot"
        return Check("serial", True, f"no serial drivers ({body})")
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


def check_reachy(
    cfg: Any,
    service: ServiceInfo | None = None,
    sdk: Callable[[], str | None] | None = None,
    timeout_s: float = 2.0,
) -> list[Check]:
    """A Reachy Mini body: its daemon, the SDK's release against the daemon's, its motors, its emotions.

    The daemon is asked over its REST API (``GET /api/daemon/status``, ``/api/motors/status``);
    nothing is moved and the motors are left as they are.

    Args:
        cfg: The config; nothing is checked unless ``[robot] driver = "reachy_mini"``.
        service: The installed unit; when it runs this config, the emotions' fix downloads into
            its cache.
        sdk: Returns the installed SDK's version, None when it is missing (default:
            :func:`hardware.reachy_mini.sdk_version`).
        timeout_s: Longest wait for each answer of the daemon, s.

    Returns:
        ``reachy-daemon``, ``reachy-version``, ``reachy-motors`` (only when the daemon answers)
        and ``reachy-emotions``; empty for other bodies.
    """
    from hardware.config import REACHY_MINI

    if cfg.robot.driver != REACHY_MINI:
        return []
    from hardware.reachy_mini import sdk_version

    daemon, status = check_reachy_daemon(cfg, timeout_s)
    checks = [daemon, check_reachy_version(status, (sdk or sdk_version)())]
    if status is not None:
        checks.append(check_reachy_motors(cfg, timeout_s))
    return [*checks, check_reachy_emotions(cfg, service)]


def check_reachy_daemon(cfg: Any, timeout_s: float = 2.0) -> tuple[Check, dict[str, Any] | None]:
    """The Reachy Mini's daemon answers at ``[robot.reachy_mini] host:port`` and is running.

    Without it the robot does not move (``run`` goes on speech-only), so a failure blocks, as a
    missing serial port does.

    Args:
        cfg: The config.
        timeout_s: Longest wait for the answer, s.

    Returns:
        ``(check, the daemon's status)``; the status is None when the daemon did not answer.
    """
    from hardware.reachy_mini import daemon_get

    rm = cfg.robot.reachy_mini
    at = f"reachy-mini-daemon at {rm.host}:{rm.port}"
    try:
        status = daemon_get(rm.host, rm.port, "/api/daemon/status", timeout_s)
        if not isinstance(status, dict):
            raise ValueError(f"unexpected status {status!r}")
    except (OSError, ValueError, http.client.HTTPException) as e:  # HTTPException: not HTTP on that port
        if rm.host in ("localhost", "127.0.0.1", "::1"):  # a Lite, or the simulator, on this computer
            start = (
                "start reachy-mini-daemon on this computer: with the robot (a Lite: its USB cable "
                "goes here; installed by jetson/install.sh) sudo systemctl start reachy-mini-daemon; "
                "without it, the simulator: REACHY_MINI_TELEMETRY=0 DO_NOT_TRACK=1 "
                ".venv/bin/reachy-mini-daemon --sim --headless --no-media"
            )
        else:
            start = f"start reachy-mini-daemon on {rm.host} (a Wireless robot runs its own: power it on)"
        where = cfg.source or "the config"
        fix = f"{start}, or check [robot.reachy_mini] host and port in {where}"
        return Check(
            "reachy-daemon", False, f"{at} is not reachable ({getattr(e, 'reason', None) or e})", fix
        ), None
    version = f" ({status['version']})" if status.get("version") else ""
    runs = "robot"
    if status.get("mockup_sim_enabled"):
        runs = "mockup simulator"
    elif status.get("simulation_enabled"):
        runs = "MuJoCo simulator"
    state = str(status.get("state", "unknown"))
    detail = f"{at}{version}: {state}, {runs}"
    if state == "running":
        return Check("reachy-daemon", True, detail), status
    error = f": {status['error']}" if status.get("error") else ""
    return Check(
        "reachy-daemon", False, detail + error, f"restart reachy-mini-daemon on {rm.host} and read its log"
    ), status


def check_reachy_version(status: dict[str, Any] | None, sdk: str | None) -> Check:
    """Pollen's SDK is installed and the same release (major.minor) as the daemon.

    Pollen: "Install matching reachy_mini versions for the SDK and daemon". The driver refuses
    another major.minor release (blocking); another patch release connects (a warning). Without
    the SDK, ``run`` stops at start (blocking).

    Args:
        status: The daemon's status (:func:`check_reachy_daemon`), None when it did not answer.
        sdk: The installed SDK's version, None when it is not installed.
    """
    from hardware.reachy_mini import SDK_PACKAGE, same_release

    if sdk is None:
        setup = REPO / "launch" / "setup.sh"
        pip = "pip install 'bolt-agent[reachy]'"
        fix = f"BOLT_REACHY=1 bash {setup} run  # or: {pip}" if setup.is_file() else pip
        detail = f"Pollen's SDK ({SDK_PACKAGE}) is not installed: run cannot drive a Reachy Mini"
        return Check("reachy-version", False, detail, fix)
    daemon = str(status.get("version") or "") if status is not None else ""
    if not daemon:
        why = "did not say" if status is not None else "did not answer"
        return Check("reachy-version", True, f"SDK {sdk}; the daemon's version is unknown (it {why})")
    if daemon == sdk:
        return Check("reachy-version", True, f"SDK {sdk} and daemon {daemon}: the same release")
    pip = f"{sys.executable} -m pip install '{SDK_PACKAGE}=={daemon}'"
    if same_release(daemon, sdk):
        return Check(
            "reachy-version",
            False,
            f"SDK {sdk} and daemon {daemon} differ in their patch release: they connect, "
            "but matching versions are what Pollen supports",
            f"{pip}  # or update the daemon to {sdk}",
            blocking=False,
        )
    return Check(
        "reachy-version",
        False,
        f"SDK {sdk} and daemon {daemon} are different releases: the driver refuses to connect "
        "and the robot stays still",
        f"{pip}  # or update the robot's daemon to {sdk}",
    )


def check_reachy_motors(cfg: Any, timeout_s: float = 2.0) -> Check:
    """The motor mode the daemon reports; anything but ``enabled`` is a warning.

    ``run`` turns the motors on when it connects (pinning the targets to the present pose
    first), so torque off is not a fault, only worth knowing before the head moves.

    Args:
        cfg: The config.
        timeout_s: Longest wait for the answer, s.
    """
    from hardware.reachy_mini import motor_mode

    rm = cfg.robot.reachy_mini
    try:
        mode = motor_mode(rm, timeout_s)
    except (OSError, ValueError, http.client.HTTPException) as e:
        fix = f"restart reachy-mini-daemon on {rm.host} and read its log"
        return Check("reachy-motors", False, f"cannot read the motor mode: {e}", fix, blocking=False)
    if mode == "enabled":
        return Check("reachy-motors", True, "motors enabled", blocking=False)
    return Check(
        "reachy-motors",
        False,
        f"motors {mode}: bolt-agent run turns them on when it connects",
        f"curl -X POST http://{rm.host}:{rm.port}/api/motors/set_mode/enabled  "
        "# only to try them now; run does it at start",
        blocking=False,
    )


def check_reachy_emotions(cfg: Any, service: ServiceInfo | None = None) -> Check:
    """Pollen's recorded emotions are on disk: in the Hugging Face cache, or ``emotions_dir``.

    Without them the robot runs, with no emotions (a warning). Move files are counted, not
    parsed (``models pull`` and ``run`` report a file that does not load).

    Args:
        cfg: The config.
        service: The installed unit; when it runs this config, the fix downloads into its cache.
    """
    from huggingface_hub import constants

    from hardware.pollen_moves import find_emotions

    rm = cfg.robot.reachy_mini
    edit = f"edit [robot.reachy_mini] emotions_dir in {cfg.source or 'the config'}"
    found = find_emotions(rm.emotions_repo, rm.emotions_dir)
    if found is None and rm.emotions_dir is not None:
        detail = (
            f"[robot.reachy_mini] emotions_dir {rm.emotions_dir} is not a folder: the robot has no emotions"
        )
        return Check("reachy-emotions", False, detail, edit, blocking=False)
    if found is None:
        detail = (
            f"the recorded emotions ({rm.emotions_repo}) are not downloaded "
            f"(cache {constants.HF_HUB_CACHE}): the robot has no emotions"
        )
        return Check("reachy-emotions", False, detail, pull_fix(cfg, service), blocking=False)
    moves = sorted(found.glob("*.json")) + sorted((found / "data").glob("*.json"))  # where Pollen keeps them
    if not moves:
        detail = f"no recorded moves (*.json, also under data/) in {found}: the robot has no emotions"
        fix = edit if rm.emotions_dir is not None else pull_fix(cfg, service)
        return Check("reachy-emotions", False, detail, fix, blocking=False)
    return Check("reachy-emotions", True, f"{len(moves)} recorded moves in {found}", blocking=False)


def check_projector(cfg: Any, service: ServiceInfo | None = None) -> Check | None:
    """The vision projector of ``[vision] describer = "vlm"``: present, readable, the right width.

    Checked: the file is here; it is a GGUF; it is a vision projector of a type llama.cpp knows
    (``clip.projector_type``, a vision encoder); it projects to the width of the model that reads
    its images. Only the GGUF header is read (:func:`agent.memplan.read_projector`). With
    ``engine = "chat"`` the width is the chat model's ``n_embd`` (llama.cpp refuses a mismatch:
    "mismatch between text model and mmproj"); with ``engine = "llama-server"`` it is the VLM's.
    A failure never blocks ``run``: the agent then loads the chat model without the projector
    (or starts no VLM), says so, and still talks and sees with OpenCV.

    Args:
        cfg: The config.
        service: The installed unit (the download fix then runs as its user).

    Returns:
        None unless ``describer = "vlm"`` with a local engine (``chat`` or ``llama-server``).
    """
    from agent.memplan import PlanError, ProjectorError, load_model_shape, read_projector
    from agent.memplan.components import local_model

    vision = getattr(cfg, "vision", None)
    vlm = getattr(vision, "vlm", None)
    if getattr(vision, "describer", "opencv") != "vlm" or vlm is None or vlm.engine == "openai":
        return None
    blocking = False  # the agent runs on without it (agent.pipeline.core.load_chat_model)
    where = cfg.source or "the config"
    reader = "chat model" if vlm.engine == "chat" else "VLM"
    if not vlm.mmproj:
        return Check(
            "projector",
            False,
            f'[vision] describer = "vlm" with engine {vlm.engine!r} but no [vision.vlm] mmproj: '
            f"the {reader} cannot see without its projector",
            f"edit [vision.vlm] mmproj in {where}  # the mmproj GGUF published with the model "
            '("hf:OWNER/REPO/FILE" or a path)',
            blocking,
        )
    path = local_model(vlm.mmproj)
    if path is None or not path.is_file():
        hf = vlm.mmproj.startswith("hf:")
        return Check(
            "projector",
            False,
            f"[vision.vlm] mmproj {vlm.mmproj} is " + ("not downloaded" if hf else "not on this machine"),
            pull_fix(cfg, service)
            if hf
            else f"edit [vision.vlm] mmproj in {where}  # a path to the mmproj GGUF",
            blocking,
        )
    try:
        p = read_projector(path)
    except ProjectorError as e:
        return Check(
            "projector",
            False,
            str(e),
            f"edit [vision.vlm] mmproj in {where}  # the projector (mmproj) GGUF made for the {reader}",
            blocking,
        )
    audio = (
        f" + {p.audio_projector} audio encoder ({p.audio_bytes / 2**30:.2f} GiB; left out: "
        "the agent loads a vision-only copy)"
        if p.audio_bytes
        else ""
    )
    found = f"{path.name}: {p.projector} vision encoder, {p.n_layer} blocks x {p.n_embd} wide{audio}"
    model = cfg.llm.model if vlm.engine == "chat" else vlm.model
    try:
        width = load_model_shape(model).n_embd if model else 0
    except PlanError:
        width = 0
    if width and p.projection_dim != width:
        return Check(
            "projector",
            False,
            f"{found}; it projects to {p.projection_dim} but the {reader}'s embedding width is {width}: "
            "it is another model's projector (llama.cpp refuses it: mismatch between text model and mmproj)",
            f"edit [vision.vlm] mmproj in {where}  # the mmproj published with {model}",
            blocking,
        )
    match = (
        f"projects to {p.projection_dim} = the {reader}'s width"
        if width
        else "the model's width unknown here"
    )
    return Check("projector", True, f"{found}; {match}", blocking=blocking)


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
    from hardware.camera import CameraError, parse_source

    try:  # devices, files, a Reachy Mini's camera by USB id, its simulated eye camera
        kind, where = parse_source(source)
    except CameraError as e:
        return Check("camera", False, f"{head}; {e}", "v4l2-ctl --list-devices", blocking=False)
    shown = source if str(where) == source else f"{source} ({where})"
    return Check("camera", True, f"{head}; source {shown}", blocking=False)


def check_skills(cfg: Any) -> Check:
    """The skills this robot is offered, and those left out with the reason (no camera, no arm).

    A skill whose joints or devices the body lacks is never offered to the model nor named by
    "what can you do?"; this line says which and why. Skill files that failed to load fail it
    (not blocking: the other skills run).
    """
    import logging

    from agent.skills import load_registry
    from hardware.factory import load_libraries

    libraries, _ = load_libraries(cfg.robot)
    loader = logging.getLogger("agent.skills")
    level = loader.level
    loader.setLevel(logging.CRITICAL)  # the load errors are this check's detail
    try:
        reg = load_registry(
            cfg.skills.folders,
            cfg.skills.include_builtin,
            cfg.skills.enabled,
            cfg.skills.timeout_s,
            joints=[j.name for j in cfg.robot.joints],
            libraries={kind: list(lib) for kind, lib in libraries.items()},
            devices=cfg.devices(),
        )
    finally:
        loader.setLevel(level)
    detail = f"{len(reg.skills)} offered"
    if reg.left_out:  # each reason without its source line: "no camera is configured"
        detail += "; left out: " + ", ".join(
            f"{n} ({why.rsplit(' (', 1)[0]})" for n, why in reg.left_out.items()
        )
    if reg.load_errors:
        return Check(
            "skills", False, f"{detail}; {'; '.join(reg.load_errors)}", "bolt-agent skills list", False
        )
    return Check("skills", True, detail, blocking=False)


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
    projector = check_projector(cfg, service)
    checks += [projector] if projector else []
    # Before the audio check: a PulseAudio client creates $XDG_RUNTIME_DIR/pulse when it connects.
    sd = check_systemd_env(env, cfg)
    gpu_access = check_gpu_access(cfg)
    checks += ([sd] if sd else []) + [check_audio(cfg=cfg), check_serial(cfg), *check_reachy(cfg, service)]
    checks += [check_camera(cfg), check_skills(cfg), check_gpu()]
    checks += ([gpu_access] if gpu_access else []) + [check_service(service)]
    return checks


def _config_arg(cfg: Any) -> str:
    return f" --config {cfg.source}" if getattr(cfg, "source", None) else ""
