"""``bolt-agent bench --turns``: does turn-taking keep paused sentences whole and leave hesitations alone?

The turn-taking set (:mod:`tools.bench.turn_set`) is synthesized once into a cache folder and
played, file after file, through the one pipeline as fast as possible (a ``FileSource`` that
does not keep real time: each pause is judged before the next frame is read, exactly as at
real speed, and each turn is over before the next file starts). Real models throughout; the
model answers every turn, as it would for a user.

Counted from the pipeline's own messages, per file (``InputStarted`` names it):

* answered turns (``Transcript``) and skipped utterances (``Skipped``: a hesitation alone, no
  speech);
* each pause's :class:`~agent.events.PauseVerdict` (rule, Smart Turn, text score);
* each utterance's end rule (``Utterance.end_rule``): a verdict at ``[turn] short_silence_ms``,
  or ``silence`` after ``long_silence_ms``.

Reported:

* ``kept_whole``: share of paused sentences answered as exactly one turn (want >= 0.95), with
  the files that were not, and the share per voice; ``answered_whole`` also counts a sentence
  whose first part was answered and then continued (``[turn] continue_ms``: the answer to the
  first part is cut and the whole sentence answered; listed under ``continued``);
* ``fillers_answered``: share of hesitations alone that got an answer (want 0);
* ``plain_extra_wait_ms``: per end rule, how many plain commands it ended and the silence they
  waited beyond ``short_silence_ms``: the verdict's confirming silence for a verdict of the words
  or Smart Turn, by its evidence (``<rule> (strong)``: ``[turn] strong_confirm_ms``, ``(normal)``:
  ``confirm_ms``, ``(command)``: ``strong_confirm_ms`` once the prepared reply called a skill as
  it asks (``turn_confirmed``), ``(doubtful)``: ``doubtful_confirm_ms``, each grown by the pauses
  learned so far; live, the reply is prepared during that wait and heard when it ends), the long silence for
  ``silence``; ``plain_split``: plain commands answered as more than one turn;
* ``smart_turn_veto``: the data for a rule that would let Smart Turn overrule the words' "finished"
  (both signals are in every verdict): per threshold, how many of the pauses inside paused
  sentences that the words called finished it would have held (``held``, of
  ``mid_sentence_finished``), and how many plain commands' ends it would have held too
  (``delayed``, of ``plain_ends``; each would wait ``doubtful_confirm_ms``).
"""

from __future__ import annotations

import os
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.config import Config
from agent.events import (
    Event,
    InputStarted,
    PauseVerdict,
    PlaybackStarted,
    Skipped,
    Transcript,
    TurnConfirmed,
    TurnDropped,
    Utterance,
)
from tools.bench.turn_set import TurnCase, build_set

if TYPE_CHECKING:
    from agent.stopper import Stopper


def default_set_folder() -> Path:
    """Where the synthesized set is cached: ``$XDG_CACHE_HOME/bolt-agent/turn-set`` (``~/.cache``)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bolt-agent" / "turn-set"


@dataclass
class FileTurns:
    """What the pipeline did with one file of the set.

    Attributes:
        answered: Transcripts of the turns it answered.
        dropped: Transcripts of turns prepared and dropped because the user went on (real time).
        continued: Transcripts of turns answered, then dropped because the user's next words
            finished their sentence (``[turn] continue_ms``).
        skipped: Reasons of the utterances it left unanswered.
        verdicts: Each judged pause's verdict, as published.
        end_rules: Each utterance's end rule.
        end_confirms: Each utterance's confirming silence (the deciding verdict's ``confirm_ms``;
            0 where none confirmed it), ms.
        end_evidence: Each utterance's deciding verdict's evidence ("" where none decided).
    """

    answered: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    continued: list[str] = field(default_factory=list)
    heard: list[str] = field(default_factory=list)  # continued turns of which a sentence was played
    skipped: list[str] = field(default_factory=list)
    verdicts: list[PauseVerdict] = field(default_factory=list)
    end_rules: list[str] = field(default_factory=list)
    end_confirms: list[int] = field(default_factory=list)
    end_evidence: list[str] = field(default_factory=list)


class TurnRecorder:
    """Sorts the pipeline's messages by the file being played (files play one at a time)."""

    def __init__(self) -> None:
        self.files: dict[str, FileTurns] = defaultdict(FileTurns)
        self._current = ""
        self._texts: dict[int, tuple[str, str]] = {}  # turn id -> (file, transcript)
        self._played: set[int] = set()  # turns of which a sentence reached the speaker
        self._confirm = 0  # the newest finished verdict's confirming silence, ms
        self._evidence = ""  # and its evidence

    def __call__(self, ev: Event) -> None:
        """Record one message of the bus."""
        if isinstance(ev, InputStarted):
            self._current = Path(ev.source).name
        elif isinstance(ev, Transcript):
            self.files[self._current].answered.append(ev.text)
            self._texts[ev.turn_id] = (self._current, ev.text)
        elif isinstance(ev, TurnDropped) and ev.turn_id in self._texts:
            name, text = self._texts[ev.turn_id]
            self.files[name].answered.remove(text)
            (self.files[name].continued if ev.continued else self.files[name].dropped).append(text)
            if ev.continued and ev.turn_id in self._played:
                self.files[name].heard.append(text)
        elif isinstance(ev, PlaybackStarted):
            self._played.add(ev.turn_id)
        elif isinstance(ev, Skipped):
            self.files[self._current].skipped.append(ev.reason)
        elif isinstance(ev, PauseVerdict):
            self.files[self._current].verdicts.append(ev)
            if ev.complete:
                self._confirm, self._evidence = ev.confirm_ms, ev.evidence
        elif isinstance(ev, TurnConfirmed) and self.files[self._current].end_confirms:
            self.files[self._current].end_confirms[-1] = ev.silence_ms  # a clear command may shorten it
            if ev.command:
                self.files[self._current].end_evidence[-1] = "command"
        elif isinstance(ev, Utterance):
            self.files[self._current].end_rules.append(ev.end_rule)
            self.files[self._current].end_confirms.append(self._confirm)
            self.files[self._current].end_evidence.append(self._evidence)
            self._confirm, self._evidence = 0, ""


