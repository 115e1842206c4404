"""How long to wait before answering: the evidence of a pause's verdict and the speaker's own pauses.

A verdict that the user has finished is heard only once the silence has lasted long enough to
confirm it (:mod:`agent.pipeline.turn_taking`: the reply is prepared meanwhile and dropped if the
user goes on). How long depends on two things:

* **the evidence** (:func:`evidence`): ``strong`` when the words are certainly complete (the text
  model's score at or over ``[turn] strong_text``, Whisper clear about them, no rule in doubt)
  and another signal agrees: Smart Turn hears a finished turn (over ``strong_smart_turn``), or
  the words are a question (once the reply is prepared, a call of a skill with arguments that fit
  it counts as words surely complete: :func:`command_wait_ms`); ``doubtful`` when the words alone did not say
  finished (Smart Turn decided) or Whisper was unclear about them; ``normal`` otherwise. A stop
  phrase waits for nothing; an unfinished verdict waits for the long silence.
* **the speaker** (:class:`PauseModel`): the pauses a speaker makes inside their turns, learned
  over a conversation as LiveKit's dynamic endpointing learns them (an exponential average,
  ``alpha`` 0.9 on the history, bounded by 0.5 and 3.0 s). Every wait but a stop's grows by how
  much longer than the lower bound the learned pause is (:attr:`PauseModel.extra_ms`: 0 for a
  brisk speaker, 500 ms for one whose pauses average a second), so a slow speaker stops being cut
  off and a brisk one is answered after the shortest waits.

:func:`wait_ms` puts the two together; ``bench --eot`` measures the curve of false cut-offs
against the added latency for these waits, for the waits scaled, and for Smart Turn alone
(:mod:`tools.bench.eot`).
"""

from __future__ import annotations

from agent.config import TurnConfig

STOP = "stop"
"""A stop phrase: never waits."""
STRONG = "strong"
NORMAL = "normal"
DOUBTFUL = "doubtful"
UNFINISHED = "unfinished"
"""The verdict says the user is not done: the long silence ends the turn."""

CONFIRMED_RULES = frozenset({"text", "smart_turn"})
"""Verdicts the silence must confirm: a sentence that sounds finished may go on ("Turn your head to
the left, [0.6 s] and then wave"); a stop phrase never waits."""


def evidence(
    turn: TurnConfig,
    rule: str,
    complete: bool,
    text_score: float,
    smart_turn: float,
    unclear_words: bool,
    heard: str = "",
) -> str:
    """How sure a verdict is (see the module docstring).

    Args:
        turn: ``[turn]`` thresholds (``strong_text``, ``strong_smart_turn``).
        rule: The verdict's rule.
        complete: The verdict says finished.
        text_score: The text model's log10 probability that the sentence ends here (1.0: not run).
        smart_turn: Smart Turn's probability (-1: no model).
        unclear_words: Whisper was unclear about the words (``[turn] unclear_logprob``).
        heard: The transcript (a question mark at its end is a signal).

    Returns:
        :data:`STOP`, :data:`STRONG`, :data:`NORMAL`, :data:`DOUBTFUL` or :data:`UNFINISHED`.
    """
    if not complete:
        return UNFINISHED
    if rule not in CONFIRMED_RULES:
        return STOP
    if rule == "smart_turn" or unclear_words:
        return DOUBTFUL if turn.doubtful_confirm_ms else NORMAL
    words_sure = text_score <= 0.0 and text_score >= turn.strong_text
    agreed = smart_turn > turn.strong_smart_turn or heard.rstrip().endswith("?")
    return STRONG if turn.strong_confirm_ms and words_sure and agreed else NORMAL


def wait_ms(turn: TurnConfig, level: str, extra_ms: float = 0.0) -> int:
    """The silence a verdict of evidence ``level`` waits for before its reply is heard, ms.

    Args:
        turn: ``[turn]`` waits.
        level: :func:`evidence`'s answer.
        extra_ms: How much longer than ``pause_min_ms`` the speaker's pauses are
            (:attr:`PauseModel.extra_ms`; 0: not learned): every wait but a stop's grows by it.

    Returns:
        Silence counted from the end of speech, ms: 0 for a stop; for an unfinished verdict the
        long silence, grown (at most ``pause_max_ms`` plus the short silence, or the long
        silence when that is longer).
    """
    if level == STOP:
        return 0
    base = {
        STRONG: turn.strong_confirm_ms,
        NORMAL: turn.confirm_ms,
        DOUBTFUL: max(turn.confirm_ms, turn.doubtful_confirm_ms),
        UNFINISHED: turn.long_silence_ms,
    }[level]
    longest = max(turn.long_silence_ms, turn.pause_max_ms + turn.short_silence_ms)
    return int(round(min(base + max(0.0, extra_ms), longest)))


