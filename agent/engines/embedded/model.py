"""The chat model: llama-cpp-python with the GGUF's own chat template.

One :class:`ChatModel` owns one ``llama_cpp.Llama`` (one generation at a time; callers run
it on one worker thread). Prompts are rendered with the template stored in the GGUF
(``tokenizer.chat_template``) through llama-cpp-python's ``Jinja2ChatFormatter``, which
passes extra keyword arguments (``enable_thinking``, ``conversational_mode``) into the
template. Tokens are streamed as text pieces (llama-cpp-python holds back bytes of a
multi-byte UTF-8 character split across tokens until it is whole).

KV cache: llama.cpp reuses the longest common token prefix with the previous call, so a
byte-stable system prompt + tool definitions costs nothing after the first turn;
:attr:`Generation.prompt_tokens` reports how many tokens were actually evaluated.

Warm-up: llama.cpp's first multi-token batch on a freshly loaded model costs 10-30 s on a
small CPU (measured, ``docs/facts.md``); :meth:`ChatModel.warmup` pays it at start.
"""

from __future__ import annotations

import codecs
import collections
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from agent.config import LLMConfig
from agent.engines.base import Completions, Generation, LLMError
from agent.engines.embedded.decode_thread import DecodeThread

log = logging.getLogger(__name__)

HOLD_MAX_S = 1.0
"""Longest pause of generation per token while speech synthesis holds the model (``ChatModel.hold``), s."""
DRAFT_MAX_TOKENS = 10
"""Most drafted tokens checked in one batch: here a batch of 8 tokens took 53 ms and one token
13-14 ms (SmolLM2-135M, 2 threads), so a draft pays from its third accepted token."""