def score(cases: list[TurnCase], files: dict[str, FileTurns], cfg: Config) -> dict[str, Any]:
    """The report of the module docstring from what each file became.

    Args:
        cases: The set's cases.
        files: File name → what the pipeline did with it.
        cfg: The config the pipeline ran with (``[turn]`` silences).

    Returns:
        The report (JSON-ready).
    """
    from agent.pipeline.turn_taking import CONFIRMED_RULES

    short, long = cfg.turn.short_silence_ms, cfg.turn.long_silence_ms

    def waited(rule: str, confirmed_by: int) -> int:
        if rule == "silence":
            return long
        return max(short, confirmed_by) if rule in CONFIRMED_RULES and confirmed_by else short

    def label(rule: str, evidence: str) -> str:
        return f"{rule} ({evidence})" if rule in CONFIRMED_RULES and evidence else rule

    paused = [c for c in cases if c.kind == "paused"]
    plain = [c for c in cases if c.kind == "plain"]
    fillers = [c for c in cases if c.kind == "filler"]
    seen = {c.file: files.get(c.file, FileTurns()) for c in cases}
    answered_whole = [c for c in paused if len(seen[c.file].answered) == 1]
    whole = [c for c in answered_whole if not seen[c.file].continued]
    per_voice: dict[str, list[bool]] = defaultdict(list)
    for c in paused:
        per_voice[c.voice].append(c in whole)
    waits: dict[str, list[int]] = defaultdict(list)
    for c in plain:
        f = seen[c.file]
        evidence = f.end_evidence or [""] * len(f.end_rules)
        ends = list(zip(f.end_rules, f.end_confirms, evidence, strict=True))
        for rule, confirmed_by, why in ends[:1]:  # the command's own end
            waits[label(rule, why)].append(waited(rule, confirmed_by) - short)
    rules = Counter(v.rule for c in cases for v in seen[c.file].verdicts)
    veto = smart_turn_veto(
        [v for c in paused for v in _finished(seen[c.file].verdicts)[:-1]],
        [fin[0] for c in plain if (fin := _finished(seen[c.file].verdicts))],
    )
    return {
        "cases": {"paused": len(paused), "plain": len(plain), "filler": len(fillers)},
        "kept_whole": round(len(whole) / max(1, len(paused)), 3),
        "answered_whole": round(len(answered_whole) / max(1, len(paused)), 3),
        "continued": [
            {
                "file": c.file,
                "voice": c.voice,
                "said": c.text,
                "first": seen[c.file].continued,
                "first_heard": bool(seen[c.file].heard),
            }
            for c in paused
            if seen[c.file].continued
        ],
        "kept_whole_by_voice": {v: round(sum(ok) / len(ok), 3) for v, ok in sorted(per_voice.items())},
        "not_whole": [
            {"file": c.file, "voice": c.voice, "said": c.text, "turns": seen[c.file].answered}
            for c in paused
            if c not in answered_whole
        ],
        "fillers_answered": round(
            sum(bool(seen[c.file].answered) for c in fillers) / max(1, len(fillers)), 3
        ),
        "fillers_answered_files": [
            {"file": c.file, "said": c.text, "turns": seen[c.file].answered}
            for c in fillers
            if seen[c.file].answered
        ],
        "plain_extra_wait_ms": {
            rule: {"commands": len(w), "extra_ms_mean": round(statistics.fmean(w), 1)}
            for rule, w in sorted(waits.items())
        },
        "plain_mean_extra_wait_ms": round(statistics.fmean([x for w in waits.values() for x in w] or [0]), 1),
        "plain_split": [
            {"file": c.file, "said": c.text, "turns": seen[c.file].answered}
            for c in plain
            if len(seen[c.file].answered) > 1 or seen[c.file].continued
        ],
        "plain_unanswered": [c.file for c in plain if not seen[c.file].answered],
        "verdict_rules": dict(sorted(rules.items())),
        "smart_turn_veto": veto,
        "per_file": {
            c.file: {
                "kind": c.kind,
                "voice": c.voice,
                "said": c.text,
                "answered": seen[c.file].answered,
                "continued": seen[c.file].continued,
                "skipped": seen[c.file].skipped,
                "pauses": [
                    {
                        "rule": v.rule,
                        "complete": v.complete,
                        "smart_turn": v.smart_turn,
                        "text_score": v.text_score,
                        "heard": v.text,
                        "asr_logprob": round(v.asr_logprob, 3),
                        "confirm_ms": v.confirm_ms,
                        "evidence": v.evidence,
                        "pause_ms": v.pause_ms,
                    }
                    for v in seen[c.file].verdicts
                ],
                "end_rules": seen[c.file].end_rules,
            }
            for c in cases
        },
    }


