"""The chat model over HTTP: the engine protocol, with generation on a llama.cpp or OpenAI-compatible server.

:class:`ServerChatModel` keeps the conversation's turn loop unchanged. Prompts are rendered and
counted locally with the GGUF's own template and tokenizer (a vocabulary-only load, well under a
second), so the byte-stable prompt prefix, the streaming parsers and grammar mode work as with
the embedded engine. Two ways to generate:

* ``completions`` (llama-server, and OpenAI-compatible servers that take a raw prompt): the
  rendered prompt goes to ``/v1/completions`` as token ids (the local tokenizer's, BOS included
  once; to llama-server's native ``/completion`` when it has a vision projector, whose
  ``/v1/completions`` then takes only strings), with ``stream``, ``max_tokens``, ``stop``,
  ``temperature``, ``top_p``, ``seed`` and, as llama.cpp extensions (``tools/server/README.md``),
  ``cache_prompt`` (KV-cache prefix reuse), ``grammar`` (the round's GBNF), ``repeat_penalty``
  and the reasoning budget.
* ``chat``: the messages and tools go to ``/v1/chat/completions``; the server renders them with
  its own copy of the template and parses tool calls. Its ``tool_calls`` deltas come back into
  the stream as ``<tool_call>{json}</tool_call>`` text, which every tool-call parser accepts, and
  reasoning as a thinking block, so the same parsers split speech, thinking and calls; markup a
  server leaves in ``content`` is parsed the same way and never spoken.

Images: a round's :attr:`~agent.engines.request.Decoding.images` go to ``/v1/completions`` in
llama-server's multimodal prompt object and to ``/v1/chat/completions`` as ``image_url`` parts
(:mod:`agent.engines.remote.body`); the server encodes them (``--mmproj``). ``vision`` is True for
a managed llama-server started with a projector and, for a remote server, when its ``GET /props``
lists the vision modality (llama-server); servers without ``/props`` (vLLM, Ollama, NIM) are
taken as text-only unless the engine is built with ``vision=True``. Prompt tokens come from the
server's ``timings``/``usage`` (image tokens included). The server does not say how many of them
are the images': ``gen.extra["image_tokens"]`` is its whole prompt count less the local count of
the text around the markers, so it includes the few tokens each family wraps an image in
(measured here: the exact count +14 for an idefics3 frame of one tile and its overview, +2
for Gemma 4's ``<|image>``/``<image|>``); the encode time stays on the server.

A round's :class:`~agent.engines.request.Decoding` becomes the request body in
:mod:`agent.engines.remote.body`: what a server cannot carry (the copy prior, the repeat guard,
anything of llama.cpp's on a server without its extensions) is dropped with one logged notice
naming it.

A round's stop signal (barge-in) closes the HTTP stream; llama-server stops generating for the slot.
A managed server that has died is restarted before the next request, and a request that fails
before any output is retried once after a restart; a failure mid-stream raises
:class:`~agent.engines.base.LLMError`, which the turn loop answers with its spoken apology, leaving the
history intact.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.control import StopSignal
from agent.engines.base import Completions, Generation, LLMError
from agent.engines.embedded.model import ChatModel
from agent.engines.media import check_images
from agent.engines.remote.body import build_request
from agent.engines.remote.chat_api import ChatDeltas, RemoteVocab
from agent.engines.remote.http import EventStream, ServerError, ServerUnreachable, request_json
from agent.engines.request import MEDIA_MARKER, Decoding
from agent.engines.thinking import ThinkingStats, ThinkWatch, markers_for

if TYPE_CHECKING:
    from agent.config import LLMConfig
    from agent.engines.remote.server_process import LlamaServerProcess

log = logging.getLogger(__name__)


class ServerChatModel(Completions):
    """A chat model whose generation runs on a llama.cpp or OpenAI-compatible server.

    Args:
        vocab: The GGUF loaded vocabulary-only (template, tokenizer, BOS/EOS), or None for the
            ``chat`` api with no local file (then :class:`RemoteVocab` stands in).
        cfg: ``[llm]`` settings (sampling, context, thinking budget).
        base_url: ``http://host:port`` of the server, or a callable giving it (a managed server's
            port changes when it restarts).
        api: ``completions`` or ``chat``.
        server: The managed llama-server child, restarted when it dies; None for a remote server.
        headers: Extra request headers (``Authorization``).
        model_name: The request's ``model`` field ("" = left out).
        extensions: Send llama.cpp's extra request fields.
        timeout_s: Longest silence from the server, s.
        tool_choice: ``chat`` api: ``auto`` or ``required`` when tools are offered.
        vision: The server takes images: True (a managed server started with ``--mmproj``),
            False, or None = ask the server (``GET /props`` ``modalities.vision``) when first
            needed.
    """

    def __init__(
        self,
        vocab: ChatModel | None,
        cfg: LLMConfig,
        base_url: str | Callable[[], str],
        api: str = "completions",
        server: LlamaServerProcess | None = None,
        headers: dict[str, str] | None = None,
        model_name: str = "",
        extensions: bool = True,
        timeout_s: float = 60.0,
        tool_choice: str = "auto",
        vision: bool | None = None,
    ) -> None:
        self.cfg = cfg
        self._base = base_url
        self.api = api
        self.server = server
        self.headers = dict(headers or {})
        self.model_name = model_name
        self.extensions = extensions
        self.timeout_s = timeout_s
        self.tool_choice = tool_choice
        self.vocab = vocab if vocab is not None else RemoteVocab(self.base_url, cfg, self.headers)
        self.path: Path = getattr(self.vocab, "path", Path("remote"))
        self.model_bytes: int = int(getattr(self.vocab, "model_bytes", 0))
        self.server_tools: bool = api == "chat"
        self.n_ctx: int = self.vocab.n_ctx
        self.architecture: str = self.vocab.architecture
        self.template: str = self.vocab.template
        self.has_template: bool = self.vocab.has_template
        self._lock = threading.Lock()
        self._noticed: set[tuple[str, ...]] = set()
        self._vision = vision

    @property
    def vision(self) -> bool:
        """The server takes images (given, or asked from ``GET /props`` once; False while unreachable)."""
        if self._vision is None:
            props = self._props()
            if props is None:
                return False
            modalities = props.get("modalities")
            self._vision = bool(isinstance(modalities, dict) and modalities.get("vision"))
        return self._vision

    def _props(self) -> dict[str, Any] | None:
        """llama-server's ``GET /props`` answer; ``{}`` when the server has none, None when unreachable."""
        try:
            status, answer = request_json(self.base_url, "GET", "/props", headers=self.headers, timeout_s=5.0)
        except ServerUnreachable:
            return None
        return answer if status == 200 and isinstance(answer, dict) else {}

    def _media_marker(self) -> str:
        """The server's media marker now (llama-server draws one per process; ``GET /props``)."""
        props = self._props() or {}
        return str(props.get("media_marker") or MEDIA_MARKER)

    @property
    def base_url(self) -> str:
        """The server's base URL now."""
        return self._base() if callable(self._base) else self._base

    # --- prompt (local, as embedded) -----------------------------------------------------------------
    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **template_vars: Any
    ) -> str:
        """Render with the GGUF's template (the ``chat`` api sends the messages; this counts them).

        Raises:
            LLMError: the template rejected the messages.
        """
        return self.vocab.render(messages, tools=tools, **template_vars)

    def tokenize(self, text: str) -> list[int]:
        """Tokens of a rendered prompt (the local tokenizer; BOS once)."""
        return self.vocab.tokenize(text)

    def detokenize(self, tokens: list[int]) -> str:
        """Text of output tokens ("" without a local GGUF)."""
        return self.vocab.plain_text(tokens) if isinstance(self.vocab, ChatModel) else ""

    def count_tokens(self, text: str) -> int:
        """Number of tokens ``text`` takes in this model's vocabulary."""
        return self.vocab.count_tokens(text)

    # --- generation ------------------------------------------------------------------------------------
    def stream(self, request: Decoding, gen: Generation, stop: StopSignal | None = None) -> Iterator[str]:
        """Generate one round's text pieces on the server.

        The request becomes an HTTP body (:func:`~agent.engines.remote.body.build_request`);
        ``prefix``, ``forced`` and ``draft`` need nothing sent: the server's grammar writes
        forced text itself and it drafts with its own drafter.

        Args:
            request: The round.
            gen: Filled in with token counts and timings (llama-server's own where it sends them).
            stop: Polled while streaming: set, the HTTP stream is closed.

        Yields:
            Text pieces, in order.

        Raises:
            LLMError: the prompt does not fit ``n_ctx``, the server refused the request, or the
                server died or went silent for ``request_timeout_s`` during the stream; images
                on a server without :attr:`vision`, or image markers that do not match them.
        """
        if request.images:
            check_images(request, self.vision, self._name())
        native = self.api != "chat" and self.extensions and self.vision
        tokens = self.tokenize(request.prompt)
        if len(tokens) + 1 > self.n_ctx:
            raise LLMError(f"prompt of {len(tokens)} tokens does not fit n_ctx={self.n_ctx}")
        stats = None
        if request.thinking is not None:
            stats = gen.extra["thinking"] = ThinkingStats()
        sent = build_request(
            request,
            tokens,
            cfg=self.cfg,
            n_ctx=self.n_ctx,
            api=self.api,
            vocab=self.vocab if isinstance(self.vocab, ChatModel) else None,
            markers=markers_for(self.template),
            stats=stats,
            extensions=self.extensions,
            model_name=self.model_name,
            tool_choice=self.tool_choice,
            native=native,
            **(self._media_fields() if request.images and native else {}),
        )
        if sent.dropped:
            self._notice(sent.dropped)
        n_text = len(self.tokenize(request.prompt.replace(MEDIA_MARKER, ""))) if request.images else None
        with self._lock:
            yield from self._run(sent.path, sent.body, gen, stop, sent.chat, sent.watch, n_text)

    def _name(self) -> str:
        return "llama-server" if self.server is not None else f"the model server at {self.base_url}"

    def _media_fields(self) -> dict[str, str]:
        """``build_request``'s media marker and the BOS text the server adds to a prompt string."""
        if self.server is not None:
            self.server.ensure_running()  # a restarted server draws a new marker
        bos = ""
        if isinstance(self.vocab, ChatModel) and self.vocab.prompt_bos() is not None:
            bos = self.vocab.bos_text
        return {"media_marker": self._media_marker(), "bos_text": bos}

    def _notice(self, dropped: list[str]) -> None:
        """One warning per distinct set of dropped features."""
        key = tuple(dropped)
        if key not in self._noticed:
            self._noticed.add(key)
            engine = "llama-server" if self.server is not None else f"the {self.api} api of {self.base_url}"
            log.warning("%s cannot carry %s; generating without it", engine, ", ".join(dropped))

    def _open(self, path: str, body: dict[str, Any], stop: StopSignal | None) -> EventStream:
        """Open the stream; a managed server is (re)started first, and a failed connect retried once."""
        for attempt in (0, 1):
            if self.server is not None:
                self.server.ensure_running()
            try:
                return EventStream(self.base_url, path, body, self.headers, self.timeout_s, stop)
            except ServerUnreachable as e:
                if attempt:
                    raise LLMError(f"the model server cannot be reached: {e}{self._log_hint()}") from None
                log.warning("model server unreachable (%s); retrying once", e)
                if self.server is None:
                    time.sleep(0.5)
            except ServerError as e:
                raise LLMError(f"the model server refused the request: {e}") from None
        raise AssertionError("unreachable")

    def _log_hint(self) -> str:
        return f" (llama-server log: {self.server.log_path})" if self.server is not None else ""

    def _run(
        self,
        path: str,
        body: dict[str, Any],
        gen: Generation,
        stop: StopSignal | None,
        chat: bool,
        watch: ThinkWatch | None,
        n_text: int | None = None,
    ) -> Iterator[str]:
        read = _Reading(time.perf_counter(), ChatDeltas(markers_for(self.template), watch), chat, watch)
        try:
            for attempt in (0, 1):
                stream = self._open(path, body, stop)
                try:
                    yield from self._read(stream, read, gen, stop)
                    for piece in read.deltas.flush():
                        gen.text += piece
                        yield piece
                    if self.server is not None:
                        self.server.mark_healthy()
                    return
                except ServerUnreachable as e:
                    if stream.cancelled or (stop is not None and stop.is_set()):
                        gen.cancelled = True
                        return
                    if attempt == 0 and e.before_output and not read.pieces:
                        log.warning("model server failed before answering (%s); retrying once", e)
                        continue  # a managed server is restarted by _open
                    raise LLMError(
                        f"the model server failed during the reply: {e}{self._log_hint()}"
                    ) from None
                except ServerError as e:
                    raise LLMError(f"the model server reported an error: {e}") from None
                finally:
                    stream.close()
        finally:
            gen.total_ms += (time.perf_counter() - read.t0) * 1000.0
            total = _account(gen, read.timings, read.usage, read.pieces, read.t_first, read.t_last)
            if n_text is not None and total:
                gen.extra["image_tokens"] = max(0, total - n_text)

    def _read(
        self, stream: EventStream, read: _Reading, gen: Generation, stop: StopSignal | None
    ) -> Iterator[str]:
        """The text pieces of one stream's events, in order; the round's statistics kept in ``read``.

        Raises:
            ServerUnreachable: the stream broke.
            ServerError: the server reported an error.
        """
        for event in stream:
            read.timings = event.get("timings") or read.timings
            read.usage = event.get("usage") or read.usage
            choices = event.get("choices")
            if choices is None and "content" in event:  # llama-server's /completion
                choice = _native_choice(event)
            elif not choices:
                continue
            else:
                choice = choices[0]
            if choice.get("finish_reason"):
                gen.finish_reason = choice["finish_reason"]
            for piece in read.deltas.feed(choice) if read.chat else [choice.get("text") or ""]:
                if piece:
                    read.took(piece, gen)
                    yield piece
            if read.watch is not None and read.watch.over_ms():
                self._end_reasoning(event.get("id"), read.watch)
            if stop is not None and stop.is_set():
                gen.cancelled = True
                return

    def _end_reasoning(self, cmpl_id: str | None, watch: ThinkWatch) -> None:
        """Ask the server to end the thinking block now (``reasoning_end``); tried on up to 3 chunks."""
        watch.attempts += 1
        if not cmpl_id or not self.extensions or watch.attempts > 3:
            watch.ended = True
            return
        try:
            status, answer = request_json(
                self.base_url,
                "POST",
                "/v1/chat/completions/control",
                {
                    "id": cmpl_id,
                    "action": "reasoning_end",
                    **({"model": self.model_name} if self.model_name else {}),
                },
                self.headers,
                timeout_s=self.timeout_s,
            )
        except ServerUnreachable as e:
            log.warning("could not end the thinking on time: %s", e)
            return
        if status == 200 and isinstance(answer, dict) and answer.get("success"):
            watch.ended = True
            watch.stats.forced = True
        else:
            watch.ended = True  # the server cannot do it (no reasoning control): do not ask again
            self._notice("control", f"the server did not end the thinking on request: {answer}")

    def close(self) -> None:
        """Stop the managed server, if any (the remote one is left alone)."""
        if self.server is not None:
            self.server.stop()


