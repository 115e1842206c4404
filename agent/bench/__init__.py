"""Benchmarks: ``bolt-agent bench`` (latency) and ``bolt-agent bench --accuracy``.

* :mod:`~agent.bench.latency` — voice-to-voice latency against the sequential pipeline and the floor.
* :mod:`~agent.bench.accuracy` — tool-call accuracy, WER and reply checks on the spoken commands.
* :mod:`~agent.bench.reply_checks` — pure text checks: does a reply fit its turn.
"""
