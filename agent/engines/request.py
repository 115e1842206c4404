"""One round's request to a chat engine: a frozen value, compiled by each engine.

The conversation says *what* a round needs as data (:class:`Decoding`); an engine decides *how*:

===========================  ===============================  =====================================
field                        embedded (llama-cpp-python)      llama-server / OpenAI-compatible
===========================  ===============================  =====================================
``prompt`` / ``messages``    tokenized prompt                 token ids to ``/v1/completions``, or
                                                              messages to ``/v1/chat/completions``
``grammar``                  lazy grammar check in sampling   ``grammar`` (llama.cpp extension)
``prefix``                   evaluated with the prompt        generated (the grammar forces it)
``forced``                   jump-forward decoding            the server writes it itself
``tool_bonuses``             tool-name logits processor       ``logit_bias`` on name pieces
``copy_from``/``avoid``      copy prior / repeat guard        dropped, with one notice
``draft``                    prompt-lookup drafting           the server's own drafter
``thinking``                 thinking-budget processor        reasoning budget (+ ``reasoning_end``)
``images``                   libmtmd: text chunks as tokens,  ``multimodal_data`` (``completions``),
                             image chunks encoded and         ``image_url`` data-URI parts (``chat``)
                             evaluated in place
===========================  ===============================  =====================================

Images are placed by :data:`MEDIA_MARKER`: one in ``prompt`` (and in the ``messages`` it was
rendered from) per entry of ``images``, in order (:mod:`agent.engines.media`).

:func:`agent.engines.embedded.compile.compile_request` and
:func:`agent.engines.remote_compile.request_body` are the two compilers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MEDIA_MARKER = "<__media__>"
"""Where an image goes in a prompt or a message's content: libmtmd's default marker
(``mtmd_default_marker()``, ``tools/mtmd/mtmd.cpp``); the embedded engine and llama-server's
``/completion`` replace it with the image's tokens (llama-server's own marker differs per process:
:mod:`agent.engines.remote.body` swaps it in)."""


@dataclass(frozen=True)
class Thinking:
    """The thinking budget of one round (native formats with reasoning on).

    Attributes:
        max_tokens: Thinking tokens before the runtime closes the block (0: none at all).
        max_ms: Thinking time before the runtime closes the block, ms.
        starts_inside: The prompt already opened the block (pre-filled marker or template).
    """

    max_tokens: int
    max_ms: float
    starts_inside: bool = False


@dataclass(frozen=True)
class Decoding:
    """Everything one model round asks of an engine.

    Attributes:
        prompt: The rendered prompt (the engine's :meth:`render`, plus any pre-filled marker).
        messages: What ``prompt`` was rendered from (system prompt first), for engines that
            render themselves (an OpenAI-compatible ``chat`` api).
        tools: Tool schemas declared in the prompt (OpenAI shape), or empty.
        template_vars: Template variables the prompt was rendered with (``enable_thinking``,
            ``conversational_mode``).
        grammar: GBNF the output must follow ("" = free text).
        prefix: Text the output is known to start with (what the grammar forces first).
        forced: Openings the output is known to take one of (each starts with ``prefix``): once
            what is written fits only one of them, the rest of it is forced (jump-forward).
        tool_bonuses: Tool name → logit bonus where a tool's name is written (the tool prior).
        tool_names: Every name the grammar allows at that position (``"none"`` included).
        copy_from: Texts the reply may read back, as they appear in the output (tool results).
        copy_bonus: Logit bonus for tokens that continue one of ``copy_from`` (0 = off).
        avoid: Earlier replies this one must not repeat word for word (the repeat guard).
        avoid_penalty: Logit penalty on the token that would go on repeating one (0 = off).
        avoid_examples: Example replies of the system prompt, held back like ``avoid`` but
            after a shorter shared stretch (:data:`~agent.engines.priors.EXAMPLE_MIN_MATCH`).
        thinking: The thinking budget, or None (no reasoning this round).
        temperature: Sampling temperature (None: the configured one; 0: greedy).
        top_p: Nucleus cut (None: the configured one).
        seed: Sampling seed (None: the configured one, varied per round).
        max_tokens: Cap on generated tokens (None: the configured one).
        stop: Strings that end generation (not part of the output).
        draft: Tokens may be drafted from ``copy_from`` (prompt-lookup decoding; greedy only).
        images: Encoded images (JPEG or PNG bytes), one per :data:`MEDIA_MARKER` in ``prompt``
            (and in the ``messages`` contents), in order; only engines with ``vision`` take them.
    """

    prompt: str
    messages: tuple[Mapping[str, Any], ...] = ()
    tools: tuple[Mapping[str, Any], ...] = ()
    template_vars: Mapping[str, Any] = field(default_factory=dict)
    grammar: str = ""
    prefix: str = ""
    forced: tuple[str, ...] = ()
    tool_bonuses: Mapping[str, float] = field(default_factory=dict)
    tool_names: tuple[str, ...] = ()
    copy_from: tuple[str, ...] = ()
    copy_bonus: float = 0.0
    avoid: tuple[str, ...] = ()
    avoid_penalty: float = 0.0
    avoid_examples: tuple[str, ...] = ()
    thinking: Thinking | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    draft: bool = False
    images: tuple[bytes, ...] = ()

    @property
    def biases(self) -> bool:
        """Whether any logit bias applies (tool prior, copy prior, repeat guard, thinking budget)."""
        return bool(
            (self.tool_bonuses and any(self.tool_bonuses.values()))
            or (self.copy_from and self.copy_bonus)
            or ((self.avoid or self.avoid_examples) and self.avoid_penalty)
            or self.thinking is not None
        )
