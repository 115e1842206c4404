"""Multimodal projectors (``mmproj`` GGUFs): what llama.cpp loads, image tokens, encoder buffers.

Read in llama.cpp's ``tools/mtmd`` of llama-cpp-python 0.3.36 (``clip.cpp``, ``clip-impl.h``,
``mtmd.cpp``, ``mtmd-image.cpp``); the tests compare every figure with what libmtmd itself logs
and returns (``tests/test_memory_plan_vision.py``).

**What is loaded.** ``clip_init`` opens one context per modality the file declares
(``clip.has_vision_encoder``, ``clip.has_audio_encoder``) and each loads its own tensors into a
weight buffer on the projector's backend (the GPU with ``use_gpu``/``--mmproj-offload``, else
the CPU): audio tensors are named ``a.*`` and ``mm.a.*``, the vision tensors are the rest. Only
Gemma 3n's audio is skipped. So Gemma 4 E4B's own projector, which carries its audio encoder
too, would cost both encoders even when only images are sent; the agent therefore always loads a
vision-only copy (:func:`agent.vision.projector.vision_only`: no ``a.*``/``mm.a.*`` tensors,
``clip.has_audio_encoder`` false), and the planner plans that copy (:func:`vision_only_shape`).
``model size`` in llama.cpp's log is every tensor of the file it loads.

**Image tokens.** A frame becomes one image chunk (or, for tiling projectors, one per tile plus
an overview) between text markers (``<|image>`` ... ``<image|>`` for Gemma 4):

* ``gemma4v`` (and the other dynamic-size projectors: Qwen2/2.5/3-VL, Pixtral...): the frame is
  resized keeping its aspect ratio to multiples of ``patch * merge`` px (48 for Gemma 4) within
  ``[min, max]`` tokens (70..1120 for Gemma 4, 8..4096 for Qwen-VL), rounding each side to the
  nearest multiple (``img_tool::calc_size_preserved_ratio``); tokens = (w/48) x (h/48). A
  512x288 frame is scaled up to 576x336: 84 tokens.
* ``idefics3`` (SmolVLM): resized so its longer side is ``preproc_image_size``, cut into
  ``image_size`` tiles, plus one overview tile; each tile is ``(image_size/patch)^2 /
  scale_factor^2`` tokens.
* fixed-size projectors (Gemma 3, LLaVA): one ``image_size`` pass.

**Encoder compute buffer.** Reserved once at load (``warmup``) for a dummy image of the
projector's warmup size (Gemma 4: 768x768, 2304 patches; Qwen-VL: 46x46 tokens; otherwise
``image_size``), and grown at encode time if a frame needs more. The peak of one pass over ``P``
patches, fitted to llama.cpp's reports (``CPU compute buffer size``) for gemma4v and idefics3
encoders 64 to 1152 wide, with and without flash attention (``docs/facts.md``, "Vision memory"):
with ``row = P * n_embd`` f32 and ``image = 3 * P * patch^2`` f32 (the raw input),

* the feed-forward phase: ``k * P * n_ff`` f32 (``k`` = 3 for gated FFNs: gate, up and their
  product; 1 otherwise) + the larger of ``r * row`` (``r`` = 3 gated, 2.5 otherwise) and ``image``;
* without flash attention, the attention phase: the scores ``P^2 * n_head`` f32 + the larger
  of ``r' * row`` (``r'`` = 5 gated, 4 otherwise) and ``image``;
* with Qwen-VL's pair of patch convolutions, the input phase: ``3 * image + 4.5 * row``;

each phase plus one ``row`` per DeepStack merger (Qwen3-VL keeps those features to the end),
and the buffer is the largest phase. Flash attention follows the chat model's ``flash_attn``
(llama-cpp-python's handler passes it on; llama-server's ``-fa``).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent.memplan.llm import F32
from agent.memplan.shape import ShapeError, read_gguf_header, tensor_nbytes

__all__ = [
    "AUDIO_PROJECTORS",
    "VISION_PROJECTORS",
    "ImageTokens",
    "ProjectorError",
    "ProjectorShape",
    "encoder_compute",
    "image_tokens",
    "read_projector",
    "vision_only_shape",
]


# tools/mtmd/clip-impl.h PROJECTOR_TYPE_NAMES of llama-cpp-python 0.3.36, split by modality.
VISION_PROJECTORS = frozenset(
    {
        "mlp", "ldp", "ldpv2", "resampler", "adapter", "qwen2vl_merger", "qwen2.5vl_merger",
        "qwen3vl_merger", "ling3vl", "step3vl", "gemma3", "gemma3nv", "gemma4v", "gemma4uv", "phi4",
        "idefics3", "pixtral", "internvl", "llama4", "qwen2.5o", "lfm2", "kimivl", "paddleocr",
        "lightonocr", "cogvlm", "janus_pro", "dots_ocr", "dots3note_v", "deepseekocr",
        "deepseekocr2", "deepseek4v", "glm4v", "glm5v", "youtuvl", "yasa2", "kimik25",
        "nemotron_v2_vl", "exaone4_5", "hunyuanvl", "minicpmv4_6", "mimovl", "minimax_m3",
        "granite4_vision", "muse-glimmer",
    }
)  # fmt: skip
"""Vision projector types llama.cpp (llama-cpp-python 0.3.36) can load."""
AUDIO_PROJECTORS = frozenset(
    {
        "gemma3na", "gemma4a", "gemma4ua", "ultravox", "qwen2a", "qwen3a", "glma", "voxtral",
        "meralion", "musicflamingo", "lfm2a", "granite_speech", "mimo_audio", "parakeet",
        "dots3note_a", "qwen3tts_spkenc", "qwen3tts_gen", "pockettts_spkenc", "pockettts_gen",
    }
)  # fmt: skip
"""Audio projector types (an audio-only file cannot describe frames)."""

_DYN_SIZE = {  # tools/mtmd/clip.cpp load_hparams: (default merge, min tokens, max tokens, warmup tokens)
    "gemma4v": (3, 70, 1120, 256),
    "qwen2vl_merger": (2, 8, 4096, 46 * 46),
    "qwen2.5vl_merger": (2, 8, 4096, 46 * 46),
    "qwen3vl_merger": (2, 8, 4096, 46 * 46),
    "pixtral": (1, 8, 1024, 256),
}
_GATED_FFN = frozenset({"gemma4v", "gemma3", "gemma3nv", "pixtral", "llama4"})  # gate * up, then down
_FIXED_MERGE = {"gemma3": 4}  # clip.cpp: n_merge default when the file has no scale factor


class ProjectorError(ValueError):
    """A projector file that llama.cpp cannot use for images; the message says why, in words."""


@dataclass(frozen=True)
class ProjectorShape:
    """What the planner needs of a projector (sizes in elements, px and bytes).

    Attributes:
        source: The file, or where a published shape comes from.
        projector: Vision projector type (``gemma4v``, ``idefics3``...).
        audio_projector: Audio projector type, ``""`` without an audio encoder.
        n_embd: Vision encoder width.
        n_ff: Vision feed-forward width.
        n_head: Vision attention heads.
        n_layer: Vision encoder blocks.
        patch_size: Patch side, px.
        image_size: ``clip.vision.image_size``, px (a tile for tiling projectors).
        projection_dim: Width of the embeddings it produces (must equal the text model's n_embd).
        n_merge: Patches merged per side into one token (pooling, pixel shuffle, spatial merge).
        preproc_image_size: ``clip.vision.preproc_image_size`` (tiling projectors' longest edge), 0 if unset.
        min_tokens: Fewest tokens a frame becomes (dynamic-size projectors), 0 if none.
        max_tokens: Most tokens a frame becomes (dynamic-size projectors), 0 if none.
        vision_bytes: Weight bytes the vision context loads.
        audio_bytes: Weight bytes the audio context loads (0 without audio, or when llama.cpp skips it).
        file_bytes: Every tensor of the file (llama.cpp's ``model size``).
        n_deepstack: DeepStack mergers (Qwen3-VL: features of middle layers kept to the end).
        patch_convs: Patch-embedding convolutions (2 for Qwen-VL's temporal pair, else 1).
        estimated: True for a published shape, not read from a file.
        audio_n_embd: Audio encoder width (``clip.audio.embedding_length``), 0 without one.

    """

    source: str
    projector: str
    audio_projector: str
    n_embd: int
    n_ff: int
    n_head: int
    n_layer: int
    patch_size: int
    image_size: int
    projection_dim: int
    n_merge: int
    preproc_image_size: int
    min_tokens: int
    max_tokens: int
    vision_bytes: int
    audio_bytes: int
    file_bytes: int
    n_deepstack: int = 0
    patch_convs: int = 1
    estimated: bool = False
    audio_n_embd: int = 0

    @property
    def weights(self) -> int:
        """Bytes llama.cpp loads for this file: the vision encoder plus any audio encoder."""
        return self.vision_bytes + self.audio_bytes

    @property
    def native_size(self) -> int:
        """Longest frame side the describer sends with ``image_size = 0``, px (agent/vision/describer.py)."""
        from agent.vision.describer import frame_side

        return frame_side(self.projector, self.image_size, self.preproc_image_size)

    @property
    def warmup_size(self) -> int:
        """Side of the square dummy image the compute buffer is reserved for, px (clip.cpp warmup)."""
        if self.projector in _DYN_SIZE:
            side = math.isqrt(_DYN_SIZE[self.projector][3])
            return side * self.patch_size * self.n_merge
        return self.image_size


def is_audio_tensor(name: str) -> bool:
    """True for tensors the audio context loads: ``a.*`` and ``mm.a.*`` (clip-impl.h ``TN_A_*``)."""
    return name.startswith(("a.", "mm.a."))


def vision_only_shape(p: ProjectorShape) -> ProjectorShape:
    """What llama.cpp loads from the agent's vision-only copy of ``p``: the vision encoder alone.

    :func:`agent.vision.projector.vision_only` copies every vision tensor and key byte for byte
    and leaves out the audio encoder (tensors ``a.*``/``mm.a.*``, keys ``clip.audio.*``); so the
    copy's shape is ``p``'s with no audio encoder and ``file_bytes`` = ``vision_bytes``.

    Returns:
        ``p`` itself when llama.cpp would load no audio encoder from it, else the copy's shape
        (same ``source``: the file the copy is made from).
    """
    if not p.audio_projector and not p.audio_bytes:
        return p
    return replace(p, audio_projector="", audio_bytes=0, file_bytes=p.vision_bytes, audio_n_embd=0)


def _get(meta: dict[str, Any], key: str, default: int = 0) -> int:
    value = meta.get(key, default)
    return int(value) if isinstance(value, (int, float, bool)) else default


def shape_from_metadata(
    meta: dict[str, Any], tensors: list[tuple[str, int]], source: str, estimated: bool = False
) -> ProjectorShape:
    """Build a :class:`ProjectorShape` from clip metadata and ``(tensor name, bytes)`` pairs.

    Raises:
        ProjectorError: not a projector, no vision encoder, or a projector type llama.cpp does
            not know.
    """
    arch = str(meta.get("general.architecture", ""))
    if arch != "clip":
        what = f"a {arch!r} model" if arch else "not a llama.cpp model file"
        raise ProjectorError(
            f"{source}: not a projector ({what}; general.architecture is not 'clip'): "
            "this looks like the language model itself, not its mmproj file"
        )
    proj = str(meta.get("clip.projector_type") or meta.get("clip.vision.projector_type") or "")
    has_vision = bool(meta.get("clip.has_vision_encoder", False))
    audio = str(meta.get("clip.audio.projector_type", "")) if meta.get("clip.has_audio_encoder") else ""
    if not has_vision or proj in AUDIO_PROJECTORS:
        raise ProjectorError(f"{source}: this projector has no vision encoder (it is for audio only)")
    if proj not in VISION_PROJECTORS:
        raise ProjectorError(
            f"{source}: vision projector type {proj or '(none)'!r} is not one llama.cpp "
            "(llama-cpp-python 0.3.36) can load"
        )
    if proj == "gemma3nv":
        audio = ""  # clip_init skips Gemma 3n's audio tensors
    merge = _get(meta, "clip.vision.projector.scale_factor") or _get(meta, "clip.vision.spatial_merge_size")
    merge = merge or _DYN_SIZE.get(proj, (_FIXED_MERGE.get(proj, 1),))[0]
    lo, hi = _DYN_SIZE[proj][1:3] if proj in _DYN_SIZE else (0, 0)
    patch = _get(meta, "clip.vision.patch_size", 14) or 14
    area = (patch * merge) ** 2
    if _get(meta, "clip.vision.image_min_pixels") and _get(meta, "clip.vision.image_max_pixels"):
        lo = _get(meta, "clip.vision.image_min_pixels") // area
        hi = _get(meta, "clip.vision.image_max_pixels") // area
    vision = sum(b for n, b in tensors if not is_audio_tensor(n))
    audio_b = sum(b for n, b in tensors if is_audio_tensor(n)) if audio else 0
    return ProjectorShape(
        source=source,
        projector=proj,
        audio_projector=audio,
        n_embd=_get(meta, "clip.vision.embedding_length"),
        n_ff=_get(meta, "clip.vision.feed_forward_length"),
        n_head=_get(meta, "clip.vision.attention.head_count", 1) or 1,
        n_layer=_get(meta, "clip.vision.block_count"),
        patch_size=patch,
        image_size=_get(meta, "clip.vision.image_size"),
        projection_dim=_get(meta, "clip.vision.projection_dim"),
        n_merge=merge,
        preproc_image_size=_get(meta, "clip.vision.preproc_image_size"),
        min_tokens=lo,
        max_tokens=hi,
        vision_bytes=vision,
        audio_bytes=audio_b,
        file_bytes=sum(b for _, b in tensors),
        n_deepstack=sum(1 for n, _ in tensors if n.startswith("v.deepstack.") and n.endswith(".fc1.weight")),
        patch_convs=2 if any(n == "v.patch_embd.weight.1" for n, _ in tensors) else 1,
        estimated=estimated,
        audio_n_embd=_get(meta, "clip.audio.embedding_length") if audio else 0,
    )


def read_projector(path: str | Path) -> ProjectorShape:
    """Read a projector's shape from its GGUF header (no weights are read).

    Args:
        path: The ``mmproj`` GGUF.

    Returns:
        The :class:`ProjectorShape`.

    Raises:
        ProjectorError: the file is missing, not a GGUF, not a projector, has no vision encoder,
            or names a projector type llama.cpp does not know.

    """
    p = Path(path)
    if not p.is_file():
        raise ProjectorError(f"{p}: no such file")
    try:
        meta, raw = read_gguf_header(p)
    except (OSError, ValueError, struct.error) as e:
        raise ProjectorError(f"{p}: not a GGUF file ({e})") from None
    from gguf.constants import GGMLQuantizationType

    tensors = []
    for name, dims, type_id in raw:
        try:
            tensors.append((name, tensor_nbytes(GGMLQuantizationType(type_id).name, dims)))
        except (ValueError, ShapeError):
            raise ProjectorError(f"{p}: tensor {name} has an unknown or malformed type {type_id}") from None
    return shape_from_metadata(meta, tensors, str(p))


@dataclass(frozen=True)
class ImageTokens:
    """How one frame enters the language model (tokens, px).

    Attributes:
        width: Frame width sent, px.
        height: Frame height sent, px.
        tokens: Image embedding tokens (every image chunk; what occupies KV cells).
        markers: Text tokens around them (begin/end markers, tile separators; approximate
            for tiling projectors, whose tile labels depend on the vocabulary).
        passes: Encoder passes (tiles + overview for tiling projectors, else 1).
        patches: Patches in the largest pass (sizes the compute buffer).
        encoded: ``(width, height)`` of the largest pass after preprocessing, px.
    """

    width: int
    height: int
    tokens: int
    markers: int
    passes: int
    patches: int
    encoded: tuple[int, int]

    @property
    def total(self) -> int:
        """Context cells the image takes: image tokens + markers."""
        return self.tokens + self.markers


def _round(x: float, f: int) -> int:
    return math.floor(x / f + 0.5) * f  # std::round: halves away from zero (Python's round() goes to even)


def _dyn_size(p: ProjectorShape, w: int, h: int) -> tuple[int, int]:
    """``img_tool::calc_size_preserved_ratio`` (mtmd-image.cpp) without a longest edge."""
    f = p.patch_size * p.n_merge
    wb, hb = max(f, _round(w, f)), max(f, _round(h, f))
    lo, hi = p.min_tokens * f * f, p.max_tokens * f * f
    if hi and wb * hb > hi:
        beta = math.sqrt(h * w / hi)
        hb, wb = max(f, math.floor(h / beta / f) * f), max(f, math.floor(w / beta / f) * f)
    elif lo and wb * hb < lo:
        beta = math.sqrt(lo / (h * w))
        hb, wb = math.ceil(h * beta / f) * f, math.ceil(w * beta / f) * f
    return wb, hb


def image_tokens(p: ProjectorShape, width: int, height: int) -> ImageTokens:
    """Tokens one ``width`` x ``height`` frame becomes, as libmtmd preprocesses it for ``p``.

    Args:
        p: The projector.
        width: Frame width as sent, px.
        height: Frame height as sent, px.

    Returns:
        The :class:`ImageTokens`.

    Raises:
        ValueError: a frame side is not positive.

    """
    if width <= 0 or height <= 0:
        raise ValueError(f"frame size {width}x{height} must be positive")
    per_side = p.patch_size * p.n_merge
    if p.projector in _DYN_SIZE:
        ew, eh = _dyn_size(p, width, height)
        tokens = (ew // per_side) * (eh // per_side)
        return ImageTokens(width, height, tokens, 2, 1, (ew // p.patch_size) * (eh // p.patch_size), (ew, eh))
    tile = p.image_size or 224
    tile_patches = (tile // p.patch_size) ** 2
    tile_tokens = tile_patches // (p.n_merge * p.n_merge)
    if p.projector == "idefics3" and p.preproc_image_size:
        longest = p.preproc_image_size  # mtmd_image_preprocessor_idefics3: resized to the longest edge
        if width >= height:
            rw, rh = longest, int(longest / (width / height))
            rh += rh % 2
        else:
            rw, rh = int(longest * width / height), longest
            rw += rw % 2
        gx, gy = -(-rw // tile), -(-rh // tile)
        slices = gx * gy
        # overview: "\n\n" <fake_token_around_image> <global-img> ... <fake_token_around_image>;
        # each slice: <fake_token_around_image><row_Y_col_X> (2 with SmolVLM's vocabulary); "\n" per row
        markers = 4 + 2 * slices + (gy - 1)
        return ImageTokens(
            width, height, (slices + 1) * tile_tokens, markers, slices + 1, tile_patches, (tile, tile)
        )
    return ImageTokens(width, height, tile_tokens, 2, 1, tile_patches, (tile, tile))


def _pass_compute(p: ProjectorShape, patches: int, flash_attn: bool) -> int:
    """Peak compute bytes of one encoder pass over ``patches`` patches (module docstring)."""
    image = 3 * patches * p.patch_size * p.patch_size * F32
    row = patches * p.n_embd * F32
    gated = p.projector in _GATED_FFN
    kept = p.n_deepstack * row  # DeepStack features live from their layer to the end
    ffn_phase = (
        (3 if gated else 1) * patches * p.n_ff * F32 + max(int((3 if gated else 2.5) * row), image) + kept
    )
    # two patch convolutions (Qwen-VL): the image, two im2col copies and their outputs at once
    input_phase = int(3 * image + 4.5 * row) + kept if p.patch_convs > 1 else 0
    if flash_attn:
        return max(ffn_phase, input_phase)
    scores = patches * patches * p.n_head * F32
    return max(ffn_phase, input_phase, scores + max((5 if gated else 4) * row, image) + kept)


def encoder_compute(p: ProjectorShape, frame: ImageTokens | None, flash_attn: bool) -> int:
    """The vision encoder's compute buffer, bytes: the warmup reservation, or a larger frame's pass.

    Args:
        p: The projector.
        frame: The frame sent (None: the warmup reservation only).
        flash_attn: Flash attention in the encoder (no ``P^2`` score matrix).

    Returns:
        Bytes (f32 activations), plus the frame's output embeddings (``tokens * projection_dim``).
    """
    warm = (p.warmup_size // p.patch_size) ** 2
    patches = max(warm, frame.patches if frame is not None else 0)
    out = (frame.tokens if frame is not None else 0) * p.projection_dim * F32
    return _pass_compute(p, patches, flash_attn) + out
