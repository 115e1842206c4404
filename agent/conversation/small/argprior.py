"""The argument prior: sides and durations the user named decide a skill's arguments.

A small model writes numbers badly: "please look to the left" ran ``look(yaw 0, pitch -1)``. A
skill states each signed argument's convention in its schema (``"positive = left"`` in the
description, as ``look`` and ``move_head`` do); when the user's words name exactly one side of
that convention ("left" and not "right"), :func:`follow_words` makes the argument point that
way, by the number of degrees the user said when there is exactly one ("thirty degrees"), else
by the model's own magnitude when it is one a person sees (:data:`MIN_TURN_SHARE` of the range
either way, or more), else by half the argument's range. Words that name both sides leave the model's value
alone; so do words that name neither, unless they name a side of another argument of the call:
"look to the left" asks for no tilt, so ``pitch_deg`` takes its schema default (the model wrote
``look(yaw 0, pitch 90)`` for it, measured: the head turned left and 30 degrees up). Like the
tool prior
(:mod:`agent.conversation.small.toolprior`) this is a prior from the user's own words, applied where
the model is weakest. An argument "in seconds" (its description says so, as ``set_timer``'s
does) is the duration the words say ("two hours" was written as ``seconds 2.5``).
"""

from __future__ import annotations

import re
from typing import Any

from agent.conversation.small.quantities import (
    TENS,
    UNITS,
    spoken_count,
    spoken_degrees,
    spoken_durations,
    spoken_numbers,
    spoken_seconds,
)
from agent.speech.words import words

OPPOSITES = {
    "left": "right",
    "right": "left",
    "up": "down",
    "down": "up",
    "forward": "back",
    "back": "forward",
}
"""The other side of each direction word a schema may name as positive."""

MIN_TURN_SHARE = 0.2
"""Smallest magnitude, as a share of an argument's range either way (:func:`signed_range`), that
answers a side said without a number: a tenth of the whole range, 12 degrees of ``look``'s yaw
(-60..60) and 6 of its pitch (-30..30). SmolLM2-135M wrote "please look to the left" as
``look(yaw 0.1)``, "turn your head to the right" as ``yaw -0.3`` (measured, the demo and a
compound command) and "look down" as ``pitch -3`` (a new user's chat, against 15 for "look up"):
the right sign, and a turn nobody sees."""

_CONVENTION = re.compile(r"positive\s*=\s*(\w+)", re.IGNORECASE)


def _is_number(word: str) -> bool:
    """A number said as one word: digits, a number word, "a"/"an" (a name is none of these)."""
    return bool(re.fullmatch(r"\d+(\.\d+)?", word)) or word in UNITS or word in TENS or word in ("a", "an")


def length_unsaid(user_text: str, parameters: dict[str, Any]) -> str | None:
    """The required argument "in seconds" the words give no length for ("set a timer"), or None.

    SmolLM2-135M wrote ``set_timer(seconds 10)`` for "set a timer" (a new user's ``chat``: before
    the argument prior, 1 s): a length nobody said. The robot asks instead.

    Args:
        user_text: What the user said this turn.
        parameters: The skill's JSON schema (``required``, each property's ``description``).

    Returns:
        The argument's name when one is required, described "in seconds", and the words say no
        duration (:func:`spoken_seconds`); None otherwise.
    """
    if spoken_seconds(user_text) is not None or spoken_durations(user_text):
        return None
    props = parameters.get("properties") or {}
    for name in parameters.get("required") or ():
        if "in seconds" in str((props.get(name) or {}).get("description", "")):
            return name
    return None


_NAMING = frozenset({"called", "named"})
_NAME_ENDS = frozenset("and then for but please".split())
_NO_NAME = frozenset(
    (
        "a an the my your our his her their this that these those its it is are was what which how long "
        "left on of for to in at with set start make cancel stop change add another one new other every "
        "all any each first last next second seconds minute minutes hour hours half quarter running"
    ).split()
)
"""Words that name nothing: determiners, questions, commands, lengths ("is my timer done", "the ten
minute timer", "another timer")."""


