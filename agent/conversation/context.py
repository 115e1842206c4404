"""Keeping the conversation inside the model's context window (``n_ctx``, up to 64K tokens).

Token counts come from the model's own tokenizer on the fully rendered prompt, so the
accounting is exact for whatever the template adds. When the prompt outgrows its budget,
the oldest whole turns are dropped — a turn is a user message with everything that
followed it, so every tool call stays together with its result — until the prompt is
back under a target (well below the budget, so compaction is rare and the KV cache is
reused between compactions). The system prompt and tool definitions are never dropped;
what was dropped is summarized in one line at the start of the history.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agent.engines.base import LLMError

log = logging.getLogger(__name__)

SUMMARY_KEY = "summary"


def split_turns(history: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Group history into turns: each starts at a user message (a summary line is its own group)."""
    turns: list[list[dict[str, Any]]] = []
    for msg in history:
        if msg["role"] == "user" or not turns or turns[-1][0].get(SUMMARY_KEY):
            turns.append([msg])
        else:
            turns[-1].append(msg)
    return turns


def _summary(dropped: list[list[dict[str, Any]]], previous: str) -> str:
    asked = [
        " ".join(t[0]["content"].split("\n\n[")[0].split()[:5])[:32]
        for t in dropped
        if t[0]["role"] == "user" and not t[0].get(SUMMARY_KEY)
    ]
    tools = [c["function"]["name"] for t in dropped for m in t for c in m.get("tool_calls", [])]
    parts = [previous] if previous else []
    if asked:
        parts.append("the user said: " + "; ".join(f'"{a}"' for a in asked[-4:]))
    if tools:
        parts.append("you used: " + ", ".join(dict.fromkeys(tools)))
    return "; ".join(parts)[-240:]


def compact(
    history: list[dict[str, Any]], prompt_tokens: Callable[[list[dict[str, Any]]], int], target: int
) -> tuple[list[dict[str, Any]], int]:
    """Drop the oldest turns until the rendered prompt takes at most ``target`` tokens.

    Args:
        history: Messages after the system prompt (the last turn is the current one).
        prompt_tokens: Renders a candidate history and counts its prompt tokens.
        target: Token count to get under.

    Returns:
        ``(new history, number of turns dropped)``; the current turn is always kept, with a
        one-line summary of what was dropped in front of it.
    """
    turns = split_turns(history)
    previous = ""
    if turns and turns[0][0].get(SUMMARY_KEY):
        previous = turns.pop(0)[0]["content"].removeprefix("(Earlier in this conversation ").rstrip(".)")
    dropped: list[list[dict[str, Any]]] = []
    candidate = list(history)
    while len(turns) > 1 and prompt_tokens(candidate) > target:
        dropped.append(turns.pop(0))
        summary = _summary(dropped, previous)
        note = [{"role": "user", "content": f"(Earlier in this conversation {summary}.)", SUMMARY_KEY: True}]
        candidate = note + [m for t in turns for m in t]
    if dropped and len(turns) == 1 and prompt_tokens(candidate) > target:
        candidate = turns[0]  # in a tiny context even the summary line does not fit
    return (candidate, len(dropped)) if dropped else (history, 0)


def shrink_turn(messages: list[dict[str, Any]], max_chars: int = 80) -> list[dict[str, Any]]:
    """A tighter copy of the current turn for a full context.

    Long tool results are cut to ``max_chars`` and assistant messages lose their verbatim
    generated text.
    """
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if k != "raw"}
        if m["role"] == "tool" and len(m.get("content") or "") > max_chars:
            m["content"] = m["content"][:max_chars] + "..."
        out.append(m)
    return out


def fit_history(
    history: list[dict[str, Any]],
    prompt_tokens: Callable[[list[dict[str, Any]]], int],
    n_ctx: int,
    reserve: int,
    keep_tokens: int | None = None,
    headroom: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """Make the next prompt leave ``reserve`` (plus ``headroom``) tokens for the answer.

    The budget is ``n_ctx - reserve - 8``; once the prompt plus ``headroom`` is over it, old
    turns are compacted down to 60 % of the budget (so compaction is rare), or to the system
    prompt and tools plus ``keep_tokens`` of history where that is less: everything after the
    first dropped turn must be evaluated again, so what is kept bounds what a compaction costs
    (measured: ``docs/model.md``). If the current turn alone still
    fills the context (tiny ``n_ctx``, many tool rounds), it is tightened with :func:`shrink_turn`.

    Args:
        history: Messages after the system prompt.
        prompt_tokens: Renders a candidate history and counts its prompt tokens.
        n_ctx: The model's context size, tokens.
        reserve: Tokens kept free for the reply (and thinking), tokens.
        keep_tokens: Most tokens of history a compaction keeps (None: 60 % of the budget).
        headroom: Tokens the next turn may add (compacting between turns, ahead of need).

    Returns:
        ``(history to use, number of turns dropped)``.
    """
    budget = n_ctx - reserve - 8
    if prompt_tokens(history) + headroom <= budget:
        return history, 0
    target = int(budget * 0.6)
    if keep_tokens is not None:
        try:
            target = min(target, prompt_tokens([]) + keep_tokens)
        except LLMError:  # a template that needs a user message: the budget rule alone
            pass
    history, dropped = compact(history, prompt_tokens, target)
    if dropped:
        log.info("context: dropped %d old turns to fit n_ctx=%d", dropped, n_ctx)
    if prompt_tokens(history) > n_ctx - 32:
        history = shrink_turn(history)
    return history, dropped
