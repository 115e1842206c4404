"""Robot configuration: one TOML file, validated with pydantic.

A config file describes one robot: which models to run (a local path, a packaged default
such as ``packaged:smollm2-135m``, or ``hf:owner/repo/file.gguf`` downloaded on first
use), audio, VAD and ASR settings, the LLM, the voice, where skills come from, and the
robot's joints. ``launch/desktop.toml`` is the embedded default (CPU, the three packaged
models, a simulated robot).

Loading happens once, in the entry point; the resulting :class:`Config` is passed down
explicitly. A bad file raises :class:`ConfigError` whose message names the file, the key
and what was expected.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (JetPack 6)
    import tomli as tomllib

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "launch" / "desktop.toml"

DEFAULT_SYSTEM_PROMPT = (
    "You are Bolt, a small friendly robot with a head and two arms. You talk out loud: keep replies short "
    "and plain. When the user asks for something a tool can do, call the tool."
)


class ConfigError(Exception):
    """The config file is missing, not TOML, or has a key with a wrong value."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VADConfig(_Strict):
    """Silero VAD settings (units: probability 0..1, ms, s)."""

    threshold: float = Field(0.5, ge=0.05, le=0.95)
    min_speech_ms: int = Field(250, ge=0)
    min_silence_ms: int = Field(500, ge=50, description="endpointing silence, ms")
    speech_pad_ms: int = Field(400, ge=0, description="pre-roll / post-roll kept around speech, ms")
    max_utterance_s: float = Field(30.0, gt=1.0)


class ASRConfig(_Strict):
    """faster-whisper settings.

    ``temperature`` keeps Whisper's fallback tuple: a segment whose compression ratio or
    mean log-probability fails the thresholds is decoded again at the next temperature.
    """

    model: str = "packaged:whisper-tiny.en"
    language: str = "en"
    device: str = "cpu"
    compute_type: str = "int8"
    threads: int = Field(2, ge=1)
    beam_size: int = Field(5, ge=1, description="5 = Whisper's default; 1 = greedy, faster")
    temperature: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    compression_ratio_threshold: float = 2.4
    log_prob_threshold: float = -1.0
    no_speech_threshold: float = 0.6
    hotwords: list[str] = Field(default_factory=list)
    bias_with_skills: bool = True
    bias_mode: Literal["hotwords", "initial_prompt"] = Field(
        "hotwords", description="how skill names and the wake phrase reach Whisper: as hotwords, or as a "
        "prompt that reads like earlier speech")


class LLMConfig(_Strict):
    """llama.cpp settings for the chat model."""

    model: str = "packaged:smollm2-135m"
    n_ctx: int = Field(4096, ge=256, le=65536)
    threads: int = Field(2, ge=1)
    n_gpu_layers: int = Field(0, ge=-1)
    n_batch: int = Field(256, ge=16)
    temperature: float = Field(0.2, ge=0.0, le=2.0)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    max_tokens: int = Field(160, ge=8)
    repeat_penalty: float = Field(1.1, ge=1.0, le=2.0)
    tool_prior_bonus: float = Field(4.0, ge=0.0, le=20.0, description="grammar mode: logit bonus for tools "
                                    "whose name or keywords the user said; 0 = off")
    seed: int = 1234
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    tool_format: Literal["auto", "grammar", "bolt", "hermes", "llama3"] = "auto"
    reasoning: Literal["off", "on", "tools"] = Field("off", description="think before answering: never, "
                                                     "always, or only in rounds that offer tools")
    thinking_budget_tokens: int = Field(256, ge=0, description="thinking tokens before the runtime ends it")
    thinking_budget_ms: float = Field(1500.0, ge=0, description="thinking time before the runtime ends it, ms")
    conversational_mode: bool = Field(True, description="short, speech-ready replies (Bolt template flag)")
    max_reply_sentences: int = Field(2, ge=0, description="conversational mode: sentences spoken per reply; "
                                     "0 = no limit")
    output_grammar: str = Field("", description="GBNF grammar constraining native-format replies "
                                "(e.g. to hold a small model to the tool-call shape); empty = none")
    max_tool_rounds: int = Field(4, ge=1, le=8)
    warmup: bool = True


