"""A model's shape for memory planning: hyperparameters and tensor list, read from GGUF metadata.

Nothing here reads weights: :func:`read_gguf_header` maps the file and parses only the header
(key/values and tensor infos; the GGUF layout of ggml/src/gguf.cpp), so a sparse, header-only
GGUF works as well as a real one. Tensor sizes come from the ggml type traits in gguf-py.

How llama.cpp derives the numbers read here (vendored llama.cpp of llama-cpp-python 0.3.36):

* per-layer head counts: ``llama_model_base::load_hparams`` reads ``{arch}.attention.head_count``
  and ``head_count_kv`` as a scalar or a per-layer array (``ml.get_key_or_arr``,
  src/llama-model.cpp); ``head_count_kv`` defaults to ``head_count``.
* head sizes: ``key_length``/``value_length`` default to ``n_embd / n_head``;
  ``key_length_swa``/``value_length_swa`` default to the full-attention sizes
  (src/llama-model.cpp, "head size and n_rot for SWA layers"); a layer's size is the SWA one
  when the layer is sliding-window (``llama_hparams::n_embd_head_k``, src/llama-hparams.cpp).
* sliding-window layers: an explicit bool array ``{arch}.attention.sliding_window_pattern``
  wins; otherwise a period ``n`` marks every layer but each ``n``-th as SWA
  (``llama_model_base::load_swa_pattern`` + ``llama_hparams::set_swa_pattern``). The default
  period is per architecture: gemma2 2 (window 4096 when absent), gemma3 6 (only when
  ``sliding_window`` is present), gemma4 requires the array (src/models/gemma*.cpp).
* shared KV: gemma3n/gemma4 set ``n_layer_kv_from_start = n_layer - shared_kv_layers``
  (src/models/gemma4.cpp ``load_arch_hparams``; gemma3n fixes it at 20); later layers reuse an
  earlier layer's cache. Gemma 4's MTP drafter (``gemma4-assistant``, llama-server 11434's
  src/models/gemma4-assistant.cpp) owns no cache at all: it attends to the target's.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ModelShape", "ShapeError", "TensorInfo", "read_gguf_shape", "tensor_nbytes", "type_size"]


class ShapeError(Exception):
    """The file is not a GGUF the planner understands; the message names the file and the problem."""


# ggml type name -> (block size in elements, bytes per block); from gguf-py's GGML_QUANT_SIZES,
# which mirrors ggml's type traits (ggml/src/ggml.c ``type_traits``).
def type_size(ggml_type: str) -> tuple[int, int]:
    """Block size (elements) and bytes per block of a ggml type.

    Args:
        ggml_type: Type name as ggml spells it (``"F16"``, ``"Q4_K"``, ``"Q8_0"``; case-insensitive).

    Returns:
        ``(block_elements, block_bytes)``; e.g. ``(32, 34)`` for Q8_0, ``(1, 2)`` for F16.

    Raises:
        ShapeError: unknown type name.

    """
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        return GGML_QUANT_SIZES[GGMLQuantizationType[ggml_type.upper()]]
    except KeyError:
        raise ShapeError(f"unknown ggml type {ggml_type!r}") from None


def tensor_nbytes(ggml_type: str, shape: Sequence[int]) -> int:
    """Bytes of a tensor of ``shape`` (ggml order: ``shape[0]`` is the row length) stored as ``ggml_type``.

    Mirrors ``ggml_nbytes`` for contiguous tensors: rows of ``shape[0] / block`` blocks.

    Raises:
        ShapeError: unknown type, or a row length that is not a whole number of blocks.

    """
    block, block_bytes = type_size(ggml_type)
    row = shape[0] if shape else 1
    if row % block:
        raise ShapeError(f"a row of {row} elements is not a whole number of {ggml_type} blocks ({block})")
    n_rows = 1
    for d in shape[1:]:
        n_rows *= d
    return row // block * block_bytes * n_rows


@dataclass(frozen=True)
class TensorInfo:
    """One weight tensor as the GGUF describes it.

    Attributes:
        name: GGUF tensor name (``blk.3.attn_q.weight``).
        ggml_type: Storage type name (``Q4_K``, ``F32``...).
        shape: Dimensions in ggml order (``shape[0]`` = row length).
        nbytes: Bytes of its data in the file.

    """

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    nbytes: int

    @property
    def layer(self) -> int | None:
        """Block index for ``blk.N.*`` tensors, None for input/output tensors."""
        if self.name.startswith("blk."):
            return int(self.name.split(".")[1])
        return None


@dataclass(frozen=True)
class ModelShape:
    """What the planner needs to know about a model: hyperparameters per layer and tensors.

    Attributes:
        arch: ``general.architecture`` (``llama``, ``gemma3``, ``gemma4``...).
        n_layer: Transformer blocks.
        n_embd: Hidden size.
        n_vocab: Vocabulary size (tokens).
        n_ctx_train: Training context length, tokens.
        n_head: Query heads per layer.
        n_head_kv: KV heads per layer.
        head_k: K head size per layer (SWA layers use the SWA size), elements.
        head_v: V head size per layer, elements.
        n_ff: Feed-forward width per layer.
        swa: Whether each layer uses sliding-window attention.
        n_swa: Sliding window, tokens (0 = no SWA).
        n_layer_kv: Layers from the start that own a KV cache; later ones reuse one (shared KV).
        n_embd_per_layer: Per-layer embedding width (Gemma 3n/4), 0 if none.
        tensors: Every tensor of the file.
        source: Where the shape came from (a path, or "published shape: ...").
        estimated: True when the shape is not read from a real file (labelled in reports).

    """

    arch: str
    n_layer: int
    n_embd: int
    n_vocab: int
    n_ctx_train: int
    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    head_k: tuple[int, ...]
    head_v: tuple[int, ...]
    n_ff: tuple[int, ...]
    swa: tuple[bool, ...]
    n_swa: int
    n_layer_kv: int
    n_embd_per_layer: int
    tensors: tuple[TensorInfo, ...]
    source: str
    estimated: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def has_swa(self) -> bool:
        """True when some layers use sliding-window attention (llama.cpp then builds an iSWA cache)."""
        return self.n_swa > 0 and any(self.swa)

    @property
    def tied_output(self) -> bool:
        """No ``output.weight``: llama.cpp reuses ``token_embd`` as output (``TENSOR_DUPLICATED``)."""
        return not any(t.name == "output.weight" for t in self.tensors)

    @property
    def weight_bytes(self) -> int:
        """Bytes of all tensor data in the file."""
        return sum(t.nbytes for t in self.tensors)

    def tensor(self, name: str) -> TensorInfo | None:
        """Find the tensor called ``name``; None if absent."""
        for t in self.tensors:
            if t.name == name:
                return t
        return None


def _per_layer(value: Any, n_layer: int, key: str, path: Path) -> tuple[int, ...]:
    if isinstance(value, (list, tuple)):
        if len(value) != n_layer:
            raise ShapeError(f"{path}: {key} has {len(value)} entries for {n_layer} layers")
        return tuple(int(v) for v in value)
    return (int(value),) * n_layer


def _swa_layers(arch: str, meta: dict[str, Any], n_layer: int, path: Path) -> tuple[tuple[bool, ...], int]:
    """SWA flag per layer and window, following each architecture's ``load_arch_hparams``."""
    pattern = meta.get(f"{arch}.attention.sliding_window_pattern")
    window = int(meta.get(f"{arch}.attention.sliding_window", 0) or 0)
    if isinstance(pattern, (list, tuple)):
        if len(pattern) != n_layer:
            raise ShapeError(
                f"{path}: sliding_window_pattern has {len(pattern)} entries for {n_layer} layers"
            )
        flags = tuple(bool(p) for p in pattern)
        return flags, window if any(flags) else 0
    default_period = {"gemma2": 2, "gemma3": 6, "gemma3n": 5}.get(arch)
    if arch == "gemma2" and not window:
        window = 4096  # src/models/gemma2.cpp: "default value of gemma 2"
    if default_period is None or not window:
        return (False,) * n_layer, 0
    period = int(pattern) if pattern is not None else default_period
    # llama_hparams::set_swa_pattern (dense_first = false): layer il is SWA iff il % n < n - 1.
    flags = tuple(period == 0 or il % period < period - 1 for il in range(n_layer))
    return flags, window


