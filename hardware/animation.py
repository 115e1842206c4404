"""Keyframe animations: pure functions of time, loaded from JSON files.

An animation file (``hardware/animations/*.json`` or a folder named in the config)::

    {"name": "nod", "loop": false,
     "keyframes": [{"t_ms": 0,   "pose": {"head_pitch": 0}},
                   {"t_ms": 250, "pose": {"head_pitch": 15}, "easing": "ease_in_out"},
                   {"t_ms": 500, "pose": {"head_pitch": 0}}]}

``t_ms`` is milliseconds from the start, poses are joint targets in degrees, ``easing`` is
how the segment *ending* at that keyframe is interpolated (``linear``, ``ease_in_out``,
``step``). Other formats load as animations too when the caller names them
(:class:`AnimationFormat`: a Reachy Mini's recorded moves, Pollen's ``set_target_data`` JSON,
:data:`hardware.reachy_mini.moves.RECORDED_MOVE`). :meth:`Animation.evaluate` is a
pure function of time (no I/O), so tests can sample it with no servo attached; the robot's
player samples it at the control rate and sends every pose through the safety layer
(clamping happens there, not here).
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

EASINGS = ("linear", "ease_in_out", "step")


class Gesture(Protocol):
    """What the motion loop plays: a pure function of time giving joint targets.

    Keyframe animations (:class:`Animation`), Pollen's procedural dances and recorded moves
    (:mod:`hardware.reachy_mini.moves`) all satisfy it.
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


@dataclass(frozen=True)
class AnimationFormat:
    """Another JSON format that loads as an animation: a JSON object with ``key`` is ``read``.

    Attributes:
        key: The top-level key that marks the format (``set_target_data``).
        what: What a file of it is, for messages (``a recorded move``).
        read: ``(parsed JSON, name, source) -> Animation``; raises :class:`AnimationError`.
    """

    key: str
    what: str
    read: Callable[[Any, str, str], Animation]


def load_animation(path: Path, formats: Mapping[str, AnimationFormat] | None = None) -> Animation:
    """Read one animation file: our keyframe format, or one of ``formats`` (by its key).

    Args:
        path: The JSON file.
        formats: Other formats by key (:class:`AnimationFormat`); None: keyframes only.

    Raises:
        AnimationError: unreadable file, bad JSON, no keyframes, a non-numeric value,
            times not increasing, or an unknown easing.

    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AnimationError(f"{path}: cannot read animation: {e}") from None
    formats = formats or {}
    other = next((f for key, f in formats.items() if isinstance(data, dict) and key in data), None)
    if other is not None:
        return other.read(data, str(data.get("name", Path(path).stem)), str(path))
    if not isinstance(data, dict) or not isinstance(data.get("keyframes"), list) or not data["keyframes"]:
        alternatives = "".join(f" (or {f.what}'s {f.key!r})" for f in formats.values())
        raise AnimationError(f"{path}: expected an object with a non-empty 'keyframes' list{alternatives}")
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


def load_animations(
    folders: list[Path], formats: Mapping[str, AnimationFormat] | None = None
) -> tuple[dict[str, Animation], list[str]]:
    """Load ``*.json`` animations from folders; later folders override earlier names.

    Args:
        folders: Folders to read, in order.
        formats: Other formats they may hold (:func:`load_animation`).

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
                anim = load_animation(path, formats)
            except AnimationError as e:
                errors.append(str(e))
                continue
            found[anim.name] = anim
    return found, errors
