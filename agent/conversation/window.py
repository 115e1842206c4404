"""The conversation as the model sees it: history, rendering, the KV cache ahead of a turn, compaction.

:class:`ContextWindow` holds the history (OpenAI-style messages, :mod:`agent.conversation.history`)
and everything about fitting it to the model that happens outside a turn's rounds: rendering a
prompt (:class:`~agent.conversation.prompt.Prompter`), warming the engine on the static prefix,
evaluating a likely next prompt into the KV cache early (:meth:`ContextWindow.prefill`,
:meth:`ContextWindow.tidy`), compacting old turns (:mod:`agent.conversation.context`) and the
history surgery of a barge-in or a dropped turn. :class:`~agent.conversation.turn.Conversation`
adds the turn loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agent.config import LLMConfig
from agent.conversation import history as hist
from agent.conversation.context import fit_history
from agent.conversation.prompt import Prompter
from agent.conversation.records import Tidied
from agent.conversation.rounds import REPLY_OPENING
from agent.engines import ChatEngine, Decoding
from agent.skills import SkillRegistry

log = logging.getLogger(__name__)

TURN_HEADROOM_TOKENS = 256
"""What a turn adds besides its replies, tokens: the user's words with the state line, a tool
call and its result (the soak's turns added 25-120 prompt tokens a round)."""


class ContextWindow:
    """The history and its prompts for one model.

    Args:
        model: The chat model.
        registry: Skills declared as tools.
        cfg: ``[llm]`` settings.
        fmt: The resolved tool-call format.
        hide_earlier_speech: Grammar mode shows earlier replies by their calls only.
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
        self.history: list[dict[str, Any]] = []
        self.prompter = Prompter(model, registry, cfg, fmt, hide_earlier_speech, read_from_words)

    def system_prompt(self) -> str:
        """The system prompt as sent (see :class:`~agent.conversation.prompt.Prompter`)."""
        return self.prompter.system_prompt()

    def thinks(self, allow_tools: bool) -> bool:
        """Whether a round reasons first (config ``reasoning``; never in grammar mode)."""
        return self.prompter.thinks(allow_tools)

    def render(self, allow_tools: bool = True, think: bool = False) -> str:
        """Render the system prompt and the history for the next model round."""
        return self.prompter.render(self.history, allow_tools, think)

    def look_prompt(self, question: str) -> str:
        """The prompt of a look at the camera that reuses this conversation's KV cache.

        The system prompt, tools and history are rendered as a turn renders them (so the KV cache
        already holds them), then ``question`` (image markers + the describe prompt) as a user
        message. The history is not changed.

        Raises:
            LLMError: the template rejected the messages (e.g. mid-turn, after a tool call).
        """
        msgs = [*self.history, {"role": "user", "content": question}]
        return self.prompter.render(msgs, bool(self.registry.skills), False)

    def warmup(self) -> float:
        """Evaluate the static prompt prefix once (fills the KV cache, pays first-batch cost); ms.

        The request carries the messages too, so an engine that renders on the server (an
        OpenAI-compatible ``chat`` api with no local model file) warms up the same way.

        Raises:
            LLMError: the engine failed.
        """
        allow_tools = bool(self.registry.skills)
        msgs = [*self.history, {"role": "user", "content": "Hello."}]
        prompt = self.prompter.prompt(msgs, allow_tools, False)
        return self.model.warmup(
            Decoding(
                prompt.text, messages=prompt.messages, tools=prompt.tools, template_vars=prompt.template_vars
            )
        )

    def prefill(self, text: str, state: str | None = None, stop: Callable[[], bool] | None = None) -> int:
        """Early model start: evaluate the first round's prompt for ``text`` before the turn starts.

        Renders the prompt exactly as a turn would for ``text`` (same ``state``) without
        changing the history, and hands it to the model's KV cache. If the turn then starts
        with the same words only the rest is evaluated; if the user went on, the history
        before this turn is still cached, so a discard is cheap.

        Args:
            text: The transcript so far.
            state: The app state line the turn would carry.
            stop: Asked between chunks of the evaluation (:meth:`ChatEngine.prefill`): True
                ends it early, keeping what was evaluated; None runs it to the end.

        Returns:
            Prompt tokens evaluated (0 when skipped: busy model or an engine without a cache).

        Raises:
            LLMError: the template rejected the messages.
        """
        content = f"{text}\n\n[{state}]" if state else text
        msgs = [*self.history, {"role": "user", "content": content}]
        allow_tools = bool(self.registry.skills)
        opening = REPLY_OPENING if self.format == "grammar" else ""
        prompt = self.prompter.render(msgs, allow_tools, self.thinks(allow_tools))
        return self.model.prefill(Decoding(prompt, prefix=opening), stop)

    def fit_context(self, allow_tools: bool = True, think: bool = False, headroom: int = 0) -> int:
        """Compact the history when the next prompt leaves no room to answer; returns turns dropped.

        Args:
            allow_tools: The round declares the tools.
            think: The round opens a thinking block (its budget is reserved too).
            headroom: Tokens more to leave free (:meth:`tidy`: what the next turn may add).
        """

        def tokens(candidate: list[dict[str, Any]]) -> int:
            return self.model.count_tokens(self.prompter.render(candidate, allow_tools, think))

        reserve = self.cfg.max_tokens + (self.cfg.thinking_budget_tokens if think else 0)
        self.history, dropped = fit_history(
            self.history, tokens, self.model.n_ctx, reserve, self.cfg.history_keep_tokens, headroom
        )
        return dropped

    def tidy(self, stop: Callable[[], bool] | None = None) -> Tidied:
        """Between turns: compact ahead of need and read the history into the KV cache.

        A turn that compacts the history must evaluate everything after the first dropped turn
        again (seconds on a small CPU), so the history is compacted here, while nobody waits,
        once the next turn could outgrow the budget: what a turn adds at most (two rounds'
        replies and a tool call, :data:`TURN_HEADROOM_TOKENS` more) is kept free. Then the
        prompt of a next turn, up to its user message, is evaluated into the KV cache (also the
        previous reply as the template renders it, which differs from the generated tokens), so
        the next turn evaluates only its own words.

        Args:
            stop: Asked between chunks of the evaluation (:meth:`ChatEngine.prefill`): True
                ends it early, keeping what was evaluated; None runs it to the end.

        Returns:
            Turns dropped, prompt tokens evaluated, and whether the evaluation ran to the end.

        Raises:
            LLMError: the template rejected the messages.
        """
        allow_tools = bool(self.registry.skills)
        think = self.thinks(allow_tools)
        reserve = self.cfg.max_tokens + (self.cfg.thinking_budget_tokens if think else 0)
        dropped = self.fit_context(allow_tools, think, headroom=reserve + TURN_HEADROOM_TOKENS)
        if dropped:
            log.info("context: compacted %d old turns between turns", dropped)
        stopped = False

        def stopping() -> bool:
            nonlocal stopped
            stopped = stopped or (stop is not None and stop())
            return stopped

        evaluated = self.prefill("", stop=stopping if stop else None)  # up to the next user's words
        return Tidied(dropped, evaluated, not stopped)

    def forget_since(self, length: int) -> None:
        """Drop every history message after the first ``length`` (a dropped turn leaves no trace)."""
        del self.history[length:]

    def forget(self, messages: list[dict[str, Any]]) -> None:
        """Drop ``messages`` (by identity) from the history, wherever they are now.

        A turn the user continued leaves no trace, while what came after it (a background
        result spoken between the two parts) stays; messages compaction already dropped are skipped.
        """
        gone = {id(m) for m in messages}
        self.history[:] = [m for m in self.history if id(m) not in gone]

    def truncate_turn(self, heard: list[str]) -> str:
        """Keep only the ``heard`` pieces of the newest turn's replies; returns what is kept.

        See :func:`agent.conversation.history.truncate_turn` (barge-in: the rest was never played).
        """
        return hist.truncate_turn(self.history, heard)
