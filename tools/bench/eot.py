"""``bolt-agent bench --eot``: false cut-offs against added latency, the eot-bench way.

LiveKit's eot-bench scores an end-of-turn detector at every real pause of recorded turns with a
policy (a threshold, an action delay, a timeout): a pause inside a turn that the policy ends is a
**false cut-off**; at the turn's real end, the silence the policy waits is the **added latency**.
Sweeping the policy gives a curve; two points summarise it: cut-offs at a latency budget, and
latency at a cut-off budget.

Here the pauses come from :mod:`tools.bench.eot_collect` (each judged once, by the real models,
on the turn-taking set and on the held-out speakers of :mod:`tools.bench.speakers`), and these
policies are scored on them without running the models again:

* ``vad``: every pause ends after a fixed silence (the action delay);
* ``smart_turn``: Smart Turn alone: over a threshold the turn ends after the action delay,
  otherwise at the timeout (eot-bench's policy for a detector);
* ``judge_fixed``: our judge with the waits before evidence decided them (700 ms for every
  finished verdict, ``doubtful_confirm_ms`` where Smart Turn decided or Whisper was
  unclear, the long silence for an unfinished one), its scale swept;
* ``judge``: our judge with the waits of :mod:`agent.listening.pace` by evidence (the shipped
  ``[turn]``), scale swept;
* ``judge_learned``: the same, each speaker's pauses learned over their conversation
  (:class:`agent.listening.pace.PauseModel`; the speakers say their cases in order).

A wait of ``W`` ms ends a pause of ``P`` ms inside the turn when ``W <= P`` (the reply would be
heard before the user went on); at the end the added latency is ``W``. Waits are counted from
the end of speech and are never under ``[turn] short_silence_ms`` (when the verdict comes).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import TurnConfig
from agent.listening.pace import PauseModel, evidence, wait_ms
from tools.bench.eot_collect import PauseRecord, Recording
from tools.bench.latency import percentiles

Wait = Callable[[PauseRecord, float], float]
"""A policy: the wait after a pause's verdict, ms, given how much longer than the shortest the
speaker's learned pauses are (ms; 0 when nothing is learned)."""

LATENCY_BUDGETS_MS = (300, 500, 700)
"""Mean added latencies at which the fewest false cut-offs are reported."""
CUTOFF_BUDGET = 0.05
"""Share of false cut-offs at which the least added latency is reported."""
SCALES = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.4, 1.6, 2.0)
"""Scales of our judge's waits swept for its curve."""


@dataclass(frozen=True)
class Point:
    """One policy scored on a set of pauses.

    Attributes:
        label: The policy and its setting.
        cutoffs: Share of the pauses inside turns that it ended (0..1).
        latency_mean_ms: Mean wait at the turns' ends, ms.
        latency_p50_ms: Median wait at the turns' ends, ms.
        latency_p95_ms: 95th percentile, ms.
        mid: Pauses inside turns.
        ends: Turns' ends.
        cut: The recordings of the pauses it ended.
    """

    label: str
    cutoffs: float
    latency_mean_ms: float
    latency_p50_ms: float
    latency_p95_ms: float
    mid: int
    ends: int
    cut: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "label": self.label,
            "cutoffs": round(self.cutoffs, 4),
            "latency_mean_ms": round(self.latency_mean_ms, 1),
            "latency_p50_ms": round(self.latency_p50_ms, 1),
            "latency_p95_ms": round(self.latency_p95_ms, 1),
            "mid": self.mid,
            "ends": self.ends,
            "cut": list(self.cut),
        }