def said_label(user_text: str, noun: str) -> str | None:
    """The name the user gave a thing: the words after "called" or "named", else the word before ``noun``.

    SmolLM2-135M labelled "set a timer for ten minutes called tea" ``ten timer`` and "set a pasta
    timer" ``timer``: the name was lost, and "cancel the pasta timer" cancelled whatever ran.

    Args:
        user_text: What the user said this turn.
        noun: What the thing is (the label's default: "timer"); "" for none.

    Returns:
        "tea" for "a timer called tea" and for "the tea timer"; None where the words give no name
        ("set a timer", "is my timer done", "the ten minute timer").
    """
    said = words(user_text.replace("-", " "))
    at = next((i for i, w in enumerate(said) if w in _NAMING), None)
    if at is not None:
        name: list[str] = []
        for w in said[at + 1 :]:
            if w in _NAME_ENDS or len(name) == 3:
                break
            if w not in _NO_NAME and w != noun and not _is_number(w):
                name.append(w)
        if name:
            return " ".join(name)
    if noun and noun in said:
        before = said[said.index(noun) - 1] if said.index(noun) > 0 else ""
        if before and before not in _NO_NAME and not _is_number(before):
            return before
    return None


def said_values(user_text: str, parameters: dict[str, Any], arguments: dict[str, Any]) -> frozenset[str]:
    """The arguments whose value is a number the user said, past the skill's range or not.

    A count of repetitions (:func:`is_count`) equal to the count said, an argument in degrees
    equal to the degrees said (either sign: the side is the convention's), and one in seconds
    equal to the duration said. The registry tells the person only about these when it clamps
    a value: "I can tilt my head at most 30 degrees up." after "dance" (SmolLM2-135M also
    wrote ``look(pitch 200)``, measured on ``bench --accuracy``) answers nothing they asked.

    Args:
        user_text: What the user said this turn.
        parameters: The skill's JSON schema (``properties`` with ``description``).
        arguments: The call's arguments (after :func:`follow_words`).

    Returns:
        Their names.
    """
    props = parameters.get("properties") or {}
    count, degrees, seconds = spoken_count(user_text), spoken_degrees(user_text), spoken_seconds(user_text)
    out = set()
    for name, value in arguments.items():
        prop = props.get(name) or {}
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        desc = str(prop.get("description", ""))
        if (
            (count is not None and is_count(name, prop) and value == count)
            or (degrees is not None and "degree" in desc and abs(value) == degrees)
            or (seconds is not None and "in seconds" in desc and value == seconds)
        ):
            out.add(name)
    return frozenset(out)


def is_count(name: str, prop: dict[str, Any]) -> bool:
    """Whether an argument is a count of repetitions (``nod``'s ``times``).

    An integer named ``times`` or described "how many times".
    """
    return prop.get("type") == "integer" and (
        name == "times" or "how many times" in str(prop.get("description", "")).lower()
    )


def sides(parameters: dict[str, Any]) -> dict[str, str]:
    """Each signed argument's positive side from its schema (``"positive = left"``): name → side."""
    out = {}
    for name, prop in (parameters.get("properties") or {}).items():
        m = _CONVENTION.search(str(prop.get("description", "")))
        if m is not None and m.group(1).lower() in OPPOSITES:
            out[name] = m.group(1).lower()
    return out


LIMBS = frozenset("arm arms leg legs foot feet ear ears eye eyes shoulder shoulders antenna antennas".split())
"""Body parts a side word may name instead of a direction ("raise your right arm"). Not "hand":
Whisper heard "... to the right and then wave" as "... turn the right hand wave" (``bench
--accuracy``, turn_then_wave.wav), where "right" is the head's direction."""

_NOT_A_DIRECTION_AFTER = LIMBS | {"now", "away"}


def directions(text: str) -> set[str]:
    """The words of ``text``, its side words only where they name a direction.

    "right now", "right away", "all right" and a side before a body part ("your right arm") name
    no direction: SmolLM2-135M's ``look`` for "what do you see right now" was turned 30 degrees
    right by the argument prior, and "raise your right arm" ran ``look(yaw -45)`` (a new user's
    chat).

    Args:
        text: What the user said.

    Returns:
        Lower-case words; a word of :data:`OPPOSITES` only when one of its uses is a direction.
    """
    said = words(text)
    out = set(said) - set(OPPOSITES)
    for i, w in enumerate(said):
        after = said[i + 1] if i + 1 < len(said) else ""
        if w in OPPOSITES and after not in _NOT_A_DIRECTION_AFTER and (i == 0 or said[i - 1] != "all"):
            out.add(w)
    return out


