"""Robot configuration: one TOML file, validated with pydantic.

A config file describes one robot: which models to run (a local path, a packaged default
such as ``packaged:smollm2-135m``, or ``hf:owner/repo/file.gguf`` downloaded on first
use), audio, VAD and ASR settings, the LLM, the voice, where skills come from, and the
robot's joints. ``launch/desktop.toml`` is the embedded default (CPU, the three packaged
models, a simulated robot).

Loading happens once, in the entry point; the resulting :class:`Config` is passed down
explicitly. A bad file raises :class:`ConfigError` whose message names the file, the key
and what was expected.

The sections of the robot body and camera (``[robot]``, ``[camera]``, ``[vision]``) are
defined in ``hardware/config.py``, beside the code that uses them (``hardware/`` imports
nothing from ``agent/``); they are re-exported here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from agent.engines.settings import LlamaServerConfig, OpenAIConfig
from hardware.config import (
    CameraConfig,
    DriverConfig,
    JointConfig,
    RobotConfig,
    StrictModel,
    VisionConfig,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (JetPack 6)
    import tomli as tomllib

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_SYSTEM_PROMPT",
    "ASRConfig",
    "AudioConfig",
    "CameraConfig",
    "Config",
    "ConfigError",
    "ConsoleConfig",
    "DriverConfig",
    "JointConfig",
    "LLMConfig",
    "LiveConfig",
    "LlamaServerConfig",
    "OpenAIConfig",
    "RobotConfig",
    "SkillsConfig",
    "StrictModel",
    "TTSConfig",
    "VADConfig",
    "VisionConfig",
    "load_config",
]

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "launch" / "desktop.toml"

DEFAULT_SYSTEM_PROMPT = (
    "You are Bolt, a small friendly robot with a head and two arms. You talk out loud: keep replies short "
    "and plain. When the user asks for something a tool can do, call the tool."
)


class ConfigError(Exception):
    """The config file is missing, not TOML, or has a key with a wrong value."""


class VADConfig(StrictModel):
    """Silero VAD settings (units: probability 0..1, ms, s)."""

    threshold: float = Field(0.5, ge=0.05, le=0.95)
    min_speech_ms: int = Field(250, ge=0)
    min_silence_ms: int = Field(500, ge=50, description="endpointing silence, ms")
    speech_pad_ms: int = Field(400, ge=0, description="pre-roll / post-roll kept around speech, ms")
    max_utterance_s: float = Field(30.0, gt=1.0)


class TurnConfig(StrictModel):
    """End-of-turn detection (units: ms, probability 0..1, log10 probability).

    ``semantic``: after ``short_silence_ms`` of silence the utterance so far is judged
    (:mod:`agent.live.end_of_turn`) on a transcript started at ``early_asr_ms`` of silence
    (Whisper's 0.6 s then overlaps the rest of the wait; the transcript of a pause the user
    talks through is dropped): a finished turn ends at once, an unfinished one
    waits for more speech, ending anyway after ``long_silence_ms``. ``silence``: the turn ends
    after ``[vad] min_silence_ms`` of silence, nothing else (also the fallback when the
    end-of-turn models are missing, with a notice).

    The text thresholds are log10 of the chat model's probability that the user's sentence
    ends where the transcript ends, measured on SmolLM2-135M with the robot's system prompt:
    finished commands -0.1 … -1.9, cut sentences -1.7 … -5.4 (see the module docstring).
    """

    end_of_turn: Literal["semantic", "silence"] = "semantic"
    short_silence_ms: int = Field(200, ge=64, le=1000, description="silence before the turn is judged, ms")
    early_asr_ms: int = Field(
        96,
        ge=0,
        le=1000,
        description="silence after which the utterance so far is transcribed, ahead of the judgement "
        "at short_silence_ms, ms; 0 = transcribe at short_silence_ms",
    )
    long_silence_ms: int = Field(
        1600, ge=300, le=5000, description="silence that ends an unfinished-sounding turn anyway, ms"
    )
    smart_turn_model: str = Field("", description="Smart Turn ONNX path; empty = the one in pipecat-ai")
    smart_turn_threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="complete when p > this (pipecat: 0.5)"
    )
    text_model: str = Field(
        "packaged:smollm2-135m", description='GGUF that scores "does the sentence end here"; "" = off'
    )
    text_complete: float = Field(-1.2, le=0.0, description="text alone says finished at or over this")
    text_with_audio: float = Field(
        -1.6, le=0.0, description="finished when Smart Turn agrees and text is over this"
    )

    @model_validator(mode="after")
    def _early_asr_before_the_judgement(self) -> TurnConfig:
        if self.early_asr_ms and self.early_asr_ms >= self.short_silence_ms:
            raise ValueError(
                f"early_asr_ms ({self.early_asr_ms}) must be below short_silence_ms "
                f"({self.short_silence_ms}), or 0 to transcribe at the judgement"
            )
        return self


class ASRConfig(StrictModel):
    """faster-whisper settings.

    ``temperature`` keeps Whisper's fallback tuple: a segment whose compression ratio or
    mean log-probability fails the thresholds is decoded again at the next temperature.
    """

    model: str = "packaged:whisper-tiny.en"
    language: str = "en"
    device: str = "cpu"
    compute_type: str = "int8"
    threads: int = Field(2, ge=1)
    beam_size: int = Field(
        1,
        ge=1,
        description="1 = greedy (as accurate as beam 5 on the shared commands, 80-90 ms faster per "
        "pause); 5 = Whisper's own default",
    )
    temperature: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    compression_ratio_threshold: float = 2.4
    log_prob_threshold: float = -1.0
    no_speech_threshold: float = 0.6
    hotwords: list[str] = Field(default_factory=list)
    bias_with_skills: bool = True
    bias_mode: Literal["hotwords", "initial_prompt"] = Field(
        "hotwords",
        description="how skill names and the wake phrase reach Whisper: as hotwords, or as a "
        "prompt that reads like earlier speech",
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
    repeat_penalty: float = Field(1.1, ge=1.0, le=2.0)
    # 6, not 4: on SmolLM2-135M "describe_scene" won over "none" by 1.5 logits at 4 (5.5 at 6),
    # too close to survive another CPU's rounding; bench --accuracy is 0.9 at both.
    tool_prior_bonus: float = Field(
        6.0,
        ge=0.0,
        le=20.0,
        description="grammar mode: logit bonus for tools whose name or keywords the user said; 0 = off",
    )
    copy_prior_bonus: float = Field(
        3.0,
        ge=0.0,
        le=20.0,
        description="grammar mode: logit bonus for tokens that continue a tool result the reply is "
        "reading back (agent.copyprior); 0 = off",
    )
    repeat_guard_penalty: float = Field(
        8.0,
        ge=0.0,
        le=50.0,
        description="grammar mode: logit penalty on the token that would go on repeating the previous "
        "reply word for word (agent.copyprior); 0 = off",
    )
    seed: int = 1234
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    tool_format: Literal["auto", "grammar", "bolt", "hermes", "llama3"] = "auto"
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


class TTSConfig(StrictModel):
    """Piper voice settings."""

    voice: str = "packaged:piper-joe-medium"
    length_scale: float = Field(1.0, gt=0.2, le=3.0, description=">1 speaks slower")
    speaker_id: int | None = None
    max_sentences: int = Field(0, ge=0, description="0 = no limit")


class AudioConfig(StrictModel):
    """Audio devices for live mode (name substring or index; None = system default)."""

    input_device: str | int | None = None
    output_device: str | int | None = None
    input_sample_rate: int | None = Field(
        None, ge=8000, le=192000, description="None = the device's own rate, Hz"
    )
    input_channels: int | None = Field(None, ge=1, le=32, description="None = the device's, at most 2")
    output_sample_rate: int | None = Field(
        None, ge=8000, le=192000, description="None = the device's own rate, Hz"
    )
    block_ms: int = Field(20, ge=5, le=200, description="sounddevice block length, ms")
    stall_s: float = Field(3.0, gt=0.1, le=30, description="no mic audio for this long = device lost, s")
    backoff_initial_s: float = Field(0.5, gt=0, le=60, description="first retry after a lost device, s")
    backoff_max_s: float = Field(8.0, gt=0, le=600)


class LiveConfig(StrictModel):
    """``bolt-agent run``: attention, barge-in, echo safety, stop words (units: ms, s, score 0..100).

    Endpointing, pre-roll and the longest utterance come from ``[vad]`` (``min_silence_ms``,
    ``speech_pad_ms``, ``max_utterance_s``).
    """

    attention: Literal["always", "wake"] = "always"
    wake_phrases: list[str] = Field(default_factory=lambda: ["hey robot", "hey bolt", "okay bolt"])
    wake_score: float = Field(80.0, ge=50, le=100, description="fuzzy match score a wake phrase needs")
    follow_up_s: float = Field(
        8.0, ge=0, le=120, description="after a reply, no wake phrase needed for this long"
    )
    barge_in: bool = True
    barge_in_ms: int = Field(
        300, ge=32, le=3000, description="user speech sustained this long stops playback"
    )
    echo_guard: bool = True
    echo_tail_ms: int = Field(
        600, ge=0, le=5000, description="mic is treated as echo this long after playback"
    )
    echo_min_unexplained: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="fraction of mic energy playback must not explain for it to count as user speech",
    )
    echo_max_delay_ms: int = Field(
        800, ge=50, le=3000, description="longest speaker-to-mic delay searched, ms"
    )
    echo_text_score: float = Field(
        75.0,
        ge=50,
        le=100,
        description="transcripts this similar to the robot's own recent speech are dropped",
    )
    stop_phrases: list[str] = Field(
        default_factory=lambda: [
            "stop",
            "freeze",
            "be quiet",
            "quiet",
            "shut up",
            "halt",
            "stop it",
            "stop talking",
            "stop moving",
            "hold still",
            "silence",
            "enough",
        ]
    )
    stop_max_words: int = Field(4, ge=1, le=12, description="longer transcripts go to the model")
    clause_chars: int = Field(
        120, ge=20, le=400, description="a sentence longer than this is cut at a clause"
    )


class SkillsConfig(StrictModel):
    """Where skills come from and which ones are offered to the model.

    ``folders`` are searched in addition to the packaged ``skills/`` folder; relative paths
    are resolved against the config file's folder. ``enabled`` empty means all found.
    """

    folders: list[Path] = Field(default_factory=list)
    include_builtin: bool = True
    enabled: list[str] = Field(default_factory=list)
    timeout_s: float = Field(10.0, gt=0)


class ConsoleConfig(StrictModel):
    """``bolt-agent run --console``: the live web page served by the agent (off unless asked).

    A bind address other than the loopback one requires a token (created at first start in
    ``token_file``, mode 0600; ``None`` = ``~/.config/bolt-agent/console-token``).
    """

    enabled: bool = Field(False, description="serve the console on every run, without --console")
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535, description="0 = any free port")
    token_file: Path | None = None
    queue_events: int = Field(256, ge=8, le=100_000, description="messages kept per browser before dropping")
    rate_per_s: float = Field(5.0, gt=0, description="control requests per second per client")
    burst: int = Field(10, ge=1, description="control requests allowed at once per client")


class Config(StrictModel):
    """The whole robot configuration (one TOML file)."""

    asr: ASRConfig = Field(default_factory=ASRConfig)
    vad: VADConfig = Field(default_factory=VADConfig)
    turn: TurnConfig = Field(default_factory=TurnConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    tts: TTSConfig = Field(default_factory=TTSConfig)
    audio: AudioConfig = Field(default_factory=AudioConfig)
    live: LiveConfig = Field(default_factory=LiveConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    robot: RobotConfig = Field(default_factory=RobotConfig)
    camera: CameraConfig = Field(default_factory=CameraConfig)
    vision: VisionConfig = Field(default_factory=VisionConfig)
    console: ConsoleConfig = Field(default_factory=ConsoleConfig)
    source: Path | None = Field(None, exclude=True, description="file this config was read from")


def _describe(err: dict) -> str:
    key = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key (check its spelling and section)"
    elif "input" in err and not isinstance(err["input"], dict):
        msg = f"{msg} (got {err['input']!r})"
    return f"{key}: {msg}"


def load_config(path: str | Path | None = None) -> Config:
    """Read and validate a robot config file.

    Args:
        path: TOML file; ``None`` loads the embedded ``launch/desktop.toml``.

    Returns:
        The validated :class:`Config`, with relative folders resolved against the file's folder.

    Raises:
        ConfigError: the file is missing or unreadable, not valid TOML, or a key has a bad
            value; the message names the file, the key and what is expected.

    """
    p = Path(path) if path is not None else DEFAULT_CONFIG
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found; pass --config with an existing TOML file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{p}: cannot read config file ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    try:
        cfg = Config.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(_describe(err) for err in e.errors())
        raise ConfigError(f"{p}: {problems}") from None
    base = p.resolve().parent
    cfg.skills.folders = [f if f.is_absolute() else base / f for f in cfg.skills.folders]
    cfg.robot.animation_folders = [f if f.is_absolute() else base / f for f in cfg.robot.animation_folders]
    if cfg.console.token_file is not None and not cfg.console.token_file.is_absolute():
        cfg.console.token_file = base / cfg.console.token_file
    cfg.source = p
    return cfg
