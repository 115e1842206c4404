"""The memory plan of a whole robot config on a device, its verdict, and ``n_ctx = "fit"``.

:func:`plan_config` adds up the LLM (:mod:`agent.memplan.llm`), the other components
(:mod:`agent.memplan.components`), vision (:mod:`agent.memplan.vision_plan`: OpenCV and any
vision-language model) and the GPU runtime, and compares the total with the
device's budget (:mod:`agent.memplan.devices`; on unified memory every byte counts against
the one DRAM). When the plan is over budget, :func:`check_budget` re-plans with each fix
applied, least harmful first (a separate VLM's flash attention back on where ``[vision.vlm.server]
extra_args`` turned it off, ASR on the CPU, lazy per-layer embeddings, a smaller batch, a q8_0 KV
cache, dropping the drafter, a shorter VLM context, a shorter context) and names the first fix,
or the shortest run of fixes, that brings it under budget; when none does and a VLM is planned,
it also names dropping it. Fewer GPU layers is not offered: on
unified memory a layer moved to the CPU costs the same DRAM (and llama.cpp keeps the output layer on the GPU
whenever ``n_gpu_layers >= 1``), and the planner models no discrete GPU.

Which model is planned: the GGUF the config names when it is on this machine (a local path,
a packaged model, or an ``hf:`` file already in the Hugging Face cache); nothing is
downloaded. For Bolt E4B's reference, when the file is absent, the plan uses its published
shape (:data:`agent.memplan.gemma4.BOLT_E4B`) and says so. With ``engine = "llama-server"``
and a drafter (``[llm.server] draft_model``) the drafter's weights, KV cache and buffers are
planned too (:mod:`agent.memplan.draft`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.memplan.components import Line, local_model, model_shape_at, other_components
from agent.memplan.devices import DeviceProfile, get_device
from agent.memplan.draft import DraftPlan, plan_draft, server_outputs
from agent.memplan.gemma4 import BOLT_E4B, gemma4_shape, q4_k_m_types
from agent.memplan.llm import LAZY_RESIDENT_SHARE, GiB, LLMMemory, LLMSettings, MiB, llm_memory
from agent.memplan.shape import ModelShape, ShapeError
from agent.memplan.vision_plan import VisionPlan, plan_vision
from agent.models import BOLT_E4B_REF

if TYPE_CHECKING:
    from agent.config import Config, LLMConfig

__all__ = [
    "FIT_MAX_CTX",
    "FIT_MIN_CTX",
    "BudgetVerdict",
    "Plan",
    "PlanError",
    "check_budget",
    "load_model_shape",
    "plan_config",
    "resolve_n_ctx",
    "settings_from_config",
]

FIT_MIN_CTX = 2048  # system prompt + tool declarations + a few turns (tokens)
FIT_MAX_CTX = 65536  # the [llm] n_ctx limit


class PlanError(Exception):
    """No plan can be made (model file absent and no published shape, unreadable GGUF, bad device)."""


@dataclass(frozen=True)
class Plan:
    """A memory plan: rows, total and budget (bytes).

    Attributes:
        device: The device profile.
        model: The model's shape (``model.estimated``: from a published shape, not a file).
        settings: llama.cpp settings planned for (``n_ctx`` resolved).
        llm: The LLM breakdown.
        lines: Every row, LLM first.
        total: Sum of ``lines``.
        budget: What the device allows.
        draft: The speculative-decoding drafter's part (its rows are in ``lines``), or None.
        vision: The camera's part: OpenCV and any vision-language model (rows in ``lines``), or
            None without a camera.

    """

    device: DeviceProfile
    model: ModelShape
    settings: LLMSettings
    llm: LLMMemory
    lines: tuple[Line, ...]
    total: int
    budget: int
    draft: DraftPlan | None = None
    vision: VisionPlan | None = None

    @property
    def fits(self) -> bool:
        """True when the total is within the budget."""
        return self.total <= self.budget

    @property
    def headroom(self) -> int:
        """``budget - total`` (negative when over budget)."""
        return self.budget - self.total


@dataclass(frozen=True)
class BudgetVerdict:
    """What ``run`` needs to know before loading anything.

    Attributes:
        fits: Start (True) or refuse (False). Also True when no plan could be made.
        message: One line: the totals, and when over budget the fix to make.
        plan: The plan, or None when none could be made (``message`` says why).

    """

    fits: bool
    message: str
    plan: Plan | None = None


PUBLISHED = {
    BOLT_E4B_REF: (
        BOLT_E4B,
        "published shape of Bolt E4B (docs/facts.md; vocabulary, FFN and per-layer widths from the Gemma 4 "
        "E4B config), Q4_K_M tensor types per llama.cpp's recipe; not read from the GGUF",
    ),
}


def load_model_shape(ref: str) -> ModelShape:
    """Read the ``[llm] model`` reference's shape: from its GGUF if local, else a published shape.

    Raises:
        PlanError: the file is not on this machine and no published shape is known, or it
            cannot be read as GGUF.

    """
    path = local_model(ref)
    if path is not None and path.is_file():
        try:
            return model_shape_at(path)
        except ShapeError as e:
            raise PlanError(str(e)) from None
    if ref in PUBLISHED:
        layout, source = PUBLISHED[ref]
        return gemma4_shape(layout, q4_k_m_types(), source=source, estimated=True)
    raise PlanError(
        f"{ref}: the model file is not on this machine (it is downloaded at the first run); "
        f"no plan without its GGUF header"
    )


def settings_from_config(llm: LLMConfig, n_ctx: int | None = None) -> LLMSettings:
    """:class:`LLMSettings` from an ``[llm]`` section (``n_ctx`` overrides a ``"fit"`` value).

    Lazy per-layer embeddings are on with ``lazy_per_layer_embd = true``, or with the
    ``llama-server`` engine and ``[llm.server] lazy_mode = "on"`` (the server's ``-lzm on``).
    llama-server reserves its compute graph for fewer outputs than llama-cpp-python
    (:func:`~agent.memplan.draft.server_outputs`).
    """
    ctx = n_ctx if n_ctx is not None else llm.n_ctx
    if not isinstance(ctx, int):
        ctx = FIT_MIN_CTX
    srv = getattr(llm, "server", None)
    lazy = getattr(llm, "lazy_per_layer_embd", False) or (
        getattr(llm, "engine", "embedded") == "llama-server" and getattr(srv, "lazy_mode", "") == "on"
    )
    return LLMSettings(
        n_ctx=ctx,
        n_batch=llm.n_batch,
        n_ubatch=512,
        n_gpu_layers=llm.n_gpu_layers,
        cache_type_k=getattr(llm, "cache_type_k", "f16"),
        cache_type_v=getattr(llm, "cache_type_v", "f16"),
        flash_attn=getattr(llm, "flash_attn", False),
        swa_full=getattr(llm, "swa_full", True),
        lazy_per_layer_embd=lazy,
        n_outputs=server_outputs(llm)[0] if getattr(llm, "engine", "embedded") == "llama-server" else 0,
    )


def _llm_lines(shape: ModelShape, s: LLMSettings, m: LLMMemory, kv_where: str) -> list[Line]:
    basis = "estimate" if shape.estimated else "GGUF"
    lines = []
    if m.weights_gpu:
        out = " + output" if m.output_on_gpu else ""
        lines.append(
            Line(
                f"LLM weights on the GPU ({m.gpu_layers}/{shape.n_layer} layers{out})",
                "GPU",
                m.weights_gpu,
                basis,
                "; ".join(m.notes),
            )
        )
    host_what = (
        "token + per-layer embeddings"
        if shape.n_embd_per_layer and not s.lazy_per_layer_embd
        else "token embeddings"
    )
    if m.gpu_layers < shape.n_layer:
        host_what += f", {shape.n_layer - m.gpu_layers} CPU layers"
    lines.append(Line(f"LLM weights in host memory ({host_what})", "host", m.weights_host, basis, "mapped"))
    if m.repack:
        lines.append(
            Line("LLM CPU repacked weight copies", "host", m.repack, basis, "ggml CPU_REPACK buffer")
        )
    if m.weights_lazy:
        lines.append(
            Line(
                "LLM per-layer embeddings, read on demand",
                "disk",
                m.lazy_working_set,
                "estimate",
                f"{m.weights_lazy / MiB:.0f} MiB in the file; counted: {LAZY_RESIDENT_SHARE:.0%} resident "
                f"(page cache), from llama.cpp PR 27794's peak saving on E4B (7.37 -> 6.16 GB of ~1.9 GB)",
            )
        )
    for c in m.kv:
        kind = "sliding-window" if c.name == "swa" else "full-attention"
        lines.append(
            Line(
                f"KV cache, {kind} layers",
                kv_where,
                c.bytes,
                "llama.cpp",
                f"{c.cells} cells x {c.layers} layers, K {s.cache_type_k}, V {s.cache_type_v}",
            )
        )
    detail = f"ubatch {s.ubatch} tokens, flash attention {'on' if s.flash_attn else 'off'}"
    if s.n_outputs:  # llama-server reserves fewer logit rows than tokens
        detail += f", {s.outputs} outputs"
    if m.compute_gpu:
        lines.append(Line("LLM compute buffer (GPU)", "GPU", m.compute_gpu, "llama.cpp", detail))
    lines.append(
        Line(
            "LLM compute buffer (host)",
            "host",
            m.compute_host,
            "llama.cpp" if not m.compute_gpu else "estimate",
            detail,
        )
    )
    lines.append(Line("LLM logits buffer", "host", m.output, "llama.cpp", f"{shape.n_vocab} x f32"))
    return lines


def plan_config(
    cfg: Config,
    device: DeviceProfile | str | None = None,
    *,
    shape: ModelShape | None = None,
    n_ctx: int | None = None,
) -> Plan:
    """Plan the memory of a whole config on a device.

    Args:
        cfg: The :class:`~agent.config.Config`.
        device: A profile or its name; None = ``[llm] device_profile``.
        shape: The model's shape (default: :func:`load_model_shape` of ``[llm] model``).
        n_ctx: Context to plan for (default: ``[llm] n_ctx``; ``"fit"`` is resolved first).

    Returns:
        The :class:`Plan`.

    Raises:
        PlanError: no model shape, or an unknown device profile.

    """
    if device is None or isinstance(device, str):
        try:
            device = get_device(device or getattr(cfg.llm, "device_profile", "this"))
        except ValueError as e:
            raise PlanError(str(e)) from None
    shape = shape or load_model_shape(cfg.llm.model)
    if n_ctx is None and not isinstance(cfg.llm.n_ctx, int):
        n_ctx = _fit(cfg, device, shape)
    s = settings_from_config(cfg.llm, n_ctx)
    return _plan(cfg, device, shape, s)


def _plan(cfg: Config, device: DeviceProfile, shape: ModelShape, s: LLMSettings) -> Plan:
    m = llm_memory(shape, s, has_gpu=device.has_gpu, repack_types=device.repack_types)
    lines = _llm_lines(shape, s, m, "GPU" if m.kv_on_gpu else "host")
    path = None if shape.estimated else local_model(cfg.llm.model)
    draft = plan_draft(cfg.llm, device, s, path, m.weights_host, shape.n_vocab)
    draft_on_gpu = draft is not None and any(line.where == "GPU" for line in draft.lines)
    if device.has_gpu and (m.gpu_layers or draft_on_gpu):
        lines.append(Line("GPU runtime (CUDA context, cuBLAS)", "GPU", device.gpu_runtime, "estimate"))
    if draft is not None:
        lines += draft.lines
    lines += other_components(cfg, device.repack_types, path, m.weights_host)
    vision = plan_vision(cfg, device, shape, s, m)
    if vision is not None:
        lines += vision.lines
    total = sum(line.bytes for line in lines)
    return Plan(device, shape, s, m, tuple(lines), total, device.budget, draft, vision)


def _fit(cfg: Config, device: DeviceProfile, shape: ModelShape) -> int:
    """Largest context (multiple of 256, FIT_MIN_CTX..FIT_MAX_CTX and the training context) that fits."""
    hi = min(FIT_MAX_CTX, shape.n_ctx_train or FIT_MAX_CTX) // 256
    lo = FIT_MIN_CTX // 256
    if hi < lo or not _plan(cfg, device, shape, settings_from_config(cfg.llm, lo * 256)).fits:
        return FIT_MIN_CTX
    while lo < hi:  # memory grows with n_ctx: binary search the last fitting multiple of 256
        mid = (lo + hi + 1) // 2
        if _plan(cfg, device, shape, settings_from_config(cfg.llm, mid * 256)).fits:
            lo = mid
        else:
            hi = mid - 1
    return lo * 256


def resolve_n_ctx(cfg: Config, device: DeviceProfile | str | None = None) -> int:
    """``[llm] n_ctx`` as an int: itself, or for ``"fit"`` the largest context that fits the device.

    Call it once after loading the config and before anything reads ``cfg.llm.n_ctx``
    (``ChatModel``, ``Conversation.fit_context``), e.g.
    ``cfg.llm = cfg.llm.model_copy(update={"n_ctx": resolve_n_ctx(cfg)})``.

    Returns:
        Tokens. For ``"fit"``: a multiple of 256 between 2048 and 65536 (and the model's
        training context); 2048 when even that does not fit (:func:`check_budget` then says
        what to change); 4096 when no plan can be made (model not on this machine).

    """
    if isinstance(cfg.llm.n_ctx, int):
        return cfg.llm.n_ctx
    try:
        dev = device if isinstance(device, DeviceProfile) else get_device(device or cfg.llm.device_profile)
        return _fit(cfg, dev, load_model_shape(cfg.llm.model))
    except (PlanError, ValueError):
        return 4096


def _fixes(cfg: Config, shape: ModelShape, plan: Plan) -> list[tuple[str, Callable[[Config], Config]]]:
    """Candidate fixes, least harmful first: (config text, function cfg -> cfg)."""
    llm, out = cfg.llm, []

    def upd(section: str, **kw: object) -> Callable[[Config], Config]:
        return lambda c: c.model_copy(update={section: getattr(c, section).model_copy(update=kw)})

    if getattr(cfg.asr, "device", "cpu") != "cpu":
        out.append(('[asr] device = "cpu"', upd("asr", device="cpu")))
    if shape.n_embd_per_layer and not plan.settings.lazy_per_layer_embd:
        out.append(("[llm] lazy_per_layer_embd = true", upd("llm", lazy_per_layer_embd=True)))
    if llm.n_batch > 256 and plan.llm.compute > 128 * MiB:
        out.append(("[llm] n_batch = 256", upd("llm", n_batch=256)))
    if getattr(llm, "cache_type_k", "f16") != "q8_0" or getattr(llm, "cache_type_v", "f16") != "q8_0":
        out.append(
            (
                '[llm] cache_type_k = cache_type_v = "q8_0" with flash_attn = true',
                upd("llm", cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=True),
            )
        )
    if plan.draft is not None:  # faster replies are worth less than a context that holds the conversation
        drafting = any(t.startswith("draft-") for t in llm.server.spec_type.split(","))
        spec = ' and spec_type = "auto"' if drafting else ""

        def no_draft(c: Config) -> Config:
            srv = c.llm.server.model_copy(update={"draft_model": "", "spec_type": "auto"})
            return c.model_copy(update={"llm": c.llm.model_copy(update={"server": srv})})

        out.append((f'[llm.server] draft_model = ""{spec} (drop the drafter)', no_draft))
    vis = plan.vision
    if vis is not None and vis.engine == "llama-server" and not vis.flash_attn:
        # the VLM's llama-server runs with -fa on (vlm_server_llm); only extra_args turn it off
        kept = _without_fa(list(cfg.vision.vlm.server.extra_args))

        def vlm_fa(c: Config) -> Config:
            srv = c.vision.vlm.server.model_copy(update={"extra_args": kept})
            vlm = c.vision.vlm.model_copy(update={"server": srv})
            return c.model_copy(update={"vision": c.vision.model_copy(update={"vlm": vlm})})

        text = f"[vision.vlm.server] extra_args = {json.dumps(kept)} (no -fa off: the VLM's flash attention)"
        out.insert(0, (text, vlm_fa))
    if vis is not None and vis.engine == "llama-server" and vis.n_ctx > 2048:  # a description needs little

        def vlm_ctx(c: Config) -> Config:
            vlm = c.vision.vlm.model_copy(update={"n_ctx": 2048})
            return c.model_copy(update={"vision": c.vision.model_copy(update={"vlm": vlm})})

        out.append(("[vision.vlm] n_ctx = 2048", vlm_ctx))
    return out


def _without_fa(args: list[str]) -> list[str]:
    """``extra_args`` without its ``-fa``/``--flash-attn`` overrides (and their values)."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-fa", "--flash-attn"):
            skip = True
        else:
            out.append(arg)
    return out


