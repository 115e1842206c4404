"""Vision's memory: the OpenCV layer, and the vision-language model of ``[vision] describer = "vlm"``.

One plan per ``[vision.vlm] engine`` (``agent/config/vlm.py``):

* ``chat`` — the chat model's own vision: llama.cpp loads the projector (``mmproj``) next to
  the chat model, in the same process. Rows: the vision encoder's weights, on the GPU with
  ``mmproj_offload`` else in host memory (one DRAM on a Jetson either way); the encoder's
  compute buffer (reserved at load for a warmup image); and the image in the chat model's
  context. The image's tokens take KV cells the cache already holds (llama.cpp allocates
  ``n_ctx`` cells up front), so that row counts only the embeddings buffer and says how much
  of the context and of the KV cache one frame takes; the description is kept as text and
  images are not kept in history, so one frame's tokens are in the context during a describe
  round and none after.
* ``llama-server`` — a separate VLM in its own llama-server process: a whole second model
  (weights, KV cache for ``[vision.vlm] n_ctx``, compute and logits buffers, sized like the chat
  model by :func:`~agent.memplan.llm.llm_memory`), its projector and encoder buffers, the
  process itself and, on a GPU, its own CUDA context; flash attention on, as
  :func:`agent.config.vlm.vlm_server_llm` starts it. Without the files here: Cosmos Reason 2
  2B's published shape (:mod:`agent.memplan.vlm_shapes`).
* ``openai`` — a remote model: nothing local beyond the OpenCV layer.

Either local engine loads what ``agent/vision/build.py`` hands llama.cpp: a vision-only copy of
the projector (:func:`agent.vision.projector.vision_only`). A file that also carries an audio
encoder (Gemma 4 E4B's published mmproj) is planned without it
(:func:`~agent.memplan.projector.vision_only_shape`): no audio weights and no audio compute
buffer, and the vision encoder's row says how much that leaves out. The file's own shape stays in
:attr:`VisionPlan.projector_file`.

The frame size is the camera's (``[camera] width/height``, else ``width=``/``height=`` in a
GStreamer pipeline, else 1280x720 assumed), shrunk so its longer side is ``[vision.vlm]
image_size`` (0: the projector's native input), as ``agent/vision/describer.py`` sends it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agent.memplan.components import VISION_OPENCV_MIB, Line, local_model, local_shape
from agent.memplan.llm import F32, LLMMemory, LLMSettings, MiB, llm_memory
from agent.memplan.projector import (
    ImageTokens,
    ProjectorError,
    ProjectorShape,
    encoder_compute,
    image_tokens,
    read_projector,
    shape_from_metadata,
    vision_only_shape,
)
from agent.memplan.shape import ModelShape
from agent.memplan.vlm_shapes import (
    COSMOS_REASON2_2B,
    GEMMA4_E4B_MMPROJ,
    PUBLISHED_PROJECTORS,
    QWEN3VL_2B_MMPROJ,
    gemma4_mmproj_metadata,
    gemma4_mmproj_tensors,
    qwen3vl_2b_text_shape,
)

if TYPE_CHECKING:
    from agent.config import Config
    from agent.memplan.devices import DeviceProfile

__all__ = [
    "AUDIO_ENCODER_COMPUTE_MIB",
    "LLAMA_SERVER_PROCESS_MIB",
    "VisionPlan",
    "frame_size",
    "kv_bytes_per_token",
    "plan_vision",
]

LLAMA_SERVER_PROCESS_MIB = 18
"""A llama-server process beside its buffers, MiB: measured here (11434, x86-64, SmolLM2 at 512
tokens on the CPU: VmRSS 135.8 MiB, of which 118.7 MiB are the buffers it logs)."""
AUDIO_ENCODER_COMPUTE_MIB = 101.2
"""Gemma 4's audio encoder (``gemma4a``, 1024 wide) compute buffer, MiB: reserved for its warmup
of 3000 mel frames; measured here with the E4B-shaped projector on llama.cpp's CPU backend
(101.19 MiB, with or without flash attention; ``tests/test_memory_plan_vision.py``). Not planned
(the agent loads a vision-only copy); part of what leaving the audio encoder out saves."""
DEFAULT_FRAME = (1280, 720)
"""Frame size assumed when the camera's is not configured, px."""
_PIPELINE_SIZE = re.compile(r"width=(?:\(int\))?(\d+)\s*,\s*height=(?:\(int\))?(\d+)")


