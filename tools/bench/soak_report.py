"""The soak's report: ``report.json`` (samples, per-turn rows, summary), ``report.png`` and a summary.

Summary figures (:func:`summarize`):

* ``turns``, ``answered``, ``unanswered`` (turn numbers), ``crashes``, ``restarts``,
  ``final_exit_code`` (of the SIGTERM at the end: 0 is a clean stop), ``errors`` (error events);
  ``barge_ins`` (attempted, interrupted), ``timers`` (asked, set, fired), ``typed``;
* ``restored_timers``: timers a crashed child left pending in its state store (``pending``)
  and how many of them the restarted child announced and played (``announced``);
* ``memory``: PSS and RSS after warm-up (median of the per-turn samples of the five turns up to
  turn ``warmup_turns``) and at the end (median of the last five turns), MiB, and the growth
  between them, %; ``pss_slope_mib_per_100_turns``, the least-squares slope of PSS over the
  turns after warm-up. The default warm-up is ``min(50, 40 % of the turns)``: 50 of 1,000
  turns as in the target (<= 3 % growth after the first 50), 20 of a 50-turn run;
* ``context``: the turn driver's work between turns (``context_tidied`` events): compactions
  done there, turns they dropped, prompt tokens read ahead into the KV cache, and how often the
  reading stopped early because the next input came; each row also has the turn's
  ``prompt_tokens`` (a compaction inside a turn shows as hundreds);
* ``threads`` and ``fds``: first and last per-turn sample, and the largest;
* ``maps``: the child's memory mappings, first and last per-turn sample, and the largest;
* ``latency_ms``: voice-to-voice p50/p95 of the first and last 100 answered turns (the first
  and last 20 % when there are fewer than 500);
* ``drift``: where a slower end went, medians over the same first and last windows: each
  stage's mark (``endpoint_ms``, ``asr_done_ms``, ``first_token_ms``), the model's prefill
  (``llm_ttft_ms``) and decoding speed (``tokens_per_s``), and the CPU time the child used per
  turn (``cpu_s_per_turn``: more work, where the stages grow with it; the same work, where
  they grow without).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tools.bench.soak import SoakRun

MEDIAN_OF = 5
"""Per-turn samples whose median is one memory figure (one sample is noisy: arenas, GC)."""


def default_warmup(turns: int) -> int:
    """Warm-up turns for a run of ``turns``: ``min(50, 40 %)``, at least 1."""
    return max(1, min(50, round(0.4 * turns)))


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 1) if values else -1.0


def _memory(rows: list[dict[str, Any]], warmup: int) -> dict[str, Any]:
    measured = [r for r in rows if "pss_mib" in r]
    if not measured:
        return {}
    warm = [r for r in measured if r["turn"] < warmup][-MEDIAN_OF:] or measured[:MEDIAN_OF]
    end = measured[-MEDIAN_OF:]
    out: dict[str, Any] = {"warmup_turns": warmup}
    for key in ("pss_mib", "rss_mib"):
        a = float(np.median([r[key] for r in warm]))
        b = float(np.median([r[key] for r in end]))
        name = key.removesuffix("_mib")
        out[f"{name}_first_mib"] = measured[0][key]
        out[f"{name}_warm_mib"] = round(a, 1)
        out[f"{name}_end_mib"] = round(b, 1)
        out[f"{name}_growth_pct"] = round(100 * (b - a) / a, 2) if a else 0.0
    after = [r for r in measured if r["turn"] >= warmup]
    if len(after) >= 3:
        slope = np.polyfit([r["turn"] for r in after], [r["pss_mib"] for r in after], 1)[0]
        out["pss_slope_mib_per_100_turns"] = round(float(slope) * 100, 2)
    return out


def _latency(rows: list[dict[str, Any]]) -> dict[str, Any]:
    v2v = [r["latency_ms"] for r in rows if r.get("answered") and r.get("latency_ms", -1) >= 0]
    n = 100 if len(v2v) >= 500 else max(1, round(0.2 * len(v2v)))
    first, last = v2v[:n], v2v[-n:]
    return {
        "window_turns": n,
        "first_p50": _pct(first, 50),
        "first_p95": _pct(first, 95),
        "last_p50": _pct(last, 50),
        "last_p95": _pct(last, 95),
        "all_p50": _pct(v2v, 50),
    }


DRIFT_KEYS = ("endpoint_ms", "asr_done_ms", "first_token_ms", "llm_ttft_ms", "tokens_per_s")
"""Report-row fields whose first- and last-window medians ``drift`` compares."""


def _drift(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answered = [r for r in rows if r.get("answered") and r.get("latency_ms", -1) >= 0]
    n = 100 if len(answered) >= 500 else max(1, round(0.2 * len(answered)))
    out: dict[str, Any] = {"window_turns": n}
    for key in DRIFT_KEYS:
        first = [r[key] for r in answered[:n] if r.get(key, -1) >= 0]
        last = [r[key] for r in answered[-n:] if r.get(key, -1) >= 0]
        out[key] = {"first": _pct(first, 50), "last": _pct(last, 50)}
    # CPU time between consecutive per-turn samples of one child (a restart starts it over).
    timed = [r for r in rows if "cpu_s" in r]
    per_turn = [
        b["cpu_s"] - a["cpu_s"] for a, b in zip(timed, timed[1:], strict=False) if b["cpu_s"] >= a["cpu_s"]
    ]
    m = 100 if len(per_turn) >= 500 else max(1, round(0.2 * len(per_turn)))
    out["cpu_s_per_turn"] = {"first": _pct(per_turn[:m], 50), "last": _pct(per_turn[-m:], 50)}
    return out


def summarize(run: SoakRun, warmup: int) -> dict[str, Any]:
    """The summary figures of a soak (see the module docstring)."""
    rows = run.rows
    measured = [r for r in rows if "threads" in r]
    kinds = {k: [r for r in rows if r["kind"] == k] for k in ("speak", "typed", "barge", "timer")}
    return {
        "turns": len(rows),
        "answered": sum(bool(r["answered"]) for r in rows),
        "unanswered": [r["turn"] for r in rows if not r["answered"]],
        "crashes": len(run.crashes),
        "restarts": run.restarts,
        "final_exit_code": run.final_exit,
        "errors": sum(r.get("errors", 0) for r in rows),
        "load_s": run.load_s,
        "kinds": {k: len(v) for k, v in kinds.items()},
        "barge_ins": {
            "attempted": len(kinds["barge"]),
            "interrupted": sum(bool(r.get("barge_in")) for r in kinds["barge"]),
        },
        "timers": {
            "asked": len(kinds["timer"]),
            "set": sum(bool(r.get("timer_set")) for r in kinds["timer"]),
            "fired": sum(bool(r.get("timer_fired")) for r in kinds["timer"]),
        },
        "restored_timers": {
            "pending": sum(c.get("pending_timers", 0) for c in run.crashes),
            "announced": sum(bool(t["played"]) for c in run.crashes for t in c.get("restored_timers", [])),
        },
        "context": {  # compacted and read into the KV cache between turns (Conversation.tidy)
            "compactions": sum(r.get("tidy_dropped", 0) > 0 for r in rows),
            "turns_dropped": sum(r.get("tidy_dropped", 0) for r in rows),
            "tokens_read_ahead": sum(r.get("tidy_tokens", 0) for r in rows),
            "stopped_early": sum(r.get("tidy_stopped", 0) for r in rows),
        },
        "memory": _memory(rows, warmup),
        "threads": _flat(measured, "threads"),
        "fds": _flat(measured, "fds"),
        "maps": _flat([r for r in measured if "maps" in r], "maps"),
        "latency_ms": _latency(rows),
        "drift": _drift(rows),
        "notes": run.notes,
    }


def _flat(rows: list[dict[str, Any]], key: str) -> dict[str, int]:
    if not rows:
        return {}
    return {"first": rows[0][key], "last": rows[-1][key], "max": max(r[key] for r in rows)}


def build_report(run: SoakRun, warmup: int, meta: dict[str, Any]) -> dict[str, Any]:
    """``{"meta", "summary", "turns", "samples", "crashes"}``: everything ``report.json`` holds."""
    return {
        "meta": meta,
        "summary": summarize(run, warmup),
        "turns": run.rows,
        "samples": [s.to_json() for s in run.samples],
        "crashes": run.crashes,
    }


def write_report(report: dict[str, Any], out: Path) -> tuple[Path, Path | None]:
    """Write ``out/report.json`` and, with matplotlib installed, ``out/report.png``.

    Returns:
        The two paths (None for the plot without matplotlib: ``pip install matplotlib`` (the ``test`` extra)).
    """
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.json"
    path.write_text(json.dumps(report, indent=1))
    try:
        import matplotlib
    except ModuleNotFoundError:
        return path, None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["turns"] if "pss_mib" in r]
    fig, (mem, lat) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    turns = [r["turn"] for r in rows]
    mem.plot(turns, [r["pss_mib"] for r in rows], label="PSS")
    mem.plot(turns, [r["rss_mib"] for r in rows], label="RSS", alpha=0.6)
    warmup = report["summary"]["memory"].get("warmup_turns")
    if warmup is not None:
        mem.axvline(warmup, color="grey", linestyle=":", label="end of warm-up")
    mem.set_ylabel("memory, MiB")
    mem.legend()
    mem.grid(alpha=0.3)
    answered = [r for r in report["turns"] if r.get("latency_ms", -1) >= 0]
    lat.plot([r["turn"] for r in answered], [r["latency_ms"] for r in answered], ".", markersize=4)
    lat.set_ylabel("voice-to-voice, ms")
    lat.set_xlabel("turn")
    lat.grid(alpha=0.3)
    fig.suptitle("bolt-agent soak")
    fig.tight_layout()
    png = out / "report.png"
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return path, png


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a few readable lines."""
    m, lat = summary["memory"], summary["latency_ms"]
    missed, barge, timers = summary["unanswered"], summary["barge_ins"], summary["timers"]
    lines = [
        f"turns {summary['turns']}, answered {summary['answered']}, unanswered {len(missed)}"
        + (f" (turns {missed[:20]})" if missed else ""),
        f"crashes {summary['crashes']}, restarts {summary['restarts']}, "
        f"final exit {summary['final_exit_code']}, error events {summary['errors']}",
        f"barge-ins {barge['interrupted']}/{barge['attempted']} interrupted; "
        f"timers set {timers['set']}/{timers['asked']}, fired {timers['fired']}",
    ]
    if summary["crashes"]:
        restored = summary["restored_timers"]
        lines.append(
            f"timers left pending by crashes {restored['pending']}, announced after the restart "
            f"{restored['announced']}"
        )
    if m:
        lines.append(
            f"memory PSS {m['pss_warm_mib']} MiB after {m['warmup_turns']} turns -> {m['pss_end_mib']} MiB "
            f"({m['pss_growth_pct']:+.2f} %); RSS {m['rss_warm_mib']} -> {m['rss_end_mib']} MiB "
            f"({m['rss_growth_pct']:+.2f} %); "
            f"slope {m.get('pss_slope_mib_per_100_turns', 'n/a')} MiB/100 turns"
        )
    for key in ("threads", "fds", "maps"):
        if summary.get(key):
            t = summary[key]
            lines.append(f"{key} {t['first']} -> {t['last']} (max {t['max']})")
    lines.append(
        f"voice-to-voice p50/p95: first {lat['window_turns']} turns "
        f"{lat['first_p50']}/{lat['first_p95']} ms, last {lat['last_p50']}/{lat['last_p95']} ms"
    )
    d = summary.get("drift")
    if d:
        stages = ", ".join(
            f"{key} {d[key]['first']} -> {d[key]['last']}" for key in (*DRIFT_KEYS, "cpu_s_per_turn")
        )
        lines.append(f"medians, first -> last {d['window_turns']} turns: {stages}")
    c = summary.get("context")
    if c:
        lines.append(
            f"between turns: {c['compactions']} compactions ({c['turns_dropped']} old turns), "
            f"{c['tokens_read_ahead']} prompt tokens read ahead, stopped early {c['stopped_early']} times"
        )
    lines += [f"note: {n}" for n in summary["notes"]]
    return "\n".join(lines)
