"""Named control edges shared across threads: a stop signal, and the CPU arbiter.

Data travels between the pipeline's stages as typed messages (:mod:`agent.events`). Two things
must reach into a running loop from another thread, and each has one type here:

* :class:`StopSignal` — "stop after the current step". A turn's signal is set when the turn is
  cancelled (barge-in, a new turn, shutdown: :meth:`agent.pipeline.queues.TurnGate.stop_signal`);
  a child signal adds its own reasons (the reply cap is reached, a tool round's call is
  complete) and still stops when its parent does. Engines check it between tokens; the HTTP
  engines poll it to close their stream.
* :class:`CpuArbiter` — who gets the CPU when speech synthesis and token decoding compete. On
  2 shared cores piper and the model each run at about half speed side by side (bench joke.wav's
  first sentence: 394 ms with the model decoding beside it, 183 ms alone; ``docs/facts.md``),
  and while the speaker has nothing to play the listener hears silence. So while the speaker
  waits for a sentence, speech *claims* the CPU and the decoder *yields* between tokens until the
  claim is released (the sentence's audio is queued), at most :data:`YIELD_MAX_S` per token.
  While the user speaks over the robot, *listening* claims it for a moment: the checks of their
  early words (Whisper on the same cores) decide whether the robot stops, so synthesis ahead of
  need and decoding wait until the claim lapses or is released.

* :class:`ReleaseGate` — "the user has finished: let this turn be heard". A turn started on a
  verdict the silence has not yet confirmed runs (the model writes, TTS synthesizes) while its
  sound and its tool calls wait at the gate; the turn-taking stage opens it once the silence
  is long enough, or drops it when the user goes on.

All are safe from any thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

YIELD_MAX_S = 1.0
"""Longest a decoder waits for speech synthesis per token, s: a stuck synthesis cannot stall a reply."""


LISTEN_POLL_S = 0.01
"""How often work waiting on a listening claim looks again, s."""


class StopSignal:
    """A flag a loop checks between steps: set here, by a parent signal, or by a condition.

    Args:
        *parents: Signals whose being set stops this one too (a turn's stop for its rounds).
        when: A condition checked by :meth:`is_set` (the turn gate's "this turn is cancelled").

    ``is_set`` is cheap (a flag, the parents, one call): engines ask it before every token.
    """

    def __init__(self, *parents: StopSignal, when: Callable[[], bool] | None = None) -> None:
        self._parents = parents
        self._when = when
        self._flag = threading.Event()
        self._reason = ""

    def set(self, reason: str = "") -> None:
        """Stop: the loop ends after its current step.

        Args:
            reason: Why, for logs (``barge-in``, ``reply cap``, ``call complete``).
        """
        if not self._flag.is_set():
            self._reason = reason
            self._flag.set()

    def is_set(self) -> bool:
        """Whether the loop should stop now (this signal, a parent, or the condition)."""
        return (
            self._flag.is_set()
            or any(p.is_set() for p in self._parents)
            or (self._when is not None and self._when())
        )

    @property
    def own(self) -> bool:
        """Set by :meth:`set` itself, not by a parent or the condition."""
        return self._flag.is_set()

    @property
    def reason(self) -> str:
        """Why it stopped ("" while it has not, or when a condition decided)."""
        if self._flag.is_set():
            return self._reason
        return next((p.reason for p in self._parents if p.is_set()), "")


class ReleaseGate:
    """Holds a prepared turn's output until the user's silence confirms the turn is theirs to answer.

    Starts pending; :meth:`release` or :meth:`drop` decide it once (the first call wins).
    Callbacks registered with :meth:`on_drop` run on the dropping thread (the turn driver's cancel).
    While pending, the prepared turn may say it called a skill as the skill's schema asks
    (:meth:`command_called`): evidence that the user's command was complete, which the turn-taking
    stage weighs in the silence it waits for (``[turn] strong_on_command``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decided = threading.Event()
        self._released = False
        self._command = threading.Event()
        self._on_drop: list[Callable[[], None]] = []

    def command_called(self) -> None:
        """The prepared turn called a skill with side effects, its arguments fitting as written."""
        self._command.set()

    @property
    def command(self) -> bool:
        """:meth:`command_called` was called."""
        return self._command.is_set()

    def release(self) -> None:
        """The silence confirmed the turn: its output may go out."""
        with self._lock:
            if self._decided.is_set():
                return
            self._released = True
            self._decided.set()

    def drop(self) -> None:
        """The user went on: the turn is not to be heard; run the drop callbacks."""
        with self._lock:
            if self._decided.is_set():
                return
            self._decided.set()
            callbacks = list(self._on_drop)
        for cb in callbacks:
            cb()

    def on_drop(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the gate is dropped (at once if it already was)."""
        with self._lock:
            if not self._decided.is_set():
                self._on_drop.append(callback)
                return
            dropped = not self._released
        if dropped:
            callback()

    @property
    def released(self) -> bool:
        """Released (output may go out)."""
        return self._decided.is_set() and self._released

    @property
    def dropped(self) -> bool:
        """Dropped (the user went on)."""
        return self._decided.is_set() and not self._released

    def wait(self, stop: StopSignal | None = None, poll_s: float = 0.02) -> bool:
        """Block until decided (or ``stop`` is set); True when released.

        Args:
            stop: The turn's stop signal (a cancelled turn stops waiting).
            poll_s: How often ``stop`` is checked, s.
        """
        while not self._decided.wait(poll_s):
            if stop is not None and stop.is_set():
                return False
        return self._released


class Busy(Protocol):
    """A speaker: busy while audio is queued or playing."""

    @property
    def busy(self) -> bool:
        """Audio is queued or playing."""
        ...


class CpuArbiter:
    """Speech synthesis first, decoding second, while the speaker waits for audio.

    Args:
        max_yield_s: Longest a decoder waits per token, s.

    The pipeline :meth:`attach` es its speaker (only a streaming pipeline that speaks does: a
    sequential or silent one never claims). A claim holds only while that speaker has nothing
    to play: once audio is playing, synthesis of the next sentence runs beside the model.
    """

    def __init__(self, max_yield_s: float = YIELD_MAX_S) -> None:
        self.max_yield_s = max_yield_s
        self._speaker: Busy | None = None
        self._free = threading.Event()  # cleared while speech holds a claim
        self._free.set()
        self._lock = threading.Lock()
        self._listen_until = 0.0  # perf_counter s; listening holds the CPU until then
        self._on_listening: list[Callable[[], None]] = []

    def attach(self, speaker: Busy | None) -> None:
        """Claims from now on are for ``speaker`` (None: no claims; any held one is released)."""
        with self._lock:
            self._speaker = speaker
        if speaker is None:
            self.release()

    def claim_for_speech(self) -> bool:
        """Hold decoding between tokens if the speaker has nothing to play (an utterance is coming).

        Returns:
            True when the claim is held now (made here or already held).
        """
        with self._lock:
            if not self._free.is_set():
                return True
            if self._speaker is None or self._speaker.busy:
                return False
            self._free.clear()
            return True

    def release(self) -> None:
        """End a claim (its audio is queued, or the turn is over); nothing when none is held."""
        self._free.set()

    @property
    def claimed(self) -> bool:
        """Speech holds the CPU now."""
        return not self._free.is_set()

    def on_listening(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the claiming thread) whenever a listening claim begins.

        Work in progress that can wait stops there (speech synthesis ahead of need).
        """
        self._on_listening.append(callback)

    def claim_for_listening(self, for_s: float) -> None:
        """The user speaks over the robot: work that can wait waits for ``for_s`` s, or until released.

        The claim lapses by itself (a listener that never releases cannot stall the robot);
        a new claim replaces the old one. A claim that begins runs the :meth:`on_listening`
        callbacks.
        """
        began = not self.listening
        self._listen_until = time.perf_counter() + for_s
        if began:
            for callback in self._on_listening:
                callback()

    def release_listening(self) -> None:
        """End a listening claim; nothing when none is held."""
        self._listen_until = 0.0

    @property
    def listening(self) -> bool:
        """Listening holds the CPU now."""
        return time.perf_counter() < self._listen_until

    def yield_to_listening(self, stop: StopSignal | None = None) -> None:
        """Decoder side: wait while listening holds a claim (it lapses by itself), or until ``stop``."""
        while self.listening and not (stop is not None and stop.is_set()):
            time.sleep(LISTEN_POLL_S)

    def yield_to_speech(self, stop: StopSignal | None = None) -> None:
        """Decoder side: wait while speech holds a claim, at most :attr:`max_yield_s`, or until ``stop``."""
        end = time.perf_counter() + self.max_yield_s
        while not self._free.wait(0.02):
            if (stop is not None and stop.is_set()) or time.perf_counter() >= end:
                return
