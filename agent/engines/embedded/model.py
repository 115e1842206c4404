"""The embedded engine's model: llama-cpp-python with the GGUF's own chat template and our token loop.

One :class:`ChatModel` owns one ``llama_cpp.Llama`` (one generation at a time). Prompts are
rendered with the template stored in the GGUF (``tokenizer.chat_template``) through
llama-cpp-python's ``Jinja2ChatFormatter``, which passes extra keyword arguments
(``enable_thinking``, ``conversational_mode``) into the template.

A round is a :class:`~agent.engines.request.Decoding`, compiled
(:mod:`~agent.engines.embedded.compile`) into logits processors, jump-forward and drafting,
and run by :meth:`ChatModel.stream`'s own token loop: a sampler chain with a lazy grammar check
(:mod:`~agent.engines.embedded.sampling`), every decode on the model's one decode thread
(:mod:`~agent.engines.embedded.decode_thread`), llama-cpp-python's internals only through
:mod:`~agent.engines.embedded.vendor`. Between tokens the loop checks the round's
:class:`~agent.control.StopSignal` and yields the CPU to speech synthesis while the
:class:`~agent.control.CpuArbiter` says the speaker is waiting.

KV cache: llama.cpp reuses the longest common token prefix with the previous call, so a
byte-stable system prompt + tool definitions costs nothing after the first turn;
:attr:`Generation.prompt_tokens` reports how many tokens were actually evaluated.

Images: with a vision projector (``mmproj``) the model takes rounds with
:attr:`~agent.engines.request.Decoding.images` through libmtmd
(:mod:`~agent.engines.embedded.vision`): the prompt is split at its image markers, text chunks
go through the KV-cache prefix reuse as above, each image is encoded and decoded in place on the
decode thread, and the token loop then runs unchanged. An image's positions carry a key of its
bytes in the cache, so the prefix before the first image (and an identical image at the same
place) is reused, and a different image is evaluated again.

Warm-up: llama.cpp's first multi-token batch on a freshly loaded model costs 10-30 s on a
small CPU (measured, ``docs/facts.md``); :meth:`ChatModel.warmup` pays it at start.
"""

from __future__ import annotations

import codecs
import collections
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agent.config import LLMConfig
from agent.control import CpuArbiter, StopSignal
from agent.engines.base import FALLBACK_TEMPLATE, Completions, ContextFull, Generation, LLMError
from agent.engines.embedded import vendor
from agent.engines.embedded.compile import compile_request
from agent.engines.embedded.decode_thread import DecodeThread
from agent.engines.embedded.vision import MediaPrompt, Projector, eval_media
from agent.engines.media import check_images, check_projector
from agent.engines.request import Decoding
from agent.engines.thinking import ThinkingStats, markers_for

log = logging.getLogger(__name__)

PREFILL_CHUNK_TOKENS = 64
"""Tokens a stoppable prefill evaluates between two looks at its ``stop``: here (2 cores,
SmolLM2-135M) prompt evaluation runs at about 190 tokens/s, so a stop waits at most ~0.35 s."""

DRAFT_MAX_TOKENS = 10
"""Most drafted tokens checked in one batch: here a batch of 8 tokens took 53 ms and one token
13-14 ms (SmolLM2-135M, 2 threads), so a draft pays from its third accepted token."""


