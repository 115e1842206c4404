"""The named control edges: the stop signal and the CPU arbiter, alone (no models)."""

from __future__ import annotations

import threading
import time

from agent.control import CpuArbiter, StopSignal
from agent.pipeline.queues import TurnGate


def test_a_stop_signal_is_set_by_itself_its_parents_or_its_condition():
    turn = StopSignal()
    cap = StopSignal(turn)
    assert not turn.is_set() and not cap.is_set()
    cap.set("reply cap")  # a child's own reason does not reach its parent
    assert cap.is_set() and cap.own and cap.reason == "reply cap" and not turn.is_set()
    other = StopSignal(turn)
    turn.set("barge-in")  # the parent stops every child
    assert other.is_set() and not other.own and other.reason == "barge-in"
    cap.set("later")  # the first reason stays
    assert cap.reason == "reply cap"
    flag = {"stale": False}
    cond = StopSignal(when=lambda: flag["stale"])
    assert not cond.is_set()
    flag["stale"] = True
    assert cond.is_set() and cond.reason == ""


def test_a_turn_gates_stop_signal_follows_the_turns_cancellation():
    gate = TurnGate()
    first, second = gate.new_turn(), gate.new_turn()
    stop_first, stop_second = gate.stop_signal(first), gate.stop_signal(second)
    round_stop = StopSignal(stop_second)
    assert not stop_first.is_set() and not round_stop.is_set()
    gate.cancel(first)
    assert stop_first.is_set() and not stop_second.is_set()
    gate.cancel(second)  # a cancelled turn stops the rounds made from its signal
    assert stop_second.is_set() and round_stop.is_set()


class Speaker:
    def __init__(self, busy: bool = False) -> None:
        self.busy = busy


def test_speech_claims_the_cpu_only_while_its_speaker_has_nothing_to_play():
    arbiter = CpuArbiter()
    assert not arbiter.claim_for_speech() and not arbiter.claimed  # no speaker attached: no claims
    speaker = Speaker(busy=True)
    arbiter.attach(speaker)
    assert not arbiter.claim_for_speech()  # audio is playing: synthesis runs beside the model
    speaker.busy = False
    assert arbiter.claim_for_speech() and arbiter.claimed
    speaker.busy = True
    assert arbiter.claim_for_speech()  # a claim already held stays held
    arbiter.release()
    assert not arbiter.claimed
    arbiter.release()  # nothing held: nothing happens
    speaker.busy = False
    arbiter.claim_for_speech()
    arbiter.attach(None)  # detaching ends a claim
    assert not arbiter.claimed


def test_a_decoder_waits_for_a_claim_at_most_its_limit_or_until_stopped():
    arbiter = CpuArbiter(max_yield_s=0.3)
    arbiter.attach(Speaker())
    arbiter.yield_to_speech()  # no claim: returns at once
    arbiter.claim_for_speech()
    t0 = time.perf_counter()
    arbiter.yield_to_speech()  # a stuck synthesis cannot stall a reply
    assert time.perf_counter() - t0 >= 0.25
    patient = CpuArbiter(max_yield_s=30.0)
    patient.attach(Speaker())
    patient.claim_for_speech()
    stop = StopSignal()
    threading.Timer(0.05, stop.set).start()
    t0 = time.perf_counter()
    patient.yield_to_speech(stop)  # a barge-in ends the wait
    assert time.perf_counter() - t0 < 10.0 and patient.claimed
    threading.Timer(0.05, patient.release).start()
    t0 = time.perf_counter()
    patient.yield_to_speech()  # the release ends the wait
    assert time.perf_counter() - t0 < 10.0 and not patient.claimed


def test_listening_claims_the_cpu_for_a_while_and_a_decoder_waits_for_it():
    arbiter = CpuArbiter()
    assert not arbiter.listening
    arbiter.yield_to_listening()  # no claim: returns at once
    arbiter.claim_for_listening(0.2)
    assert arbiter.listening and not arbiter.claimed  # not a speech claim
    t0 = time.perf_counter()
    arbiter.yield_to_listening()  # a claim nobody releases lapses by itself
    assert 0.15 <= time.perf_counter() - t0 < 5.0 and not arbiter.listening
    arbiter.claim_for_listening(30.0)
    threading.Timer(0.05, arbiter.release_listening).start()
    t0 = time.perf_counter()
    arbiter.yield_to_listening()  # the release ends the wait
    assert time.perf_counter() - t0 < 5.0 and not arbiter.listening
    arbiter.claim_for_listening(30.0)
    stop = StopSignal()
    threading.Timer(0.05, stop.set).start()
    t0 = time.perf_counter()
    arbiter.yield_to_listening(stop)  # a barge-in ends the wait
    assert time.perf_counter() - t0 < 5.0 and arbiter.listening
