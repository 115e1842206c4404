"""Helpers for the hardware tests: robot configs pointing at emulated ports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hardware.config import RobotConfig

JOINTS = [
    {"name": "head_yaw", "min_deg": -60, "max_deg": 60, "max_speed_dps": 240},
    {"name": "head_pitch", "min_deg": -30, "max_deg": 30, "max_speed_dps": 180, "direction": -1},
    {"name": "left_arm", "min_deg": 0, "max_deg": 160, "max_speed_dps": 300},
    {
        "name": "right_arm",
        "min_deg": 0,
        "max_deg": 160,
        "max_speed_dps": 300,
        "direction": -1,
        "offset_deg": 5,
    },
]

FAST = {"backoff_initial_s": 0.05, "backoff_max_s": 0.2, "connect_wait_s": 3.0}


def robot_config(kind: str, port: Path | str, ids: list[int] | None = None, **driver: Any) -> RobotConfig:
    """A four-joint robot on one driver of ``kind`` at ``port``."""
    joints = [dict(j, id=(ids[i] if ids else i)) for i, j in enumerate(JOINTS)]
    d = {"kind": kind, "port": str(port), **FAST, **driver}
    if kind == "feetech":
        d.setdefault("baud", 1000000)
    return RobotConfig.model_validate({"driver": "body", "drivers": {"body": d}, "joints": joints})
