"""The one pipeline: stage-level harness (messages in, messages out) and equivalence of modes.

Stages are fed typed messages and what comes out is checked field by field. The
equivalence test runs the same spoken commands through ``bolt-agent listen`` (a subprocess:
files as fast as possible, WAV sink) and through the live pipeline fed by a real-time file
source and played on a real-time speaker; both must hear the same words, call the same tools
with arguments on the same side, and answer every turn.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from rig import AgentRig, Events

from agent.control import CpuArbiter
from agent.events import (
    AudioOut,
    BargeIn,
    CutHistory,
    Event,
    FirstToken,
    PlaybackStarted,
    Reply,
    ReplyDelta,
    ReplyEnd,
    SentenceReady,
    Shutdown,
    Spoken,
    Timing,
    ToolCall,
    Transcript,
    TurnGenerated,
    TurnPlayed,
    UserTurn,
)
from agent.models import resolve_model
from agent.pipeline import FileSource, NullSink, Pipeline, SpeakerSink
from agent.pipeline.queues import StageQueue, TurnGate
from agent.pipeline.speech import SpeechStage
from agent.pipeline.turnbook import TurnBook
from agent.speech.tts import PiperTTS

ROOT = Path(__file__).resolve().parent.parent


# --- queues and the turn generation ---------------------------------------------------------------


def test_control_messages_overtake_data_and_stale_data_is_dropped():
    gate = TurnGate()
    dropped: list[Event] = []
    q = StageQueue(gate, on_drop=dropped.append)
    t0, t1 = gate.new_turn(), gate.new_turn()
    q.put(ReplyDelta(t0, "old "))
    q.put(ReplyDelta(t1, "new"))
    q.put(ReplyDelta(-1, "outside any turn"))
    q.put(BargeIn(t0, "speech"))
    gate.cancel(t0)
    got = [q.get(0.1) for _ in range(3)]
    assert isinstance(got[0], BargeIn)  # control first, although it was queued last
    assert [m.text for m in got[1:]] == ["new", "outside any turn"]
    assert dropped == [ReplyDelta(t0, "old ")]  # the cancelled turn's leftover, reported once
    assert q.get(0.05) is None


def test_cancel_covers_every_earlier_turn_only():
    gate = TurnGate()
    ids = [gate.new_turn() for _ in range(4)]
    gate.cancel(ids[2])
    assert [gate.stale(i) for i in ids] == [True, True, True, False]
    assert not gate.stale(-1)


# --- the turn book: one latency trace, history cuts -------------------------------------------------


def test_turn_book_times_a_turn_once_it_is_generated_and_played():
    book = TurnBook()
    book.open(3, t_speech_end=100.0, t_endpoint=100.5, t_asr=100.8, asr_ms=300.0)
    assert book.on(FirstToken(3, 100.9)) == []
    book.on(SentenceReady(3, "Hello there."))
    book.on(AudioOut(3, "Hello there.", "Hello there.", True, None, 22050, 40.0))
    book.on(PlaybackStarted(3, "Hello there.", 101.2))
    book.on(Spoken(3, "Hello there.", True, "Hello there.", True))
    assert book.on(TurnGenerated(3, "Hello there.", 500.0, 80.0, 12)) == []  # not played yet
    out = book.on(TurnPlayed(3, "/tmp/reply_003.wav"))
    assert [type(m) for m in out] == [Reply, Timing]
    reply, timing = out
    assert reply.text == "Hello there." and reply.audio == "/tmp/reply_003.wav"
    assert timing.endpoint_ms == 500.0 and timing.asr_done_ms == 800.0 and timing.first_token_ms == 900.0
    assert timing.first_played_ms == 1200.0 and timing.tts_ms == 40.0 and timing.prompt_tokens == 12
    assert book.on(TurnPlayed(3, None)) == []  # a turn is timed once


def test_barge_in_after_generation_cuts_history_to_what_was_heard():
    book = TurnBook()
    book.open(5, 10.0)
    for piece in ("First part.", "Second part."):
        book.on(SentenceReady(5, piece))
    book.on(Spoken(5, "First part.", True, "First part.", True))
    book.on(TurnGenerated(5, "First part. Second part.", 1.0, 1.0, 1))
    out = book.on(BargeIn(5, "speech", 2.0))
    cut = next(m for m in out if isinstance(m, CutHistory))
    assert cut.heard == ("First part.",) and cut.generated == ("First part.", "Second part.")
    assert any(isinstance(m, Timing) for m in out)


# --- the speech stage on the real voice --------------------------------------------------------------


class CollectingSink(NullSink):
    """A sink that keeps what it was given (harness)."""

    def __init__(self) -> None:
        super().__init__()
        self.played: list[AudioOut] = []
        self.ended: list[int] = []

    def play(self, msg: AudioOut) -> None:
        self.played.append(msg)

    def end(self, turn_id: int) -> None:
        self.ended.append(turn_id)


@pytest.fixture(scope="module")
def voice():
    return PiperTTS(resolve_model("packaged:piper-joe-medium"))


def run_speech(voice, messages: list[Event], gate: TurnGate, streaming: bool = True, sink=None, arbiter=None):
    sink, published = sink or CollectingSink(), []
    q = StageQueue(gate)
    stage = SpeechStage(
        voice, sink, q, gate, published.append, clause_chars=80, streaming=streaming, arbiter=arbiter
    )
    run_stage_to_end(stage, q, messages)
    return sink, published


def run_stage_to_end(stage: SpeechStage, q: StageQueue, messages: list[Event]) -> None:
    """Feed ``messages`` to the stage's thread and stop it once they are all handled."""
    th = threading.Thread(target=stage.run)
    th.start()
    for m in messages:
        q.put(m)
    deadline = time.monotonic() + 30
    while len(q) and time.monotonic() < deadline:  # Shutdown is control: it would overtake the data
        time.sleep(0.01)
    q.put(Shutdown(-1))  # read only after the message in hand is done
    th.join(30)


