"""``bolt-agent bench --wake``: does the wake word wake it, and nothing else, and what does standby cost?

Detection and false wakes are computed offline, on the detector the agent runs
(:class:`~agent.listening.wake_word.WakeWordDetector`: the same front end, model and decision),
fed the audio in 20 ms blocks as the microphone delivers it; the figures do not depend on the
machine's load. The model's probabilities are computed once per clip and stream, and any
cutoff and window are scored on them (:class:`~agent.listening.wake_word.WakeDecider`).

* **Detection** (:mod:`tools.bench.wake_set`): each clip is preceded by 2 s of its background
  (a -70 dBFS noise floor in quiet; the noise itself in noise) and followed by 1 s; it counts
  when the word is heard after the lead-in. In noise (:data:`CONDITIONS`), the clips are mixed
  with pink noise, babble (the real recordings of ``tests/data/audio``, four at once) and a
  motor hum in turn, at 15, 10 and 5 dB under the speech (:func:`~tools.bench.wake_set.noise_gain`);
  the target's condition is :data:`TARGET_NOISE`. Per voice, and for the tuning voices and the
  test voices (never tuned on) apart; near misses ("Okay, now.") count when they wake it.
* **False wakes**: every stream is fed through one detector from start to end: the checkout's
  prose read by three espeak-ng voices and the piper voice, the real recordings, and five kinds
  of noise at -26 dBFS; wakes per hour of each and of all.
* **Standby CPU** (:mod:`tools.bench.wake_live`): the agent itself on a private PulseAudio server.

:func:`sweep` scores every cutoff and window on the tuning set alone (tuning voices, their near
misses, the first prose voice, pink noise): what a setting may be chosen on.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agent.listening.wake_word import REFRACTORY_S, WakeWordDetector, find_model
from agent.speech.audio import SAMPLE_RATE
from tools.bench import wake_set

CONDITIONS: tuple[tuple[str, float | None], ...] = (
    ("quiet", None),
    ("15 dB", 15.0),
    ("10 dB", 10.0),
    ("5 dB", 5.0),
)
"""Detection conditions: the name and the signal-to-noise ratio over the speech, dB (None: quiet)."""
TARGET_NOISE = "10 dB"
"""The noisy condition the target (>= 85 %) is held against."""
NOISY = ("pink", "babble", "hum")
"""The noise kinds the clips are mixed with, in turn."""
LEAD_S = 2.0
"""Background before each clip, s."""
TAIL_S = 1.0
"""Background after each clip, s."""
BLOCK = 320
"""Samples per block fed to the detector (20 ms: the microphone's block)."""
NOISE_MIN = 12
"""Minutes of each kind of noise in the false-wake count."""
ROOT = Path(__file__).resolve().parents[2]
CUTOFFS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
WINDOWS = (1, 2, 3, 5, 8)


def default_folder(wake_word: str) -> Path:
    """The set's cache: ``$XDG_CACHE_HOME/bolt-agent/wake-set/WAKE_WORD`` (``~/.cache``)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bolt-agent" / "wake-set" / wake_word


def _probs(det: WakeWordDetector, audio: np.ndarray) -> np.ndarray:
    """The model's probabilities for ``audio`` fed in microphone-sized blocks (state kept)."""
    out: list[float] = []
    for i in range(0, audio.size, BLOCK):
        out += det.probabilities(audio[i : i + BLOCK])
    return np.asarray(out, np.float64)


def fire_steps(probs: np.ndarray, cutoff: float, window: int, step_s: float, after: int = 0) -> list[int]:
    """The steps where :class:`~agent.listening.wake_word.WakeDecider` detects on ``probs``, from ``after``.

    The same decision, vectorised: the mean of each ``window`` probabilities over ``cutoff``;
    after a detection at step ``i`` the next can be at ``i + deaf + window`` at the earliest
    (``deaf``: :data:`~agent.listening.wake_word.REFRACTORY_S` in steps; the window refills after it).
    Step ``i``'s probability covers the audio up to sample ``(i + 1) * stride * 160``.
    """
    if probs.size < window:
        return []
    csum = np.concatenate([[0.0], np.cumsum(probs)])
    means = (csum[window:] - csum[:-window]) / window  # means[k]: the window ending at step k + window - 1
    over = np.nonzero(means > cutoff)[0] + window - 1
    deaf = round(REFRACTORY_S / step_s)
    out, next_ok = [], 0
    for i in over:
        if i >= next_ok:
            if i >= after:
                out.append(int(i))
            next_ok = i + deaf + window
    return out


def fires(probs: np.ndarray, cutoff: float, window: int, step_s: float, after: int = 0) -> int:
    """How many detections :func:`fire_steps` finds."""
    return len(fire_steps(probs, cutoff, window, step_s, after))


@dataclass
class Scores:
    """The model's probabilities on the whole set (computed once; any setting is scored on them).

    Attributes:
        step_s: Audio per probability, s.
        clips: The wake-word clips; ``near``: the near misses.
        detect: Condition -> probabilities of each clip (in :attr:`clips` order).
        kinds: The noise each clip is mixed with in noise.
        near_probs: Probabilities of each near miss, in quiet.
        streams: Name -> (seconds, probabilities, a tuning stream).
        folder: The set's cache; ``speech``: the real recordings (babble): what the clips'
            audio is rebuilt from (:func:`clip_audio`).
    """

    step_s: float
    clips: list[wake_set.WakeClip]
    near: list[wake_set.WakeClip]
    detect: dict[str, list[np.ndarray]] = field(default_factory=dict)
    kinds: list[str] = field(default_factory=list)
    near_probs: list[np.ndarray] = field(default_factory=list)
    streams: dict[str, tuple[float, np.ndarray, bool]] = field(default_factory=dict)
    folder: Path = Path()
    speech: list[np.ndarray] = field(default_factory=list)


def clip_audio(sc: Scores, cond: str, i: int, near: bool = False) -> np.ndarray:
    """The audio clip ``i`` (a near miss: ``near``) was scored on in condition ``cond`` (float32)."""
    clip = (sc.near if near else sc.clips)[i]
    audio = wake_set.read_clip(sc.folder / clip.file)
    if near:
        return _background(audio, None, "", i, sc.speech)
    return _background(audio, dict(CONDITIONS)[cond], sc.kinds[i], i, sc.speech)


def _background(
    audio: np.ndarray, snr: float | None, kind: str, seed: int, speech: list[np.ndarray]
) -> np.ndarray:
    """``audio`` with :data:`LEAD_S` before and :data:`TAIL_S` after, over its background."""
    lead, tail = int(LEAD_S * SAMPLE_RATE), int(TAIL_S * SAMPLE_RATE)
    n = lead + audio.size + tail
    padded = np.concatenate([np.zeros(lead, np.float32), audio, np.zeros(tail, np.float32)])
    if snr is None:
        return padded + wake_set.floor(n, seed)
    unit = wake_set.noise(kind, n / SAMPLE_RATE + 0.1, 1000 + seed, speech)
    return padded + wake_set.noise_gain(audio, snr) * unit[:n]


def score_set(
    wake_word: str,
    piper_voice: Path,
    folder: Path,
    note: Callable[[str], None],
    on_stream: Callable[[str, np.ndarray, np.ndarray, bool], None] | None = None,
    noise_suppression: int = 0,
) -> Scores:
    """Synthesize (or read) the set and run the model over all of it.

    Args:
        wake_word: A built-in model name.
        piper_voice: The product's piper voice.
        folder: The set's cache.
        note: Progress lines.
        on_stream: Called once per false-wake stream with its name, its whole audio (int16,
            16 kHz), its probabilities and whether it is a tuning stream (the verifier's
            candidates are cut from it); the audio is not kept.
        noise_suppression: The detector's WebRTC noise suppression level (0: none); the
            verifier's clips are cut from the audio as heard, not as suppressed.

    Raises:
        RuntimeError: a synthesizer failed.
        agent.listening.wake_word.WakeWordError: the model cannot be loaded.
    """
    det = WakeWordDetector(find_model(wake_word), noise_suppression=noise_suppression)
    note(f"synthesizing or reading the wake-word clips in {folder}")
    every = wake_set.wake_clips(folder, wake_word, piper_voice)
    speech = wake_set.recordings(ROOT)
    sc = Scores(
        det.stride * 160 / SAMPLE_RATE,
        [c for c in every if not c.near_miss],
        [c for c in every if c.near_miss],
        folder=folder,
        speech=speech,
    )
    sc.kinds = [NOISY[i % len(NOISY)] for i in range(len(sc.clips))]
    audio = [wake_set.read_clip(folder / c.file) for c in sc.clips]
    note(f"scoring {len(sc.clips)} clips in quiet and in noise, {len(sc.near)} near misses")
    for cond, snr in CONDITIONS:
        per = []
        for i, a in enumerate(audio):
            det.reset()
            per.append(_probs(det, _background(a, snr, sc.kinds[i], i, speech)))
        sc.detect[cond] = per
    for i in range(len(sc.near)):
        det.reset()
        sc.near_probs.append(_probs(det, clip_audio(sc, "quiet", i, near=True)))
    note("feeding hours of speech without the wake word (the checkout's prose, real recordings) and noise")
    _streams(sc, det, folder, piper_voice, speech, on_stream)
    return sc


def _pcm(audio: np.ndarray) -> np.ndarray:
    return (np.clip(audio, -1.0, 1.0) * 32767).astype(np.int16)


def _streams(
    sc: Scores,
    det: WakeWordDetector,
    folder: Path,
    piper_voice: Path,
    speech: list[np.ndarray],
    on_stream: Callable[[str, np.ndarray, np.ndarray, bool], None] | None = None,
) -> None:
    """The false-wake streams, each through one detector from its start (tuning: the first voice, pink)."""
    avoid = tuple(w.lower() for w in wake_set.PHRASES.values()) + ("nabu", "jarvis", "mycroft", "alexa")
    tuning = wake_set.PARAGRAPH_VOICES[0].name

    def done(name: str, seconds: float, probs: np.ndarray, pcm: list[np.ndarray], tune: bool) -> None:
        sc.streams[name] = (seconds, probs, tune)
        if on_stream is not None:
            on_stream(name, np.concatenate(pcm), probs, tune)

    current, parts, pcm, seconds = "", [], [], 0.0
    for voice, audio in [*wake_set.paragraphs(ROOT, folder, piper_voice, avoid), ("", np.zeros(0))]:
        if voice != current:
            if current:
                done(f"prose, {current}", seconds, np.concatenate(parts), pcm, current == tuning)
            current, parts, pcm, seconds = voice, [], [], 0.0
            det.reset()
        parts.append(_probs(det, audio))
        if on_stream is not None:
            pcm.append(_pcm(audio))
        seconds += audio.size / SAMPLE_RATE
    if speech:
        det.reset()
        joined = np.concatenate([np.concatenate([s, np.zeros(SAMPLE_RATE // 2, np.float32)]) for s in speech])
        done(
            "real speech (tests/data/audio)",
            joined.size / SAMPLE_RATE,
            _probs(det, joined),
            [_pcm(joined)],
            False,
        )
    for k, kind in enumerate(wake_set.NOISES):
        det.reset()
        parts, pcm = [], []
        for minute in range(NOISE_MIN):
            unit = 0.05 * wake_set.noise(kind, 60.0, 7000 + 100 * k + minute, speech)  # -26 dBFS RMS
            parts.append(_probs(det, unit))
            if on_stream is not None:
                pcm.append(_pcm(unit))
        done(f"noise, {kind}", NOISE_MIN * 60.0, np.concatenate(parts), pcm, kind == "pink")


def _share(hits: list[int]) -> float:
    return round(sum(hits) / len(hits), 4) if hits else 0.0


def evaluate(sc: Scores, cutoff: float, window: int) -> dict[str, Any]:
    """At one setting: detection per voice, group, condition and noise; near misses; false wakes."""
    after = int(LEAD_S / sc.step_s) - 2
    hit = {
        cond: [int(fires(p, cutoff, window, sc.step_s, after) > 0) for p in per]
        for cond, per in sc.detect.items()
    }
    near = [int(fires(p, cutoff, window, sc.step_s) > 0) for p in sc.near_probs]
    voices: dict[str, dict[str, Any]] = {}
    for i, clip in enumerate(sc.clips):
        v = voices.setdefault(clip.voice, {"voice": clip.voice, "tuning": clip.tuning, "clips": 0, "near": 0})
        v["clips"] += 1
        for cond in hit:
            v[cond] = v.get(cond, 0) + hit[cond][i]
    for j, clip in enumerate(sc.near):
        voices[clip.voice]["near"] += near[j]
    groups = {}
    for name, tuning in (("tuning", True), ("test", False)):
        idx = [i for i, c in enumerate(sc.clips) if c.tuning == tuning]
        g: dict[str, Any] = {"clips": len(idx), "voices": len({sc.clips[i].voice for i in idx})}
        for cond in hit:
            g[cond] = _share([hit[cond][i] for i in idx])
            if cond != "quiet":
                g[cond + " by noise"] = {
                    k: _share([hit[cond][i] for i in idx if sc.kinds[i] == k]) for k in NOISY
                }
        nidx = [j for j, c in enumerate(sc.near) if c.tuning == tuning]
        g["near_misses"] = {"woke": sum(near[j] for j in nidx), "of": len(nidx)}
        groups[name] = g
    streams = [
        {
            "stream": name,
            "hours": round(s / 3600, 3),
            "wakes": fires(p, cutoff, window, sc.step_s),
            "tuning": t,
        }
        for name, (s, p, t) in sc.streams.items()
    ]
    hours = sum(s / 3600 for s, _, _ in sc.streams.values())
    wakes = sum(s["wakes"] for s in streams)
    return {
        "cutoff": cutoff,
        "window": window,
        "voices": list(voices.values()),
        "detection": groups,
        "streams": streams,
        "false_wakes": {
            "hours": round(hours, 2),
            "wakes": wakes,
            "per_hour": round(wakes / hours, 3) if hours else 0.0,
        },
    }


def sweep(sc: Scores) -> list[dict[str, Any]]:
    """Every cutoff x window scored on the tuning set alone (what a setting may be chosen on)."""
    out = []
    tune = {name: v for name, v in sc.streams.items() if v[2]}
    hours = sum(s for s, _, _ in tune.values()) / 3600
    for window in WINDOWS:
        for cutoff in CUTOFFS:
            sub = Scores(sc.step_s, [], [])
            sub.clips = [c for c in sc.clips if c.tuning]
            keep = [i for i, c in enumerate(sc.clips) if c.tuning]
            sub.kinds = [sc.kinds[i] for i in keep]
            sub.detect = {cond: [per[i] for i in keep] for cond, per in sc.detect.items()}
            sub.near = [c for c in sc.near if c.tuning]
            sub.near_probs = [p for c, p in zip(sc.near, sc.near_probs, strict=True) if c.tuning]
            sub.streams = tune
            r = evaluate(sub, cutoff, window)
            g = r["detection"]["tuning"]
            out.append(
                {
                    "cutoff": cutoff,
                    "window": window,
                    "detection": {cond: g[cond] for cond, _ in CONDITIONS},
                    "near_misses": g["near_misses"],
                    "false_per_hour": r["false_wakes"]["per_hour"],
                    "hours": round(hours, 2),
                }
            )
    return out