# GGUF value types (gguf-py GGUFValueType / ggml's gguf.cpp): id -> struct format (None: special)
_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


def read_gguf_header(path: Path) -> tuple[dict[str, Any], list[tuple[str, tuple[int, ...], int]]]:
    """Parse a GGUF header: metadata and tensor infos, without touching tensor data.

    String arrays (the vocabulary, merges) are skipped and stored as their length, which
    keeps a 262k-token Gemma header to a fraction of a second (``gguf.GGUFReader`` builds a
    view per element and takes seconds).

    Args:
        path: GGUF file (version 2 or 3, little-endian).

    Returns:
        ``(metadata, tensors)``: metadata maps keys to scalars, strings, lists of numbers or
        bools, or an int (the length) for string arrays; tensors are ``(name, dims, type_id)``
        with dims in ggml order.

    Raises:
        ValueError: not a GGUF file, or an unsupported version or value type.
        struct.error: the header is truncated.

    """
    import mmap

    import numpy as np

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        buf = memoryview(mm)
        try:
            if bytes(buf[:4]) != b"GGUF":
                raise ValueError("no GGUF magic")
            version, n_tensors, n_kv = struct.unpack_from("<IQQ", buf, 4)
            if version not in (2, 3):
                raise ValueError(f"unsupported GGUF version {version}")
            pos = 24

            def string() -> str:
                nonlocal pos
                (n,) = struct.unpack_from("<Q", buf, pos)
                out = bytes(buf[pos + 8 : pos + 8 + n]).decode("utf-8", "replace")
                pos += 8 + n
                return out

            def value(vtype: int) -> Any:
                nonlocal pos
                if vtype in _SCALAR:
                    fmt = "<" + _SCALAR[vtype]
                    (v,) = struct.unpack_from(fmt, buf, pos)
                    pos += struct.calcsize(fmt)
                    return v
                if vtype == _STRING:
                    return string()
                if vtype == _ARRAY:
                    etype, count = struct.unpack_from("<IQ", buf, pos)
                    pos += 12
                    if etype == _STRING:
                        for _ in range(count):
                            (n,) = struct.unpack_from("<Q", buf, pos)
                            pos += 8 + n
                        return count
                    if etype not in _SCALAR:
                        raise ValueError(f"unsupported array element type {etype}")
                    dt = np.dtype("<" + _SCALAR[etype])
                    arr = np.frombuffer(buf, dtype=dt, count=count, offset=pos)
                    pos += dt.itemsize * count
                    return arr.tolist()
                raise ValueError(f"unsupported value type {vtype}")

            meta: dict[str, Any] = {}
            for _ in range(n_kv):
                key = string()
                (vtype,) = struct.unpack_from("<I", buf, pos)
                pos += 4
                meta[key] = value(vtype)
            tensors = []
            for _ in range(n_tensors):
                name = string()
                (n_dims,) = struct.unpack_from("<I", buf, pos)
                dims = struct.unpack_from(f"<{n_dims}Q", buf, pos + 4)
                pos += 4 + 8 * n_dims
                type_id, _offset = struct.unpack_from("<IQ", buf, pos)
                pos += 12
                tensors.append((name, tuple(int(d) for d in dims), int(type_id)))
        finally:
            buf.release()
    return meta, tensors


