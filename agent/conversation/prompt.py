"""Prompting: which tool-call format a model speaks, the system prompt, and rendering a round.

The format follows from the GGUF (``[llm] tool_format = "auto"``): Bolt / Gemma 4 native
markup, Hermes, Llama 3, or ``grammar`` for models with no tool format (the embedded SmolLM2),
whose system prompt then lists the tools and the JSON reply shape. An engine that hands the
messages and tools to a server (:attr:`~agent.engines.base.ChatEngine.server_tools`) is native:
the server parses the calls. ``conversational_mode`` reaches templates that read it as a
variable; for the others it is one line of the system prompt. The system prompt is byte-stable
across turns so the KV cache of the prefix is reused.

A round's :class:`Prompt` carries the text the local template renders (every engine counts
tokens on it; the embedded engine and llama-server generate from it, in the template's own
tool-result form, :mod:`agent.conversation.messages`) and the messages in OpenAI's shape, which an
OpenAI-compatible server renders itself. In grammar mode the system prompt ends with one example
reply (:data:`CHAT_EXAMPLE`); the small-model profile also shows earlier replies by their calls
only (:func:`~agent.conversation.history.without_say`: a small model copies the newest thing it
said into every following reply).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.config import LLMConfig
from agent.conversation.history import without_say
from agent.conversation.toolgrammar import as_grammar_messages, tools_prompt
from agent.engines import ChatEngine
from agent.engines.thinking import markers_for, template_knows_thinking
from agent.skills import SkillRegistry

EXAMPLE_SAY = "Why did the robot go on holiday? It needed to recharge."
"""The example reply's words: never to be copied into a reply (the repeat guard holds them back
like an earlier reply; ``bench --accuracy`` fails a reply that carries one of its sentences)."""

CHAT_EXAMPLE = f'For example: user "Tell me a joke." → {{"call": {{"tool": "none"}}, "say": "{EXAMPLE_SAY}"}}'
"""The grammar-mode system prompt's example of a spoken reply: without one a small model's
jokes were no jokes (measured: ``docs/small-model.md``, "The example reply"). Movements speak
from their own list of acknowledgements (:data:`agent.conversation.toolgrammar.ACKNOWLEDGEMENTS`)."""


@dataclass(frozen=True)
class Prompt:
    """A rendered round prompt with what it was rendered from (an engine that renders itself uses that).

    Attributes:
        text: The prompt as the model reads it (template output, plus any pre-filled marker).
        messages: The messages it was rendered from, system prompt first, in OpenAI's shape
            (``tool_calls`` with ids, one ``tool`` message per call): what an OpenAI-compatible
            server gets (grammar mode: the replies as JSON, results as user text).
        tools: The tool schemas declared (native formats), or empty.
        template_vars: The template variables used.
    """

    text: str
    messages: tuple[dict[str, Any], ...] = ()
    tools: tuple[dict[str, Any], ...] = ()
    template_vars: dict[str, Any] = field(default_factory=dict)


def resolve_format(cfg_format: str, model: ChatEngine) -> str:
    """The tool-call format to use: the config's, or the one ``auto`` finds.

    ``auto``: the format the GGUF's template speaks (``bolt``, ``hermes``), else ``grammar``.
    An engine whose server parses the calls (:attr:`~agent.engines.base.ChatEngine.server_tools`)
    with no local model file is native whatever the server's template: the template's own
    format where it has one, else ``hermes`` (the structured calls come back in that markup).
    """
    if cfg_format != "auto":
        return cfg_format
    from agent.toolparse import detect_format

    fmt = detect_format(model.template if model.has_template else None, model.architecture)
    if getattr(model, "server_tools", False) and not getattr(model, "model_bytes", 0):
        return fmt if fmt in ("bolt", "hermes", "llama3") else "hermes"
    return fmt if fmt in ("bolt", "hermes") else "grammar"


class Prompter:
    """Builds the prompt of each model round.

    Args:
        model: The chat model (its template renders the messages).
        registry: Skills declared as tools.
        cfg: ``[llm]`` (system prompt, conversational mode, reasoning).
        fmt: The resolved tool-call format (:func:`resolve_format`).
        hide_earlier_speech: Grammar mode shows earlier replies by their calls only (the
            small-model profile).
        read_from_words: Grammar mode leaves each skill's ``from_words`` parameters out of the
            tools prompt (the small-model profile reads them from the user's words).
    """

    def __init__(
        self,
        model: ChatEngine,
        registry: SkillRegistry,
        cfg: LLMConfig,
        fmt: str,
        hide_earlier_speech: bool = False,
        read_from_words: bool = False,
    ) -> None:
        self.model, self.registry, self.cfg, self.format = model, registry, cfg, fmt
        self.hide_earlier_speech, self.read_from_words = hide_earlier_speech, read_from_words

    def system_prompt(self) -> str:
        """The system prompt as sent (grammar mode appends the tool list and reply format)."""
        text = self.cfg.system_prompt
        if self.cfg.conversational_mode and "conversational_mode" not in self.model.template:
            n = self.cfg.max_reply_sentences
            text += (
                f"\nConversational mode: answer in at most {n} short spoken sentence{'s' if n != 1 else ''}"
                if n
                else "\nConversational mode: answer in short spoken sentences"
            ) + ", with no lists, markdown or emoji."
        if self.format == "grammar" and self.registry.skills:
            text += (
                f"\n{tools_prompt(list(self.registry.skills.values()), self.read_from_words)}\n{CHAT_EXAMPLE}"
            )
        return text

    def thinks(self, allow_tools: bool) -> bool:
        """Whether this round reasons first (config ``reasoning``; never in grammar mode)."""
        if self.format == "grammar":
            return False
        return self.cfg.reasoning == "on" or (self.cfg.reasoning == "tools" and allow_tools)

    def render(self, history: list[dict[str, Any]], allow_tools: bool = True, think: bool = False) -> str:
        """The text of :meth:`prompt` (for counting tokens and the KV cache)."""
        return self.prompt(history, allow_tools, think).text

    def prompt(self, history: list[dict[str, Any]], allow_tools: bool = True, think: bool = False) -> Prompt:
        """Render the system prompt and ``history`` for the next model round.

        Args:
            history: OpenAI-style messages after the system prompt.
            allow_tools: Declare the tools (native formats).
            think: Open a thinking block: ``enable_thinking`` for templates that know it,
                otherwise the opening marker is pre-filled after the generation prompt.

        Raises:
            agent.engines.LLMError: the template rejected the messages.
        """
        messages = [{"role": "system", "content": self.system_prompt()}]
        if self.format == "grammar":
            hide = self.hide_earlier_speech
            messages += [
                {"role": "assistant", "content": without_say(m["content"])}
                if m["role"] == "assistant" and hide
                else m
                for m in as_grammar_messages(history)
            ]
            tvars = {"conversational_mode": self.cfg.conversational_mode}
            return Prompt(self.model.render(messages, **tvars), tuple(messages), (), tvars)
        from agent.conversation.messages import normalize_for_template

        msgs = normalize_for_template(messages + history, self.model.template)
        tools = self.registry.tool_schemas() if allow_tools else None
        tvars = {"enable_thinking": think, "conversational_mode": self.cfg.conversational_mode}
        text = self.model.render(msgs, tools=tools, **tvars)
        if think and not template_knows_thinking(self.model.template):
            text += markers_for(self.model.template).open
        # The messages as OpenAI's protocol has them (a server renders them itself).
        return Prompt(text, tuple(messages + history), tuple(tools or ()), tvars)
