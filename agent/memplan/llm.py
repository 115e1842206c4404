"""llama.cpp's memory for one model and context: weights by placement, KV cache, compute and output buffers.

Every formula follows the vendored llama.cpp of llama-cpp-python 0.3.36 (paths under
``vendor/llama.cpp/``); the tests compare the results with the buffer sizes llama.cpp
itself logs for every GGUF available here (±10 %).

Weights (src/llama-model.cpp ``load_tensors``): layer ``il`` is on the GPU when
``il >= n_layer + 1 - n_gpu_layers``; the output layer (index ``n_layer``) likewise, so
``n_gpu_layers = n_layer + 1`` (or -1) offloads everything. Input-layer tensors
(``token_embd``, ``per_layer_token_embd``; ``LLM_TENSOR_LAYER_INPUT`` in src/llama-arch.cpp)
always stay on the CPU ("there is very little benefit to offloading the input layer"). A tied
output (no ``output.weight``) is ``token_embd`` again (``TENSOR_DUPLICATED``): on the GPU
that is a second copy; on the CPU it is the same mapped bytes. ``per_layer_token_embd`` is
``TENSOR_READ_LAZY`` (src/models/gemma4.cpp): with ``lazy_mode = ON`` it is read from the file
on demand instead of being mapped whole; the rows read stay in the page cache, and the plan
counts :data:`LAZY_RESIDENT_SHARE` of the tensor as resident (an estimate from the peak saving
llama.cpp PR 27794 published for Gemma 4 E4B). CPU matrix weights of some types are also copied into
a repacked buffer (``CPU_REPACK``; ggml-cpu/repack.cpp ``ggml_repack_get_optimal_repack_type``).

KV cache (src/llama-kv-cache.cpp, src/llama-kv-cache-iswa.cpp, src/llama-context.cpp):
``kv_size = GGML_PAD(n_ctx, 256)``; only layers ``il < n_layer_kv_from_start`` own cells
(``has_kv``); per owning layer K is ``row(type_k, n_head_kv * head_k) * cells`` and V is
``row(type_v, n_head_kv * head_v) * cells``, except that without flash attention V is stored
transposed and every layer's V row is padded to the largest one (``n_embd_v_gqa_max``, the
``[TAG_V_CACHE_VARIABLE]`` warning). Models with sliding-window layers get two caches: the
base one with ``kv_size`` cells for full-attention layers and an SWA one with
``GGML_PAD(min(kv_size, n_swa + n_ubatch), 256)`` cells, or ``kv_size`` with ``swa_full``
(llama.cpp's library default, and so llama-cpp-python's).

Compute buffer (src/llama-context.cpp ``sched_reserve``): the graph is reserved for
``n_tokens = min(n_ctx, n_ubatch)`` tokens with as many outputs (llama-cpp-python), or with
``min(n_tokens, n_outputs_max)`` outputs where the caller caps them: llama-server 11434
reserves ``n_parallel * (1 + draft length)`` outputs for the chat model
(tools/server/server-context.cpp ``server_output_limits``) and one per slot for a drafter
(common/speculative.cpp ``common_base_params_to_speculative``; ``LLMSettings.n_outputs``).
ggml-alloc keeps the peak of live tensors. The planner takes the larger of two phases: the
output phase (logits ``n_vocab * outputs`` f32 plus two hidden-state rows) and the attention phase
(the ``KQ`` matrix ``n_kv * n_tokens * n_head`` f32 of the widest layer when flash attention
is off, the masks, Q and the residual stream, and Gemma's per-layer inputs). The output
buffer holds ``n_vocab`` logits per sequence (``llama_context::output_reserve``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.memplan.shape import ModelShape, TensorInfo, type_size

__all__ = ["LAZY_RESIDENT_SHARE", "KVCache", "LLMMemory", "LLMSettings", "llm_memory"]

MiB = 1024**2
"""Bytes in a mebibyte."""
GiB = 1024**3
"""Bytes in a gibibyte."""
F32 = 4
"""Bytes of a float32."""

# Tensor types repacked for CPU matrix multiplication, by CPU feature
# (ggml-cpu/repack.cpp ggml_repack_get_optimal_repack_type; rows must be a multiple of 8 / 4).
REPACK_X86_AVX2 = frozenset({"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"})
REPACK_ARM_DOTPROD = frozenset({"Q4_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "MXFP4", "Q8_0"})
# llama.cpp PR 27794 (lazy per-layer embeddings, ``--lazy-mode on``): Gemma 4 E4B's peak memory
# fell from 7.37 GB to 6.16 GB, i.e. 1.21 GB saved of a ~1.9 GB ``per_layer_token_embd`` tensor
# (``docs/facts.md``). The rest, ~0.69 GB or 36 % of the tensor, stays resident: the page-cache
# working set of the rows a conversation reads. Applied as a share of the tensor in the file.
LAZY_PEAK_BEFORE_GB = 7.37
LAZY_PEAK_AFTER_GB = 6.16
LAZY_PLE_TENSOR_GB = 1.9
LAZY_RESIDENT_SHARE = 1.0 - (LAZY_PEAK_BEFORE_GB - LAZY_PEAK_AFTER_GB) / LAZY_PLE_TENSOR_GB
"""Share of a lazily read per-layer embedding tensor counted as resident (0..1; ~0.36, an estimate)."""
_INPUT_TENSORS = (
    "token_embd.weight",
    "per_layer_token_embd.weight",
    "token_types.weight",
    "position_embd.weight",
)


def pad(x: int, n: int) -> int:
    """``GGML_PAD``: ``x`` rounded up to a multiple of ``n``."""
    return (x + n - 1) // n * n


def row_bytes(ggml_type: str, n: int) -> int:
    """Bytes of ``n`` elements of ``ggml_type`` (``ggml_row_size``); ``n`` must fill whole blocks."""
    block, block_bytes = type_size(ggml_type)
    return (n + block - 1) // block * block_bytes


@dataclass(frozen=True)
class LLMSettings:
    """The llama.cpp parameters that size memory.

    Attributes:
        n_ctx: Requested context, tokens (llama.cpp pads it to 256).
        n_batch: Logical batch, tokens (llama-cpp-python caps it at ``n_ctx``).
        n_ubatch: Physical batch, tokens (capped at ``n_batch``).
        n_gpu_layers: Layers on the GPU; -1 or ``n_layer + 1`` = all plus the output layer.
        cache_type_k: K cache type, ``"f16"`` or ``"q8_0"``.
        cache_type_v: V cache type (``"q8_0"`` needs ``flash_attn``).
        flash_attn: Flash attention (no KQ matrix, untransposed V cache).
        swa_full: Full-size cache for sliding-window layers.
        lazy_per_layer_embd: Read ``per_layer_token_embd`` from the file on demand.
        n_seq: Parallel sequences (1 for bolt-agent).
        n_outputs: Outputs (logit rows) the compute graph is reserved for; 0 = every token of
            the ubatch (llama-cpp-python), else ``min(ubatch, n_outputs)`` (llama-server).

    """

    n_ctx: int
    n_batch: int = 512
    n_ubatch: int = 512
    n_gpu_layers: int = 0
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: bool = False
    swa_full: bool = True
    lazy_per_layer_embd: bool = False
    n_seq: int = 1
    n_outputs: int = 0

    @property
    def outputs(self) -> int:
        """Logit rows in the reserved graph: the ubatch, or ``n_outputs`` when smaller and set."""
        return min(self.ubatch, self.n_outputs) if self.n_outputs > 0 else self.ubatch

    @property
    def kv_size(self) -> int:
        """Cells of the full-attention cache: ``GGML_PAD(n_ctx, 256)`` (llama-context.cpp)."""
        return pad(self.n_ctx, 256)

    @property
    def ubatch(self) -> int:
        """Tokens of the reserved graph: ``min(n_ctx, n_batch, n_ubatch)``."""
        return min(self.n_ctx, self.n_batch, self.n_ubatch)


@dataclass(frozen=True)
class KVCache:
    """One KV cache (the base one, or the sliding-window one).

    Attributes:
        name: ``"base"`` or ``"swa"``.
        cells: Token slots.
        layers: Layers that own cells in it.
        k_bytes: K tensors, bytes.
        v_bytes: V tensors, bytes.

    """

    name: str
    cells: int
    layers: int
    k_bytes: int
    v_bytes: int

    @property
    def bytes(self) -> int:
        """K + V bytes."""
        return self.k_bytes + self.v_bytes


@dataclass(frozen=True)
class LLMMemory:
    """The model's memory by kind and place (bytes).

    Attributes:
        weights_gpu: Weights in GPU buffers (layers and output on the GPU, tied-output copy).
        weights_host: Weights resident in host memory (CPU layers, input tensors; mapped).
        weights_lazy: Weights read on demand from the file (not resident).
        lazy_working_set: Estimate of the lazily read tensor's resident part (page cache):
            :data:`LAZY_RESIDENT_SHARE` of ``weights_lazy``.
        repack: Host copies of CPU weights repacked for the CPU's matrix kernels.
        kv: The caches.
        kv_on_gpu: Whether the caches live in GPU buffers (each layer's cache is on its layer's
            device; with partial offload some are on the CPU, which on unified memory is the
            same DRAM).
        compute_gpu: Compute buffer on the GPU.
        compute_host: Compute buffer in host memory.
        output: Logits buffer (host).
        gpu_layers: Repeating layers on the GPU.
        output_on_gpu: The output layer (``output_norm``, ``output``) is on the GPU.
        notes: Remarks for the report (e.g. tied output duplicated).

    """

    weights_gpu: int
    weights_host: int
    weights_lazy: int
    lazy_working_set: int
    repack: int
    kv: tuple[KVCache, ...]
    kv_on_gpu: bool
    compute_gpu: int
    compute_host: int
    output: int
    gpu_layers: int
    output_on_gpu: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def weights(self) -> int:
        """All resident weight bytes (GPU + host + repack + lazy working set)."""
        return self.weights_gpu + self.weights_host + self.repack + self.lazy_working_set

    @property
    def kv_bytes(self) -> int:
        """Both caches, bytes."""
        return sum(c.bytes for c in self.kv)

    @property
    def compute(self) -> int:
        """Compute buffers on every backend, bytes."""
        return self.compute_gpu + self.compute_host

    @property
    def total(self) -> int:
        """Everything resident for this model, bytes."""
        return self.weights + self.kv_bytes + self.compute + self.output


def _kv_caches(shape: ModelShape, s: LLMSettings) -> tuple[KVCache, ...]:
    owners = [il for il in range(shape.n_layer) if il < shape.n_layer_kv]
    v_max = max(shape.n_head_kv[il] * shape.head_v[il] for il in range(shape.n_layer))
    v_trans = not s.flash_attn
    groups = [("base", [il for il in owners if not shape.swa[il]], s.kv_size)]
    if shape.has_swa:
        swa_cells = s.kv_size if s.swa_full else pad(min(s.kv_size, shape.n_swa * s.n_seq + s.ubatch), 256)
        groups = [
            ("base", [il for il in owners if not shape.swa[il]], s.kv_size),
            ("swa", [il for il in owners if shape.swa[il]], swa_cells),
        ]
    out = []
    for name, layers, cells in groups:
        k = sum(row_bytes(s.cache_type_k, shape.n_head_kv[il] * shape.head_k[il]) for il in layers) * cells
        v = (
            sum(
                row_bytes(s.cache_type_v, v_max if v_trans else shape.n_head_kv[il] * shape.head_v[il])
                for il in layers
            )
            * cells
        )
        out.append(KVCache(name, cells, len(layers), k, v))
    return tuple(out)


def _compute_peak(
    shape: ModelShape, s: LLMSettings, kv: tuple[KVCache, ...], with_output: bool, with_layers: bool
) -> int:
    """Peak bytes of live graph tensors for one reserved ubatch (see the module docstring).

    Two terms are empirical, fitted to llama.cpp's reports on the GGUFs here (tests/test_memory_plan.py):
    ggml-alloc's best-fit placement leaves part of the KQ masks and Gemma's per-layer inputs
    below the logits block (a quarter of the masks covers every case measured), about four
    hidden-state rows (residual, normed input, K, V) are live next to the KQ matrix, and about
    five next to the feed-forward block's three ``n_ff``-wide rows (up, gate and their
    SwiGLU product; llama-server's few-output graphs of SmolLM2 with flash attention show it).
    """
    t = s.ubatch
    hidden = shape.n_embd * t * F32
    per_layer_inp = shape.n_embd_per_layer * shape.n_layer * t * F32
    cells = {c.name: c.cells for c in kv}
    masks = sum(n * t * (2 if s.flash_attn else F32) for n in cells.values()) if with_layers else 0
    out_phase = (
        shape.n_vocab * s.outputs * F32 + 2 * hidden + masks // 4 + per_layer_inp if with_output else 0
    )
    if not with_layers:
        return out_phase
    attn = 0
    for il in range(shape.n_layer):
        n_kv = cells.get("swa" if shape.swa[il] else "base", s.kv_size)
        q = shape.n_head[il] * shape.head_k[il] * t * F32
        kq = 0 if s.flash_attn else n_kv * t * shape.n_head[il] * F32
        attn = max(attn, kq + q)
    ffn = 3 * max(shape.n_ff or (0,)) * t * F32
    layer_phase = masks + per_layer_inp + max(4 * hidden + attn, 5 * hidden + ffn)
    return max(out_phase, layer_phase)


def _placement(shape: ModelShape, s: LLMSettings, has_gpu: bool) -> tuple[int, bool]:
    """(first GPU layer, output layer on GPU) per llama-model.cpp ``load_tensors``."""
    if not has_gpu or s.n_gpu_layers == 0:
        return shape.n_layer + 1, False
    ngl = shape.n_layer + 1 if s.n_gpu_layers < 0 else s.n_gpu_layers
    first = max(shape.n_layer + 1 - ngl, 0)
    return first, shape.n_layer >= first


def _tensor_on_gpu(t: TensorInfo, first_gpu: int, out_gpu: bool) -> bool:
    if t.name in _INPUT_TENSORS:
        return False
    if t.layer is not None:
        return t.layer >= first_gpu
    if t.name.startswith(("output", "output_norm")):
        return out_gpu
    # Other non-block tensors are created for a layer index (per_layer_model_proj/proj_norm for
    # layer 0; rope_freqs for each full-attention layer, a few KiB): placed with layer 0.
    return first_gpu == 0


def llm_memory(
    shape: ModelShape, s: LLMSettings, *, has_gpu: bool = False, repack_types: frozenset[str] = frozenset()
) -> LLMMemory:
    """Memory llama.cpp allocates for ``shape`` with settings ``s``.

    Args:
        shape: The model (from :func:`~agent.memplan.shape.read_gguf_shape` or a published shape).
        s: Context and offload settings.
        has_gpu: A GPU backend exists (else ``n_gpu_layers`` is ignored, as in a CPU build).
        repack_types: ggml types the CPU repacks for matrix products (see ``REPACK_*``).

    Returns:
        The :class:`LLMMemory` breakdown, bytes.

    """
    first_gpu, out_gpu = _placement(shape, s, has_gpu)
    gpu = host = lazy = repack = 0
    notes: list[str] = []
    for t in shape.tensors:
        if t.name == "per_layer_token_embd.weight" and s.lazy_per_layer_embd:
            lazy += t.nbytes
        elif _tensor_on_gpu(t, first_gpu, out_gpu):
            gpu += t.nbytes
        else:
            host += t.nbytes
            if (
                t.ggml_type in repack_types
                and len(t.shape) == 2
                and t.shape[1] % 8 == 0
                and t.name not in _INPUT_TENSORS
            ):
                repack += t.nbytes
    emb = shape.tensor("token_embd.weight")
    if shape.tied_output and out_gpu and emb is not None:
        gpu += emb.nbytes
        notes.append(f"tied output: token_embd ({emb.nbytes / MiB:.0f} MiB) is also copied to the GPU")
    working = round(lazy * LAZY_RESIDENT_SHARE)  # the page-cache working set (PR 27794's saving)
    kv = _kv_caches(shape, s)
    gpu_layers = max(0, shape.n_layer - first_gpu)
    on_gpu = has_gpu and gpu_layers > 0
    full = _compute_peak(shape, s, kv, with_output=True, with_layers=True)
    if on_gpu:
        compute_gpu = _compute_peak(shape, s, kv, with_output=out_gpu, with_layers=True)
        host_part = _compute_peak(
            shape, s, kv, with_output=not out_gpu, with_layers=gpu_layers < shape.n_layer
        )
        # input layer on the CPU: token and per-layer embedding rows of one ubatch
        compute_host = max(
            host_part, (shape.n_embd + shape.n_embd_per_layer * shape.n_layer) * s.ubatch * F32
        )
    else:
        compute_gpu, compute_host = 0, full
    return LLMMemory(
        weights_gpu=gpu,
        weights_host=host,
        weights_lazy=lazy,
        lazy_working_set=working,
        repack=repack,
        kv=kv,
        kv_on_gpu=on_gpu,
        compute_gpu=compute_gpu,
        compute_host=compute_host,
        output=shape.n_vocab * F32 * max(1, s.n_seq),
        gpu_layers=gpu_layers,
        output_on_gpu=out_gpu,
        notes=tuple(notes),
    )