@dataclass(frozen=True)
class VisionPlan:
    """Vision's part of a memory plan.

    Attributes:
        describer: ``opencv`` or ``vlm``.
        engine: ``[vision.vlm] engine`` (``""`` with the OpenCV describer).
        projector: What llama.cpp loads: the vision-only copy of the projector file (None:
            OpenCV only, or a remote model).
        frame: One frame as the model receives it (None without a local VLM).
        kv_per_token: KV-cache bytes one token takes in the model that reads the image.
        n_ctx: That model's context, tokens.
        vlm: The separate VLM's shape (``llama-server`` only).
        vlm_memory: Its llama.cpp buffers (``llama-server`` only).
        flash_attn: Flash attention in the model and encoder that read the image.
        lines: Rows added to the plan (bytes counted against the budget).
        projector_file: The projector file as it is (or as published), any audio encoder
            included; ``projector`` is this without it.
    """

    describer: str
    engine: str
    projector: ProjectorShape | None = None
    frame: ImageTokens | None = None
    kv_per_token: int = 0
    n_ctx: int = 0
    vlm: ModelShape | None = None
    vlm_memory: LLMMemory | None = None
    flash_attn: bool = False
    lines: tuple[Line, ...] = field(default=())
    projector_file: ProjectorShape | None = None

    @property
    def total(self) -> int:
        """Bytes the rows count."""
        return sum(line.bytes for line in self.lines)

    @property
    def audio_left_out(self) -> int:
        """Audio-encoder weight bytes in the projector file that the vision-only copy leaves out."""
        if self.projector_file is None or self.projector is None:
            return 0
        return self.projector_file.weights - self.projector.weights

    @property
    def image_kv_bytes(self) -> int:
        """KV-cache bytes one frame's tokens (markers included) occupy; inside the planned cache."""
        return self.frame.total * self.kv_per_token if self.frame is not None else 0