SIDE_NOUNS = frozenset("hand hands arm arms side".split())
"""Words after a side word that make it the choice of a limb ("your left hand"), not a direction."""


def limb_sides(text: str) -> set[str]:
    """The sides ``left``/``right`` the words name for a limb ("wave with your left hand": {"left"}).

    Args:
        text: What the user said.

    Returns:
        ``left`` and/or ``right``, each where it comes right before a word of :data:`SIDE_NOUNS`.
    """
    said = words(text)
    pairs = zip(said, said[1:], strict=False)
    return {w for w, after in pairs if w in ("left", "right") and after in SIDE_NOUNS}


def named_sides(said: set[str], parameters: dict[str, Any]) -> dict[str, tuple[bool, bool]]:
    """Which sides of each signed argument the words name.

    Args:
        said: The user's words (lower case; :func:`directions` keeps only side words that name one).
        parameters: The skill's JSON schema (:func:`sides` reads its conventions).

    Returns:
        Signed argument name → ``(positive side named, negative side named)``: for ``look`` and
        "look to the left", ``{"yaw_deg": (True, False), "pitch_deg": (False, False)}``.
    """
    return {name: (pos in said, OPPOSITES[pos] in said) for name, pos in sides(parameters).items()}


def signed_range(prop: dict[str, Any]) -> float:
    """How far a signed argument may go either way: the smaller of ``|minimum|`` and ``|maximum|``.

    Args:
        prop: The argument's JSON-schema property (``minimum``, ``maximum``; 45 where unstated).

    Returns:
        The magnitude, in the argument's own unit (degrees for ``look``: 60 for yaw, 30 for pitch).
    """
    return min(abs(float(prop.get("maximum", 45.0))), abs(float(prop.get("minimum", -45.0))))


A_LITTLE = (("a", "little"), ("a", "bit"), ("slightly",), ("a", "touch"))
"""Words that ask for a small turn: the smallest one a person sees (:data:`MIN_TURN_SHARE`), not
half the range."""


def _says_a_little(user_text: str) -> bool:
    """Whether the words ask for a small turn (:data:`A_LITTLE`)."""
    said = words(user_text)
    return any(tuple(said[i : i + len(p)]) == p for p in A_LITTLE for i in range(len(said)))


def _unsigned_angle(parameters: dict[str, Any], named: dict[str, tuple[bool, bool]]) -> str | None:
    """The call's one numeric argument in degrees that has no side convention, if it has exactly one."""
    props = parameters.get("properties") or {}
    angles = [
        n
        for n, p in props.items()
        if n not in named
        and p.get("type") in ("number", "integer")
        and (n.endswith("_deg") or "degree" in str(p.get("description", "")).lower())
    ]
    return angles[0] if len(angles) == 1 else None


OTHER_WORDS = frozenset({"other", "opposite"})
"""Words that ask for the other side of the last call ("now the other hand", "the opposite way")."""


