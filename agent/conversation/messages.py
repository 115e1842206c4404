"""Message normalization so strict chat templates accept the conversation.

The history is kept in one neutral, OpenAI-style shape (``system``/``user``/``assistant``
with ``tool_calls``/``tool``). Templates differ in what they accept; this module rewrites
the history for the template at hand, reading the template text to decide:

* **Gemma 4 / Bolt** (template mentions ``tool_responses``): tool results are not a ``tool``
  message but a ``tool_responses`` list (``{"name", "response"}``) on the model message
  that made the calls, and the model's reply after them is that same message's content
  (source: the Gemma 4 chat template in the GGUF, see ``docs/facts.md``). The template
  renders a model message as its calls, then their responses, then its text, and a message
  with responses and no text stays open (the model goes on in the same turn). So the rounds of
  one turn become one model message (every call, every response, the rounds' words joined),
  and a turn that goes on after its newest responses (the prompt of its next round) shows no
  text there: words a round wrote before its call have no place in that shape.
* Templates with no ``tool`` role: results become a user message ``Result of NAME: ...``.
* Templates that reject a ``system`` role (they ``raise_exception`` on it): the system
  prompt merges into the first user turn.
* Consecutive messages of one role merge; ``None`` content becomes ``""``; a conversation
  that starts with an assistant message gets an empty user turn first, so roles alternate.
"""

from __future__ import annotations

import json
from typing import Any


def _template_rejects_system(template: str) -> bool:
    return "System role not supported" in template or (
        "raise_exception" in template
        and "'system'" in template
        and "system_message" not in template
        and "messages[0]['role'] == 'system'" not in template
        and 'messages[0].role == "system"' not in template
        and "messages[0]['role'] == \"system\"" not in template
    )


def _parse_result(content: str) -> Any:
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return content


def _close_gemma_turns(out: list[dict[str, Any]]) -> None:
    """Gemma 4: the newest model message with responses stays open; every earlier one is closed.

    The template leaves a model message with responses and no text open (no ``<turn|>``): the
    newest one must be so (the model goes on there); an earlier turn that ended with no words
    gets one blank (rendered as nothing, but the turn is closed).
    """
    for i, m in enumerate(out):
        if m["role"] == "assistant" and m.get("tool_responses"):
            if i == len(out) - 1:
                out[i] = {**m, "content": ""}
            elif not m["content"].strip():
                out[i] = {**m, "content": " "}


def normalize_for_template(messages: list[dict[str, Any]], template: str) -> list[dict[str, Any]]:
    """Rewrite neutral history into what ``template`` accepts.

    Args:
        messages: Neutral messages (``role``, ``content``, optional ``tool_calls``/``name``).
        template: The Jinja chat template text of the model.

    Returns:
        New message dicts (the input is not modified).
    """
    gemma_style = "tool_responses" in template
    has_tool_role = gemma_style or "'tool'" in template or '"tool"' in template
    out: list[dict[str, Any]] = []
    for m in messages:
        m = {**m, "content": m.get("content") or ""}
        role = m["role"]
        if role == "tool":
            if gemma_style:
                owner = next((x for x in reversed(out) if x["role"] == "assistant"), None)
                if owner is not None:
                    owner.setdefault("tool_responses", []).append(
                        {"name": m.get("name", ""), "response": _parse_result(m["content"])}
                    )
                    continue
            if not has_tool_role:
                m = {"role": "user", "content": f"Result of {m.get('name', 'tool')}: {m['content']}"}
        if gemma_style and role == "assistant" and out and out[-1].get("tool_responses"):
            # Gemma 4 continues the model turn after tool responses: one model message per turn.
            prev = out[-1]
            out[-1] = {
                **prev,
                "content": " ".join(t for t in (prev["content"], m["content"]) if t),
                "tool_calls": [*prev.get("tool_calls", []), *(m.get("tool_calls") or [])],
            }
            continue
        if (
            out
            and out[-1]["role"] == m["role"]
            and m["role"] in ("user", "system")
            and "tool_calls" not in out[-1]
        ):
            out[-1] = {**out[-1], "content": f"{out[-1]['content']}\n\n{m['content']}".strip()}
            continue
        out.append(m)
    if out and out[0]["role"] == "system" and _template_rejects_system(template):
        sys_text = out.pop(0)["content"]
        if out and out[0]["role"] == "user":
            out[0] = {**out[0], "content": f"{sys_text}\n\n{out[0]['content']}"}
        else:
            out.insert(0, {"role": "user", "content": sys_text})
    if gemma_style:
        _close_gemma_turns(out)
    first = 1 if out and out[0]["role"] == "system" else 0
    if len(out) > first and out[first]["role"] == "assistant":
        out.insert(first, {"role": "user", "content": ""})
    return out
