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


REACHY_MINI = "reachy_mini"
"""The built-in driver name of a Reachy Mini (``[robot] driver = "reachy_mini"``)."""


class ReachyMiniConfig(StrictModel):
    """How to reach a Reachy Mini's daemon, and what the robot does when it parks.

    The same settings serve the real robot and both simulators: a Lite's daemon runs on the
    host it is plugged into (``localhost``), a Wireless one inside the robot
    (``reachy-mini.local``), the simulators wherever they are started. Times in seconds.
    """

    host: str = "localhost"
    port: int = Field(8000, ge=1, le=65535)
    connect_timeout_s: float = Field(5.0, gt=0, le=60, description="one connection attempt, s")
    connect_wait_s: float = Field(
        5.0, ge=0, le=60, description="build_robot waits this long for the daemon, s"
    )
    backoff_initial_s: float = Field(0.5, gt=0, le=60)
    backoff_max_s: float = Field(10.0, gt=0, le=600)
    yaw_coupling_deg: float = Field(
        65.0, gt=0, le=90, description="largest |head yaw - body yaw|, deg (Pollen's documented limit)"
    )
    sleep_s: float = Field(2.0, gt=0.2, le=10, description="duration of the move into the sleep pose, s")
    estop: Literal["hold", "motors_off"] = Field(
        "hold",
        description="an emergency stop holds the pose with the motors on (the head would sink), "
        "or turns the motors off through the daemon; the robot says which, as the daemon reports it",
    )
    estop_release: Literal["resume", "sleep"] = Field(
        "sleep",
        description="clearing an e-stop: resume from the held pose, or park (sleep pose, motors off) "
        "until the next motion wakes the robot",
    )
    emotions_repo: str = Field(
        "pollen-robotics/reachy-mini-emotions-library",
        description="Hugging Face dataset of recorded emotions (bolt-agent models pull fetches it)",
    )
    emotions_dir: Path | None = Field(None, description="a local copy of the emotions instead of the cache")


def _reachy_joints() -> list[JointConfig]:
    """A Reachy Mini's joints as our safety layer sees them (degrees; head x/y/z in mm).

    Limits are inside Pollen's documented envelope (head pitch/roll ±40°, body yaw ±160°;
    the SDK's ``inverse_kinematics_safe``); the head's yaw is in the world frame, as the SDK's
    head pose: it reaches as far as the body turns (±150°), and the driver keeps it within
    ``yaw_coupling_deg`` (65°) of the body's yaw, so the head turns toward a voice at the side
    with the body turning under it; antennas reach ±175° because the SDK's own sleep
    pose puts them at ±3.05 rad, and ``head_z`` reaches -45 mm for the same pose (-44 mm).
    Speeds are above the 99.5th percentile of the 20 dances of ``reachy-mini-dances-library``
    0.2.1 sampled at 50 Hz (roll 180, pitch 357, yaw 149 deg/s; x/y/z 119/233/175 mm/s;
    antennas 534 deg/s), so dances play at their speed while a jump (their step changes, a
    bad target) is smoothed. Neutral antennas are the SDK's ``INIT_ANTENNAS_JOINT_POSITIONS``
    (right -10°, left +10°).
    """
    return [
        JointConfig(name="head_roll", min_deg=-30, max_deg=30, max_speed_dps=300),
        JointConfig(name="head_pitch", min_deg=-35, max_deg=35, max_speed_dps=400),
        JointConfig(name="head_yaw", min_deg=-150, max_deg=150, max_speed_dps=300),
        JointConfig(name="head_x", min_deg=-25, max_deg=25, max_speed_dps=250),
        JointConfig(name="head_y", min_deg=-40, max_deg=40, max_speed_dps=300),
        JointConfig(name="head_z", min_deg=-45, max_deg=20, max_speed_dps=250),
        JointConfig(name="body_yaw", min_deg=-150, max_deg=150, max_speed_dps=180),
        JointConfig(name="right_antenna", min_deg=-175, max_deg=175, neutral_deg=-10, max_speed_dps=600),
        JointConfig(name="left_antenna", min_deg=-175, max_deg=175, neutral_deg=10, max_speed_dps=600),
    ]


REACHY_MOTION_VAD_WEIGHT = 0.6
"""Speech probability scale while a Reachy Mini moves: a frame needs a Silero probability of
0.84 or more to pass the 0.5 threshold. Measured on ten spoken commands and a speech clip:
79 % of speech frames (median probability 0.98) still pass; weaker detections, the kind
motor noise gives, do not. Pollen's users report motor noise ruining speech recognition."""
REACHY_JOINTS = tuple(j.name for j in _reachy_joints())
"""Joint names a Reachy Mini has (``head_x/y/z`` are millimetres, the rest degrees)."""


def _reachy_postures() -> dict[str, dict[str, float]]:
    """Listening: antennas up and a small head tilt; thinking: head up and aside, antennas apart."""
    return {
        "idle": {},
        "listening": {"head_roll": -6.0, "head_pitch": 3.0, "right_antenna": 25.0, "left_antenna": -25.0},
        "thinking": {"head_pitch": 8.0, "head_yaw": 10.0, "right_antenna": -20.0, "left_antenna": 35.0},
    }


def _default_joints() -> list[JointConfig]:
    return [
        JointConfig(name="head_yaw", min_deg=-60, max_deg=60, max_speed_dps=240),
        JointConfig(name="head_pitch", min_deg=-30, max_deg=30, max_speed_dps=180),
        JointConfig(name="left_arm", min_deg=0, max_deg=160, max_speed_dps=300),
        JointConfig(name="right_arm", min_deg=0, max_deg=160, max_speed_dps=300),
    ]


