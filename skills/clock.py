"""Built-in skill: tell the time."""

from agent.skills import SkillContext, skill


@skill(keywords=("time", "clock", "hour", "date", "day"))
def get_time(ctx: SkillContext) -> str:
    """Get the current local time and date."""
    now = ctx.now()
    return now.strftime("It is %H:%M on %A %d %B %Y.")
