"""``bolt-agent bench --conversation``: one growing conversation through the real-time audio path.

The agent runs as ``bolt-agent run --json`` (:class:`~tools.bench.soak_child.Child`) on a private
PulseAudio server's null sinks (``tools/pulse.py``): every turn is a WAV played into the virtual
microphone with ``paplay``, heard through PortAudio, the VAD, the end-of-turn judge and Whisper,
answered by the model and spoken by piper into the virtual speaker, as a user would have it. The
conversation is never cleared: the history grows turn by turn, as a user's does.

The turns (:func:`conversation_turns`, 36 by default) are the held-out speakers' commands and
paused sentences (:mod:`tools.bench.speakers`: voices and paces the judge was not tuned on,
brisk and slow) and the shared spoken commands, speakers taking turns as a household does. Each
turn is played once the previous reply has been played to its end.

Reported: voice-to-voice per turn by the agent's own :class:`~agent.events.Timing`
(``first_played_ms``: end of the user's speech to the first reply audio handed to the speaker), its
p50/p95, its **drift** as the history grows (the least-squares slope over the turns, ms per turn,
and the median of the first and the last third), the prompt tokens each turn evaluated, how each
turn ended (the verdict's evidence and wait), and what went wrong: a clip that became no turn or
several, a barge-in or a hold (nobody talked over the robot).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.bench.latency import percentiles
from tools.bench.soak_child import KEPT, Child
from tools.pulse import PulseRig

LIVE_EVENTS = KEPT | {"reply", "end_of_turn_check", "held", "resumed", "backchannel", "utterance"}
"""Event names the live benchmarks read."""
READY_TIMEOUT_S = 600.0
TURN_TIMEOUT_S = 90.0
QUIET_S = 1.0


@dataclass(frozen=True)
class Said:
    """One turn of the conversation: a WAV, who says it, and what."""

    wav: Path
    speaker: str
    text: str
    kind: str = "plain"


class LiveAgent:
    """A private sound server and ``bolt-agent run --json`` on it (context manager).

    Args:
        config: The agent's config (TOML).
        log: Where the agent's stderr goes.
        note: Progress lines.

    Raises:
        RuntimeError: the sound server or the agent did not start.
    """

    def __init__(self, config: Path, log: Path, note: Callable[[str], None] = lambda _s: None) -> None:
        self.config, self.log, self.note = config, log, note
        self.pulse = PulseRig()
        self.child: Child | None = None
        self.load_s = 0.0

    def __enter__(self) -> LiveAgent:
        self.pulse.start()
        state = Path(tempfile.mkdtemp(prefix="bolt-bench-state-"))  # a fresh conversation, not the user's
        env = {**self.pulse.env, "XDG_STATE_HOME": str(state)}
        env.pop("STATE_DIRECTORY", None)
        t0 = time.monotonic()
        self.note(f"starting bolt-agent run on a private sound server (log: {self.log})")
        self.child = Child(self.config, env, 0, self.log, kept=LIVE_EVENTS, verbose=True)
        ready = self.child.wait(
            lambda e: e["event"] == "device" and e.get("kind") == "output" and e.get("state") == "open",
            0,
            READY_TIMEOUT_S,
        )
        if ready is None:
            self.__exit__(None, None, None)
            raise RuntimeError(f"bolt-agent run did not open its devices in {READY_TIMEOUT_S:.0f} s")
        self.load_s = round(time.monotonic() - t0, 1)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.child is not None:
            self.child.close()
            self.child = None
        self.pulse.cleanup()

    @property
    def agent(self) -> Child:
        """The running child."""
        assert self.child is not None
        return self.child

    def play(self, wav: Path) -> float:
        """Play ``wav`` into the microphone (blocks until played); returns when it began (monotonic s)."""
        t0 = time.monotonic()
        self.pulse.play(wav)
        return t0

    def turn_of(self, start: int, timeout: float = TURN_TIMEOUT_S) -> dict[str, Any] | None:
        """The ``timing`` of the first turn heard from event ``start`` on (None: no turn in time)."""
        a = self.agent

        def mine(e: dict[str, Any]) -> bool:
            return e["event"] == "timing" and any(
                t["turn_id"] == e["turn_id"] for t in a.since(start, "transcript")
            )

        return a.wait(mine, start, timeout)

    def settle(self, turn_id: int) -> None:
        """Wait until ``turn_id``'s reply has been played and nothing has happened for a second."""
        a = self.agent
        a.wait(lambda e: e["event"] == "reply" and e["turn_id"] == turn_id, 0, TURN_TIMEOUT_S)
        a.quiet(QUIET_S, 30.0)


