"""The ``/v1/chat/completions`` side of the server engines: messages out, raw-text pieces back.

The conversation renders every round with the GGUF's template; for the ``chat`` api the
round's :class:`~agent.engines.request.Decoding` also carries the messages it was rendered from,
which go out in OpenAI's shape (:func:`openai_messages`; a round's images as ``image_url`` parts
with ``data:`` URIs where its messages carry :data:`~agent.engines.request.MEDIA_MARKER`, the form
llama-server, vLLM and OpenAI take). What streams back is turned into the
raw text the conversation's tool-call parsers read (:class:`ChatDeltas`): ``tool_calls`` deltas become
``<tool_call>{json}</tool_call>`` (a syntax every parser accepts), ``reasoning_content`` a
thinking block in the template's markers, ``content`` passes as is (so markup a server leaves
there is parsed and never spoken). :class:`RemoteVocab` stands in for the GGUF when there is no
local copy of the model.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.engines.base import FALLBACK_TEMPLATE, LLMError
from agent.engines.media import image_mime
from agent.engines.remote.http import ServerUnreachable, request_json
from agent.engines.request import MEDIA_MARKER, Decoding, Thinking
from agent.engines.thinking import ThinkWatch

if TYPE_CHECKING:
    from agent.config import LLMConfig
    from agent.engines.thinking import ThinkingMarkers

log = logging.getLogger(__name__)


def chat_body(req: Decoding, extensions: bool, tool_choice: str, thinking: Thinking | None) -> dict[str, Any]:
    """The ``/v1/chat/completions`` fields of a round: its messages, tools and template variables.

    Messages go out in OpenAI's shape (:func:`openai_messages`, with the round's images);
    template variables
    (``enable_thinking``, ``conversational_mode``) as ``chat_template_kwargs`` (llama-server,
    vLLM); a thinking budget as ``thinking_budget_tokens`` (llama-server).

    Args:
        req: The round (``messages``, ``tools``, ``template_vars``).
        extensions: The server takes llama.cpp's extra fields.
        tool_choice: ``auto`` or ``required`` when tools are offered.
        thinking: The thinking budget to send, or None.

    Raises:
        LLMError: the request carries no messages (it was not rendered from any), or its
            messages hold another number of image markers than it has images.
    """
    if not req.messages:
        raise LLMError("the chat api needs the messages a prompt was rendered from")
    body: dict[str, Any] = {"messages": openai_messages([dict(m) for m in req.messages], req.images)}
    if req.tools:
        body["tools"] = [dict(t) for t in req.tools]
        body["tool_choice"] = tool_choice
    if extensions:
        body["stream_options"] = {"include_usage": True}
        if req.template_vars:
            body["chat_template_kwargs"] = dict(req.template_vars)
        if thinking is not None:
            body["thinking_budget_tokens"] = thinking.max_tokens
    return body


def openai_messages(messages: list[dict[str, Any]], images: tuple[bytes, ...] = ()) -> list[dict[str, Any]]:
    """Messages in OpenAI's wire shape: one ``tool`` message per call id, after the call's message.

    The history is kept in OpenAI's shape already (:mod:`agent.conversation.history`); on the
    wire a call's arguments are JSON text and each call has an id (the history's own; one is
    made for a call without), and each ``tool`` message names its call's id (OpenAI and vLLM
    reject a history that breaks this). Keys a server does not know (grammar mode's ``raw``) are
    left out. A non-assistant message whose content holds
    :data:`~agent.engines.request.MEDIA_MARKER` becomes a list of ``text`` and ``image_url``
    parts (:func:`content_parts`), taking ``images`` in order.

    Raises:
        LLMError: the messages hold another number of image markers than there are ``images``.
    """
    out: list[dict[str, Any]] = []
    queue = iter(images)
    used = 0
    made = 0  # ids made for calls without one
    for m in messages:
        role = m.get("role", "user")
        if role != "assistant":
            content = m.get("content") or ""
            if images and isinstance(content, str) and MEDIA_MARKER in content:
                used += content.count(MEDIA_MARKER)
                content = content_parts(content, queue) if used <= len(images) else content
            msg = {"role": role, "content": content}
            if role == "tool":
                msg["tool_call_id"] = m.get("tool_call_id") or f"call_{made}"
            out.append(msg)
            continue
        msg = {"role": "assistant", "content": m.get("content") or ""}
        wire_calls = []
        for c in m.get("tool_calls") or []:
            fn = c.get("function", c)
            args = fn.get("arguments", {})
            if not c.get("id"):
                made += 1
            wire_calls.append(
                {
                    "id": c.get("id") or f"call_{made}",
                    "type": "function",
                    "function": {
                        "name": fn.get("name", ""),
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        if wire_calls:
            msg["tool_calls"] = wire_calls
        out.append(msg)
    if used != len(images):
        raise LLMError(f"the messages hold {used} image markers {MEDIA_MARKER!r} for {len(images)} images")
    return out


def content_parts(text: str, images: Iterator[bytes]) -> list[dict[str, Any]]:
    """A message's text as OpenAI content parts, each :data:`MEDIA_MARKER` an ``image_url`` part.

    Args:
        text: The content, with markers.
        images: Encoded images, one taken per marker.

    Returns:
        ``text`` and ``image_url`` parts (``data:image/...;base64,...``), in order; llama-server
        joins adjacent text and image parts without a separator (``common/chat.cpp``), so the
        server's prompt has the same text around each image.
    """
    pieces = text.split(MEDIA_MARKER)
    parts: list[dict[str, Any]] = []
    for i, piece in enumerate(pieces):
        if piece:
            parts.append({"type": "text", "text": piece})
        if i < len(pieces) - 1:
            data = next(images)
            url = f"data:{image_mime(data)};base64,{base64.b64encode(data).decode('ascii')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


class _ToolCallCollector:
    """Collects streamed ``tool_calls`` deltas; a finished call becomes ``<tool_call>{json}</tool_call>``.

    The first delta of a call carries its ``id`` and name, later ones append to its arguments
    (OpenAI's stream, ``docs/facts.md``); the id rides along in the JSON (``"id"``), which the
    tool-call parsers keep (:class:`~agent.toolparse.ParsedToolCall`).
    """

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, str]] = {}

    def feed(self, deltas: list[dict[str, Any]]) -> list[str]:
        out = []
        for d in deltas:
            i = int(d.get("index", len(self.calls)))
            if i not in self.calls and self.calls:
                out += self.flush()  # the previous call is complete
            call = self.calls.setdefault(i, {"id": "", "name": "", "arguments": ""})
            call["id"] = call["id"] or str(d.get("id") or "")
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
            body = {"name": call["name"], "arguments": args, **({"id": call["id"]} if call["id"] else {})}
            out.append(f"<tool_call>{json.dumps(body)}</tool_call>")
        self.calls.clear()
        return out


class ChatDeltas:
    """Turns ``/v1/chat/completions`` stream chunks into raw-text pieces the tool-call parsers read.

    Reasoning (``reasoning_content``) is wrapped in the template's thinking markers, tool-call
    deltas become ``<tool_call>{json}</tool_call>`` once complete, content passes as is.
    """

    def __init__(self, markers: ThinkingMarkers, watch: ThinkWatch | None) -> None:
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
        """Raw-text pieces of one stream chunk's ``choices[0]``."""
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
        """What is still held at the end of the stream (an open thinking block's end, unfinished calls)."""
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
        self.template = tpl or FALLBACK_TEMPLATE
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
