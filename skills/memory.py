"""Built-in skills: who is who. The robot's own name, and what the user asks it to remember.

``own_name`` answers "what's your name?" with the robot's name (``[agent] name``).
``remember`` keeps the user's name ("my name is Sam", "call me Sam") and simple facts ("remember
that I like jazz"); ``forget`` drops them ("forget my name", "forget that I like jazz", "forget
everything"); ``recall`` says them back ("what is my name?", "what do you know about me?"). They
act on ``ctx.memory`` (:class:`~agent.state.memory.Memory`): kept in the state store across
restarts under ``bolt-agent run``, and offered to the model every turn in the state line the
user's message carries (:meth:`agent.pipeline.core.AgentCore.state_line`), so a capable model
can use them without a call. Every result is a sentence written for people (``as_written``).

The free-text arguments are read from the user's words on the small-model profile
(``from_words``); a capable model writes them itself.
"""

import re
from typing import Annotated

from pydantic import Field

from agent.skills import SkillContext, skill
from agent.state.memory import NAME, Memory, to_second_person


def _memory(ctx: SkillContext) -> Memory:
    if ctx.memory is None:
        raise RuntimeError("I cannot remember anything here.")
    return ctx.memory


@skill(
    keywords=("your name", "who are you", "what are you called", "introduce yourself"),
    side_effects=False,
    ability="",
    as_written=True,
)
def own_name(ctx: SkillContext) -> str:
    """Say your own name (the robot's)."""
    return f"My name is {ctx.robot_name}."


def _after(words: str, text: str) -> str:
    """The user's words after the first of ``words`` (a regex), without a leading "that"/"about"."""
    m = re.search(rf"\b(?:{words})\b[,:]?\s*(?:that|about|is|me)?\s*(.*)", text, re.IGNORECASE)
    return m.group(1).strip(" .!?") if m else ""


def fact_in(text: str) -> str:
    """``remember``'s fact as the user said it (``from_words``): "I like jazz", "my name is Sam"."""
    if re.search(r"\b(my name is|my name's|call me)\b", text, re.IGNORECASE):
        m = re.search(r"\b(?:my name is|my name's|call me)\b.*", text, re.IGNORECASE)
        return m.group(0).strip(" .!?") if m else text
    fact = re.sub(r"^\s*(?:please\s+|can you\s+|could you\s+)?", "", text, flags=re.IGNORECASE)
    fact = re.sub(r"^(?:remember|keep in mind|note)\b[,:]?\s*(?:that\s+)?", "", fact, flags=re.IGNORECASE)
    return fact.strip(" .!?") or text.strip()


@skill(
    keywords=("remember", "my name is", "call me", "keep in mind"),
    ability="remember what you tell me",
    as_written=True,
    from_words={"fact": fact_in},
)
def remember(
    ctx: SkillContext,
    fact: Annotated[
        str, Field(max_length=120, description='the fact in the user\'s words, first person: "I like jazz"')
    ],
) -> str:
    """Remember the user's name or a fact they tell you.

    Raises:
        RuntimeError: nothing to remember (said to the user).
    """
    try:
        kept = _memory(ctx).remember(fact)
    except ValueError as e:
        raise RuntimeError(str(e)) from None
    if kept.key == NAME:
        return f"Nice to meet you, {kept.text}. I will remember your name."
    return f"Okay, I will remember that {to_second_person(kept.text)}."


def what_to_forget(text: str) -> str:
    """``forget``'s words as the user said them (``from_words``): "my name", "that I like jazz"."""
    return _after("forget|don't remember|stop remembering", text) or "everything"


@skill(keywords=("forget",), ability="", as_written=True, from_words={"what": what_to_forget})
def forget(
    ctx: SkillContext,
    what: Annotated[
        str,
        Field(
            max_length=80,
            description='what to forget in the user\'s words: "my name", "that I like jazz", "everything"',
        ),
    ],
) -> str:
    """Forget the user's name or something they told you."""
    gone = _memory(ctx).forget(what)
    if not gone:
        said = to_second_person(what.strip(" .!?"))
        if said.lower().startswith("that "):  # "forget that I play chess"
            return f"I don't remember {said}."
        return f"I don't remember anything about {re.sub(r'^about ', '', said) or 'that'}."
    if len(gone) == 1:
        return f"I forgot that {gone[0].said_back()}."
    return f"I forgot {len(gone)} things you told me."


def about_in(text: str) -> str:
    """``recall``'s subject (``from_words``): "name" when the user asks for their name, else ""."""
    return "name" if re.search(r"\b(my name|who am i)\b", text, re.IGNORECASE) else ""


@skill(
    keywords=(
        "what is my name",
        "what's my name",
        "whats my name",
        "who am i",
        "about me",
        "do you remember",
    ),
    side_effects=False,
    ability="",
    as_written=True,
    from_words={"about": about_in},
)
def recall(
    ctx: SkillContext,
    about: Annotated[
        str, Field(max_length=20, description='"name" for the user\'s name; "" for everything you remember')
    ] = "",
) -> str:
    """Say what you remember about the user."""
    memory = _memory(ctx)
    if about.strip().lower() in ("name", "my name", "user's name"):
        name = memory.name()
        return f"Your name is {name}." if name else "I don't know your name yet. You can tell me."
    facts = memory.facts()
    if not facts:
        return "You have not told me anything to remember yet."
    said = [f.said_back() for f in facts]
    return (
        "You told me that " + (", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else said[0]) + "."
    )