def conversation_turns(n: int = 36, commands: Path | None = None) -> list[Said]:
    """The conversation: held-out speakers' cases and the shared commands, speakers taking turns.

    Args:
        n: Turns (at most the held-out cases plus the shared commands).
        commands: The shared commands' folder (``tests/data/commands``): its ``stop`` is left out
            (no reply to time).

    Returns:
        The turns in order: the speakers' first cases, then their second ones, ..., a shared
        command after every fifth turn.
    """
    from tools.bench.speakers import default_folder, speaker_cases

    folder = default_folder()
    by_order = sorted(speaker_cases(), key=lambda c: (c.order, c.speaker))
    held_out = [Said(folder / c.file, c.speaker, c.text, c.kind) for c in by_order]
    shared: list[Said] = []
    if commands is not None and (commands / "manifest.json").is_file():
        listed = json.loads((commands / "manifest.json").read_text())
        shared = [
            Said(commands / c["file"], "shared", c["text"])
            for c in listed
            if c.get("intent") != "stop" and (commands / c["file"]).is_file()
        ]
    out: list[Said] = []
    while len(out) < n and (held_out or shared):
        if shared and len(out) % 6 == 5:
            out.append(shared.pop(0))
        elif held_out:
            out.append(held_out.pop(0))
        else:
            out.append(shared.pop(0))
    return out


def run_conversation(
    config: Path, turns: list[Said], log: Path, note: Callable[[str], None] = lambda _s: None
) -> dict[str, Any]:
    """Play ``turns`` as one conversation to ``bolt-agent run``; the report of :func:`conversation_report`.

    Raises:
        RuntimeError: the sound server or the agent did not start.
        tools.bench.soak_child.ChildExited: the agent exited.
    """
    rows: list[dict[str, Any]] = []
    with LiveAgent(config, log, note) as live:
        a = live.agent
        for i, said in enumerate(turns):
            start = a.mark()
            live.play(said.wav)
            timing = live.turn_of(start)
            heard = [e.get("text", "") for e in a.since(start, "transcript")]
            if timing is not None:
                live.settle(timing["turn_id"])
            verdicts = [e for e in a.since(start, "end_of_turn_check") if e.get("complete")]
            row = {
                "turn": i,
                "speaker": said.speaker,
                "kind": said.kind,
                "said": said.text,
                "heard": heard,
                "answered": timing is not None,
                "voice_to_voice_ms": float(timing["first_played_ms"]) if timing else -1.0,
                "endpoint_ms": float(timing["endpoint_ms"]) if timing else -1.0,
                "endpoint_rule": timing.get("endpoint_rule", "") if timing else "",
                "prompt_tokens": int(timing.get("prompt_tokens", 0)) if timing else 0,
                "evidence": verdicts[-1].get("evidence", "") if verdicts else "",
                "confirm_ms": verdicts[-1].get("confirm_ms", 0) if verdicts else 0,
                "pause_ms": verdicts[-1].get("pause_ms", 0) if verdicts else 0,
                "held": len(a.since(start, "held")),
                "barge_ins": len(a.since(start, "barge_in")),
                "skipped": [e.get("reason", "") for e in a.since(start, "skipped")],
            }
            rows.append(row)
            got = f"{row['voice_to_voice_ms']:.0f} ms" if row["answered"] else "UNANSWERED"
            note(f"turn {i} ({said.speaker}) {said.text!r}: {got} heard {heard}")
            a.forget(a.mark())
        load_s = live.load_s
    report = conversation_report(rows)
    report["load_s"] = load_s
    return report