class QueueingSink(CollectingSink):
    """Busy once audio is queued, as the speaker is until it has played it (harness).

    Logs each piece it is handed with whether speech held the CPU at that moment.
    """

    def __init__(self, log: list[str], arbiter: CpuArbiter | None = None) -> None:
        super().__init__()
        self.log = log
        self.arbiter = arbiter

    def play(self, msg: AudioOut) -> None:
        claimed = self.arbiter is not None and self.arbiter.claimed
        super().play(msg)
        self.log.append(f"play {msg.piece}" + (" (claimed)" if claimed else ""))

    @property
    def busy(self) -> bool:
        return bool(self.played)


def test_speech_claims_the_cpu_until_the_first_audio_is_queued(voice):
    gate = TurnGate()
    tid = gate.new_turn()
    log: list[str] = []
    arbiter = CpuArbiter()
    sink = QueueingSink(log, arbiter)
    arbiter.attach(sink)
    messages = [ReplyDelta(tid, "It is a fine day. "), ReplyDelta(tid, "The sun is out."), ReplyEnd(tid)]
    run_speech(voice, messages, gate, sink=sink, arbiter=arbiter)
    # Claimed for the first sentence only: while it plays, the model and piper share the CPU.
    assert log == ["play It is a fine day. (claimed)", "play The sun is out."], log
    assert not arbiter.claimed


def test_a_claim_made_ahead_of_an_utterance_lasts_until_its_audio_is_queued(voice):
    """The driver claims the CPU from its own thread as it hands over an acknowledgement."""
    gate = TurnGate()
    tid = gate.new_turn()
    log: list[str] = []
    arbiter = CpuArbiter()
    sink, q = QueueingSink(log, arbiter), StageQueue(gate)
    arbiter.attach(sink)
    stage = SpeechStage(voice, sink, q, gate, lambda e: None, arbiter=arbiter)
    assert arbiter.claim_for_speech()  # before the stage has seen anything of it
    run_stage_to_end(stage, q, [ReplyDelta(tid, "Sure!"), ReplyDelta(tid, "", flush=True), ReplyEnd(tid)])
    assert log == ["play Sure! (claimed)"] and not arbiter.claimed, log
    # A flush with nothing to say ends a claim made ahead too.
    idle_sink = CollectingSink()
    arbiter.attach(idle_sink)
    idle = SpeechStage(voice, idle_sink, q, gate, lambda e: None, arbiter=arbiter)
    assert arbiter.claim_for_speech()
    run_stage_to_end(idle, q, [ReplyDelta(tid, " ", flush=True)])
    assert not arbiter.claimed
    # Audio queued or playing: the model and piper share the CPU, nothing is claimed.
    arbiter.attach(sink)
    assert sink.busy and not arbiter.claim_for_speech() and not arbiter.claimed


