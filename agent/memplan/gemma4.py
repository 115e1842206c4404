"""Gemma 4 layouts: the tensor list of a ``gemma4`` GGUF built from a handful of shape numbers.

Used twice: to plan memory for Bolt E4B from its published shape when the GGUF is not on
this machine (the report labels such a plan as computed from the published shape), and by
the tests to write GGUFs that llama.cpp loads (a tiny random one, and an E4B-shaped sparse
file whose header is exact and whose data are holes).

The tensor set is what ``llama_model_gemma4::load_arch_tensors`` creates
(src/models/gemma4.cpp): layers at or after ``n_layer - shared_kv_layers`` have no
``attn_k``/``attn_v``/``attn_k_norm`` (their KV comes from an earlier layer), full-attention
layers carry ``rope_freqs`` (one tensor in the file, duplicated per layer by the loader),
``output.weight`` is absent (tied to ``token_embd``), and per-layer embeddings add
``per_layer_token_embd`` [n_embd_per_layer * n_layer, n_vocab], ``per_layer_model_proj``,
``per_layer_proj_norm`` and three tensors per layer.

Tensor types for a Q4_K_M file follow ``llama_tensor_get_type`` (src/llama-quant.cpp): tied
token embeddings (``token_embd`` and ``per_layer_token_embd``, category TOKEN_EMBD) take the
output type, Q6_K; ``attn_v`` and ``ffn_down`` take Q6_K on the layers ``use_more_bits``
selects; ``per_layer_model_proj`` stays unquantized; norms stay F32; everything else Q4_K.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.memplan.shape import ModelShape, TensorInfo, tensor_nbytes

__all__ = [
    "BOLT_E4B",
    "Gemma4Layout",
    "Gemma4Types",
    "gemma4_metadata",
    "gemma4_shape",
    "gemma4_tensors",
    "q4_k_m_types",
]


@dataclass(frozen=True)
class Gemma4Layout:
    """Shape numbers of a Gemma 4 model (units: elements, tokens, layers).

    Attributes:
        n_layer: Blocks.
        n_embd: Hidden size.
        n_vocab: Vocabulary size.
        n_head: Query heads (all layers).
        n_head_kv: KV heads per layer.
        head_full: Head size of full-attention layers (K = V).
        head_swa: Head size of sliding-window layers (K = V).
        n_ff: Feed-forward width per layer.
        swa: Sliding-window flag per layer.
        n_swa: Window, tokens.
        shared_kv_layers: Last layers that reuse earlier KV.
        n_embd_per_layer: Per-layer embedding width.
        n_ctx_train: Training context, tokens.

    """

    n_layer: int
    n_embd: int
    n_vocab: int
    n_head: int
    n_head_kv: tuple[int, ...]
    head_full: int
    head_swa: int
    n_ff: tuple[int, ...]
    swa: tuple[bool, ...]
    n_swa: int
    shared_kv_layers: int
    n_embd_per_layer: int
    n_ctx_train: int

    @property
    def n_layer_kv(self) -> int:
        """Layers with their own KV cache (``n_layer_kv_from_start``)."""
        return self.n_layer - self.shared_kv_layers


@dataclass(frozen=True)
class Gemma4Types:
    """ggml type per tensor role; ``more_bits`` layers get ``attn_v_more``/``ffn_down_more``."""

    token_embd: str = "Q6_K"
    per_layer_token_embd: str = "Q6_K"
    per_layer_model_proj: str = "F16"
    matrix: str = "Q4_K"
    attn_v_more: str = "Q6_K"
    ffn_down_more: str = "Q6_K"
    norm: str = "F32"


def _use_more_bits(i_layer: int, n_layers: int) -> bool:
    # src/llama-quant.cpp use_more_bits()
    return i_layer < n_layers // 8 or i_layer >= 7 * n_layers // 8 or (i_layer - n_layers // 8) % 3 == 2


def q4_k_m_types() -> Gemma4Types:
    """Tensor types llama.cpp's Q4_K_M recipe gives a Gemma 4 model (tied embeddings)."""
    return Gemma4Types()