class TTSConfig(_Strict):
    """Piper voice settings."""

    voice: str = "packaged:piper-joe-medium"
    length_scale: float = Field(1.0, gt=0.2, le=3.0, description=">1 speaks slower")
    speaker_id: int | None = None
    max_sentences: int = Field(0, ge=0, description="0 = no limit")


class AudioConfig(_Strict):
    """Audio devices for live mode (name substring or index; None = system default)."""

    input_device: str | int | None = None
    output_device: str | int | None = None
    input_sample_rate: int | None = Field(None, ge=8000, le=192000, description="None = the device's own rate, Hz")
    input_channels: int | None = Field(None, ge=1, le=32, description="None = the device's, at most 2")
    output_sample_rate: int | None = Field(None, ge=8000, le=192000, description="None = the device's own rate, Hz")
    block_ms: int = Field(20, ge=5, le=200, description="sounddevice block length, ms")
    stall_s: float = Field(3.0, gt=0.1, le=30, description="no mic audio for this long = device lost, s")
    backoff_initial_s: float = Field(0.5, gt=0, le=60, description="first retry after a lost device, s")
    backoff_max_s: float = Field(8.0, gt=0, le=600)


class LiveConfig(_Strict):
    """``bolt-agent run``: attention, barge-in, echo safety, stop words (units: ms, s, score 0..100).

    Endpointing, pre-roll and the longest utterance come from ``[vad]`` (``min_silence_ms``,
    ``speech_pad_ms``, ``max_utterance_s``).
    """

    attention: Literal["always", "wake"] = "always"
    wake_phrases: list[str] = Field(default_factory=lambda: ["hey robot", "hey bolt", "okay bolt"])
    wake_score: float = Field(80.0, ge=50, le=100, description="fuzzy match score a wake phrase needs")
    follow_up_s: float = Field(8.0, ge=0, le=120, description="after a reply, no wake phrase needed for this long")
    barge_in: bool = True
    barge_in_ms: int = Field(300, ge=32, le=3000, description="user speech sustained this long stops playback")
    echo_guard: bool = True
    echo_tail_ms: int = Field(600, ge=0, le=5000, description="mic is treated as echo this long after playback")
    echo_min_unexplained: float = Field(0.5, gt=0, lt=1, description="fraction of mic energy playback must not "
                                        "explain for it to count as user speech")
    echo_max_delay_ms: int = Field(800, ge=50, le=3000, description="longest speaker-to-mic delay searched, ms")
    echo_text_score: float = Field(75.0, ge=50, le=100, description="transcripts this similar to the robot's "
                                   "own recent speech are dropped")
    stop_phrases: list[str] = Field(default_factory=lambda: [
        "stop", "freeze", "be quiet", "quiet", "shut up", "halt", "stop it", "stop talking", "stop moving",
        "hold still", "silence", "enough"])
    stop_max_words: int = Field(4, ge=1, le=12, description="longer transcripts go to the model")
    clause_chars: int = Field(120, ge=20, le=400, description="a sentence longer than this is cut at a clause")


class SkillsConfig(_Strict):
    """Where skills come from and which ones are offered to the model.

    ``folders`` are searched in addition to the packaged ``skills/`` folder; relative paths
    are resolved against the config file's folder. ``enabled`` empty means all found.
    """

    folders: list[Path] = Field(default_factory=list)
    include_builtin: bool = True
    enabled: list[str] = Field(default_factory=list)
    timeout_s: float = Field(10.0, gt=0)


