"""Standby and the acoustic wake word (``[live] attention = "wake_word"``, ``bolt-agent run``).

Two states. In **standby** only the wake-word model hears the microphone: the listener hands
each block to :meth:`Standby.hear` and, while it says so, to nothing else (no VAD, no
turn-taking, no ASR, no chat model); the robot rests in its sleep pose (a Reachy Mini's head
down, antennas folded), its motors holding or, with ``standby_motors = "off"``, turned off once
it is there. **Awake**, the pipeline runs as in ``always`` mode: every utterance is a turn.

* standby → awake: the wake word (:class:`~agent.listening.wake_word.WakeWordDetector`). The
  robot wakes (neutral, antennas up) and says ``wake_reply`` or chimes; the VAD starts afresh
  on the same block, so the next utterance is a turn.
* With a verifier (``[live] wake_verify``, :class:`~agent.listening.wake_verify.WakeVerifier`),
  a detection at ``wake_candidate_cutoff`` is only a candidate: the blocks from it on are held
  back for :data:`~agent.listening.wake_verify.DELAY_S`, then the last
  :data:`~agent.listening.wake_verify.CLIP_S` of audio (a ring buffer) are decoded. Accepted: it
  wakes, and the held blocks go on to the VAD as one block ("Okay Nabu, what time is it?": the
  words after the word are the turn). Refused: nothing happens (the detector stays deaf for the
  rest of its 2 s, as after any detection).
* awake → standby: a sleep phrase (``sleep_phrases`` in a short transcript, not negated:
  handled at once without the model, like a stop phrase; :func:`sleep_command`), the robot put
  to rest by a skill (``go_to_sleep``) once its turn is over, or nobody speaking for
  ``standby_after_s`` while the floor is free. A falling chime says so.
* The agent starts in standby.

Each change is a :class:`~agent.events.Standby` event. Background results (a timer going off)
are still spoken in standby; the state does not change for them.

Threads: :meth:`Standby.hear` runs on the listener thread for every microphone block (it owns
the detector and also checks the quiet timeout and the motors; the floor is free when ``busy``
says so: nobody speaking, nothing in flight, the speaker idle); :meth:`Standby.words` runs on the
ASR thread. One lock guards the state. Times: monotonic seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from agent.config import LiveConfig
from agent.events import AudioIn, AudioOut, Event, Interrupt, Transcript
from agent.events import Standby as StandbyEvent
from agent.listening.turns import stop_command
from agent.listening.wake_verify import CANDIDATE_WINDOW, CLIP_S, DELAY_S, Verdict, WakeVerifier
from agent.listening.wake_word import WakeWordDetector, find_model
from agent.pipeline.queues import TurnGate
from agent.speech.audio import SAMPLE_RATE

if TYPE_CHECKING:
    from agent.pipeline.asr_stage import ASRStage
    from agent.pipeline.listener import Listener
    from agent.speech.tts import TextToSpeech
    from hardware.robot import Robot

log = logging.getLogger(__name__)

SLEEP_MS = 2000.0
"""The move into the sleep pose, ms (as the ``go_to_sleep`` skill's)."""
SLEEP_MAX_WORDS = 6
"""A transcript longer than this is not a sleep command ("please go to sleep now" is one)."""
NEGATIONS = frozenset({"don't", "dont", "do not", "not", "never", "no"})
"""Words that turn a sleep phrase around ("don't go to sleep")."""
SETTLE_S = 0.6
"""``standby_motors = "off"``: the motors go off this long after the sleep move's last command, s
(a body reads back the pose a few hundred ms after it was sent; earlier, it freezes short of it)."""
CHIME_RATE = 22050
"""Sample rate of the chimes, Hz."""


def sleep_command(text: str, phrases: list[str]) -> str | None:
    """The sleep phrase a short transcript asks for, or None.

    Args:
        text: ASR text.
        phrases: ``[live] sleep_phrases`` ("go to sleep", "goodbye", ...).

    Returns:
        The phrase (normalised) when ``text`` has at most :data:`SLEEP_MAX_WORDS` words, holds one
        of ``phrases`` (fuzzy, as stop phrases are found) and no negation ("don't go to sleep").
    """
    found = stop_command(text, phrases, SLEEP_MAX_WORDS)
    if found is None:
        return None
    words = text.lower().replace(",", " ").replace(".", " ").split()
    if any(w in NEGATIONS for w in words) or "do not" in " ".join(words):
        return None
    return found


def chime(rising: bool, rate: int = CHIME_RATE) -> np.ndarray:
    """Two short tones (E5 and A5, 90 ms each, faded): rising on waking, falling into standby.

    Returns:
        ``(n,)`` int16 mono at ``rate``, about 0.2 s, peak about a third of full scale.
    """
    tones = (659.25, 880.0) if rising else (880.0, 659.25)
    n = int(0.09 * rate)
    t = np.arange(n) / rate
    fade = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.01)
    parts = [np.sin(2 * np.pi * f * t) * fade for f in tones]
    audio = np.concatenate([parts[0], np.zeros(int(0.02 * rate)), parts[1]]) * 0.3
    return (audio * 32767).astype(np.int16)


