"""``bolt-agent doctor``'s checks of the device: the memory plan, the vision projector, the GPU.

The memory plan comes from the GGUF headers (:func:`agent.memplan.check_budget`), the projector
from its header (:func:`agent.memplan.read_projector`); no weights are loaded. The GPU is read
from ``tegrastats`` / ``nvidia-smi`` (and whether llama-cpp-python can offload to it); on a
Jetson, whether the user may open ``/dev/nvmap``.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.config import Config, LLMConfig
from agent.memplan.components import local_model
from agent.memplan.plan import PlanError, check_budget, load_model_shape
from agent.memplan.projector import ProjectorError, read_projector
from agent.models_doctor import config_arg, pull_fix
from agent.systemd import SERVICE, ServiceInfo
from hardware.check import Check

REPO = Path(__file__).resolve().parents[2]
"""The checkout (``jetson/install.sh`` is offered when it is there)."""


def check_memory(cfg: Config) -> Check:
    """The memory plan of the config on its device profile (from the GGUF headers)."""
    verdict = check_budget(cfg)
    fix = "" if verdict.fits else f"bolt-agent budget{config_arg(cfg)}  # then apply the change it names"
    return Check("memory", verdict.fits, verdict.message, fix)


def check_projector(cfg: Config, service: ServiceInfo | None = None) -> Check | None:
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
    vlm = cfg.vision.vlm
    if cfg.vision.describer != "vlm" or vlm is None or vlm.engine == "openai":
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
    llm: LLMConfig, dev: Path = Path("/dev"), groups: set[str] | None = None, uid: int | None = None
) -> Check | None:
    """On a Jetson: the user is in ``video`` and ``render``, which own ``/dev/nvmap`` and ``/dev/nvhost-*``.

    Without them CUDA fails with "NvRmMemInitNvmap failed ... Permission denied".

    Args:
        llm: ``[llm]``; the check blocks ``run`` when the LLM runs here with layers on the GPU.
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
    on_gpu = llm.engine != "openai" and llm.n_gpu_layers != 0
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
