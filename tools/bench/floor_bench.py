"""``bolt-agent bench --floor``: acknowledgements, laughs, noise and interruptions over the robot's speech.

Through the live audio path, as ``bench --conversation`` (:class:`~tools.bench.live.LiveAgent`:
``bolt-agent run --json`` on a private PulseAudio server): the robot is asked for a long story
(a spoken request), and once it has been talking for a moment (:data:`INTO_SPEECH_S`, mid-sentence)
a clip of the floor set (:mod:`tools.bench.floor_set`) is played into the microphone over it. What
the agent does is read from its events for :data:`WATCH_S` after the clip (and up to as long again
for what came of a hold: a resume or the cancel):

* **stopped**: it held or interrupted the story's turn (``held``, ``barge_in``); the stop's
  latency is the agent's own ``Held.after_ms`` (from the first speech frame of the clip to the
  speaker going silent) where it held, else the time from the clip's sound to the ``barge_in``
  event as the benchmark saw it (the sound server's latency included);
* **resumed**: a stop on a clip that was no interruption, followed by ``resumed`` (a false
  interruption recovered);
* **replied**: a user turn came of the clip (a ``transcript``).

An acknowledgement, laugh, cough or noise passes with no stop and no reply; an interruption passes
when it stopped the robot within :data:`STOP_WITHIN_MS` and became the turn. Several harmless clips
are played during one story while it goes on; an interruption ends it (the next clip gets a new
story).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.bench.floor_set import LEAD_S, Clip
from tools.bench.latency import percentiles
from tools.bench.live import TURN_TIMEOUT_S, LiveAgent

INTO_SPEECH_S = 1.2
"""How long the robot has been speaking when a clip is played, s."""
WATCH_S = 4.0
"""How long after a clip the agent's response to it is read, s (past the false-interruption timeout)."""
STORY_TRIES = 5
"""Story requests tried in a row before the clips left are reported as not played."""
STOP_WITHIN_MS = 400.0
"""An interruption must stop the robot this fast (the issue's target)."""


def run_floor(
    config: Path,
    clips: list[Clip],
    folder: Path,
    story_wav: Path,
    log: Path,
    note: Callable[[str], None] = lambda _s: None,
) -> dict[str, Any]:
    """Play every clip over the robot's speech; the report of :func:`floor_report`.

    Args:
        config: The agent's config.
        clips: The floor set.
        folder: Where the clips' WAVs are.
        story_wav: The spoken story request.
        log: The agent's log.
        note: Progress lines.

    Raises:
        RuntimeError: the sound server or the agent did not start.
        tools.bench.soak_child.ChildExited: the agent exited.
    """
    rows: list[dict[str, Any]] = []
    not_played: list[str] = []
    with LiveAgent(config, log, note) as live:
        story: int | None = None
        for n, clip in enumerate(clips):
            if story is None or _over(live, story):
                story = _start_story(live, story_wav)
            if story is None:  # the model would not tell one: report what was played
                not_played = [c.file for c in clips[n:]]
                note(
                    f"the robot did not tell a story {STORY_TRIES} times in a row: "
                    f"{len(not_played)} clips not played"
                )
                break
            row = _one(live, clip, folder / clip.file, story)
            rows.append(row)
            note(
                f"{clip.file} {clip.kind} {clip.said!r}: stopped {row['stopped']} "
                f"({row['stop_ms']} ms) resumed {row['resumed']} replied {row['replied']} {row['heard']}"
            )
            if row["stopped"] and not row["resumed"]:
                _settle(live, row)
                story = None
        load_s = live.load_s
    report = floor_report(rows)
    report["load_s"] = load_s
    report["not_played"] = not_played
    return report


