"""Where the robot looks: toward whoever speaks, then at their face while they talk to it.

**Look at the speaker** (``[robot] look_at_speaker``): a direction-of-arrival source
(:class:`hardware.doa.DoaSource`: a Reachy Mini's daemon, ``GET /api/state/doa``) is polled at
:data:`POLL_HZ`. When speech starts (the array's speech flag, or the agent's own VAD: the floor
is the user's) the robot turns toward the voice through its gaze layer
(:meth:`hardware.robot.Robot.look_toward`: smoothed, the body turning past the head's reach,
clamped and rate limited by the safety layer). Never toward its own voice: while the robot speaks,
and for :data:`ECHO_TAIL_S` after, the direction is ignored; never while a gesture a person asked
for plays (the gaze layer also lets go of the joints a gesture moves), asleep, or under the e-stop.

**Eye contact** (``[robot] eye_contact``): while listening and speaking, the camera's face box
(:class:`hardware.perception.faces.FaceTracker`, ``eye_contact_hz``, 10 Hz or more) drives small
head corrections through the same gaze layer: each face seen moves the gaze by part of the face's
bearing (a closed loop when the camera turns with the head), within ``eye_contact_max_deg`` of
where the robot looked when it found the face. A face near the voice's direction is the one it
looks at (faces far from a fresh voice are not the speaker). It lets go when the face leaves
(:data:`FACE_LOST_S`) and looks ahead again after :data:`RELEASE_S` of nobody speaking.

The floor (who speaks) comes from :class:`agent.pipeline.posture.Postures`: :meth:`Attention.floor`.
Threads: one poller (DoA, release timer); the face tracker's own thread calls :meth:`Attention.face`.
Units: degrees, yaw + = left, pitch + = up, times in monotonic seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hardware.doa import DoaSource

if TYPE_CHECKING:
    from hardware.perception.faces import FaceSeen
    from hardware.robot import Robot

log = logging.getLogger(__name__)

POLL_HZ = 25.0
"""Direction-of-arrival polls a second (the daemon refreshes its reading at about 10 Hz)."""
DEADBAND_DEG = 8.0
"""A voice this much off where the robot looks turns it; less is the same person."""
ECHO_TAIL_S = 0.4
"""After the robot's own speech, directions are ignored this long (its voice in the room), s."""
FACE_NEAR_DEG = 25.0
"""A face farther than this from a fresh voice's direction is not the speaker, deg."""
FACE_LOST_S = 0.7
"""No face for this long: eye contact lets go (back to the voice's direction), s."""
VOICE_FRESH_S = 3.0
"""A voice heard this recently decides which face is the speaker's, s."""
RELEASE_S = 8.0
"""Nobody has spoken or been looked at for this long: the robot looks ahead again, s."""
GAIN = 0.5
"""Part of a face's bearing one correction takes (the camera turns with the head: a closed loop)."""


