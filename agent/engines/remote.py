"""The chat model over HTTP: the same interface as :class:`agent.llm.ChatModel`, generation on a server.

:class:`ServerChatModel` keeps the conversation's turn loop unchanged. Prompts are rendered and
counted locally with the GGUF's own template and tokenizer (a vocabulary-only load, well under a
second), so the byte-stable prompt prefix, the streaming parsers and grammar mode work as with
the embedded engine. Two ways to generate:

* ``completions`` (llama-server, and OpenAI-compatible servers that take a raw prompt): the
  rendered prompt goes to ``/v1/completions`` as token ids (the local tokenizer's, BOS included
  once), with ``stream``, ``max_tokens``, ``stop``, ``temperature``, ``top_p``, ``seed`` and,
  as llama.cpp extensions (``tools/server/README.md``), ``cache_prompt`` (KV-cache prefix
  reuse), ``grammar`` (GBNF text: the ``llama_cpp.LlamaGrammar`` the conversation passes carries
  it), ``repeat_penalty`` and the reasoning budget.
* ``chat``: the messages and tools go to ``/v1/chat/completions``; the server renders them with
  its own copy of the template and parses tool calls. Its ``tool_calls`` deltas come back into
  the stream as ``<tool_call>{json}</tool_call>`` text, which every tool-call parser accepts, and
  reasoning as a thinking block, so the same parsers split speech, thinking and calls; markup a
  server leaves in ``content`` is parsed the same way and never spoken.

Logits processors cannot cross HTTP. The thinking budget (:class:`agent.reasoning.ThinkingBudget`)
becomes llama-server's own reasoning budget (``reasoning_budget_tokens`` with the template's
thinking markers; its sampler forces the end marker), and the millisecond budget a
``reasoning_end`` control request (``POST /v1/chat/completions/control``, armed by
``reasoning_control``). The grammar-mode tool prior (:class:`agent.toolgrammar.ToolChoicePrior`)
becomes a ``logit_bias`` on the token pieces that open a favoured tool's name as a JSON string
(a quote followed by the name's first characters): the grammar allows such a piece almost only
where a string value starts, so the bias lands on the tool-name position as it does embedded.
Anything else is dropped with one logged notice.

Cancellation (barge-in) closes the HTTP stream; llama-server stops generating for the slot.
A managed server that has died is restarted before the next request, and a request that fails
before any output is retried once after a restart; a failure mid-stream raises
:class:`~agent.llm.LLMError`, which the turn loop answers with its spoken apology, leaving the
history intact.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.engines.http import EventStream, ServerError, ServerUnreachable, request_json
from agent.llm import ChatModel, Generation, LLMError
from agent.reasoning import ThinkingBudget, ThinkingStats, markers_for

if TYPE_CHECKING:
    from agent.config import LLMConfig
    from agent.engines.server_process import LlamaServerProcess

log = logging.getLogger(__name__)


class ChatPrompt(str):
    """A rendered prompt that also carries the messages it was rendered from (``chat`` api).

    The text is the local rendering (for token accounting); ``messages``, ``tools`` and
    ``template_vars`` are what ``/v1/chat/completions`` receives.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    template_vars: dict[str, Any]

    def __new__(  # noqa: D102 - documented on the class
        cls,
        text: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        template_vars: dict,
    ) -> ChatPrompt:
        obj = super().__new__(cls, text)
        obj.messages, obj.tools, obj.template_vars = messages, tools, template_vars
        return obj


