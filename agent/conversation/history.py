"""History surgery: assistant messages with their tool calls, and cutting a reply to what was heard.

History is a list of OpenAI-style dicts (``role``, ``content``, ``tool_calls``, ``name``,
``tool_call_id``). Grammar-mode replies keep their raw JSON under ``raw`` so the next
prompt renders exactly what the model wrote (KV-cache reuse); :func:`without_say` is how
the prompt shows them to a small model (its calls, not its words).
"""

from __future__ import annotations

import re
from typing import Any

from agent.speech.words import normalize, words

# The say string to its closing quote, or to the end of a reply cut off by the token cap.
_SAY_FIELD = re.compile(r'\s*,\s*"say"\s*:\s*"(?:[^"\\]|\\.)*(?:"|$)')


def assistant_message(say: str, calls: list[dict[str, Any]], raw: str = "") -> dict[str, Any]:
    """The assistant message of one round: its speech, its tool calls, and the raw text in grammar mode.

    Args:
        say: What the round said.
        calls: ``{"name", "arguments"}`` dicts, each with the ``id`` its ``tool`` message names.
        raw: The generated text (grammar mode: rendered as is, so the KV cache reuses it).
    """
    msg: dict[str, Any] = {"role": "assistant", "content": say}
    if raw:
        msg["raw"] = raw
    if calls:
        msg["tool_calls"] = [
            {
                **({"id": c["id"]} if c.get("id") else {}),
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ]
    return msg


def last_reply(history: list[dict[str, Any]]) -> str:
    """The newest assistant message's text ("" when there is none)."""
    return next((m["content"] for m in reversed(history) if m["role"] == "assistant"), "") or ""


def truncate_turn(history: list[dict[str, Any]], heard: list[str]) -> str:
    """Keep only the ``heard`` pieces in the newest turn's replies (barge-in: the rest was never played).

    A turn's speech may span several assistant messages (a tool round, then a reply round; a
    read-back said after the rounds). Cutting only the newest one kept a joke the user never
    heard whole and emptied the timer result after it (seen in CI). Each message of the turn
    (after its last user message) keeps the pieces, in order, that it holds; a message that
    loses words also loses its generated text (``raw``, which the grammar path renders in its
    place); its tool calls stay (they ran).

    Args:
        history: The conversation (changed in place).
        heard: The sentence pieces that were played, in order.

    Returns:
        What the turn's replies keep, joined ("" when nothing was heard).
    """
    start = max((i for i, m in enumerate(history) if m["role"] == "user"), default=-1) + 1
    pieces = [p for p in heard if normalize(p)]
    kept_all: list[str] = []
    for msg in history[start:]:
        if msg["role"] != "assistant":
            continue
        content = str(msg.get("content") or "")
        mine = []
        while pieces and normalize(pieces[0]) in normalize(content):
            mine.append(pieces.pop(0))
        kept = " ".join(mine)
        if normalize(kept) != normalize(content):
            msg["content"] = kept
            msg.pop("raw", None)
        kept_all += mine
    return " ".join(kept_all)


def join_unique(parts: list[str]) -> str:
    """The rounds' speech joined by spaces, a round that repeats an earlier one word for word left out."""
    seen, out = set(), []
    for p in parts:
        key = p.strip().lower()
        if key and key not in seen:
            seen.add(key)
            out.append(p.strip())
    return " ".join(out)


def without_say(reply_json: str) -> str:
    """A grammar-mode reply with its ``say`` field removed (``{"call": ...}`` only).

    A small model copies the newest ``"say"`` it can see into its next reply word for word
    (measured: ``docs/small-model.md``, "Repeats"). The tokens
    before ``say`` stay byte-identical, so the KV cache still reuses everything up to the
    newest reply's words. Hidden says need the grammar to forbid an empty ``say`` (the model
    otherwise learns from the history to say nothing).

    Args:
        reply_json: The reply as generated (or re-serialized), e.g.
            ``{"call": {"tool": "none"}, "say": "Hi!"}``.

    Returns:
        The same text without ``, "say": "..."``; unchanged when it has no say field.
    """
    return _SAY_FIELD.sub("", reply_json, count=1)


def same_words(a: str, b: str) -> bool:
    """``a`` and ``b`` say the same words (case and punctuation ignored); False when either is empty."""
    wa = words(a)
    return bool(wa) and wa == words(b)


def said_in(say: str, text: str) -> bool:
    """Whether the words of ``say`` occur together, in order, in the words of ``text``.

    Case and punctuation are ignored; False when either has no words. A reply contained in
    this turn's tool results is a true statement, not a copy of an earlier reply.
    """
    a, b = " ".join(words(say)), " ".join(words(text))
    return bool(a and b) and a in b


def repeats_previous_reply(
    history: list[dict[str, Any]], say: str, results: str = "", min_words: int = 3
) -> bool:
    """Whether ``say`` repeats, word for word, the reply the robot gave before the current user turn.

    The check for a repeat guard in the turn loop: a reply that copies the previous one is
    rejected (or generated again) instead of spoken. Allowed: a repeat that carries this
    turn's tool results (the same clock time asked twice in a minute gives the same answer),
    and acknowledgements shorter than ``min_words`` ("Sure!").

    Args:
        history: The conversation, ending with the current turn's messages.
        say: The reply about to be spoken (or just generated).
        results: This turn's tool results as text; a ``say`` contained in them is no copy.
        min_words: Replies with fewer words may repeat.
    """
    last_user = max((i for i, m in enumerate(history) if m["role"] == "user"), default=-1)
    previous = last_reply(history[:last_user]) if last_user >= 0 else ""
    if len(words(say)) < min_words or not same_words(say, previous):
        return False
    return not said_in(say, results)
