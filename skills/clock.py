"""Built-in skills: the time here or anywhere, and the date of a day said relative to today.

``get_time`` tells the local time, or the time in a named place: a city of :data:`CITIES`, any
zone of the standard library's IANA database said as it is ("Asia/Tokyo", "UTC") or by its
city ("Kolkata" finds "Asia/Kolkata"). ``get_date`` names the date of "today", "tomorrow",
"yesterday", "next Friday", "in three days", "two weeks ago". Where neither can know, it says
so in words the robot speaks ("I don't know the time zone of Atlantis.", raised for people).

The clock is the context's (``ctx.now``: tests hand a fixed one); a naive time is the machine's
local time. Results are sentences a person hears as written: no year unless it differs from this
one, no leading zero on the day.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from functools import cache
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import Field

from agent.skills import SkillContext, skill

CITIES = {
    "amsterdam": "Europe/Amsterdam",
    "athens": "Europe/Athens",
    "auckland": "Pacific/Auckland",
    "bangkok": "Asia/Bangkok",
    "barcelona": "Europe/Madrid",
    "beijing": "Asia/Shanghai",
    "berlin": "Europe/Berlin",
    "boston": "America/New_York",
    "brussels": "Europe/Brussels",
    "buenos aires": "America/Argentina/Buenos_Aires",
    "cairo": "Africa/Cairo",
    "cape town": "Africa/Johannesburg",
    "chicago": "America/Chicago",
    "delhi": "Asia/Kolkata",
    "denver": "America/Denver",
    "dubai": "Asia/Dubai",
    "dublin": "Europe/Dublin",
    "hong kong": "Asia/Hong_Kong",
    "honolulu": "Pacific/Honolulu",
    "istanbul": "Europe/Istanbul",
    "jakarta": "Asia/Jakarta",
    "lagos": "Africa/Lagos",
    "lisbon": "Europe/Lisbon",
    "london": "Europe/London",
    "los angeles": "America/Los_Angeles",
    "madrid": "Europe/Madrid",
    "melbourne": "Australia/Melbourne",
    "mexico city": "America/Mexico_City",
    "miami": "America/New_York",
    "montreal": "America/Toronto",
    "moscow": "Europe/Moscow",
    "mumbai": "Asia/Kolkata",
    "nairobi": "Africa/Nairobi",
    "new delhi": "Asia/Kolkata",
    "new york": "America/New_York",
    "oslo": "Europe/Oslo",
    "paris": "Europe/Paris",
    "rome": "Europe/Rome",
    "san francisco": "America/Los_Angeles",
    "santa clara": "America/Los_Angeles",
    "sao paulo": "America/Sao_Paulo",
    "seattle": "America/Los_Angeles",
    "seoul": "Asia/Seoul",
    "shanghai": "Asia/Shanghai",
    "singapore": "Asia/Singapore",
    "stockholm": "Europe/Stockholm",
    "sydney": "Australia/Sydney",
    "taipei": "Asia/Taipei",
    "tokyo": "Asia/Tokyo",
    "toronto": "America/Toronto",
    "vancouver": "America/Vancouver",
    "vienna": "Europe/Vienna",
    "warsaw": "Europe/Warsaw",
    "washington": "America/New_York",
    "zurich": "Europe/Zurich",
    "california": "America/Los_Angeles",
    "england": "Europe/London",
    "france": "Europe/Paris",
    "germany": "Europe/Berlin",
    "india": "Asia/Kolkata",
    "japan": "Asia/Tokyo",
    "china": "Asia/Shanghai",
    "korea": "Asia/Seoul",
    "italy": "Europe/Rome",
    "spain": "Europe/Madrid",
}
"""Common places people name, lower case, to their IANA zone (a country only where it has one)."""

_FILLER = frozenset("in at for the of city time zone timezone now right what is it please".split())
"""Words around a place ("in the city of Paris", "Tokyo time") that are not its name."""


@cache
def _zone_cities() -> dict[str, str]:
    """Every IANA zone by its last part, lower case, spaces for ``_`` ("kolkata" -> "Asia/Kolkata")."""
    out: dict[str, str] = {}
    for zone in sorted(available_timezones()):
        if "/" in zone and not zone.startswith(("Etc/", "SystemV/")):
            out.setdefault(zone.rsplit("/", 1)[1].replace("_", " ").lower(), zone)
    return out


def find_zone(place: str) -> tuple[ZoneInfo, str]:
    """The time zone of a place said: a city of :data:`CITIES`, an IANA zone's name or city.

    Args:
        place: What the user named ("Tokyo", "in new york", "Asia/Kolkata", "UTC").

    Returns:
        The zone and the place as said back ("Tokyo", "New York", "UTC").

    Raises:
        LookupError: no zone is known by that name ("I don't know the time zone of Atlantis.").
    """
    raw = place.strip().strip(".?!")
    if "/" in raw or raw.upper() in ("UTC", "GMT"):
        for name in (raw, raw.upper(), "/".join(p.strip().replace(" ", "_").title() for p in raw.split("/"))):
            try:
                return ZoneInfo(name), name.rsplit("/", 1)[-1].replace("_", " ")  # "Kolkata"
            except (ZoneInfoNotFoundError, ValueError):
                continue
    said = " ".join(w for w in re.findall(r"[a-zà-ÿ']+", raw.lower()) if w not in _FILLER)
    zone = CITIES.get(said) or _zone_cities().get(said)
    if zone is None:
        raise LookupError(f"I don't know the time zone of {raw or 'that place'}.")
    return ZoneInfo(zone), said.title()


def _day_month(when: date | datetime, today: date) -> str:
    """The date as said, "Monday 7 December", with the year only when it is not this one."""
    year = f" {when.year}" if when.year != today.year else ""
    return f"{when:%A} {when.day} {when:%B}{year}"


_PLACE_AFTER = re.compile(
    r"\b(?:in|at|for)\s+(?:the\s+)?([A-Za-zÀ-ÿ/_' ]+?)\s*(?:right now|now|today|please)?[?.!]*$", re.I
)


def place_in(text: str) -> str:
    """``get_time``'s place as the user said it, for small models (``from_words``).

    A known place named anywhere ("Tokyo"), else the words after "in" at the end ("what time is it
    in Atlantis?": "Atlantis", which the skill then says it does not know), else "" (here).
    """
    said = " " + " ".join(re.findall(r"[a-zà-ÿ/_']+", text.lower())) + " "
    known = [*CITIES, *_zone_cities()]
    hits = [p for p in known if f" {p} " in said]
    zones = [w for w in said.split() if "/" in w or w in ("utc", "gmt")]
    if hits or zones:
        return max([*hits, *zones], key=len)
    m = _PLACE_AFTER.search(text.strip())
    if m and m.group(1).strip().lower() not in ("the world", "here", "this room", "minutes", "seconds"):
        return m.group(1).strip()
    return ""


@skill(
    keywords=("time", "clock", "hour", "o'clock"),
    side_effects=False,
    ability="tell the time anywhere",
    from_words={"place": place_in},
)
def get_time(
    ctx: SkillContext,
    place: Annotated[
        str,
        Field(max_length=40, description='a city or time zone in the user\'s words ("Tokyo"); "" for here'),
    ] = "",
) -> str:
    """Get the time and date here, or in a city or time zone.

    Raises:
        RuntimeError: the place has no zone the robot knows ("I don't know the time zone of
            Atlantis."; said to the user as it is).
    """
    now = ctx.now()
    # What a person answers: no year, no leading zero on the day. Every word here is read back
    # (the reply copies it) and synthesized before the user hears the time.
    if not place.strip() or place.strip().lower() in ("here", "local", "now"):
        return f"It is {now:%H:%M} on {_day_month(now, now.date())}."
    try:
        zone, name = find_zone(place)
    except LookupError as e:
        raise RuntimeError(str(e)) from None
    there = (now if now.tzinfo else now.astimezone()).astimezone(zone)
    return f"In {name} it is {there:%H:%M} on {_day_month(there, now.date())}."


_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fourteen": 14,
    "twenty": 20,
    "thirty": 30,
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_SPAN = {"day": 1, "days": 1, "week": 7, "weeks": 7}


def day_offset(day: str, today: date) -> int:
    """How many days from ``today`` a day said is: "tomorrow" 1, "in three days" 3, "last Monday" -n.

    A weekday alone, or after "this" or "on", is the coming one (today when it is that day);
    after "next", the first one after today; after "last", the latest one before today.

    Args:
        day: The day in the user's words ("next Friday", "in 3 days", "two weeks ago", "today").
        today: Today's date.

    Raises:
        LookupError: no day is said that way (the message is said to the user).
    """
    said = re.findall(r"[a-z]+|\d+", day.lower())
    text = " ".join(w for w in said if w not in ("the", "it", "is", "be", "will", "what", "date", "on"))
    fixed = {"": 0, "today": 0, "now": 0, "tomorrow": 1, "yesterday": -1}
    fixed |= {"day after tomorrow": 2, "day before yesterday": -2}
    if text in fixed:
        return fixed[text]
    m = re.fullmatch(r"(?:(in) )?(\d+|[a-z]+) (days?|weeks?)(?: (from now|later|ago|from today))?", text)
    if m and (m.group(2).isdigit() or m.group(2) in _NUMBERS) and (m.group(1) or m.group(4)):
        n = (int(m.group(2)) if m.group(2).isdigit() else _NUMBERS[m.group(2)]) * _SPAN[m.group(3)]
        return -n if m.group(4) == "ago" else n
    m = re.fullmatch(r"(?:(this|next|last|coming) )?(\w+?)s?", text)
    if m and m.group(2) in _WEEKDAYS:
        ahead = (_WEEKDAYS.index(m.group(2)) - today.weekday()) % 7
        if m.group(1) == "last":
            return ahead - 7 if ahead else -7
        if m.group(1) == "next":
            return ahead or 7
        return ahead
    if text in ("next week", "a week from now"):
        return 7
    raise LookupError(f'I can\'t tell which day "{day.strip()}" is.')


_DAY_SAID = re.compile(
    r"\b(the day after tomorrow|the day before yesterday|today|tomorrow|yesterday|next week|"
    r"in (?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fourteen|twenty|thirty) "
    r"(?:days?|weeks?)|(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten) (?:days?|weeks?) "
    r"(?:ago|from now|from today)|(?:(?:this|next|last|coming) )?(?:monday|tuesday|wednesday|thursday|"
    r"friday|saturday|sunday))\b",
    re.I,
)


def day_in(text: str) -> str:
    """``get_date``'s day as the user said it ("next Friday", "in three days"), else "today".

    The small-model profile's reader (``from_words``); a capable model writes ``day`` itself.
    """
    m = _DAY_SAID.search(text)
    return m.group(1) if m else "today"


@skill(
    keywords=("date", "day", "tomorrow", "yesterday", "weekday", *_WEEKDAYS),
    side_effects=False,
    ability="",
    from_words={"day": day_in},
)
def get_date(
    ctx: SkillContext,
    day: Annotated[
        str,
        Field(
            max_length=40,
            description='the day in the user\'s words: "today", "tomorrow", "next Friday", "in 3 days"',
        ),
    ] = "today",
) -> str:
    """Get the date of a day: today, tomorrow, next Friday, in 3 days.

    Raises:
        RuntimeError: the day cannot be told ('I can't tell which day "someday" is.').
    """
    today = ctx.now().date()
    try:
        offset = day_offset(day, today)
    except LookupError as e:
        raise RuntimeError(str(e)) from None
    when = today + timedelta(days=offset)
    named = {0: "Today", 1: "Tomorrow", -1: "Yesterday"}.get(offset)
    if named is not None:
        return f"{named} {'was' if offset < 0 else 'is'} {_day_month(when, today)}."
    said = " ".join(
        w.title() if w.lower().rstrip("s") in _WEEKDAYS else w for w in day.strip().rstrip("?.!").split()
    )
    said = said[:1].upper() + said[1:]
    if said.lower().endswith("ago"):
        return f"{said} it was {_day_month(when, today)}."
    if said.lower().split()[-1].rstrip("s") in _WEEKDAYS:  # "Next Friday is 11 December."
        return f"{said} {'was' if offset < 0 else 'is'} {_day_month(when, today).split(' ', 1)[1]}."
    return f"{said} it will be {_day_month(when, today)}."