def read_gguf_shape(path: str | Path) -> ModelShape:
    """Read a model's shape from a GGUF header (no weights are read).

    Args:
        path: GGUF file (may be sparse: only the header is parsed).

    Returns:
        The :class:`ModelShape`.

    Raises:
        ShapeError: the file is missing, not GGUF, or lacks a key llama.cpp requires
            (``block_count``, ``embedding_length``, ``attention.head_count``).

    """
    p = Path(path)
    try:
        meta, raw_tensors = read_gguf_header(p)
    except (OSError, ValueError, struct.error) as e:
        raise ShapeError(f"{p}: cannot read as GGUF ({e})") from None
    arch = str(meta.get("general.architecture", ""))
    if not arch:
        raise ShapeError(f"{p}: no general.architecture key; not a llama.cpp model GGUF")

    def need(key: str) -> Any:
        full = f"{arch}.{key}"
        if full not in meta:
            raise ShapeError(f"{p}: missing metadata key {full}")
        return meta[full]

    n_layer = int(need("block_count"))
    n_embd = int(need("embedding_length"))
    n_head = _per_layer(need("attention.head_count"), n_layer, "attention.head_count", p)
    n_head_kv = _per_layer(
        meta.get(f"{arch}.attention.head_count_kv", list(n_head)), n_layer, "attention.head_count_kv", p
    )
    n_ff = _per_layer(meta.get(f"{arch}.feed_forward_length", 0), n_layer, "feed_forward_length", p)
    head0 = n_head[0] or 1
    k_full = int(meta.get(f"{arch}.attention.key_length", n_embd // head0))
    v_full = int(meta.get(f"{arch}.attention.value_length", n_embd // head0))
    k_swa = int(meta.get(f"{arch}.attention.key_length_swa", k_full))
    v_swa = int(meta.get(f"{arch}.attention.value_length_swa", v_full))
    swa, n_swa = _swa_layers(arch, meta, n_layer, p)
    n_layer_kv = n_layer
    if arch == "gemma4":  # src/models/gemma4.cpp: n_layer_kv_from_start = n_layer - shared_kv_layers
        n_layer_kv = n_layer - int(meta.get(f"{arch}.attention.shared_kv_layers", 0) or 0)
    elif arch == "gemma3n":  # src/models/gemma3n.cpp: n_layer_kv_from_start = 20
        n_layer_kv = min(20, n_layer)
    elif arch == "gemma4-assistant":  # the MTP drafter has no attn_k/attn_v: it reads the target's KV
        n_layer_kv = 0  # (src/models/gemma4-assistant.cpp of llama-server 11434)
    from gguf.constants import GGMLQuantizationType

    tensors = []
    for name, dims, type_id in raw_tensors:
        try:
            tname = GGMLQuantizationType(type_id).name
        except ValueError:
            raise ShapeError(f"{p}: tensor {name} has unknown ggml type {type_id}") from None
        tensors.append(TensorInfo(name, tname, dims, tensor_nbytes(tname, dims)))
    n_vocab = int(meta.get("tokenizer.ggml.tokens", 0) or meta.get(f"{arch}.vocab_size", 0) or 0)
    if not n_vocab:
        emb = next((t for t in tensors if t.name == "token_embd.weight"), None)
        n_vocab = emb.shape[1] if emb is not None and len(emb.shape) > 1 else 0
    return ModelShape(
        arch=arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_vocab=n_vocab,
        n_ctx_train=int(meta.get(f"{arch}.context_length", 0) or 0),
        n_head=n_head,
        n_head_kv=n_head_kv,
        head_k=tuple(k_swa if s else k_full for s in swa),
        head_v=tuple(v_swa if s else v_full for s in swa),
        n_ff=n_ff,
        swa=swa,
        n_swa=n_swa,
        n_layer_kv=n_layer_kv,
        n_embd_per_layer=int(meta.get(f"{arch}.embedding_length_per_layer_input", 0) or 0),
        tensors=tuple(tensors),
        source=str(p),
    )
