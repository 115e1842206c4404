"""The one sentence splitter (agent.speech.sentences): finished text, the text stream, the sentence cap.

Every hard case is checked three ways: split_sentences on the whole text, SentenceStream fed
1, 3 and 7 characters at a time (same sentences; pieces joined give the input back up to white
space) and SentenceCap at every limit (forwards exactly the first ``limit`` sentences).
"""

from __future__ import annotations

import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.speech.sentences import SentenceCap, SentenceStream, limit_sentences, split_sentences


def _case(name: str, text: str, *want: str) -> object:
    return pytest.param(text, list(want), id=name)


# Comments name the post-processing rule of agent.speech.sentences where pysbd alone gets a case wrong.
HARD = [
    _case(
        "decimal", "The servo is at 3.5 degrees. I moved it.", "The servo is at 3.5 degrees.", "I moved it."
    ),
    _case("time", "Wake me at 8:00. Then dance.", "Wake me at 8:00.", "Then dance."),
    _case("money", "It costs $49.95. Cheap!", "It costs $49.95.", "Cheap!"),
    _case("doctor", "Dr. Smith is here. He waves.", "Dr. Smith is here.", "He waves."),
    _case("eg", "Use e.g. a cable. Then plug it in.", "Use e.g. a cable.", "Then plug it in."),
    _case(
        "ie", "Take the left one, i.e. the red one. Done.", "Take the left one, i.e. the red one.", "Done."
    ),
    _case("am-pm-lowercase", "At 5 p.m. we go. Then stop.", "At 5 p.m. we go.", "Then stop."),
    _case("pm-ends", "Call me at 3 p.m. Then dance.", "Call me at 3 p.m.", "Then dance."),
    _case("initials-us", "The U.S. is big. Yes.", "The U.S. is big.", "Yes."),
    # Inline list: a boundary must follow . ! ? or a line break (pysbd cuts before "2.").
    _case("inline-list", "1. first 2. second", "1. first 2. second"),
    # Never a colon: pysbd makes "Steps:" a sentence; never after a list marker ("Steps: 1.").
    _case("steps", "Steps: 1. Open it. 2. Close it.", "Steps: 1. Open it.", "2. Close it."),
    _case("steps-lines", "Steps:\n1. Open it.\n2. Close it.", "Steps:\n1. Open it.", "2. Close it."),
    # A number ends a sentence before a capital (pysbd sees "1."-"99." masked, _MARKER_BREAK decides).
    _case("count-to-ten", "Count to 10. Then stop.", "Count to 10.", "Then stop."),
    # A boundary must follow white space (pysbd cuts the URL at its "?").
    _case(
        "url",
        "Go to https://example.com/a.b?c=1. Then wait.",
        "Go to https://example.com/a.b?c=1.",
        "Then wait.",
    ),
    _case(
        "domain",
        "Visit example.com for the manual. It is free.",
        "Visit example.com for the manual.",
        "It is free.",
    ),
    _case("domain-ends", "Visit example.com. Then wait.", "Visit example.com.", "Then wait."),
    _case("question-exclaim", "Really? Yes! Okay.", "Really?", "Yes!", "Okay."),
    # "?" + lowercase word does not end (quotes are masked for pysbd, which would otherwise pair them).
    _case("quoted-question", '"Why?" he asked.', '"Why?" he asked.'),
    # "!!!" + capital ends (pysbd keeps "Wow!!! Great." whole but cuts "Wow!! Great.").
    _case("bangs", "Wow!!! Great.", "Wow!!!", "Great."),
    # An ellipsis is a pause (pysbd cuts after "..." but not after "…").
    _case("ellipsis", "Well... I think so. Yes.", "Well... I think so.", "Yes."),
    _case("ellipsis-char", "Hmm… I went home. Yes.", "Hmm… I went home.", "Yes."),
    # A closing quote belongs to the sentence before (pysbd puts it in front of the next one).
    _case("closing-quote", 'The end." Next.', 'The end."', "Next."),
    _case("quote", 'He said "hi." Then he left.', 'He said "hi."', "Then he left."),
    _case("parens", "He said (see fig. 2). Ok.", "He said (see fig. 2).", "Ok."),
    # Stray punctuation joins the sentence before.
    _case("stray-punctuation", "Hi there. ! ? Bye.", "Hi there. ! ?", "Bye."),
    _case("one", "Hello", "Hello"),
    _case("empty", ""),
    _case("blank", "   "),
    _case("newline", "\n"),
]


def _stream(text: str, step: int, clause_chars: int = 120) -> list[str]:
    s = SentenceStream(clause_chars)
    out = [p for i in range(0, len(text), step) for p in s.feed(text[i : i + step])]
    return out + s.flush()


def _cap(text: str, step: int, limit: int, rounds: int = 1) -> tuple[str, SentenceCap]:
    got: list[str] = []
    cap = SentenceCap(limit, got.append, None)
    for i in range(0, len(text), step):
        cap.feed(text[i : i + step])
    cap.flush()
    return "".join(got), cap


