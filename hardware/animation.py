"""Keyframe animations: pure functions of time, loaded from JSON files.

An animation file (``hardware/animations/*.json`` or a folder named in the config)::

    {"name": "nod", "loop": false,
     "keyframes": [{"t_ms": 0,   "pose": {"head_pitch": 0}},
                   {"t_ms": 250, "pose": {"head_pitch": 15}, "easing": "ease_in_out"},
                   {"t_ms": 500, "pose": {"head_pitch": 0}}]}

``t_ms`` is milliseconds from the start, poses are joint targets in degrees, ``easing`` is
how the segment *ending* at that keyframe is interpolated (``linear``, ``ease_in_out``,
``step``). A Reachy Mini's recorded moves (Pollen's JSON, ``set_target_data``) load as
animations too (:func:`recorded_move`). :meth:`Animation.evaluate` is a
pure function of time (no I/O), so tests can sample it with no servo attached; the robot's
player samples it at the control rate and sends every pose through the safety layer
(clamping happens there, not here).
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from hardware.reachy_pose import from_sdk

EASINGS = ("linear", "ease_in_out", "step")


class Gesture(Protocol):
    """What the motion loop plays: a pure function of time giving joint targets.

    Keyframe animations (:class:`Animation`), Pollen's procedural dances and recorded moves
    (:mod:`hardware.pollen_moves`) all satisfy it.
    """

    name: str
    loop: bool

    @property
    def duration_ms(self) -> float:
        """Length of one play-through, ms."""
        ...

    @property
    def joints(self) -> set[str]:
        """Joints the gesture moves."""
        ...

    def evaluate(self, t_ms: float, start: dict[str, float] | None = None) -> dict[str, float]:
        """Targets at ``t_ms`` (ms since the start), joint → degrees (mm for head translations).

        ``start`` is the pose when the gesture started, for blending in from it.
        """
        ...


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

    @cached_property
    def _tracks(self) -> dict[str, tuple[list[float], list[float], list[str]]]:
        """Per joint: keyframe times, values and easings (built once; a recorded move has hundreds)."""
        tracks: dict[str, tuple[list[float], list[float], list[str]]] = {}
        for k in self.keyframes:
            for joint, v in k.pose.items():
                ts, vs, es = tracks.setdefault(joint, ([], [], []))
                ts.append(k.t_ms)
                vs.append(v)
                es.append(k.easing)
        return tracks

    def evaluate(self, t_ms: float, start: dict[str, float] | None = None) -> dict[str, float]:
        """Pose at time ``t_ms`` (clipped to ``[0, duration]``), degrees per joint.

        Args:
            t_ms: Time since the animation started, ms.
            start: Pose at t=0 for joints whose first keyframe comes later (blending from
                the current pose); joints missing from both are held at their first keyframe.

        """
        t = min(max(t_ms, 0.0), self.duration_ms)
        out: dict[str, float] = {}
        for joint, (ts, vs, es) in self._tracks.items():
            if t < ts[0]:
                if start is not None and joint in start:  # blend in from the pose at t=0
                    out[joint] = start[joint] + (vs[0] - start[joint]) * (t / ts[0])
                else:
                    out[joint] = vs[0]
                continue
            i = bisect.bisect_left(ts, t)  # ts[i-1] < t <= ts[i]
            if i >= len(ts):
                out[joint] = vs[-1]
            elif ts[i] == t or i == 0:
                out[joint] = vs[i]
            else:
                u = (t - ts[i - 1]) / (ts[i] - ts[i - 1])
                out[joint] = vs[i - 1] + (vs[i] - vs[i - 1]) * _ease(es[i], u)
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


def recorded_move(data: Any, name: str, source: str = "") -> Animation:
    """Turn a Reachy Mini's recorded move (Pollen's JSON, parsed) into a keyframe animation.

    The format of Pollen's emotions dataset and of the SDK's ``RecordedMove``; each recorded
    frame becomes a keyframe of our joints (:func:`hardware.reachy_pose.from_sdk`), linear
    between frames as Pollen's player.

    Args:
        data: ``{"description", "time": [s, ...], "set_target_data": [{"head": 4x4 or 16
            numbers (m), "antennas": [right, left] (rad), "body_yaw": rad}, ...]}``.
        name: The animation's name (the file's stem).
        source: Where it came from, for messages.

    Returns:
        An animation whose keyframes are the recorded frames (ms from the first; linear).

    Raises:
        AnimationError: not that format, lengths that differ, times not increasing, or a
            frame that is not numbers.
    """
    where = source or name
    if not isinstance(data, dict) or not isinstance(data.get("time"), list):
        raise AnimationError(f"{where}: a recorded move needs a 'time' list and a 'set_target_data' list")
    times, frames = data["time"], data.get("set_target_data")
    if not isinstance(frames, list) or len(frames) != len(times) or not frames:
        raise AnimationError(
            f"{where}: 'time' and 'set_target_data' must be non-empty lists of the same length"
        )
    keys: list[Keyframe] = []
    t0 = last = None
    for i, (t, frame) in enumerate(zip(times, frames, strict=True)):
        try:
            t = float(t)
            pose = from_sdk(frame.get("head"), frame.get("antennas"), frame.get("body_yaw"))
        except (AttributeError, TypeError, ValueError) as e:
            raise AnimationError(
                f"{where}: frame {i}: expected head (4x4), antennas [r, l], body_yaw ({e})"
            ) from None
        if not pose or not all(math.isfinite(v) for v in pose.values()):
            raise AnimationError(f"{where}: frame {i}: no finite pose")
        t0 = t if t0 is None else t0
        if last is not None and t <= last:
            continue  # duplicate timestamps happen in recordings: keep the first
        last = t
        keys.append(
            Keyframe(round((t - t0) * 1000.0, 3), {k: round(v, 3) for k, v in pose.items()}, "linear")
        )
    return Animation(name, tuple(keys), False, source)


def load_animation(path: Path) -> Animation:
    """Read one animation file: our keyframe format, or Pollen's recorded-move JSON.

    Raises:
        AnimationError: unreadable file, bad JSON, no keyframes, a non-numeric value,
            times not increasing, or an unknown easing.

    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AnimationError(f"{path}: cannot read animation: {e}") from None
    if isinstance(data, dict) and "set_target_data" in data:  # Pollen's recorded-move format
        return recorded_move(data, str(data.get("name", Path(path).stem)), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("keyframes"), list) or not data["keyframes"]:
        raise AnimationError(
            f"{path}: expected an object with a non-empty 'keyframes' list "
            f"(or a recorded move's 'set_target_data')"
        )
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
