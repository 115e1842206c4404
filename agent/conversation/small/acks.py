"""What the robot says with a movement in the small-model profile: a short acknowledgement.

In grammar mode a movement's call carries no words of the model's (the reply is the call
alone); the small profile says one of :data:`ACKNOWLEDGEMENTS` the moment the tool's name is
written, while the model still writes the arguments (``docs/small-model.md``).
"""

from __future__ import annotations

ACKNOWLEDGEMENTS = ("Sure!", "Okay!", "All right!", "Of course!", "On it!", "Here I go!")
"""What the robot says with a call that needs no follow-up. Free text there wandered on
SmolLM2-135M (measured: "Sure! Here's a little joke about your tool." while waving, "You can't
do that!" while setting a timer); a short acknowledgement is always right. When the model
picked one from a grammar enum it cost ~10 more tokens before the first audio, and the choice
carried no meaning, so the turn loop picks it (:meth:`ToolNameSpotter.feed`)."""


class Acknowledgements:
    """Picks what the robot says with a movement: :data:`ACKNOWLEDGEMENTS` in turn, skipping what was said."""

    def __init__(self, choices: tuple[str, ...] = ACKNOWLEDGEMENTS) -> None:
        self.choices = choices
        self.given = 0

    def next(self, said: frozenset[str] = frozenset()) -> str:
        """The next acknowledgement not in ``said`` (any, when all were said)."""
        fresh = [a for a in self.choices if a not in said] or list(self.choices)
        self.given += 1
        return fresh[(self.given - 1) % len(fresh)]
