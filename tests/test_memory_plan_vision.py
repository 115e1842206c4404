"""The vision rows of the memory plan against what llama.cpp reports, the Jetson options, the doctor check.

llama.cpp is real throughout: libmtmd (llama-cpp-python 0.3.36) loads each projector in a child
process and logs its ``model size`` and compute buffers and tokenizes frames
(``tests/mtmd_report.py``); llama-server 11434 serves a tiny Gemma 4 with a projector and counts
an image's prompt tokens. Projectors: the random-weight test projectors of
``tests/vision_models.py`` (Gemma 4's ``gemma4v`` and SmolVLM's ``idefics3``), some at real
widths, one with a small audio encoder added (a combined file), and a header-exact sparse copy of
Gemma 4 E4B's published ``mmproj`` (vision + audio, ~0.99 GB apparent, nothing on disk) that
llama.cpp loads at full size. A projector with an audio encoder is compared as the agent loads
it: llama.cpp loads its vision-only copy (``agent/vision/projector.py``), the file the planner
plans.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from gemma4_model import e4b_sparse, tiny_gemma4
from llama_buffers import measure
from mtmd_report import agent_copy, measure_mtmd, sparse_projector, with_audio_encoder
from typer.testing import CliRunner
from vision_models import frame_bytes, gemma4v_projector, idefics3_projector, smollm2_vision_model

from agent.config import load_config
from agent.memplan import (
    PROFILES,
    LLMSettings,
    ProjectorError,
    check_budget,
    image_tokens,
    llm_memory,
    plan_config,
    plan_json,
    plan_table,
    read_gguf_shape,
    read_projector,
    vision_options,
)
from agent.memplan.devices import DeviceProfile
from agent.memplan.projector import encoder_compute, vision_only_shape
from agent.memplan.vision_plan import AUDIO_ENCODER_COMPUTE_MIB, frame_size, kv_bytes_per_token
from agent.memplan.vlm_shapes import (
    GEMMA4_E4B_MMPROJ,
    GEMMA4_E4B_VISION_ONLY,
    QWEN3VL_2B_MMPROJ,
    QWEN3VL_2B_MMPROJ_METADATA,
    gemma4_mmproj_metadata,
    gemma4_mmproj_tensors,
    qwen3vl_mmproj_tensors,
)

MiB = 1024**2
GiB = 1024**3
ROOT = Path(__file__).resolve().parent.parent
TOLERANCE = 0.10
FRAMES = [(512, 288), (224, 126), (1280, 720), (300, 500), (96, 64), (600, 300)]  # 600/48 = 12.5: rounds up

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="session")
def vocab(gemma4_vocab) -> Path:
    return gemma4_vocab


@pytest.fixture(scope="session")
def gemma_tiny(vocab) -> Path:
    return tiny_gemma4(vocab)


@pytest.fixture(scope="session")
def smollm2_vision() -> Path:
    try:
        return smollm2_vision_model()
    except FileNotFoundError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def e4b_mmproj() -> Path:
    """Gemma 4 E4B's published projector shape as a sparse GGUF (vision + audio)."""
    return sparse_projector("mmproj-gemma4-e4b-sparse", gemma4_mmproj_metadata(), gemma4_mmproj_tensors())


def _close(planned: float, reported: float, tol: float = TOLERANCE) -> bool:
    return abs(planned - reported) <= tol * reported


def _pct(planned: float, reported: float) -> str:
    return f"{100 * (planned - reported) / reported:+.1f} %"


# --- projector weights and image tokens against libmtmd -------------------------------------------------


@pytest.mark.parametrize("kind", ["gemma4v", "idefics3", "idefics3-tiled"])
def test_projector_weights_and_image_tokens_match_libmtmd(kind, gemma_tiny, smollm2_vision):
    if kind == "gemma4v":
        model, mmproj = gemma_tiny, gemma4v_projector()
    else:
        model = smollm2_vision
        mmproj = idefics3_projector(preproc_image_size=256 if kind == "idefics3-tiled" else None)
    p = read_projector(mmproj)
    rep = measure_mtmd(model, mmproj, FRAMES)
    print(
        f"{kind}: weights {p.weights / MiB:.3f}/{rep.model_size:.3f} MiB "
        f"({_pct(p.weights / MiB, rep.model_size)})"
    )
    assert p.audio_bytes == 0 and p.file_bytes == p.vision_bytes
    assert _close(p.weights / MiB, rep.model_size, 0.01)
    for i, (w, h) in enumerate(FRAMES):
        f = image_tokens(p, w, h)
        print(
            f"  {w}x{h}: image tokens {f.tokens}/{rep.image_tokens(i)}, "
            f"markers {f.markers}/{rep.text_tokens(i)}"
        )
        assert f.tokens == rep.image_tokens(i), (w, h, rep.frames[i])
        assert f.passes == sum(1 for kind_, _ in rep.frames[i] if kind_ == 1)
        if p.projector == "gemma4v":
            assert f.markers == rep.text_tokens(i) == 2  # <|image> ... <image|>