def follow_words(
    user_text: str,
    parameters: dict[str, Any],
    arguments: dict[str, Any],
    before: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``arguments`` as the user's words say them, rule by rule (each a measured failure of the model).

    * a duration: an argument "in seconds" is the duration said (:func:`spoken_seconds`);
    * a label (an argument named ``label``, free text): the name the user gave the thing
      (:func:`said_label`: "called tea", "the pasta timer"), else only the words of the model's
      label the user said, or its default where they said none of them;
    * a count: a count of repetitions (:func:`is_count`) is the count said ("nod twice"), or its
      schema default when the words say none;
    * a limb's side named: an enum of sides (``wave``'s ``hand``) is the one side the words name
      with its limb (:func:`limb_sides`: "your left hand"), even where the model left it out;
    * a side not chosen: an enum of sides (``wave``'s ``hand``) whose values the words do not
      name takes its schema default, or, where they say "other" (:data:`OTHER_WORDS`), the
      side the same tool's last call did not take;
    * the other side: where the words say "other" and name no side, each signed argument is
      the same tool's last value mirrored ("the other way" after ``look(yaw 30)``: yaw -30);
    * an angle: the call's one numeric argument in degrees without a side convention
      (``angle_deg``) is the number of degrees said when the words name no side of a signed
      argument (those take the degrees then);
    * a side named (:func:`_signed`): a signed argument points to the side of its ``positive =
      <side>`` convention the words name; one they name no side of, in a call where they name a
      side of another, takes its schema default.

    A number the user said stays as said, past the skill's range too: the registry holds it to
    the range, and a ``clamp=True`` skill's robot says so ("nod ten times": "I can nod at most
    5 times in a row."; held here, it nodded five times without a word).

    Args:
        user_text: What the user said this turn.
        parameters: The skill's JSON schema (``properties`` with ``description``, ``enum``,
            ``default``, ``minimum``, ``maximum``).
        arguments: The model's arguments (not changed).
        before: The arguments of the same tool's call in the previous turn, if it had one.

    Returns:
        A copy of ``arguments`` with those rules applied.
    """
    said = set(words(user_text))
    other = bool(said & OTHER_WORDS) and before is not None
    out = dict(arguments)
    props = parameters.get("properties") or {}
    duration = spoken_seconds(user_text)
    count = spoken_count(user_text)
    for name, prop in props.items():
        # "Can you nod your head twice?" nodded once: the count is the one said, else one.
        if is_count(name, prop):
            if count is not None:  # said, even where the model left the argument out
                out[name] = count  # as said: the registry holds it to the range, and says so
            elif name in out and "default" in prop:
                out[name] = prop["default"]
        # A length in seconds ("timer length in seconds") is the duration said: the model wrote
        # set_timer(seconds 2.5) for "two hours" (a new user's chat, measured).
        if duration is not None and "in seconds" in str(prop.get("description", "")):
            out[name] = duration  # also where the model left it out ("cancel the ten minute timer")
        _label(user_text, name, prop, said, out)
        _hand(user_text, name, prop, said, other, before, out)
    named = named_sides(directions(user_text), parameters)
    if other and before and not any(p or n for p, n in named.values()):
        for name in named:  # "the other way" after look(yaw 30): the same turn, mirrored
            try:
                out[name] = -float(before.get(name, props[name].get("default", 0.0))) or 0.0
            except (TypeError, ValueError):
                continue
    angle = _unsigned_angle(parameters, named)
    said_deg = spoken_degrees(user_text)
    if angle is not None and said_deg is not None and not any(p or n for p, n in named.values()):
        # "raise your right arm 45 degrees" ran raise_arm(side right) at its default 90 (a new
        # user's chat): the one angle of the call is the one said.
        out[angle] = said_deg
    _signed(user_text, props, named, said_deg, out)
    taken = {n for n, p in props.items() if _claimed_by_a_rule(n, p)} | set(named) | {angle}
    _from_schema(user_text, {n: p for n, p in props.items() if n not in taken}, out)
    return out


def _label(user_text: str, name: str, prop: dict[str, Any], said: set[str], out: dict[str, Any]) -> None:
    """A label is what the user called the thing (in place).

    The name they gave it (:func:`said_label`: "called tea", "the pasta timer"), else only the
    words of the model's label they said. SmolLM2-135M labelled timers "ten-minute-game" and
    "Cancel the game", and cancelling by such a label picked both.
    """
    value = out.get(name)
    given = said_label(user_text, str(prop.get("default", ""))) if name == "label" else None
    if given and not prop.get("enum"):
        out[name] = given  # "a timer called tea", "the pasta timer": the name they gave it
    elif name == "label" and isinstance(value, str) and not prop.get("enum"):
        kept = " ".join(w for w in words(value.replace("-", " ")) if w in said)
        if kept != " ".join(words(value)):
            out[name] = kept or prop.get("default", value)


def _hand(
    user_text: str,
    name: str,
    prop: dict[str, Any],
    said: set[str],
    other: bool,
    before: dict[str, Any] | None,
    out: dict[str, Any],
) -> None:
    """An enum of sides (``wave``'s ``hand``) from the words (in place).

    The side named with its limb ("wave with your left hand three times"), also where the model
    left it out; "the other hand" after the last call's; else, where the words choose no side,
    the skill's own default ("wave" and "goodbye" ran ``wave(hand left)`` against the schema's
    "right").
    """
    values = set(prop.get("enum") or ())
    if not values or not values <= set(OPPOSITES):
        return
    limb = limb_sides(user_text) & values
    if len(limb) == 1:
        out[name] = next(iter(limb))
    elif not said & values:
        last = (before or {}).get(name)
        if other and OPPOSITES.get(last) in values:
            out[name] = OPPOSITES[last]  # "now the other hand" after a right-hand wave
        elif name in out and "default" in prop and not said & OTHER_WORDS:
            out[name] = prop["default"]


def _claimed_by_a_rule(name: str, prop: dict[str, Any]) -> bool:
    """Whether one of :func:`follow_words`' own rules decides this argument (count, length, label, side)."""
    values = set(prop.get("enum") or ())
    return (
        is_count(name, prop)
        or "in seconds" in str(prop.get("description", ""))
        or name == "label"
        or bool(values and values <= set(OPPOSITES))
    )


