"""``bolt-agent bench --wake`` as a whole.

The detector alone (:mod:`tools.bench.wake`), the two stages (:mod:`tools.bench.wake_verified`)
and the live part (:mod:`tools.bench.wake_live`), in one report (:func:`run_wake`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent.listening.wake_word import find_model
from tools.bench import wake_verified
from tools.bench.wake import default_folder, evaluate, score_set, sweep
from tools.bench.wake_live import standby_cpu


def run_wake(
    wake_word: str,
    piper_voice: Path,
    config: Path,
    cpu_s: float,
    with_sweep: bool,
    note: Callable[[str], None],
    cutoff: float | None = None,
    window: int | None = None,
    verifier: Any = None,
    candidate_cutoff: float = 0.5,
    noise_suppression: int = 0,
) -> dict[str, Any]:
    """The whole benchmark at the configured setting (None: the model's own): detection, false wakes, CPU.

    Args:
        wake_word: A built-in model name.
        piper_voice: The product's piper voice.
        config: The robot config the live part runs.
        cpu_s: Seconds of standby to measure the CPU over (0: skip the live part).
        with_sweep: Also score every setting on the tuning set.
        note: Progress lines.
        cutoff: The detector's cutoff alone (None: the model's own).
        window: Its window (None: the model's own); the candidates' too.
        verifier: A :class:`~agent.listening.wake_verify.WakeVerifier`: the two stages are scored
            too (``verified``, and ``verified_sweep`` with ``with_sweep``).
        candidate_cutoff: The detector's cutoff when it proposes candidates to ``verifier`` (its
            window: ``window``, else :data:`~agent.listening.wake_verify.CANDIDATE_WINDOW`).
        noise_suppression: The detector's WebRTC noise suppression level (``[live]
            wake_noise_suppression``; 0: none).

    Returns:
        The report; ``standby_error`` instead of ``standby`` when the live part could not run.

    Raises:
        RuntimeError: a synthesizer failed.
        agent.listening.wake_word.WakeWordError: the model cannot be loaded.
    """
    model = find_model(wake_word)
    folder = default_folder(wake_word)
    c = cutoff if cutoff is not None else model.cutoff
    w = window if window is not None else model.window
    ver = None
    if verifier is not None:
        from agent.listening.wake_verify import CANDIDATE_WINDOW, DELAY_S

        cw = window or CANDIDATE_WINDOW
        shipped = wake_verified.Setting(candidate_cutoff, cw, DELAY_S, verifier.min_margin)
        # The shipped setting first, then the same at every swept margin (re-judged, not decoded again).
        margins = [replace(shipped, margin=m) for m in wake_verified.SWEEP_MARGINS if m != shipped.margin]
        ver = wake_verified.Verified(
            verifier,
            [shipped, *margins],
            wake_verified.sweep_settings(DELAY_S, verifier.min_margin) if with_sweep else [],
        )
    sc = score_set(
        wake_word, piper_voice, folder, note, ver.stream if ver is not None else None, noise_suppression
    )
    report: dict[str, Any] = {"wake_word": wake_word, "phrase": model.phrase, **evaluate(sc, c, w)}
    report["noise_suppression"] = noise_suppression
    report["model_setting"] = {"cutoff": model.cutoff, "window": model.window}
    if with_sweep:
        report["sweep"] = sweep(sc)
    if ver is not None:
        note("verifying the candidates of the wake-word clips and near misses")
        report["verified"] = wake_verified.evaluate(ver, sc, ver.settings[0])
        report["verified_margins"] = [
            {k: r[k] for k in ("setting", "detection", "false_wakes")}
            for r in (wake_verified.evaluate(ver, sc, s) for s in ver.settings[1:])
        ]
        if with_sweep:
            report["verified_sweep"] = wake_verified.sweep(ver, sc)
        report["verified"]["verify_ms"] = wake_verified.timing(ver)
    if cpu_s > 0:
        try:
            report["standby"] = standby_cpu(config, wake_word, folder, piper_voice, cpu_s, note)
        except RuntimeError as e:  # the offline figures above still stand
            note(f"the live part failed: {e}")
            report["standby_error"] = str(e)
    return report
