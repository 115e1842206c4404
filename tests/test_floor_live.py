"""The floor on the live pipeline: real models, a microphone and speaker that keep real time.

The microphone and speaker are :mod:`agent.audio_io.fake`'s in-process devices (the OS boundary);
everything above them is the product's, as ``bolt-agent run`` builds it (:func:`live_pipeline`).
The robot is asked, in typed words, for a story spoken slowly (``[tts] length_scale`` 2: its
sentences last long enough to talk over), and espeak-ng clips are played into the microphone over
it. Nothing here asserts a time: ``bench --floor`` measures those.
"""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest

from agent.audio_io.fake import FakeBackend
from agent.config import load_config
from agent.events import Backchannel, BargeIn, Event, Held, PlaybackStarted, Resumed, Spoken, Transcript
from agent.pipeline import Bus, build_core
from agent.pipeline.pipeline import Pipeline, live_pipeline
from tools.bench.latency import EventLog
from tools.bench.turn_set import espeak_ng

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")

STORY_REQUESTS = (
    "Tell me a story about a cat and a robot.",
    "Tell me a long story about a cat and a robot.",
    "Tell me about the moon and the stars.",
)


def _espeak(text: str, voice: str = "en-us") -> np.ndarray:
    """``text`` spoken by espeak-ng, 16 kHz float32, with 0.3 s of silence before and 0.5 s after."""
    return np.concatenate([np.zeros(4800, np.float32), espeak_ng(text, voice), np.zeros(8000, np.float32)])


class Live:
    """One agent core and a live pipeline on fake real-time devices."""

    def __init__(self) -> None:
        cfg = load_config()
        cfg.tts.length_scale = 2.0
        self.log = EventLog()
        self.bus = Bus(self.log)
        self.core = build_core(cfg, self.bus.publish)
        self.core.warmup()
        self.mic = FakeBackend()
        self.pipeline: Pipeline = live_pipeline(self.core, self.bus, self.mic)
        self.pipeline.start()

    def since(self, start: int, kind: type) -> list:
        return [e for e in self.log.events[start:] if isinstance(e, kind)]

    def wait(self, pred, start: int, timeout: float = 120.0) -> Event:
        ev = self.log.wait_for(pred, start, timeout)
        assert ev is not None, [e.name for e in self.log.events[start:]]
        return ev

    def robot_talking(self) -> tuple[int, int]:
        """Ask for a story; return (its turn, the event index) once it has been heard for a second.

        The small stand-in model does not always tell one (it may ask "For how long?"): the next
        request is tried until the robot is still speaking a second into its reply.
        """
        for request in STORY_REQUESTS * 2:
            start = len(self.log.events)
            self.pipeline.submit_text(request)
            said = self.wait(lambda e: isinstance(e, PlaybackStarted), start)
            time.sleep(1.0)
            if self.pipeline.speaking_turn() == said.turn_id:
                return said.turn_id, len(self.log.events)
            self.quiet()
        raise AssertionError(f"no request made the robot talk for a second: {STORY_REQUESTS}")

    def quiet(self) -> None:
        """Silence the robot and wait until nothing is in flight."""
        self.pipeline.interrupt("shutdown")
        assert self.pipeline.wait_idle(60)

    def close(self) -> None:
        self.pipeline.close()
        self.core.close()


@pytest.fixture(scope="module")
def live():
    rig = Live()
    yield rig
    rig.close()


def test_an_acknowledgement_over_the_robot_neither_stops_it_nor_becomes_a_turn(live):
    story, start = live.robot_talking()
    live.mic.feed(_espeak("Uh-huh."))
    heard = live.wait(lambda e: isinstance(e, Backchannel), start, 60)
    assert heard.kind in ("backchannel", "nothing")
    time.sleep(0.5)
    held = live.since(start, Held)
    if held:  # the early check misheard its start as a word that interrupts ("but"): a false interruption
        assert live.since(start, Resumed), live.log.events[start:]  # resumed, not answered
    assert len(held) <= 1 and not live.since(start, BargeIn)
    assert not live.since(start, Transcript)
    assert live.pipeline.speaking_turn() == story or any(
        isinstance(e, Spoken) and e.turn_id == story and e.completed for e in live.log.events[start:]
    )
    live.quiet()


def test_an_interruption_over_the_robot_holds_it_and_becomes_the_turn(live):
    story, start = live.robot_talking()
    live.mic.feed(_espeak("Wait, look to the left."))
    turn = live.wait(lambda e: isinstance(e, Transcript), start, 60)
    assert "left" in turn.text.lower()
    cut = live.wait(lambda e: isinstance(e, BargeIn) and e.turn_id == story, start, 10)
    held = live.since(start, Held)
    assert held and held[0].turn_id == story and held[0].after_ms > 0, live.log.events[start:]
    assert live.log.events.index(held[0]) < live.log.events.index(cut)  # silent first, cancelled later
    assert cut.reason == "speech" and cut.stop_ms == held[0].stop_ms and not live.since(start, Resumed)
    live.quiet()


def test_a_held_turn_the_user_only_acknowledged_resumes_from_its_sentence(live):
    """A stop that was not needed (here made by hand, as speech with no words yet would make it):
    the acknowledgement that follows resumes the robot, and its sentence starts again."""
    story, start = live.robot_talking()
    live.pipeline.hold(time.perf_counter(), "test")
    held = live.wait(lambda e: isinstance(e, Held), start, 5)
    assert held.turn_id == story and live.pipeline.held_turn == story and live.pipeline.sink.paused
    live.mic.feed(_espeak("Yeah.", "en-gb"))
    back = live.wait(lambda e: isinstance(e, Resumed), start, 60)
    assert back.turn_id == story and back.reason in ("backchannel", "nothing", "no turn")
    assert not live.pipeline.sink.paused and live.pipeline.held_turn is None
    cut = [e for e in live.since(start, Spoken) if not e.completed]
    again = [e for e in live.log.events[live.log.events.index(back) :] if isinstance(e, PlaybackStarted)]
    if cut:  # it was mid-sentence: that sentence is heard again from its start
        live.wait(lambda e: isinstance(e, PlaybackStarted) and e.text == cut[0].text, start, 30)
    else:
        assert again or live.pipeline.speaking_turn() == story
    assert not live.since(start, Transcript) and not live.since(start, BargeIn)
    live.quiet()


def test_the_agent_runs_numpy_blas_on_one_thread(live):
    """The core limits numpy's BLAS (agent/blas.py): its spinning worker would slow the checks' decodes."""
    from threadpoolctl import ThreadpoolController

    from agent.blas import numpy_blas_controllers

    numpy_blas = [lib.info() for lib in numpy_blas_controllers(ThreadpoolController())]
    assert numpy_blas and all(i["num_threads"] == 1 for i in numpy_blas), numpy_blas