def kv_bytes_per_token(m: LLMMemory) -> int:
    """KV bytes one token takes: a cell in every cache (base and sliding-window), all owning layers."""
    return sum(c.bytes // c.cells for c in m.kv if c.cells)


def frame_size(camera: object, max_side: int) -> tuple[int, int]:
    """The frame the describer sends, px: the camera's size shrunk so its longer side is ``max_side``.

    Args:
        camera: ``[camera]`` (``width``, ``height``, ``source``).
        max_side: Longest side sent, px (a smaller frame is not enlarged).

    Returns:
        ``(width, height)``.
    """
    w, h = int(getattr(camera, "width", 0) or 0), int(getattr(camera, "height", 0) or 0)
    if not (w and h):
        m = _PIPELINE_SIZE.search(str(getattr(camera, "source", "")))
        w, h = (int(m.group(1)), int(m.group(2))) if m else DEFAULT_FRAME
    scale = min(1.0, max_side / max(w, h)) if max_side > 0 else 1.0
    return max(1, round(w * scale)), max(1, round(h * scale))


def _stand_in(projection_dim: int) -> ProjectorShape:
    """Gemma 4's vision encoder (no audio) projecting to ``projection_dim``: for a projector we cannot see."""
    return shape_from_metadata(
        gemma4_mmproj_metadata(projection_dim, audio=False),
        [(t.name, t.nbytes) for t in gemma4_mmproj_tensors(projection_dim, audio=False)],
        "no projector file on this machine and none published for this model: Gemma 4's vision encoder "
        "as a stand-in",
        estimated=True,
    )


def _projector(ref: str, fallback: ProjectorShape) -> tuple[ProjectorShape, str]:
    """The projector file ``ref`` names when it is here and readable, else ``fallback``; with a note.

    The file's shape as it is (any audio encoder included); what is loaded is its
    :func:`~agent.memplan.projector.vision_only_shape`.
    """
    if ref in PUBLISHED_PROJECTORS:
        return PUBLISHED_PROJECTORS[ref], ""
    path = local_model(ref) if ref else None
    if path is None or not path.is_file():
        why = f"{ref} not on this machine" if ref else "[vision.vlm] mmproj not set"
        return fallback, why
    try:
        return read_projector(path), ""
    except ProjectorError as e:
        return fallback, f"unreadable ({e})"


def _left_out(file: ProjectorShape) -> str:
    """The vision row's words on the file's audio encoder, which the vision-only copy leaves out."""
    if not file.audio_bytes:
        return ""
    weights = file.audio_bytes / MiB
    if (file.audio_projector, file.audio_n_embd) == ("gemma4a", 1024):  # Gemma 4's: its buffer is measured
        saved = f"{weights + AUDIO_ENCODER_COMPUTE_MIB:,.0f} MiB less ({weights:,.0f} MiB of weights + its "
        saved += f"{AUDIO_ENCODER_COMPUTE_MIB:.0f} MiB compute buffer)"
    else:
        saved = f"{weights:,.0f} MiB of weights and its compute buffer less"
    return (
        f"; the file's {file.audio_projector} audio encoder is left out: the agent loads a vision-only "
        f"copy, {saved}"
    )


def _projector_lines(
    who: str,
    p: ProjectorShape,
    file: ProjectorShape,
    frame: ImageTokens,
    where: str,
    flash_attn: bool,
    note: str,
) -> list[Line]:
    """The projector's rows: the vision encoder (``p``, the vision-only copy of ``file``) and its buffer."""
    basis = "estimate" if p.estimated else "GGUF"
    src = p.source + (f" ({note})" if note else "")
    lines = [
        Line(
            f"{who} projector: vision encoder ({p.projector})",
            where,
            p.vision_bytes,
            basis,
            f"{p.n_layer} blocks x {p.n_embd} wide; {src}{_left_out(file)}",
        )
    ]
    warm = p.warmup_size
    lines.append(
        Line(
            f"{who} vision encoder compute buffer",
            where,
            encoder_compute(p, frame, flash_attn),
            "llama.cpp",
            f"reserved for a {warm}x{warm} warmup image ({(warm // p.patch_size) ** 2} patches), "
            f"flash attention {'on' if flash_attn else 'off'}; "
            f"a frame is {frame.encoded[0]}x{frame.encoded[1]}",
        )
    )
    return lines


def _image_line(who: str, frame: ImageTokens, kv_per_token: int, n_embd: int, n_ctx: int) -> Line:
    share = frame.total * kv_per_token
    return Line(
        f"{who}: one frame in its context",
        "host",
        frame.tokens * n_embd * F32,
        "llama.cpp",
        f"{frame.width}x{frame.height} px -> {frame.tokens} image tokens + {frame.markers} markers = "
        f"{frame.total} of {n_ctx} context cells, {share / MiB:.1f} MiB of the KV cache above "
        f"({kv_per_token / 1024:.1f} KiB a token; not added); counted: the embeddings, "
        f"{frame.tokens} x {n_embd} f32",
    )


def _max_side(vlm: object, p: ProjectorShape) -> int:
    return int(getattr(vlm, "image_size", 0) or 0) or p.native_size


def _chat_vision(
    cfg: Config, device: DeviceProfile, shape: ModelShape, s: LLMSettings, m: LLMMemory
) -> VisionPlan:
    vlm = cfg.vision.vlm
    fallback = (
        GEMMA4_E4B_MMPROJ if (shape.arch, shape.n_embd) == ("gemma4", 2560) else _stand_in(shape.n_embd)
    )
    file, note = _projector(vlm.mmproj, fallback)
    p = vision_only_shape(file)
    frame = image_tokens(p, *frame_size(cfg.camera, _max_side(vlm, p)))
    # embedded (engines/embedded/model.py): use_gpu = n_gpu_layers != 0 and mmproj_offload
    on_gpu = vlm.mmproj_offload and device.has_gpu and (cfg.llm.engine != "embedded" or s.n_gpu_layers != 0)
    lines = _projector_lines("chat model's", p, file, frame, "GPU" if on_gpu else "host", s.flash_attn, note)
    per_token = kv_bytes_per_token(m)
    lines.append(_image_line("chat model", frame, per_token, shape.n_embd, s.kv_size))
    return VisionPlan(
        "vlm",
        "chat",
        p,
        frame,
        per_token,
        s.kv_size,
        flash_attn=s.flash_attn,
        lines=tuple(lines),
        projector_file=file,
    )


def server_flash_attn(extra_args: list[str], default: bool) -> bool:
    """Flash attention of a llama-server whose ``extra_args`` may override ``-fa`` (the last one wins).

    ``on`` and ``auto`` count as on: ``auto`` enables it wherever the backend supports it (the
    CPU and CUDA do), in the language model and in the projector's encoder alike.
    """
    value = None
    for i, arg in enumerate(extra_args[:-1]):
        if arg in ("-fa", "--flash-attn"):
            value = extra_args[i + 1]
    return default if value is None else value in ("on", "auto", "1", "true")


def vlm_settings(cfg: Config) -> LLMSettings:
    """The separate VLM's llama.cpp settings, as ``agent/vision/build.py`` starts its llama-server.

    Both take them from :func:`agent.config.vlm.vlm_server_llm` (flash attention on, which
    llama-server passes on to the projector's encoder, unless ``[vision.vlm.server] extra_args``
    says otherwise). One output per slot. Without ``[vision.vlm] model`` (a published shape is
    planned) a stand-in name is passed: the settings do not depend on it.
    """
    from agent.config.vlm import vlm_server_llm

    vlm = cfg.vision.vlm
    d = vlm_server_llm(vlm, cfg.llm, vlm.model or "published-vlm.gguf")
    return LLMSettings(
        n_ctx=vlm.n_ctx,
        n_batch=d.n_batch,
        n_gpu_layers=vlm.n_gpu_layers,
        cache_type_k=d.cache_type_k,
        cache_type_v=d.cache_type_v,
        flash_attn=server_flash_attn(list(vlm.server.extra_args), d.flash_attn),
        swa_full=d.swa_full,
        n_outputs=vlm.server.parallel,
    )


def _server_vision(cfg: Config, device: DeviceProfile) -> VisionPlan:
    vlm = cfg.vision.vlm
    s = vlm_settings(cfg)
    path, shape = local_shape(vlm.model) if vlm.model else (None, None)
    if shape is None:
        why = f"{vlm.model} not on this machine" if vlm.model else "[vision.vlm] model not set"
        shape = qwen3vl_2b_text_shape(f"published shape of {COSMOS_REASON2_2B} ({why})")
    fallback = (
        QWEN3VL_2B_MMPROJ if shape.n_embd == QWEN3VL_2B_MMPROJ.projection_dim else _stand_in(shape.n_embd)
    )
    file, note = _projector(vlm.mmproj, fallback)
    p = vision_only_shape(file)
    m = llm_memory(shape, s, has_gpu=device.has_gpu, repack_types=device.repack_types)
    who = "VLM"
    basis = "estimate" if shape.estimated else "GGUF"
    gpu = device.has_gpu and m.gpu_layers > 0
    lines = [
        Line(
            f"{who} weights ({m.gpu_layers}/{shape.n_layer} layers on the GPU)" if gpu else f"{who} weights",
            "GPU" if gpu else "host",
            m.weights,
            basis,
            shape.source,
        ),
        Line(
            f"{who} KV cache",
            "GPU" if m.kv_on_gpu else "host",
            m.kv_bytes,
            "llama.cpp",
            f"{s.kv_size} cells ([vision.vlm] n_ctx) x {shape.n_layer_kv} layers, "
            f"K {s.cache_type_k}, V {s.cache_type_v}",
        ),
        Line(
            f"{who} compute and logits buffers",
            "GPU" if m.compute_gpu else "host",
            m.compute + m.output,
            "llama.cpp",
            f"ubatch {s.ubatch} tokens, {s.outputs} outputs; logits {shape.n_vocab} x f32",
        ),
    ]
    where = "GPU" if vlm.mmproj_offload and device.has_gpu else "host"
    frame = image_tokens(p, *frame_size(cfg.camera, _max_side(vlm, p)))
    lines += _projector_lines(who, p, file, frame, where, s.flash_attn, note)
    per_token = kv_bytes_per_token(m)
    lines.append(_image_line(who, frame, per_token, shape.n_embd, s.kv_size))
    lines.append(
        Line(
            f"{who} llama-server process",
            "host",
            LLAMA_SERVER_PROCESS_MIB * MiB,
            "measured",
            "binary, libraries and heap beside the buffers (llama-server 11434, measured here)",
        )
    )
    if gpu or (where == "GPU"):
        lines.append(
            Line(
                f"{who} process's GPU runtime (its own CUDA context, cuBLAS)",
                "GPU",
                device.gpu_runtime,
                "estimate",
                "a second process opens a CUDA context of its own",
            )
        )
    return VisionPlan(
        "vlm", "llama-server", p, frame, per_token, s.kv_size, shape, m, s.flash_attn, tuple(lines), file
    )


def plan_vision(
    cfg: Config, device: DeviceProfile, shape: ModelShape, s: LLMSettings, m: LLMMemory
) -> VisionPlan | None:
    """Vision's rows for a config: the OpenCV layer, plus the VLM of ``describer = "vlm"``.

    Args:
        cfg: The whole config (``[camera]``, ``[vision]``, ``[vision.vlm]``, ``[llm]``).
        device: The device profile (GPU backend, CPU repack types, CUDA runtime size).
        shape: The chat model's shape (``engine = "chat"`` plans its projector and KV cells).
        s: The chat model's settings (``n_ctx`` resolved).
        m: The chat model's llama.cpp buffers.

    Returns:
        The :class:`VisionPlan`, or None without a camera or with ``[vision] enabled = false``.
    """
    vision = getattr(cfg, "vision", None)
    if not getattr(cfg.camera, "source", "") or not getattr(vision, "enabled", True):
        return None
    opencv = Line(
        "vision (OpenCV faces + people)",
        "host",
        VISION_OPENCV_MIB * MiB,
        "measured",
        "Haar + HOG on 720p frames",
    )
    if getattr(vision, "describer", "opencv") != "vlm":
        return VisionPlan("opencv", "", lines=(opencv,))
    engine = vision.vlm.engine
    if engine == "openai" or (engine == "chat" and getattr(cfg.llm, "engine", "embedded") == "openai"):
        remote = Line(
            "vision: remote VLM (openai engine)",
            "host",
            0,
            "estimate",
            'the chat model\'s own vision, served remotely ([llm] engine = "openai"): no local weights'
            if engine == "chat"
            else f"{vision.vlm.model or 'model'} at {vision.vlm.url}: no local weights",
        )
        return VisionPlan("vlm", engine, lines=(opencv, remote))
    plan = _server_vision(cfg, device) if engine == "llama-server" else _chat_vision(cfg, device, shape, s, m)
    return replace(plan, lines=(opencv, *plan.lines))
