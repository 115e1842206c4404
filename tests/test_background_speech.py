"""Background results through the live pipeline: held for the user, in finishing order, once, cut by barge-in.

The pipeline is ``bolt-agent run``'s (:func:`agent.pipeline.pipeline.live_pipeline`: the real
microphone source and speaker sink) on in-process sound streams that keep real time
(:mod:`agent.audio_io.fake`, the OS boundary), with the real models. Timers are started the way
the turn loop starts them (the ``set_timer`` skill through the registry, with the
conversation's completion callback), so when each one finishes is known; everything else —
when a result may be spoken, its turn, its speech, barge-in and the history cut — is the
pipeline's own doing. The voice is slowed down (``length_scale = 2``) so that a reply plays
long enough to be talked over.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from rig import AgentRig

from agent.audio_io.fake import FakeBackend
from agent.config import load_config
from agent.events import (
    BackgroundDone,
    BargeIn,
    HistoryCut,
    PlaybackStarted,
    Reply,
    Spoken,
    Timing,
    Transcript,
    Utterance,
)
from agent.speech.audio import decode_file


@pytest.fixture(scope="module")
def rig():
    cfg = load_config()
    cfg = cfg.model_copy(update={"tts": cfg.tts.model_copy(update={"length_scale": 2.0})})
    r = AgentRig(cfg)
    yield r
    r.close()


@pytest.fixture()
def live(rig):
    """The live pipeline on fake streams: ``(pipeline, backend, start index in the log)``."""
    rig.core.conversation.history.clear()
    backend = FakeBackend()
    start = len(rig.events)
    with rig.live(backend) as pipeline:
        yield pipeline, backend, start


class Timer:
    """One ``set_timer`` call; ``fired_at`` is when it finished (perf_counter s)."""

    def __init__(self, rig: AgentRig, seconds: float, call_id: str) -> None:
        core = rig.core
        done = core.conversation.background_callback("set_timer", call_id)
        assert done is not None  # set_timer is a background skill
        self.call_id = call_id
        self.fired = threading.Event()
        self.fired_at = 0.0

        def finished(outcome):
            self.fired_at = time.perf_counter()
            self.fired.set()
            done(outcome)

        started = core.registry.call("set_timer", {"seconds": seconds, "label": call_id}, core.ctx, finished)
        assert started.ok, started


def of(evs, kind, turn_id=None):
    return [e for e in evs if isinstance(e, kind) and (turn_id is None or e.turn_id == turn_id)]


def wait(rig: AgentRig, pred, start: int, timeout: float = 90.0):
    ev = rig.log.wait_for(pred, start, timeout)
    assert ev is not None, [type(e).__name__ for e in rig.events[start:]][-30:]
    return ev


def background_turn(rig: AgentRig, timer: Timer, start: int) -> BackgroundDone:
    """The turn that speaks ``timer``'s result, once it has been spoken (its ``Timing``)."""
    done = wait(rig, lambda e: isinstance(e, BackgroundDone) and e.call_id == timer.call_id, start)
    wait(rig, lambda e: isinstance(e, Timing) and e.turn_id == done.turn_id, start)
    return done


def test_barge_in_on_a_spoken_timer_result_stops_it_and_cuts_the_history(rig, live, fixtures_dir):
    pipeline, backend, start = live
    timer = Timer(rig, 0.2, "barge")
    done = wait(rig, lambda e: isinstance(e, BackgroundDone) and e.call_id == timer.call_id, start)
    tid = done.turn_id
    wait(rig, lambda e: isinstance(e, PlaybackStarted) and e.turn_id == tid, start)  # the robot says it
    # The user talks over the result.
    backend.feed(np.concatenate([decode_file(fixtures_dir / "commands" / "look_left.wav"), np.zeros(16000)]))
    barge = wait(rig, lambda e: isinstance(e, BargeIn) and e.turn_id == tid, start)
    assert barge.reason == "speech" and barge.stop_ms < 150
    cut = wait(rig, lambda e: isinstance(e, HistoryCut) and e.turn_id == tid, start)
    reply = wait(rig, lambda e: isinstance(e, Reply) and e.turn_id == tid, start)
    assert reply.text and cut.kept != reply.text and cut.dropped  # only what was heard stays
    # Playback stopped mid-sentence (the cut pieces are published just after the barge-in).
    wait(rig, lambda e: isinstance(e, Spoken) and e.turn_id == tid and e.completed is False, start)
    # The history holds the cut reply, and the user's words became a turn of their own.
    heard = wait(rig, lambda e: isinstance(e, Transcript) and e.turn_id > tid, start)
    wait(rig, lambda e: isinstance(e, Timing) and e.turn_id == heard.turn_id, start)
    assert "left" in heard.text.lower()
    history = rig.core.conversation.history
    results = [i for i, m in enumerate(history) if m["role"] == "user" and timer.call_id in m["content"]]
    assert len(results) == 1, history  # the result was told to the model once
    after = history[results[0] + 1]
    assert after["role"] == "assistant" and after["content"] == cut.kept, (after, cut)
    assert len(of(rig.events[start:], BackgroundDone)) == 1