def test_speech_stage_speaks_each_sentence_as_soon_as_it_is_complete(voice):
    gate = TurnGate()
    tid = gate.new_turn()
    text = "The servo is at 3.5 degrees. Dr. Smith moved it at 8:00 today. Done!"
    deltas = [ReplyDelta(tid, text[i : i + 4]) for i in range(0, len(text), 4)]
    sink, published = run_speech(voice, [*deltas, ReplyEnd(tid)], gate)
    sentences = [m.text for m in published if isinstance(m, SentenceReady)]
    assert sentences == ["The servo is at 3.5 degrees.", "Dr. Smith moved it at 8:00 today.", "Done!"]
    assert [m.piece for m in sink.played] == sentences and all(m.audio.size > 0 for m in sink.played)
    assert sink.ended == [tid]


def test_sequential_mode_synthesizes_the_whole_reply_once(voice):
    gate = TurnGate()
    tid = gate.new_turn()
    sink, _ = run_speech(
        voice,
        [ReplyDelta(tid, "One sentence. "), ReplyDelta(tid, "Two."), ReplyEnd(tid)],
        gate,
        streaming=False,
    )
    assert len(sink.played) == 1 and sink.played[0].piece == "One sentence. Two."


def test_speech_stage_drops_a_cancelled_turn(voice):
    gate = TurnGate()
    old, new = gate.new_turn(), gate.new_turn()
    gate.cancel(old)
    msgs = [ReplyDelta(old, "Never said. "), ReplyEnd(old), ReplyDelta(new, "Said."), ReplyEnd(new)]
    sink, _ = run_speech(voice, msgs, gate)
    assert [m.turn_id for m in sink.played] == [new] and sink.ended == [new]


# --- modes are equivalent -------------------------------------------------------------------------------

COMMANDS = ("wave_right", "joke", "look_left")


def _summary(events: list) -> list[tuple]:
    def get(e, k):
        return e[k] if isinstance(e, dict) else getattr(e, k)

    out = []
    for e in events:
        kind = e["event"] if isinstance(e, dict) else e.name
        if kind == "transcript":
            out.append(("transcript", get(e, "text")))
        elif kind == "tool_call":
            name = e["name"] if isinstance(e, dict) else e.tool
            out.append(("tool_call", name, json.dumps(get(e, "arguments"), sort_keys=True)))
        elif kind == "reply":
            out.append(("reply", get(e, "text")))
    return out


def _behaviour(summary: list[tuple]) -> list[dict]:
    """Per turn: the words heard, each call's tool with its arguments' sides, and the replies' count.

    A string argument is kept as it is, a number as its sign (+1 left/up, -1, 0). Exact numbers
    are not compared: llama.cpp's logits are not bit-for-bit the same for different batch sizes
    (server README, ``cache_prompt``), and how much of a prompt the early start evaluated
    before the endpoint depends on timing; measured here, the same look turn gave
    ``{"yaw_deg": 90, "pitch_deg": -3}`` or ``{}`` (the prior: yaw 30) on identical prompts.
    """
    turns: list[dict] = []
    for s in summary:
        if s[0] == "transcript":
            turns.append({"heard": s[1], "calls": [], "replies": 0})
        elif s[0] == "tool_call":
            args = json.loads(s[2])
            sides = {k: v if isinstance(v, str) else (v > 0) - (v < 0) for k, v in args.items()}
            turns[-1]["calls"].append((s[1], sides))
        else:
            turns[-1]["replies"] += 1
    return turns