class ChatModel(Completions):
    """A GGUF chat model with its template, run in this process.

    Args:
        model_path: GGUF file.
        cfg: ``[llm]`` settings (n_ctx, threads, n_gpu_layers, sampling).
        vocab_only: Load only tokenizer and template (rendering and token accounting, no
            generation); loads in well under a second even for large models.
        arbiter: Shares the CPU with speech synthesis (decoding yields between tokens while
            speech holds a claim); None = never yields.
        mmproj: Vision projector GGUF (the model then takes images: :attr:`vision`); None = text
            only. Ignored with ``vocab_only``.
        mmproj_offload: Run the projector on the GPU when the model has GPU layers
            (``n_gpu_layers != 0``); False keeps it on the CPU (llama-server's
            ``--no-mmproj-offload``).

    Attributes:
        vision: Rounds may carry images (a projector is loaded).
        projector: The loaded projector, or None.

    Raises:
        LLMError: the model file is not a loadable GGUF, or the projector is missing, damaged,
            not a vision projector, or does not fit the model (the message names the file; the
            model is freed: build it again without ``mmproj`` to run on text only).
    """

    def __init__(
        self,
        model_path: Path,
        cfg: LLMConfig,
        vocab_only: bool = False,
        arbiter: CpuArbiter | None = None,
        mmproj: Path | None = None,
        mmproj_offload: bool = True,
    ) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.cfg = cfg
        self.path = Path(model_path)
        self.model_bytes = self.path.stat().st_size if self.path.is_file() else 0
        self.arbiter = arbiter if arbiter is not None else CpuArbiter()
        if not isinstance(cfg.n_ctx, int):
            raise LLMError(
                '[llm] n_ctx = "fit" must be resolved to a number before the model is loaded '
                "(agent.memplan.resolve_n_ctx)"
            )
        self.n_ctx = cfg.n_ctx
        info = None
        if mmproj is not None and not vocab_only:
            info = check_projector(Path(mmproj))  # before the model load: a bad file costs nothing
        try:
            with (
                vendor.lazy_per_layer_embeddings(cfg.lazy_per_layer_embd),
                vendor.quiet_native_log(vocab_only),
            ):
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
        self.template = meta.get("tokenizer.chat_template") or FALLBACK_TEMPLATE
        self.has_template = "tokenizer.chat_template" in meta
        self.bos_text = self._piece(self.llm.token_bos())
        self.eos_text = self._piece(self.llm.token_eos())
        self._formatter = Jinja2ChatFormatter(self.template, eos_token=self.eos_text, bos_token=self.bos_text)
        self._markers = markers_for(self.template)
        self._lock = threading.Lock()
        self._wanted = 0  # callers waiting for the lock: a stoppable prefill makes way for them
        self._wanted_lock = threading.Lock()
        # Cache indices whose tokens sit at other positions (a stretch moved by cache_reuse).
        self._reordered: tuple[int, int] | None = None
        self._rounds = 0  # varies the sampling seed from round to round, reproducibly
        # Every decode on one thread, whichever thread asks (agent.engines.embedded.decode_thread:
        # a decode from a second thread was 2.5x slower per token).
        self._decoder = DecodeThread(f"decode-{self.path.stem[:16]}")
        self.projector: Projector | None = None
        if mmproj is not None and not vocab_only:
            use_gpu = cfg.n_gpu_layers != 0 and mmproj_offload
            try:  # on the decode thread: its warm-up encode starts the thread's OpenMP team
                self.projector = self._decoder.run(
                    Projector, Path(mmproj), self.llm, cfg.threads, use_gpu, cfg.flash_attn, info
                )
            except LLMError:
                self.close()
                raise
        self.vision = self.projector is not None

    def _piece(self, token: int) -> str:
        if token < 0:
            return ""
        return self.llm.detokenize([token], special=True).decode("utf-8", errors="ignore")

    # --- text and tokens ---------------------------------------------------------------
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
        bos = self.prompt_bos()
        if bos is not None and (not toks or toks[0] != bos):
            toks = [bos, *toks]
        return toks

    def prompt_bos(self) -> int | None:
        """The BOS token a prompt must start with, or None (the vocabulary adds none)."""
        bos = self.llm.token_bos()
        add = self.llm.metadata.get("tokenizer.ggml.add_bos_token", "true") != "false"
        return bos if bos >= 0 and add and self.bos_text != "" else None

    def _prompt(self, prompt: str, images: tuple[bytes, ...]) -> list[int] | MediaPrompt:
        """Token ids of a prompt, or with images its libmtmd chunks (the caller closes them).

        Raises:
            LLMError: images on a model without a projector, markers that do not match them, or
                an image that cannot be decoded.
        """
        if not images:
            return self.tokenize(prompt)
        check_images(Decoding(prompt, images=images), self.vision, f"the embedded model {self.path.name}")
        assert self.projector is not None
        media = self.projector.prompt(prompt, images, self.prompt_bos())
        if media.ids and media.ids[-1] < 0:
            media.close()
            raise LLMError("the prompt ends in an image: there is nothing after it to predict from")
        return media

    def detokenize(self, tokens: list[int]) -> str:
        """Text of output tokens (special tokens hidden; a split UTF-8 character dropped)."""
        return self.plain_text(tokens)

    def count_tokens(self, text: str) -> int:
        """Number of tokens ``text`` takes in this model's vocabulary."""
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def plain_tokens(self, text: str) -> list[int]:
        """Tokens of output text (no BOS, special tokens not parsed)."""
        return self.llm.tokenize(text.encode(), add_bos=False, special=False) if text else []

    def plain_text(self, tokens: list[int]) -> str:
        """Text of output tokens (special tokens hidden)."""
        return self.llm.detokenize(tokens).decode("utf-8", "ignore")

    def special_tokens(self, text: str) -> list[int]:
        """Tokens of text with special tokens parsed (no BOS)."""
        return self.llm.tokenize(text.encode(), add_bos=False, special=True)

    def special_text(self, tokens: list[int]) -> str:
        """Text of tokens with special tokens shown."""
        return self.llm.detokenize(tokens, special=True).decode("utf-8", "ignore")

    # --- KV cache ----------------------------------------------------------------------
    def _cached_prefix(self, tokens: list[int]) -> int:
        n = 0
        cached = self.llm.input_ids[: self.llm.n_tokens]
        for a, b in zip(cached, tokens, strict=False):  # lengths differ: compare the overlap
            if a != b:
                break
            n += 1
        if self._reordered is not None and self._reordered[0] < n < self._reordered[1]:
            return self._reordered[0]  # its positions are not its indices: all of it or none
        return n

    def _eval_uncached(self, tokens: list[int], stop: Callable[[], bool] | None = None) -> int:
        """Evaluate what of ``tokens`` the KV cache lacks (at least the last token); caller holds the lock.

        With ``stop``, in chunks of :data:`PREFILL_CHUNK_TOKENS`, before each asking ``stop()``
        and whether a round waits for the model; returns the tokens evaluated. With ``[llm]
        cache_reuse``, a stretch the cache holds further on (the turns a compaction kept) is
        moved into place first instead of evaluated again (:func:`vendor.reuse_shifted`).
        """
        keep, moved = self._cached_prefix(tokens), 0
        end = self._reordered[1] if self._reordered is not None else 0  # nothing moved from before it
        if self._reordered is not None and keep <= self._reordered[0]:
            self._reordered = None  # cut below it: it leaves the cache now
        if self.cfg.cache_reuse and keep < len(tokens) - 1:
            start = keep
            keep, moved = self._decoder.run(
                vendor.reuse_shifted, self.llm, tokens, keep, self.cfg.cache_reuse, end
            )
            if moved or keep > start:
                self._reordered = (start, keep)
        keep = min(keep, len(tokens) - 1)
        self.llm.n_tokens = keep
        if stop is None:
            self._decoder.run(self.llm.eval, tokens[keep:])
            return moved + len(tokens) - keep
        done = keep
        while done < len(tokens) and not self._wanted and not stop():
            chunk = tokens[done : done + PREFILL_CHUNK_TOKENS]
            self._decoder.run(self.llm.eval, chunk)
            done += len(chunk)
        return moved + done - keep

    @contextlib.contextmanager
    def _holding(self) -> Iterator[None]:
        """The model's lock, counted in :attr:`_wanted` while waited for."""
        with self._wanted_lock:
            self._wanted += 1
        try:
            self._lock.acquire()
        finally:
            with self._wanted_lock:
                self._wanted -= 1
        try:
            yield
        finally:
            self._lock.release()

    def _eval(self, prompt: list[int] | MediaPrompt, tail: list[int], gen: Generation | None = None) -> int:
        """Evaluate a prompt (and ``tail`` after it) the KV cache lacks; returns KV cells evaluated.

        With images, ``gen.extra`` gets ``image_tokens`` (the prompt's image embeddings) and
        ``encode_ms`` (encoding and decoding the images not already cached, ms). The caller holds
        the lock.
        """
        if not isinstance(prompt, MediaPrompt):
            return self._eval_uncached(prompt + tail)
        assert self.projector is not None
        cached = self._cached_prefix(prompt.ids + tail)
        n, ms = self._decoder.run(eval_media, self.llm, self.projector, prompt, tail, cached)
        if gen is not None:
            gen.extra["image_tokens"] = gen.extra.get("image_tokens", 0) + prompt.image_tokens
            gen.extra["encode_ms"] = gen.extra.get("encode_ms", 0.0) + ms
        return n

    def prefill(self, request: Decoding, stop: Callable[[], bool] | None = None) -> int:
        """Evaluate a likely next prompt into the KV cache now (an early model start, or between turns).

        The next :meth:`stream` whose prompt starts with these tokens evaluates only the rest
        (the longest cached prefix is reused); a prompt that differs (the user went on speaking)
        shares at least the history before the user's turn, so a discard costs nothing but the
        time already spent. Skipped when the model is busy generating.

        llama.cpp cannot interrupt one evaluation call, so with ``stop`` a text prompt is
        evaluated in chunks of :data:`PREFILL_CHUNK_TOKENS` and ``stop()`` is asked before each:
        once it says True, or a round (:meth:`stream`, a look at the camera) waits for the model,
        the prefill ends there, and what was evaluated stays cached for the next call.

        Args:
            request: The round the turn would run: its ``prompt`` and ``prefix`` are evaluated
                (and its ``images``, encoded now).
            stop: Asked between chunks; True ends the prefill early (None: one call, to the end).

        Returns:
            KV cells evaluated, image embeddings included (0: skipped, already cached, or too
            long for ``n_ctx``).

        Raises:
            LLMError: as :meth:`stream` for images.
        """
        prompt = self._prompt(request.prompt, request.images)
        try:
            ids = prompt.ids if isinstance(prompt, MediaPrompt) else prompt
            tail = self.plain_tokens(request.prefix)
            if _cells(prompt) + len(tail) + 1 > self.n_ctx or not self._lock.acquire(blocking=False):
                return 0
            try:
                if self._cached_prefix(ids + tail) >= len(ids) + len(tail) - 1:
                    return 0
                if stop is not None and not isinstance(prompt, MediaPrompt):
                    return self._eval_uncached(prompt + tail, stop)
                return self._eval(prompt, tail)
            finally:
                self._lock.release()
        finally:
            _close(prompt)

    def next_token_logits(self, prompt: str, images: tuple[bytes, ...] = ()) -> np.ndarray:
        """Logits of the token that would follow ``prompt`` (the cached prefix is reused).

        Args:
            prompt: Text in this model's format (special tokens parsed), one
                :data:`~agent.engines.request.MEDIA_MARKER` per image.
            images: Encoded images (needs :attr:`vision`).

        Returns:
            ``(n_vocab,)`` float32 logits, a copy.

        Raises:
            ContextFull: the prompt does not fit in ``n_ctx``.
            LLMError: images as in :meth:`stream`.
        """
        tokens = self._prompt(prompt, images)
        try:
            if _cells(tokens) + 1 > self.n_ctx:
                raise ContextFull(f"prompt of {_cells(tokens)} tokens does not fit n_ctx={self.n_ctx}")
            with self._holding():
                self._eval(tokens, [])
                return vendor.last_logits(self.llm).copy()
        finally:
            _close(tokens)

    # --- the token loop ----------------------------------------------------------------
    def _jump(self, jump: Callable[[str], str] | None, text: str, sampler: Any) -> list[int]:
        """Tokens of the text ``jump`` says is forced after ``text``, accepted by ``sampler`` (or none)."""
        ahead = jump(text) if jump is not None else ""
        forced = self.plain_tokens(ahead)
        if not forced or self.llm.n_tokens + len(forced) + 2 > self.n_ctx:
            return []
        if not sampler.allows_all(forced):  # openings the grammar disagrees with: generate them instead
            log.warning("the grammar does not allow the forced text %r after %r; not jumping", ahead, text)
            return []
        for token in forced:
            sampler.accept(token)
        return forced

    def _take(self, token: int, gen: Generation, text: _TextStream, t0: float) -> Generator[str, None, bool]:
        """Count a sampled token and yield its text; returns True when generation ends with it."""
        gen.completion_tokens += 1
        if vendor.is_end_of_generation(self.llm, token):
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
        tokens = self.plain_tokens(guess)[:DRAFT_MAX_TOKENS]
        return tokens if self.llm.n_tokens + len(tokens) + 2 <= self.n_ctx else []

    def _yield_cpu(self, stop: StopSignal | None) -> None:
        """Wait while speech synthesis holds the CPU (the speaker waits for audio), or listening does."""
        if self.arbiter.claimed:
            self.arbiter.yield_to_speech(stop)
        if self.arbiter.listening:
            self.arbiter.yield_to_listening(stop)

    def stream(self, request: Decoding, gen: Generation, stop: StopSignal | None = None) -> Iterator[str]:
        """Generate one round's text pieces.

        The request's ``prefix`` is evaluated in one batch with the prompt and yielded as the
        first piece. After each sampled token, text the request's ``forced`` openings leave no
        choice about is handed out at once and evaluated in the same batch as the token
        (jump-forward), before that batch runs, so a call it completes can start meanwhile. In
        greedy rounds with ``draft``, the continuation of a ``copy_from`` text is evaluated with
        the token in one batch of up to :data:`DRAFT_MAX_TOKENS` and taken while each drafted
        token is the one the model picks there (the output is exactly what decoding one token at
        a time gives); the rest leaves the KV cache.

        With ``images`` (a model with :attr:`vision`), the prompt's text chunks are evaluated as
        tokens and each image is encoded and decoded in place; ``gen.prompt_tokens`` counts the
        image embeddings, ``gen.extra`` gets ``image_tokens`` and ``encode_ms``.

        Args:
            request: The round (:class:`~agent.engines.request.Decoding`).
            gen: Filled in with token counts and timings as the stream runs.
            stop: Checked before every token: generation ends after the current one.

        Yields:
            Text pieces (whole UTF-8 characters), in order.

        Raises:
            ContextFull: the prompt (with ``prefix``) leaves no room in ``n_ctx``.
            LLMError: the grammar is invalid or rejects
                ``prefix``; images on a model without :attr:`vision`, image markers that do not
                match the images, an image that cannot be decoded or encoded.
        """
        cfg = self.cfg
        prompt, forced, n_cells, compiled = self._compile(request, gen)
        limit = min(request.max_tokens or cfg.max_tokens, self.n_ctx - n_cells)
        temperature = cfg.temperature if request.temperature is None else request.temperature
        t0 = time.perf_counter()  # time to first token includes a wait for the model (an early start)
        with self._holding():
            try:
                self._yield_cpu(stop)  # the speaker waits for a sentence: the prompt waits too
                gen.prompt_tokens += self._eval(prompt, forced, gen)
            finally:
                _close(prompt)
            sampler = self._sampler(request, temperature)
            self._rounds += 1
            draft = compiled.draft if temperature <= 0.0 else None
            run = _Decoding(
                compiled.processor, compiled.jump, draft, _TextStream([s for s in request.stop if s])
            )
            n0 = gen.completion_tokens
            try:
                for token in forced:
                    if not sampler.allowed(token):
                        raise LLMError(f"the grammar does not allow the forced prefix {request.prefix!r}")
                    sampler.accept(token)
                if request.prefix:
                    gen.text += request.prefix
                    yield request.prefix
                yield from self._decode(request, gen, stop, sampler, run, limit, t0)
                tail = run.text.flush()
                if tail:
                    gen.text += tail
                    yield tail
            finally:
                if request.grammar:
                    gen.extra["grammar_full_passes"] = (
                        gen.extra.get("grammar_full_passes", 0) + sampler.full_passes
                    )
                sampler.close()
                now = time.perf_counter()
                gen.total_ms += (now - t0) * 1000.0
                n = gen.completion_tokens - n0
                if n > 1 and now > run.t_first:
                    gen.tokens_per_s = (n - 1) / (now - run.t_first)

    def _compile(
        self, request: Decoding, gen: Generation
    ) -> tuple[list[int] | MediaPrompt, list[int], int, Any]:
        """The round's prompt, its forced prefix tokens, the cells they take, and the compiled request.

        Raises:
            ContextFull: the prompt (with ``prefix``) leaves no room in ``n_ctx``.
            LLMError: as :meth:`stream`.
        """
        prompt = self._prompt(request.prompt, request.images)
        try:
            tokens = prompt.ids if isinstance(prompt, MediaPrompt) else prompt
            forced = self.plain_tokens(request.prefix)
            n_cells = _cells(prompt) + len(forced)
            if n_cells + 1 > self.n_ctx:
                raise ContextFull(f"prompt of {n_cells} tokens does not fit n_ctx={self.n_ctx}")
            stats = None
            if request.thinking is not None:
                stats = gen.extra["thinking"] = ThinkingStats()
            compiled = compile_request(request, self, len(tokens), self._markers, stats)
        except BaseException:
            _close(prompt)
            raise
        return prompt, forced, n_cells, compiled

    def _sampler(self, request: Decoding, temperature: float) -> Any:
        """The round's token sampler (temperature, nucleus, repeat penalty, seed, grammar).

        Raises:
            LLMError: the grammar is invalid.
        """
        from agent.engines.embedded.sampling import TokenSampler

        cfg = self.cfg
        try:
            return TokenSampler(
                vendor.vocab_pointer(self.llm),
                self.llm.n_vocab(),
                temperature=temperature,
                top_p=cfg.top_p if request.top_p is None else request.top_p,
                repeat_penalty=cfg.repeat_penalty,
                seed=(cfg.seed + self._rounds) if request.seed is None else request.seed,
                grammar=request.grammar,
            )
        except ValueError as e:
            raise LLMError(str(e)) from None

    def _decode(
        self,
        request: Decoding,
        gen: Generation,
        stop: StopSignal | None,
        sampler: Any,
        run: _Decoding,
        limit: int,
        t0: float,
    ) -> Iterator[str]:
        """Sample up to ``limit`` tokens: each taken, then forced text, drafts or the token evaluated."""
        for _ in range(limit):
            if stop is not None and stop.is_set():
                gen.cancelled = True
                return
            token, expected, n_ids = self._pick(request, sampler, run)
            if not run.t_first:
                run.t_first = time.perf_counter()
            if (yield from self._take(token, gen, run.text, t0)):
                return
            if expected is not None:
                if token == expected:  # the drafted token, already in the KV cache
                    gen.draft_accepted += 1
                    continue
                self.llm.n_tokens = n_ids  # the rest of the draft leaves the KV cache
                run.checks.clear()
            ahead = self._jump(run.jump, gen.text, sampler)
            if ahead:
                # Forced text is known before it is evaluated: handed out first, so a call it
                # completes starts (and its acknowledgement is spoken) meanwhile.
                gen.extra["jump_tokens"] = gen.extra.get("jump_tokens", 0) + len(ahead)
                piece, stopped = run.text.feed(self.llm.detokenize(ahead))
                if piece:
                    gen.text += piece
                    yield piece
                if stopped:
                    gen.finish_reason = "stop"
                    return
            if stop is not None and stop.is_set():  # what was handed out needs no evaluation
                gen.cancelled = True
                return
            self._yield_cpu(stop)
            self._evaluate(token, ahead, run, gen)
        gen.finish_reason = "length"

    def _pick(self, request: Decoding, sampler: Any, run: _Decoding) -> tuple[int, int | None, int]:
        """The next token, with the drafted token it is checked against (or None) and the context length."""
        expected = None
        if run.checks:
            logits, n_ids, expected = run.checks.popleft()
        else:
            logits, n_ids = vendor.last_logits(self.llm), self.llm.n_tokens
        unbiased = None
        if run.processor is not None:
            unbiased = logits.copy() if request.grammar else None
            logits[:] = run.processor(self.llm.input_ids[:n_ids], logits)
        return sampler.sample(logits, unbiased), expected, n_ids

    def _evaluate(self, token: int, ahead: list[int], run: _Decoding, gen: Generation) -> None:
        """Evaluate the token (with forced text after it), or the token and a draft to check."""
        proposal = self._draft(run.draft, gen.text) if run.draft and not ahead else []
        if proposal:
            n_past = self.llm.n_tokens
            rows = self._decoder.run(vendor.eval_rows, self.llm, [token, *proposal])
            gen.draft_tokens += len(proposal)
            run.checks.extend((rows[i], n_past + 1 + i, t) for i, t in enumerate(proposal))
        else:
            self._decoder.run(self.llm.eval, [token, *ahead])

    def close(self) -> None:
        """Free the projector and the model, and end the decode thread."""
        self._decoder.close()
        if self.projector is not None:
            self.projector.close()
        self.llm.close()


def _cells(prompt: list[int] | MediaPrompt) -> int:
    """KV-cache cells a prompt takes (image embeddings included)."""
    return prompt.n_cells if isinstance(prompt, MediaPrompt) else len(prompt)


def _close(prompt: list[int] | MediaPrompt) -> None:
    if isinstance(prompt, MediaPrompt):
        prompt.close()


def _ggml_type(name: str) -> int:
    """llama.cpp's ggml type id for a cache type name (``"f16"``, ``"q8_0"``)."""
    import llama_cpp

    return getattr(llama_cpp, f"GGML_TYPE_{name.upper()}")


@dataclass
class _Decoding:
    """What one round's token loop carries from token to token.

    Attributes:
        processor: The logits processor of the round's priors, or None.
        jump: Forced openings (jump-forward), or None.
        draft: Texts to draft from (greedy rounds), or None.
        text: Generated bytes to text pieces.
        checks: Drafted tokens still to check: (logits before it, context length, the token).
        t_first: When the first token was sampled (``perf_counter``), 0 before.
    """

    processor: Any
    jump: Any
    draft: Any
    text: _TextStream
    checks: collections.deque[tuple[Any, int, int]] = field(default_factory=collections.deque)
    t_first: float = 0.0


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
