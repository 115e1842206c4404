"""Built-in skill: tell the time."""

from agent.skills import SkillContext, skill


@skill(keywords=("time", "clock", "hour", "date", "day"), side_effects=False, ability="tell the time")
def get_time(ctx: SkillContext) -> str:
    """Get the current local time and date."""
    now = ctx.now()
    # What a person answers: no year, no leading zero on the day. Every word here is read back
    # (the reply copies it) and synthesized before the user hears the time.
    return now.strftime("It is %H:%M on %A ") + f"{now.day} " + now.strftime("%B.")
