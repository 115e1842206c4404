"""``bench --wake`` with the second stage: the detector's candidates confirmed by Whisper.

The two-stage wake word (:mod:`agent.listening.wake_verify`) wakes when the detector at a
candidate setting (cutoff, window) proposes a candidate and the verifier accepts the clip that
ends ``delay_s`` after it. Scored here on the probabilities :mod:`tools.bench.wake` computed
once: for each setting, the candidates are :func:`~tools.bench.wake.fire_steps`; each is
verified on the audio it was computed from, the clip ending at
``(step + 1) * 480 + delay_s * 16000`` samples (480: the 30 ms a probability covers); a
verdict is kept per clip end, so settings that propose the same candidate share it.

* A wake-word clip is heard when any candidate after the lead-in is accepted (a refused
  candidate starts the detector's quiet spell like an accepted one: one utterance, one
  candidate).
* The false-wake streams are fed to :meth:`Verified.stream` as :func:`~tools.bench.wake.score_set`
  makes them (their audio is not kept): every setting of :attr:`Verified.settings` on each stream,
  the sweep's (:data:`SWEEP`) on the tuning streams only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agent.listening.wake_verify import CLIP_S, WakeVerifier
from agent.speech.audio import SAMPLE_RATE
from tools.bench.wake import CONDITIONS, LEAD_S, NOISY, Scores, _share, clip_audio, fire_steps

SWEEP_CUTOFFS = (0.2, 0.3, 0.5, 0.7)
SWEEP_WINDOWS = (1, 3, 5)
SWEEP_DELAYS = (0.3, 0.45)
SWEEP_MARGINS = (None, 0.0, 0.5, 1.0, 2.0, 3.0)
"""The verifier's ``min_margin`` values swept (None: the decode must say the phrase)."""
HOP = 480
"""Samples a probability covers (3 frames of 10 ms)."""


@dataclass(frozen=True)
class Setting:
    """A two-stage setting.

    Attributes:
        cutoff: The detector's candidate cutoff; ``window``: its window.
        delay_s: The wait after a candidate before it is verified, s.
        margin: The verifier's ``min_margin`` (nats; None: the decode must say the phrase).
    """

    cutoff: float
    window: int
    delay_s: float
    margin: float | None = None


def sweep_settings(delay_s: float, margin: float | None) -> list[Setting]:
    """The sweep: every cutoff x window x margin at ``delay_s``; every delay at window 3, ``margin``."""
    out = [Setting(c, w, delay_s, m) for w in SWEEP_WINDOWS for c in SWEEP_CUTOFFS for m in SWEEP_MARGINS]
    out += [Setting(c, 3, d, margin) for d in SWEEP_DELAYS if d != delay_s for c in SWEEP_CUTOFFS]
    return out


@dataclass
class Verified:
    """Verdicts on candidates, cached by where their clip ends.

    Args:
        verifier: The second stage.
        settings: Settings scored on every stream (the shipped one first).
        sweep: Settings scored on the tuning streams only.
    """

    verifier: WakeVerifier
    settings: list[Setting]
    sweep: list[Setting] = field(default_factory=list)
    verdicts: dict[tuple[str, int], Any] = field(default_factory=dict)
    streams: dict[str, dict[Setting, tuple[int, int]]] = field(default_factory=dict)
    """Stream -> setting -> (candidates, wakes)."""
    audio: dict[str, np.ndarray] = field(default_factory=dict)
    """The clips' audio as scored (int16), kept once a candidate needed it."""

    def accepted(self, key: str, audio: np.ndarray, end: int, margin: float | None) -> bool:
        """The verdict on the clip of ``audio`` (float32 or int16) ending at sample ``end``.

        Judged by the verifier's thresholds with ``min_margin`` = ``margin`` (a verdict keeps its
        features: the margin can change without decoding again). The verifier must have been
        made with a ``min_margin`` (so that margins are computed).
        """
        end = min(end, audio.size)
        if (key, end) not in self.verdicts:
            clip = audio[max(0, end - int(CLIP_S * SAMPLE_RATE)) : end]
            if clip.dtype == np.int16:
                clip = clip.astype(np.float32) / 32768
            self.verdicts[key, end] = self.verifier.verify(clip)
        keep = self.verifier.min_margin
        self.verifier.min_margin = margin
        try:
            return self.verifier.judge(self.verdicts[key, end])
        finally:
            self.verifier.min_margin = keep

    def heard(self, key: str, audio: np.ndarray, steps: list[int], s: Setting) -> tuple[int, int]:
        """(candidates, accepted) among ``steps`` of ``audio``."""
        delay = int(s.delay_s * SAMPLE_RATE)
        return len(steps), sum(self.accepted(key, audio, (i + 1) * HOP + delay, s.margin) for i in steps)

    def stream(self, name: str, pcm: np.ndarray, probs: np.ndarray, tuning: bool) -> None:
        """One false-wake stream (int16 audio, its probabilities): candidates and wakes at each setting."""
        per = self.streams.setdefault(name, {})
        for s in dict.fromkeys([*self.settings, *(self.sweep if tuning else [])]):
            per[s] = self.heard(name, pcm, fire_steps(probs, s.cutoff, s.window, HOP / SAMPLE_RATE), s)

    def ms(self) -> list[float]:
        """Every verification's time, ms."""
        return [v.ms for v in self.verdicts.values()]


