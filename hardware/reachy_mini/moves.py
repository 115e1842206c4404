"""Pollen Robotics' animation libraries for a Reachy Mini, as gestures our motion loop plays.

Two libraries, both played through :meth:`hardware.robot.Robot.play` (so our limits, speed
limits, reachability check and e-stop apply to every frame):

* **Dances** — the 20 procedural moves of ``reachy-mini-dances-library`` (PyPI, offline):
  :class:`DanceGesture` evaluates Pollen's ``DanceMove`` at the control rate and turns each
  frame into our joints (:func:`hardware.reachy_mini.pose.from_sdk`).
* **Recorded moves** — Pollen's JSON format (``{"description", "time": [s...],
  "set_target_data": [{"head": 4x4, "antennas": [r, l], "body_yaw"}]}``, the format of the
  emotions dataset ``pollen-robotics/reachy-mini-emotions-library`` and of
  ``RecordedMove``): :func:`recorded_move` turns one into an
  :class:`~hardware.animation.Animation` with a keyframe per recorded frame (linear
  between frames, as Pollen's player), so our own animations can be written in it too.

The emotions are a Hugging Face dataset: ``bolt-agent models pull`` downloads it at set-up;
:func:`find_emotions` then finds it in the cache without a network.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hardware.animation import Animation, AnimationError, AnimationFormat, Keyframe, load_animation
from hardware.config import RobotConfig
from hardware.driver import Libraries
from hardware.reachy_mini.pose import from_sdk

log = logging.getLogger(__name__)

BLEND_MS = 300.0
"""A dance blends from the pose it starts in to its own first frame over this long, ms."""
RETURN_MS = 600.0
"""After its last frame a dance returns to the pose it started in over this long, ms."""
DANCES_PACKAGE = "reachy-mini-dances-library"


def recorded_move(data: Any, name: str, source: str = "") -> Animation:
    """Turn a Reachy Mini's recorded move (Pollen's JSON, parsed) into a keyframe animation.

    The format of Pollen's emotions dataset and of the SDK's ``RecordedMove``; each recorded
    frame becomes a keyframe of our joints (:func:`hardware.reachy_mini.pose.from_sdk`), linear
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


RECORDED_MOVE = {"set_target_data": AnimationFormat("set_target_data", "a recorded move", recorded_move)}
"""Pollen's recorded-move JSON as an animation format (:func:`hardware.animation.load_animation`)."""