def test_gemma4v_frames_are_scaled_to_48px_cells_within_70_to_1120_tokens(gemma_tiny):
    p = read_projector(gemma4v_projector())
    assert (p.projector, p.n_merge, p.min_tokens, p.max_tokens) == ("gemma4v", 3, 70, 1120)
    small = image_tokens(p, 512, 288)  # 528x288 = 66 cells < 70: scaled up to 576x336
    assert (small.encoded, small.tokens) == ((576, 336), 84)
    assert image_tokens(p, 1280, 720).tokens == 27 * 15
    assert image_tokens(p, 4000, 3000).tokens <= 1120


def test_image_kv_share_matches_llama_cpps_kv_cache(gemma_tiny):
    """One frame's tokens x the chat model's KV bytes a token, against llama.cpp's KV buffer."""
    case = {"n_ctx": 2048, "n_batch": 256}
    rep = measure(gemma_tiny, **case)
    m = llm_memory(read_gguf_shape(gemma_tiny), LLMSettings(n_ctx=2048, n_batch=256))
    per_token = kv_bytes_per_token(m)
    reported = rep.kv * MiB / 2048  # every cache holds n_ctx cells (swa_full): bytes per token
    frame = image_tokens(read_projector(gemma4v_projector()), 512, 288)
    planned, measured = frame.total * per_token, frame.total * reported
    print(f"image in KV: {planned / 1024:.1f}/{measured / 1024:.1f} KiB ({_pct(planned, measured)})")
    assert _close(planned, measured, 0.01)


# --- encoder compute buffers -------------------------------------------------------------------------------

COMPUTE_CASES = [
    ("gemma4v", {"width": 384, "n_ff": 1536, "n_head": 6, "n_layer": 1}),
    ("gemma4v", {"width": 768, "n_ff": 3072, "n_head": 12, "n_layer": 1}),  # E4B's encoder width
    (
        "idefics3",
        {"image_size": 512, "width": 768, "n_ff": 3072, "n_head": 12, "n_layer": 1, "scale_factor": 4},
    ),
    (
        "idefics3",
        {"image_size": 512, "width": 1152, "n_ff": 4304, "n_head": 16, "n_layer": 1, "scale_factor": 4},
    ),
]


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "no-fa"])
@pytest.mark.parametrize(
    "kind,kw", COMPUTE_CASES, ids=lambda v: v if isinstance(v, str) else str(v.get("width"))
)
def test_encoder_compute_buffer_within_ten_percent(kind, kw, flash_attn, gemma_tiny, smollm2_vision):
    mmproj = gemma4v_projector(**kw) if kind == "gemma4v" else idefics3_projector(**kw)
    model = gemma_tiny if kind == "gemma4v" else smollm2_vision
    p = read_projector(mmproj)
    rep = measure_mtmd(model, mmproj, flash_attn=flash_attn)
    planned = encoder_compute(p, None, flash_attn) / MiB
    print(
        f"{kind} {kw} fa={flash_attn}: compute {planned:.2f}/{rep.compute[0]:.2f} MiB "
        f"({_pct(planned, rep.compute[0])})"
    )
    assert len(rep.compute) == 1 and _close(planned, rep.compute[0])


