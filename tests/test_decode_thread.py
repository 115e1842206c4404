"""Where the chat model decodes, and yielding the CPU while speech is synthesized.

Every llama.cpp decode of a model runs on its one decode thread, whichever thread asks
(:mod:`agent.engines.embedded.decode_thread`: libgomp slows every decode once two threads own
OpenMP teams). While speech holds a claim on the :class:`~agent.control.CpuArbiter` the model
waits between tokens (the speech stage's side is tested in ``test_pipeline.py``, the arbiter
alone in ``test_control.py``).
"""

from __future__ import annotations

import queue
import threading

import llama_cpp
import pytest
from waiting import wait_until

from agent.config import LLMConfig
from agent.control import StopSignal
from agent.engines import Decoding, Generation
from agent.engines.embedded.decode_thread import DecodeThread
from agent.engines.embedded.model import ChatModel
from agent.models import resolve_model

SMOLLM2 = resolve_model("packaged:smollm2-135m", "LLM")


def test_calls_from_any_thread_run_on_one_thread():
    decoder = DecodeThread("test-decode")
    try:
        seen: list[int] = [decoder.run(threading.get_ident)]
        t = threading.Thread(target=lambda: seen.append(decoder.run(threading.get_ident)))
        t.start()
        t.join()
        assert len(seen) == 2 and seen[0] == seen[1] != threading.get_ident()
        # A call made on the decode thread runs there directly instead of waiting on itself.
        assert decoder.run(lambda: decoder.run(threading.get_ident)) == seen[0]
        with pytest.raises(ZeroDivisionError):
            decoder.run(lambda: 1 / 0)
        assert decoder.run(sum, [1, 2]) == 3  # still serving after an error
    finally:
        decoder.close()
    with pytest.raises(RuntimeError):
        decoder.run(threading.get_ident)


@pytest.fixture(scope="module")
def model():
    return ChatModel(SMOLLM2, LLMConfig(n_ctx=512, threads=2, temperature=0.0, max_tokens=40))


def test_the_model_decodes_only_on_its_decode_thread(model, monkeypatch):
    """Prompts from the main thread and from a turn thread: llama_decode always runs on one thread."""
    threads: set[int] = set()
    real = llama_cpp.llama_decode

    def recording(ctx, batch):  # the vendor boundary: which OS thread calls llama.cpp
        threads.add(threading.get_ident())
        return real(ctx, batch)

    monkeypatch.setattr(llama_cpp, "llama_decode", recording)
    monkeypatch.setattr(llama_cpp._internals.llama_cpp, "llama_decode", recording)
    prompt = model.render([{"role": "user", "content": "Count to five."}])
    main = model.complete(Decoding(prompt, max_tokens=4)).text
    other: list[str] = []
    t = threading.Thread(target=lambda: other.append(model.complete(Decoding(prompt, max_tokens=4)).text))
    t.start()
    t.join()
    assert main and other == [main]  # same greedy output from either thread
    assert len(threads) == 1 and threading.get_ident() not in threads and t.ident not in threads


class IdleSpeaker:
    """A speaker with nothing to play (speech may claim the CPU)."""

    busy = False


@pytest.fixture
def claimed(model):
    """Speech holds a claim on the model's arbiter while the test runs."""
    model.arbiter.attach(IdleSpeaker())
    assert model.arbiter.claim_for_speech()
    yield model.arbiter
    model.arbiter.release()
    model.arbiter.attach(None)


def test_a_claim_pauses_generation_between_tokens_until_released(model, claimed):
    prompt = model.render([{"role": "user", "content": "Count from one to twenty."}])
    pieces: queue.Queue[str] = queue.Queue()
    gen = Generation()
    t = threading.Thread(
        target=lambda: [pieces.put(p) for p in model.stream(Decoding(prompt, max_tokens=30), gen)]
    )
    t.start()
    first = pieces.get(timeout=30)  # the first token is sampled; the next decode waits
    assert first
    # Nothing more while claimed (well under YIELD_MAX_S; a pause, not a timing measurement).
    with pytest.raises(queue.Empty):
        pieces.get(timeout=0.3)
    assert gen.completion_tokens == 1
    claimed.release()
    t.join(30)
    assert not t.is_alive() and gen.completion_tokens > 5


def test_a_stop_ends_a_wait_for_speech(model, claimed):
    prompt = model.render([{"role": "user", "content": "Count from one to twenty."}])
    gen, stop = Generation(), StopSignal()
    out: list[str] = []
    t = threading.Thread(target=lambda: out.extend(model.stream(Decoding(prompt, max_tokens=30), gen, stop)))
    t.start()
    wait_until(lambda: gen.completion_tokens == 1, 30)
    stop.set("barge-in")
    t.join(5)
    assert not t.is_alive() and gen.cancelled and gen.completion_tokens == 1