class ServerChatModel:
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
    """

    def __init__(
        self,
        vocab: Any,
        cfg: LLMConfig,
        base_url: str | Callable[[], str],
        api: str = "completions",
        server: LlamaServerProcess | None = None,
        headers: dict[str, str] | None = None,
        model_name: str = "",
        extensions: bool = True,
        timeout_s: float = 60.0,
        tool_choice: str = "auto",
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
        self.n_ctx: int = self.vocab.n_ctx
        self.architecture: str = self.vocab.architecture
        self.template: str = self.vocab.template
        self.has_template: bool = self.vocab.has_template
        self.llm = getattr(self.vocab, "llm", None)
        self._lock = threading.Lock()
        self._noticed: set[str] = set()
        self._last_chat: ChatPrompt | None = None

    @property
    def base_url(self) -> str:
        """The server's base URL now."""
        return self._base() if callable(self._base) else self._base

    # --- prompt (local, as embedded) -----------------------------------------------------------------
    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **template_vars: Any
    ) -> str:
        """Render with the GGUF's template (a :class:`ChatPrompt` for the ``chat`` api).

        Raises:
            LLMError: the template rejected the messages.
        """
        text = self.vocab.render(messages, tools=tools, **template_vars)
        if self.api != "chat":
            return text
        self._last_chat = ChatPrompt(text, messages, tools, template_vars)
        return self._last_chat

    def tokenize(self, text: str) -> list[int]:
        """Tokens of a rendered prompt (the local tokenizer; BOS once)."""
        return self.vocab.tokenize(text)

    def count_tokens(self, text: str) -> int:
        """Number of tokens ``text`` takes in this model's vocabulary."""
        return self.vocab.count_tokens(text)

    # --- generation ------------------------------------------------------------------------------------
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
        logits_processor: Callable[[int], Any] | None = None,
    ) -> Iterator[str]:
        """Generate text pieces for a rendered prompt on the server (arguments as :meth:`ChatModel.stream`).

        Yields:
            Text pieces, in order.

        Raises:
            LLMError: the prompt does not fit ``n_ctx``, the server refused the request, or the
                server died or went silent for ``request_timeout_s`` during the stream.
        """
        n_prompt = self.count_prompt(prompt)
        if n_prompt + 1 > self.n_ctx:
            raise LLMError(f"prompt of {n_prompt} tokens does not fit n_ctx={self.n_ctx}")
        limit = min(max_tokens or self.cfg.max_tokens, self.n_ctx - n_prompt)
        body: dict[str, Any] = {
            "stream": True,
            "max_tokens": limit,
            "temperature": self.cfg.temperature if temperature is None else temperature,
            "top_p": self.cfg.top_p,
            "seed": self.cfg.seed,
        }
        if stop:
            body["stop"] = list(stop)
        if self.model_name:
            body["model"] = self.model_name
        if self.extensions:
            # timings in every chunk: a stream cut short (barge-in, sentence cap) still reports them
            body |= {
                "cache_prompt": True,
                "repeat_penalty": self.cfg.repeat_penalty,
                "timings_per_token": True,
            }
        budget = self._processor(logits_processor, n_prompt, body)
        chat = self.api == "chat"
        if chat:
            cp = self._chat_prompt(prompt)
            path = "/v1/chat/completions"
            for key in [k for k in body if k.startswith("reasoning_budget_") or k == "generation_prompt"]:
                body.pop(key)  # the server derives the markers from its template
            body |= chat_body(cp, self.extensions, self.tool_choice, budget)
            if grammar is not None and not cp.tools:
                self._grammar(grammar, body)
            starts_inside = False
        else:
            path = "/v1/completions"
            body["prompt"] = self.tokenize(prompt) if self.extensions else str(prompt)
            if grammar is not None:
                self._grammar(grammar, body)
            starts_inside = budget is not None and budget.inside
        watch = _ThinkWatch(budget, starts_inside) if budget is not None else None
        with self._lock:
            yield from self._run(path, body, gen, cancel, chat, watch)

    def count_prompt(self, prompt: str) -> int:
        """Tokens of a rendered prompt (BOS included)."""
        return len(self.tokenize(prompt)) if self.vocab is not None else self.count_tokens(prompt)

    def _chat_prompt(self, prompt: str) -> ChatPrompt:
        if isinstance(prompt, ChatPrompt):
            return prompt
        last = self._last_chat
        if last is not None and prompt.startswith(last):  # a pre-filled marker appended to the render
            return last
        raise LLMError("the chat api needs a prompt made by this model's render()")

    def _grammar(self, grammar: Any, body: dict[str, Any]) -> None:
        text = grammar if isinstance(grammar, str) else getattr(grammar, "_grammar", None)
        if not isinstance(text, str):
            raise LLMError(f"cannot send a grammar of type {type(grammar).__name__} to the server")
        if self.extensions:
            body["grammar"] = text
        else:
            self._notice("grammar", "this server takes no GBNF grammar (openai.llama_cpp_extensions = false)")

    def _processor(self, factory: Callable[[int], Any] | None, n_prompt: int, body: dict[str, Any]) -> Any:
        """Turn a logits-processor factory into request fields; returns a ThinkingBudget or None."""
        if factory is None:
            return None
        if self.llm is None or not self.extensions:
            self._notice(
                "processor",
                "logits processors (thinking budget, tool prior) need a local vocabulary "
                "and llama.cpp extensions; generating without them",
            )
            return None
        proc = factory(n_prompt)
        if isinstance(proc, ThinkingBudget):
            body |= {
                "reasoning_budget_tokens": proc.max_tokens,
                "reasoning_budget_start_tag": proc.markers.open,
                "reasoning_budget_end_tags": [proc.markers.close],
                "reasoning_budget_message": "",
            }
            if proc.inside:
                body["generation_prompt"] = proc.markers.open  # the sampler starts inside the block
            if proc.max_ms > 0:
                body["reasoning_control"] = True
            return proc
        bias = prior_logit_bias(proc)
        if bias is not None:
            if bias:
                body["logit_bias"] = [[tok, b] for tok, b in bias.items()]
            return None
        self._notice(
            type(proc).__name__, f"{type(proc).__name__} cannot run on a server; generating without it"
        )
        return None

    def _notice(self, key: str, message: str) -> None:
        if key not in self._noticed:
            self._noticed.add(key)
            log.warning("%s", message)

    def _open(self, path: str, body: dict[str, Any], cancel: threading.Event | None) -> EventStream:
        """Open the stream; a managed server is (re)started first, and a failed connect retried once."""
        for attempt in (0, 1):
            if self.server is not None:
                self.server.ensure_running()
            try:
                return EventStream(self.base_url, path, body, self.headers, self.timeout_s, cancel)
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
        cancel: threading.Event | None,
        chat: bool,
        watch: _ThinkWatch | None,
    ) -> Iterator[str]:
        t0 = time.perf_counter()
        t_first = t_last = 0.0
        pieces = 0
        timings: dict[str, Any] = {}
        usage: dict[str, Any] = {}
        deltas = _ChatDeltas(markers_for(self.template), watch)
        stream = self._open(path, body, cancel)
        try:
            for event in stream:
                timings = event.get("timings") or timings
                usage = event.get("usage") or usage
                choices = event.get("choices") or []
                if not choices:
                    continue
                choice = choices[0]
                if choice.get("finish_reason"):
                    gen.finish_reason = choice["finish_reason"]
                out = deltas.feed(choice) if chat else [choice.get("text") or ""]
                for piece in out:
                    if not piece:
                        continue
                    now = time.perf_counter()
                    if not gen.ttft_ms:
                        gen.ttft_ms = (now - t0) * 1000.0
                        t_first = now
                    t_last = now
                    pieces += 1
                    gen.text += piece
                    if watch is not None and not chat:
                        watch.feed(piece)
                    yield piece
                if watch is not None and watch.over_ms():
                    self._end_reasoning(event.get("id"), watch)
                if cancel is not None and cancel.is_set():
                    gen.cancelled = True
                    break
            for piece in deltas.flush():
                gen.text += piece
                yield piece
            if self.server is not None:
                self.server.mark_healthy()
        except ServerUnreachable as e:
            if stream.cancelled or (cancel is not None and cancel.is_set()):
                gen.cancelled = True
                return
            raise LLMError(f"the model server failed during the reply: {e}{self._log_hint()}") from None
        except ServerError as e:
            raise LLMError(f"the model server reported an error: {e}") from None
        finally:
            stream.close()
            gen.total_ms += (time.perf_counter() - t0) * 1000.0
            _account(gen, timings, usage, pieces, t_first, t_last)

    def _end_reasoning(self, cmpl_id: str | None, watch: _ThinkWatch) -> None:
        watch.ended = True
        if not cmpl_id or not self.extensions:
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
                timeout_s=2.0,
            )
        except ServerUnreachable as e:
            log.warning("could not end the thinking on time: %s", e)
            return
        if status == 200 and isinstance(answer, dict) and answer.get("success"):
            watch.stats.forced = True
        else:
            self._notice("control", f"the server did not end the thinking on request: {answer}")

    def complete(self, prompt: str, **kwargs: Any) -> Generation:
        """Run :meth:`stream` to the end and return its :class:`Generation`."""
        gen = Generation()
        for _ in self.stream(prompt, gen, **kwargs):
            pass
        return gen

    def warmup(self, prompt: str) -> float:
        """Evaluate a representative prompt once (fills the server's KV cache); returns ms."""
        t0 = time.perf_counter()
        self.complete(prompt, max_tokens=2)
        return (time.perf_counter() - t0) * 1000.0

    def close(self) -> None:
        """Stop the managed server, if any (the remote one is left alone)."""
        if self.server is not None:
            self.server.stop()


