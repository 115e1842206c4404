"""One conversation: history, prompting and the turn loop, split by concern.

* :mod:`~agent.conversation.turn` — :class:`Conversation` and the plain turn loop.
* :mod:`~agent.conversation.calls` — running a round's calls (ids, repeat guard, tool messages).
* :mod:`~agent.conversation.policy` — model profiles: the plain loop's rules and where a profile
  may change them; :mod:`~agent.conversation.small` — the small-model profile.
* :mod:`~agent.conversation.rounds` — one model round: grammar-constrained JSON or native markup.
* :mod:`~agent.conversation.window` — the history as the model sees it: rendering, KV cache, compaction.
* :mod:`~agent.conversation.prompt` — tool-call format, system prompt, rendering a round.
* :mod:`~agent.conversation.background` — asynchronous tool calls and their results.
* :mod:`~agent.conversation.history`, :mod:`~agent.conversation.messages` — the history's messages,
  and how each template takes them.
"""

from agent.conversation.calls import REPEAT_STOP, REPEAT_WARN
from agent.conversation.prompt import resolve_format
from agent.conversation.records import Tidied, TurnResult
from agent.conversation.turn import SORRY, Conversation

__all__ = ["REPEAT_STOP", "REPEAT_WARN", "SORRY", "Conversation", "Tidied", "TurnResult", "resolve_format"]
