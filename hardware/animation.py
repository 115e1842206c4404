"""Keyframe animations: pure functions of time, loaded from JSON files.

An animation file (``hardware/animations/*.json`` or a folder named in the config)::

    {"name": "nod", "loop": false,
     "keyframes": [{"t_ms": 0,   "pose": {"head_pitch": 0}},
                   {"t_ms": 250, "pose": {"head_pitch": 15}, "easing": "ease_in_out"},
                   {"t_ms": 500, "pose": {"head_pitch": 0}}]}

``t_ms`` is milliseconds from the start, poses are joint targets in degrees, ``easing`` is
how the segment *ending* at that keyframe is interpolated (``linear``, ``ease_in_out``,
``step``). :meth:`Animation.evaluate` is a pure function of time (no I/O), so tests can
sample it with no servo attached; the robot's player samples it at the control rate and
sends every pose through the safety layer (clamping happens there, not here).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

EASINGS = ("linear", "ease_in_out", "step")


class AnimationError(Exception):
    """An animation file is unreadable or malformed; the message names the file."""


@dataclass(frozen=True)
class Keyframe:
    """A pose (joint → degrees) reached at ``t_ms`` with the given easing."""

    t_ms: float
    pose: dict[str, float]
    easing: str = "ease_in_out"


def _ease(kind: str, u: float) -> float:
    if kind == "linear":
        return u
    if kind == "step":
        return 1.0 if u >= 1.0 else 0.0
    return 0.5 - 0.5 * math.cos(math.pi * u)


@dataclass(frozen=True)
class Animation:
    """A keyframe animation.

    Attributes:
        name: Animation name (the file's stem unless the file says otherwise).
        keyframes: Sorted by ``t_ms``; the first may start after 0 (the player blends in).
        loop: Repeat until cancelled.
        source: File it came from.

    """

    name: str
    keyframes: tuple[Keyframe, ...]
    loop: bool = False
    source: str = ""

    @property
    def duration_ms(self) -> float:
        """Time of the last keyframe, ms."""
        return self.keyframes[-1].t_ms if self.keyframes else 0.0

    @property
    def joints(self) -> set[str]:
        """Every joint any keyframe moves."""
        return {j for k in self.keyframes for j in k.pose}

    def evaluate(self, t_ms: float, start: dict[str, float] | None = None) -> dict[str, float]:
        """Pose at time ``t_ms`` (clipped to ``[0, duration]``), degrees per joint.

        Args:
            t_ms: Time since the animation started, ms.
            start: Pose at t=0 for joints whose first keyframe comes later (blending from
                the current pose); joints missing from both are held at their first keyframe.

        """
        t = min(max(t_ms, 0.0), self.duration_ms)
        out: dict[str, float] = {}
        for joint in self.joints:
            frames = [(k.t_ms, k.pose[joint], k.easing) for k in self.keyframes if joint in k.pose]
            if start is not None and joint in start and frames[0][0] > 0:
                frames.insert(0, (0.0, start[joint], "linear"))
            if t <= frames[0][0]:
                out[joint] = frames[0][1]
                continue
            out[joint] = frames[-1][1]
            for (t0, v0, _), (t1, v1, ease) in zip(frames, frames[1:], strict=False):
                if t0 <= t <= t1:
                    u = 1.0 if t1 == t0 else (t - t0) / (t1 - t0)
                    out[joint] = v0 + (v1 - v0) * _ease(ease, u)
                    break
        return out

    def remapped(self, mapping: dict[str, str]) -> Animation:
        """Return the same animation with joints renamed (e.g. ``right_arm`` → ``left_arm``)."""
        frames = tuple(
            Keyframe(k.t_ms, {mapping.get(j, j): v for j, v in k.pose.items()}, k.easing)
            for k in self.keyframes
        )
        return Animation(self.name, frames, self.loop, self.source)


def linear_move(
    name: str, start: dict[str, float], target: dict[str, float], duration_ms: float
) -> Animation:
    """Build a two-keyframe animation from ``start`` to ``target`` (degrees) over ``duration_ms``."""
    return Animation(name, (Keyframe(0.0, dict(start)), Keyframe(max(duration_ms, 1.0), dict(target))))


def load_animation(path: Path) -> Animation:
    """Read one animation file.

    Raises:
        AnimationError: unreadable file, bad JSON, no keyframes, a non-numeric value,
            times not increasing, or an unknown easing.

    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AnimationError(f"{path}: cannot read animation: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("keyframes"), list) or not data["keyframes"]:
        raise AnimationError(f"{path}: expected an object with a non-empty 'keyframes' list")
    frames = []
    last = -1.0
    for i, k in enumerate(data["keyframes"]):
        try:
            t = float(k["t_ms"])
            pose = {str(j): float(v) for j, v in dict(k["pose"]).items()}
            easing = str(k.get("easing", "ease_in_out"))
        except (KeyError, TypeError, ValueError) as e:
            raise AnimationError(
                f"{path}: keyframe {i}: needs numeric 't_ms' and a 'pose' of joint: degrees ({e})"
            ) from None
        if easing not in EASINGS:
            raise AnimationError(
                f"{path}: keyframe {i}: easing {easing!r} is not one of {', '.join(EASINGS)}"
            )
        if t <= last:
            raise AnimationError(
                f"{path}: keyframe {i}: t_ms {t:g} must be greater than the previous {last:g}"
            )
        if not all(math.isfinite(v) for v in pose.values()):
            raise AnimationError(f"{path}: keyframe {i}: positions must be finite degrees")
        last = t
        frames.append(Keyframe(t, pose, easing))
    return Animation(
        str(data.get("name", Path(path).stem)), tuple(frames), bool(data.get("loop", False)), str(path)
    )


def load_animations(folders: list[Path]) -> tuple[dict[str, Animation], list[str]]:
    """Load ``*.json`` animations from folders; later folders override earlier names.

    Returns:
        ``(animations by name, error messages)``; a broken file is reported and skipped.

    """
    found: dict[str, Animation] = {}
    errors: list[str] = []
    for folder in folders:
        if not Path(folder).is_dir():
            errors.append(f"{folder}: animation folder not found; skipped")
            continue
        for path in sorted(Path(folder).glob("*.json")):
            try:
                anim = load_animation(path)
            except AnimationError as e:
                errors.append(str(e))
                continue
            found[anim.name] = anim
    return found, errors