def _jetson_chat(mmproj: str = "", **llm):
    """jetson/robot.toml seeing with the chat model's own vision (``mmproj`` empty: the published shape)."""
    cfg = load_config(ROOT / "jetson" / "robot.toml")
    cfg = cfg.model_copy(update={"llm": cfg.llm.model_copy(update=llm)}) if llm else cfg
    return _vision_cfg(cfg, engine="chat", mmproj=mmproj)


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "no-fa"])
def test_e4b_projector_as_the_agent_loads_it_at_full_size(flash_attn, e4b_mmproj, vocab):
    """Gemma 4 E4B's mmproj: llama.cpp loads the agent's vision-only copy; weights and buffer as planned."""
    p = read_projector(e4b_mmproj)
    assert (p.projector, p.audio_projector, p.projection_dim) == ("gemma4v", "gemma4a", 2560)
    assert (p.vision_bytes, p.audio_bytes) == (GEMMA4_E4B_MMPROJ.vision_bytes, GEMMA4_E4B_MMPROJ.audio_bytes)
    # the published file is ~992 MB (F16, vision + audio): the tensor list adds up to within 0.5 %
    assert abs(GEMMA4_E4B_MMPROJ.file_bytes - 992e6) < 0.005 * 992e6
    copy, dropped = agent_copy(e4b_mmproj)
    assert dropped == GEMMA4_E4B_MMPROJ.audio_bytes
    # the plan of jetson/robot.toml with this file, and with the published shape (no file here)
    cfg = _jetson_chat(str(e4b_mmproj), flash_attn=flash_attn, cache_type_v="f16")
    v = plan_config(cfg, "orin-nano-8gb").vision
    published = plan_config(_jetson_chat(flash_attn=flash_attn, cache_type_v="f16"), "orin-nano-8gb").vision
    assert v.projector == vision_only_shape(p) and v.projector_file == p
    assert [ln.bytes for ln in v.lines] == [ln.bytes for ln in published.lines]
    assert v.projector.weights == GEMMA4_E4B_VISION_ONLY.weights == read_projector(copy).file_bytes
    rows = {ln.component: ln for ln in v.lines}
    weights = rows["chat model's projector: vision encoder (gemma4v)"]
    compute = rows["chat model's vision encoder compute buffer"]
    assert not any("audio" in ln.component for ln in v.lines)

    rep = measure_mtmd(e4b_sparse(vocab), copy, [(224, 126)], flash_attn=flash_attn)
    assert "has vision encoder" in rep.log and "has audio encoder" not in rep.log
    warmup = encoder_compute(v.projector, None, flash_attn) / MiB  # the row adds the frame's embeddings
    figures = (
        f"E4B vision-only copy fa={flash_attn}: weights {weights.bytes / MiB:.2f}/{rep.model_size:.2f} MiB, "
        f"vision compute {warmup:.2f}/{rep.compute[0]:.2f} ({_pct(warmup, rep.compute[0])}), "
        f"row {compute.bytes / MiB:.2f}"
    )
    print(figures)
    assert _close(weights.bytes / MiB, rep.model_size, 0.001), figures
    assert len(rep.compute) == 1 and _close(warmup, rep.compute[0]), figures
    assert 0 < compute.bytes - warmup * MiB < MiB  # 84 tokens x 2560 f32 of output
    assert rep.image_tokens(0) == v.frame.tokens == image_tokens(GEMMA4_E4B_MMPROJ, 224, 126).tokens == 84


def test_e4b_published_file_whole_for_reference(e4b_mmproj, vocab):
    """The published file loaded whole: the audio encoder the vision row says the copy leaves out."""
    rep = measure_mtmd(e4b_sparse(vocab), e4b_mmproj, flash_attn=True)
    assert "has vision encoder" in rep.log and "has audio encoder" in rep.log
    figures = (
        f"E4B mmproj whole: {GEMMA4_E4B_MMPROJ.weights / MiB:.2f}/{rep.model_size:.2f} MiB, "
        f"audio compute {AUDIO_ENCODER_COMPUTE_MIB}/{rep.compute[1]:.2f}"
    )
    print(figures)
    assert _close(GEMMA4_E4B_MMPROJ.weights / MiB, rep.model_size, 0.001), figures
    assert len(rep.compute) == 2 and _close(AUDIO_ENCODER_COMPUTE_MIB, rep.compute[1], 0.01), figures
    saved = GEMMA4_E4B_MMPROJ.audio_bytes / MiB + AUDIO_ENCODER_COMPUTE_MIB
    row = plan_config(_jetson_chat(), "orin-nano-8gb").vision.lines[1]
    assert f"the agent loads a vision-only copy, {saved:,.0f} MiB less" in row.detail, row.detail
    assert abs(rep.model_size + rep.compute[1] - (GEMMA4_E4B_VISION_ONLY.weights / MiB + saved)) < 1