def _start_story(live: LiveAgent, story_wav: Path) -> int | None:
    """Ask for a story and wait until the robot has been telling it for :data:`INTO_SPEECH_S`.

    Returns:
        Its turn; None when the robot was not still speaking that long after :data:`STORY_TRIES`
        requests (the stand-in model answers some with a short question).
    """
    a = live.agent
    for _ in range(STORY_TRIES):
        start = a.mark()
        live.play(story_wav)
        said = a.wait(lambda e: e["event"] == "speaking", start, TURN_TIMEOUT_S)
        if said is not None:
            time.sleep(INTO_SPEECH_S)
            if not _over(live, said["turn_id"]):
                return int(said["turn_id"])
        a.quiet(1.0, 30.0)
    return None


def _over(live: LiveAgent, turn_id: int) -> bool:
    """The story's turn was played to its end or interrupted."""
    a = live.agent
    return any(e["turn_id"] == turn_id for name in ("timing", "barge_in") for e in a.since(0, name))


def _one(live: LiveAgent, clip: Clip, wav: Path, story: int) -> dict[str, Any]:
    """Play one clip over the story and read what the agent did."""
    a = live.agent
    start = a.mark()
    t_sound = live.play(wav) + LEAD_S
    time.sleep(WATCH_S)
    if any(e["turn_id"] == story for e in a.since(start, "held")):  # held: wait for what came of it
        a.wait(lambda e: e["event"] in ("resumed", "barge_in") and e["turn_id"] == story, start, WATCH_S)
    held = [e for e in a.since(start, "held") if e["turn_id"] == story]
    barge = [e for e in a.since(start, "barge_in") if e["turn_id"] == story]
    resumed = [e for e in a.since(start, "resumed") if e["turn_id"] == story]
    heard = [e.get("text", "") for e in a.since(start, "transcript")]
    ended = [e for e in a.since(start, "timing") if e["turn_id"] == story]
    utterances = a.since(start, "utterance")
    # The story ended as the clip began, or every utterance of the clip began once the robot was
    # silent (the agent's own ``overlap``): the clip was not said over the robot's speech.
    silent = (bool(ended) and ended[0]["t"] < t_sound + 0.5) or (
        bool(utterances) and not held and not barge and not any(u.get("overlap") for u in utterances)
    )
    stop_ms: float | None = None
    if held:
        stop_ms = float(held[0]["after_ms"])
    elif barge:
        stop_ms = round((barge[0]["t"] - t_sound) * 1000, 1)
    return {
        "file": clip.file,
        "kind": clip.kind,
        "said": clip.said,
        "source": clip.source,
        "stopped": bool(held or barge),
        "stop_ms": stop_ms,
        "stop_by": held[0]["reason"] if held else (barge[0]["reason"] if barge else ""),
        "resumed": bool(resumed) and not barge,
        "resumed_after_ms": float(resumed[0]["held_ms"]) if resumed else None,
        "replied": bool(heard),
        "heard": heard,
        "backchannel": [e.get("text", "") or f"({e.get('kind')})" for e in a.since(start, "backchannel")],
        "story": story,
        "robot_silent": silent,
    }


def _settle(live: LiveAgent, row: dict[str, Any]) -> None:
    """After an interruption: wait for its reply (if it got one) to be played, then for quiet."""
    a = live.agent
    if row["replied"]:
        turns = [e["turn_id"] for e in a.since(0, "transcript") if e.get("text") in row["heard"]]
        if turns:
            a.wait(lambda e: e["event"] == "reply" and e["turn_id"] == turns[-1], 0, TURN_TIMEOUT_S)
    a.quiet(1.5, 60.0)
    a.forget(a.mark())


