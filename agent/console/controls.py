"""What the console's buttons do, through the same paths as everything else.

* **say** — :meth:`~agent.pipeline.Pipeline.submit_text`: a typed user turn, like ``chat``.
* **mute** — :meth:`~agent.pipeline.Pipeline.set_muted`: the listener hears silence.
* **animate** — :meth:`hardware.robot.Robot.play` of a named animation, or of a gesture of
  the body's libraries (a Reachy Mini's dances and emotions); refused while an e-stop is latched.
* **estop** — :meth:`hardware.robot.Robot.estop`: the robot's one safety layer latches and
  refuses every joint command (skills, animations, speech motion) until **clear**
  (:meth:`~hardware.robot.Robot.clear_estop`); the turn being spoken is cut as by a stop
  phrase.

Each control is announced on the bus as a ``notice`` (so ``--json`` and the page see who did
what). Calls may block briefly (stopping an animation joins its thread): the web server
runs them in a worker thread. Failures raise :class:`ControlError` with an HTTP status.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agent.events import Notice
from agent.pipeline.sources import clean_typed

if TYPE_CHECKING:
    from agent.pipeline import AgentCore, Bus, Pipeline

log = logging.getLogger(__name__)

MAX_TEXT = 500
"""Longest typed message, characters."""


class ControlError(Exception):
    """A control that cannot be carried out.

    Args:
        status: HTTP status for the answer (400 bad input, 404 unknown, 409 not now).
        message: What is wrong, for people.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Controls:
    """The console's controls over one running agent.

    Args:
        core: The agent's parts (robot).
        bus: Where notices are published.
        pipeline: The running pipeline (typed turns, mute).
    """

    def __init__(self, core: AgentCore, bus: Bus, pipeline: Pipeline) -> None:
        self.core, self.bus, self.pipeline = core, bus, pipeline

    def _notice(self, text: str) -> None:
        self.bus.publish(Notice(-1, f"console: {text}"))

    def say(self, text: object) -> dict[str, Any]:
        """A typed user turn.

        Raises:
            ControlError: not a non-empty string of at most :data:`MAX_TEXT` characters.
        """
        if not isinstance(text, str) or not text.strip():
            got = "an empty string" if isinstance(text, str) else type(text).__name__
            raise ControlError(400, f"say needs a non-empty 'text' string, got {got}")
        if len(text) > MAX_TEXT:
            raise ControlError(400, f"text has {len(text)} characters, more than the {MAX_TEXT} allowed")
        clean, problems = clean_typed(text, MAX_TEXT)
        if not clean:
            raise ControlError(400, "text has nothing printable (only control characters)")
        if problems:
            log.warning("console: typed text: %s", "; ".join(problems))
            self._notice(f"typed text: {'; '.join(problems)}")
        self.pipeline.submit_text(clean)
        return {"ok": True, "note": "; ".join(problems)} if problems else {"ok": True}

    def mute(self, muted: object) -> dict[str, Any]:
        """Mute (True) or unmute (False) the microphone.

        Raises:
            ControlError: ``muted`` is not a boolean, or the pipeline has no microphone.
        """
        if not isinstance(muted, bool):
            raise ControlError(400, f"mute needs 'muted': true or false, got {type(muted).__name__}")
        if not self.pipeline.set_muted(muted):
            raise ControlError(409, "this pipeline has no microphone to mute")
        self._notice("microphone muted" if muted else "microphone on")
        return {"ok": True, "muted": muted}

    def animate(self, name: object) -> dict[str, Any]:
        """Play a named animation, else the library gesture of that name (it blends from the current pose).

        Raises:
            ControlError: unknown name (404) or an e-stop is latched (409).
        """
        if not isinstance(name, str) or not name:
            raise ControlError(400, f"animate needs a 'name' string, got {type(name).__name__}")
        robot = self.core.robot
        gesture = next((lib[name] for lib in robot.libraries.values() if name in lib), None)
        try:
            robot.play(name if name in robot.animations or gesture is None else gesture)
        except KeyError as e:
            raise ControlError(404, str(e.args[0] if e.args else e)) from None
        except RuntimeError as e:
            raise ControlError(409, str(e)) from None
        self._notice(f"playing animation {name}")
        return {"ok": True, "playing": name}

    def estop(self) -> dict[str, Any]:
        """Latch the robot's emergency stop and cut the turn being spoken; say what the motors do."""
        report = self.core.robot.estop()
        self.pipeline.interrupt("stop")
        self._notice(f"EMERGENCY STOP latched until cleared here: {report.says()}")
        return {"ok": True, "estopped": True, "motors_on": report.motors_on}

    def clear(self) -> dict[str, Any]:
        """Release a latched emergency stop (a person's act: torque back on)."""
        was = self.core.robot.clear_estop()
        self._notice("emergency stop cleared; motors on" if was else "the emergency stop was not on")
        return {"ok": True, "estopped": False}