def _agree(a: dict, b: dict) -> bool:
    """The arguments both calls gave have the same value (strings) or side (numbers)."""
    return all(a[k] == b[k] for k in a.keys() & b.keys())


def test_listen_and_the_live_pipeline_hear_do_and_say_the_same(fixtures_dir, tmp_path):
    from agent.audio_io.fake import FakeBackend
    from agent.audio_io.speaker import Speaker

    files = [fixtures_dir / "commands" / f"{n}.wav" for n in COMMANDS]
    r = subprocess.run(
        [sys.executable, "-m", "agent", "listen", "--json", "--out", str(tmp_path), *map(str, files)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    via_listen = _summary([json.loads(line) for line in r.stdout.splitlines()])
    rig = AgentRig()
    speaker = Speaker(rig.core.cfg.audio, FakeBackend())
    speaker.open()
    try:
        live = Events()
        for f in files:  # the microphone's way: in real time, each command after the last reply
            live += rig._run(
                Pipeline(rig.core, rig.bus, FileSource([f], True, rig.bus.publish), SpeakerSink(speaker)), 0.0
            )
        assert live.of(Spoken) and not live.of(BargeIn)
    finally:
        speaker.close()
        rig.close()
    offline, realtime = _behaviour(via_listen), _behaviour(_summary(live))
    assert [t["heard"] for t in offline] == [t["heard"] for t in realtime]
    assert len(offline) == len(COMMANDS)
    for a, b in zip(offline, realtime, strict=True):
        assert [name for name, _ in a["calls"]] == [name for name, _ in b["calls"]], (a, b)
        assert all(_agree(x, y) for (_, x), (_, y) in zip(a["calls"], b["calls"], strict=True)), (a, b)
        assert a["replies"] == b["replies"] >= 1, (a, b)
    look = [sides for t in offline + realtime for name, sides in t["calls"] if name == "look"]
    assert len(look) == 2 and all(sides.get("yaw_deg") == 1 for sides in look), look  # "look ... left"
    assert live.of(ToolCall) and live.of(Transcript)


def test_typed_turn_runs_through_the_same_pipeline():
    rig = AgentRig()
    try:
        evs = rig.text("Wave your right hand, please.")
        turn = evs.of(Transcript)[0].turn_id
        assert any(c.tool == "wave" for c in evs.of(ToolCall, turn))
        timing = evs.of(Timing, turn)[0]
        assert evs.of(Reply, turn)[0].text and timing.llm_ms > 0 and timing.first_sentence_ms > 0
        assert not any(isinstance(e, UserTurn) for e in evs)  # internal messages never leave the pipeline
    finally:
        rig.close()


def _silent_speaker():
    """A real speaker opened on the fake backend with no stream thread: nothing plays unless the test does."""
    from agent.audio_io.fake import FakeBackend
    from agent.audio_io.speaker import Speaker
    from agent.config import AudioConfig

    sp = Speaker(AudioConfig(output_sample_rate=16000), FakeBackend())
    sp.rate, sp._stream = 16000, object()
    return sp


def test_synthesis_ahead_of_need_waits_while_the_user_speaks_over_the_robot(voice):
    """The overlap's listening claim: piper waits while enough audio is queued, then goes on."""
    sp = _silent_speaker()
    sink = SpeakerSink(sp)
    gate = TurnGate()
    tid = gate.new_turn()
    q = StageQueue(gate)
    arbiter = CpuArbiter()
    stage = SpeechStage(voice, sink, q, gate, lambda _e: None, clause_chars=80, arbiter=arbiter)
    th = threading.Thread(target=stage.run)
    th.start()
    q.put(ReplyDelta(tid, "It is a fine day in the valley today. ", flush=True))
    deadline = time.monotonic() + 20
    while not sp.busy and time.monotonic() < deadline:
        time.sleep(0.01)
    arbiter.claim_for_listening(30.0)  # the user starts talking over the first sentence
    q.put(ReplyDelta(tid, "The sun is out. ", flush=True))
    time.sleep(1.0)  # time enough for piper to make it
    assert [it.text for it in sp._items] == ["It is a fine day in the valley today."]
    arbiter.release_listening()  # their words are known: the next sentence is made
    while len(sp._items) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [it.text for it in sp._items] == ["It is a fine day in the valley today.", "The sun is out."]
    q.put(Shutdown(-1))
    th.join(10)
    assert not th.is_alive()


def test_a_synthesis_ahead_of_need_stops_for_the_users_speech_and_is_made_after_it(voice, caplog):
    """A listening claim preempts piper mid-piece; the rest is made once it ends, nothing twice."""
    sp = _silent_speaker()
    sink = SpeakerSink(sp)
    gate = TurnGate()
    tid = gate.new_turn()
    q = StageQueue(gate)
    arbiter = CpuArbiter()
    played: list[Event] = []
    stage = SpeechStage(voice, sink, q, gate, played.append, clause_chars=400, arbiter=arbiter)
    th = threading.Thread(target=stage.run)
    th.start()
    q.put(ReplyDelta(tid, "It is a fine day in the valley today. ", flush=True))
    deadline = time.monotonic() + 30
    while not sp.busy and time.monotonic() < deadline:
        time.sleep(0.01)
    story = [
        "Once upon a time a small robot lived by the sea.",
        "Every morning it counted the waves and the gulls.",
        "One day a storm came over the hills and the lights went out.",
        "The robot stayed calm and told stories until dawn.",
    ]
    caplog.set_level(logging.INFO, logger="agent.pipeline.speech")
    q.put(ReplyDelta(tid, " ".join(story), flush=True))
    time.sleep(0.15)  # piper is inside the story (ahead of need: the first sentence is queued)
    arbiter.claim_for_listening(30.0)
    time.sleep(1.0)
    during = [m.text for m in played if isinstance(m, AudioOut)]
    assert "stopped for the user's speech" in caplog.text
    assert len(during) < 1 + len(story)  # it stopped part-way
    arbiter.release_listening()
    q.put(ReplyEnd(tid))
    while (
        len([m for m in played if isinstance(m, AudioOut)]) < 1 + len(story) and time.monotonic() < deadline
    ):
        time.sleep(0.01)
    outs = [m for m in played if isinstance(m, AudioOut)]
    assert [m.text for m in outs] == ["It is a fine day in the valley today.", *story]  # in order, once each
    assert all(m.last_of_piece for m in outs)  # each sentence its own piece: each heard whole
    q.put(Shutdown(-1))
    th.join(10)
    assert not th.is_alive()


def test_synthesis_waits_until_the_queued_audio_runs_low_and_a_cancel_ends_the_wait(voice):
    """``[live] tts_lookahead_s``: the next sentence is made when it is needed, not all at once."""
    sp = _silent_speaker()  # the test plays it by hand
    sink = SpeakerSink(sp)
    gate = TurnGate()
    tid = gate.new_turn()
    q = StageQueue(gate)
    stage = SpeechStage(voice, sink, q, gate, lambda _e: None, clause_chars=80, lookahead_s=0.5)
    th = threading.Thread(target=stage.run)
    th.start()
    for text in ("It is a fine day in the valley today. ", "The sun is out. ", "The birds sing. "):
        q.put(ReplyDelta(tid, text))
    q.put(ReplyEnd(tid))
    deadline = time.monotonic() + 20
    while not sp.busy and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(1.0)  # time enough for piper to make all three
    queued = [it.text for it in sp._items]
    assert queued == ["It is a fine day in the valley today."], queued  # 2.5 s of audio: the rest waits
    first_s = sp.queued_s
    out = np.zeros((int(16000 * (first_s - 0.3)), 1), np.float32)
    sp._fill(out, out.shape[0], None)  # played down to 0.3 s left: under the lookahead
    while len(sp._items) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [it.text for it in sp._items][:2] == ["It is a fine day in the valley today.", "The sun is out."]
    gate.cancel(tid)  # a barge-in while the third waits behind the second: the wait ends, nothing made
    q.put(Shutdown(-1))
    th.join(10)
    assert not th.is_alive()
    assert "The birds sing." not in [it.text for it in sp._items]
