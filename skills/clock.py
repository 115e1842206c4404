"""Built-in skill: tell the time."""

from agent.skills import SkillContext, skill


@skill
def get_time(ctx: SkillContext) -> str:
    """Get the current local time and date."""
    now = ctx.now()
    return now.strftime("%H:%M on %A %d %B %Y")
