"""Config models of the robot body and camera: joints, drivers, animations, camera, vision.

These pydantic models describe what ``hardware/`` builds (``build_robot(cfg.robot)``,
``build_vision(cfg.camera, cfg.vision)``). They live beside the code that uses them so that
``hardware/`` depends on nothing above it; ``agent/config/`` composes them into the whole
robot :class:`~agent.config.Config` read from one TOML file. Units: degrees, deg/s, seconds
unless a name says ms, px or Hz. Unknown keys are rejected (:class:`StrictModel`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class StrictModel(BaseModel):
    """A config section that rejects unknown keys (a misspelt key is an error, not ignored)."""

    model_config = ConfigDict(extra="forbid")


class JointConfig(StrictModel):
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


class DriverConfig(StrictModel):
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
    ready_timeout_s: float = Field(
        2.5, ge=0, le=30, description="wait for a board's ready line after open, s"
    )
    heartbeat_ms: int = Field(250, ge=20, le=5000, description="idle heartbeat period (bolt_serial), ms")
    watchdog_ms: int = Field(
        1000, ge=100, le=10000, description="board returns to neutral after this silence, ms"
    )
    poll_hz: float = Field(5.0, ge=0, le=100, description="position read-back rate, Hz (0 = never)")
    backoff_initial_s: float = Field(0.5, gt=0, le=60)
    backoff_max_s: float = Field(10.0, gt=0, le=600)
    us_per_deg: float = Field(2000 / 180, gt=0, description="maestro: pulse width change per degree, us")
    connect_wait_s: float = Field(
        3.0, ge=0, le=60, description="build_robot waits this long for the first connect, s"
    )

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


class RobotConfig(StrictModel):
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
    speech_motion_deg: float = Field(
        4.0, ge=0, le=20, description="largest head-pitch swing while speaking, deg"
    )
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
                raise ValueError(
                    f"joint {j.name!r} uses driver {drv!r}, which is not defined (known: {known})"
                )
            key = (drv, j.id if j.id is not None else i)
            if key in ids:
                raise ValueError(f"joints {ids[key]!r} and {j.name!r} share id {key[1]} on driver {drv!r}")
            ids[key] = j.name
        return self


class CameraConfig(StrictModel):
    """The camera (units: px, Hz, deg, s).

    ``source`` is a V4L2 index or path, a GStreamer pipeline (contains ``!``), a video file
    or an image folder; empty means no camera (speech only, no vision).
    """

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


class VisionConfig(StrictModel):
    """Scene description: which describer, how often, and the pinhole-distance assumptions."""

    enabled: bool = True
    describer: Literal["opencv", "vlm"] = "opencv"
    rate_hz: float = Field(1.0, gt=0, le=2.0, description="descriptions per second, Hz (at most 2)")
    detect_width: int = Field(640, ge=160, le=1920, description="frames are resized to this width, px")
    face_width_m: float = Field(0.16, gt=0.05, lt=0.5, description="assumed width of a detected face box, m")
    people: bool = Field(True, description="run the HOG people detector too")
    motion_threshold: float = Field(
        0.01, ge=0, le=1, description="changed-pixel fraction that counts as motion"
    )
    confirm: int = Field(
        2, ge=1, le=10, description="descriptions a new head count must persist for an event"
    )
    vlm_model: Path | None = None
    vlm_mmproj: Path | None = None
    vlm_handler: Literal["llava15", "mtmd"] = "mtmd"
    greet_on_arrival: bool = Field(False, description="a person arriving starts a greeting turn")
    vlm_prompt: str = "Describe what you see in one short sentence: people, where they are, what they do."
    vlm_max_tokens: int = Field(64, ge=8, le=512)