def _from_schema(user_text: str, props: dict[str, Any], out: dict[str, Any]) -> None:
    """Any skill's other arguments from the words and its schema (in place): a skill author's too.

    An enum whose one value the words say (its words in order: "red", "jackson square") is that
    value; a number, where the words say exactly one number ("a twenty-sided die": 20), is that
    number within the argument's type; an enum or a number the words say nothing of takes its
    schema default where it has one (the stand-in wrote ``sides 2`` for any die, and "blue" for
    "blink the red lights").
    """
    said = words(user_text.replace("-", " "))
    numbers = spoken_numbers(user_text)
    for name, prop in props.items():
        values = [v for v in prop.get("enum") or () if isinstance(v, str)]
        if values:
            named = [v for v in values if _says_words(said, words(v.replace("_", " ")))]
            # "light blue" said names "blue" too: the longer name is the one said
            named = [v for v in named if not any(o != v and _says_words(words(o), words(v)) for o in named)]
            if len(named) == 1:
                out[name] = named[0]
            elif not named and name in out and "default" in prop:
                out[name] = prop["default"]
        elif prop.get("type") in ("integer", "number"):
            if len(numbers) == 1:
                value = numbers[0]
                out[name] = int(value) if prop.get("type") == "integer" and value == int(value) else value
            elif not numbers and name in out and "default" in prop:
                out[name] = prop["default"]


def _says_words(said: list[str], run: list[str]) -> bool:
    """Whether the words ``run`` occur together, in order, in ``said``."""
    n = len(run)
    return n > 0 and any(said[i : i + n] == run for i in range(len(said) - n + 1))


def _signed(
    user_text: str,
    props: dict[str, Any],
    named: dict[str, tuple[bool, bool]],
    said_deg: float | None,
    out: dict[str, Any],
) -> None:
    """Point the signed arguments of ``out`` where the words name a side (in place).

    An argument is changed where the words name one side of its convention and its value is
    zero, points the other way, is under :data:`MIN_TURN_SHARE` of the range or past it (then
    half the range, or that share where the words say "a little": :data:`A_LITTLE`), or is not
    the number of degrees said; and where the words name no side of it but one side of another
    signed argument (its schema default then, 0 where none is stated).
    """
    one_side = any(p != n for p, n in named.values())
    for name, (says_pos, says_neg) in named.items():
        prop = props[name]
        if not says_pos and not says_neg and one_side and name in out:
            out[name] = prop.get("default", 0.0)  # not asked for: as if the model left it out
            continue
        if says_pos == says_neg:
            continue  # neither side named, or both ("left and then right"): the model decides
        want = 1.0 if says_pos else -1.0
        try:
            value = float(out.get(name, prop.get("default", 0.0)) or 0.0)
        except (TypeError, ValueError):
            value = 0.0
        bound = signed_range(prop)
        # A magnitude past the range is no turn the skill knows (the model wrote yaw 180 for
        # "turn your head thirty degrees to the right" misheard, measured): like none at all.
        seen = MIN_TURN_SHARE * bound <= abs(value) <= bound
        least = MIN_TURN_SHARE * bound if _says_a_little(user_text) else bound / 2
        magnitude = said_deg if said_deg is not None else abs(value) if seen else least
        # A number the user said is theirs, past the range too: the registry holds it to the
        # range and the robot says so ("I can turn my head at most 60 degrees to the left.").
        target = want * (said_deg if said_deg is not None else min(magnitude, bound))
        if value != target and (value * want <= 0 or not seen or said_deg is not None):
            out[name] = target
