"""What survives a restart: a small SQLite store in the service's state directory.

* :mod:`~agent.state.store` — the file: :class:`StateStore` (timers, conversation tail,
  the latched e-stop; one transaction per write; corrupt or unwritable files handled) and
  :func:`not_a_state_file` (what ``state clear`` refuses to delete).
* :mod:`~agent.state.timers` — :class:`TimerBook` for ``set_timer`` and re-arming at start-up.
* :mod:`~agent.state.memory` — :class:`Memory`: the user's name and facts they asked to be remembered.
* :mod:`~agent.state.keep` — where the file lives, the conversation tail, :class:`AgentState`.

Nothing here imports the rest of the agent (the bottom layer); :mod:`agent.pipeline.state`
wires it into a running agent.
"""

from agent.state.memory import Memory
from agent.state.store import PendingTimer, StateSnapshot, StateStore, not_a_state_file
from agent.state.timers import TimerBook

__all__ = ["Memory", "PendingTimer", "StateSnapshot", "StateStore", "TimerBook", "not_a_state_file"]
