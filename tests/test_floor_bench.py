"""``bench --eot``, ``--conversation`` and ``--floor``: their sets, their scoring and their reports.

The sets are synthesized for real (piper, espeak-ng) into a temporary folder; the pauses are
found by the live endpointer's rules on real Silero probabilities. The scoring is checked on
hand-made pause records whose answer is known; the live runs themselves are the benchmarks'.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
import tomllib

from agent.config import DEFAULT_CONFIG, load_config
from agent.models import resolve_model
from tools.bench import speakers, turn_set
from tools.bench.eot import at_budgets, judge_wait, pareto, score, smart_turn_wait, vad_wait
from tools.bench.eot_collect import PauseRecord, pauses_of
from tools.bench.floor_bench import floor_report, format_floor
from tools.bench.floor_set import CLIPS, KINDS, build_floor_set, cough, laugh, noise
from tools.bench.live import conversation_report, conversation_turns, format_conversation
from tools.bench.story_server import STORY, StoryServer, story_config, toml_text

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")


def _rec(speaker: str, order: int, length: float, rule: str = "text", text: float = -0.9, st: float = 0.9):
    return PauseRecord(
        f"{speaker}_{order}.wav", speaker, "paused", order, 0, length, "look up", -0.1, False, rule,
        rule in ("text", "smart_turn", "stop"), st, text,
    )  # fmt: skip


# --- the sets -------------------------------------------------------------------------------------------
def test_the_held_out_speakers_share_nothing_with_the_turn_taking_set():
    cases = speakers.speaker_cases()
    assert len(cases) == 72 and len({c.speaker for c in cases}) == len(speakers.SPEAKERS) == 6
    assert {s.pace for s in speakers.SPEAKERS} == {"brisk", "average", "slow"}
    assert not {s.voice.name for s in speakers.SPEAKERS} & {v.name for v in turn_set.VOICES}
    said = {c.text for c in cases}
    assert not said & {" ".join(p) for p in turn_set.PAUSED} and not said & set(turn_set.PLAIN)
    assert len(said) == len(cases)  # no two speakers say the same sentence
    for s in speakers.SPEAKERS:  # each speaker's pauses are its pace's
        mine = [c.pause_s for c in cases if c.speaker == s.name and c.kind == "paused"]
        assert set(mine) <= set(s.pauses_s) and len(mine) == 6


def test_the_floor_set_has_what_the_issue_asks_for():
    assert len(CLIPS) >= 30 and {c.kind for c in CLIPS} == set(KINDS)
    assert len({c.source for c in CLIPS if c.kind in ("ack", "interrupt")}) >= 5  # several voices
    assert len({c.file for c in CLIPS}) == len(CLIPS)
    for sound in (laugh(2), cough(1, 2), noise("knocks", 0), noise("fan", 2)):
        assert sound.dtype == np.float32 and 0.02 < float(np.sqrt(np.mean(sound**2))) < 0.2


@needs_espeak
def test_a_held_out_speakers_pause_is_found_where_it_was_made(tmp_path):
    """``bench --eot`` scores each pause by the silence the user left: the endpointer finds the
    slow speaker's 1.1 s pause inside the sentence, and the turn's end after it."""
    voice = resolve_model("packaged:piper-joe-medium")
    case = next(c for c in speakers.speaker_cases() if c.speaker == "ben" and c.kind == "paused")
    speakers.build_speakers(tmp_path, voice, [case])
    found = pauses_of(turn_set.read_wav(tmp_path / case.file), 200, load_config().vad)
    lengths = [length for _, length in found]
    assert lengths[-1] == -1.0  # the end
    inside = [x for x in lengths[:-1] if x >= 800]
    assert len(inside) == 1 and abs(inside[0] - case.pause_s * 1000) < 200, lengths


@needs_espeak
def test_the_floor_set_is_synthesized_once_and_reused(tmp_path):
    voice = resolve_model("packaged:piper-joe-medium")
    jfk = __import__("conftest").find_fixtures() / "audio" / "jfk.flac"
    clips = build_floor_set(tmp_path, voice, jfk)
    made = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.wav")}
    assert set(made) == {c.file for c in clips}
    build_floor_set(tmp_path, voice, jfk)
    assert {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("*.wav")} == made


# --- the eot-bench scoring ----------------------------------------------------------------------------------
def test_a_wait_cuts_every_pause_inside_a_turn_it_is_not_longer_than():
    recs = [_rec("a", 0, 600.0), _rec("a", 1, 900.0), _rec("a", 2, -1.0), _rec("b", 0, -1.0)]
    p = score(recs, vad_wait(700), "700", 200)
    assert p.mid == 2 and p.ends == 2 and p.cutoffs == 0.5 and p.cut == ("a_1.wav",)
    assert p.latency_mean_ms == p.latency_p50_ms == 700
    assert score(recs, vad_wait(100), "100", 200).latency_mean_ms == 200  # never before the verdict
    st = score(recs, smart_turn_wait(0.95, 300, 1600), "st", 200)  # Smart Turn 0.9: under the threshold
    assert st.cutoffs == 0.0 and st.latency_mean_ms == 1600


def test_learning_a_slow_speakers_pauses_stops_cutting_them_off_and_leaves_a_brisk_one_alone():
    turn = load_config().turn
    slow = [_rec("slow", i, 1200.0) for i in range(30)] + [_rec("slow", 30, -1.0)]
    brisk = [_rec("brisk", i, 350.0) for i in range(30)] + [_rec("brisk", 30, -1.0)]

    def learner():
        from agent.listening.pace import PauseModel

        return PauseModel(turn.pause_alpha, turn.pause_min_ms, turn.pause_max_ms)

    fixed, learned = (score(slow, judge_wait(turn), "x", 200, k) for k in (None, learner))
    # alpha 0.9 on the history: the average passes 1.1 s (wait 600 + 600 > 1.2 s) after 19 pauses
    assert fixed.cutoffs == 1.0 and learned.cutoffs < 0.7
    assert not {f"slow_{i}.wav" for i in range(20, 30)} & set(learned.cut)
    fixed, learned = (score(brisk, judge_wait(turn), "x", 200, k) for k in (None, learner))
    assert fixed.cutoffs == learned.cutoffs == 0.0 and fixed.latency_mean_ms == learned.latency_mean_ms


def test_the_curve_keeps_the_points_no_other_beats_and_reads_the_budgets():
    pts = [score([_rec("a", 0, 500.0), _rec("a", 1, -1.0)], vad_wait(w), f"{w}", 0) for w in (300, 400, 600)]
    front = pareto(pts)
    assert [p.label for p in front] == ["300", "600"]  # 400 cuts as 300 does, later
    s = at_budgets(front)
    assert s["cutoffs_at_300ms"] == 1.0 and s["cutoffs_at_700ms"] == 0.0 and s["latency_at_5pct_ms"] == 600


# --- the live reports ---------------------------------------------------------------------------------
def test_the_conversation_report_measures_the_drift_as_the_history_grows():
    rows = [
        {
            "turn": i, "speaker": "ana" if i % 2 else "ben", "kind": "plain", "said": "x", "heard": ["x"],
            "answered": True, "voice_to_voice_ms": 600.0 + 10 * i, "endpoint_ms": 300.0,
            "endpoint_rule": "text", "prompt_tokens": 20 + i, "evidence": "strong", "confirm_ms": 300,
            "pause_ms": 500, "held": 0, "barge_ins": 0, "skipped": [],
        }
        for i in range(9)
    ]  # fmt: skip
    rows.append({**rows[0], "turn": 9, "answered": False, "voice_to_voice_ms": -1.0, "heard": ["a", "b"]})
    r = conversation_report(rows)
    assert r["turns"] == 10 and r["answered"] == 9 and r["drift_ms_per_turn"] == 10.0
    assert r["first_third_p50_ms"] == 610 and r["last_third_p50_ms"] == 670
    assert r["unanswered"] == [9] and r["split"] == [9] and r["stopped"] == []
    assert "drift as the history grows: 10.0 ms per turn" in format_conversation(r)
    turns = conversation_turns(36, __import__("conftest").find_fixtures() / "commands")
    assert len(turns) == 36 and sum(t.speaker == "shared" for t in turns) == 6
    assert len({t.speaker for t in turns}) == 7


def test_the_floor_report_counts_each_clip_against_its_kind():
    def row(kind, stopped=False, stop_ms=None, resumed=False, replied=False, silent=False):
        return {
            "file": f"{kind}.wav", "kind": kind, "said": "x", "source": "us", "stopped": stopped,
            "stop_ms": stop_ms, "stop_by": "words" if stopped else "", "resumed": resumed,
            "resumed_after_ms": None, "replied": replied, "heard": ["x"] if replied else [],
            "backchannel": [], "story": 1, "robot_silent": silent,
        }  # fmt: skip

    rows = [
        row("ack"), row("ack", stopped=True, stop_ms=700.0, resumed=True), row("laugh", replied=True),
        row("interrupt", True, 350.0, replied=True), row("interrupt", True, 450.0, replied=True),
        row("ack", replied=True, silent=True),  # the story had ended: not counted
    ]  # fmt: skip
    r = floor_report(rows)
    assert r["harmless"] == {"clips": 3, "passed": 1, "stopped": 1, "replied": 1}
    assert r["interruptions"]["in_time"] == 1 and r["interruptions"]["answered"] == 2
    assert r["false_interruptions"] == {"stops": 1, "resumed": 1} and r["robot_silent"] == ["ack.wav"]
    assert "false interruptions resumed: 1/1 (100%)" in format_floor(r)


def test_the_story_server_makes_the_agent_tell_the_whole_story(tmp_path):
    """``bench --floor``'s talker: the shipped config on the story server, through ``bolt-agent chat``."""
    raw = tomllib.loads(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    assert tomllib.loads(toml_text(raw)) == raw  # inline tables (the joints) and nested tables survive
    with StoryServer(tokens_per_s=400) as server:
        told = story_config(DEFAULT_CONFIG, server.url, tmp_path / "story.toml")
        cfg = load_config(told)
        assert (cfg.llm.engine, cfg.llm.openai.url, cfg.llm.max_reply_sentences) == ("openai", server.url, 0)
        out = subprocess.run(
            [sys.executable, "-m", "agent", "chat", "--config", str(told)],
            input="Tell me a story.\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 0, out.stderr[-2000:]
    assert STORY.split(". ")[0] in out.stdout  # told from its first sentence ...
    assert STORY.split(". ")[-1].rstrip(".") in out.stdout  # ... to its last (no reply cap)
    assert server.requests >= 1  # the warm-up may ask too