def _account(
    gen: Generation,
    timings: dict[str, Any],
    usage: dict[str, Any],
    pieces: int,
    t_first: float,
    t_last: float,
) -> None:
    """Fill token counts and speeds from llama-server's ``timings`` (or OpenAI ``usage``, or our clock)."""
    if timings:
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


def prior_logit_bias(proc: Any) -> dict[int, float] | None:
    """The ``logit_bias`` that stands in for a grammar-mode tool prior, or None for other processors.

    The prior is asked what it would add at the tool-name position, before and after the
    name's opening quote. A static bias applies at every position, so only pieces that the
    grammar lets appear almost only there are kept: pieces that open a JSON string (start with
    a quote), and name prefixes of 3 or more characters with no leading space (words in speech
    are spelled with a leading space). Measured on SmolLM2's vocabulary: "wave" and "wav" are
    kept, "w" and "wa" dropped.
    """
    from agent.toolgrammar import ToolChoicePrior

    if not isinstance(proc, ToolChoicePrior):
        return None
    scores: defaultdict[int, float] = defaultdict(float)
    for tail in ('{"call": {"tool": ', '{"call": {"tool": "'):
        probe = ToolChoicePrior(proc.tokenize, lambda ids, t=tail: t, 0, proc.bonuses, proc.names)
        probe([0], scores)
    keep: dict[int, float] = {}
    for tok, bonus in scores.items():
        piece = proc.detokenize([tok])
        if (
            bonus
            and piece
            and (piece.lstrip().startswith('"') or (not piece[0].isspace() and len(piece) >= 3))
        ):
            keep[tok] = round(bonus, 3)
    return keep


