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


def reuse_shifted(
    llm: Any, tokens: list[int], keep: int, min_match: int, not_before: int = 0
) -> tuple[int, int]:
    """Reuse a stretch of the KV cache that ``tokens`` repeat further on, shifted into place.

    After a compaction the prompt is ``prefix + summary + kept`` where the cache holds ``prefix +
    dropped + kept``: the common prefix ends at ``keep``, and without this the kept turns would be
    evaluated again. This finds the first stretch of at least ``min_match`` tokens of
    ``tokens[keep:]`` that the cache holds at or after the same index (the longest, when a
    repeated exchange matches twice), removes the cells in front of it (the dropped turns) and
    after it, and moves it back to position ``keep`` (``llama_memory_seq_add``: llama.cpp
    re-rotates the keys' RoPE positions at the next decode). The idea of llama-server's
    ``--cache-reuse N`` (llama.cpp ``tools/server``), which moves matching chunks but evaluates
    nothing between them.

    What stood in front of the stretch in ``tokens`` (the summary line) is then evaluated after
    it: llama.cpp appends to a sequence only at its end (a batch must start at the position
    after the cache's last one), so the model reads ``prefix + kept + summary``, and the summary
    says itself that it is about earlier turns. ``input_ids`` keeps the prompt's order, so the
    cache's positions ``keep .. cached`` hold the same tokens in another order: a later prompt
    that differs inside that stretch must be evaluated again from ``keep`` (the caller keeps
    that bound). The moved cells also keep the keys and values computed when the dropped turns
    stood before them (llama-server's context shift makes the same approximation).

    Args:
        llm: The model; ``input_ids`` and ``n_tokens`` are updated to the cache's new content.
        tokens: The new prompt.
        keep: Its common prefix with the cache, tokens.
        min_match: Shortest stretch worth moving, tokens (>= 1).
        not_before: Cache index from which a stretch may be taken (an earlier reordered stretch
            ends there: its indices are not its positions).

    Returns:
        ``(cached, evaluated)``: ``tokens[:cached]`` is now in the cache (``keep`` when nothing
        was moved, or when the model's memory cannot shift: M-RoPE, some sliding-window caches),
        ``evaluated`` of them evaluated here. ``cached < len(tokens)``: a stretch never takes the
        prompt's last token, which the caller evaluates in place for its logits (moved, it would
        sit before the summary).

    Raises:
        RuntimeError: a decode failed (the cache is then cut back to ``keep``).
    """
    import llama_cpp

    n_cache = llm.n_tokens
    if n_cache - keep < min_match or len(tokens) - 1 - keep < min_match:
        return keep, 0
    mem = llama_cpp.llama_get_memory(llm._ctx.ctx)
    if not llama_cpp.llama_memory_can_shift(mem):
        return keep, 0
    cache = llm.input_ids[:n_cache].tolist()
    starts: dict[tuple[int, ...], list[int]] = {}
    for c in range(max(keep, not_before), n_cache - min_match + 1):
        starts.setdefault(tuple(cache[c : c + min_match]), []).append(c)

    last = len(tokens) - 1  # the prompt's last token is always evaluated: its logits are wanted

    def run(q: int, c: int) -> int:  # tokens[q:last] and cache[c:] agree for this many
        m = min_match
        while q + m < last and c + m < n_cache and tokens[q + m] == cache[c + m]:
            m += 1
        return m

    for q in range(keep, last - min_match + 1):
        runs = [(run(q, c), -c) for c in starts.get(tuple(tokens[q : q + min_match]), ()) if c >= q]
        if runs:
            m, c = max(runs)
            c = -c
            break
    else:
        return keep, 0
    llama_cpp.llama_memory_seq_rm(mem, 0, c + m, -1)
    llama_cpp.llama_memory_seq_rm(mem, 0, keep, c)
    if c != keep:
        llama_cpp.llama_memory_seq_add(mem, 0, c, c + m, keep - c)
    llm.input_ids[q : q + m] = np.asarray(cache[c : c + m], dtype=llm.input_ids.dtype)
    llm.n_tokens = keep + m  # the positions the cache holds now
    try:
        for i in range(keep, q, llm.n_batch):  # the summary, after the moved stretch
            part = tokens[i : min(q, i + llm.n_batch)]
            llm._batch.set_batch(batch=part, n_past=m + i, logits_all=False)
            llm._ctx.decode(llm._batch)
    except Exception:
        llama_cpp.llama_memory_seq_rm(mem, 0, keep, -1)
        llm.n_tokens = keep
        raise
    llm.input_ids[keep:q] = tokens[keep:q]
    llm.n_tokens = q + m
    return q + m, q - keep


def cached_positions(llm: Any) -> tuple[int, int]:
    """The lowest and highest position the KV cache holds for the one sequence, ``(-1, -1)`` when empty."""
    import llama_cpp

    mem = llama_cpp.llama_get_memory(llm._ctx.ctx)
    return int(llama_cpp.llama_memory_seq_pos_min(mem, 0)), int(llama_cpp.llama_memory_seq_pos_max(mem, 0))


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


@contextmanager
def quiet_native_log(on: bool) -> Iterator[None]:
    """Keep llama.cpp's own lines off the terminal while a model object is made.

    A vocabulary-only load has no training context, and llama.cpp warns about it on stderr
    ("n_ctx_seq (4096) > n_ctx_train (0)") past llama-cpp-python's ``verbose=False``, on every
    ``doctor`` and every server engine's start. llama-cpp-python's own redirection of the file
    descriptors (``llama_cpp._utils.suppress_stdout_stderr``) holds them for the construction.

    Args:
        on: False: do nothing.
    """
    if not on:
        yield
        return
    from llama_cpp._utils import suppress_stdout_stderr

    with suppress_stdout_stderr(disable=False):
        yield
