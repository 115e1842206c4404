"""The small-model profile: what makes the 135M stand-in behave, kept off the plain path.

``[llm] profile = "small"`` (or ``auto`` with a small model in grammar mode) runs the plain turn
loop with :class:`SmallPolicy`'s rules (:mod:`.policy`). The rules and their data live here:

* :mod:`.toolprior` — which tools the user's words point at (keywords, negations, questions);
* :mod:`.argprior` — arguments from the words (sides, angles, counts, durations);
* :mod:`.readback` — a data round starts and ends with the data;
* :mod:`.claims` — sentences that claim a movement no call made;
* :mod:`.acks` — what the robot says with a movement.

Retiring the stand-in is deleting this package (and the tests marked ``small_model``).
"""

from agent.conversation.small.policy import ASK_LENGTH, SmallPolicy, SmallRules

__all__ = ["ASK_LENGTH", "SmallPolicy", "SmallRules"]