class _ThinkWatch:
    """Follows the thinking block in the streamed text: its tokens and time (stats, ms budget)."""

    def __init__(self, budget: ThinkingBudget, starts_inside: bool) -> None:
        self.markers = budget.markers
        self.max_tokens, self.max_ms = budget.max_tokens, budget.max_ms
        self.stats: ThinkingStats = budget.stats
        self.inside = starts_inside
        self.t0 = time.monotonic() if starts_inside else None
        self.done = False
        self.ended = False
        self._pieces: list[str] = []

    def feed(self, piece: str) -> None:
        """A piece of raw output (``completions`` api); about one token each."""
        if self.done:
            return
        self._pieces = [*self._pieces[-15:], piece]
        text = "".join(self._pieces)
        if not self.inside:
            opener = self.markers.open.strip()
            if opener in text:
                self.inside, self.t0 = True, time.monotonic()
                self._pieces = [text.split(opener, 1)[1]]
            return
        at = text.rfind(self.markers.close)
        if at < 0:
            self.stats.tokens += 1
            self._update()
            return
        # The marker may span several pieces (tokens), already counted as thinking: take them back.
        k, covered = 0, 0
        while covered < len(text) - at and k < len(self._pieces):
            k += 1
            covered += len(self._pieces[-k])
        self.stats.tokens = max(0, self.stats.tokens - (k - 1))
        self.close()

    def reasoning(self) -> None:
        """One piece of reasoning the server split out (``chat`` api)."""
        if self.t0 is None:
            self.inside, self.t0 = True, time.monotonic()
        self.stats.tokens += 1
        self._update()

    def close(self) -> None:
        """The block ended (the model's marker, or the server's forced one)."""
        if not self.done:
            self.done = True
            self._update()
            self.stats.forced |= self.stats.tokens >= self.max_tokens

    def _update(self) -> None:
        if self.t0 is not None:
            self.stats.ms = (time.monotonic() - self.t0) * 1000.0

    def over_ms(self) -> bool:
        """Thinking has run past the millisecond budget and has not been ended yet."""
        return (
            self.inside
            and not self.done
            and not self.ended
            and self.max_ms > 0
            and self.stats.ms >= self.max_ms
        )