@pytest.mark.parametrize("flash_attn", [True, False], ids=["fa", "no-fa"])
def test_qwen3vl_published_projector_at_full_size(flash_attn):
    """Cosmos Reason 2 2B's (Qwen3-VL-2B's) projector: 46x46-token warmup, 8464 patches."""
    mmproj = sparse_projector(
        "mmproj-qwen3vl-2b-sparse", QWEN3VL_2B_MMPROJ_METADATA, qwen3vl_mmproj_tensors()
    )
    p = read_projector(mmproj)
    assert (p.projector, p.n_deepstack, p.patch_convs, p.warmup_size) == ("qwen3vl_merger", 3, 2, 1472)
    rep = measure_mtmd(None, mmproj, flash_attn=flash_attn)  # no text model: libmtmd skips the width check
    planned = encoder_compute(QWEN3VL_2B_MMPROJ, None, flash_attn) / MiB
    figures = (
        f"Qwen3-VL-2B mmproj fa={flash_attn}: weights {p.weights / MiB:.2f}/{rep.model_size:.2f} MiB, "
        f"compute {planned:.2f}/{rep.compute[0]:.2f} ({_pct(planned, rep.compute[0])})"
    )
    print(figures)
    assert p.weights == QWEN3VL_2B_MMPROJ.weights and _close(p.weights / MiB, rep.model_size, 0.001), figures
    assert _close(planned, rep.compute[0]), figures
    if not flash_attn:  # the attention scores of 8464 patches x 16 heads: over 4 GiB
        assert rep.compute[0] > 4096


# --- llama-server: the prompt tokens of an image, its own mmproj estimate ---------------------------------


def test_llama_server_counts_the_planned_image_tokens(gemma_tiny, tmp_path):
    from agent.engines.remote.http import request_json
    from agent.engines.remote.server_process import LlamaServerProcess, find_binary

    binary = find_binary()
    if binary is None:
        pytest.skip("llama-server not built: run launch/build_llama_server.sh")
    mmproj = gemma4v_projector()
    log = tmp_path / "server.log"
    args = ["-m", str(gemma_tiny), "--mmproj", str(mmproj), "-c", "1024", "-t", "2", "-np", "1", "-ngl", "0",
            "--jinja", "--no-webui", "-v", "--host", "127.0.0.1"]  # fmt: skip
    proc = LlamaServerProcess(binary, lambda port: [*args, "--port", str(port)], log_file=str(log))
    proc.start()
    try:

        def prompt_tokens(content: list[dict]) -> int:
            body = {
                "messages": [{"role": "user", "content": content}],
                "max_tokens": 1,
                "cache_prompt": False,
            }
            status, data = request_json(proc.url, "POST", "/v1/chat/completions", body, timeout_s=300)
            assert status == 200, data
            return data["usage"]["prompt_tokens"]

        text = [{"type": "text", "text": "Describe"}]
        png = base64.b64encode(frame_bytes(1, (512, 288))).decode()
        image = [*text, {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}]
        with_image, without = prompt_tokens(image), prompt_tokens(text)
    finally:
        proc.stop()
    p = read_projector(mmproj)
    frame = image_tokens(p, 512, 288)
    served = log.read_text(errors="replace")
    estimate = float(served.split("estimated worst-case memory usage of mmproj is ")[1].split()[0])
    planned = (p.weights + encoder_compute(p, None, True)) / MiB  # -fa auto: the encoder uses flash attention
    print(
        f"server: image prompt tokens {frame.total}/{with_image - without}, "
        f"mmproj {planned:.2f}/{estimate:.2f} MiB"
    )
    assert with_image - without == frame.total
    assert _close(planned, estimate)


# --- the plan's rows ------------------------------------------------------------------------------------


def _box(gpu: bool = False, budget: int = 64 * GiB) -> DeviceProfile:
    return DeviceProfile(
        "test", "test box", budget, 0, True, gpu, 400 * MiB if gpu else 0, frozenset(), "test"
    )


def _vision_cfg(base=None, camera: str = "0", **vlm):
    cfg = base or load_config()
    describer = vlm.pop("describer", "vlm")
    v = cfg.vision.model_copy(update={"describer": describer, "vlm": cfg.vision.vlm.model_copy(update=vlm)})
    cam = cfg.camera.model_copy(update={"source": camera, "width": 1280, "height": 720})
    return cfg.model_copy(update={"vision": v, "camera": cam})


def _with_model(cfg, path: Path):
    return cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"model": str(path)})})