class JointConfig(_Strict):
    """One robot joint: limits in degrees, neutral position, top speed in deg/s, and its actuator.

    ``driver`` names an entry of ``[robot.drivers]`` (default: the robot's ``driver``);
    ``id`` is the servo id (Feetech bus) or channel (Maestro, bolt_servo board), default the
    joint's index. ``direction`` is +1 or -1 (mirrored mounting); ``offset_deg`` is the servo
    angle, relative to the servo's centre, at which the joint reads 0 degrees (trim).
    """

    name: str
    min_deg: float
    max_deg: float
    neutral_deg: float = 0.0
    max_speed_dps: float = Field(180.0, gt=0, le=2000)
    driver: str | None = None
    id: int | None = Field(None, ge=0, le=253)
    direction: Literal[1, -1] = 1
    offset_deg: float = Field(0.0, ge=-180, le=180)

    @model_validator(mode="after")
    def _check_range(self) -> JointConfig:
        if self.min_deg >= self.max_deg:
            raise ValueError(f"min_deg ({self.min_deg}) must be below max_deg ({self.max_deg})")
        if not self.min_deg <= self.neutral_deg <= self.max_deg:
            raise ValueError(f"neutral_deg ({self.neutral_deg}) must lie within [min_deg, max_deg]")
        return self


class DriverConfig(_Strict):
    """One actuator driver (a serial port and the protocol spoken on it).

    ``kind``: ``sim`` (records only), ``bolt_serial`` (the line protocol of
    ``hardware/PROTOCOL.md``), ``maestro`` (Pololu Maestro compact protocol), ``feetech``
    (Feetech STS bus via ``scservo_sdk``). ``port`` is a device path or a name under
    ``/dev/serial/by-id`` (preferred: it survives re-plugging). Times in seconds unless
    the name says ms.
    """

    kind: Literal["sim", "bolt_serial", "maestro", "feetech"] = "sim"
    port: str | None = None
    baud: int = Field(115200, ge=1200, le=4_000_000)
    timeout_s: float = Field(0.1, gt=0, le=5, description="reply timeout, s")
    ready_timeout_s: float = Field(2.5, ge=0, le=30, description="wait for a board's ready line after open, s")
    heartbeat_ms: int = Field(250, ge=20, le=5000, description="idle heartbeat period (bolt_serial), ms")
    watchdog_ms: int = Field(1000, ge=100, le=10000, description="board returns to neutral after this silence, ms")
    poll_hz: float = Field(5.0, ge=0, le=100, description="position read-back rate, Hz (0 = never)")
    backoff_initial_s: float = Field(0.5, gt=0, le=60)
    backoff_max_s: float = Field(10.0, gt=0, le=600)
    us_per_deg: float = Field(2000 / 180, gt=0, description="maestro: pulse width change per degree, us")
    connect_wait_s: float = Field(3.0, ge=0, le=60, description="build_robot waits this long for the first connect, s")

    @model_validator(mode="after")
    def _check_port(self) -> DriverConfig:
        if self.kind != "sim" and not self.port:
            raise ValueError(f"a {self.kind} driver needs a port (device path or /dev/serial/by-id name)")
        return self


def _default_joints() -> list[JointConfig]:
    return [
        JointConfig(name="head_yaw", min_deg=-60, max_deg=60, max_speed_dps=240),
        JointConfig(name="head_pitch", min_deg=-30, max_deg=30, max_speed_dps=180),
        JointConfig(name="left_arm", min_deg=0, max_deg=160, max_speed_dps=300),
        JointConfig(name="right_arm", min_deg=0, max_deg=160, max_speed_dps=300),
    ]