class ChatModel(Completions):
    """A GGUF chat model with its template.

    Args:
        model_path: GGUF file.
        cfg: ``[llm]`` settings (n_ctx, threads, n_gpu_layers, sampling).
        vocab_only: Load only tokenizer and template (rendering and token accounting, no
            generation); loads in well under a second even for large models.

    Raises:
        LLMError: the file is not a loadable GGUF.
    """

    def __init__(self, model_path: Path, cfg: LLMConfig, vocab_only: bool = False) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.cfg = cfg
        self.path = Path(model_path)
        if not isinstance(cfg.n_ctx, int):
            raise LLMError(
                '[llm] n_ctx = "fit" must be resolved to a number before the model is loaded '
                "(agent.memplan.resolve_n_ctx)"
            )
        self.n_ctx = cfg.n_ctx
        try:
            with _lazy_per_layer_embd(cfg.lazy_per_layer_embd):
                self.llm = Llama(
                    model_path=str(model_path),
                    n_ctx=cfg.n_ctx,
                    n_threads=cfg.threads,
                    n_threads_batch=cfg.threads,
                    n_gpu_layers=cfg.n_gpu_layers,
                    n_batch=cfg.n_batch,
                    type_k=_ggml_type(cfg.cache_type_k),
                    type_v=_ggml_type(cfg.cache_type_v),
                    flash_attn=cfg.flash_attn,
                    swa_full=cfg.swa_full,
                    seed=cfg.seed,
                    vocab_only=vocab_only,
                    verbose=False,
                )
        except (ValueError, RuntimeError, OSError) as e:
            raise LLMError(
                f"{model_path}: cannot load the model as GGUF ({e}); check the file or the "
                f"[llm] model setting"
            ) from None
        meta = self.llm.metadata
        self.architecture = meta.get("general.architecture", "")
        self.template = meta.get("tokenizer.chat_template") or _FALLBACK_TEMPLATE
        self.has_template = "tokenizer.chat_template" in meta
        self.bos_text = self._piece(self.llm.token_bos())
        self.eos_text = self._piece(self.llm.token_eos())
        self._formatter = Jinja2ChatFormatter(self.template, eos_token=self.eos_text, bos_token=self.bos_text)
        self._lock = threading.Lock()
        self._rounds = 0  # varies the sampling seed from round to round, reproducibly
        # Every decode on one thread, whichever thread asks (see agent.engines.embedded.decode_thread: a decode
        # from a second thread was 2.5x slower per token).
        self._decoder = DecodeThread(f"decode-{self.path.stem[:16]}")
        self._go = threading.Event()  # cleared by hold(True): generation waits between tokens
        self._go.set()

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="ignore")

    # --- prompt -----------------------------------------------------------------------
    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **template_vars: Any
    ) -> str:
        """Render messages (and tools) with the GGUF's chat template, ending in the generation prompt.

        Raises:
            LLMError: the template rejected the messages (e.g. roles out of order).
        """
        try:
            return self._formatter(messages=messages, tools=tools or None, **template_vars).prompt
        except Exception as e:  # jinja2 raises its own types, and templates call raise_exception()
            raise LLMError(f"chat template of {self.path.name} rejected the conversation: {e}") from None

    def tokenize(self, text: str) -> list[int]:
        """Tokens of a rendered prompt (special tokens parsed; BOS added only if the text lacks it)."""
        toks = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        bos = self.llm.token_bos()
        if (
            bos >= 0
            and self.llm.metadata.get("tokenizer.ggml.add_bos_token", "true") != "false"
            and (not toks or toks[0] != bos)
            and not self.bos_text == ""
        ):
            toks = [bos, *toks]
        return toks

    def count_tokens(self, text: str) -> int:
        """Number of tokens ``text`` takes in this model's vocabulary."""
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _cached_prefix(self, tokens: list[int]) -> int:
        n = 0
        cached = self.llm.input_ids[: self.llm.n_tokens]
        for a, b in zip(cached, tokens, strict=False):  # lengths differ: compare the overlap
            if a != b:
                break
            n += 1
        return n

    def prefill(self, prompt: str, prefix: str = "") -> int:
        """Evaluate a likely next prompt into the KV cache now (an early model start).

        The next :meth:`stream` whose prompt starts with these tokens evaluates only the rest
        (llama-cpp-python reuses the longest cached prefix); a prompt that differs (the user
        went on speaking) shares at least the history before the user's turn, so a discard costs
        nothing but the time already spent. Skipped when the model is busy generating.

        Args:
            prompt: A rendered prompt (from :meth:`render`).
            prefix: What the output will start with (``stream``'s ``prefix``), evaluated too.

        Returns:
            Tokens evaluated (0: skipped, already cached, or too long for ``n_ctx``).
        """
        tokens = self.tokenize(prompt) + self._forced(prefix)
        if len(tokens) + 1 > self.n_ctx or not self._lock.acquire(blocking=False):
            return 0
        try:
            if self._cached_prefix(tokens) >= len(tokens) - 1:
                return 0
            return self._eval_uncached(tokens)
        finally:
            self._lock.release()

    def next_token_logits(self, prompt: str) -> Any:
        """Logits of the token that would follow ``prompt`` (the cached prefix is reused).

        Args:
            prompt: Text in this model's format (special tokens parsed).

        Returns:
            ``(n_vocab,)`` float32 logits, a copy.

        Raises:
            LLMError: the prompt does not fit in ``n_ctx``.
        """
        tokens = self.tokenize(prompt)
        if len(tokens) + 1 > self.n_ctx:
            raise LLMError(f"prompt of {len(tokens)} tokens does not fit n_ctx={self.n_ctx}")
        with self._lock:
            self._eval_uncached(tokens)
            return self._last_logits().copy()

    def _forced(self, prefix: str) -> list[int]:
        """Tokens of an output prefix (plain text: no BOS, no special tokens)."""
        return self.llm.tokenize(prefix.encode(), add_bos=False, special=False) if prefix else []

    def _jump(self, jump: Callable[[str], str] | None, text: str, sampler: Any) -> list[int]:
        """Tokens of the text ``jump`` says is forced after ``text``, accepted by ``sampler`` (or none)."""
        ahead = jump(text) if jump is not None else ""
        forced = self._forced(ahead)
        if not forced or self.llm.n_tokens + len(forced) + 2 > self.n_ctx:
            return []
        if not sampler.allows_all(forced):  # a schema the jump misread: generate it instead
            log.warning("the grammar does not allow the forced text %r after %r; not jumping", ahead, text)
            return []
        for token in forced:
            sampler.accept(token)
        return forced

    def _last_logits(self) -> Any:
        """The newest position's logits as a writable float32 view of llama.cpp's buffer, ``(n_vocab,)``.

        llama-cpp-python has no public call for this without ``logits_all`` (vendor boundary).
        """
        import llama_cpp

        ptr = llama_cpp.llama_get_logits_ith(self.llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.llm.n_vocab(),))

    def _take(self, token: int, gen: Generation, text: _TextStream, t0: float) -> Generator[str, None, bool]:
        """Count a sampled token and yield its text; returns True when generation ends with it."""
        gen.completion_tokens += 1
        if self._is_eog(token):
            gen.finish_reason = "stop"
            return True
        piece, stopped = text.feed(self.llm.detokenize([token]))
        if piece:
            if not gen.ttft_ms:
                gen.ttft_ms = (time.perf_counter() - t0) * 1000.0
            gen.text += piece
            yield piece
        if stopped:
            gen.finish_reason = "stop"
        return stopped

    def _draft(self, draft: Callable[[str], str] | None, text: str) -> list[int]:
        """Tokens of the text ``draft`` expects after ``text``, at most :data:`DRAFT_MAX_TOKENS`."""
        guess = draft(text) if draft is not None else ""
        tokens = self._forced(guess)[:DRAFT_MAX_TOKENS]
        return tokens if self.llm.n_tokens + len(tokens) + 2 <= self.n_ctx else []

    def _eval_rows(self, tokens: list[int]) -> list[Any]:
        """Evaluate ``tokens`` after the KV cache in one batch, keeping the logits at every position.

        As ``Llama.eval`` (llama-cpp-python 0.3), but with logits for each token: row ``i`` is
        the next-token logits after ``tokens[: i + 1]``. The last row stays in llama.cpp's
        buffer (:meth:`_last_logits`). Vendor boundary: llama-cpp-python's batch and context.

        Returns:
            ``len(tokens) - 1`` copies, each ``(n_vocab,)`` float32.
        """
        import llama_cpp

        llm = self.llm
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

    def _is_eog(self, token: int) -> bool:
        import llama_cpp

        return bool(llama_cpp.llama_vocab_is_eog(self.llm._model.vocab, token))

    def _wait_go(self, cancel: threading.Event | None) -> None:
        """Wait while held (:meth:`hold`), at most :data:`HOLD_MAX_S`, checking ``cancel``."""
        end = time.perf_counter() + HOLD_MAX_S
        while not self._go.wait(0.02):
            if (cancel is not None and cancel.is_set()) or time.perf_counter() >= end:
                return

    def _eval_uncached(self, tokens: list[int]) -> int:
        """Evaluate what of ``tokens`` the KV cache lacks (at least the last token); caller holds the lock."""
        keep = min(self._cached_prefix(tokens), len(tokens) - 1)
        self.llm.n_tokens = keep
        self._decoder.run(self.llm.eval, tokens[keep:])
        return len(tokens) - keep

    # --- generation -------------------------------------------------------------------
    def hold(self, on: bool) -> None:
        """Pause (True) or resume (False) generation between tokens (and before a prompt is evaluated).

        The speech stage holds the model while it synthesizes audio the speaker is waiting
        for: on 2 cores piper took 394 ms for a turn's first sentence with the model decoding
        beside it and 60-110 ms alone (bench joke.wav, measured here). A hold lasts at most
        :data:`HOLD_MAX_S` per token, so a stuck synthesis cannot stall a reply; a cancel ends it.

        Args:
            on: True to pause, False to resume.
        """
        if on:
            self._go.clear()
        else:
            self._go.set()

    def stream(
        self,
        prompt: str,
        gen: Generation,
        *,
        grammar: Any = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        cancel: threading.Event | None = None,
        temperature: float | None = None,
        logits_processor: Callable[[int], Callable[[Any, Any], Any]] | None = None,
        prefix: str = "",
        jump: Callable[[str], str] | None = None,
        draft: Callable[[str], str] | None = None,
    ) -> Iterator[str]:
        """Generate text pieces for a rendered prompt.

        Args:
            prompt: Rendered prompt (from :meth:`render`).
            gen: Filled in with token counts and timings as the stream runs.
            grammar: A ``llama_cpp.LlamaGrammar`` constraining the output, or None.
            max_tokens: Cap on generated tokens (default from config).
            stop: Strings that end generation (not included in the output).
            cancel: When set, generation stops after the current token.
            temperature: Override of the configured temperature.
            logits_processor: Factory called with the prompt length in tokens, returning a
                llama.cpp logits processor ``(input_ids, scores) -> scores``.
            prefix: Text the output is known to start with (what a grammar forces first, such
                as ``{"call": {"tool": "``): evaluated in one batch with the prompt instead of
                one decode step per token, then yielded as the first piece. The grammar must
                accept it.
            jump: Called with the output so far after each sampled token; returns text the
                grammar now forces (``"}, "say": "`` once a reply chose no tool) or ``""``.
                That text is evaluated in the same batch as the token, not one decode step per
                token (jump-forward decoding, as SGLang's compressed finite-state machine does),
                and yielded as one piece before that batch runs (a call it completes can start
                meanwhile). Text the grammar rejects is logged and generated instead.
            draft: Called with the output so far after each sampled token; returns text likely
                to follow (prompt-lookup decoding, Saxena 2023: the tool result a reply reads
                back), or ``""``. Greedy decoding only (temperature 0): up to
                :data:`DRAFT_MAX_TOKENS` of it are evaluated with the token in one batch, and
                taken while each is the token the model picks there, so the output is exactly
                what decoding one token at a time gives; the rest leaves the KV cache.

        Yields:
            Text pieces (whole UTF-8 characters), in order.

        Raises:
            LLMError: the prompt does not fit in ``n_ctx``, or the grammar rejects ``prefix``.
        """
        from agent.engines.embedded.sampling import TokenSampler

        tokens = self.tokenize(prompt)
        forced = self._forced(prefix)
        limit = max_tokens or self.cfg.max_tokens
        if len(tokens) + len(forced) + 1 > self.n_ctx:
            raise LLMError(f"prompt of {len(tokens) + len(forced)} tokens does not fit n_ctx={self.n_ctx}")
        limit = min(limit, self.n_ctx - len(tokens) - len(forced))
        stops = [s for s in (stop or []) if s]
        with self._lock:
            t0 = time.perf_counter()
            if not self._go.is_set():  # the speaker waits for a sentence: the prompt waits too
                self._wait_go(cancel)
            gen.prompt_tokens += self._eval_uncached(tokens + forced)
            processor = logits_processor(len(tokens)) if logits_processor else None
            sampler = TokenSampler(
                self.llm,
                temperature=self.cfg.temperature if temperature is None else temperature,
                top_p=self.cfg.top_p,
                repeat_penalty=self.cfg.repeat_penalty,
                seed=self.cfg.seed + self._rounds,
                grammar=grammar,
            )
            self._rounds += 1
            text = _TextStream(stops)
            n0, t_first = gen.completion_tokens, 0.0
            try:
                for token in forced:
                    if not sampler.allowed(token):
                        raise LLMError(f"the grammar does not allow the forced prefix {prefix!r}")
                    sampler.accept(token)
                if prefix:
                    gen.text += prefix
                    yield prefix
                greedy = (self.cfg.temperature if temperature is None else temperature) <= 0.0
                # Drafted tokens still to check: (logits before it, context length, the token).
                checks: collections.deque[tuple[Any, int, int]] = collections.deque()
                for _ in range(limit):
                    if cancel is not None and cancel.is_set():
                        gen.cancelled = True
                        break
                    expected = None
                    if checks:
                        logits, n_ids, expected = checks.popleft()
                    else:
                        logits, n_ids = self._last_logits(), self.llm.n_tokens
                    unbiased = None
                    if processor is not None:
                        unbiased = logits.copy() if grammar is not None else None
                        logits[:] = processor(self.llm.input_ids[:n_ids], logits)
                    token = sampler.sample(logits, unbiased)
                    if not t_first:
                        t_first = time.perf_counter()
                    if (yield from self._take(token, gen, text, t0)):
                        break
                    if expected is not None:
                        if token == expected:  # the drafted token, already in the KV cache
                            gen.draft_accepted += 1
                            continue
                        self.llm.n_tokens = n_ids  # the rest of the draft leaves the KV cache
                        checks.clear()
                    ahead = self._jump(jump, gen.text, sampler)
                    if ahead:
                        # Forced text is known before it is evaluated: handed out first, so a
                        # call it completes starts (and its acknowledgement is spoken) meanwhile.
                        gen.extra["jump_tokens"] = gen.extra.get("jump_tokens", 0) + len(ahead)
                        piece, stopped = text.feed(self.llm.detokenize(ahead))
                        if piece:
                            gen.text += piece
                            yield piece
                        if stopped:
                            gen.finish_reason = "stop"
                            break
                    if cancel is not None and cancel.is_set():  # what was handed out needs no evaluation
                        gen.cancelled = True
                        break
                    if not self._go.is_set():
                        self._wait_go(cancel)
                    proposal = self._draft(draft, gen.text) if greedy and draft and not ahead else []
                    if proposal:
                        n_past = self.llm.n_tokens
                        rows = self._decoder.run(self._eval_rows, [token, *proposal])
                        gen.draft_tokens += len(proposal)
                        checks.extend((rows[i], n_past + 1 + i, t) for i, t in enumerate(proposal))
                    else:
                        self._decoder.run(self.llm.eval, [token, *ahead])
                else:
                    gen.finish_reason = "length"
                tail = text.flush()
                if tail:
                    gen.text += tail
                    yield tail
            finally:
                if grammar is not None:
                    gen.extra["grammar_full_passes"] = (
                        gen.extra.get("grammar_full_passes", 0) + sampler.full_passes
                    )
                sampler.close()
                now = time.perf_counter()
                gen.total_ms += (now - t0) * 1000.0
                n = gen.completion_tokens - n0
                if n > 1 and now > t_first:
                    gen.tokens_per_s = (n - 1) / (now - t_first)