def _words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize(("text", "want"), HARD)
def test_split_sentences_hard_cases(text: str, want: list[str]) -> None:
    assert split_sentences(text) == want


@pytest.mark.parametrize("step", [1, 3, 7])
@pytest.mark.parametrize(("text", "want"), HARD)
def test_stream_hard_cases(text: str, want: list[str], step: int) -> None:
    pieces = _stream(text, step)
    assert pieces == want
    assert _words(" ".join(pieces)) == _words(text)


@pytest.mark.parametrize("step", [1, 3, 7])
@pytest.mark.parametrize(("text", "want"), HARD)
def test_cap_hard_cases(text: str, want: list[str], step: int) -> None:
    for limit in range(1, len(want) + 2):
        forwarded, cap = _cap(text, step, limit)
        assert _words(forwarded) == _words(" ".join(want[:limit])), limit
        assert cap.cancel.is_set() == (limit <= len(want))
    forwarded, cap = _cap(text, step, 0)
    assert forwarded == text and not cap.cancel.is_set()


def test_steps_never_make_a_piece_that_is_only_a_number() -> None:
    text = "Steps: 1. Open it. 2. Close it. 3. Done."
    for pieces in [split_sentences(text), *(_stream(text, step) for step in (1, 2, 3, 5))]:
        assert not any(re.fullmatch(r"\(?\d+[.)]?", p) for p in pieces), pieces


# --- split_sentences / limit_sentences --------------------------------------------------------------


def test_split_sentences_basic() -> None:
    text = "Hello! I am Bolt. It is three thirty p m. Dr. Smith is here, is he not?"
    assert split_sentences(text) == [
        "Hello!",
        "I am Bolt.",
        "It is three thirty p m.",
        "Dr. Smith is here, is he not?",
    ]


def test_split_long_sentence_at_clauses() -> None:
    text = (
        "This sentence is long, with several clauses, that go on and on; it keeps going — and going, "
        "until it is longer than the limit allows, which is fifty characters here."
    )
    pieces = split_sentences(text, max_chars=50)
    assert len(pieces) > 2
    assert all(0 < len(p) <= 50 and p == p.strip() for p in pieces)
    assert " ".join(pieces).split() == text.split()
    assert pieces[0] == "This sentence is long, with several clauses,"  # the last clause end that fits
    assert split_sentences(text) == [text]  # 0: no limit


def test_split_without_clause_boundaries_cuts_between_words_and_inside_huge_words() -> None:
    pieces = split_sentences("word " * 30 + "x" * 70, max_chars=30)
    assert all(0 < len(p) <= 30 for p in pieces)
    assert "".join("".join(pieces).split()) == "word" * 30 + "x" * 70


def test_split_sentences_rejects_negative_max_chars() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        split_sentences("Hi.", max_chars=-1)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abc de,;.!?—-\n")), max_size=300), st.integers(5, 80))
def test_split_sentences_properties(text: str, max_chars: int) -> None:
    pieces = split_sentences(text, max_chars)
    assert all(p and p == p.strip() and len(p) <= max_chars for p in pieces)
    assert "".join("".join(pieces).split()) == "".join(text.split())


@pytest.mark.parametrize(
    ("n", "want"),
    [
        (0, "One. Two! Three?"),
        (1, "One."),
        (2, "One. Two!"),
        (3, "One. Two! Three?"),
        (9, "One. Two! Three?"),
    ],
)
def test_limit_sentences(n: int, want: str) -> None:
    assert limit_sentences("  One. Two! Three?  ", n) == want


def test_limit_sentences_counts_like_the_splitter() -> None:
    assert (
        limit_sentences("The servo is at 3.5 degrees. I moved it. Done.", 2)
        == "The servo is at 3.5 degrees. I moved it."
    )
    long = "A, " * 150 + "end."
    assert limit_sentences(long + " Next.", 1) == long  # long sentences are not cut


def test_limit_sentences_rejects_negative() -> None:
    with pytest.raises(ValueError):
        limit_sentences("One.", -1)


# --- SentenceStream -----------------------------------------------------------------------------


def test_stream_releases_sentences_as_they_complete() -> None:
    s = SentenceStream(clause_chars=60)
    text = (
        "Sure! It is 3.5 degrees, Mr. Smith. I can wave, nod, dance and look around for you, all at once, "
        "if you like. Bye"
    )
    got = [p for i in range(0, len(text), 4) for p in s.feed(text[i : i + 4])]
    assert got[:2] == ["Sure!", "It is 3.5 degrees, Mr. Smith."]
    assert all(len(p) <= 60 for p in got[2:])
    rest = s.flush()
    assert " ".join(got + rest) == text
    assert got + rest == split_sentences(text, 60)
    assert s.flush() == []


def test_stream_waits_for_the_next_word_only() -> None:
    s = SentenceStream()
    assert s.feed("It is 3.") == []
    assert s.feed("5 degrees. I") == []  # "I" may still be "I.e."
    assert s.feed(" moved") == ["It is 3.5 degrees."]
    assert s.flush() == ["I moved"]