class RobotConfig(_Strict):
    """The robot body: drivers, joints, animations, head motion while speaking.

    ``driver`` is the default driver name for joints that name none: ``"sim"`` (built in,
    records commands only) or a key of ``drivers``.
    """

    driver: str = "sim"
    drivers: dict[str, DriverConfig] = Field(default_factory=dict)
    joints: list[JointConfig] = Field(default_factory=_default_joints)
    animation_folders: list[Path] = Field(default_factory=list)
    control_rate_hz: float = Field(50.0, gt=0, le=500)
    speech_motion: bool = Field(True, description="nod the head with the TTS audio envelope")
    speech_motion_deg: float = Field(4.0, ge=0, le=20, description="largest head-pitch swing while speaking, deg")
    speech_motion_joint: str = "head_pitch"

    @model_validator(mode="after")
    def _check_joints(self) -> RobotConfig:
        names = [j.name for j in self.joints]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"joint names must be unique; repeated: {', '.join(dup)}")
        ids: dict[tuple[str, int], str] = {}
        for i, j in enumerate(self.joints):
            drv = j.driver or self.driver
            if drv != "sim" and drv not in self.drivers:
                known = ", ".join(["sim", *self.drivers])
                raise ValueError(f"joint {j.name!r} uses driver {drv!r}, which is not defined (known: {known})")
            key = (drv, j.id if j.id is not None else i)
            if key in ids:
                raise ValueError(f"joints {ids[key]!r} and {j.name!r} share id {key[1]} on driver {drv!r}")
            ids[key] = j.name
        return self


class CameraConfig(_Strict):
    """The camera: ``source`` is a V4L2 index or path, a GStreamer pipeline (contains ``!``),
    a video file or an image folder; empty means no camera (speech only, no vision)."""

    source: str = ""
    width: int = Field(0, ge=0, description="requested capture width, px (0 = device default)")
    height: int = Field(0, ge=0, description="requested capture height, px (0 = device default)")
    fps: float = Field(0.0, ge=0, le=240, description="requested capture rate, Hz (files: playback rate)")
    hfov_deg: float = Field(62.2, gt=10, lt=180, description="horizontal field of view, deg (IMX219: 62.2)")
    black_level: float = Field(4.0, ge=0, le=64, description="mean grey below this for black_s = black feed")
    black_s: float = Field(3.0, gt=0)
    frozen_s: float = Field(3.0, gt=0, description="identical frames for this long = frozen feed, s")
    dead_s: float = Field(2.0, gt=0, description="no frame for this long = dead feed, s")
    backoff_initial_s: float = Field(0.5, gt=0)
    backoff_max_s: float = Field(10.0, gt=0)


class VisionConfig(_Strict):
    """Scene description: which describer, how often, and the pinhole-distance assumptions."""

    enabled: bool = True
    describer: Literal["opencv", "vlm"] = "opencv"
    rate_hz: float = Field(1.0, gt=0, le=2.0, description="descriptions per second, Hz (at most 2)")
    detect_width: int = Field(640, ge=160, le=1920, description="frames are resized to this width, px")
    face_width_m: float = Field(0.16, gt=0.05, lt=0.5, description="assumed width of a detected face box, m")
    people: bool = Field(True, description="run the HOG people detector too")
    motion_threshold: float = Field(0.01, ge=0, le=1, description="changed-pixel fraction that counts as motion")
    confirm: int = Field(2, ge=1, le=10, description="descriptions a new head count must persist for an event")
    vlm_model: Path | None = None
    vlm_mmproj: Path | None = None
    vlm_handler: Literal["llava15", "mtmd"] = "mtmd"
    greet_on_arrival: bool = Field(False, description="a person arriving starts a greeting turn")
    vlm_prompt: str = "Describe what you see in one short sentence: people, where they are, what they do."
    vlm_max_tokens: int = Field(64, ge=8, le=512)


class Config(_Strict):
    """The whole robot configuration (one TOML file)."""

    asr: ASRConfig = Field(default_factory=ASRConfig)
    vad: VADConfig = Field(default_factory=VADConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    tts: TTSConfig = Field(default_factory=TTSConfig)
    audio: AudioConfig = Field(default_factory=AudioConfig)
    live: LiveConfig = Field(default_factory=LiveConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    robot: RobotConfig = Field(default_factory=RobotConfig)
    camera: CameraConfig = Field(default_factory=CameraConfig)
    vision: VisionConfig = Field(default_factory=VisionConfig)
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
    cfg.source = p
    return cfg