def test_chat_engine_rows_come_from_the_projector_file(gemma_tiny):
    mmproj = gemma4v_projector()
    p = read_projector(mmproj)
    cfg = _with_model(_vision_cfg(engine="chat", mmproj=str(mmproj), image_size=512), gemma_tiny)
    plan = plan_config(cfg, _box())
    v = plan.vision
    assert v is not None and v.engine == "chat" and v.projector == p
    rows = {line.component: line for line in v.lines}
    weights = rows["chat model's projector: vision encoder (gemma4v)"]
    assert (weights.bytes, weights.basis, weights.where) == (p.vision_bytes, "GGUF", "host")
    compute = rows["chat model's vision encoder compute buffer"]
    assert compute.bytes == encoder_compute(p, v.frame, cfg.llm.flash_attn)
    assert (v.frame.width, v.frame.height, v.frame.tokens) == (512, 288, 84)
    image = rows["chat model: one frame in its context"]
    assert image.bytes == 84 * 64 * 4 and "of the KV cache above" in image.detail
    assert v.image_kv_bytes == 86 * kv_bytes_per_token(plan.llm)
    assert all(line in plan.lines for line in v.lines) and plan.total == sum(ln.bytes for ln in plan.lines)
    # on a GPU board the projector goes where mmproj_offload says
    # on a GPU board the projector goes where mmproj_offload says, as the embedded engine loads it:
    # on the GPU only when the model has GPU layers too (agent/engines/embedded/model.py)
    gpu = cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"n_gpu_layers": -1})})
    assert {ln.where for ln in plan_config(gpu, _box(gpu=True)).vision.lines[1:3]} == {"GPU"}
    assert {ln.where for ln in plan_config(cfg, _box(gpu=True)).vision.lines[1:3]} == {"host"}  # 0 GPU layers
    cpu = _vision_cfg(gpu, engine="chat", mmproj=str(mmproj), mmproj_offload=False)
    assert {ln.where for ln in plan_config(cpu, _box(gpu=True)).vision.lines[1:3]} == {"host"}
    data = plan_json(plan)["vision"]
    assert data["image_tokens"] == 84 and data["projector"] == "gemma4v" and data["total"] == v.total
    assert "vision: VLM engine chat, projector gemma4v" in plan_table(plan)


@pytest.mark.parametrize("engine", ["chat", "llama-server"])
def test_a_combined_projector_is_planned_as_the_agent_loads_it(engine, gemma_tiny):
    """A projector with an audio encoder: planned as llama.cpp loads the agent's vision-only copy."""
    combined = with_audio_encoder(gemma4v_projector())
    whole = read_projector(combined)
    assert whole.audio_projector == "gemma4a" and whole.audio_bytes > 0
    cfg = _with_model(_vision_cfg(engine=engine, mmproj=str(combined), image_size=512), gemma_tiny)
    if engine == "llama-server":
        cfg = _vision_cfg(cfg, engine=engine, model=str(gemma_tiny), mmproj=str(combined), n_ctx=1024)
    v = plan_config(cfg, _box()).vision
    assert v.projector == vision_only_shape(whole) and v.projector_file == whole
    assert v.audio_left_out == whole.audio_bytes and v.projector.weights == whole.vision_bytes
    assert not any("audio" in ln.component for ln in v.lines)
    who = "chat model's" if engine == "chat" else "VLM"
    weights = next(ln for ln in v.lines if ln.component == f"{who} projector: vision encoder (gemma4v)")
    compute = next(ln for ln in v.lines if ln.component == f"{who} vision encoder compute buffer")
    assert whole.audio_n_embd == 64  # not Gemma 4's 1024-wide encoder: its compute buffer is not known
    assert (
        "the file's gemma4a audio encoder is left out: the agent loads a vision-only copy, "
        f"{whole.audio_bytes / MiB:,.0f} MiB of weights and its compute buffer less" in weights.detail
    )
    data = plan_json(plan_config(cfg, _box()))["vision"]
    assert data["projector_audio_bytes"] == 0 and data["projector_audio_left_out"] == whole.audio_bytes
    assert "vision-only copy: the file's gemma4a audio encoder left out" in plan_table(
        plan_config(cfg, _box())
    )

    copy, dropped = agent_copy(combined)  # what agent/vision/build.py hands llama.cpp
    assert dropped == whole.audio_bytes
    rep = measure_mtmd(gemma_tiny, copy, [(v.frame.width, v.frame.height)], flash_attn=v.flash_attn)
    assert "has vision encoder" in rep.log and "has audio encoder" not in rep.log
    planned = encoder_compute(v.projector, None, v.flash_attn) / MiB
    print(
        f"{engine}: the combined file's copy: weights {weights.bytes / MiB:.3f}/{rep.model_size:.3f} MiB, "
        f"compute {planned:.2f}/{rep.compute[0]:.2f} MiB, tokens {v.frame.tokens}/{rep.image_tokens(0)}"
    )
    assert _close(weights.bytes / MiB, rep.model_size, 0.01)
    assert len(rep.compute) == 1 and _close(planned, rep.compute[0])
    assert compute.bytes == encoder_compute(v.projector, v.frame, v.flash_attn)
    assert rep.image_tokens(0) == v.frame.tokens


