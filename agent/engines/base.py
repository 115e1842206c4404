"""What every chat engine shares: the protocol, the error, a round's statistics, ``complete``, ``warmup``."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent.control import StopSignal
from agent.engines.request import Decoding

FALLBACK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""ChatML, for GGUFs that carry no template (e.g. base models)."""


class LLMError(Exception):
    """The model file could not be loaded or its template rendered; the message says why."""


class ContextFull(LLMError):
    """The prompt leaves no room in the model's context (``n_ctx``) to write a reply."""


@dataclass
class Generation:
    """Statistics of one generation, filled in while streaming.

    Attributes:
        prompt_tokens: Prompt tokens evaluated (not reused from the KV cache).
        completion_tokens: Tokens generated.
        ttft_ms: Time from the call to the first generated piece, ms.
        total_ms: Whole generation, ms.
        text: Everything generated.
        cancelled: Stopped early by the stop signal.
        finish_reason: ``stop`` (end of turn or a stop string), ``length`` (token cap), or "".
        tokens_per_s: Decoding speed, tokens/s: generated tokens after the first over the time
            since the first (the server engines report llama-server's own ``predicted_per_second``).
        draft_tokens: Tokens proposed by a draft model (speculative decoding; server engines).
        draft_accepted: Of those, tokens the model accepted.
        extra: Per-round details (``thinking``: :class:`agent.engines.thinking.ThinkingStats`,
            ``dropped_turns``).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    text: str = ""
    cancelled: bool = False
    finish_reason: str = ""
    tokens_per_s: float = 0.0
    draft_tokens: int = 0
    draft_accepted: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def draft_acceptance(self) -> float | None:
        """Accepted share of drafted tokens, 0..1; None without a drafter."""
        return self.draft_accepted / self.draft_tokens if self.draft_tokens else None


class ChatEngine(Protocol):
    """What the conversation needs from a chat model, whatever runs it (``[llm] engine``).

    Implemented by :class:`~agent.engines.embedded.model.ChatModel` (in process) and
    :class:`~agent.engines.remote.model.ServerChatModel` (llama-server, OpenAI-compatible). A
    round is one :class:`~agent.engines.request.Decoding`; the engine compiles it.

    Attributes:
        template: The chat template text (Jinja).
        has_template: The GGUF carries its own template.
        architecture: ``general.architecture`` ("" when unknown).
        n_ctx: Context length, tokens.
        model_bytes: Size of the model's GGUF, bytes (0: no local file); ``[llm] profile =
            "auto"`` reads it (:func:`agent.conversation.policy.choose_profile`).
        server_tools: The engine sends the messages and tools to a server that renders them and
            parses the calls itself (an OpenAI-compatible ``chat`` api); the reply's calls come
            back as structured ``tool_calls``.
        vision: Rounds may carry images (:attr:`~agent.engines.request.Decoding.images`): a
            vision projector is loaded (embedded), passed to the server (``llama-server``), or
            the remote server says it takes images (``openai``). A round with images on an
            engine without it raises :class:`LLMError`.
    """

    template: str
    has_template: bool
    architecture: str
    n_ctx: int
    model_bytes: int
    server_tools: bool
    vision: bool

    def render(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **kw: Any
    ) -> str:
        """Render messages with the chat template, ending in the generation prompt.

        Raises:
            LLMError: the template rejected the messages.
        """
        ...

    def tokenize(self, text: str) -> list[int]:
        """Token ids of a rendered prompt."""
        ...

    def detokenize(self, tokens: list[int]) -> str:
        """Text of output tokens ("" where the engine has no local vocabulary)."""
        ...

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text``."""
        ...

    def stream(self, request: Decoding, gen: Generation, stop: StopSignal | None = None) -> Iterator[str]:
        """Generate one round's text pieces, filling ``gen``; ends early once ``stop`` is set.

        Raises:
            LLMError: the prompt does not fit, or the engine failed during the round.
        """
        ...

    def complete(self, request: Decoding, stop: StopSignal | None = None) -> Generation:
        """Run :meth:`stream` to the end; ``.text`` of the result holds the output."""
        ...

    def prefill(self, request: Decoding, stop: Callable[[], bool] | None = None) -> int:
        """Evaluate a likely next prompt and its ``prefix`` now; returns tokens evaluated (0: skipped).

        ``stop`` is asked between chunks where the engine evaluates in chunks: True ends the
        prefill early, keeping what was evaluated.
        """
        ...

    def warmup(self, request: Decoding) -> float:
        """Evaluate a round's prompt once (two tokens generated); returns ms."""
        ...

    def close(self) -> None:
        """Free the model (stop a managed server)."""
        ...


class Completions:
    """``complete``, ``prefill`` and ``warmup`` in terms of ``stream`` (every engine's base)."""

    vision: bool = False
    server_tools: bool = False
    model_bytes: int = 0

    def stream(self, request: Decoding, gen: Generation, stop: StopSignal | None = None) -> Iterator[str]:
        """Generate one round's text pieces, filling ``gen`` (each engine implements it)."""
        raise NotImplementedError

    def complete(self, request: Decoding, stop: StopSignal | None = None) -> Generation:
        """Run :meth:`stream` to the end and return its :class:`Generation` (``.text`` holds the output).

        Raises:
            LLMError: as :meth:`stream`.
        """
        gen = Generation()
        for _ in self.stream(request, gen, stop):
            pass
        return gen

    def prefill(self, request: Decoding, stop: Callable[[], bool] | None = None) -> int:
        """Evaluate ``request``'s prompt and ``prefix`` into the KV cache ahead of a turn, if it can.

        The default does nothing and returns 0 (tokens evaluated): engines without a local
        KV cache gain nothing from it.
        """
        return 0

    def warmup(self, request: Decoding) -> float:
        """Evaluate a representative round once (fills the KV cache, pays first-batch costs); returns ms.

        Args:
            request: A round as a turn would send it (its prompt, and its messages and tools for
                an engine that renders on the server); two tokens are generated.

        Raises:
            LLMError: as :meth:`stream`.
        """
        t0 = time.perf_counter()
        self.complete(dataclasses.replace(request, max_tokens=2))
        return (time.perf_counter() - t0) * 1000.0
