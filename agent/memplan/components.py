"""Memory beside the chat model: the Python runtime, ASR, TTS, end-of-turn models, OpenCV's figure.

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
* Smart Turn v3.2 CPU ONNX (8.3 MiB file) on onnxruntime 1.32, loaded and run on three 8 s
  windows: 61 MiB, i.e. 53 MiB beyond the file (``SMART_TURN_SESSION_MIB``).

With ``[turn] end_of_turn = "semantic"`` two more models load (agent/pipeline/core.py
``build_end_of_turn``): the text end-of-turn scorer, a GGUF that
``agent.listening.end_of_turn.TextEndOfTurn`` loads on the CPU with ``n_ctx = 512`` (planned from
its header with llama.cpp's sizing, like the chat model), and Smart Turn, an ONNX model on
onnxruntime's CPU provider (its file size plus a session overhead, an estimate).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.memplan.llm import LLMMemory, LLMSettings, MiB, llm_memory
from agent.memplan.shape import ModelShape, ShapeError, read_gguf_shape

if TYPE_CHECKING:
    from agent.config import ASRConfig, Config, TTSConfig

__all__ = ["Line", "end_of_turn_lines", "local_model", "model_shape_at", "other_components"]


RUNTIME_MIB = 111
ASR_MEASURED_MIB = {"packaged:whisper-tiny.en": 178}
TTS_MEASURED_MIB = {"packaged:piper-joe-medium": 154}
VISION_OPENCV_MIB = 68
# agent/listening/end_of_turn.py TextEndOfTurn: LLMConfig(n_ctx=512, n_gpu_layers=0), other keys default.
TEXT_SCORER_N_CTX = 512
TEXT_SCORER_ESTIMATE_MIB = 160  # no GGUF here: SmolLM2-135M's plan at n_ctx 512 (~150 MiB), rounded up
# Smart Turn v3.2 CPU ONNX: 8.7 MB in pipecat-ai 1.14.0 (``docs/facts.md``), used when the file
# is absent; the onnxruntime session, its arena and the Whisper feature extractor add to the
# file's bytes (SMART_TURN_SESSION_MIB, measured here once, see above).
SMART_TURN_FILE_BYTES = 8_700_000
SMART_TURN_SESSION_MIB = 53


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


def local_model(ref: str) -> Path | None:
    """The file (or folder) a model reference names on this machine, or None; never downloads.

    Args:
        ref: ``packaged:NAME``, ``hf:OWNER/REPO/FILE`` (found only in the Hugging Face cache)
            or a path.

    Returns:
        An existing path, or None.
    """
    from agent.models import ModelNotFoundError, resolve_model

    if ref.startswith("hf:"):
        parts = ref[3:].split("/")
        if len(parts) < 3:
            return None
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache("/".join(parts[:2]), "/".join(parts[2:]))
        return Path(hit) if isinstance(hit, str) else None
    try:
        return resolve_model(ref)
    except ModelNotFoundError:
        return None


@functools.lru_cache(maxsize=16)
def _read_cached(path: str, mtime: float, size: int) -> ModelShape:
    return read_gguf_shape(path)


def model_shape_at(path: Path) -> ModelShape:
    """Read a GGUF's shape (cached per path, modification time and size).

    Raises:
        ShapeError: the file cannot be read as a GGUF model.
    """
    st = path.stat()
    return _read_cached(str(path), st.st_mtime, st.st_size)


def local_shape(ref: str) -> tuple[Path | None, ModelShape | None]:
    """A model reference's GGUF on this machine and its shape; ``None`` for what is missing or unreadable."""
    path = local_model(ref)
    if path is None or not path.is_file():
        return path, None
    try:
        return path, model_shape_at(path)
    except ShapeError:
        return path, None


def _local_size(ref: str) -> int | None:
    """Bytes of a model reference on this machine (file or folder), or None; never downloads."""
    path = local_model(ref)
    if path is None or not path.exists():
        return None
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _asr(cfg: ASRConfig) -> Line:
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


def _tts(cfg: TTSConfig) -> Line:
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