def _p(values: list[float], q: float) -> float:
    if not values:
        return -1.0
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def score(
    records: list[PauseRecord],
    wait: Wait,
    label: str,
    short_ms: int,
    learn: Callable[[], PauseModel] | None = None,
) -> Point:
    """Score one policy on ``records``.

    Args:
        records: The pauses (any order: they are taken speaker by speaker, in conversation order).
        wait: The policy.
        label: Its name in the report.
        short_ms: ``[turn] short_silence_ms``: no wait is shorter.
        learn: Makes a fresh pause model per speaker (None: nothing is learned).

    Returns:
        The :class:`Point`.
    """
    cut: list[str] = []
    latencies: list[float] = []
    mid = 0
    by_speaker: dict[str, list[PauseRecord]] = {}
    for r in records:
        by_speaker.setdefault(r.speaker, []).append(r)
    for said in by_speaker.values():
        model = learn() if learn is not None else None
        for r in sorted(said, key=lambda r: (r.order, r.index)):
            w = max(float(short_ms), wait(r, model.extra_ms if model is not None else 0.0))
            if r.end:
                latencies.append(w)
                continue
            mid += 1
            if w <= r.length_ms:
                cut.append(r.case)
            if model is not None:
                model.observe(r.length_ms)
    return Point(
        label,
        len(cut) / mid if mid else 0.0,
        statistics.fmean(latencies) if latencies else -1.0,
        _p(latencies, 0.5),
        _p(latencies, 0.95),
        mid,
        len(latencies),
        tuple(cut),
    )


def vad_wait(delay_ms: float) -> Wait:
    """Every pause ends after ``delay_ms`` of silence."""
    return lambda r, extra: delay_ms


def smart_turn_wait(threshold: float, delay_ms: float, timeout_ms: float) -> Wait:
    """Smart Turn alone: over ``threshold`` the turn ends after ``delay_ms``, else at ``timeout_ms``."""
    return lambda r, extra: delay_ms if r.smart_turn > threshold else timeout_ms


def scaled(turn: TurnConfig, scale: float) -> TurnConfig:
    """``turn`` with every wait (strong, normal, doubtful, long) times ``scale``."""
    return turn.model_copy(
        update={
            k: int(round(getattr(turn, k) * scale))
            for k in ("strong_confirm_ms", "confirm_ms", "doubtful_confirm_ms", "long_silence_ms")
        }
    )


def judge_wait(turn: TurnConfig, scale: float = 1.0) -> Wait:
    """Our judge's verdict with the waits of :func:`agent.listening.pace.wait_ms`, times ``scale``."""
    waits = scaled(turn, scale)

    def wait(r: PauseRecord, extra: float) -> float:
        unclear = r.asr_logprob < turn.unclear_logprob
        level = evidence(turn, r.rule, r.complete, r.text_score, r.smart_turn, unclear, r.heard)
        return wait_ms(waits, level, extra)

    return wait


def pareto(points: Iterable[Point]) -> list[Point]:
    """The points no other beats on both cut-offs and mean latency, by latency."""
    front: list[Point] = []
    for p in sorted(points, key=lambda p: (p.latency_mean_ms, p.cutoffs)):
        if not front or p.cutoffs < front[-1].cutoffs:
            front.append(p)
    return front


def at_budgets(front: list[Point]) -> dict[str, Any]:
    """eot-bench's two summaries of a curve (None where no point qualifies).

    The fewest cut-offs within each latency budget, and the least latency with at most
    :data:`CUTOFF_BUDGET` cut-offs.
    """
    out: dict[str, Any] = {}
    for budget in LATENCY_BUDGETS_MS:
        ok = [p for p in front if p.latency_mean_ms <= budget]
        out[f"cutoffs_at_{budget}ms"] = round(min(p.cutoffs for p in ok), 4) if ok else None
    ok = [p for p in front if p.cutoffs <= CUTOFF_BUDGET]
    out[f"latency_at_{round(CUTOFF_BUDGET * 100)}pct_ms"] = (
        round(min(p.latency_mean_ms for p in ok), 1) if ok else None
    )
    return out