# --- chat api --------------------------------------------------------------------------------------------
def chat_body(
    cp: ChatPrompt, extensions: bool, tool_choice: str, budget: ThinkingBudget | None
) -> dict[str, Any]:
    """The ``/v1/chat/completions`` fields for a rendered :class:`ChatPrompt`.

    Messages go out in OpenAI's shape (:func:`openai_messages`); template variables
    (``enable_thinking``, ``conversational_mode``) as ``chat_template_kwargs`` (llama-server,
    vLLM); a thinking budget as ``thinking_budget_tokens`` (llama-server).
    """
    body: dict[str, Any] = {"messages": openai_messages(cp.messages)}
    if cp.tools:
        body["tools"] = cp.tools
        body["tool_choice"] = tool_choice
    if extensions:
        body["stream_options"] = {"include_usage": True}
        if cp.template_vars:
            body["chat_template_kwargs"] = dict(cp.template_vars)
        if budget is not None:
            body["thinking_budget_tokens"] = budget.max_tokens
    return body


def openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages in OpenAI's wire shape, whatever template normalization they went through.

    Tool-call arguments become JSON strings with ids; Gemma 4's ``tool_responses`` on a model
    message (:mod:`agent.messages`) become ``tool`` messages after it, and that message's text
    an assistant message after them (llama-server turns them back into Gemma's form,
    ``common/chat.cpp``); grammar mode's ``raw`` key is dropped.
    """
    out: list[dict[str, Any]] = []
    n = 0
    for m in messages:
        role = m.get("role", "user")
        if role != "assistant":
            msg = {"role": role, "content": m.get("content") or ""}
            if role == "tool":
                msg["tool_call_id"] = m.get("tool_call_id") or f"call_{n}"
                if m.get("name"):
                    msg["name"] = m["name"]
            out.append(msg)
            continue
        calls = m.get("tool_calls") or []
        responses = m.get("tool_responses") or []
        ids = []
        wire_calls = []
        for c in calls:
            fn = c.get("function", c)
            args = fn.get("arguments", {})
            ids.append(c.get("id") or f"call_{n}")
            n += 1
            wire_calls.append(
                {
                    "id": ids[-1],
                    "type": "function",
                    "function": {
                        "name": fn.get("name", ""),
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        text = m.get("content") or ""
        if not responses:
            msg = {"role": "assistant", "content": text}
            if wire_calls:
                msg["tool_calls"] = wire_calls
            out.append(msg)
            continue
        out.append({"role": "assistant", "content": "", "tool_calls": wire_calls})
        for i, r in enumerate(responses):
            resp = r.get("response")
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": ids[i] if i < len(ids) else f"call_{n + i}",
                    "name": r.get("name", ""),
                    "content": json.dumps(resp),  # the history's tool content is JSON text
                }
            )
        if text:
            out.append({"role": "assistant", "content": text})
    return out


class _ToolCallCollector:
    """Collects streamed ``tool_calls`` deltas; a finished call becomes ``<tool_call>{json}</tool_call>``."""

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, str]] = {}

    def feed(self, deltas: list[dict[str, Any]]) -> list[str]:
        out = []
        for d in deltas:
            i = int(d.get("index", len(self.calls)))
            if i not in self.calls and self.calls:
                out += self.flush()  # the previous call is complete
            call = self.calls.setdefault(i, {"name": "", "arguments": ""})
            fn = d.get("function") or {}
            call["name"] += fn.get("name") or ""
            call["arguments"] += fn.get("arguments") or ""
        return out

    def flush(self) -> list[str]:
        out = []
        for call in self.calls.values():
            try:
                args = json.loads(call["arguments"] or "{}")
            except ValueError:
                args = call["arguments"]  # the parser reports it as a malformed call
            out.append(f"<tool_call>{json.dumps({'name': call['name'], 'arguments': args})}</tool_call>")
        self.calls.clear()
        return out


class _ChatDeltas:
    """Turns ``/v1/chat/completions`` stream chunks into raw-text pieces the tool-call parsers read.

    Reasoning (``reasoning_content``) is wrapped in the template's thinking markers, tool-call
    deltas become ``<tool_call>{json}</tool_call>`` once complete, content passes as is.
    """

    def __init__(self, markers: Any, watch: _ThinkWatch | None) -> None:
        self.markers, self.watch = markers, watch
        self.calls = _ToolCallCollector()
        self.thinking = False

    def _end_thinking(self) -> list[str]:
        if not self.thinking:
            return []
        self.thinking = False
        if self.watch is not None:
            self.watch.close()
        return [self.markers.close]

    def feed(self, choice: dict[str, Any]) -> list[str]:
        delta = choice.get("delta") or choice.get("message") or {}
        out: list[str] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            if not self.thinking:
                self.thinking = True
                out.append(self.markers.open)
            if self.watch is not None:
                self.watch.reasoning()
            out.append(reasoning)
        content = delta.get("content")
        if content:
            out += self._end_thinking()
            out.append(content)
        if delta.get("tool_calls"):
            out += self._end_thinking()
            out += self.calls.feed(delta["tool_calls"])
        return out

    def flush(self) -> list[str]:
        return self._end_thinking() + self.calls.flush()


class RemoteVocab:
    """Template and token counts from the server when there is no local GGUF (``chat`` api only).

    The template comes from llama-server's ``GET /props`` (``chat_template``, ``bos_token``,
    ``eos_token``; README) or, failing that, ChatML; tokens are counted by ``POST /tokenize``
    where the server has it, else estimated at 3 bytes a token (a generous guess for English
    with 32k-260k vocabularies). The render is used only for counting: the server renders the
    messages itself.

    Args:
        base_url: The server.
        cfg: ``[llm]`` (``n_ctx``).
        headers: Extra request headers.
    """

    def __init__(self, base_url: str, cfg: LLMConfig, headers: dict[str, str]) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        from agent.llm import _FALLBACK_TEMPLATE

        self.base_url, self.headers = base_url, headers
        self.n_ctx = int(cfg.n_ctx) if isinstance(cfg.n_ctx, int) else 4096
        props: dict[str, Any] = {}
        try:
            status, answer = request_json(base_url, "GET", "/props", headers=headers, timeout_s=5.0)
            if status == 200 and isinstance(answer, dict):
                props = answer
        except ServerUnreachable as e:
            log.warning("model server %s not reachable yet (%s); using a generic template", base_url, e)
        tpl = props.get("chat_template") or ""
        self.template = tpl or _FALLBACK_TEMPLATE
        self.has_template = bool(tpl)
        self.architecture = ""
        self.path = Path(str(props.get("model_path") or "remote"))
        self.llm = None
        self._tokenize_ok = bool(props)
        self._formatter = Jinja2ChatFormatter(
            self.template, eos_token=props.get("eos_token") or "", bos_token=props.get("bos_token") or ""
        )

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **kw: Any
    ) -> str:
        """Render locally (for counting only).

        Raises:
            LLMError: the template rejected the messages.
        """
        try:
            return self._formatter(messages=messages, tools=tools or None, **kw).prompt
        except Exception as e:  # jinja2 raises its own types
            raise LLMError(f"chat template from the server rejected the conversation: {e}") from None

    def tokenize(self, text: str) -> list[int]:
        """Token ids from the server's ``/tokenize``; an estimate of the count (zeros) otherwise."""
        if self._tokenize_ok:
            try:
                status, answer = request_json(
                    self.base_url, "POST", "/tokenize", {"content": text, "add_special": True,
                                                         "parse_special": True}, self.headers, 10.0
                )  # fmt: skip
                if status == 200 and isinstance(answer, dict) and isinstance(answer.get("tokens"), list):
                    return [t if isinstance(t, int) else t.get("id", 0) for t in answer["tokens"]]
            except ServerUnreachable:
                pass
            self._tokenize_ok = False
        return [0] * (len(text.encode("utf-8")) // 3 + 1)

    def count_tokens(self, text: str) -> int:
        """Number of tokens ``text`` takes (server count or estimate)."""
        return len(self.tokenize(text))


def load_vocab(path: Path | None, cfg: LLMConfig) -> ChatModel | None:
    """The GGUF's tokenizer and template, loaded vocabulary-only (None without a file).

    Raises:
        LLMError: the file is not a loadable GGUF.
    """
    return ChatModel(path, cfg, vocab_only=True) if path is not None else None
