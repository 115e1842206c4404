"""Gemma 4 test models written with ``gguf``: a tiny random one llama.cpp runs, and an E4B-shaped sparse one.

Both take the real Gemma 4 vocabulary and chat template from
``ggml-vocab-gemma-4.gguf`` (the ``gemma4_vocab`` fixture) (every ``tokenizer.*`` key is copied) and
the ``gemma4`` tensor set and metadata from :mod:`agent.memplan.gemma4`, so the files have
per-layer embeddings, sliding-window layers with their own head size and KV head count, and
shared-KV layers, exactly as llama.cpp's ``gemma4`` loader expects.

* :func:`tiny_gemma4` — 9 layers (pattern sliding, sliding, global), hidden 64, window 128,
  the last 3 layers reuse earlier KV, double-wide FFN on those, per-layer embeddings of
  width 32; random weights (seeded), Q8_0 / F16 / F32 tensors. About 115 MB: the 262144-token
  vocabulary dominates (token and per-layer embedding tables ~98 MB, the tokenizer ~16 MB).
  llama.cpp loads and runs it.
* :func:`e4b_sparse` — Bolt E4B's published shape with Q4_K_M tensor types: the header is
  exact, the tensor data are a hole (a sparse file: ~5 GB apparent, a few MB on disk).
  llama.cpp maps it and reports its buffer sizes without reading the data.

Files are cached under ``~/.cache/bolt-agent/test-models`` keyed by a hash of the generator's
parameters (layout, types, seed, generator version and the vocabulary file's size), and
written atomically (temp file + rename), so parallel test runs do not see half-written files.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np

from agent.memplan.gemma4 import (
    BOLT_E4B,
    Gemma4Layout,
    Gemma4Types,
    gemma4_metadata,
    gemma4_tensors,
    q4_k_m_types,
)

GENERATOR_VERSION = 2
CACHE = Path.home() / ".cache" / "bolt-agent" / "test-models"

TINY = Gemma4Layout(
    n_layer=9,
    n_embd=64,
    n_vocab=262144,
    n_head=4,
    n_head_kv=(2, 2, 4) * 3,
    head_full=64,
    head_swa=32,
    n_ff=(128,) * 6 + (256,) * 3,
    swa=(True, True, False) * 3,
    n_swa=128,
    shared_kv_layers=3,
    n_embd_per_layer=32,
    n_ctx_train=32768,
)
TINY_TYPES = Gemma4Types(
    token_embd="Q8_0",
    per_layer_token_embd="Q8_0",
    per_layer_model_proj="F16",
    matrix="Q8_0",
    attn_v_more="F16",
    ffn_down_more="F16",
    norm="F32",
)


def _key(layout: Gemma4Layout, types: Gemma4Types, vocab: Path, extra: dict) -> str:
    blob = json.dumps(
        {
            "v": GENERATOR_VERSION,
            "layout": asdict(layout),
            "types": asdict(types),
            "vocab_bytes": vocab.stat().st_size,
            **extra,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _tokenizer_fields(vocab: Path) -> dict[str, tuple[int, int | None, object]]:
    """The ``tokenizer.*`` key/values of a GGUF as ``{key: (type, array element type, value)}``.

    A direct parse of the GGUF key/value section (ggml/src/gguf.cpp layout):
    ``gguf.GGUFReader`` takes ~18 s on the 262k-token Gemma vocabulary, this well under one.
    """
    buf = vocab.read_bytes()
    (n_kv,) = struct.unpack_from("<Q", buf, 16)
    pos = 24

    def string() -> str:
        nonlocal pos
        (n,) = struct.unpack_from("<Q", buf, pos)
        pos += 8 + n
        return buf[pos - n : pos].decode("utf-8")

    def scalar(t: int):
        nonlocal pos
        fmt = "<" + _SCALAR[t]
        (v,) = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return v

    out = {}
    for _ in range(n_kv):
        key = string()
        (vtype,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        sub = None
        if vtype == 8:
            value = string()
        elif vtype == 9:
            sub, count = struct.unpack_from("<IQ", buf, pos)
            pos += 12
            if sub == 8:
                value = [string() for _ in range(count)]
            else:
                dt = np.dtype("<" + _SCALAR[sub])
                value = np.frombuffer(buf, dtype=dt, count=count, offset=pos).tolist()
                pos += dt.itemsize * count
        else:
            value = scalar(vtype)
        if key.startswith("tokenizer."):
            out[key] = (vtype, sub, value)
    return out


def _writer(path: Path, layout: Gemma4Layout, vocab: Path, name: str):
    from gguf import GGUFValueType, GGUFWriter

    w = GGUFWriter(path, "gemma4")
    w.add_name(name)
    for key, value in gemma4_metadata(layout).items():
        if isinstance(value, list):
            sub = GGUFValueType.BOOL if isinstance(value[0], bool) else GGUFValueType.INT32
            w.add_key_value(key, value, GGUFValueType.ARRAY, sub_type=sub)
        elif isinstance(value, float):
            w.add_float32(key, value)
        else:
            w.add_uint32(key, value)
    for key, (vtype, sub, value) in _tokenizer_fields(vocab).items():
        w.add_key_value(
            key, value, GGUFValueType(vtype), sub_type=GGUFValueType(sub) if sub is not None else None
        )
    return w


def _random(ggml_type: str, shape: tuple[int, ...], rng: np.random.Generator, name: str) -> np.ndarray:
    from gguf import GGMLQuantizationType, quants

    data = rng.standard_normal(tuple(reversed(shape)), dtype=np.float32)
    if "norm" in name or name.endswith("layer_output_scale.weight"):
        data = np.ones_like(data)
    elif name == "rope_freqs.weight":
        data = np.ones_like(data)
    else:
        data *= 0.05
    return quants.quantize(data, GGMLQuantizationType[ggml_type])


def _atomic(target: Path, write) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def tiny_gemma4(vocab: Path, seed: int = 0) -> Path:
    """The tiny random ``gemma4`` GGUF (written once, then cached).

    Args:
        vocab: ``ggml-vocab-gemma-4.gguf`` (tokenizer and chat template source).
        seed: Weight RNG seed.

    Returns:
        Path of the cached GGUF.
    """
    target = CACHE / f"gemma4-tiny-{_key(TINY, TINY_TYPES, vocab, {'seed': seed})}.gguf"
    if target.exists():
        return target

    def write(tmp: Path) -> None:
        from gguf import GGMLQuantizationType

        rng = np.random.default_rng(seed)
        w = _writer(tmp, TINY, vocab, "bolt-agent tiny gemma4 (random weights)")
        for t in gemma4_tensors(TINY, TINY_TYPES):
            data = _random(t.ggml_type, t.shape, rng, t.name)
            w.add_tensor(t.name, data, raw_dtype=GGMLQuantizationType[t.ggml_type])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    return _atomic(target, write)


def e4b_sparse(vocab: Path, layout: Gemma4Layout = BOLT_E4B, types: Gemma4Types | None = None) -> Path:
    """A header-exact, data-free (sparse) GGUF of Bolt E4B's published shape.

    Args:
        vocab: ``ggml-vocab-gemma-4.gguf``.
        layout: The shape (default: :data:`agent.memplan.gemma4.BOLT_E4B`).
        types: Tensor types (default: llama.cpp's Q4_K_M recipe).

    Returns:
        Path of the cached sparse GGUF (apparent size = the real file's).
    """
    types = types or q4_k_m_types()
    target = CACHE / f"gemma4-e4b-sparse-{_key(layout, types, vocab, {})}.gguf"
    if target.exists():
        return target

    def write(tmp: Path) -> None:
        from gguf import GGMLQuantizationType

        w = _writer(tmp, layout, vocab, "bolt-agent E4B-shaped sparse gemma4 (no weights)")
        for t in gemma4_tensors(layout, types):
            w.add_tensor_info(
                t.name,
                tuple(reversed(t.shape)),
                np.dtype(np.float32),
                t.nbytes,
                raw_dtype=GGMLQuantizationType[t.ggml_type],
            )
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        fout = w.fout[0]
        fout.flush()
        start = w.ggml_pad(fout.tell(), w.data_alignment)
        total = sum(w.ggml_pad(t.nbytes, w.data_alignment) for t in gemma4_tensors(layout, types))
        fout.truncate(start + total)  # a hole: no data blocks are written
        w.close()

    return _atomic(target, write)
