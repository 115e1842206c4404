"""Published shapes of the vision models bolt-agent plans for when their files are not on the machine.

* **Gemma 4 E4B's projector** (Bolt E4B's own vision, ``[vision.vlm] engine = "chat"``): one
  ``mmproj`` with the vision encoder (``gemma4v``: 16 blocks, 768 wide, 12 heads, FFN 3072, patch
  16, a 2 x 10240 position table, projection to 2560) **and** the audio encoder (``gemma4a``: a
  12-block Conformer, 1024 wide, 8 heads, FFN 4096, two subsampling convs, projected 1024 -> 1536
  -> 2560). Sources: the real file's header as dumped in public (``gemma-4-E4B-it-mmproj.gguf``,
  ~992 MB, F16: SharpInference issue 126), the E2B projector's published metadata (same towers,
  ``clip.audio.*``/``clip.vision.*`` on ollama.com), the Gemma 4 vision tower's parameter count
  (167.4 M: patch embedder 16.3 M + encoder 151.0 M, Hugging Face model printout) and llama.cpp's
  converter (``conversion/gemma.py``: position table and audio convs F32, other matrices F16,
  vectors F32). The tensor list below adds up to 988.2 MB, within 0.4 % of the published file;
  llama.cpp loads a header-exact copy of it (``tests/test_memory_plan_vision.py``). The agent
  loads a vision-only copy of it (:data:`GEMMA4_E4B_VISION_ONLY`; the audio encoder left out).
* **Cosmos Reason 2 2B** (``engine = "llama-server"``; NVIDIA's post-train of Qwen3-VL-2B, the
  VLM jetson-ai-lab runs on an Orin Nano): the text model is Qwen3-VL-2B's (28 layers, hidden
  2048, 16 heads, 8 KV heads of 128, vocabulary 151936, tied embeddings, 256K context, as public
  reimplementations of Qwen3-VL-2B give it; FFN 6144, Qwen3-1.7B's width, where those
  reimplementations disagree) with llama.cpp's Q4_K_M recipe; its projector
  (``qwen3vl_merger``: 24 blocks, 1024 wide, 16 heads, FFN 4096, patch 16, merge 2, 2304
  positions, DeepStack layers 5, 11, 17, output 2048: sgl-jax's ``Qwen3VLVisionConfig``
  defaults) in F16, positions and vectors F32. ``docs/facts.md`` ("Vision memory") has the numbers.
"""

from __future__ import annotations

from agent.memplan.projector import ProjectorShape, shape_from_metadata
from agent.memplan.shape import ModelShape, TensorInfo, tensor_nbytes

__all__ = [
    "COSMOS_REASON2_2B",
    "GEMMA4_E4B_MMPROJ",
    "GEMMA4_E4B_VISION_ONLY",
    "PUBLISHED_PROJECTORS",
    "QWEN3VL_2B_MMPROJ",
    "QWEN3VL_2B_MMPROJ_METADATA",
    "gemma4_mmproj_metadata",
    "gemma4_mmproj_tensors",
    "qwen3vl_2b_text_shape",
    "qwen3vl_mmproj_tensors",
]


def _t(name: str, ggml_type: str, *shape: int) -> TensorInfo:
    return TensorInfo(name, ggml_type, tuple(shape), tensor_nbytes(ggml_type, shape))