class Standby:
    """The standby state machine (see the module docstring).

    Args:
        detector: The wake-word detector (owned by the listener thread from now on).
        live: ``[live]`` (standby timeout, sleep phrases, motors).
        robot: The body.
        publish: The bus.
        gate: Turn ids (a sleep phrase's transcript gets one, cancelled at once).
        busy: True while anything is in flight or playing (the floor is not free).
        play: Plays ``(int16 audio, rate, text)`` on the speaker now, outside any turn.
        reply: What is played on waking: ``(audio, rate, text)``; None: the rising chime.
        clock: Monotonic clock, s.
        verifier: The second stage (``detector`` then proposes candidates); None: the detector
            alone decides.
    """

    def __init__(
        self,
        detector: WakeWordDetector,
        live: LiveConfig,
        robot: Robot,
        publish: Callable[[Event], None],
        gate: TurnGate,
        busy: Callable[[], bool],
        play: Callable[[np.ndarray, int, str], None],
        reply: tuple[np.ndarray, int, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        verifier: WakeVerifier | None = None,
    ) -> None:
        self.detector, self.verifier, self.live = detector, verifier, live
        self.robot, self.publish, self.gate = robot, publish, gate
        self.busy, self.play, self.clock = busy, play, clock
        self.reply = reply or (chime(True), CHIME_RATE, "")
        self.on_wake: Callable[[], None] = lambda: None
        """Called on the listener thread when the wake word was heard (the VAD starts afresh)."""
        self._lock = threading.Lock()
        self._asleep = True  # the agent starts in standby
        self._fresh = True  # the detector starts afresh on the next block
        self._active = clock()  # last time the floor was not free
        self._robot_asleep = False  # the robot's own sleep flag when last looked at
        self._rested = False  # the robot went to rest while awake: standby when the floor is free
        self._motors_due = False  # turn the motors off once the sleep move is over
        self._idle_since: float | None = None  # when the sleep move was first seen over
        self._motors_off = False
        self.wakes = 0
        """Times the wake word woke the agent."""
        self.verdicts: list[Verdict] = []
        """The verifier's verdicts, oldest first (the last 20)."""
        self._ring = np.zeros(0, np.float32)  # the last CLIP_S of standby audio (the verifier's clip)
        self._held: list[AudioIn] = []  # blocks from a candidate on, awaiting its verdict
        self._candidate: float | None = None  # the candidate's detector score

    @property
    def asleep(self) -> bool:
        """In standby: only the wake word is listened for."""
        return self._asleep

    @property
    def phrase(self) -> str:
        """The wake word as its model's author wrote it ("Okay Nabu")."""
        return self.detector.phrase

    def connect(self, listener: Listener, asr: ASRStage) -> None:
        """Sit in front of ``listener`` (every block comes here first) and ``asr`` (sleep phrases)."""
        listener.gate = self.hear
        self.on_wake = listener.reset
        asr.before_turn = self.words

    def start(self) -> None:
        """Go into standby (the pipeline starts): the robot to its sleep pose, a ``standby`` event."""
        with self._lock:
            self._asleep = False
        self._sleep("start", chime_too=False)

    # --- the listener thread ----------------------------------------------------------------------
    def hear(self, msg: AudioIn) -> AudioIn | None:
        """One microphone block: in standby the wake word's alone; awake, the quiet timeout is checked.

        Returns:
            What goes on to the VAD: ``msg`` when awake or the wake word ended in it; with a
            verifier, on acceptance, the blocks held since the candidate joined into one (same
            ``t_end`` as ``msg``); None while in standby.
        """
        if not self._asleep:
            self._check_quiet()
            return None if self._asleep else msg
        if self._fresh:
            self._fresh = False
            self.detector.reset()
            self._ring, self._held, self._candidate = np.zeros(0, np.float32), [], None
        self._rest_motors()
        score = self.detector.feed(msg.samples)
        if self.verifier is None:
            if score is None:
                return None
            self._wake(score)
            return msg
        self._ring = np.concatenate([self._ring, msg.samples])[-int(CLIP_S * SAMPLE_RATE) :]
        if self._candidate is None:
            if score is None:
                return None
            self._candidate = score
        self._held.append(msg)
        if sum(h.samples.size for h in self._held) < DELAY_S * SAMPLE_RATE:
            return None
        verdict = self.verifier.verify(self._ring)
        self.verdicts = [*self.verdicts[-19:], verdict]
        score, held = self._candidate, self._held
        self._candidate, self._held = None, []
        if not verdict.accepted:
            log.info(
                "wake candidate refused (score %.3f): heard %r (logprob %.2f, %.0f ms)",
                score,
                verdict.text,
                verdict.logprob,
                verdict.ms,
            )
            return None
        log.info("wake candidate confirmed: heard %r (%.0f ms)", verdict.text, verdict.ms)
        self._wake(score)
        return AudioIn(msg.turn_id, np.concatenate([h.samples for h in held]), msg.t_end)

    def _check_quiet(self) -> None:
        """Awake: standby after ``standby_after_s`` of a free floor, or once a skill put the robot to rest."""
        now = self.clock()
        robot_asleep = bool(self.robot.asleep)
        busy = self.busy()
        with self._lock:
            if robot_asleep and not self._robot_asleep:
                self._rested = True  # a skill (go_to_sleep) put the robot to rest: standby once it is over
            self._robot_asleep = robot_asleep
            if busy:
                self._active = now
                return
            quiet = now - self._active >= self.live.standby_after_s
            rested = self._rested
        if rested:
            self._sleep("asked")
        elif quiet:
            self._sleep("quiet")

    def _rest_motors(self) -> None:
        """``standby_motors = "off"``: once the sleep move is over, the motors go off (the robot parks)."""
        if not self._motors_due or not self.robot.wait_idle(0) or self.robot.estopped:
            self._idle_since = None
            return
        now = self.clock()
        if self._idle_since is None:
            self._idle_since = now
        if now - self._idle_since < SETTLE_S:
            return
        self._motors_due, self._idle_since = False, None
        try:
            self.robot.driver.set_torque(False)
            self.robot.torque_on = False
            self._motors_off = True
        except Exception:  # noqa: BLE001 - a driver fault must not stop the listener
            log.exception("standby: turning the motors off failed")

    def _wake(self, score: float) -> None:
        with self._lock:
            self._asleep = False
            self._active = self.clock()
            self._motors_due = False
        self.wakes += 1
        log.info("wake word %r heard (score %.3f): awake", self.phrase, score)
        try:
            if self._motors_off:
                self._motors_off = False
                self.robot.driver.set_torque(True)
                self.robot.torque_on = True
            self.robot.wake()
            self._robot_asleep = bool(self.robot.asleep)
        except Exception:  # noqa: BLE001 - waking the body must not stop the listener
            log.exception("standby: waking the robot failed")
        audio, rate, text = self.reply
        self.play(audio, rate, text)
        self.publish(StandbyEvent(-1, "awake", "wake_word", self.phrase, round(score, 3)))
        self.on_wake()

    # --- the other stages -------------------------------------------------------------------------
    def words(self, text: str) -> bool:
        """A transcript before it becomes a turn (the ASR thread): a sleep phrase goes to standby.

        Returns:
            True when ``text`` was a sleep command (handled: no turn, no model).
        """
        if self._asleep or sleep_command(text, self.live.sleep_phrases) is None:
            return False
        self.publish(Interrupt(-1, "new_turn"))  # the robot stops talking
        tid = self.gate.new_turn()
        self.gate.cancel(tid)  # nothing is said in this turn
        self.publish(Transcript(tid, text))
        self._sleep("asked", text)
        return True

    def _sleep(self, reason: str, text: str = "", chime_too: bool = True) -> None:
        """Into standby: the detector afresh, the robot to rest, a falling chime, the event."""
        with self._lock:
            if self._asleep:
                return
            self._asleep, self._fresh, self._rested = True, True, False
            self._motors_due = self.live.standby_motors == "off"
        log.info("standby (%s): listening only for %r", reason, self.phrase)
        try:
            if not self.robot.asleep:
                rest = getattr(self.robot.driver, "rest_pose", None)
                self.robot.rest(rest() if callable(rest) else {}, SLEEP_MS)
            self._robot_asleep = True
        except Exception:  # noqa: BLE001 - a body fault must not keep the agent awake
            log.exception("standby: resting the robot failed")
        if chime_too:
            self.play(chime(False), CHIME_RATE, "")
        self.publish(StandbyEvent(-1, "standby", reason, self.phrase, text=text))


def build_standby(
    live: LiveConfig,
    robot: Robot,
    tts: TextToSpeech,
    publish: Callable[[Event], None],
    gate: TurnGate,
    busy: Callable[[], bool],
    play: Callable[[AudioOut], None],
    asr_model: Any = None,
) -> Standby:
    """The standby of a live run: loads the wake-word model and voices ``wake_reply`` once.

    Args:
        live: ``[live]``.
        robot: The body.
        tts: The robot's voice (``wake_reply``).
        publish: The bus.
        gate: Turn ids.
        busy: True while the floor is not free (someone speaks, a turn is in flight, the speaker plays).
        play: The sink's ``play`` (the chime and the reply go out as :class:`~agent.events.AudioOut`
            of no turn: ``turn_id`` -1).
        asr_model: The agent's loaded ``faster_whisper.WhisperModel``: with ``[live] wake_verify``
            it confirms the candidates (none: the detector alone, at ``wake_cutoff``).

    Raises:
        agent.listening.wake_word.WakeWordError: the model cannot be found or loaded.
    """
    model = find_model(live.wake_word)
    verifier = None
    if live.wake_verify and asr_model is not None:
        verifier = WakeVerifier(asr_model, model.phrase)
        detector = WakeWordDetector(
            model,
            live.wake_candidate_cutoff,
            live.wake_window or CANDIDATE_WINDOW,
            live.wake_noise_suppression,
        )
    else:
        detector = WakeWordDetector(model, live.wake_cutoff, live.wake_window, live.wake_noise_suppression)
    reply = None
    if live.wake_reply.strip():
        chunks = list(tts.synthesize(live.wake_reply))
        if chunks:
            reply = (np.concatenate([c.audio for c in chunks]), chunks[0].sample_rate, live.wake_reply)

    def out(audio: np.ndarray, rate: int, text: str) -> None:
        play(AudioOut(-1, text, text, True, audio, rate))

    return Standby(detector, live, robot, publish, gate, busy, out, reply, verifier=verifier)
