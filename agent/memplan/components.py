"""Memory of everything beside the LLM: the Python runtime, ASR, TTS, vision, the GPU runtime.

Figures are either measured once on this kind of machine and recorded here (peak resident
set size added by the component, read from ``/proc/self/status`` VmRSS/VmHWM around loading
the model and running it once), or estimated from the model file's size and labelled so.

Measured here (x86_64, Debian 12, Python 3.11, 2026-12-01):

* Python with numpy, soxr, onnxruntime, ctranslate2, faster_whisper, piper, llama_cpp, cv2,
  pydantic and typer imported: 111 MiB.
* faster-whisper ``tiny.en`` int8 on the CPU (``cpu_threads=2``): 70 MiB after loading,
  112 MiB after transcribing a 4.6 s command with beam 5, 178 MiB peak.
* piper ``en_US-joe-medium``: 74 MiB after loading, 153 MiB after synthesizing two
  sentences, 154 MiB peak.
* OpenCV Haar face cascade + HOG people detector on 1280x720 frames (detection at 640 px):
  68 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Line", "other_components"]

MiB = 1024**2

RUNTIME_MIB = 111
ASR_MEASURED_MIB = {"packaged:whisper-tiny.en": 178}
TTS_MEASURED_MIB = {"packaged:piper-joe-medium": 154}
VISION_OPENCV_MIB = 68


@dataclass(frozen=True)
class Line:
    """One row of the memory plan.

    Attributes:
        component: What it is (``"KV cache, sliding-window layers"``).
        where: ``"GPU"`` (GPU buffer), ``"host"`` (process memory), ``"disk"`` (read on demand).
        bytes: Bytes counted against the budget.
        basis: How the figure was obtained: ``"GGUF"`` (tensor info), ``"llama.cpp"``
            (llama.cpp's sizing formula), ``"measured"`` (recorded here), ``"estimate"``.
        detail: Shape, cells, types: what the number is made of.

    """

    component: str
    where: str
    bytes: int
    basis: str
    detail: str = ""


def _local_size(ref: str) -> int | None:
    """Bytes of a model reference on this machine (file or folder), or None; never downloads."""
    path: Path | None = None
    if ref.startswith("packaged:"):
        from agent.models import ModelNotFoundError, resolve_model

        try:
            path = resolve_model(ref)
        except ModelNotFoundError:
            return None
    elif ref.startswith("hf:"):
        parts = ref[3:].split("/")
        if len(parts) >= 3:
            from huggingface_hub import try_to_load_from_cache

            hit = try_to_load_from_cache("/".join(parts[:2]), "/".join(parts[2:]))
            path = Path(hit) if isinstance(hit, str) else None
    else:
        path = Path(ref).expanduser()
    if path is None or not path.exists():
        return None
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _asr(cfg: Any) -> Line:
    device = str(getattr(cfg, "device", "cpu"))
    where = "host" if device == "cpu" else "GPU"
    if device == "cpu" and cfg.model in ASR_MEASURED_MIB:
        return Line(
            f"ASR {cfg.model} ({cfg.compute_type}, CPU)",
            where,
            ASR_MEASURED_MIB[cfg.model] * MiB,
            "measured",
            "peak RSS while loading and transcribing",
        )
    size = _local_size(cfg.model)
    if size is None:
        return Line(f"ASR {cfg.model} ({device})", where, 400 * MiB, "estimate", "model not on this machine")
    extra = 64 * MiB if device == "cpu" else 300 * MiB  # CTranslate2 buffers; on CUDA its own context
    return Line(
        f"ASR {cfg.model} ({cfg.compute_type}, {device})",
        where,
        int(size * 1.5) + extra,
        "estimate",
        f"1.5 x model files ({size / MiB:.0f} MiB) + {extra // MiB} MiB runtime",
    )


def _tts(cfg: Any) -> Line:
    if cfg.voice in TTS_MEASURED_MIB:
        return Line(
            f"TTS {cfg.voice} (CPU)",
            "host",
            TTS_MEASURED_MIB[cfg.voice] * MiB,
            "measured",
            "peak RSS while loading and synthesizing",
        )
    size = _local_size(cfg.voice)
    if size is None:
        return Line(f"TTS {cfg.voice} (CPU)", "host", 200 * MiB, "estimate", "voice not on this machine")
    return Line(
        f"TTS {cfg.voice} (CPU)",
        "host",
        2 * size + 80 * MiB,
        "estimate",
        f"2 x voice file ({size / MiB:.0f} MiB) + 80 MiB onnxruntime and espeak",
    )


def _vision(camera: Any, vision: Any) -> Line | None:
    if not getattr(camera, "source", "") or not getattr(vision, "enabled", True):
        return None
    if getattr(vision, "describer", "opencv") == "opencv":
        return Line(
            "vision (OpenCV faces + people)",
            "host",
            VISION_OPENCV_MIB * MiB,
            "measured",
            "Haar + HOG on 720p frames",
        )
    files = [getattr(vision, "vlm_model", None), getattr(vision, "vlm_mmproj", None)]
    size = sum(_local_size(str(f)) or 0 for f in files if f)
    return Line(
        "vision (VLM describer)",
        "host",
        size + 512 * MiB,
        "estimate",
        f"model + projector files ({size / MiB:.0f} MiB) + 512 MiB context and compute",
    )


def other_components(cfg: Any) -> list[Line]:
    """Rows for the Python runtime, ASR, TTS and (when a camera is configured) vision.

    Args:
        cfg: The whole :class:`~agent.config.Config`.

    Returns:
        Plan rows; model files are looked up locally only (nothing is downloaded).

    """
    lines = [
        Line("Python runtime and libraries", "host", RUNTIME_MIB * MiB, "measured", "RSS after imports"),
        _asr(cfg.asr),
        _tts(cfg.tts),
    ]
    vis = _vision(getattr(cfg, "camera", None), getattr(cfg, "vision", None))
    if vis is not None:
        lines.append(vis)
    return lines