def curves(records: list[PauseRecord], turn: TurnConfig) -> dict[str, Any]:
    """Every family's curve and summaries on ``records``, and the shipped operating points.

    Args:
        records: Judged pauses.
        turn: The shipped ``[turn]``.

    Returns:
        ``{family: {"front": [...], "summary": {...}}}`` and ``operating_points``: the shipped
        judge (fixed scale 1, and with learned pauses) and the waits before this change.
    """
    short = turn.short_silence_ms
    before = turn.model_copy(update={"strong_confirm_ms": 0, "confirm_ms": 700})  # the waits before issue 49
    delays = range(0, 3001, 100)

    def learner() -> PauseModel:
        return PauseModel(turn.pause_alpha, turn.pause_min_ms, turn.pause_max_ms)

    families: dict[str, list[Point]] = {
        "vad": [score(records, vad_wait(d), f"silence {d} ms", short) for d in delays],
        "smart_turn": [
            score(
                records,
                smart_turn_wait(t / 10, d, timeout),
                f"p>{t / 10:g}, {d} ms, timeout {timeout}",
                short,
            )
            for t in range(1, 10)
            for d in range(0, 1501, 100)
            for timeout in (1600, 3000)
        ],
        "judge_fixed": [score(records, judge_wait(before, s), f"scale {s:g}", short) for s in SCALES],
        "judge": [score(records, judge_wait(turn, s), f"scale {s:g}", short) for s in SCALES],
        "judge_learned": [
            score(records, judge_wait(turn, s), f"scale {s:g}", short, learner) for s in SCALES
        ],
    }
    out: dict[str, Any] = {}
    for name, points in families.items():
        front = pareto(points)
        out[name] = {"front": [p.to_json() for p in front], "summary": at_budgets(front)}
    out["operating_points"] = {
        "before (700/1400 ms)": score(records, judge_wait(before), "before", short).to_json(),
        "shipped (by evidence)": score(records, judge_wait(turn), "shipped", short).to_json(),
        "shipped, pauses learned": score(
            records, judge_wait(turn), "shipped, learned", short, learner if turn.learn_pauses else None
        ).to_json(),
    }
    return out


def recordings(cfg: Any, commands: Path | None = None) -> dict[str, list[Recording]]:
    """The recordings ``bench --eot`` judges, by set, synthesized (or reused) first.

    Returns:
        ``turn_set`` (the paused sentences and plain commands of :mod:`tools.bench.turn_set`, each
        voice a speaker), ``held_out`` (:mod:`tools.bench.speakers`) and, given the shared
        commands' folder, ``shared`` (stop excluded).

    Raises:
        RuntimeError: a synthesizer failed.
    """
    from agent.models import resolve_model
    from tools.bench import speakers
    from tools.bench.turn_set import build_set
    from tools.bench.turns import default_set_folder

    voice = resolve_model(cfg.tts.voice, "voice")
    order: dict[str, int] = {}
    turn_set = []
    for c in build_set(default_set_folder(), voice):
        if c.kind == "filler":
            continue
        order[c.voice] = order.get(c.voice, -1) + 1
        turn_set.append(Recording(default_set_folder() / c.file, c.voice, c.kind, order[c.voice]))
    held = [
        Recording(speakers.default_folder() / c.file, c.speaker, c.kind, c.order)
        for c in speakers.build_speakers(speakers.default_folder(), voice)
    ]
    out = {"turn_set": turn_set, "held_out": held}
    if commands is not None and (commands / "manifest.json").is_file():
        listed = json.loads((commands / "manifest.json").read_text())
        out["shared"] = [
            Recording(commands / c["file"], "shared", "plain", i)
            for i, c in enumerate(listed)
            if c.get("intent") != "stop" and (commands / c["file"]).is_file()
        ]
    return out


def run_eot(
    cfg: Any, commands: Path | None = None, note: Callable[[str], None] = lambda _s: None
) -> dict[str, Any]:
    """``bench --eot``: judge every pause of the sets once, then score the policies on them.

    Args:
        cfg: The config (its models and ``[turn]``).
        commands: The shared commands' folder (their ends only: latency, no pauses inside).
        note: Progress lines.

    Returns:
        Per set (and ``all``: the turn-taking set and the held-out speakers together) the
        :func:`curves`, and the judged ``pauses``.

    Raises:
        RuntimeError: a synthesizer failed, or the config has no semantic judge.
    """
    from agent.pipeline import build_core
    from tools.bench.eot_collect import collect

    sets = recordings(cfg, commands)
    core = build_core(cfg, lambda _e: None)
    try:
        core.warmup()
        judged = {name: collect(core, recs, note) for name, recs in sets.items()}
    finally:
        core.close()
    judged_all = judged["turn_set"] + judged["held_out"]
    report: dict[str, Any] = {
        name: curves(recs, cfg.turn) for name, recs in [*judged.items(), ("all", judged_all)]
    }
    report["pauses"] = {name: [r.to_json() for r in recs] for name, recs in judged.items()}
    report["by_speaker"] = {
        spk: by_speaker_points(recs, cfg.turn) for spk, recs in _group(judged["held_out"]).items()
    }
    return report


