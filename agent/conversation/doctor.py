"""``bolt-agent doctor``'s model-profile check: which profile and tool-call format a config runs.

The format and the profile are decided as a conversation decides them
(:func:`~agent.conversation.prompt.resolve_format`, :func:`~agent.conversation.policy.choose_profile`)
from the GGUF's template, architecture and size, read with a vocabulary-only load (no weights,
well under a second). An OpenAI-compatible server with no local model file is not asked: it is
``plain``, in the format its template names at start.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.config import LLMConfig
from agent.conversation.policy import choose_profile
from agent.conversation.prompt import resolve_format
from agent.engines import LLMError
from agent.models import ModelNotFoundError, resolve_model
from hardware.check import Check


@dataclass(frozen=True)
class _Local:
    """What :func:`resolve_format` and :func:`choose_profile` read of a local model file."""

    template: str
    has_template: bool
    architecture: str
    model_bytes: int
    server_tools: bool


def check_profile(llm: LLMConfig) -> Check:
    """The model profile (``plain`` or ``small``) and tool-call format ``[llm]`` gives.

    Args:
        llm: The ``[llm]`` section.

    Returns:
        An informational check (a failure only when the model file cannot be read; the models
        check says how to get it).
    """
    if not llm.model:
        fmt = llm.tool_format if llm.tool_format != "auto" else "the server template's, else hermes"
        profile = llm.profile if llm.profile != "auto" else "plain"
        return Check("profile", True, f"{profile} (an OpenAI-compatible server renders; tool calls: {fmt})")
    try:
        path = resolve_model(llm.model, "LLM")
        from agent.engines.embedded.model import ChatModel

        vocab = ChatModel(path, llm.model_copy(update={"n_ctx": 512}), vocab_only=True)
    except (ModelNotFoundError, LLMError) as e:
        return Check(
            "profile", False, f"cannot read the model file: {e}", "see the models check", blocking=False
        )
    server_tools = llm.engine == "openai" and llm.openai.api == "chat"
    local = _Local(vocab.template, vocab.has_template, vocab.architecture, vocab.model_bytes, server_tools)
    fmt = resolve_format(llm.tool_format, local)
    profile = choose_profile(llm.profile, fmt, local)
    why = (
        f" (auto: a {vocab.model_bytes / 2**20:.0f} MiB GGUF in {fmt} mode)" if llm.profile == "auto" else ""
    )
    return Check("profile", True, f"{profile}{why}; tool calls: {fmt}")
