"""One conversation: history, prompting and the turn loop, split by concern.

* :mod:`~agent.conversation.prompt` — tool-call format, system prompt, rendering a round.
* :mod:`~agent.conversation.rounds` — one model round: grammar-constrained JSON or native markup.
* :mod:`~agent.conversation.turn` — the turn loop (rounds, tool calls, guards) and :class:`Conversation`.
* :mod:`~agent.conversation.background` — asynchronous tool calls and their results.
* :mod:`~agent.conversation.history` — assistant messages, cutting a reply to what was heard.
"""

from agent.conversation.prompt import resolve_format
from agent.conversation.turn import REPEAT_STOP, REPEAT_WARN, SORRY, Conversation, Tidied, TurnResult

__all__ = ["REPEAT_STOP", "REPEAT_WARN", "SORRY", "Conversation", "Tidied", "TurnResult", "resolve_format"]
