"""The state store wired into a running agent: what is restored at start-up, and from where.

:func:`open_state` opens the store named by ``[state]`` (or ``$STATE_DIRECTORY``) and, for the
agent being built:

* restores the conversation tail (the last ``history_turns`` user turns with the replies,
  tool calls and results the history kept) into the history, before the model warms up;
* hands the skills what the user asked to be remembered (``ctx.memory``,
  :class:`~agent.state.memory.Memory`) and the speaking volume (``ctx.volume``,
  :class:`~agent.state.volume.Volume`; the speaker reads it through the context);
* hands ``set_timer`` the :class:`~agent.state.timers.TimerBook` through ``ctx.timers`` and
  re-arms pending timers (:func:`agent.state.timers.rearm`), reporting through the same
  background-call path as a ``set_timer`` result, so the robot says it;
* latches the robot's e-stop again when it was latched at the last stop (motors off,
  commands refused until a person clears it), and records it from then on through
  :attr:`hardware.robot.Robot.on_estop` (the hardware layer knows nothing of the store).

The turn driver saves the tail after every turn and every barge-in cut
(:meth:`agent.pipeline.core.AgentCore.keep_history`). Faults are reported through ``emit``
as one ``error`` each and never stop the agent (:mod:`agent.state.store`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from agent.config import StateConfig
from agent.conversation import Conversation
from agent.events import Error, Event, Notice
from agent.skills import SkillContext, ToolOutcome
from agent.state.keep import AgentState, state_path
from agent.state.store import StateStore
from agent.state.timers import rearm

log = logging.getLogger(__name__)


def open_state(
    cfg: StateConfig,
    conversation: Conversation,
    ctx: SkillContext,
    emit: Callable[[Event], None],
    env: Mapping[str, str] | None = None,
) -> AgentState | None:
    """Open the state store and restore what it holds into a freshly built agent.

    Args:
        cfg: ``[state]``.
        conversation: The agent's conversation (history still empty, model not warmed yet).
        ctx: The skills' context (its robot, its shutdown event; ``ctx.timers`` is set here).
        emit: Receives one ``error`` per fault and a ``notice`` when the e-stop comes back latched.
        env: The environment for :func:`~agent.state.keep.state_path` (default ``os.environ``).

    Returns:
        The open state, or None when ``[state] enabled = false``. A file that cannot be used
        gives a state whose store is disabled (nothing is kept; the agent runs).
    """
    if not cfg.enabled:
        return None
    path = state_path(cfg.path, os.environ if env is None else env)
    store = StateStore.open(path, lambda message: emit(Error(-1, f"state: {message}")))
    state = AgentState(store, cfg.history_turns)
    restored = state.restored_history()
    conversation.history[:0] = restored
    ctx.timers = state.timers
    ctx.memory = state.memory  # the user's name and facts, from the last run on
    ctx.volume = state.volume  # the speaking volume set by voice, from the last run on

    def report_as(name: str, call_id: str) -> Callable[[str], None]:
        done = conversation.background.callback(name, call_id, always=True)
        return lambda text: done(ToolOutcome(True, text)) if done is not None else None

    announced, rearmed = rearm(state.timers, ctx.shutdown, report_as)
    robot = ctx.robot
    if store.estop_since() is not None:
        report = robot.estop()
        emit(
            Notice(-1, f"state: the e-stop was latched before the restart and stays latched: {report.says()}")
        )
    robot.on_estop = state.on_estop
    if store.enabled:
        log.info(
            "state: %s; restored %d turns, %d timers running, %d finished while down",
            path,
            sum(m.get("role") == "user" for m in restored),
            rearmed,
            announced,
        )
    return state
