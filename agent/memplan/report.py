"""The plan as a table (text or Markdown) and as JSON: what ``bolt-agent budget`` prints.

Each row says where the bytes live (GPU buffer, host memory, or the model file read on
demand) and how the figure was obtained: ``GGUF`` (tensor sizes from the file header),
``llama.cpp`` (llama.cpp's own sizing formula), ``measured`` (recorded on this kind of
machine) or ``estimate``. A plan made from a published shape says so in its header; a
speculative-decoding drafter gets rows of its own and a ``draft`` entry in the JSON, and so
does vision (the OpenCV layer and any vision-language model: ``vision`` in the JSON).
"""

from __future__ import annotations

from typing import Any

from agent.memplan.llm import GiB, MiB
from agent.memplan.plan import Plan
from agent.memplan.vision_plan import VisionPlan

__all__ = ["plan_json", "plan_table"]


def _settings_line(plan: Plan) -> str:
    s = plan.settings
    gpu = "all" if s.n_gpu_layers < 0 else str(s.n_gpu_layers)
    return (
        f"n_ctx {s.n_ctx}, n_batch {s.n_batch}, KV {s.cache_type_k}/{s.cache_type_v}, flash attention "
        f"{'on' if s.flash_attn else 'off'}, swa_full {str(s.swa_full).lower()}, n_gpu_layers {gpu}, "
        f"lazy per-layer embeddings {'on' if s.lazy_per_layer_embd else 'off'}"
    )


def plan_table(plan: Plan, markdown: bool = False) -> str:
    """Render the plan as a table with a verdict line.

    Args:
        plan: From :func:`~agent.memplan.plan.plan_config`.
        markdown: A Markdown table (for READMEs) instead of aligned text.

    Returns:
        Multi-line text; sizes in MiB, totals in GiB.

    """
    m = plan.model
    src = f"model: {m.source}" + (" [estimated]" if m.estimated else "")
    head = [
        f"device: {plan.device.description} - budget {plan.budget / GiB:.2f} GiB "
        f"(RAM {plan.device.ram / GiB:.2f} GiB - reserve {plan.device.reserve / GiB:.2f} GiB)",
        src,
        f"{m.arch}: {m.n_layer} layers ({sum(m.swa)} sliding-window, window {m.n_swa}; "
        f"{m.n_layer - m.n_layer_kv} share KV), vocabulary {m.n_vocab}",
        "settings: " + _settings_line(plan),
    ]
    if plan.draft is not None:
        d = plan.draft
        src = d.model.source if d.model is not None else "file not on this machine [estimated]"
        head.append(
            f"drafter: {d.ref} ({d.spec_type}; {src}), context {d.settings.n_ctx}, "
            f"KV {d.settings.cache_type_k}/{d.settings.cache_type_v}"
        )
    if plan.vision is not None:
        head.append("vision: " + _vision_line(plan.vision))
    verdict = f"total {plan.total / GiB:.2f} GiB of {plan.budget / GiB:.2f} GiB: " + (
        f"fits, {plan.headroom / GiB:.2f} GiB free"
        if plan.fits
        else f"OVER BUDGET by {-plan.headroom / GiB:.2f} GiB"
    )
    rows = [
        (line.component, line.where, f"{line.bytes / MiB:,.0f}", line.basis, line.detail)
        for line in plan.lines
    ]
    if markdown:
        out = [
            *(f"{h}  " for h in head),
            "",
            "| component | where | MiB | basis | detail |",
            "|---|---|---:|---|---|",
        ]
        out += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
        out += [f"| **total** | | **{plan.total / MiB:,.0f}** | | |", "", f"**{verdict}**"]
        return "\n".join(out)
    widths = [max(len(r[i]) for r in [*rows, ("component", "where", "MiB", "basis", "")]) for i in range(4)]
    fmt = f"{{:<{widths[0]}}}  {{:<{widths[1]}}}  {{:>{widths[2]}}}  {{:<{widths[3]}}}  {{}}"
    out = [*head, "", fmt.format("component", "where", "MiB", "basis", "detail")]
    out += [fmt.format(*r).rstrip() for r in rows]
    out += [fmt.format("total", "", f"{plan.total / MiB:,.0f}", "", "").rstrip(), "", verdict]
    return "\n".join(out)


