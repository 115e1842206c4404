"""History surgery: assistant messages with their tool calls, and cutting a reply to what was heard.

History is a list of OpenAI-style dicts (``role``, ``content``, ``tool_calls``, ``name``,
``tool_call_id``). Grammar-mode replies keep their raw JSON under ``raw`` so the next
prompt renders exactly what the model wrote (KV-cache reuse).
"""

from __future__ import annotations

from typing import Any


def assistant_message(say: str, calls: list[dict[str, Any]], raw: str = "") -> dict[str, Any]:
    """The assistant message of one round: its speech, its tool calls, and the raw text in grammar mode."""
    msg: dict[str, Any] = {"role": "assistant", "content": say}
    if raw:
        msg["raw"] = raw
    if calls:
        msg["tool_calls"] = [
            {"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls
        ]
    return msg


def last_reply(history: list[dict[str, Any]]) -> str:
    """The newest assistant message's text ("" when there is none)."""
    return next((m["content"] for m in reversed(history) if m["role"] == "assistant"), "") or ""


def truncate_last_reply(history: list[dict[str, Any]], heard: str) -> None:
    """Keep only ``heard`` of the newest assistant message (barge-in: the rest was never played)."""
    for msg in reversed(history):
        if msg["role"] == "assistant":
            msg["content"] = heard
            return


def join_unique(parts: list[str]) -> str:
    """The rounds' speech joined by spaces, a round that repeats an earlier one word for word left out."""
    seen, out = set(), []
    for p in parts:
        key = p.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(p.strip())
    return " ".join(out)
