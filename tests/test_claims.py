"""Replies that claim a movement no call made: the sentence is left out, "Sorry, I can't do that." said.

Stream-level cases feed :class:`~agent.conversation.small.claims.ClaimGuard` the same text in deltas of
every size; the conversation case runs the real SmolLM2-135M (greedy) through typed turns.
"""

from __future__ import annotations

import pytest

from agent.conversation.small.claims import CANNOT, MISSED, ClaimGuard, asked_for, claims_motion
from agent.events import Reply, ToolCall
from agent.speech.sentences import split_sentences

pytestmark = pytest.mark.small_model


@pytest.mark.parametrize(
    "sentence,claims",
    [
        ("I am waving my right hand.", True),
        ("I'm waving my right arm.", True),
        ("I am flying to the moon.", True),
        ("I am now dancing for you!", True),
        ("I am not able to see you.", False),
        ("I'm happy to help!", False),
        ("I'm looking forward to it.", False),
        ("I am looking to the left.", True),
        ("It is 05:12 on Saturday 5 December.", False),
        ("Sure!", False),
        ("Why did the robot wave?", False),
        # paraphrases: a dropped g, the future, repeating a movement (issue 50)
        ("I am shakin' my head 3 times.", True),
        ("I am going to wave.", True),
        ("I'm gonna nod for you.", True),
        ("I'll wave to you.", True),
        ("I will dance now.", True),
        ("I'm about to spin.", True),
        ("I am repeating the wave.", True),
        ("I'm doing the dance.", True),
        ("I'm going to tell you a joke.", False),
        ("I'll tell you when it is done.", False),
        ("I will be here.", False),
    ],
)
def test_a_sentence_claims_a_movement_when_it_says_the_robot_is_moving_now(sentence, claims):
    assert claims_motion(sentence) is claims


def _guarded(text: str, step: int, acted: bool = False) -> tuple[str, list[str]]:
    out: list[str] = []
    guard = ClaimGuard(out.append, lambda: acted)
    for i in range(0, len(text), step):
        guard.feed(text[i : i + step])
    guard.flush()
    return "".join(out), guard.dropped


@pytest.mark.parametrize("step", [1, 2, 3, 5, 8, 100])
def test_a_claim_is_left_out_to_its_end_and_the_rest_goes_on_in_any_deltas(step):
    said, dropped = _guarded("Sure! I am flying to the moon. That is fun.", step)
    assert said.strip() == "Sure! That is fun." and dropped == ["I am flying to the moon."]
    said, dropped = _guarded("I'm happy. I am now dancing for you!", step)
    assert said.strip() == "I'm happy." and dropped == ["I am now dancing for you!"]
    said, dropped = _guarded("I am looking forward to it. I am looking left.", step)
    assert said.strip() == "I am looking forward to it." and dropped == ["I am looking left."]
    said, dropped = _guarded("Okay. I am going to wave at you. Bye.", step)
    assert said.strip() == "Okay. Bye." and dropped == ["I am going to wave at you."]
    said, dropped = _guarded("I'm going to tell you a joke.", step)
    assert said.strip() == "I'm going to tell you a joke." and dropped == []
    said, dropped = _guarded("Meet me at 3 p.m. today. It is 05:12.", step)
    assert said == "Meet me at 3 p.m. today. It is 05:12." and dropped == []


def test_after_a_call_the_same_words_are_said():
    text = "I am waving my right hand."
    assert _guarded(text, 3, acted=True) == (text, [])
    assert _guarded(text, 3) == ("", [text])
    guard = ClaimGuard(lambda d: None, lambda: False)
    guard.feed("Sure! I am waving my right hand. Bye.")
    guard.flush()
    assert guard.kept("Sure! I am waving my right hand. Bye.") == "Sure! Bye."


def test_turns_without_a_call_never_say_the_robot_moves(greedy_agent):
    """After a wave, requests the 135M model does not map to a tool (measured: "I am waving my
    right hand.", "I'm waving my right arm.", "I am flying to the moon." with no call)."""
    agent = greedy_agent
    agent.core.conversation.history.clear()
    asks = ["please wave your right hand", "你好，请向左看", "Bitte schau nach links", "fly to the moon"]
    evs = agent.text(*asks)
    replies = {e.turn_id: e.text for e in evs.of(Reply)}
    assert [c.tool for c in evs.of(ToolCall, 0)] == ["wave"]
    assert len(replies) == len(asks), replies
    for turn_id, reply in replies.items():
        if not evs.of(ToolCall, turn_id):
            assert reply and not any(claims_motion(s) for s in split_sentences(reply)), (turn_id, reply)
    # "fly to the moon" asked to fly: the robot cannot; a copied wave answered no one's request.
    # Which of the two foreign requests the greedy model answers with a copied claim (said as
    # MISSED) moves with the tools prompt (the German one since cancel_timer joined, the Chinese
    # one since abilities did, neither since the skills of issue 50: it repeats both requests);
    # the checks above hold for every one of them.
    assert replies[3] == CANNOT, replies
    assert all(replies[t] == MISSED or not evs.of(ToolCall, t) for t in (1, 2)), replies


@pytest.mark.parametrize(
    ("said", "claim", "asked"),
    [
        ("fly to the moon", "I am flying to the moon.", True),
        ("please nod twice", "I am nodding.", True),
        ("can you wave at me", "I'm waving my right arm.", True),
        ("Can you dance for me?", "I am now dancing for you!", True),
        ("clap your hands", "I am clapping.", True),
        ("tell me a short joke", "I am looking -30 degrees to the side and 0 degrees up.", False),
        ("你好，请向左看", "I am waving my right hand.", False),
        ("Bitte schau nach links", "I'm waving my right arm.", False),
    ],
)
def test_a_claim_was_asked_for_when_the_words_name_its_verb(said, claim, asked):
    assert asked_for(said, claim) is asked


def test_only_a_movement_that_worked_lets_a_reply_say_the_robot_moves():
    """A new user's chat: "who is in front of you" after "look at me" ran only describe_scene and
    said "I am turning toward the person ..." (a copied look_at result): a reading moves nothing."""
    from agent.conversation.records import TurnResult
    from agent.conversation.small.policy import moved
    from agent.skills import ToolOutcome, load_registry

    reg = load_registry([], entry_points=False)
    res = TurnResult()
    res.calls.append(("describe_scene", {}, ToolOutcome(True, {"summary": "1 person"})))
    res.calls.append(("wave", {}, ToolOutcome(False, "wave failed", raised="my emergency stop is on")))
    assert not moved(res, reg)
    res.calls.append(("look_at", {"target": "person"}, ToolOutcome(True, "I am turning toward the person")))
    assert moved(res, reg)