def _gib(n: int) -> str:
    return f"{n / GiB:.2f} GiB"


def _vision_hint(plan: Plan) -> str:
    """What else frees memory when a vision-language model is planned."""
    v = plan.vision
    if v is None or v.describer != "vlm":
        return ""
    return '; or drop the VLM ([vision] describer = "opencv")'


def check_budget(cfg: Config, device: DeviceProfile | str | None = None) -> BudgetVerdict:
    """Whether the config fits the device, with one message naming the fix when it does not.

    ``run`` calls it before loading any model and refuses to start when ``fits`` is False.
    A plan that cannot be made (model not downloaded yet, unknown architecture) does not
    block: ``fits`` is True and the message says why there is no plan.

    Args:
        cfg: The :class:`~agent.config.Config` (``n_ctx = "fit"`` is resolved here too).
        device: Profile or name; None = ``[llm] device_profile``.

    Returns:
        The :class:`BudgetVerdict`.

    """
    try:
        plan = plan_config(cfg, device)
    except PlanError as e:
        return BudgetVerdict(True, f"memory not planned: {e}", None)
    head = f"memory plan on {plan.device.name}: {_gib(plan.total)} of {_gib(plan.budget)}" + (
        " (from the published model shape)" if plan.model.estimated else ""
    )
    if plan.fits:
        return BudgetVerdict(True, f"{head}, {_gib(plan.headroom)} free", plan)
    over = f"{head}: {_gib(-plan.headroom)} over budget"
    applied: list[str] = []
    current = cfg
    for text, fix in _fixes(cfg, plan.model, plan):
        current = fix(current)
        applied.append(text)
        if plan_config(current, plan.device, shape=plan.model, n_ctx=plan.settings.n_ctx).fits:
            return BudgetVerdict(False, f"{over}. Fix: set {' and '.join(applied)}.", plan)
    n_fit = _fit(current, plan.device, plan.model)
    if plan_config(current, plan.device, shape=plan.model, n_ctx=n_fit).fits:
        ctx = f'[llm] n_ctx = {n_fit} (or "fit")'
        return BudgetVerdict(False, f"{over}. Fix: set {' and '.join([*applied, ctx])}.", plan)
    return BudgetVerdict(
        False,
        f"{over}; it does not fit even with {', '.join(applied) or 'the smallest context'} "
        f"and [llm] n_ctx = {FIT_MIN_CTX}: use a smaller model or a larger board{_vision_hint(plan)}.",
        plan,
    )
