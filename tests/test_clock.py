"""The time anywhere and dates relative to today (issue 50, item 2), on the skills themselves.

``get_time`` with a place (a city of the table, an IANA zone said as it is or by its city) and
``get_date`` with a day in words, on a fixed clock (Monday 7 December 2026, 14:05 UTC), through
the real skill registry; where the robot cannot know, it says so in words. The words-to-arguments
readers the small model uses (``from_words``) are checked on what people say.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from agent.skills import SkillContext, load_registry

NOW = datetime(2026, 12, 7, 14, 5, tzinfo=timezone.utc)  # a Monday


@pytest.fixture(scope="module")
def clock():
    reg = load_registry([], True, ["get_time", "get_date"], entry_points=False)
    ctx = SkillContext(robot=None, now=lambda: NOW)
    return lambda name, **args: reg.call(name, args, ctx)


@pytest.mark.parametrize(
    ("place", "said"),
    [
        ("", "It is 14:05 on Monday 7 December."),
        ("Tokyo", "In Tokyo it is 23:05 on Monday 7 December."),
        ("in new york", "In New York it is 09:05 on Monday 7 December."),
        ("Sydney", "In Sydney it is 01:05 on Tuesday 8 December."),
        ("Asia/Kolkata", "In Kolkata it is 19:35 on Monday 7 December."),
        ("kolkata", "In Kolkata it is 19:35 on Monday 7 December."),  # any IANA zone by its city
        ("UTC", "In UTC it is 14:05 on Monday 7 December."),
        ("london time", "In London it is 14:05 on Monday 7 December."),
    ],
)
def test_the_time_in_a_place(clock, place, said):
    out = clock("get_time", place=place)
    assert out.ok and out.result == said, out


def test_a_place_without_a_known_zone_is_said_honestly(clock):
    out = clock("get_time", place="Atlantis")
    assert not out.ok and out.raised == "I don't know the time zone of Atlantis.", out


@pytest.mark.parametrize(
    ("day", "said"),
    [
        ("today", "Today is Monday 7 December."),
        ("tomorrow", "Tomorrow is Tuesday 8 December."),
        ("yesterday", "Yesterday was Sunday 6 December."),
        ("next Friday", "Next Friday is 11 December."),
        ("Monday", "Today is Monday 7 December."),
        ("next monday", "Next Monday is 14 December."),
        ("last monday", "Last Monday was 30 November."),
        ("in three days", "In three days it will be Thursday 10 December."),
        ("in 30 days", "In 30 days it will be Wednesday 6 January 2027."),
        ("two weeks ago", "Two weeks ago it was Monday 23 November."),
        ("the day after tomorrow", "The day after tomorrow it will be Wednesday 9 December."),
    ],
)
def test_the_date_of_a_day_said_relative_to_today(clock, day, said):
    out = clock("get_date", day=day)
    assert out.ok and out.result == said, out


def test_a_day_that_cannot_be_told_is_said_honestly(clock):
    out = clock("get_date", day="someday")
    assert not out.ok and out.raised == 'I can\'t tell which day "someday" is.', out


def test_a_naive_clock_is_the_local_time():
    """``ctx.now`` defaults to the machine's local time, without a zone: converted as local."""
    from skills.clock import find_zone

    here = datetime(2026, 12, 7, 14, 5)
    zone, name = find_zone("Tokyo")
    assert name == "Tokyo" and here.astimezone().astimezone(zone).utcoffset().total_seconds() == 9 * 3600


@pytest.mark.parametrize(
    ("said", "place"),
    [
        ("what time is it in Tokyo?", "tokyo"),
        ("what time is it?", ""),
        ("what's the time in New York right now", "new york"),
        ("what time is it in Atlantis?", "Atlantis"),
        ("time in Asia/Kolkata please", "asia/kolkata"),
    ],
)
def test_the_place_is_read_from_the_words(said, place):
    from skills.clock import place_in

    assert place_in(said) == place


@pytest.mark.parametrize(
    ("said", "day"),
    [
        ("what day is it tomorrow?", "tomorrow"),
        ("what's the date next Friday?", "next Friday"),
        ("what is the date in three days?", "in three days"),
        ("what's the date?", "today"),
    ],
)
def test_the_day_is_read_from_the_words(said, day):
    from skills.clock import day_in

    assert day_in(said) == day


def test_day_offsets_follow_the_week():
    from skills.clock import day_offset

    friday = date(2026, 12, 11)
    assert day_offset("friday", friday) == 0 and day_offset("next friday", friday) == 7
    assert day_offset("last friday", friday) == -7 and day_offset("saturday", friday) == 1
