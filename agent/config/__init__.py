"""Robot configuration: one TOML file, validated with pydantic.

A config file describes one robot: which models to run (a local path, a packaged default
such as ``packaged:smollm2-135m``, or ``hf:owner/repo/file.gguf`` downloaded on first
use), audio, VAD and ASR settings, the LLM, the voice, where skills come from, and the
robot's joints. ``launch/desktop.toml`` is the embedded default (CPU, the three packaged
models, a simulated robot).

Loading happens once, in the entry point; the resulting :class:`Config` is passed down
explicitly. A bad file raises :class:`ConfigError` whose message names the file, the key
and what was expected.

One module per group of sections, all re-exported here:

* :mod:`~agent.config.speech` — ``[asr]``, ``[vad]``, ``[turn]``, ``[tts]``;
* :mod:`~agent.config.llm` — ``[llm]`` with ``[llm.server]`` and ``[llm.openai]``;
* :mod:`~agent.config.live` — ``[audio]``, ``[live]``;
* :mod:`~agent.config.app` — ``[agent]``, ``[skills]``, ``[console]``, ``[state]``;
* :mod:`~agent.config.vlm` — ``[vision]``'s describer and ``[vision.vlm]``;
* ``hardware/config.py`` — ``[robot]``, ``[camera]``, ``[vision]``'s OpenCV layer, beside the code that uses
  them (``hardware/`` imports nothing from ``agent/``).

This package is the bottom of ``agent/``: it imports nothing else of the agent.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, Field, ValidationError, model_validator

from agent.config.app import AgentConfig, ConsoleConfig, SkillsConfig, StateConfig
from agent.config.live import AudioConfig, LiveConfig
from agent.config.llm import DEFAULT_SYSTEM_PROMPT, LlamaServerConfig, LLMConfig, OpenAIConfig
from agent.config.speech import ASRConfig, TTSConfig, TurnConfig, VADConfig
from agent.config.vlm import AgentVisionConfig, VlmConfig
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
    "AgentConfig",
    "DEFAULT_SYSTEM_PROMPT",
    "ASRConfig",
    "AgentVisionConfig",
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
    "StateConfig",
    "StrictModel",
    "TTSConfig",
    "VADConfig",
    "VisionConfig",
    "VlmConfig",
    "load_config",
]

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "launch" / "desktop.toml"


class ConfigError(Exception):
    """The config file is missing, not TOML, or has a key with a wrong value."""


class Config(StrictModel):
    """The whole robot configuration (one TOML file).

    ``{name}`` in ``[llm] system_prompt`` is replaced by ``[agent] name`` when it is loaded.
    """

    agent: AgentConfig = Field(default_factory=AgentConfig)
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
    vision: AgentVisionConfig = Field(default_factory=AgentVisionConfig)
    console: ConsoleConfig = Field(default_factory=ConsoleConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    source: Path | None = Field(None, exclude=True, description="file this config was read from")

    @model_validator(mode="after")
    def _named(self) -> Config:
        """The system prompt calls the robot by its name: ``{name}`` becomes ``[agent] name``."""
        if "{name}" in self.llm.system_prompt:
            prompt = self.llm.system_prompt.replace("{name}", self.agent.name)
            self.llm = self.llm.model_copy(update={"system_prompt": prompt})
        return self

    def devices(self) -> frozenset[str]:
        """The devices this robot is configured with, as skills name them in ``@skill(needs=...)``.

        ``"camera"`` when ``[camera] source`` is set and ``[vision]`` is enabled (a camera that is
        configured but not plugged in still counts: it is reconnected in the background).
        """
        return frozenset({"camera"} if self.camera.source and self.vision.enabled else ())


def _section_model(loc: tuple) -> type[BaseModel] | None:
    """The model of the section that holds the key at ``loc`` (list indices skipped)."""
    model: type[BaseModel] = Config
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        found = _model_in(field.annotation) if field is not None else None
        if found is None:
            return None
        model = found
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X``, ``X | None``, ``list[X]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


def _describe(err: dict) -> str:
    loc = tuple(err["loc"])
    key = ".".join(str(p) for p in loc) or "(top level)"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        model = _section_model(loc)
        known = sorted(k for k, f in model.model_fields.items() if not f.exclude) if model else []
        if len(loc) == 1 and isinstance(err.get("input"), dict):
            return f"[{key}]: unknown section (check its spelling; sections: {', '.join(known)})"
        msg = "unknown key (check its spelling and section)"
        if known:
            where = f"[{'.'.join(str(p) for p in loc[:-1])}]" if len(loc) > 1 else "the top level"
            msg = f"unknown key (check its spelling and section: {where} takes {', '.join(known)})"
    elif err["type"] in ("model_type", "dict_type", "model_attributes_type") and _model_in_loc(loc):
        msg = f"must be a section ([{key}] table), got {err.get('input')!r}"
    elif "input" in err and not isinstance(err["input"], dict):
        msg = f"{msg} (got {err['input']!r})"
    return f"{key}: {msg}"


def _model_in_loc(loc: tuple) -> bool:
    """Whether the key at ``loc`` is itself a section."""
    model = _section_model(loc)
    field = model.model_fields.get(str(loc[-1])) if model is not None and loc else None
    return field is not None and _model_in(field.annotation) is not None


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
    emotions = cfg.robot.reachy_mini.emotions_dir
    if emotions is not None and not emotions.is_absolute():
        cfg.robot.reachy_mini.emotions_dir = base / emotions
    if cfg.console.token_file is not None and not cfg.console.token_file.is_absolute():
        cfg.console.token_file = base / cfg.console.token_file
    if cfg.state.path is not None and not cfg.state.path.expanduser().is_absolute():
        cfg.state.path = base / cfg.state.path
    cfg.source = p
    return cfg