def _vision_line(v: VisionPlan) -> str:
    if v.describer != "vlm":
        return "OpenCV describer (no vision-language model)"
    out = f"VLM engine {v.engine}"
    if v.projector is not None:
        p = v.projector
        out += f", projector {p.projector}" + (f" + {p.audio_projector} audio" if p.audio_projector else "")
        out += " [estimated]" if p.estimated else ""
        file = v.projector_file
        if v.audio_left_out and file is not None:
            out += f" (vision-only copy: the file's {file.audio_projector} audio encoder left out)"
    if v.frame is not None:
        f = v.frame
        out += f"; a {f.width}x{f.height} frame = {f.tokens} image tokens ({f.passes} encoder pass"
        out += "es)" if f.passes > 1 else ")"
    return out


def _vision_json(plan: Plan) -> dict[str, Any] | None:
    v = plan.vision
    if v is None:
        return None
    p, f = v.projector, v.frame
    return {
        "describer": v.describer,
        "engine": v.engine,
        "projector": p.projector if p is not None else None,
        "audio_projector": (p.audio_projector or None) if p is not None else None,
        "estimated": p.estimated if p is not None else None,
        "projector_vision_bytes": p.vision_bytes if p is not None else None,
        "projector_audio_bytes": p.audio_bytes if p is not None else None,
        "projector_audio_left_out": v.audio_left_out if p is not None else None,
        "frame": [f.width, f.height] if f is not None else None,
        "image_tokens": f.tokens if f is not None else None,
        "image_kv_bytes": v.image_kv_bytes if f is not None else None,
        "total": v.total,
    }


def _draft_json(plan: Plan) -> dict[str, Any] | None:
    d = plan.draft
    if d is None:
        return None
    m = d.memory
    return {
        "model": d.ref,
        "spec_type": d.spec_type,
        "estimated": m is None,
        "n_ctx": d.settings.n_ctx,
        "cache_type_k": d.settings.cache_type_k,
        "cache_type_v": d.settings.cache_type_v,
        "weights": m.weights if m is not None else None,
        "kv": m.kv_bytes if m is not None else None,
        "compute": m.compute if m is not None else None,
        "output": m.output if m is not None else None,
        "shared_with_model": d.shared,
        "total": d.total,
    }


def plan_json(plan: Plan) -> dict[str, Any]:
    """Render the plan as a JSON-ready dict (bytes as ints; ``fits``, ``total``, ``budget``, ``lines``).

    ``vision`` is None without a camera, else the describer, the VLM engine, the projector's
    type and bytes as loaded (the vision-only copy: ``projector_audio_bytes`` 0), the audio
    encoder bytes that copy leaves out of the file (``projector_audio_left_out``), the frame sent,
    its image tokens and their share of the KV cache, and what its rows count (``total``).
    ``draft`` is None without a drafter, else its model, speculative type, context, cache types
    and bytes (``weights``, ``kv``, ``compute``, ``output``: None when estimated without its
    file; ``total``: what its rows count).
    """
    s = plan.settings
    return {
        "device": plan.device.name,
        "budget": plan.budget,
        "total": plan.total,
        "fits": plan.fits,
        "model": plan.model.source,
        "estimated_shape": plan.model.estimated,
        "arch": plan.model.arch,
        "settings": {
            "n_ctx": s.n_ctx,
            "n_batch": s.n_batch,
            "n_ubatch": s.ubatch,
            "n_gpu_layers": s.n_gpu_layers,
            "cache_type_k": s.cache_type_k,
            "cache_type_v": s.cache_type_v,
            "flash_attn": s.flash_attn,
            "swa_full": s.swa_full,
            "lazy_per_layer_embd": s.lazy_per_layer_embd,
        },
        "llm": {
            "weights_gpu": plan.llm.weights_gpu,
            "weights_host": plan.llm.weights_host,
            "weights_lazy": plan.llm.weights_lazy,
            "repack": plan.llm.repack,
            "kv": plan.llm.kv_bytes,
            "compute": plan.llm.compute,
            "output": plan.llm.output,
        },
        "draft": _draft_json(plan),
        "vision": _vision_json(plan),
        "lines": [
            {
                "component": line.component,
                "where": line.where,
                "bytes": line.bytes,
                "basis": line.basis,
                "detail": line.detail,
            }
            for line in plan.lines
        ],
    }