def load_recorded_move(path: Path) -> Animation:
    """Read one recorded-move JSON file (see :func:`recorded_move`).

    Raises:
        AnimationError: unreadable file, bad JSON, or not a recorded move.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AnimationError(f"{path}: cannot read recorded move: {e}") from None
    return recorded_move(data, Path(path).stem, str(path))


def load_moves(folder: Path) -> tuple[dict[str, Animation], list[str]]:
    """Every move of a folder (and its ``data/`` subfolder, as newer Pollen datasets keep them).

    Files in either format load: recorded moves and our keyframe animations.

    Returns:
        ``(animations by name, error messages)``; a broken file is reported and skipped.
    """
    found: dict[str, Animation] = {}
    errors: list[str] = []
    folder = Path(folder)
    paths = sorted(folder.glob("*.json")) + sorted((folder / "data").glob("*.json"))
    for path in paths:
        try:
            found[path.stem] = load_animation(path, RECORDED_MOVE)
        except AnimationError as e:
            errors.append(str(e))
    return found, errors


@dataclass
class DanceGesture:
    """One of Pollen's procedural dances, played as a gesture (a :class:`~hardware.animation.Gesture`).

    The dance is performed facing where the body faces when it starts: its head yaw and body
    yaw are added to the start's body yaw. It blends in from the start pose over
    :data:`BLEND_MS` and, after Pollen's last frame, back to that pose over :data:`RETURN_MS`
    (Pollen's dances end away from neutral: the head tilted, the antennas apart).

    Attributes:
        name: The dance's name (``simple_nod``).
        move: Pollen's ``DanceMove`` (``duration`` s, ``evaluate(t_s) -> (head, antennas, body_yaw)``).
        description: Pollen's one-line description.
    """

    name: str
    move: Any
    description: str = ""
    loop: bool = False
    _joints: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._joints = set(self._frame(0.0))

    @property
    def duration_ms(self) -> float:
        """Length of the dance with its return to the start pose, ms."""
        return float(self.move.duration) * 1000.0 + RETURN_MS

    @property
    def joints(self) -> set[str]:
        """The joints the dance moves."""
        return self._joints

    def _frame(self, t_s: float) -> dict[str, float]:
        head, antennas, body_yaw = self.move.evaluate(min(max(t_s, 0.0), float(self.move.duration)))
        return from_sdk(head, antennas, body_yaw)

    def evaluate(self, t_ms: float, start: dict[str, float] | None = None) -> dict[str, float]:
        """Our joints at ``t_ms`` (ms since the start), degrees (head x/y/z in mm)."""
        pose = self._frame(t_ms / 1000.0)
        start = start or {}
        facing = start.get("body_yaw", 0.0)
        if facing:
            pose["head_yaw"] = pose.get("head_yaw", 0.0) + facing
            pose["body_yaw"] = pose.get("body_yaw", 0.0) + facing
        if t_ms < BLEND_MS:
            u = 0.5 - 0.5 * math.cos(math.pi * max(t_ms, 0.0) / BLEND_MS)
            pose = {j: start[j] + (v - start[j]) * u if j in start else v for j, v in pose.items()}
        end_ms = float(self.move.duration) * 1000.0
        if t_ms > end_ms:  # back to where it started
            u = 0.5 - 0.5 * math.cos(math.pi * min(1.0, (t_ms - end_ms) / RETURN_MS))
            pose = {j: v + (start[j] - v) * u if j in start else v for j, v in pose.items()}
        return pose


def load_dances() -> tuple[dict[str, DanceGesture], list[str]]:
    """The dances of ``reachy-mini-dances-library`` by name.

    Returns:
        ``(dances, messages)``: no dances and one message saying what to install when the
        library (or the SDK it imports) is missing.
    """
    try:
        from reachy_mini_dances_library.collection.dance import AVAILABLE_MOVES
        from reachy_mini_dances_library.dance_move import DanceMove
    except ImportError as e:
        return {}, [
            f"the dances need {DANCES_PACKAGE} (pip install 'bolt-agent[reachy]' or launch/setup.sh "
            f"with BOLT_REACHY=1): {e}; no dances"
        ]
    dances = {}
    for name, (_, _, meta) in AVAILABLE_MOVES.items():
        dances[name] = DanceGesture(name, DanceMove(name), str(meta.get("description", "")))
    return dances, []


def find_emotions(repo: str, folder: Path | None = None) -> Path | None:
    """Where the emotions library is: ``folder`` if given, else its copy in the Hugging Face cache.

    Never touches the network (``local_files_only``).

    Args:
        repo: The dataset (``pollen-robotics/reachy-mini-emotions-library``).
        folder: A local copy, used as it is.

    Returns:
        The folder, or None when it is not downloaded (``bolt-agent models pull`` fetches it).
    """
    if folder is not None:
        return Path(folder) if Path(folder).is_dir() else None
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:  # pragma: no cover - huggingface_hub is a dependency
        return None
    try:
        return Path(snapshot_download(repo, repo_type="dataset", local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None


def load_emotions(repo: str, folder: Path | None = None) -> tuple[dict[str, Animation], list[str]]:
    """The recorded emotions by name, from the cache (or ``folder``), offline.

    Returns:
        ``(emotions, messages)``: none and a message saying how to fetch them when absent;
        broken files are reported and skipped.
    """
    where = find_emotions(repo, folder)
    if where is None:
        src = f"the folder {folder}" if folder is not None else f"the dataset {repo}"
        return {}, [
            f"the recorded emotions are not downloaded ({src}): run `bolt-agent models pull --config ...` "
            f"once with a network; the robot has no emotions until then"
        ]
    emotions, errors = load_moves(where)
    if not emotions:
        errors.append(f"{where}: no recorded moves (*.json) found; the robot has no emotions")
    return emotions, errors


def load_libraries(cfg: RobotConfig) -> Libraries:
    """A Reachy Mini's animation libraries: Pollen's ``dances`` and recorded ``emotions``.

    Returns:
        ``({"dances": ..., "emotions": ...}, messages)``; a missing library is a message (what
        to install or download), never an error.
    """
    dances, messages = load_dances()
    emotions, more = load_emotions(cfg.reachy_mini.emotions_repo, cfg.reachy_mini.emotions_dir)
    return {"dances": dict(dances), "emotions": dict(emotions)}, messages + more
