"""Benchmarks and the soak: ``bolt-agent bench``, ``soak`` and ``motion-bench`` (:mod:`~tools.bench.cli`).

* :mod:`~tools.bench.latency` — voice-to-voice latency against the sequential pipeline and the floor.
* :mod:`~tools.bench.accuracy` — tool-call accuracy, WER and reply checks on the spoken commands.
* :mod:`~tools.bench.reply_checks` — pure text checks: does a reply fit its turn.
* :mod:`~tools.bench.turn_set`, :mod:`~tools.bench.turns` — the turn-taking set and ``bench --turns``.
* :mod:`~tools.bench.vision_bench` — ``bench --vision``; :mod:`~tools.bench.motion` — ``motion-bench``.
* :mod:`~tools.bench.peer`, :mod:`~tools.bench.peer_pipecat` — ``bench --peer``.
* :mod:`~tools.bench.soak` and its child, clip set, ``/proc`` sampling and report — ``soak`` (on the
  private PulseAudio server of ``tools/pulse.py``).

A development folder of the checkout: not installed, imported by nothing in the product.
"""