def _text_scorer(ref: str, repack_types: frozenset[str], main_model: Path | None, main_mapped: int) -> Line:
    """The text end-of-turn scorer: its GGUF planned on the CPU at ``TEXT_SCORER_N_CTX``."""
    from agent.config import LLMConfig

    name = f"end-of-turn text scorer {ref} (n_ctx {TEXT_SCORER_N_CTX}, CPU)"
    path, shape = local_shape(ref)
    if shape is None:
        return Line(
            name,
            "host",
            TEXT_SCORER_ESTIMATE_MIB * MiB,
            "estimate",
            "GGUF not on this machine; SmolLM2-135M's plan, rounded up",
        )
    c = LLMConfig(model=str(path), n_ctx=TEXT_SCORER_N_CTX, n_gpu_layers=0)  # as TextEndOfTurn loads it
    s = LLMSettings(
        n_ctx=TEXT_SCORER_N_CTX,
        n_batch=c.n_batch,
        n_gpu_layers=0,
        cache_type_k=c.cache_type_k,
        cache_type_v=c.cache_type_v,
        flash_attn=c.flash_attn,
        swa_full=c.swa_full,
        lazy_per_layer_embd=c.lazy_per_layer_embd,
    )
    m: LLMMemory = llm_memory(shape, s, repack_types=repack_types)
    shared = 0
    if main_model is not None and path.resolve() == main_model.resolve():
        shared = min(m.weights_host, main_mapped)  # the same file mapped twice: its pages are shared
    detail = (
        f"weights {m.weights / MiB:.0f} + KV {m.kv_bytes / MiB:.0f} + compute {m.compute / MiB:.0f} "
        f"+ logits {m.output / MiB:.0f} MiB"
    )
    if shared:
        detail += f"; {shared / MiB:.0f} MiB of mapped weights shared with the chat model's file"
    return Line(name, "host", m.total - shared, "GGUF", detail)


def _smart_turn(ref: str) -> Line:
    """Smart Turn: the ONNX file's bytes + the onnxruntime session (an estimate)."""
    path: Path | None
    if ref:
        path = Path(ref).expanduser()
    else:
        from agent.listening.smart_turn import find_smart_turn_model

        path = find_smart_turn_model()
    size = path.stat().st_size if path is not None and path.is_file() else None
    known = size is not None
    size = size if size is not None else SMART_TURN_FILE_BYTES
    return Line(
        "end-of-turn Smart Turn (ONNX, CPU)",
        "host",
        size + SMART_TURN_SESSION_MIB * MiB,
        "estimate",
        f"{'ONNX file' if known else 'v3.2 file as published, not on this machine:'} {size / MiB:.1f} MiB "
        f"+ {SMART_TURN_SESSION_MIB} MiB onnxruntime session and features (measured once here)",
    )


def end_of_turn_lines(
    cfg: Config,
    repack_types: frozenset[str] = frozenset(),
    main_model: Path | None = None,
    main_mapped: int = 0,
) -> list[Line]:
    """Rows for the semantic end-of-turn models (none with ``[turn] end_of_turn = "silence"``).

    Args:
        cfg: The whole :class:`~agent.config.Config`.
        repack_types: ggml types the CPU repacks (the scorer runs on the CPU), see
            :class:`~agent.memplan.devices.DeviceProfile`.
        main_model: The chat model's GGUF on this machine, if any.
        main_mapped: Bytes of the chat model's weights mapped in host memory; when the scorer
            is the same file, those pages are shared and not counted twice.

    Returns:
        The text scorer's row (when ``[turn] text_model`` is set) and Smart Turn's row; bytes.
    """
    turn = getattr(cfg, "turn", None)
    if turn is None or turn.end_of_turn != "semantic":
        return []
    lines = []
    if turn.text_model:
        lines.append(_text_scorer(turn.text_model, repack_types, main_model, main_mapped))
    lines.append(_smart_turn(turn.smart_turn_model))
    return lines


def other_components(
    cfg: Config,
    repack_types: frozenset[str] = frozenset(),
    main_model: Path | None = None,
    main_mapped: int = 0,
) -> list[Line]:
    """Rows for the Python runtime, ASR, TTS and end-of-turn models (vision: :mod:`.vision_plan`).

    Args:
        cfg: The whole :class:`~agent.config.Config`.
        repack_types: ggml types the CPU repacks (for the end-of-turn text scorer).
        main_model: The chat model's GGUF on this machine, if any (see :func:`end_of_turn_lines`).
        main_mapped: Bytes of the chat model's weights mapped in host memory.

    Returns:
        Plan rows; model files are looked up locally only (nothing is downloaded).

    """
    return [
        Line("Python runtime and libraries", "host", RUNTIME_MIB * MiB, "measured", "RSS after imports"),
        _asr(cfg.asr),
        _tts(cfg.tts),
        *end_of_turn_lines(cfg, repack_types, main_model, main_mapped),
    ]