@dataclass
class _Reading:
    """One round's stream as it is read: its start, its pieces, the server's statistics.

    Attributes:
        t0: When the request was made (``perf_counter``).
        deltas: Chat stream chunks to raw text.
        chat: The ``chat`` api (deltas), not ``completions`` (text).
        watch: Follows the thinking block, or None.
        t_first: When the first piece came, 0 before.
        t_last: When the newest piece came.
        pieces: Pieces so far.
        timings: llama-server's newest ``timings``.
        usage: OpenAI's ``usage``.
    """

    t0: float
    deltas: ChatDeltas
    chat: bool
    watch: ThinkWatch | None
    t_first: float = 0.0
    t_last: float = 0.0
    pieces: int = 0
    timings: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)

    def took(self, piece: str, gen: Generation) -> None:
        """Count one piece of text into the round (its time, ``gen.text``, the thinking watch)."""
        now = time.perf_counter()
        if not gen.ttft_ms:
            gen.ttft_ms = (now - self.t0) * 1000.0
            self.t_first = now
        self.t_last = now
        self.pieces += 1
        gen.text += piece
        if self.watch is not None and not self.chat:
            self.watch.feed(piece)


_NATIVE_FINISH = {"eos": "stop", "word": "stop", "limit": "length"}


def _native_choice(event: dict[str, Any]) -> dict[str, Any]:
    """A ``/completion`` stream event as an OpenAI ``choices[0]``: its text and finish reason."""
    finish = _NATIVE_FINISH.get(str(event.get("stop_type")), "") if event.get("stop") else ""
    return {"text": event.get("content") or "", "finish_reason": finish or None}


