"""The same again on the stand-in, through ``chat``: "do that again", "what did you just say?".

A capable model does these from its history (the conformance suite's ``again`` cases); the
small-model profile answers them itself: the last turn's calls run again with their arguments,
the last turn's words are said again as they were.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.conversation.small.again import asks_again, asks_what_was_said

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.small_model


@pytest.mark.parametrize(
    ("said", "again", "what"),
    [
        ("Do that again.", True, False),
        ("again", True, False),
        ("One more time!", True, False),
        ("Once more, please.", True, False),
        ("Repeat that.", True, False),
        ("Don't do that again.", False, False),
        ("Never again.", False, False),
        ("What did you just say?", False, True),
        ("Say that again?", False, True),
        ("Pardon?", False, True),
        ("Sorry, I didn't catch that.", False, True),
        ("What time is it?", False, False),
    ],
)
def test_the_words_that_ask_for_the_same_again(said, again, what):
    assert asks_again(said) == again and asks_what_was_said(said) == what


def test_chat_repeats_the_last_action_and_the_last_words():
    typed = "Wave with your left hand.\nDo that again.\nOne more time!\nWhat did you just say?\n"
    r = subprocess.run(
        [sys.executable, "-m", "agent", "chat", "--json"],
        input=typed,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    evs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert next(e for e in evs if e["event"] == "ready")["profile"] == "small"
    calls = [(e["turn_id"], e["name"], e["arguments"]) for e in evs if e["event"] == "tool_call"]
    turns = sorted({t for t, _, _ in calls})
    assert len(turns) == 3, calls  # the wave, "do that again", "one more time"; no call for the words
    first = calls[0][1:]
    assert first[0] == "wave" and first[1]["hand"] == "left", calls
    for turn in turns:
        assert [(n, a) for t, n, a in calls if t == turn] == [first], calls
    replies = [e["text"] for e in evs if e["event"] == "reply"]
    assert len(replies) == 4 and replies[3] == replies[2], replies