def gemma4_tensors(layout: Gemma4Layout, types: Gemma4Types) -> tuple[TensorInfo, ...]:
    """List the tensors of a ``gemma4`` GGUF, in file order, with shapes in ggml order.

    Args:
        layout: Shape numbers.
        types: ggml type per tensor role.

    Returns:
        One :class:`TensorInfo` per tensor (``nbytes`` from the type's block size).

    Raises:
        ShapeError: a row length that is not a whole number of blocks of its type.

    """
    L, E, P = layout.n_layer, layout.n_embd, layout.n_embd_per_layer
    out: list[TensorInfo] = []

    def add(name: str, ggml_type: str, *shape: int) -> None:
        out.append(TensorInfo(name, ggml_type, tuple(shape), tensor_nbytes(ggml_type, shape)))

    add("token_embd.weight", types.token_embd, E, layout.n_vocab)
    if P:
        add("per_layer_token_embd.weight", types.per_layer_token_embd, P * L, layout.n_vocab)
        add("per_layer_model_proj.weight", types.per_layer_model_proj, E, P * L)
        add("per_layer_proj_norm.weight", types.norm, P)
    add("output_norm.weight", types.norm, E)
    if not all(layout.swa):
        add("rope_freqs.weight", types.norm, layout.head_full // 2)
    n_v = sum(1 for il in range(L) if il < layout.n_layer_kv)
    i_v = 0
    for il in range(L):
        head = layout.head_swa if layout.swa[il] else layout.head_full
        q, kv = head * layout.n_head, head * layout.n_head_kv[il]
        b = f"blk.{il}."
        add(b + "attn_norm.weight", types.norm, E)
        add(b + "attn_q.weight", types.matrix, E, q)
        add(b + "attn_q_norm.weight", types.norm, head)
        if il < layout.n_layer_kv:
            add(b + "attn_k.weight", types.matrix, E, kv)
            add(b + "attn_k_norm.weight", types.norm, head)
            add(b + "attn_v.weight", types.attn_v_more if _use_more_bits(i_v, n_v) else types.matrix, E, kv)
            i_v += 1
        add(b + "attn_output.weight", types.matrix, q, E)
        add(b + "post_attention_norm.weight", types.norm, E)
        add(b + "layer_output_scale.weight", types.norm, 1)
        ff = layout.n_ff[il]
        add(b + "ffn_norm.weight", types.norm, E)
        add(b + "ffn_gate.weight", types.matrix, E, ff)
        add(b + "ffn_up.weight", types.matrix, E, ff)
        add(b + "ffn_down.weight", types.ffn_down_more if _use_more_bits(il, L) else types.matrix, ff, E)
        add(b + "post_ffw_norm.weight", types.norm, E)
        if P:
            add(b + "inp_gate.weight", types.matrix, E, P)
            add(b + "proj.weight", types.matrix, P, E)
            add(b + "post_norm.weight", types.norm, E)
    return tuple(out)


def gemma4_metadata(layout: Gemma4Layout) -> dict[str, int | float | list[int] | list[bool]]:
    """Give the ``gemma4.*`` metadata keys llama.cpp reads for this layout (values typed as in GGUF).

    Keys and defaults: src/models/gemma4.cpp ``load_arch_hparams`` and llama-model.cpp
    ``load_hparams``; names from src/llama-arch.cpp ``LLM_KV_NAMES``.
    """
    a = "gemma4"
    return {
        f"{a}.context_length": layout.n_ctx_train,
        f"{a}.embedding_length": layout.n_embd,
        f"{a}.block_count": layout.n_layer,
        f"{a}.feed_forward_length": list(layout.n_ff),
        f"{a}.attention.head_count": layout.n_head,
        f"{a}.attention.head_count_kv": list(layout.n_head_kv),
        f"{a}.attention.key_length": layout.head_full,
        f"{a}.attention.value_length": layout.head_full,
        f"{a}.attention.key_length_swa": layout.head_swa,
        f"{a}.attention.value_length_swa": layout.head_swa,
        f"{a}.rope.dimension_count": layout.head_full,
        f"{a}.rope.dimension_count_swa": layout.head_swa,
        f"{a}.attention.sliding_window": layout.n_swa,
        f"{a}.attention.sliding_window_pattern": list(layout.swa),
        f"{a}.attention.shared_kv_layers": layout.shared_kv_layers,
        f"{a}.embedding_length_per_layer_input": layout.n_embd_per_layer,
        f"{a}.attention.layer_norm_rms_epsilon": 1e-6,
        f"{a}.rope.freq_base": 1_000_000.0,
        f"{a}.rope.freq_base_swa": 10_000.0,
        f"{a}.final_logit_softcapping": 30.0,
    }


def gemma4_shape(
    layout: Gemma4Layout, types: Gemma4Types, source: str, estimated: bool = True, notes: tuple[str, ...] = ()
) -> ModelShape:
    """Build a :class:`ModelShape` from a layout, without any file (for published shapes)."""
    heads = tuple(layout.head_swa if s else layout.head_full for s in layout.swa)
    return ModelShape(
        arch="gemma4",
        n_layer=layout.n_layer,
        n_embd=layout.n_embd,
        n_vocab=layout.n_vocab,
        n_ctx_train=layout.n_ctx_train,
        n_head=(layout.n_head,) * layout.n_layer,
        n_head_kv=layout.n_head_kv,
        head_k=heads,
        head_v=heads,
        n_ff=layout.n_ff,
        swa=layout.swa,
        n_swa=layout.n_swa,
        n_layer_kv=layout.n_layer_kv,
        n_embd_per_layer=layout.n_embd_per_layer,
        tensors=gemma4_tensors(layout, types),
        source=source,
        estimated=estimated,
        notes=notes,
    )


def _e4b() -> Gemma4Layout:
    n_layer = 42
    return Gemma4Layout(
        n_layer=n_layer,
        n_embd=2560,
        n_vocab=262144,
        n_head=8,
        n_head_kv=(2,) * n_layer,
        head_full=512,
        head_swa=256,
        n_ff=(10240,) * n_layer,
        swa=tuple(il % 6 != 5 for il in range(n_layer)),
        n_swa=512,
        shared_kv_layers=18,
        n_embd_per_layer=256,
        n_ctx_train=131072,
    )


#: Bolt E4B (= Gemma 4 E4B) from its published shape (``docs/facts.md``): 42 layers, hidden
#: 2560, 8 heads, 2 KV heads, head size 256 (sliding) / 512 (global), 5 sliding : 1 global,
#: window 512, the last 18 layers share KV; from the Gemma 4 E4B model
#: config: vocabulary 262144, FFN width 10240, per-layer embedding width 256, 128K training
#: context. Tensor types: llama.cpp's Q4_K_M recipe (module docstring).
BOLT_E4B = _e4b()
