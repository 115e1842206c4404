"""A turn the words call finished is confirmed by silence (``[turn] confirm_ms``): prepared at once,
heard once confirmed, dropped when the user goes on (agent/control.py ReleaseGate, the
turn-taking stage, the driver, the speech stage). Real models, real piper audio."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from rig import AgentRig

from agent.config import load_config
from agent.control import ReleaseGate, StopSignal
from agent.events import Spoken, ToolCall, Transcript, TurnDropped
from agent.listening.vad import FRAME, Endpointer
from agent.models import resolve_model
from tools.bench.turn_set import VOICES, Synthesizer, write_wav


def test_a_release_gate_is_decided_once():
    gate, dropped = ReleaseGate(), []
    gate.on_drop(lambda: dropped.append(1))
    threading.Timer(0.05, gate.release).start()
    assert gate.wait() and gate.released and not gate.dropped
    gate.drop()  # too late: released stays released
    assert gate.released and dropped == []
    other = ReleaseGate()
    other.drop()
    other.on_drop(lambda: dropped.append(2))  # registered after the drop: called at once
    assert other.dropped and dropped == [2] and not other.wait()
    stop = StopSignal()
    threading.Timer(0.05, stop.set).start()
    assert not ReleaseGate().wait(stop)  # a cancelled turn stops waiting


def test_a_snapshot_keeps_the_utterance_open():
    cfg = load_config()
    ep = Endpointer(cfg.vad, 200, 1600, 96)
    speech, quiet = np.full(FRAME, 0.1, np.float32), np.zeros(FRAME, np.float32)
    for _ in range(20):
        ep.feed(speech, 0.9)
    for _ in range(10):
        ep.feed(quiet, 0.0)
    snap = ep.snapshot("text")
    assert snap.ended and snap.rule == "text" and snap.audio is not None
    assert ep.speaking and ep.silence_ms == pytest.approx(320, abs=1)
    ep.feed(speech, 0.9)  # the user goes on: the same utterance
    assert ep.speaking and ep.silence_ms == 0.0


@pytest.fixture(scope="module")
def held_rig():
    cfg = load_config()
    # A 1.2 s pause (the VAD measures about 1.5 s of silence: the voice's own quiet edges) and
    # 2 s to confirm: the verdict (ASR included) lands inside the pause on a busy machine too,
    # and the user goes on before the silence confirms it (measured on the audio, not the clock).
    turn = cfg.turn.model_copy(update={"confirm_ms": 2000, "long_silence_ms": 2500})
    rig = AgentRig(cfg.model_copy(update={"turn": turn}))
    yield rig
    rig.close()


def _say_in_real_time(rig: AgentRig, path, parts: tuple[str, str], pause_s: float):
    """Play ``parts`` (piper, ``pause_s`` apart) in real time through the pipeline.

    Returns:
        ``(events, dropped, heard)``: the messages it published, its ``TurnDropped`` messages,
        and the transcripts of the turns that were not dropped.
    """
    from agent.pipeline import FileSource, NullSink, Pipeline
    from agent.pipeline.pipeline import run_to_end

    audio = Synthesizer(resolve_model("packaged:piper-joe-medium")).speak_parts(parts, VOICES[0], pause_s)
    pad = np.zeros(8000, np.float32)
    write_wav(path, np.concatenate([pad, audio, pad]))
    rig.core.conversation.history.clear()
    start = len(rig.log.events)
    assert run_to_end(Pipeline(rig.core, rig.bus, FileSource([path], True, rig.bus.publish), NullSink()))
    evs = rig.log.events[start:]
    dropped = [e for e in evs if isinstance(e, TurnDropped)]
    heard = [e for e in evs if isinstance(e, Transcript) and e.turn_id not in {d.turn_id for d in dropped}]
    return evs, dropped, heard


def test_a_user_who_goes_on_gets_one_turn_and_nothing_of_the_dropped_one(held_rig, tmp_path):
    parts = ("Turn your head to the left,", "and then wave with your right hand.")
    evs, dropped, heard = _say_in_real_time(held_rig, tmp_path / "paused.wav", parts, 1.2)
    assert len(dropped) == 1 and "left" in dropped[0].text.lower(), [e.name for e in evs]
    assert len(heard) == 1 and "wave" in heard[0].text.lower() and "left" in heard[0].text.lower(), heard
    gone = dropped[0].turn_id
    assert not [e for e in evs if isinstance(e, (ToolCall, Spoken)) and e.turn_id == gone]
    assert any(isinstance(e, ToolCall) and e.turn_id == heard[0].turn_id for e in evs)
    users = [m["content"] for m in held_rig.core.conversation.history if m["role"] == "user"]
    assert len(users) == 1 and "wave" in users[0].lower(), users


def test_a_reply_written_before_the_user_goes_on_is_dropped_too(held_rig, tmp_path):
    """bench --turns --realtime: a reply with no tool call was written within the confirmation
    (a joke in ~0.3 s), the user went on, and the turn stayed: two turns answered, the first never
    heard and never dropped, its words left in the history. The driver now waits for the silence's
    decision before a prepared turn is over."""
    parts = ("Tell me a joke.", "About robots, please.")
    evs, dropped, heard = _say_in_real_time(held_rig, tmp_path / "joke.wav", parts, 1.2)
    assert len(dropped) == 1 and "joke" in dropped[0].text.lower(), [(e.name, e.turn_id) for e in evs]
    assert len(heard) == 1 and "robots" in heard[0].text.lower(), heard
    assert not [e for e in evs if isinstance(e, (ToolCall, Spoken)) and e.turn_id == dropped[0].turn_id]
    users = [m["content"] for m in held_rig.core.conversation.history if m["role"] == "user"]
    assert len(users) == 1 and "robots" in users[0].lower(), users


def test_files_wait_for_the_confirmation_before_the_turn_ends(tmp_path):
    """Without real time there is nothing to prepare: the utterance ends once the silence confirms it."""
    cfg = load_config()
    rig = AgentRig(cfg.model_copy(update={"turn": cfg.turn.model_copy(update={"confirm_ms": 1200})}))
    try:
        syn = Synthesizer(resolve_model("packaged:piper-joe-medium"))
        audio = syn.speak_parts(("Wave your right hand,", "and say hello."), VOICES[0], 0.6)
        pad = np.zeros(8000, np.float32)
        write_wav(tmp_path / "paused.wav", np.concatenate([pad, audio, pad]))
        evs = rig.listen(tmp_path / "paused.wav")
        heard = [t.text for t in evs.of(Transcript)]
        assert len(heard) == 1 and "hello" in heard[0].lower() and "wave" in heard[0].lower(), heard
        assert not evs.of(TurnDropped)
    finally:
        rig.close()