def _slope(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return round(sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den, 2) if den else None


def conversation_report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Voice-to-voice over the conversation, its drift, and the turns that went wrong.

    Args:
        rows: One per turn (:func:`run_conversation`).

    Returns:
        ``turns``, ``answered``, ``voice_to_voice_ms`` (p50/p95 over answered turns),
        ``drift_ms_per_turn`` (least-squares slope of voice-to-voice over the turn number),
        ``first_third_p50_ms``/``last_third_p50_ms``, ``prompt_tokens`` (first and last turn's),
        ``by_speaker`` (p50 each), ``by_evidence`` (turns and p50 per verdict evidence),
        ``split`` (clips that became several turns), ``unanswered``, ``stopped`` (turns with a
        hold or barge-in), ``per_turn``.
    """
    ok = [r for r in rows if r["answered"] and r["voice_to_voice_ms"] >= 0]
    v2v = [r["voice_to_voice_ms"] for r in ok]
    third = max(1, len(ok) // 3)
    by: dict[str, dict[str, list[float]]] = {"speaker": {}, "evidence": {}}
    for r in ok:
        by["speaker"].setdefault(r["speaker"], []).append(r["voice_to_voice_ms"])
        by["evidence"].setdefault(r["evidence"] or r["endpoint_rule"], []).append(r["voice_to_voice_ms"])
    return {
        "turns": len(rows),
        "answered": len(ok),
        "voice_to_voice_ms": percentiles(v2v),
        "drift_ms_per_turn": _slope([float(r["turn"]) for r in ok], v2v),
        "first_third_p50_ms": percentiles(v2v[:third])["p50"],
        "last_third_p50_ms": percentiles(v2v[-third:])["p50"],
        "prompt_tokens": [r["prompt_tokens"] for r in ok],
        "by_speaker": {k: {"turns": len(v), **percentiles(v)} for k, v in sorted(by["speaker"].items())},
        "by_evidence": {k: {"turns": len(v), **percentiles(v)} for k, v in sorted(by["evidence"].items())},
        "split": [r["turn"] for r in rows if len(r["heard"]) > 1],
        "unanswered": [r["turn"] for r in rows if not r["answered"]],
        "stopped": [r["turn"] for r in rows if r["held"] or r["barge_ins"]],
        "per_turn": rows,
    }


def format_conversation(r: dict[str, Any]) -> str:
    """The report as a few readable lines."""
    v = r["voice_to_voice_ms"]
    lines = [
        f"conversation: {r['turns']} turns through the live audio path, {r['answered']} answered "
        f"(agent load {r.get('load_s', 0):.0f} s)",
        f"voice-to-voice   p50 {v['p50']:.0f} ms  p95 {v['p95']:.0f} ms",
        f"drift as the history grows: {r['drift_ms_per_turn']} ms per turn; p50 of the first third "
        f"{r['first_third_p50_ms']:.0f} ms, of the last third {r['last_third_p50_ms']:.0f} ms",
        "by speaker: " + ", ".join(f"{k} {s['p50']:.0f}" for k, s in r["by_speaker"].items()),
        "by evidence: "
        + ", ".join(f"{k} {s['turns']}x p50 {s['p50']:.0f}" for k, s in r["by_evidence"].items()),
        f"split into several turns: {r['split']}; unanswered: {r['unanswered']}; stopped: {r['stopped']}",
        "per turn (ms):",
    ]
    lines += [
        f"  {p['turn']:2d} {p['speaker']:7} {p['voice_to_voice_ms']:6.0f}  "
        f"{p['evidence'] or p['endpoint_rule']:10} wait {p['confirm_ms']:5}  tokens {p['prompt_tokens']:4}  "
        f"{p['said']!r} -> {p['heard']}"
        for p in r["per_turn"]
    ]
    return "\n".join(lines)