def test_opencv_remote_and_no_camera():
    opencv = plan_config(_vision_cfg(describer="opencv"), _box()).vision
    assert opencv.engine == "" and [ln.component for ln in opencv.lines] == ["vision (OpenCV faces + people)"]
    remote = plan_config(_vision_cfg(engine="openai", model="gpt-4o-mini"), _box()).vision
    assert remote.total == opencv.total and remote.engine == "openai"
    assert plan_config(_vision_cfg(camera=""), _box()).vision is None


def test_separate_vlm_is_a_second_model(smollm2_vision):
    """A local VLM (SmolLM2 + an idefics3 projector): weights, KV for its own context, buffers, process."""
    mmproj = idefics3_projector(preproc_image_size=256)
    cfg = _vision_cfg(engine="llama-server", model=str(smollm2_vision), mmproj=str(mmproj), n_ctx=2048)
    v = plan_config(cfg, _box(gpu=True)).vision
    shape = read_gguf_shape(smollm2_vision)
    assert v.vlm == shape and v.vlm_memory.kv_bytes == llm_memory(shape, LLMSettings(n_ctx=2048)).kv_bytes
    names = [ln.component for ln in v.lines]
    assert "VLM KV cache" in names and "VLM llama-server process" in names
    assert "VLM process's GPU runtime (its own CUDA context, cuBLAS)" in names
    # 1280x720 is sent at 256x144 (the projector's longest edge), cut into 2x2 tiles of 128 px + the overview
    assert v.frame.passes == 5 and v.frame.tokens == 5 * 16


def test_published_shapes_when_files_are_absent():
    jetson = load_config(ROOT / "jetson" / "robot.toml")
    chat = plan_config(_vision_cfg(jetson, engine="chat", mmproj=""), "orin-nano-8gb").vision
    # the published E4B mmproj, as the agent loads it: its vision-only copy
    assert chat.projector_file == GEMMA4_E4B_MMPROJ and chat.projector == vision_only_shape(GEMMA4_E4B_MMPROJ)
    assert chat.projector.weights == GEMMA4_E4B_VISION_ONLY.weights and chat.projector.audio_bytes == 0
    assert chat.frame.tokens == 84  # 1280x720 -> 224x126 (native)
    assert [ln.component for ln in chat.lines] == [
        "vision (OpenCV faces + people)",
        "chat model's projector: vision encoder (gemma4v)",
        "chat model's vision encoder compute buffer",
        "chat model: one frame in its context",
    ]
    assert chat.lines[1].bytes == GEMMA4_E4B_MMPROJ.vision_bytes
    assert "[vision.vlm] mmproj not set" in chat.lines[1].detail and "left out" in chat.lines[1].detail
    assert chat.lines[1].basis == "estimate" and chat.lines[2].basis == "llama.cpp"
    assert chat.audio_left_out == GEMMA4_E4B_MMPROJ.audio_bytes
    srv = plan_config(_vision_cfg(jetson, engine="llama-server"), "orin-nano-8gb").vision
    assert srv.projector == QWEN3VL_2B_MMPROJ and srv.vlm.estimated and srv.vlm.arch == "qwen3vl"
    assert 1.0e9 < srv.vlm.weight_bytes < 1.2e9  # Q4_K_M of a 1.7B-parameter text model
    assert 0.75e9 < QWEN3VL_2B_MMPROJ.weights < 0.85e9  # F16 projector of ~0.4B parameters
    assert frame_size(jetson.camera, 512) == (512, 288)  # the size read from the GStreamer pipeline


# --- the Jetson options ----------------------------------------------------------------------------------


def test_jetson_vision_options_verdicts():
    """jetson/robot.toml on an Orin Nano 8 GB: what each way of seeing costs, and which fits."""
    cfg = load_config(ROOT / "jetson" / "robot.toml")
    opts = {o.choice: o for o in vision_options(cfg, "orin-nano-8gb")}
    for o in opts.values():
        print(f"{o.choice}: vision {o.vision_bytes / MiB:.0f} MiB, total {o.plan.total / GiB:.2f} GiB, "
              f"headroom {o.headroom / GiB:+.2f} GiB; {o.verdict.message}")  # fmt: skip
    assert list(opts) == ["none", "chat", "llama-server"]
    assert all(o.plan.device == PROFILES["orin-nano-8gb"] for o in opts.values())
    assert opts["none"].fits and opts["none"].plan.vision.engine == ""
    # the chat model's own vision as the agent loads it: E4B's projector without its audio encoder
    chat = opts["chat"]
    v = chat.plan.vision
    assert v.engine == "chat" and v.projector == vision_only_shape(GEMMA4_E4B_MMPROJ)
    assert v.audio_left_out == GEMMA4_E4B_MMPROJ.audio_bytes
    assert not any("audio" in ln.component for ln in v.lines)
    assert chat.vision_bytes - opts["none"].vision_bytes == sum(ln.bytes for ln in v.lines[1:])
    if cfg.vision.describer == "vlm" and cfg.vision.vlm.engine == "chat":  # what jetson/robot.toml ships
        assert chat.fits and chat.plan.total == plan_config(cfg, "orin-nano-8gb").total
    srv = opts["llama-server"]
    assert srv.plan.vision.flash_attn  # as agent/vision/build.py starts it (vlm_server_llm)
    assert not srv.fits and srv.vision_bytes > 2.5 * GiB and 'describer = "opencv"' in srv.verdict.message
    assert all(
        "-fa" not in o.verdict.message and "vision-only" not in o.verdict.message for o in opts.values()
    )