def gemma4_mmproj_tensors(
    projection_dim: int = 2560, audio: bool = True, width: int = 768, n_layer: int = 16, n_ff: int = 3072,
    pos_size: int = 10240, a_width: int = 1024, a_layers: int = 12, a_ff: int = 4096, a_out: int = 1536,
) -> tuple[TensorInfo, ...]:  # fmt: skip
    """The tensors of a Gemma 4 E-series projector, as llama.cpp's converter writes them (ggml order).

    Names and which tensors are required: ``tools/mtmd/clip.cpp`` ``load_tensors`` for
    ``gemma4v`` and ``gemma4a``; types: ``conversion/gemma.py`` (F16 matrices, F32 vectors,
    position table and audio convolutions).

    Args:
        projection_dim: The text model's width (2560 for E4B).
        audio: Include the audio encoder (the published file has it).
        width: Vision width.
        n_layer: Vision blocks.
        n_ff: Vision FFN width.
        pos_size: Rows of each position table.
        a_width: Audio width.
        a_layers: Audio blocks.
        a_ff: Audio FFN width.
        a_out: Audio output projection width.

    Returns:
        The tensors, vision first.
    """
    d_head = width // 12
    out = [
        _t("v.patch_embd.weight", "F16", 16, 16, 3, width),
        _t("v.position_embd.weight", "F32", width, pos_size, 2),
    ]
    for i in range(n_layer):
        b = f"v.blk.{i}."
        out += [
            _t(b + n + ".weight", "F16", width, width) for n in ("attn_q", "attn_k", "attn_v", "attn_out")
        ]
        out += [_t(b + "attn_q_norm.weight", "F32", d_head), _t(b + "attn_k_norm.weight", "F32", d_head)]
        out += [
            _t(b + n + ".weight", "F32", width) for n in ("ln1", "ln2", "attn_post_norm", "ffn_post_norm")
        ]
        out += [_t(b + "ffn_gate.weight", "F16", width, n_ff), _t(b + "ffn_up.weight", "F16", width, n_ff)]
        out += [_t(b + "ffn_down.weight", "F16", n_ff, width)]
    out += [_t("v.std_bias", "F32", width), _t("v.std_scale", "F32", width)]
    out += [_t("mm.input_projection.weight", "F16", width, projection_dim)]
    if not audio:
        return tuple(out)
    out += [_t("a.conv1d.0.weight", "F32", 3, 3, 1, 128), _t("a.conv1d.0.norm.weight", "F32", 128)]
    out += [_t("a.conv1d.1.weight", "F32", 3, 3, 128, 32), _t("a.conv1d.1.norm.weight", "F32", 32)]
    out += [_t("a.input_projection.weight", "F16", 32 * 32, a_width)]
    for i in range(a_layers):
        b = f"a.blk.{i}."
        for n in ("ffn_norm", "ffn_post_norm", "attn_pre_norm", "attn_post_norm", "norm_conv", "conv_norm",
                  "ffn_norm_1", "ffn_post_norm_1", "ln2"):  # fmt: skip
            out.append(_t(b + n + ".weight", "F32", a_width))
        for n in ("attn_q", "attn_k", "attn_v", "attn_out", "attn_k_rel", "conv_pw2"):
            out.append(_t(b + n + ".weight", "F16", a_width, a_width))
        out += [_t(b + "per_dim_scale.weight", "F32", a_width // 8)]
        out += [
            _t(b + "conv_pw1.weight", "F16", a_width, 2 * a_width),
            _t(b + "conv_dw.weight", "F32", 5, a_width),
        ]
        for up, down in (("ffn_up", "ffn_down"), ("ffn_up_1", "ffn_down_1")):
            out += [
                _t(b + up + ".weight", "F16", a_width, a_ff),
                _t(b + down + ".weight", "F16", a_ff, a_width),
            ]
    out += [_t("a.pre_encode.out.weight", "F16", a_width, a_out)]
    out += [_t("mm.a.input_projection.weight", "F16", a_out, projection_dim)]
    return tuple(out)


def gemma4_mmproj_metadata(projection_dim: int = 2560, audio: bool = True) -> dict[str, object]:
    """The ``clip.*`` keys of a Gemma 4 E-series projector (values as llama.cpp reads them)."""
    meta: dict[str, object] = {
        "general.architecture": "clip",
        "clip.has_vision_encoder": True,
        "clip.vision.projector_type": "gemma4v",
        "clip.vision.embedding_length": 768,
        "clip.vision.feed_forward_length": 3072,
        "clip.vision.block_count": 16,
        "clip.vision.attention.head_count": 12,
        "clip.vision.projection_dim": projection_dim,
        "clip.vision.image_size": 224,
        "clip.vision.patch_size": 16,
    }
    if audio:
        meta |= {
            "clip.has_audio_encoder": True,
            "clip.audio.projector_type": "gemma4a",
            "clip.audio.embedding_length": 1024,
            "clip.audio.feed_forward_length": 4096,
            "clip.audio.block_count": 12,
            "clip.audio.attention.head_count": 8,
            "clip.audio.projection_dim": projection_dim,
            "clip.audio.num_mel_bins": 128,
        }
    return meta


GEMMA4_E4B_MMPROJ: ProjectorShape = shape_from_metadata(
    gemma4_mmproj_metadata(),
    [(t.name, t.nbytes) for t in gemma4_mmproj_tensors()],
    'published shape of Gemma 4 E4B\'s mmproj (F16, vision + audio; docs/facts.md "Vision memory")',
    estimated=True,
)
"""Gemma 4 E4B's projector (Bolt E4B's vision), from its published shape."""


def qwen3vl_mmproj_tensors(
    width: int = 1024,
    n_layer: int = 24,
    n_ff: int = 4096,
    out_dim: int = 2048,
    deepstack: tuple[int, ...] = (5, 11, 17),
) -> tuple[TensorInfo, ...]:
    """The tensors of a Qwen3-VL projector as llama.cpp's converter writes them (``conversion/qwen3vl.py``).

    A temporal pair of patch convolutions, a learned position table (2304 = 48 x 48), fused-QKV
    LayerNorm blocks with biases and a plain GELU FFN, the 2 x 2 merger (``mm.0``/``mm.2``) and one
    DeepStack merger per ``deepstack`` layer; matrices F16, vectors and positions F32
    (``conversion/base.py``: ``V_ENC_EMBD_POS`` is always F32; defaults: Qwen3-VL-2B).
    """
    merged = width * 4  # 2 x 2 spatial merge
    t = [
        _t("v.patch_embd.weight", "F16", 16, 16, 3, width),
        _t("v.patch_embd.weight.1", "F16", 16, 16, 3, width),
    ]
    t += [_t("v.patch_embd.bias", "F32", width), _t("v.position_embd.weight", "F32", width, 2304)]
    for i in range(n_layer):
        b = f"v.blk.{i}."
        t += [_t(b + "attn_qkv.weight", "F16", width, 3 * width), _t(b + "attn_qkv.bias", "F32", 3 * width)]
        t += [_t(b + "attn_out.weight", "F16", width, width), _t(b + "ffn_up.weight", "F16", width, n_ff)]
        t += [_t(b + "ffn_down.weight", "F16", n_ff, width)]
        vectors = ("attn_out.bias", "ffn_down.bias", "ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias")
        t += [_t(b + n, "F32", width) for n in vectors]
        t += [_t(b + "ffn_up.bias", "F32", n_ff)]
    for i in deepstack:
        d = f"v.deepstack.{i}."
        t += [_t(d + "fc1.weight", "F16", merged, merged), _t(d + "fc2.weight", "F16", merged, out_dim)]
        t += [_t(d + "norm.weight", "F32", merged), _t(d + "norm.bias", "F32", merged)]
        t += [_t(d + "fc1.bias", "F32", merged), _t(d + "fc2.bias", "F32", out_dim)]
    t += [_t("mm.0.weight", "F16", merged, merged), _t("mm.0.bias", "F32", merged)]
    t += [_t("mm.2.weight", "F16", merged, out_dim), _t("mm.2.bias", "F32", out_dim)]
    t += [_t("v.post_ln.weight", "F32", width), _t("v.post_ln.bias", "F32", width)]
    return tuple(t)


QWEN3VL_2B_MMPROJ_METADATA: dict[str, object] = {
    "general.architecture": "clip",
    "clip.has_vision_encoder": True,
    "clip.projector_type": "qwen3vl_merger",
    "clip.vision.embedding_length": 1024,
    "clip.vision.feed_forward_length": 4096,
    "clip.vision.block_count": 24,
    "clip.vision.attention.head_count": 16,
    "clip.vision.projection_dim": 2048,
    "clip.vision.image_size": 768,  # conversion/qwen3vl.py: sqrt(2304 positions) x patch 16
    "clip.vision.patch_size": 16,
    "clip.vision.spatial_merge_size": 2,
}
"""The ``clip.*`` keys of Qwen3-VL-2B's projector."""

QWEN3VL_2B_MMPROJ: ProjectorShape = shape_from_metadata(
    QWEN3VL_2B_MMPROJ_METADATA,
    [(t.name, t.nbytes) for t in qwen3vl_mmproj_tensors()],
    'published shape of Qwen3-VL-2B\'s projector (Cosmos Reason 2 2B; F16; docs/facts.md "Vision memory")',
    estimated=True,
)
"""Cosmos Reason 2 2B's (= Qwen3-VL-2B's) projector, from the published shape."""


def _use_more_bits(i: int, n: int) -> bool:  # src/llama-quant.cpp use_more_bits()
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def qwen3vl_2b_text_shape(source: str) -> ModelShape:
    """Qwen3-VL-2B's language model (Cosmos Reason 2 2B) as a Q4_K_M GGUF would hold it.

    Args:
        source: What to call the shape in reports.

    Returns:
        An estimated :class:`ModelShape` (``arch`` ``qwen3vl``): tied output, Q6_K embeddings and
        ``attn_v``/``ffn_down`` on ``use_more_bits`` layers, Q4_K elsewhere, F32 norms.
    """
    n_layer, e, ff, heads, kv, hd, vocab = 28, 2048, 6144, 16, 8, 128, 151936
    t = [_t("token_embd.weight", "Q6_K", e, vocab), _t("output_norm.weight", "F32", e)]
    for i in range(n_layer):
        b = f"blk.{i}."
        more = _use_more_bits(i, n_layer)
        t += [_t(b + "attn_norm.weight", "F32", e), _t(b + "attn_q.weight", "Q4_K", e, heads * hd)]
        t += [_t(b + "attn_k.weight", "Q4_K", e, kv * hd)]
        t += [_t(b + "attn_v.weight", "Q6_K" if more else "Q4_K", e, kv * hd)]
        t += [_t(b + "attn_output.weight", "Q4_K", heads * hd, e), _t(b + "attn_q_norm.weight", "F32", hd)]
        t += [_t(b + "attn_k_norm.weight", "F32", hd), _t(b + "ffn_norm.weight", "F32", e)]
        t += [_t(b + "ffn_gate.weight", "Q4_K", e, ff), _t(b + "ffn_up.weight", "Q4_K", e, ff)]
        t += [_t(b + "ffn_down.weight", "Q6_K" if more else "Q4_K", ff, e)]
    return ModelShape(
        arch="qwen3vl",
        n_layer=n_layer,
        n_embd=e,
        n_vocab=vocab,
        n_ctx_train=262144,
        n_head=(heads,) * n_layer,
        n_head_kv=(kv,) * n_layer,
        head_k=(hd,) * n_layer,
        head_v=(hd,) * n_layer,
        n_ff=(ff,) * n_layer,
        swa=(False,) * n_layer,
        n_swa=0,
        n_layer_kv=n_layer,
        n_embd_per_layer=0,
        tensors=tuple(t),
        source=source,
        estimated=True,
    )


COSMOS_REASON2_2B = "Cosmos Reason 2 2B (Qwen3-VL-2B post-train), Q4_K_M"
"""The default separate VLM when ``[vision.vlm] model`` names no file on this machine."""


GEMMA4_E4B_VISION_ONLY: ProjectorShape = shape_from_metadata(
    gemma4_mmproj_metadata(audio=False),
    [(t.name, t.nbytes) for t in gemma4_mmproj_tensors(audio=False)],
    "Gemma 4 E4B's mmproj without its audio encoder (a vision-only copy: clip.has_audio_encoder "
    "false, no a.*/mm.a.* tensors)",
    estimated=True,
)
"""Gemma 4 E4B's projector with the audio encoder left out: what the agent loads of it (its
vision-only copy, :func:`agent.vision.projector.vision_only`); the planner gets the same figures
from :data:`GEMMA4_E4B_MMPROJ` with :func:`~agent.memplan.projector.vision_only_shape`."""

PUBLISHED_PROJECTORS: dict[str, ProjectorShape] = {
    "published:gemma4-e4b-mmproj": GEMMA4_E4B_MMPROJ,
    "published:gemma4-e4b-mmproj-vision-only": GEMMA4_E4B_VISION_ONLY,
    "published:qwen3vl-2b-mmproj": QWEN3VL_2B_MMPROJ,
}
"""``[vision.vlm] mmproj`` values that plan a published shape without a file (for comparisons; a
shape with an audio encoder is planned without it, as the agent loads it)."""
