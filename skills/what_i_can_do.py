"""Built-in skill: say what the robot can do, when a person asks "what can you do?".

The list is the skills this robot is offered (its body's, the config's, installed ones), each
by its ``ability`` (``@skill(ability="tell the time")``), so it never names what the body
cannot do.
"""

from agent.skills import SkillContext, skill


@skill(
    keywords=("abilities", "what can you do", "what else can you do", "what are you able to do"),
    side_effects=False,
    ability="",
    as_written=True,  # the list is the answer: a model round could only say it again
)
def abilities(ctx: SkillContext) -> str:
    """Say what you can do."""
    said = ctx.abilities
    if not said:
        return "I can talk with you."
    if len(said) == 1:
        return f"I can {said[0]}."
    return f"I can {', '.join(said[:-1])} and {said[-1]}."