def floor_report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What the robot did with each kind of clip, against the issue's targets.

    Returns:
        ``clips``; ``robot_silent`` (clips that came as the story ended, or whose utterances all
        began once the robot had fallen silent: not counted below);
        ``harmless`` (acknowledgements, laughs, coughs, noise): ``passed`` (no stop, no
        reply) of ``clips``, ``stopped``, ``replied``; ``interruptions``: ``stopped``, ``in_time``
        (within :data:`STOP_WITHIN_MS`), ``answered`` (became the turn), ``stop_ms`` p50/p95;
        ``false_interruptions``: stops on harmless clips and how many ``resumed``; ``by_kind``;
        ``per_clip``.
    """
    spoken_over = [r for r in rows if not r["robot_silent"]]  # the robot was speaking when it came
    harmless = [r for r in spoken_over if r["kind"] != "interrupt"]
    inter = [r for r in spoken_over if r["kind"] == "interrupt"]
    false_stops = [r for r in harmless if r["stopped"]]
    stop_ms = [r["stop_ms"] for r in inter if r["stop_ms"] is not None]
    kinds = sorted({r["kind"] for r in rows})
    return {
        "clips": len(rows),
        "robot_silent": [r["file"] for r in rows if r["robot_silent"]],
        "harmless": {
            "clips": len(harmless),
            "passed": sum(not r["stopped"] and not r["replied"] for r in harmless),
            "stopped": sum(r["stopped"] for r in harmless),
            "replied": sum(r["replied"] for r in harmless),
        },
        "interruptions": {
            "clips": len(inter),
            "stopped": sum(r["stopped"] for r in inter),
            "in_time": sum(r["stop_ms"] is not None and r["stop_ms"] <= STOP_WITHIN_MS for r in inter),
            "answered": sum(r["replied"] for r in inter),
            "stop_ms": percentiles(stop_ms),
        },
        "false_interruptions": {"stops": len(false_stops), "resumed": sum(r["resumed"] for r in false_stops)},
        "by_kind": {
            k: {
                "clips": sum(r["kind"] == k for r in rows),
                "stopped": sum(r["stopped"] for r in rows if r["kind"] == k),
                "replied": sum(r["replied"] for r in rows if r["kind"] == k),
            }
            for k in kinds
        },
        "per_clip": rows,
    }


def _share(n: int, of: int) -> str:
    return f"{n}/{of} ({n / of:.0%})" if of else "0/0"


def format_floor(r: dict[str, Any]) -> str:
    """The report as a few readable lines, with the issue's targets."""
    h, i, f = r["harmless"], r["interruptions"], r["false_interruptions"]
    lines = [
        f"floor: {r['clips']} clips over the robot's speech through the live audio path "
        f"(agent load {r.get('load_s', 0):.0f} s)",
        f"acknowledgements, laughs, coughs, noise: no stop and no reply {_share(h['passed'], h['clips'])} "
        f"(want >= 95 %); stopped {h['stopped']}, replied {h['replied']}",
        f"interruptions: stopped within {STOP_WITHIN_MS:.0f} ms {_share(i['in_time'], i['clips'])} "
        "(want >= 95 %); "
        f"stopped {i['stopped']}, became the turn {i['answered']}; stop p50 {i['stop_ms']['p50']:.0f} ms "
        f"p95 {i['stop_ms']['p95']:.0f} ms",
        f"false interruptions resumed: {_share(f['resumed'], f['stops'])} (want >= 90 %)",
        "by kind: "
        + ", ".join(
            f"{k} {v['clips']} (stopped {v['stopped']}, replied {v['replied']})"
            for k, v in r["by_kind"].items()
        ),
        f"not said over the robot's speech (it was silent; not counted above): {len(r['robot_silent'])}; "
        f"not played (the robot would not tell a story): {len(r.get('not_played', []))}",
        "per clip:",
    ]
    for p in r["per_clip"]:
        stop = f"stopped in {p['stop_ms']:.0f} ms ({p['stop_by']})" if p["stopped"] else "went on"
        more = (" resumed" if p["resumed"] else "") + (" (robot silent)" if p["robot_silent"] else "")
        lines.append(
            f"  {p['file']:17} {p['said'][:28]!r:31} {stop}{more}; replied {p['heard'] or 'no'}; "
            f"heard as {p['backchannel'] or '-'}"
        )
    return "\n".join(lines)