def _clip_hits(v: Verified, sc: Scores, s: Setting, cond: str, idx: list[int], near: bool) -> list[int]:
    after = 0 if near else int(LEAD_S / sc.step_s) - 2
    probs = sc.near_probs if near else sc.detect[cond]
    out = []
    for i in idx:
        steps = fire_steps(probs[i], s.cutoff, s.window, sc.step_s, after)
        if not steps:
            out.append(0)
            continue
        key = f"{'near' if near else cond}/{i}"
        if key not in v.audio:
            v.audio[key] = (np.clip(clip_audio(sc, cond, i, near), -1, 1) * 32767).astype(np.int16)
        out.append(int(v.heard(key, v.audio[key], steps, s)[1] > 0))
    return out


def evaluate(
    v: Verified, sc: Scores, s: Setting, groups: tuple[str, ...] = ("tuning", "test")
) -> dict[str, Any]:
    """Detection (per group, condition and noise), near misses and false wakes at ``s``.

    Returns:
        ``setting``, ``detection`` (group -> condition -> share, ``by noise``, ``near_misses``),
        ``voices`` (voice -> condition -> clips heard), ``false_wakes`` over the streams
        :meth:`Verified.stream` scored at ``s`` (``candidates``, ``wakes``, ``hours``, ``per_hour``)
        and ``streams``.
    """
    det: dict[str, Any] = {}
    voices: dict[str, dict[str, Any]] = {}
    for group in groups:
        tuning = group == "tuning"
        idx = [i for i, c in enumerate(sc.clips) if c.tuning == tuning]
        g: dict[str, Any] = {"clips": len(idx), "voices": len({sc.clips[i].voice for i in idx})}
        for cond, _ in CONDITIONS:
            hits = _clip_hits(v, sc, s, cond, idx, False)
            g[cond] = _share(hits)
            if cond != "quiet":
                g[cond + " by noise"] = {
                    k: _share([h for h, i in zip(hits, idx, strict=True) if sc.kinds[i] == k]) for k in NOISY
                }
            for h, i in zip(hits, idx, strict=True):
                row = voices.setdefault(
                    sc.clips[i].voice, {"voice": sc.clips[i].voice, "tuning": tuning, "clips": 0}
                )
                row[cond] = row.get(cond, 0) + h
                if cond == "quiet":
                    row["clips"] += 1
        nidx = [j for j, c in enumerate(sc.near) if c.tuning == tuning]
        near = _clip_hits(v, sc, s, "quiet", nidx, True)
        g["near_misses"] = {"woke": sum(near), "of": len(nidx)}
        for h, j in zip(near, nidx, strict=True):
            voices[sc.near[j].voice]["near"] = voices[sc.near[j].voice].get("near", 0) + h
        det[group] = g
    streams = [
        {
            "stream": name,
            "hours": round(sc.streams[name][0] / 3600, 3),
            "candidates": per[s][0],
            "wakes": per[s][1],
            "tuning": sc.streams[name][2],
        }
        for name, per in v.streams.items()
        if s in per
    ]
    hours = sum(x["hours"] for x in streams)
    wakes = sum(x["wakes"] for x in streams)
    cands = sum(x["candidates"] for x in streams)
    return {
        "setting": {"cutoff": s.cutoff, "window": s.window, "delay_s": s.delay_s, "margin": s.margin},
        "detection": det,
        "voices": list(voices.values()),
        "streams": streams,
        "false_wakes": {
            "hours": round(hours, 2),
            "candidates": cands,
            "candidates_per_hour": round(cands / hours, 2) if hours else 0.0,
            "wakes": wakes,
            "per_hour": round(wakes / hours, 3) if hours else 0.0,
        },
    }


def sweep(v: Verified, sc: Scores) -> list[dict[str, Any]]:
    """Every sweep setting on the tuning set alone (tuning voices, near misses and streams)."""
    out = []
    for s in v.sweep:
        r = evaluate(v, sc, s, ("tuning",))
        g = r["detection"]["tuning"]
        out.append(
            {
                **r["setting"],
                "detection": {cond: g[cond] for cond, _ in CONDITIONS},
                "near_misses": g["near_misses"],
                "false_per_hour": r["false_wakes"]["per_hour"],
                "candidates_per_hour": r["false_wakes"]["candidates_per_hour"],
                "hours": r["false_wakes"]["hours"],
            }
        )
    return out


def timing(v: Verified) -> dict[str, float]:
    """The verifications' times: ``n``, ``p50``, ``p95``, ``max`` (ms)."""
    ms = np.asarray(v.ms() or [0.0])
    return {
        "n": len(v.verdicts),
        "p50": round(float(np.percentile(ms, 50)), 1),
        "p95": round(float(np.percentile(ms, 95)), 1),
        "max": round(float(ms.max()), 1),
    }
