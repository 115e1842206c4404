"""Numbers read as words for speech.

Currency, percentages, clock times, dates, years, ordinals, phone numbers, ranges and units
(num2words does the wording).

One entry point, :func:`speak_numbers`, used by :func:`agent.speech.text.clean_for_speech`
after markup and symbols are gone; the rules run from the most specific pattern (money,
times) to the most general (a bare number).
"""

from __future__ import annotations

import re

from num2words import num2words

# --- 6. Numbers -----------------------------------------------------------------------------------

_INT = r"\d{1,3}(?:,\d{3})+|\d+"
_CURRENCIES = {  # symbol or code -> (one, many, one hundredth, many hundredths)
    "$": ("dollar", "dollars", "cent", "cents"),
    "USD": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "EUR": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "GBP": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "", ""),
    "JPY": ("yen", "yen", "", ""),
}
_SCALE = r"(?:\s?((?i:thousand|million|billion|trillion)|[kKmMbB]n?)\b)?"
_MONEY_PREFIX = re.compile(rf"(?<![\w$€£¥])([-−])?([$€£¥])\s?({_INT})(?:\.(\d{{1,2}}))?(?!\d){_SCALE}")
_MONEY_SUFFIX = re.compile(rf"(?<![\w.,])([-−])?({_INT})(?:\.(\d{{1,2}}))?\s?(€|USD|EUR|GBP|JPY)(?!\w)")
_PERCENT = re.compile(rf"(?<![\w.,])([-−])?({_INT})(?:\.(\d+))?\s?%")
_AMPM = r"(?:\s?([AaPp])\.?\s?[Mm](?![A-Za-z])(\.)?)"
_CLOCK = re.compile(rf"(?<![\d:.])([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?(?![\d:]){_AMPM}?")
_HOUR_AMPM = re.compile(rf"(?<![\d:.])(1[0-2]|0?[1-9]){_AMPM}")
_ORDINAL = re.compile(r"(?<![\w.])(\d+)(?:st|nd|rd|th)\b", re.I)
_MONTHS = {
    m[:3]: m
    for m in (
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    )
}
_MONTH = (
    r"(Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\.?\s+([0-3]?\d)(?![\d:]|[.,]\d)")
_DAY_MONTH = re.compile(rf"(?<![\w.,])([0-3]?\d)\s+(?:of\s+)?{_MONTH}\b")
_YEAR = r"(1[1-9]\d\d|20\d\d)"
_YEAR_AFTER = re.compile(
    rf"\b((?:(?i:in|since|by|until|till|from|between|during|before|after|of|year|circa|early|late|mid|spring"
    rf"|summer|autumn|fall|winter)|{_MONTH[1:-1]})(?:\s+[a-z-]+)?,?\s+){_YEAR}(?![\d%]|[.,]\d)"
)
_ISO_DATE = re.compile(r"(?<![\w.-])(1[1-9]\d\d|20\d\d)-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])(?![\w-])")
_YEAR_BEFORE = re.compile(rf"(?<![\w.,$€£¥]){_YEAR}(?=\s?(?:AD|BC|BCE|CE)\b)")
_DECADE = re.compile(r"(?<![\w.,])'?(1[1-9]\d0|20\d0|[2-9]0)'?s\b")
_RANGE = re.compile(r"(?<![\d.,-])(\d{1,3})\s?[-–]\s?(\d{1,3})(?![\d.,]|[-–]\d)")
_NUMBER = re.compile(rf"(?:(?<![^\s(\[/])([-−]))?(?<![\w.,])({_INT})(?:\.(\d+))?(?!\d|[.,]\d)")
_PHONE = re.compile(r"(?<![\w.,-])(?:\+\d{1,3}-)?(?:\(\d{3}\)\s?|\d{3}-)?\d{3}-\d{4}(?![\w-])")
_HASH_NUMBER = re.compile(r"(?<!\w)#(?=\d)")
_UNITS = {  # symbol after a number -> words, "|s" where the plural adds "s"
    "km/h": "kilometer|s per hour",
    "kph": "kilometer|s per hour",
    "mph": "mile|s per hour",
    "km": "kilometer|s",
    "kg": "kilogram|s",
    "cm": "centimeter|s",
    "mm": "millimeter|s",
    "s": "second|s",
    "ms": "millisecond|s",
    "min": "minute|s",
    "kHz": "kilohertz",
    "Hz": "hertz",
    "GB": "gigabyte|s",
    "MB": "megabyte|s",
    "kW": "kilowatt|s",
    "W": "watt|s",
    "V": "volt|s",
    "mAh": "milliamp hour|s",
    "m": "meter|s",
    "g": "gram|s",
}
_UNIT = re.compile(rf"(?<![\w.,])((?:{_INT})(?:\.\d+)?)\s?({'|'.join(map(re.escape, _UNITS))})(?![\w/])")