def test_jetson_chat_vision_at_a_longer_context_names_the_context_that_fits():
    """At 16384 tokens the chat model's own vision is over an Orin Nano's budget: the fix is the context."""
    jetson = load_config(ROOT / "jetson" / "robot.toml")
    cfg = jetson.model_copy(update={"llm": jetson.llm.model_copy(update={"n_ctx": 16384})})
    opts = {o.choice: o for o in vision_options(cfg, "orin-nano-8gb")}
    chat = opts["chat"]
    print(chat.verdict.message)
    assert not chat.fits and "Fix: set [llm] n_ctx = " in chat.verdict.message
    n = int(chat.verdict.message.split("n_ctx = ")[1].split()[0])
    assert 8192 <= n < 16384
    fixed = _vision_cfg(cfg, engine="chat", mmproj="")
    fixed = fixed.model_copy(update={"llm": fixed.llm.model_copy(update={"n_ctx": n})})
    assert plan_config(fixed, "orin-nano-8gb").fits
    assert not plan_config(fixed, "orin-nano-8gb", n_ctx=n + 256).fits


def test_budget_command_shows_the_vision_options():
    from agent.cli import app

    runner = CliRunner()
    jetson = str(ROOT / "jetson" / "robot.toml")
    res = runner.invoke(app, ["budget", "-c", jetson, "-d", "orin-nano-8gb", "--vision-options"])
    assert res.exit_code == 0, res.output
    print(res.output.split("vision options on")[1])
    assert "vision options on orin-nano-8gb" in res.output
    assert "the chat model's own vision (vision-only projector)" in res.output
    assert "a separate 2B VLM (llama-server)" in res.output
    assert "fits, +" in res.output and "OVER, -" in res.output
    res = runner.invoke(app, ["budget", "-c", jetson, "-d", "orin-nano-8gb", "--vision-options", "--json"])
    data = json.loads(res.output)
    assert [o["choice"] for o in data["vision_options"]] == ["none", "chat", "llama-server"]
    assert data["vision_options"][0]["fits"]


def test_a_separate_vlm_runs_with_flash_attention_and_the_fix_when_turned_off():
    """agent/vision/build.py starts the VLM's llama-server with -fa on; extra_args can turn it off."""
    jetson = load_config(ROOT / "jetson" / "robot.toml")
    cfg = _vision_cfg(jetson, engine="llama-server", model="", mmproj="", n_ctx=8192)
    on = plan_config(cfg, _box(gpu=True)).vision
    encoder = next(ln for ln in on.lines if ln.component == "VLM vision encoder compute buffer")
    assert on.flash_attn and "flash attention on" in encoder.detail and encoder.bytes < 0.5 * GiB
    srv = cfg.vision.vlm.server.model_copy(update={"extra_args": ["--no-warmup", "-fa", "off"]})
    off_cfg = _vision_cfg(cfg, server=srv)
    off = plan_config(off_cfg, _box(gpu=True))
    encoder = next(ln for ln in off.vision.lines if ln.component == "VLM vision encoder compute buffer")
    assert not off.vision.flash_attn and encoder.bytes > 4 * GiB and "flash attention off" in encoder.detail
    assert off.vision.total > on.total + 4 * GiB
    # on a board that holds it with flash attention, the fix is taking -fa off out of extra_args
    verdict = check_budget(off_cfg, _box(gpu=True, budget=off.total - GiB))
    assert not verdict.fits, verdict.message
    assert (
        'Fix: set [vision.vlm.server] extra_args = ["--no-warmup"] (no -fa off: the VLM\'s flash attention).'
        in verdict.message
    ), verdict.message
    auto = _vision_cfg(cfg, server=srv.model_copy(update={"extra_args": ["--flash-attn", "auto"]}))
    assert plan_config(auto, _box(gpu=True)).vision.flash_attn