class Attention:
    """Turns the robot toward the voice and keeps eye contact (see the module docstring).

    Args:
        robot: The body (its gaze layer).
        doa: The direction-of-arrival source, or None (no array: only eye contact).
        look_at_speaker: Turn toward the voice (``[robot] look_at_speaker``).
        eye_contact: Follow the speaker's face (``[robot] eye_contact``).
        max_deg: Largest eye-contact correction from where the face was found, deg.
        clock: Monotonic clock, s.
    """

    def __init__(
        self,
        robot: Robot,
        doa: DoaSource | None,
        look_at_speaker: bool = True,
        eye_contact: bool = True,
        max_deg: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.robot, self.doa = robot, doa
        self.look_at_speaker, self.eye_contact, self.max_deg = look_at_speaker, eye_contact, max_deg
        self.clock = clock
        self._lock = threading.Lock()
        self._floor = "idle"
        self._robot_until = -1e9  # the robot's own voice may still be in the room until then
        self._voice: float | None = None  # where the last voice came from
        self._voice_t = -1e9
        self._face_t = -1e9
        self._anchor: tuple[float, float] | None = None  # where eye contact started (yaw, pitch)
        self._active_t = -1e9  # last time someone spoke or was looked at
        self.turns = 0
        """Times the robot turned toward a voice."""
        self.corrections: list[float] = []
        """Times of the eye-contact corrections (the tracking rate is measured from them)."""
        self.on_voice: Callable[[float], None] | None = None
        """Called with the yaw (deg) each time the robot turns toward a voice (tests, benches)."""
        self.prefer: Callable[[float | None], None] | None = None
        """Told the bearing of the voice from the camera's axis, so the face tracker picks that face."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- what the pipeline tells it ----------------------------------------------------------
    def floor(self, state: str) -> None:
        """Who has the floor: ``user`` (speaking), ``thinking``, ``robot`` (speaking) or ``idle``."""
        with self._lock:
            if self._floor == "robot" and state != "robot":
                self._robot_until = self.clock() + ECHO_TAIL_S
            self._floor = state
            if state != "idle":
                self._active_t = self.clock()

    def _can_move(self) -> bool:
        r = self.robot
        return not (r.estopped or r.asleep or r.busy)

    def _looking(self) -> tuple[float, float]:
        gaze = self.robot.gaze
        return gaze.get("head_yaw", 0.0), gaze.get("head_pitch", 0.0)

    def forget_voice(self) -> None:
        """Forget where the last voice came from: the next one turns the robot, wherever it is."""
        with self._lock:
            self._voice = None

    # --- the voice ---------------------------------------------------------------------------
    def step(self) -> None:
        """One poll: turn toward a new voice, or let go after :data:`RELEASE_S` of nothing."""
        now = self.clock()
        reading = self.doa.read() if self.doa is not None and self.look_at_speaker else None
        with self._lock:
            own_voice = self._floor == "robot" or now < self._robot_until
            speech = reading is not None and (reading.speech or self._floor == "user")
            if speech and not own_voice and reading is not None and self._can_move():
                yaw = reading.yaw_deg
                self._voice_t = self._active_t = now
                if self._voice is None or abs(yaw - self._voice) > DEADBAND_DEG:
                    self._voice = yaw
                    self._anchor = (yaw, 0.0)  # eye contact starts from the voice's direction
                    self.turns += 1
                    self.robot.look_toward(yaw, 0.0)
                    if self.on_voice is not None:
                        self.on_voice(yaw)
            if self.prefer is not None:
                fresh = self._voice is not None and now - self._voice_t < VOICE_FRESH_S
                self.prefer(self._voice - self._looking()[0] if fresh and self._voice is not None else None)
            quiet = self._floor == "idle" and now - self._active_t > RELEASE_S
            if (
                quiet
                and (self._voice is not None or self._anchor is not None)
                and now - self._face_t > RELEASE_S
            ):
                self._voice, self._anchor = None, None
                self.robot.look_toward(None)

    # --- the face -----------------------------------------------------------------------------
    def face(self, seen: FaceSeen | None) -> None:
        """A frame was looked at: correct the gaze toward the followed face, or let go when it left."""
        if not self.eye_contact:
            return
        now = self.clock()
        with self._lock:
            conversing = self._floor != "idle" or now - self._active_t < RELEASE_S
            if seen is None or not conversing or not self._can_move():
                if self._anchor is not None and now - self._face_t > FACE_LOST_S:
                    back = self._voice  # the face left: back to the voice's direction, or ahead
                    self._anchor = (back, 0.0) if back is not None else None
                    self.robot.look_toward(back, 0.0) if back is not None else self.robot.look_toward(None)
                return
            yaw, pitch = self._looking()
            face_yaw = yaw + seen.yaw_deg
            if self._voice is not None and now - self._voice_t < VOICE_FRESH_S:
                if abs(face_yaw - self._voice) > FACE_NEAR_DEG:
                    return  # someone else in view: the speaker is where the voice is
            if self._anchor is None or now - self._face_t > FACE_LOST_S:
                self._anchor = (yaw, pitch)  # eye contact starts where the robot looks now
            ay, ap = self._anchor
            m = self.max_deg
            target_yaw = min(ay + m, max(ay - m, yaw + GAIN * seen.yaw_deg))
            target_pitch = min(ap + m, max(ap - m, pitch + GAIN * seen.pitch_deg))
            self._face_t = self._active_t = now
            self.corrections.append(now)
            self.robot.look_toward(target_yaw, target_pitch)

    # --- life cycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Poll the direction of arrival in a thread (once); nothing to poll without a source."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="attention", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        period = 1.0 / POLL_HZ
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                self.step()
            except Exception:  # noqa: BLE001 - a bad reading must not end attention for good
                log.exception("attention: a step failed")
            self._stop.wait(max(0.0, period - (time.monotonic() - t0)))

    def close(self) -> None:
        """Stop polling (the robot keeps looking where it looks; parking takes it from there)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)

    def tracking_hz(self, window_s: float = 2.0) -> float:
        """Eye-contact corrections a second over the last ``window_s`` seconds that had any."""
        times = list(self.corrections)
        if len(times) < 2:
            return 0.0
        recent = [t for t in times if t >= times[-1] - window_s]
        span = recent[-1] - recent[0]
        return (len(recent) - 1) / span if span > 0 else 0.0