VETO_THRESHOLDS = (0.05, 0.1, 0.2, 0.3, 0.5)
"""Smart Turn probabilities under which a veto of the words' "finished" is measured."""


def _finished(verdicts: list[PauseVerdict]) -> list[PauseVerdict]:
    """The verdicts the silence confirms (the words or Smart Turn said finished), in order."""
    from agent.pipeline.turn_taking import CONFIRMED_RULES

    return [v for v in verdicts if v.complete and v.rule in CONFIRMED_RULES]


def smart_turn_veto(mid_sentence: list[PauseVerdict], plain_ends: list[PauseVerdict]) -> dict[str, Any]:
    """What a Smart Turn veto on a finished verdict would hold, per threshold.

    Args:
        mid_sentence: Finished verdicts at pauses inside paused sentences (the user went on).
        plain_ends: Each plain command's finished verdict at its end.

    Returns:
        ``{"mid_sentence_finished": n, "plain_ends": m, "by_threshold": {"0.1": {"held": a,
        "delayed": b}, ...}}``: ``held`` of the ``n`` and ``delayed`` of the ``m`` have Smart Turn
        under the threshold. Verdicts without Smart Turn (-1) are not counted.
    """
    mid = [v.smart_turn for v in mid_sentence if v.smart_turn >= 0]
    ends = [v.smart_turn for v in plain_ends if v.smart_turn >= 0]
    return {
        "mid_sentence_finished": len(mid),
        "plain_ends": len(ends),
        "by_threshold": {
            f"{t:g}": {"held": sum(p < t for p in mid), "delayed": sum(p < t for p in ends)}
            for t in VETO_THRESHOLDS
        },
    }