# --- doctor ---------------------------------------------------------------------------------------------


def _doctor_cfg(chat_model: Path | str, **vlm):
    cfg = _vision_cfg(**vlm)
    return cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"model": str(chat_model)})})


def test_doctor_projector_check(gemma_tiny, smollm2_vision, tmp_path):
    from agent.memplan.doctor import check_projector

    good = check_projector(_doctor_cfg(gemma_tiny, engine="chat", mmproj=str(gemma4v_projector())))
    assert (
        good.ok
        and "gemma4v vision encoder" in good.detail
        and "projects to 64 = the chat model's width" in good.detail
    )

    missing = check_projector(_doctor_cfg(gemma_tiny, engine="chat", mmproj=str(tmp_path / "none.gguf")))
    assert not missing.ok and not missing.blocking and "not on this machine" in missing.detail
    assert "[vision.vlm] mmproj" in missing.fix

    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(os.urandom(4096))
    bad = check_projector(_doctor_cfg(gemma_tiny, engine="chat", mmproj=str(garbage)))
    assert not bad.ok and "not a GGUF file" in bad.detail

    model = check_projector(_doctor_cfg(gemma_tiny, engine="chat", mmproj=str(gemma_tiny)))
    assert not model.ok and "not a projector" in model.detail and "gemma4" in model.detail

    wrong = check_projector(
        _doctor_cfg(gemma_tiny, engine="chat", mmproj=str(gemma4v_projector(n_embd_text=576)))
    )
    assert (
        not wrong.ok
        and not wrong.blocking
        and "projects to 576" in wrong.detail
        and "width is 64" in wrong.detail
    )
    assert "another model's projector" in wrong.detail

    combined = check_projector(
        _doctor_cfg(gemma_tiny, engine="chat", mmproj=str(with_audio_encoder(gemma4v_projector())))
    )
    assert combined.ok and "gemma4a audio encoder" in combined.detail
    assert "left out: the agent loads a vision-only copy" in combined.detail

    unset = check_projector(_doctor_cfg(gemma_tiny, engine="chat", mmproj=""))
    assert not unset.ok and "no [vision.vlm] mmproj" in unset.detail

    absent = check_projector(_doctor_cfg(gemma_tiny, engine="chat", mmproj="hf:nobody/nothing/mmproj.gguf"))
    assert not absent.ok and "not downloaded" in absent.detail and "models pull" in absent.fix

    vlm = _doctor_cfg(
        gemma_tiny, engine="llama-server", model=str(smollm2_vision), mmproj=str(idefics3_projector())
    )
    assert check_projector(vlm).ok
    vlm_wrong = _doctor_cfg(
        gemma_tiny, engine="llama-server", model=str(smollm2_vision), mmproj=str(gemma4v_projector())
    )
    check = check_projector(vlm_wrong)
    assert not check.ok and not check.blocking and "VLM's embedding width is 576" in check.detail

    assert check_projector(_doctor_cfg(gemma_tiny, describer="opencv")) is None
    assert check_projector(_doctor_cfg(gemma_tiny, engine="openai")) is None


def test_doctor_rejects_an_audio_only_projector(tmp_path):
    import numpy as np
    from gguf import GGUFWriter

    from agent.memplan.doctor import check_projector

    path = tmp_path / "audio.gguf"
    w = GGUFWriter(path, "clip")
    w.add_bool("clip.has_audio_encoder", True)
    w.add_string("clip.audio.projector_type", "ultravox")
    w.add_tensor("a.conv1d.0.weight", np.zeros((4, 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ProjectorError, match="no vision encoder"):
        read_projector(path)
    check = check_projector(_doctor_cfg("hf:someone/absent/model.gguf", engine="chat", mmproj=str(path)))
    assert not check.ok and "no vision encoder" in check.detail


def test_doctor_runs_the_projector_check_for_a_vlm_config(tmp_path, gemma_tiny):
    from agent.doctor import run_checks

    text = (ROOT / "launch" / "desktop.toml").read_text()
    cfg = tmp_path / "vlm.toml"
    cfg.write_text(
        text
        + f'\n[vision]\ndescriber = "vlm"\n[vision.vlm]\nengine = "chat"\nmmproj = "{tmp_path / "no.gguf"}"\n'
    )
    checks = {c.name: c for c in run_checks(cfg, env={})}
    assert "projector" in checks and not checks["projector"].ok
