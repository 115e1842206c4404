"""Token sampling for in-process generation: a llama.cpp sampler chain with a lazy grammar check.

llama-cpp-python's ``create_completion`` applies a grammar to the whole vocabulary before
every token. For a JSON grammar that is most of the cost of a tool round (measured:
``docs/model.md``, "Engines"). llama.cpp's
own ``common_sampler_sample`` (``common/sampling.cpp``, ``grammar_first = false``) does it the
other way round, and so does :class:`TokenSampler`:

1. sample from the model's distribution with the ordinary chain (penalties, top-k, top-p,
   min-p, temperature);
2. ask the grammar about that one token only;
3. only if the grammar rejects it, mask the whole vocabulary with the grammar and sample again.

The result has the grammar-constrained distribution: a valid token ``t`` is picked with
``p(t) + P(invalid)·p(t)/P(valid) = p(t)/P(valid)`` (up to the top-k/top-p cut), and greedy
decoding is identical. A JSON skeleton the model has seen in its prompt is mostly its own first
choice, so the full-vocabulary pass is rare.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

# llama_token_data is {int32 id; float logit; float p} (llama.h), 12 bytes, no padding.
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class TokenSampler:
    """Samples the next token from llama.cpp logits, optionally held to a GBNF grammar.

    Args:
        vocab: The model's native vocabulary (:func:`~agent.engines.embedded.vendor.vocab_pointer`).
        n_vocab: Its size, tokens.
        temperature: 0 = greedy; otherwise softmax temperature.
        top_p: Nucleus cut (0-1].
        repeat_penalty: llama.cpp repetition penalty (1 = off) over the last ``penalty_last_n`` tokens.
        seed: Seed of the random draw.
        grammar: GBNF text with a ``root`` rule ("" = none).
        history: Tokens the repetition penalty should already count (llama-cpp-python's
            ``create_completion`` counts generated tokens only: pass none to match it).
        top_k: Top-k cut (llama-cpp-python's default, 40).
        min_p: Min-p cut (llama-cpp-python's default, 0.05).
        penalty_last_n: Tokens the repetition penalty looks back over (llama-cpp-python's 64).

    Call :meth:`close` (or use it as a context manager) to free the native samplers.

    Raises:
        ValueError: llama.cpp rejected the grammar.
    """

    def __init__(
        self,
        vocab: Any,
        n_vocab: int,
        *,
        temperature: float,
        top_p: float,
        repeat_penalty: float,
        seed: int,
        grammar: str = "",
        history: list[int] | None = None,
        top_k: int = 40,
        min_p: float = 0.05,
        penalty_last_n: int = 64,
    ) -> None:
        import llama_cpp as lc

        self._lc = lc
        self.n_vocab = n_vocab
        self.chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
        add = lambda s: lc.llama_sampler_chain_add(self.chain, s)  # noqa: E731
        if repeat_penalty != 1.0:
            # This llama.cpp (llama-cpp-python 0.3.36's) takes n_vocab first.
            add(lc.llama_sampler_init_penalties(self.n_vocab, penalty_last_n, repeat_penalty, 0.0, 0.0))
        if temperature <= 0.0:
            add(lc.llama_sampler_init_greedy())
        else:
            add(lc.llama_sampler_init_top_k(top_k))
            add(lc.llama_sampler_init_top_p(top_p, 1))
            add(lc.llama_sampler_init_min_p(min_p, 1))
            add(lc.llama_sampler_init_temp(temperature))
            add(lc.llama_sampler_init_dist(seed & 0xFFFFFFFF))
        for tok in (history or [])[-penalty_last_n:]:
            lc.llama_sampler_accept(self.chain, tok)
        self.grammar = None
        if grammar:
            native = lc.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
            if not native:
                self.close()
                raise ValueError("llama.cpp rejected the grammar (see its log for the rule at fault)")
            self.grammar = native
        self._ids = np.arange(self.n_vocab, dtype=np.int32)  # made once: _fill runs every token
        self._cand = np.zeros(self.n_vocab, dtype=_TOKEN_DATA)
        self._one = np.zeros(1, dtype=_TOKEN_DATA)
        self.full_passes = 0
        """How many tokens needed the grammar over the whole vocabulary (the slow path)."""

    def _array(self, buf: np.ndarray) -> Any:
        lc = self._lc
        return lc.llama_token_data_array(
            data=buf.ctypes.data_as(lc.llama_token_data_p), size=len(buf), selected=-1, sorted=False
        )

    def _fill(self, logits: np.ndarray) -> Any:
        self._cand["id"] = self._ids  # samplers reorder the array in place: restore the order
        self._cand["logit"] = logits
        self._cand["p"] = 0.0
        return self._array(self._cand)

    def _pick(self, arr: Any) -> int:
        self._lc.llama_sampler_apply(self.chain, ctypes.byref(arr))
        if arr.selected < 0:
            raise RuntimeError("the sampler chain selected no token")
        return int(arr.data[arr.selected].id)

    def allowed(self, token: int) -> bool:
        """Whether the grammar accepts ``token`` next (always True without a grammar)."""
        return self.grammar is None or self._accepts(self.grammar, token)

    def _accepts(self, grammar: Any, token: int) -> bool:
        """Whether the native grammar sampler ``grammar`` leaves ``token`` a finite logit."""
        self._one[0] = (token, 1.0, 0.0)
        arr = self._array(self._one)
        self._lc.llama_sampler_apply(grammar, ctypes.byref(arr))
        return bool(np.isfinite(self._one[0]["logit"]))

    def allows_all(self, tokens: list[int]) -> bool:
        """Whether the grammar accepts ``tokens`` one after the other from here (state unchanged).

        Checked on a copy of the grammar (``llama_sampler_clone``), so a sequence rejected half
        way leaves nothing accepted.
        """
        if self.grammar is None:
            return True
        copy = self._lc.llama_sampler_clone(self.grammar)
        try:
            for token in tokens:
                if not self._accepts(copy, token):
                    return False
                self._lc.llama_sampler_accept(copy, token)
            return True
        finally:
            self._lc.llama_sampler_free(copy)

    def sample(self, logits: np.ndarray, unbiased: np.ndarray | None = None) -> int:
        """Pick the next token from ``logits`` (float32, shape ``(n_vocab,)``) and accept it.

        Args:
            logits: The logits to sample from (after any logits processor).
            unbiased: The model's own logits, used when a processor's mask and the grammar
                together leave no token (the grammar is the hard rule: a thinking budget that
                forces its closing marker where the grammar wants more text gives way).

        Raises:
            RuntimeError: the grammar allows no token at all (a grammar bug).
        """
        token = self._pick(self._fill(logits))
        if not self.allowed(token):
            self.full_passes += 1
            for source in (logits, unbiased):
                if source is None:
                    continue
                arr = self._fill(source)
                self._lc.llama_sampler_apply(self.grammar, ctypes.byref(arr))
                if np.isfinite(self._cand["logit"][: arr.size]).any():
                    token = self._pick(arr)
                    break
            else:
                raise RuntimeError("the grammar allows no next token")
        self.accept(token)
        return token

    def accept(self, token: int) -> None:
        """Record ``token`` as generated (penalty history, grammar state) without sampling it."""
        self._lc.llama_sampler_accept(self.chain, token)
        if self.grammar is not None:
            self._lc.llama_sampler_accept(self.grammar, token)

    def close(self) -> None:
        """Free the native samplers (idempotent)."""
        if self.chain is not None:
            self._lc.llama_sampler_free(self.chain)
            self.chain = None
        if self.grammar is not None:
            self._lc.llama_sampler_free(self.grammar)
            self.grammar = None

    def __enter__(self) -> TokenSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
