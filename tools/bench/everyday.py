"""The typed set of everyday requests of ``bench --accuracy``: tools, arguments and replies checked.

What people ask a household robot every day (issue 50): timers named, asked about, changed and
cancelled; the time anywhere and dates relative to today; the robot's name and the user's, and
facts remembered and forgotten; the speaking volume; "do that again" and "what did you just
say?"; what a body without a camera says; and the plain commands. Each :class:`Request` is typed
as the last line of a fresh conversation (:func:`fresh`; the lines of :attr:`Request.before`
first, in the same conversation: a timer to ask about), and :func:`check` compares its turn's
messages with what is expected: the tools called, the arguments they were called with, the reply (a regular
expression, whole). The check is pure (the tests run it on the real pipeline's messages).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Any

from agent.events import Event, Reply, ToolCall, Transcript


@dataclass(frozen=True)
class Request:
    """One everyday request and what it must get.

    Attributes:
        said: What the user types.
        tools: The tools its turn must call, in order (``()``: none).
        args: Per tool, arguments and their expected values (text compared without case).
        reply: A regular expression the whole reply must match ("" for any reply).
        before: Lines typed first in the same conversation (not checked).
        unless: Devices whose presence makes the request not apply ("camera": a body with one
            answers "what do you see" by looking).
    """

    said: str
    tools: tuple[str, ...] = ()
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    reply: str = ""
    before: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()


TEA = "set a timer for ten minutes called tea"
PASTA = "set a pasta timer for 5 minutes"
CLOCK = r"\d\d:\d\d on \w+ \d+ \w+"
DAY = r"\w+ \d+ \w+"

EVERYDAY: tuple[Request, ...] = (
    # timers
    Request(
        TEA, ("set_timer",), {"set_timer": {"seconds": 600, "label": "tea timer"}}, r"10-minute tea timer\."
    ),
    Request(
        PASTA,
        ("set_timer",),
        {"set_timer": {"seconds": 300, "label": "pasta timer"}},
        r"5-minute pasta timer\.",
    ),
    Request(
        "how long is left on the tea timer?",
        ("timers_left",),
        {"timers_left": {"label": "tea timer"}},
        r"The tea timer has (9 minutes and \d+ seconds|10 minutes) left\.",
        (TEA,),
    ),
    Request("how long is left?", ("timers_left",), reply=r"No timer is running\."),
    Request("is my timer done?", ("timers_left",), reply=r"No timer is running\."),
    Request(
        "what timers are running?",
        ("timers_left",),
        reply=r"The tea timer has (9 minutes and \d+ seconds|10 minutes) left\.",
        before=(TEA,),
    ),
    Request(
        "make it five minutes",
        ("change_timer",),
        {"change_timer": {"seconds": 300}},
        r"The tea timer is now set for 5 minutes\.",
        (TEA,),
    ),
    Request(
        "add two minutes",
        ("add_to_timer",),
        {"add_to_timer": {"seconds": 120}},
        r"I added 2 minutes: the tea timer has (12 minutes|11 minutes and \d+ seconds) left\.",
        (TEA,),
    ),
    Request("cancel the pasta timer", ("cancel_timer",), reply=r"There is no pasta timer\.", before=(TEA,)),
    Request(
        "cancel the tea timer",
        ("cancel_timer",),
        {"cancel_timer": {"label": "tea timer"}},
        r"I cancelled the tea timer for 10 minutes\.",
        (TEA,),
    ),
    Request(
        "set a timer for 3 seconds and another one for 6 seconds",
        ("set_timer",),
        reply=r"[36]-second timer\.",
    ),
    Request("set a timer", ("set_timer",), reply=r"For how long\?"),
    Request(
        "cancel my timer",
        ("cancel_timer",),
        reply=r"I cancelled the tea timer for 10 minutes\.",
        before=(TEA,),
    ),
    Request(
        "which timers are running?",
        ("timers_left",),
        reply=r"2 timers are running: the pasta timer with (5 minutes|4 minutes and \d+ seconds) left "
        r"and the tea timer with (10 minutes|9 minutes and \d+ seconds) left\.",
        before=(TEA, PASTA),
    ),
    # the time anywhere, dates relative to today
    Request("what time is it?", ("get_time",), {"get_time": {"place": ""}}, rf"It is {CLOCK}\."),
    Request(
        "what time is it in Tokyo?",
        ("get_time",),
        {"get_time": {"place": "tokyo"}},
        rf"In Tokyo it is {CLOCK}\.",
    ),
    Request("what's the time in London right now", ("get_time",), reply=rf"In London it is {CLOCK}\."),
    Request("what time is it in New York?", ("get_time",), reply=rf"In New York it is {CLOCK}\."),
    Request("what time is it in Atlantis?", ("get_time",), reply=r"I don't know the time zone of Atlantis\."),
    Request(
        "what day is it tomorrow?", ("get_date",), {"get_date": {"day": "tomorrow"}}, rf"Tomorrow is {DAY}\."
    ),
    Request("what's the date today?", ("get_date",), reply=rf"Today is {DAY}\."),
    Request("what's the date next Friday?", ("get_date",), reply=r"Next Friday is \d+ \w+\."),
    Request("what is the date in three days?", ("get_date",), reply=rf"In three days it will be {DAY}\."),
    Request("what day was it yesterday?", ("get_date",), reply=rf"Yesterday was {DAY}\."),
    Request("what day of the week is it?", ("get_date",), reply=rf"Today is {DAY}\."),
    Request(
        "what's the date the day after tomorrow?",
        ("get_date",),
        reply=rf"The day after tomorrow it will be {DAY}\.",
    ),
    Request("what was the date two weeks ago?", ("get_date",), reply=rf"Two weeks ago it was {DAY}\."),
    Request(
        "what date is it on Monday?",
        ("get_date",),
        {"get_date": {"day": "monday"}},
        r"(Monday is \d+ \w+|Today is Monday \d+ \w+|Tomorrow is Monday \d+ \w+)\.",
    ),
    Request(
        "what time is it in Sydney?",
        ("get_time",),
        {"get_time": {"place": "sydney"}},
        rf"In Sydney it is {CLOCK}\.",
    ),
    Request("what time is it in UTC?", ("get_time",), reply=rf"In UTC it is {CLOCK}\."),
    # who is who
    Request("what's your name?", ("own_name",), reply=r"My name is [\w -]+\."),
    Request("who are you?", ("own_name",), reply=r"My name is [\w -]+\."),
    Request(
        "my name is Sam",
        ("remember",),
        {"remember": {"fact": "my name is Sam"}},
        r"Nice to meet you, Sam\. I will remember your name\.",
    ),
    Request("what is my name?", ("recall",), reply=r"Your name is Sam\.", before=("my name is Sam",)),
    Request("what is my name?", ("recall",), reply=r"I don't know your name yet\. You can tell me\."),
    Request("remember that I like jazz", ("remember",), reply=r"Okay, I will remember that you like jazz\."),
    Request(
        "forget my name", ("forget",), reply=r"I forgot that your name is Sam\.", before=("my name is Sam",)
    ),
    Request(
        "what do you know about me?",
        ("recall",),
        reply=r"You told me that you like jazz\.",
        before=("remember that I like jazz",),
    ),
    Request("introduce yourself", ("own_name",), reply=r"My name is [\w -]+\."),
    Request("call me Alex", ("remember",), reply=r"Nice to meet you, Alex\. I will remember your name\."),
    Request(
        "remember that my favourite colour is green",
        ("remember",),
        reply=r"Okay, I will remember that your favourite colour is green\.",
    ),
    Request(
        "forget that I like jazz",
        ("forget",),
        reply=r"I forgot that you like jazz\.",
        before=("remember that I like jazz",),
    ),
    Request(
        "forget everything",
        ("forget",),
        reply=r"I forgot 2 things you told me\.",
        before=("my name is Sam", "remember that I like jazz"),
    ),
    # the speaking volume (set to 100 percent before each request)
    Request(
        "set the volume to 60 percent", ("set_volume",), {"set_volume": {"level": 60}}, r"Volume 60 percent\."
    ),
    Request("louder please", ("change_volume",), reply=r"I am already as loud as I go: volume 100 percent\."),
    Request("a bit quieter", ("change_volume",), {"change_volume": {"step": -10}}, r"Volume 90 percent\."),
    Request(
        "mute yourself", ("set_volume",), {"set_volume": {"level": 0}}, r"Volume 0 percent: I am muted\."
    ),
    Request(
        "volume at 40 percent please", ("set_volume",), {"set_volume": {"level": 40}}, r"Volume 40 percent\."
    ),
    Request(
        "speak up, I can't hear you",
        ("change_volume",),
        reply=r"Volume 70 percent\.",
        before=("set the volume to 50 percent",),
    ),
    # the same again, and what was said
    Request("do that again", ("nod",), {"nod": {"times": 2}}, before=("nod twice",)),
    Request("one more time", ("wave",), {"wave": {"hand": "left"}}, before=("wave your left hand",)),
    Request(
        "again",
        ("change_volume",),
        {"change_volume": {"step": -10}},
        r"Volume 80 percent\.",
        before=("a bit quieter",),
    ),
    Request("what did you just say?", (), reply=r"My name is [\w -]+\.", before=("what's your name?",)),
    # what this body can do
    Request("what can you do?", ("abilities",), reply=r"I can (?!.*\bsee\b).*\.", unless=("camera",)),
    Request(
        "what do you see right now?", (), reply=r"I have no camera, so I cannot see\.", unless=("camera",)
    ),
    # the plain commands, typed
    Request("wave your right hand", ("wave",), {"wave": {"hand": "right"}}),
    Request("nod twice", ("nod",), {"nod": {"times": 2}}),
    Request("can you dance for me?", ("dance",)),
    Request("stop", ("stop",), reply=r"I stopped and I am holding still\."),
    Request("look to the left", ("look",)),
    Request("thank you", ()),
    Request("tell me a short joke", ()),
)
"""The typed everyday requests (issue 50: at least 60)."""


def fresh(core: Any) -> None:
    """Make ``core`` (an :class:`~agent.pipeline.core.AgentCore`) as each request finds it.

    A new conversation, no timer running, nothing remembered of the user, the volume at 100 percent.
    """
    core.conversation.history.clear()
    ctx = core.ctx
    if ctx.timers is not None:
        for t in ctx.timers.running():
            with contextlib.suppress(LookupError):  # gone with an earlier one of the same name
                ctx.timers.cancel(t.label, t.seconds)
    if ctx.memory is not None:
        ctx.memory.forget("everything")
    if ctx.volume is not None:
        ctx.volume.set(100)


def applies(request: Request, devices: frozenset[str]) -> bool:
    """Whether ``request`` is asked of a robot configured with ``devices``."""
    return not set(request.unless) & devices


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, str):
        return isinstance(got, str) and got.strip().lower() == want.lower()
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        return isinstance(got, (int, float)) and abs(float(got) - float(want)) < 1e-6
    return got == want


def check(request: Request, evs: list[Event]) -> tuple[bool, str]:
    """Whether the turn of ``request`` (the last typed turn of ``evs``) got what it should.

    Args:
        request: The request.
        evs: The messages of its run (the :attr:`Request.before` turns' too).

    Returns:
        ``(ok, why)``: ``why`` names the first thing that differs ("" when ok).
    """
    turns = [e.turn_id for e in evs if isinstance(e, Transcript)]
    if not turns:
        return False, "no turn"
    tid = turns[-1]
    calls = [(e.tool, e.arguments) for e in evs if isinstance(e, ToolCall) and e.turn_id == tid]
    reply = next((e.text for e in evs if isinstance(e, Reply) and e.turn_id == tid), "")
    names = tuple(dict.fromkeys(name for name, _ in calls))
    if request.tools and not set(request.tools) <= set(names):
        return False, f"tools {', '.join(names) or 'none'}, expected {', '.join(request.tools)}"
    if not request.tools and names:
        return False, f"tools {', '.join(names)}, expected none"
    for tool, want in request.args.items():
        made = [args for name, args in calls if name == tool]
        if not any(all(_same(args.get(k), v) for k, v in want.items()) for args in made):
            return False, f"{tool} arguments {made}, expected {want}"
    if request.reply and not re.fullmatch(request.reply, reply.strip(), re.S):
        return False, f"reply {reply!r}"
    return True, ""
