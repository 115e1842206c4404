"""Spoken durations, counts and angles as the small-model profile reads them: a table of what people say."""

from __future__ import annotations

import pytest

from agent.conversation.small.quantities import (
    spoken_count,
    spoken_degrees,
    spoken_durations,
    spoken_seconds,
)

pytestmark = pytest.mark.small_model

SECONDS = [
    ("set a timer for half an hour", 1800),
    ("a quarter of an hour", 900),
    ("three quarters of an hour", 2700),
    ("a quarter of a minute", 15),
    ("half a minute", 30),
    ("1/2 hour", 1800),
    ("set a timer for 2.5 minutes", 150),
    ("1.5 hours", 5400),
    ("0.5 seconds", 0.5),
    ("an hour and a half", 5400),
    ("a minute and a half", 90),
    ("two hours and a half", 9000),
    ("one and a half hours", 5400),
    ("two and a half minutes", 150),
    ("1 hour 30 minutes", 5400),
    ("two hours and fifteen minutes", 8100),
    ("a minute and 30 seconds", 90),
    ("1 minute, 30 seconds", 90),
    ("five minutes", 300),
    ("ten seconds", 10),
    ("an hour", 3600),
    ("a minute", 60),
    ("90 seconds", 90),
    ("twenty-five seconds", 25),
    ("forty five seconds", 45),
    ("twenty one seconds", 21),
    ("one second", 1),
    ("a hundred and twenty seconds", 120),
    ("one hundred seconds", 100),
    ("a couple of minutes", 120),
    ("a few seconds", 3),
    ("10 mins", 600),
    ("2 hrs", 7200),
    ("minus 5 seconds", -5),
    ("negative two minutes", -120),
    ("set a timer", None),
    ("what time is it", None),
    ("set a timer for 3 seconds and another one for 6 seconds", None),
]


@pytest.mark.parametrize(("said", "seconds"), SECONDS)
def test_a_duration_is_read_as_people_say_it(said, seconds):
    assert spoken_seconds(said) == seconds


@pytest.mark.parametrize(
    ("said", "durations"),
    [
        ("set a timer for 3 seconds and another one for 6 seconds", [3, 6]),
        ("10 minutes and 5 minutes", [600, 300]),
        ("one for five minutes and one for an hour", [300, 3600]),
        ("five minutes and thirty seconds", [330]),
        ("nothing said", []),
    ],
)
def test_several_durations_are_told_apart_from_one_compound_one(said, durations):
    assert spoken_durations(said) == durations


@pytest.mark.parametrize(
    ("said", "count"),
    [
        ("nod a few times", 3),
        ("nod twice", 2),
        ("wave once", 1),
        ("thrice", 3),
        ("nod three times", 3),
        ("wave 2 times", 2),
        ("a couple of times", 2),
        ("a couple times", 2),
        ("several times", 3),
        ("nod ten times", 10),
        ("twenty times", 20),
        ("a few more times", 3),
        ("what time is it", None),
        ("one more time", None),
        ("once or twice", None),
        ("wave", None),
    ],
)
def test_a_count_is_read_as_people_say_it(said, count):
    assert spoken_count(said) == count


@pytest.mark.parametrize(
    ("said", "degrees"),
    [
        ("turn 30 degrees", 30),
        ("forty-five degrees", 45),
        ("12.5 degrees", 12.5),
        ("ninety degrees to the left", 90),
        ("a hundred and twenty degrees", 120),
        ("half a degree", 0.5),
        ("look left", None),
        ("30 degrees and then 40 degrees", None),
    ],
)
def test_an_angle_is_read_as_people_say_it(said, degrees):
    assert spoken_degrees(said) == degrees