def _int_words(digits: str) -> str:
    digits = digits.replace(",", "")
    if (len(digits) > 1 and digits[0] == "0") or len(digits) > 15:
        return " ".join(num2words(int(d)) for d in digits)  # codes, ids: digit by digit
    return num2words(int(digits))


def _number_words(sign: str | None, whole: str, frac: str | None) -> str:
    words = _int_words(whole)
    if frac:
        words += " point " + " ".join(num2words(int(d)) for d in frac)
    return ("minus " + words) if sign else words


def _money(sign: str | None, symbol: str, whole: str, frac: str | None, scale: str | None) -> str:
    one, many, sub_one, sub_many = _CURRENCIES[symbol]
    if scale:
        scale = scale.lower()
        scale = {"k": "thousand", "m": "million", "b": "billion"}.get(scale.rstrip("n"), scale)
        words = f"{_number_words(None, whole, frac)} {scale} {many}"
    else:
        n = int(whole.replace(",", ""))
        cents = int((frac or "0").ljust(2, "0")) if sub_one else 0
        parts = [f"{_int_words(whole)} {one if n == 1 else many}"] if n or not cents else []
        if cents:
            parts.append(f"{num2words(cents)} {sub_one if cents == 1 else sub_many}")
        words = " and ".join(parts)
    return ("minus " + words) if sign else words


def _clock(h: int, m: int, s: str | None, ampm: str | None, dot: str | None, match: re.Match[str]) -> str:
    if m:
        words = f"{num2words(h)} {'oh ' * (m < 10)}{num2words(m)}"
    else:  # "three p m", "nine o'clock", "eighteen hundred"
        words = (
            num2words(h)
            if ampm
            else "midnight"
            if h == 0
            else num2words(h) + (" o'clock" if h <= 12 else " hundred")
        )
    if s and int(s):
        words += f" and {num2words(int(s))} seconds"
    if ampm:
        words += f" {ampm.lower()} m"
        rest = match.string[match.end() :]
        if dot and (not rest.strip() or re.match(r"\s+[A-Z]", rest)):
            words += "."  # "p.m." ended the sentence
    return words


def _year_words(year: str) -> str:
    return num2words(int(year), to="year")


def _plural(words: str) -> str:
    return words[:-1] + "ies" if words.endswith("y") else words + "s"


def speak_numbers(text: str) -> str:
    """Rewrite every number in ``text`` as the words a person would say.

    Example: "$4.50" → "four dollars and fifty cents".
    """
    text = _MONEY_PREFIX.sub(lambda m: _money(m[1], m[2], m[3], m[4], m[5]), text)
    text = _MONEY_SUFFIX.sub(lambda m: _money(m[1], m[4], m[2], m[3], None), text)
    text = _PERCENT.sub(lambda m: _number_words(m[1], m[2], m[3]) + " percent", text)
    text = _CLOCK.sub(lambda m: _clock(int(m[1]), int(m[2]), m[3], m[4], m[5], m), text)
    text = _HOUR_AMPM.sub(lambda m: _clock(int(m[1]), 0, None, m[2], m[3], m), text)
    text = _ORDINAL.sub(lambda m: num2words(int(m[1]), to="ordinal"), text)
    text = _ISO_DATE.sub(
        lambda m: (
            f"{list(_MONTHS.values())[int(m[2]) - 1]} "
            f"{num2words(int(m[3]), to='ordinal')}, {_year_words(m[1])}"
        ),
        text,
    )
    text = _MONTH_DAY.sub(
        lambda m: (
            f"{_MONTHS[m[1][:3]]} {num2words(int(m[2]), to='ordinal')}" if 1 <= int(m[2]) <= 31 else m[0]
        ),
        text,
    )
    text = _DAY_MONTH.sub(
        lambda m: (
            f"{num2words(int(m[1]), to='ordinal')} of {_MONTHS[m[2][:3]]}" if 1 <= int(m[1]) <= 31 else m[0]
        ),
        text,
    )
    text = _YEAR_AFTER.sub(lambda m: m[1] + _year_words(m[2]), text)
    text = _YEAR_BEFORE.sub(lambda m: _year_words(m[1]), text)
    text = _DECADE.sub(lambda m: _plural(_year_words(m[1]) if len(m[1]) == 4 else num2words(int(m[1]))), text)
    text = _PHONE.sub(
        lambda m: ", ".join(" ".join(num2words(int(d)) for d in group) for group in re.findall(r"\d+", m[0])),
        text,
    )
    text = _RANGE.sub(lambda m: f"{num2words(int(m[1]))} to {num2words(int(m[2]))}", text)
    text = _HASH_NUMBER.sub("number ", text)
    text = _UNIT.sub(lambda m: f"{m[1]} {_UNITS[m[2]].replace('|s', 's' if m[1] != '1' else '')}", text)
    return _NUMBER.sub(  # "2.5x" -> "two point five x"
        lambda m: _number_words(m[1], m[2], m[3]) + " " * m.string[m.end() : m.end() + 1].isalpha(), text
    )