def test_a_timer_that_fires_while_the_user_speaks_waits_for_the_end_of_the_turn(rig, live, fixtures_dir):
    pipeline, backend, start = live
    speech = decode_file(fixtures_dir / "commands" / "turn_then_wave.wav")  # 0.3 s lead-in, ~3.8 s of speech
    backend.feed(np.concatenate([speech, np.zeros(16000)]))
    timer = Timer(rig, 1.8, "held")  # finishes about 1.5 s into the user's speech
    assert timer.fired.wait(10.0)
    done = background_turn(rig, timer, start)
    evs = rig.events[start:]
    utterances = of(evs, Utterance)
    assert utterances, f"spoken before the user's speech ended: {[type(e).__name__ for e in evs]}"
    speech_start = utterances[0].t_speech_end - (utterances[0].end_ms - utterances[0].start_ms) / 1000
    speech_end = utterances[-1].t_speech_end
    assert speech_start < timer.fired_at < speech_end  # it finished while the user was speaking
    # Held until the user's turn was over: every user turn's timing comes first ...
    user_turns = {t.turn_id for t in of(evs, Transcript)}
    assert user_turns and all(tid < done.turn_id for tid in user_turns)
    first_bg = evs.index(done)
    assert all(any(isinstance(e, Timing) and e.turn_id == tid for e in evs[:first_bg]) for tid in user_turns)
    # ... and its speech started after the user's speech ended, and nobody talked over it.
    played = of(evs, PlaybackStarted, done.turn_id)
    assert played and played[0].t > speech_end
    assert not of(evs, BargeIn, done.turn_id)
    assert of(evs, Reply, done.turn_id)[0].text
    assert [d.call_id for d in of(evs, BackgroundDone)] == [timer.call_id]  # spoken once


def test_two_timers_are_spoken_in_finishing_order_each_once(rig, live, fixtures_dir):
    pipeline, backend, start = live
    speech = decode_file(fixtures_dir / "commands" / "turn_then_wave.wav")  # 0.3 s lead-in, ~3.8 s of speech
    backend.feed(np.concatenate([speech, np.zeros(16000)]))
    slow = Timer(rig, 2.6, "slow")  # set first, finishes second
    fast = Timer(rig, 1.2, "fast")
    # Both finish while the user speaks, so both wait at once; then each gets a turn of its own.
    first = background_turn(rig, fast, start)
    second = background_turn(rig, slow, start)
    evs = rig.events[start:]
    utterances = of(evs, Utterance)
    assert utterances and fast.fired_at < slow.fired_at < utterances[-1].t_speech_end
    assert [d.call_id for d in of(evs, BackgroundDone)] == ["fast", "slow"]  # finishing, not start order
    assert first.turn_id < second.turn_id
    # Spoken in that order: the first result's turn is over before the second one's starts.
    first_over = next(i for i, e in enumerate(evs) if isinstance(e, Timing) and e.turn_id == first.turn_id)
    assert first_over < evs.index(second)
    assert of(evs, PlaybackStarted, first.turn_id)[0].t < of(evs, PlaybackStarted, second.turn_id)[0].t
    for d in (first, second):
        assert of(evs, Reply, d.turn_id)[0].text
        assert of(evs, Spoken, d.turn_id) and all(s.completed for s in of(evs, Spoken, d.turn_id))
    # Each once: nothing is left to be said.
    assert not rig.core.conversation.has_background()
    assert len(of(rig.events[start:], BackgroundDone)) == 2
