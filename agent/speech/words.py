"""The one word normaliser: every comparison of what was said uses these words.

Lower case; a word is a run of ASCII letters, digits and apostrophes (``what's``, ``10``);
everything else (punctuation, hyphens, accents Whisper rarely writes) separates words. Used
by ASR's hallucination filter, the echo, stop and wake checks, the end-of-turn continuation
rule, the tool prior, the repeat check and the benchmark's reply checks, so "Stop!", "stop."
and "STOP" are one word everywhere.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    """The words of ``text``, in order.

    Args:
        text: Any text (a transcript, a reply, a phrase from the config).

    Returns:
        Lower-case words; empty for text without letters or digits.
    """
    return _WORD.findall(text.lower())


def normalize(text: str) -> str:
    """``text`` as its words joined by single spaces (``"Stop, please!"`` → ``"stop please"``)."""
    return " ".join(words(text))
