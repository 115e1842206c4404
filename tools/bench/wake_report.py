"""``bench --wake``'s report as text: each figure beside its target (:func:`format_wake`)."""

from __future__ import annotations

from typing import Any

TARGETS = "targets: >= 95 % in quiet, >= 85 % in noise at {snr}, <= 1 false wake an hour, standby CPU <= 15 %"
NOISE_NAMES = {"pink": "pink noise", "babble": "babble (4 real talkers)", "hum": "motor hum"}


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _detection(r: dict[str, Any], conds: list[str]) -> list[str]:
    lines = [
        f"{'detection (clips that woke it)':40s}" + "".join(f"{c:>10s}" for c in conds) + "  near misses"
    ]
    for group, tuning in (("tuning", True), ("test", False)):
        d = r["detection"][group]
        near = d["near_misses"]
        label = f"  {group} voices ({d['voices']}, {d['clips']} clips)"
        lines.append(
            f"{label:40s}"
            + "".join(f"{_pct(d[c]):>10s}" for c in conds)
            + f"  {near['woke']} of {near['of']} woke it"
        )
        for kind, name in NOISE_NAMES.items():
            row = "".join(f"{_pct(d[c + ' by noise'][kind]):>10s}" for c in conds[1:])
            lines.append(f"{'    ' + name:40s}{'':>10s}{row}")
        for v in (v for v in r["voices"] if v["tuning"] == tuning):
            row = "".join(f"{v[c]:>6d}/{v['clips']:<3d}" for c in conds)
            lines.append(f"    {v['voice']:36s}{row}  {v['near']} woke it")
    return lines


def _verified(r: dict[str, Any], conds: list[str]) -> list[str]:
    v = r["verified"]
    st, fw, ms = v["setting"], v["false_wakes"], v["verify_ms"]
    lines = [
        "",
        f"two stages: candidates at cutoff {st['cutoff']}, window {st['window']}; Whisper verifies "
        f"the 2 s ending {st['delay_s']} s after each (margin {st['margin']})",
        "",
        *_detection(v, conds),
        "",
        f"{'false wakes (verified)':44s}{'hours':>8s}{'cands':>7s}{'wakes':>7s}",
    ]
    for s in v["streams"]:
        lines.append(f"  {s['stream']:42s}{s['hours']:8.2f}{s['candidates']:7d}{s['wakes']:7d}")
    lines += [
        f"  {'all':42s}{fw['hours']:8.2f}{fw['candidates']:7d}{fw['wakes']:7d}   "
        f"{fw['per_hour']:.2f} an hour ({fw['candidates_per_hour']:.1f} candidates an hour)",
        f"verification: {ms['n']} clips, p50 {ms['p50']:.0f} ms, p95 {ms['p95']:.0f} ms, "
        f"max {ms['max']:.0f} ms",
    ]
    if "verified_sweep" in r:
        lines += ["", "two stages, tuning set only (cutoff, window, delay, margin):"]
        for s in r["verified_sweep"]:
            d, nm = s["detection"], s["near_misses"]
            lines.append(
                f"  {s['cutoff']:.2f} {s['window']} {s['delay_s']:.2f} {s['margin']}: "
                + ", ".join(f"{c} {_pct(x)}" for c, x in d.items())
                + f"; near misses {nm['woke']}/{nm['of']}; {s['false_per_hour']:.2f} false an hour"
                f" ({s['candidates_per_hour']:.1f} candidates) over {s['hours']:.2f} h"
            )
    return lines


def format_wake(r: dict[str, Any], target_noise: str = "10 dB") -> str:
    """:func:`tools.bench.wake_run.run_wake`'s report as tables (``target_noise``: the target's condition)."""
    own = r["model_setting"]
    setting = f"cutoff {r['cutoff']}, window {r['window']}"
    if (own["cutoff"], own["window"]) == (r["cutoff"], r["window"]):
        setting += " (the model's own)"
    ns = r.get("noise_suppression", 0)
    setting += f"; noise suppression {ns}" if ns else "; no noise suppression"
    conds = [
        k
        for k in r["detection"]["test"]
        if k not in ("clips", "voices", "near_misses") and "by noise" not in k
    ]
    lines = [f"wake word {r['phrase']!r} ({r['wake_word']}): {setting}", "", *_detection(r, conds)]
    lines += ["", f"{'false wakes':44s}{'hours':>8s}{'wakes':>7s}"]
    for s in r["streams"]:
        lines.append(f"  {s['stream']:42s}{s['hours']:8.2f}{s['wakes']:7d}")
    fw = r["false_wakes"]
    lines.append(f"  {'all':42s}{fw['hours']:8.2f}{fw['wakes']:7d}   {fw['per_hour']:.2f} an hour")
    if "verified" in r:
        lines += _verified(r, conds)
    if "standby" in r:
        sb = r["standby"]
        wakes = ", ".join("missed" if w is None else f"{w} ms" for w in sb["wake_ms"])
        lines += [
            "",
            f"standby CPU: {sb['cpu_percent']:.1f} % of one core over {sb['seconds']:.0f} s of speech "
            f"without the wake word ({sb['heard_in_standby']} utterances heard meanwhile); 1-minute load "
            f"{sb['load_before'][0]:.2f} before, {sb['load_after'][0]:.2f} after",
            f"wake word to 'awake' (piper, through PulseAudio and the CLI): {wakes}",
        ]
    if "standby_error" in r:
        lines += ["", f"standby CPU not measured: {r['standby_error']}"]
    lines += ["", TARGETS.format(snr=target_noise) + " (the test voices)"]
    if "sweep" in r:
        lines += ["", "tuning set only (tuning voices and near misses, the first prose voice, pink noise):"]
        for s in r["sweep"]:
            d, nm = s["detection"], s["near_misses"]
            lines.append(
                f"  cutoff {s['cutoff']:.2f} window {s['window']}: "
                + ", ".join(f"{c} {_pct(v)}" for c, v in d.items())
                + f"; near misses {nm['woke']}/{nm['of']}; {s['false_per_hour']:.2f} false an hour"
                f" over {s['hours']:.2f} h"
            )
    return "\n".join(lines)