def command_wait_ms(turn: TurnConfig, level: str, smart_turn: float, extra_ms: float = 0.0) -> int:
    """The silence a verdict waits for once its prepared reply called a skill as the skill asks, ms.

    A command whose tool and arguments are clear (the model called a skill with side effects,
    its arguments valid as written: :meth:`agent.control.ReleaseGate.command_called`) says the
    words are a whole command, as a high text score does: with ``[turn] strong_on_command`` an
    ordinary verdict whose sound agrees (Smart Turn over ``strong_smart_turn``) then waits as a
    strong one. The sound keeps its veto: "Wave your right hand, [0.6 s] and say hello" is a
    clear command at its comma. Doubtful words stay doubtful (a misheard command can be clear too).

    Args:
        turn: ``[turn]`` waits and thresholds.
        level: :func:`evidence`'s answer.
        smart_turn: Smart Turn's probability at the pause (-1: no model).
        extra_ms: The speaker's learned extra pause, ms (as for :func:`wait_ms`).

    Returns:
        Silence counted from the end of speech, ms: :func:`wait_ms` at :data:`STRONG` for an
        ordinary verdict the sound agrees with, else :func:`wait_ms` at ``level``.
    """
    agreed = smart_turn > turn.strong_smart_turn
    if level == NORMAL and agreed and turn.strong_on_command and turn.strong_confirm_ms:
        return wait_ms(turn, STRONG, extra_ms)
    return wait_ms(turn, level, extra_ms)


class PauseModel:
    """A speaker's pauses inside their turns: an exponential average, bounded.

    ``value = alpha * value + (1 - alpha) * pause``, kept within ``[min_ms, max_ms]`` and
    starting at ``min_ms`` (LiveKit's dynamic endpointing: alpha 0.9, 0.5 s, 3.0 s).

    Args:
        alpha: Weight of the history, in (0, 1].
        min_ms: Lower bound and start, ms (> 0).
        max_ms: Upper bound, ms.

    Raises:
        ValueError: ``alpha`` outside (0, 1], ``min_ms`` not positive or over ``max_ms``.
    """

    def __init__(self, alpha: float = 0.9, min_ms: float = 500.0, max_ms: float = 3000.0) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha {alpha} must be in (0, 1]")
        if not 0.0 < min_ms <= max_ms:
            raise ValueError(f"need 0 < min_ms ({min_ms}) <= max_ms ({max_ms})")
        self.alpha, self.min_ms, self.max_ms = alpha, float(min_ms), float(max_ms)
        self.value_ms = self.min_ms
        self.samples = 0

    def observe(self, pause_ms: float) -> float:
        """Learn one pause the speaker made inside a turn (they went on after it).

        Args:
            pause_ms: The silence before they went on, ms (>= 0).

        Returns:
            The new average, ms.
        """
        value = self.alpha * self.value_ms + (1.0 - self.alpha) * max(0.0, pause_ms)
        self.value_ms = min(max(value, self.min_ms), self.max_ms)
        self.samples += 1
        return self.value_ms

    @property
    def extra_ms(self) -> float:
        """How much longer than the lower bound the speaker's pauses are, ms (0 until they pause longer)."""
        return self.value_ms - self.min_ms

    def reset(self) -> None:
        """Forget the speaker (a new conversation)."""
        self.value_ms, self.samples = self.min_ms, 0


def pause_model(turn: TurnConfig) -> PauseModel | None:
    """The ``[turn]`` pause model, or None when ``learn_pauses`` is off."""
    if not turn.learn_pauses:
        return None
    return PauseModel(turn.pause_alpha, turn.pause_min_ms, turn.pause_max_ms)
