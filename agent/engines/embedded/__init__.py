"""The embedded engine: llama-cpp-python in this process.

* :mod:`~agent.engines.embedded.model` — :class:`~agent.engines.embedded.model.ChatModel`: the
  GGUF, its chat template, and the token loop that runs a :class:`~agent.engines.request.Decoding`.
* :mod:`~agent.engines.embedded.compile` — a request compiled into what the token loop runs:
  logits processors, jump-forward, drafting.
* :mod:`~agent.engines.embedded.sampling` — the sampler chain with its lazy grammar check.
* :mod:`~agent.engines.embedded.decode_thread` — every llama.cpp decode of a model on one thread.
* :mod:`~agent.engines.embedded.vendor` — the only module that touches llama-cpp-python's
  private objects (its batch, context, vocabulary and grammar).
"""