def _group(records: list[PauseRecord]) -> dict[str, list[PauseRecord]]:
    out: dict[str, list[PauseRecord]] = {}
    for r in records:
        out.setdefault(r.speaker, []).append(r)
    return out


def by_speaker_points(records: list[PauseRecord], turn: TurnConfig) -> dict[str, Any]:
    """One speaker's conversation: the shipped waits without and with their pauses learned."""
    short = turn.short_silence_ms

    def learner() -> PauseModel:
        return PauseModel(turn.pause_alpha, turn.pause_min_ms, turn.pause_max_ms)

    fixed = score(records, judge_wait(turn), "fixed", short)
    learned = score(records, judge_wait(turn), "learned", short, learner)
    pauses = [r.length_ms for r in records if not r.end]
    return {
        "pauses_ms": percentiles(pauses),
        "fixed": fixed.to_json(),
        "learned": learned.to_json(),
    }


def format_eot(r: dict[str, Any]) -> str:
    """The report as tables: per set, each family's summary and curve, then the operating points."""
    lines = [
        "end-of-turn, the eot-bench way: false cut-offs (pauses inside a turn that a policy ends) "
        "against added latency (mean wait at the turn's end, ms)"
    ]
    for name in ("turn_set", "held_out", "all", "shared"):
        if name not in r:
            continue
        c = r[name]
        n = c["operating_points"]["shipped (by evidence)"]
        lines.append(f"\n== {name}: {n['mid']} pauses inside turns, {n['ends']} turn ends")
        lines.append(f"  {'policy':<16}{'cut-offs at 300 / 500 / 700 ms':>34}{'latency at 5 % cut-offs':>26}")
        for fam in ("vad", "smart_turn", "judge_fixed", "judge", "judge_learned"):
            s = c[fam]["summary"]
            cut = " / ".join(
                "-" if s[f"cutoffs_at_{b}ms"] is None else f"{s[f'cutoffs_at_{b}ms']:.1%}"
                for b in LATENCY_BUDGETS_MS
            )
            lat = s["latency_at_5pct_ms"]
            lines.append(f"  {fam:<16}{cut:>34}{'-' if lat is None else f'{lat:.0f} ms':>26}")
        lines.append("  curves (cut-offs, mean / p50 / p95 latency):")
        for fam in ("smart_turn", "judge", "judge_learned"):
            pts = ", ".join(
                f"{p['cutoffs']:.0%} @ {p['latency_mean_ms']:.0f}/{p['latency_p50_ms']:.0f}/"
                f"{p['latency_p95_ms']:.0f}"
                for p in c[fam]["front"]
            )
            lines.append(f"    {fam}: {pts}")
        lines.append("  operating points:")
        for label, p in c["operating_points"].items():
            lines.append(
                f"    {label:<26} cut-offs {p['cutoffs']:.1%} ({len(p['cut'])} of {p['mid']})  latency mean "
                f"{p['latency_mean_ms']:.0f}  p50 {p['latency_p50_ms']:.0f}  p95 {p['latency_p95_ms']:.0f} ms"
            )
    lines.append("\nheld-out speakers, shipped waits without / with their pauses learned:")
    for spk, s in r.get("by_speaker", {}).items():
        f, lrn = s["fixed"], s["learned"]
        lines.append(
            f"  {spk:5} pauses p50 {s['pauses_ms']['p50']:5.0f} ms: cut-offs {len(f['cut'])}/{f['mid']} -> "
            f"{len(lrn['cut'])}/{lrn['mid']}, latency mean {f['latency_mean_ms']:.0f} -> "
            f"{lrn['latency_mean_ms']:.0f} ms"
        )
    return "\n".join(lines)
