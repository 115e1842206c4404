"""``[vision]`` with ``[vision.vlm]``: which describer, and the vision-language model behind it.

The OpenCV settings of ``[vision]`` live in ``hardware/config.py`` (the camera layer uses
them); this module adds what only the agent uses: ``describer = "vlm"`` and the model that
describes frames in words (:mod:`agent.vision`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent.config.llm import LlamaServerConfig, LLMConfig
from hardware.config import StrictModel, VisionConfig

DEFAULT_VLM_PROMPT = (
    "Describe what you see in one or two short sentences: the people, what they hold or do, "
    "and the notable objects. Plain words, no lists."
)


class VlmConfig(StrictModel):
    """The vision-language model that puts scenes into words (``[vision] describer = "vlm"``).

    Engines: ``chat`` — the chat model's own vision (its projector ``mmproj`` loaded next to it:
    Gemma 4 E4B has a vision encoder, so one model sees and talks); ``llama-server`` — a
    separate VLM (``model`` + ``mmproj``) as its own llama-server child process;
    ``openai`` — an OpenAI-compatible vision endpoint (``url``, ``model`` = its model name).
    """

    engine: Literal["chat", "llama-server", "openai"] = "chat"
    model: str = Field(
        "",
        description='llama-server: the VLM GGUF (path, "hf:owner/repo/file.gguf"); openai: the model name',
    )
    mmproj: str = Field(
        "", description='the projector GGUF (path or "hf:owner/repo/file.gguf"); chat: the chat model\'s'
    )
    mmproj_offload: bool = Field(
        True, description="projector on the GPU (false: CPU, as Gemma 4's needed on an Orin Nano)"
    )
    url: str = Field("http://127.0.0.1:8080", description="openai: base URL, without /v1")
    api_key_env: str = Field("", description="openai: environment variable holding the API key")
    prompt: str = DEFAULT_VLM_PROMPT
    max_tokens: int = Field(48, ge=8, le=256, description="longest description generated, tokens")
    context_tokens: int = Field(
        80, ge=16, le=512, description="longest description kept in the chat model's context, tokens"
    )
    image_size: int = Field(
        0, ge=0, le=4096, description="longest side of a frame sent, px; 0 = the projector's native input"
    )
    frames: int = Field(1, ge=1, le=4, description="frames per description (more only for video models)")
    frame_gap_s: float = Field(0.5, gt=0, le=5, description="spacing of the frames of a clip, s")
    on_arrival: bool = Field(True, description="describe in the background when someone arrives")
    change_threshold: float = Field(
        0.2, ge=0, le=1, description="picture change that starts a background description, 0..1 (0 = off)"
    )
    min_interval_s: float = Field(
        20.0, ge=1, le=3600, description="least time between background descriptions, s"
    )
    describe_timeout_s: float = Field(
        30.0, gt=0, le=600, description="longest wait for a busy describer when asked, s"
    )
    n_ctx: int = Field(4096, ge=512, description="llama-server: the VLM's context, tokens")
    n_gpu_layers: int = Field(-1, ge=-1, description="llama-server: VLM layers on the GPU; -1 = all")
    threads: int = Field(0, ge=0, description="llama-server: CPU threads; 0 = as [llm] threads")
    request_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="openai / llama-server: no answer this long, s"
    )
    server: LlamaServerConfig = Field(default_factory=LlamaServerConfig)


class AgentVisionConfig(VisionConfig):
    """``[vision]``: the OpenCV layer's settings plus the describer choice and ``[vision.vlm]``."""

    describer: Literal["opencv", "vlm"] = Field(
        "opencv", description='"vlm" adds a vision-language model\'s descriptions to the OpenCV layer'
    )
    vlm: VlmConfig = Field(default_factory=VlmConfig)


def vlm_server_llm(vlm: VlmConfig, llm: LLMConfig, model: str) -> LLMConfig:
    """The ``[llm]``-shaped settings a separate VLM's llama-server starts with.

    One place: the agent starts the server with these and the memory planner plans them.

    Flash attention is on: llama-server passes ``-fa`` on to the projector's encoder, and
    without it Qwen3-VL-2B's warmup image reserved 4.4 GiB against 0.31 GiB with it (measured
    with llama.cpp's CPU backend, ``docs/facts.md``, "Vision memory").

    Args:
        vlm: ``[vision.vlm]``.
        llm: ``[llm]`` (threads and the device profile are shared).
        model: The VLM's GGUF, resolved.
    """
    return LLMConfig(
        engine="llama-server",
        model=model,
        n_ctx=vlm.n_ctx,
        threads=vlm.threads or llm.threads,
        n_gpu_layers=vlm.n_gpu_layers,
        flash_attn=True,
        device_profile=llm.device_profile,
        server=vlm.server,
        warmup=False,
    )