def run_turns(
    cfg: Config,
    folder: Path | None = None,
    stopper: Stopper | None = None,
    only: list[TurnCase] | None = None,
    realtime: bool = False,
) -> dict[str, Any] | None:
    """Synthesize (or reuse) the set and play it through the pipeline; the report of :func:`score`.

    Args:
        cfg: The config to measure (its ``[turn]``, models and body).
        folder: The set's cache folder (default :func:`default_set_folder`).
        stopper: The command's signal handling (a signal parks the robot; no report then).
        only: Play these cases instead of the whole set (tests take a sample).
        realtime: Play each file in real time to a real-time speaker (an in-process fake device),
            one pipeline per file, as ``bench`` does: pauses are judged while the audio goes on,
            replies start while the user may still be speaking, and a continued turn's first answer
            may be heard (``first_heard``). Otherwise as fast as possible, each turn over before
            the next utterance.

    Returns:
        The report, or None when a signal stopped the run.

    Raises:
        RuntimeError: a synthesizer failed.
    """
    from agent.models import resolve_model
    from agent.pipeline import Bus, FileSource, NullSink, build_core
    from agent.pipeline.pipeline import Pipeline, run_to_end
    from agent.stopper import Stopper

    folder = folder or default_set_folder()
    cases = build_set(folder, resolve_model(cfg.tts.voice, "voice"), only)
    recorder = TurnRecorder()
    bus = Bus(recorder)
    stopper = stopper or Stopper()
    with stopper.loading(bus.publish):  # a signal while loading parks the robot
        core = build_core(cfg, bus.publish, on_robot=stopper.own)
        try:
            core.warmup()
        except BaseException:
            core.close()
            raise
    try:
        if realtime:
            finished = _play_realtime(core, bus, [folder / c.file for c in cases], stopper)
        else:
            source = FileSource([folder / c.file for c in cases], False, bus.publish)
            pipeline = Pipeline(core, bus, source, NullSink())
            with stopper.running(pipeline.stop):
                finished = run_to_end(pipeline, 0.0)
    finally:
        core.close()
    if not finished:
        return None
    report = score(cases, recorder.files, cfg)
    report["folder"] = str(folder)
    report["realtime"] = realtime
    return report


def _play_realtime(core: Any, bus: Any, files: list[Path], stopper: Stopper) -> bool:
    """Each file in real time through its own pipeline to a real-time fake speaker; False if stopped."""
    from agent.audio_io.fake import FakeBackend
    from agent.audio_io.speaker import Speaker
    from agent.pipeline import FileSource, Pipeline, SpeakerSink
    from agent.pipeline.pipeline import run_to_end

    speaker = Speaker(core.cfg.audio, FakeBackend())
    speaker.open()
    try:
        for path in files:
            core.conversation.history.clear()  # each case is a conversation of its own
            pipeline = Pipeline(core, bus, FileSource([path], True, bus.publish), SpeakerSink(speaker))
            with stopper.running(pipeline.stop):
                if stopper.stopped or not run_to_end(pipeline, 0.0):
                    return False
            core.robot.stop()
    finally:
        speaker.close()
    return True


def format_turns(report: dict[str, Any]) -> str:
    """The report as a few readable lines."""
    n = report["cases"]
    lines = [
        f"turn-taking set: {n['paused']} paused sentences, {n['plain']} plain commands, "
        f"{n['filler']} hesitations alone ({report.get('folder', '')})",
        f"kept whole: {report['kept_whole']:.1%} of paused sentences (want >= 95 %)",
        "  by voice: " + ", ".join(f"{v} {s:.0%}" for v, s in report["kept_whole_by_voice"].items()),
    ]
    for miss in report["not_whole"]:
        lines.append(f"  split: {miss['file']} ({miss['voice']}) {miss['said']!r} -> {miss['turns']}")
    lines.append(
        f"answered whole: {report['answered_whole']:.1%} (with the sentences the user continued after "
        "a first answer, which was cut)"
    )
    for c in report["continued"]:
        heard = "its answer started aloud" if c["first_heard"] else "nothing of its answer heard"
        lines.append(f"  continued: {c['file']} ({c['voice']}) {c['said']!r} after {c['first']}: {heard}")
    lines.append(f"fillers answered: {report['fillers_answered']:.1%} (want 0)")
    for f in report["fillers_answered_files"]:
        lines.append(f"  answered: {f['file']} {f['said']!r} -> {f['turns']}")
    lines.append(
        f"plain commands: mean extra silence {report['plain_mean_extra_wait_ms']:.0f} ms (a confirmed "
        "verdict's reply is prepared during it when live); by end rule:"
    )
    for rule, w in report["plain_extra_wait_ms"].items():
        lines.append(f"  {rule}: {w['commands']} commands, +{w['extra_ms_mean']:.0f} ms")
    for s in report["plain_split"]:
        lines.append(f"  split: {s['file']} {s['said']!r} -> {s['turns']}")
    if report["plain_unanswered"]:
        lines.append(f"  unanswered: {', '.join(report['plain_unanswered'])}")
    lines.append(
        "pause verdicts by rule: " + ", ".join(f"{r} {k}" for r, k in report["verdict_rules"].items())
    )
    veto = report["smart_turn_veto"]
    lines.append(
        f"a Smart Turn veto on the words' 'finished' would hold, of {veto['mid_sentence_finished']} "
        f"such pauses inside sentences / of {veto['plain_ends']} plain commands' ends:"
    )
    lines.append(
        "  " + ", ".join(f"< {t}: {h['held']} / {h['delayed']}" for t, h in veto["by_threshold"].items())
    )
    return "\n".join(lines)
