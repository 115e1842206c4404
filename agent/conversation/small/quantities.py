"""Spoken quantities for the small-model profile: durations, counts and angles as people say them.

The small profile's argument prior (:mod:`.argprior`) reads the numbers a user said, because the
stand-in writes numbers badly. What it reads must be right:

* numbers as digits ("2.5", "90") or words ("twenty five", "a hundred and twenty", "a dozen");
* fractions: "half an hour" (1800 s), "a quarter of an hour" (900 s), "three quarters of an
  hour", "half a minute", "one and a half hours", "an hour and a half", "1/2 hour";
* compound durations: "1 hour 30 minutes", "two minutes and ten seconds" (one duration), apart
  from a list of them ("3 seconds and another one for 6 seconds": two);
* vague counts: "a few" (3), "a couple" (2), "several" (3), and "once", "twice", "thrice";
* a length said below zero: "minus 5 seconds".

Every function returns None where the words do not say one quantity clearly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"\d+/\d+|\d+(?:\.\d+)?|[a-z]+")

UNITS = {
    "zero": 0,
    "no": 0,
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
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
}
"""Number words below twenty."""

TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fourty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
"""Number words of the tens."""

SCALES = {"hundred": 100, "thousand": 1000}
"""Number words that multiply what comes before them."""

VAGUE = {"few": 3.0, "couple": 2.0, "several": 3.0, "dozen": 12.0}
"""Vague amounts as a person means them ("a few times": three; "a couple of minutes": two)."""

COUNT_WORDS = {"once": 1, "twice": 2, "thrice": 3}
"""Words that are a count of repetitions by themselves."""

TIME_UNITS = {
    "second": 1.0,
    "seconds": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "minute": 60.0,
    "minutes": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
}
"""Spoken duration units and their length in seconds."""

DEGREE_UNITS = {"degree": 1.0, "degrees": 1.0, "deg": 1.0}
"""Spoken angle units, in degrees."""

COUNT_UNITS = {"time": 1.0, "times": 1.0}
"""What a count of repetitions is said in ("three times")."""

_FRACTIONS = {"half": 0.5, "quarter": 0.25, "quarters": 0.25, "third": 1 / 3, "thirds": 1 / 3}
_NEGATIVE = frozenset({"minus", "negative"})
_JOIN = frozenset({"and", "a", "an", "of"})


def tokens(text: str) -> list[str]:
    """The words and numbers of ``text``, lower case: decimals ("2.5") and fractions ("1/2") kept whole."""
    return _TOKEN.findall(text.lower().replace("-", " "))


def _number_before(toks: list[str], end: int) -> tuple[float, int] | None:
    """The number that ends just before ``toks[end]``: its value and the index of its first token.

    Reads back over digits, number words, scales, fractions ("half", "three quarters", "a quarter
    of an"), "X and a half", vague amounts ("a few") and "a"/"an" standing for one.
    """
    i = end - 1
    if i < 0:
        return None
    tok = toks[i]
    if re.fullmatch(r"\d+(\.\d+)?", tok):
        return float(tok), i
    if re.fullmatch(r"\d+/\d+", tok):
        num, den = tok.split("/")
        return (float(num) / float(den), i) if float(den) else None
    if tok == "half" and i >= 2 and toks[i - 2 : i] == ["and", "a"]:  # "one and a half"
        whole = _number_before(toks, i - 2)
        return (whole[0] + 0.5, whole[1]) if whole is not None else (0.5, i)
    if tok in ("a", "an", "of"):  # "half an hour", "a quarter of an hour", "a couple of minutes"
        j = i - 1 if tok != "of" else i
        if j >= 1 and toks[j] == "of":
            j -= 1
        if j >= 0 and toks[j] in _FRACTIONS:
            return _fraction_before(toks, j)
        if j >= 0 and toks[j] in VAGUE:
            return VAGUE[toks[j]], j - 1 if j >= 1 and toks[j - 1] == "a" else j
    if tok in _FRACTIONS:
        return _fraction_before(toks, i)
    if tok in VAGUE:
        return VAGUE[tok], i - 1 if i >= 1 and toks[i - 1] == "a" else i
    if tok in ("a", "an") or (tok == "one" and (i < 1 or toks[i - 1] not in TENS)):
        return 1.0, i
    return _words_number(toks, end)


def _fraction_before(toks: list[str], i: int) -> tuple[float, int]:
    """A fraction word at ``toks[i]``, with a count before it ("three quarters") or "a" ("a quarter")."""
    frac = _FRACTIONS[toks[i]]
    if i >= 1 and toks[i - 1] in UNITS and toks[i - 1] not in ("no",):
        return UNITS[toks[i - 1]] * frac, i - 1
    if i >= 1 and toks[i - 1] in ("a", "an"):
        return frac, i - 1
    return frac, i


def _words_number(toks: list[str], end: int) -> tuple[float, int] | None:
    """A number in words ending before ``toks[end]`` ("one hundred and twenty five"), or None."""
    start = end
    while start > 0 and (
        toks[start - 1] in UNITS
        or toks[start - 1] in TENS
        or toks[start - 1] in SCALES
        or (toks[start - 1] == "and" and start - 2 >= 0 and toks[start - 2] in SCALES)
        or (toks[start - 1] in ("a", "an") and start < end and toks[start] in SCALES)
    ):
        start -= 1
    while start < end and toks[start] == "and":
        start += 1
    if start == end:
        return None
    total, current = 0.0, 0.0
    for tok in toks[start:end]:
        if tok in ("a", "an"):
            current = 1.0
        elif tok in UNITS:
            current += UNITS[tok]
        elif tok in TENS:
            current += TENS[tok]
        elif tok in SCALES:
            current = (current or 1.0) * SCALES[tok]
            if tok == "thousand":
                total, current = total + current, 0.0
    return total + current, start


@dataclass(frozen=True)
class _Amount:
    """One quantity said before a unit: its value in the unit's measure and where it stands."""

    value: float
    start: int
    end: int  # index after the unit (and a trailing "and a half")
    scale: float  # the unit's size (seconds in a minute...)


def _amounts(toks: list[str], units: dict[str, float]) -> list[_Amount]:
    """Each quantity said with one of ``units``, in order ("an hour and a half": 1.5 hours)."""
    out = []
    for i, tok in enumerate(toks):
        if tok not in units:
            continue
        found = _number_before(toks, i)
        if found is None:
            continue
        value, start = found
        end = i + 1
        if toks[end : end + 3] == ["and", "a", "half"]:  # "an hour and a half"
            value, end = value + 0.5, end + 3
        elif toks[end : end + 2] == ["and", "half"]:
            value, end = value + 0.5, end + 2
        out.append(_Amount(value, start, end, units[tok]))
    return out


def spoken_durations(text: str) -> list[float]:
    """Each duration said in ``text``, in seconds, in order.

    Amounts in falling units with only "and" or nothing between them are one duration ("1 hour
    30 minutes": 5400); anything else between, or a unit that does not fall, starts another ("3
    seconds and another one for 6 seconds": [3, 6]). A duration right after "minus" or
    "negative" is below zero.

    Args:
        text: What the user said.

    Returns:
        Seconds per duration (empty when none is said).
    """
    toks = tokens(text)
    out: list[float] = []
    last: _Amount | None = None
    for amount in _amounts(toks, TIME_UNITS):
        between = toks[last.end : amount.start] if last is not None else None
        joined = last is not None and amount.scale < last.scale and set(between or []) <= {"and"}
        seconds = amount.value * amount.scale
        if joined:
            out[-1] += seconds if out[-1] >= 0 else -seconds
        else:
            negative = amount.start >= 1 and toks[amount.start - 1] in _NEGATIVE
            out.append(-seconds if negative else seconds)
        last = amount
    return out


def spoken_seconds(text: str) -> float | None:
    """The one duration said in ``text``, in seconds ("five minutes": 300; "half an hour": 1800).

    Returns:
        The duration (below zero when said so: "minus 5 seconds" → -5), or None when none or
        several are said.
    """
    durations = spoken_durations(text)
    return durations[0] if len(durations) == 1 else None


def spoken_quantity(text: str, units: dict[str, float]) -> float | None:
    """The one amount said with one of ``units`` ("30 degrees", "forty five degrees"), or None.

    Args:
        text: What the user said.
        units: Unit words and their size (:data:`DEGREE_UNITS`, :data:`COUNT_UNITS`, ...).

    Returns:
        The amount in the units' measure, or None when none or several are said.
    """
    found = [a.value * a.scale for a in _amounts(tokens(text), units)]
    return found[0] if len(set(found)) == 1 else None


def spoken_degrees(text: str) -> float | None:
    """The one number of degrees said in ``text`` ("30 degrees", "forty-five degrees"), or None."""
    return spoken_quantity(text, DEGREE_UNITS)


def spoken_count(text: str) -> int | None:
    """How many times the words ask for an action, or None.

    "twice", "three times", "2 times", "a few times" (3), "a couple of times" (2); None when none
    is said or two different ones are ("once or twice"). "what time is it" says none.

    Args:
        text: What the user said.
    """
    toks = tokens(text)
    found = {COUNT_WORDS[t] for t in toks if t in COUNT_WORDS}
    for amount in _amounts(toks, COUNT_UNITS):
        if amount.value == int(amount.value) and amount.value > 0:
            found.add(int(amount.value))
    for i, tok in enumerate(toks):  # "a couple of times", "a few more times"
        if tok in VAGUE and any(t in COUNT_UNITS for t in toks[i + 1 : i + 4]):
            found.add(int(VAGUE[tok]))
    return found.pop() if len(found) == 1 else None


def spoken_numbers(text: str) -> list[float]:
    """Every number said in ``text``, in order: digits ("20", "2.5") and words ("twenty", "a hundred").

    "a twenty-sided die" says 20; "a" and "an" alone are no number; a fraction word alone
    ("half") is none either.
    """
    toks = tokens(text)
    out: list[float] = []
    i = 0
    while i < len(toks):
        tok = toks[i]
        if re.fullmatch(r"\d+(\.\d+)?", tok):
            out.append(float(tok))
            i += 1
            continue
        if tok in UNITS or tok in TENS or tok in SCALES:
            end = i
            while end < len(toks) and (
                toks[end] in UNITS
                or toks[end] in TENS
                or toks[end] in SCALES
                or (toks[end] == "and" and end + 1 < len(toks) and toks[end - 1] in SCALES)
            ):
                end += 1
            found = _words_number(toks, end)
            if found is not None and tok != "no":
                value = found[0]
                if toks[end : end + 3] == ["and", "a", "half"]:  # "one and a half"
                    value, end = value + 0.5, end + 3
                elif end < len(toks) and toks[end] in _FRACTIONS:  # "three quarters"
                    value, end = value * _FRACTIONS[toks[end]], end + 1
                out.append(value)
            i = end
            continue
        i += 1
    return out