def _ggml_type(name: str) -> int:
    """llama.cpp's ggml type id for a cache type name (``"f16"``, ``"q8_0"``)."""
    import llama_cpp

    return getattr(llama_cpp, f"GGML_TYPE_{name.upper()}")


_PARAMS_LOCK = threading.Lock()


@contextmanager
def _lazy_per_layer_embd(on: bool) -> Iterator[None]:
    """Load with ``lazy_mode = LLAMA_LAZY_MODE_ON`` (per-layer embeddings read on demand).

    llama-cpp-python 0.3.36 does not expose the model parameter ``lazy_mode``; ``Llama``
    builds its parameters from ``llama_model_default_params()``, so that function is wrapped
    for the duration of one construction (under a lock).
    """
    if not on:
        yield
        return
    import llama_cpp.llama as llama_mod

    low = llama_mod.llama_cpp
    with _PARAMS_LOCK:
        base = low.llama_model_default_params

        def params():  # returns a ctypes llama_model_params
            p = base()
            p.lazy_mode = low.LLAMA_LAZY_MODE_ON
            return p

        low.llama_model_default_params = params
        try:
            yield
        finally:
            low.llama_model_default_params = base


class _TextStream:
    """Generated bytes → text pieces: whole UTF-8 characters, held back where a stop string may start."""

    def __init__(self, stops: list[str]) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="ignore")
        self._stops = stops
        self._held = ""
        self.stopped = False

    def feed(self, data: bytes) -> tuple[str, bool]:
        """Add one token's bytes; return ``(text to emit, whether a stop string was reached)``."""
        self._held += self._decoder.decode(data)
        if not self._stops:
            out, self._held = self._held, ""
            return out, False
        cut = min((i for i in (self._held.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            out, self._held = self._held[:cut], ""
            return out, True
        # Keep back the longest tail that could still grow into a stop string.
        keep = max(
            (k for s in self._stops for k in range(1, len(s)) if self._held.endswith(s[:k])), default=0
        )
        out, self._held = self._held[: len(self._held) - keep], self._held[len(self._held) - keep :]
        return out, False

    def flush(self) -> str:
        """What is still held back (nothing after a stop string)."""
        out, self._held = ("" if self.stopped else self._held + self._decoder.decode(b"", final=True)), ""
        return out


# ChatML, for GGUFs that carry no template (e.g. base models).
_FALLBACK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
