"""Head motion while speaking: the TTS audio envelope becomes a small head-pitch sway.

:func:`envelope_keyframes` is pure (audio in, :class:`~hardware.animation.Animation` of
offsets out); :func:`speak_along` layers it on the robot's motion loop
(:meth:`hardware.robot.Robot.sway`), on top of whatever gesture runs, so the robot can wave
and talk at once. Start it when playback of the audio starts: keyframe times are ms from the
first sample.
"""

from __future__ import annotations

import logging

import numpy as np

from hardware.animation import Animation, Keyframe
from hardware.robot import Robot

log = logging.getLogger(__name__)

NOISE_FLOOR = 500.0
"""RMS (int16 units) below which a frame counts as silence."""


def envelope_keyframes(
    audio: np.ndarray,
    sample_rate: int,
    *,
    max_deg: float = 4.0,
    joint: str = "head_pitch",
    base_deg: float = 0.0,
    frame_ms: float = 80.0,
    name: str = "speech",
) -> Animation | None:
    """Turn speech audio into head-pitch offsets that follow its loudness.

    Args:
        audio: Mono int16 samples, shape ``(n,)`` (or ``(n, 1)``).
        sample_rate: Samples per second, Hz.
        max_deg: Largest swing above ``base_deg`` at the loudest frame, degrees.
        joint: Joint to move.
        base_deg: Offset at rest, degrees (0 for a sway layered on the pose).
        frame_ms: One keyframe per this many ms.
        name: Animation name.

    Returns:
        An animation (first keyframe at ``frame_ms`` so the player blends in from the current
        pose; last keyframe back at ``base_deg``), or None for empty or silent audio.

    Raises:
        ValueError: ``sample_rate`` is not positive or the audio is not 1-D.

    """
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive, got {sample_rate}")
    x = np.asarray(audio)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1:
        raise ValueError(f"expected mono audio of shape (n,), got {x.shape}")
    hop = max(1, int(sample_rate * frame_ms / 1000.0))
    n = len(x) // hop
    if n == 0:
        return None
    frames = x[: n * hop].astype(np.float32).reshape(n, hop)
    rms = np.sqrt(np.mean(frames * frames, axis=1))
    peak = float(rms.max())
    if peak < NOISE_FLOOR:
        return None
    env = np.clip((rms - NOISE_FLOOR) / (peak - NOISE_FLOOR + 1e-6), 0.0, 1.0)
    smooth = np.empty_like(env)
    level = 0.0
    for i, e in enumerate(env):  # fast attack, slow release: a nod per stressed syllable
        level = e if e > level else 0.6 * level + 0.4 * e
        smooth[i] = level
    keys = [
        Keyframe(float((i + 1) * frame_ms), {joint: round(base_deg + max_deg * float(v), 2)}, "ease_in_out")
        for i, v in enumerate(smooth)
    ]
    keys.append(Keyframe(float((n + 2) * frame_ms), {joint: base_deg}, "ease_in_out"))
    return Animation(name, tuple(keys))


def speak_along(
    robot: Robot,
    audio: np.ndarray,
    sample_rate: int,
    *,
    enabled: bool = True,
    max_deg: float = 4.0,
    joint: str = "head_pitch",
) -> bool:
    """Sway with the speech audio, on top of any gesture; returns True when the sway started.

    The sway replaces the previous one (one utterance at a time). Skips (returns False) when
    disabled, the robot lacks ``joint``, an emergency stop is latched, or the audio is silent.
    """
    if not enabled or joint not in robot.joints or robot.estopped:
        return False
    anim = envelope_keyframes(audio, sample_rate, max_deg=max_deg, joint=joint)
    if anim is None:
        return False
    robot.sway(anim)
    return True