def test_stream_cuts_a_long_first_sentence_before_it_ends() -> None:
    s = SentenceStream(clause_chars=40)
    first = s.feed("When you are ready, and only when the lights are green, we will start the long walk ")
    assert first and first[0] == "When you are ready,"
    assert all(len(p) <= 40 for p in first)


def test_stream_flush_without_words_gives_nothing() -> None:
    s = SentenceStream()
    assert s.feed(" ... ") == [] and s.flush() == []
    with pytest.raises(ValueError):
        SentenceStream(-1)


def _chunks(text: str, cuts: list[int]) -> list[str]:
    edges = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in zip(edges, edges[1:], strict=False)]


# Random text over characters and a few hard words, so sentences, abbreviations and numbers occur.
_STREAM_TEXT = st.lists(
    st.sampled_from(
        [*"aZ  19.!?,;:—-\"()'\n$", " Dr.", " e.g.", " 3.5", " Then", " 2. ", " ...", " https://a.io/x?y=1."]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(_STREAM_TEXT, st.lists(st.integers(0, 400), max_size=40), st.sampled_from([0, 12, 40]))
def test_stream_pieces_give_back_the_input(text: str, cuts: list[int], clause_chars: int) -> None:
    s = SentenceStream(clause_chars)
    pieces = [p for chunk in _chunks(text, cuts) for p in s.feed(chunk)] + s.flush()
    if any(ch.isalnum() for ch in text):
        assert "".join("".join(pieces).split()) == "".join(text.split())
        assert pieces == split_sentences(text, clause_chars)
    else:
        assert pieces == []


# --- SentenceCap --------------------------------------------------------------------------------


def test_cap_two_sentences_with_a_decimal() -> None:
    got: list[str] = []
    cap = SentenceCap(2, got.append, None)
    for ch in "The servo is at 3.5 degrees. I moved it. Then I danced.":
        cap.feed(ch)
    assert "".join(got) == "The servo is at 3.5 degrees. I moved it."
    assert cap.cancel.is_set() and not cap.user_cancelled()
    cap.feed(" More.")
    assert "".join(got) == "The servo is at 3.5 degrees. I moved it."


def test_cap_holds_back_only_a_word_that_may_begin_a_sentence() -> None:
    got: list[str] = []
    cap = SentenceCap(1, got.append, None)
    cap.feed("It is at 3.")
    assert "".join(got) == "It is at 3."  # "3." or "3.5": the same sentence either way
    cap.feed("5 degrees. I")
    assert "".join(got) == "It is at 3.5 degrees."  # "I" may begin sentence 2
    cap.feed(" moved")
    assert "".join(got) == "It is at 3.5 degrees." and cap.cancel.is_set()


def test_cap_flush_forwards_the_held_word_within_the_cap() -> None:
    got: list[str] = []
    cap = SentenceCap(1, got.append, None)
    cap.feed("Call me at 3 p.m. today")
    assert "".join(got) == "Call me at 3 p.m."  # "p.m. Today" would end the sentence
    cap.flush()  # the round ended: "today" is part of it
    assert "".join(got) == "Call me at 3 p.m. today" and cap.cancel.is_set()
    cap = SentenceCap(1, got.append, None)
    got.clear()
    cap.feed("Done. Bye")
    cap.flush()
    assert "".join(got) == "Done." and cap.cancel.is_set()


def test_cap_counts_over_rounds() -> None:
    got: list[str] = []
    cap = SentenceCap(2, got.append, None)
    cap.feed("Let me check.")
    cap.flush()
    assert "".join(got) == "Let me check." and not cap.cancel.is_set()
    cap.feed("It is sunny. It is warm.")
    cap.flush()
    assert "".join(got) == "Let me check.It is sunny." and cap.cancel.is_set()


def test_cap_passes_everything_without_a_limit_and_keeps_the_callers_cancel_apart() -> None:
    got: list[str] = []
    user = threading.Event()
    cap = SentenceCap(0, got.append, user)
    cap.feed("One. Two. ")
    cap.feed("Three")
    assert got == ["One. Two. ", "Three"] and not cap.cancel.is_set()
    user.set()
    assert cap.cancel.is_set() and cap.user_cancelled()
    SentenceCap(1, None, None).feed("No receiver. Fine.")
    with pytest.raises(ValueError):
        SentenceCap(-1, None, None)


@settings(max_examples=100, deadline=None)
@given(_STREAM_TEXT, st.integers(1, 9), st.integers(1, 4))
def test_cap_forwards_exactly_the_first_sentences(text: str, step: int, limit: int) -> None:
    forwarded, cap = _cap(text, step, limit)
    sentences = split_sentences(text)
    assert _words(forwarded) == _words(" ".join(sentences[:limit]))
    has_words = any(ch.isalnum() for ch in text)  # "." alone is no sentence to count
    assert cap.cancel.is_set() == (has_words and len(sentences) >= limit)