def _account(
    gen: Generation,
    timings: dict[str, Any],
    usage: dict[str, Any],
    pieces: int,
    t_first: float,
    t_last: float,
) -> int:
    """Fill token counts and speeds from llama-server's ``timings`` (or OpenAI ``usage``, or our clock).

    Returns:
        The server's whole prompt, tokens (cached ones included; 0 when it did not say).
    """
    total = int(usage.get("prompt_tokens") or 0)
    if timings:
        total = int(timings.get("cache_n") or 0) + int(timings.get("prompt_n") or 0)
        gen.prompt_tokens += int(timings.get("prompt_n") or 0)
        gen.completion_tokens += int(timings.get("predicted_n") or pieces)
        gen.tokens_per_s = float(timings.get("predicted_per_second") or 0.0)
        gen.draft_tokens += int(timings.get("draft_n") or 0)
        gen.draft_accepted += int(timings.get("draft_n_accepted") or 0)
    else:
        gen.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        gen.completion_tokens += int(usage.get("completion_tokens") or pieces)
    if not gen.tokens_per_s and gen.completion_tokens > 1 and t_last > t_first:
        gen.tokens_per_s = (gen.completion_tokens - 1) / (t_last - t_first)
    return total


def load_vocab(path: Path | None, cfg: LLMConfig) -> ChatModel | None:
    """The GGUF's tokenizer and template, loaded vocabulary-only (None without a file).

    Raises:
        LLMError: the file is not a loadable GGUF.
    """
    return ChatModel(path, cfg, vocab_only=True) if path is not None else None