class RobotConfig(StrictModel):
    """The robot body: drivers, joints, animations, postures, head motion while speaking.

    ``driver`` is the default driver name for joints that name none: ``"sim"`` (built in,
    records commands only), ``"reachy_mini"`` (built in: a Reachy Mini through its daemon,
    ``[robot.reachy_mini]``; its joints and postures are the defaults then) or a key of
    ``drivers``. ``postures`` are offsets (joint → degrees) the motion loop blends in while
    the robot listens or thinks (:meth:`hardware.robot.Robot.set_posture`).
    """

    driver: str = "sim"
    drivers: dict[str, DriverConfig] = Field(default_factory=dict)
    joints: list[JointConfig] = Field(default_factory=_default_joints)
    reachy_mini: ReachyMiniConfig = Field(default_factory=ReachyMiniConfig)
    postures: dict[str, dict[str, float]] = Field(default_factory=dict)
    animation_folders: list[Path] = Field(default_factory=list)
    control_rate_hz: float = Field(50.0, ge=10, le=200, description="motion loop rate, Hz")
    speech_motion: bool = Field(True, description="sway the head with the TTS audio envelope")
    speech_motion_deg: float = Field(
        4.0, ge=0, le=20, description="largest head-pitch swing while speaking, deg"
    )
    speech_motion_joint: str = "head_pitch"
    motion_vad_weight: float = Field(
        1.0,
        gt=0,
        le=1,
        description="speech probability is scaled by this while the motors move (motor noise; "
        "a Reachy Mini's default is 0.6)",
    )
    look_at_speaker: bool = Field(
        True,
        description="turn toward the voice's direction of arrival when speech starts (a Reachy Mini's array)",
    )
    eye_contact: bool = Field(
        True, description="while conversing, follow the speaker's face with small head turns"
    )
    eye_contact_hz: float = Field(20.0, ge=1, le=60, description="face tracking rate, Hz (10 or more)")
    eye_contact_max_deg: float = Field(
        20.0, ge=0, le=45, description="largest eye-contact correction from where the face was found, deg"
    )
    idle_life: bool = Field(True, description="small idle behaviours when nobody talks")
    idle_period_s: float = Field(6.0, ge=1, le=600, description="mean time between two idle draws, s")
    idle_after_s: float = Field(8.0, ge=0, le=600, description="quiet time before the first idle draw, s")
    idle_weights: dict[Literal["nothing", "breathe", "glance", "antenna_twitch"], float] = Field(
        default_factory=lambda: {"nothing": 0.5, "breathe": 0.25, "glance": 0.15, "antenna_twitch": 0.1},
        description="weight of each idle behaviour per draw ('nothing' weighs highest, as in Pollen's app)",
    )

    @model_validator(mode="before")
    @classmethod
    def _reachy_defaults(cls, data: object) -> object:
        # A Reachy Mini's joints and postures are the defaults when its driver is chosen.
        if isinstance(data, dict) and data.get("driver") == REACHY_MINI:
            data = dict(data)
            data.setdefault("joints", _reachy_joints())
            data.setdefault("postures", _reachy_postures())
            data.setdefault("motion_vad_weight", REACHY_MOTION_VAD_WEIGHT)
        return data

    @model_validator(mode="after")
    def _check_reachy(self) -> RobotConfig:
        on_reachy = [j.name for j in self.joints if (j.driver or self.driver) == REACHY_MINI]
        if on_reachy:
            unknown = sorted(set(on_reachy) - set(REACHY_JOINTS))
            if unknown:
                raise ValueError(
                    f"a Reachy Mini has no joint {', '.join(unknown)} "
                    f"(its joints: {', '.join(REACHY_JOINTS)})"
                )
            if len(on_reachy) != len(self.joints):
                raise ValueError(
                    "a Reachy Mini is the whole body: every joint must use the reachy_mini driver"
                )
        for name, offsets in self.postures.items():
            unknown = sorted(set(offsets) - {j.name for j in self.joints})
            if unknown:
                raise ValueError(f"posture {name!r} moves {', '.join(unknown)}, which this robot lacks")
        return self

    @model_validator(mode="after")
    def _check_joints(self) -> RobotConfig:
        names = [j.name for j in self.joints]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"joint names must be unique; repeated: {', '.join(dup)}")
        ids: dict[tuple[str, int], str] = {}
        for i, j in enumerate(self.joints):
            drv = j.driver or self.driver
            if drv not in ("sim", REACHY_MINI) and drv not in self.drivers:
                known = ", ".join(["sim", REACHY_MINI, *self.drivers])
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
    or an image folder; ``usb:VVVV:PPPP`` (a USB camera by its hex ids), ``reachy_mini`` (a
    Reachy Mini Lite's USB camera) or ``reachy_mini_sim`` (the simulated Reachy Mini's eye
    camera, rendered here and posed from the daemon of ``[robot.reachy_mini]``; default
    640x360 at 2 Hz, and its own field of view unless ``hfov_deg`` is set); empty means no
    camera (speech only, no vision).
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
    """The OpenCV scene layer: how often, and the pinhole-distance assumptions.

    The agent's ``[vision]`` adds ``describer`` and ``[vision.vlm]`` (``agent/config/vlm.py``).
    """

    enabled: bool = True
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
    greet_on_arrival: bool = Field(False, description="a person arriving starts a greeting turn")
