"""The vendor boundary: every use of llama-cpp-python's private objects, and nothing else.

llama-cpp-python 0.3.36 has no public call for what the embedded engine's own token loop needs
(``docs/facts.md``), so these functions reach into its ``Llama`` object: the context
(``_ctx``), the batch (``_batch``) and the model's vocabulary pointer (``_model.vocab``), and
wrap ``llama_model_default_params`` for a parameter it does not expose. A new llama-cpp-python
version is checked here and nowhere else: ``tests/test_layering.py`` fails when another module
touches one of these names.

All functions take a loaded ``llama_cpp.Llama``; arrays are float32 ``(n_vocab,)``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

PRIVATE_NAMES = frozenset({"_ctx", "_batch", "_model", "_grammar", "_root", "llama_model_default_params"})
"""llama-cpp-python internals only this module may name (the layering test reads this set)."""

_PARAMS_LOCK = threading.Lock()


def vocab_pointer(llm: Any) -> Any:
    """The model's native vocabulary (``llama_vocab *``), for samplers and token classes."""
    return llm._model.vocab


def last_logits(llm: Any) -> np.ndarray:
    """The newest position's logits as a writable view of llama.cpp's buffer, ``(n_vocab,)`` float32.

    Without ``logits_all`` llama-cpp-python keeps no copy; the view is valid until the next decode.
    """
    import llama_cpp

    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))


def eval_rows(llm: Any, tokens: list[int]) -> list[np.ndarray]:
    """Evaluate ``tokens`` after the KV cache in one batch, keeping the logits at every position.

    As ``Llama.eval`` (llama-cpp-python 0.3), but with logits for each token: row ``i`` is the
    next-token logits after ``tokens[: i + 1]``. The last row stays in llama.cpp's buffer
    (:func:`last_logits`).

    Args:
        llm: The model; its ``n_tokens`` and ``input_ids`` are advanced as ``eval`` does.
        tokens: At least one token id.

    Returns:
        ``len(tokens) - 1`` copies, each ``(n_vocab,)`` float32.
    """
    import llama_cpp

    n_past = llm.n_tokens
    llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
    llm._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
    llm._ctx.decode(llm._batch)
    llm.input_ids[n_past : n_past + len(tokens)] = tokens
    llm.n_tokens += len(tokens)
    n_vocab = llm.n_vocab()
    return [
        np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, i), shape=(n_vocab,)).copy()
        for i in range(len(tokens) - 1)
    ]


def eval_embeddings(llm: Any, decode: Callable[[Any, int], int], key: int) -> int:
    """Evaluate a chunk that is not tokens (an image's embeddings) after the KV cache, as ``eval`` would.

    The KV cache after ``llm.n_tokens`` is dropped first (as ``Llama.eval`` does), then
    ``decode(context pointer, n_past)`` writes the chunk and returns the position after it; the
    chunk's positions get ``key`` in ``input_ids`` (a negative id: no token matches it).

    Args:
        llm: The model; its ``n_tokens`` and ``input_ids`` are advanced.
        decode: ``(llama_context pointer, first position) -> position after the chunk``; raises
            on failure (then ``n_tokens`` is left where it was).
        key: The id the chunk's positions carry.

    Returns:
        Positions the chunk took.
    """
    n_past = llm.n_tokens
    llm._ctx.kv_cache_seq_rm(-1, n_past, -1)
    end = decode(llm._ctx.ctx, n_past)
    llm.input_ids[n_past:end] = key
    llm.n_tokens = end
    return end - n_past


def is_end_of_generation(llm: Any, token: int) -> bool:
    """Whether ``token`` ends generation (end of turn, end of text: the vocabulary's EOG set)."""
    import llama_cpp

    return bool(llama_cpp.llama_vocab_is_eog(llm._model.vocab, token))


@contextmanager
def lazy_per_layer_embeddings(on: bool) -> Iterator[None]:
    """Load models with ``lazy_mode = LLAMA_LAZY_MODE_ON`` (per-layer embeddings read on demand).

    llama-cpp-python 0.3.36 does not expose the model parameter ``lazy_mode``; ``Llama`` builds its
    parameters from ``llama_model_default_params()``, so that function is wrapped for the duration
    of one construction (under a lock).

    Args:
        on: False: do nothing.
    """
    if not on:
        yield
        return
    import llama_cpp.llama as llama_mod

    low = llama_mod.llama_cpp
    with _PARAMS_LOCK:
        base = low.llama_model_default_params

        def params() -> Any:  # a ctypes llama_model_params
            p = base()
            p.lazy_mode = low.LLAMA_LAZY_MODE_ON
            return p

        low.llama_model_default_params = params
        try:
            yield
        finally:
            low.llama_model_default_params = base
