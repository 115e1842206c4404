"""``[audio]`` and ``[live]``: sound devices, attention, barge-in, echo safety, stop words."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from hardware.config import StrictModel

ECHO_TEXT_MIN_SHARE = 0.05
"""Default of ``[live] echo_text_min_share``: share of an utterance's energy (rho² at one delay,
0..1) the robot's playback must explain before words like its own count as its echo.

Measured here (``tests/test_echo_share.py``'s method) with the piper voice as the robot and the
real people of the spoken-command fixtures: a command said over the robot's unrelated speech
scored 0.028 at most (80 pairings, p99 0.016); the robot's echo through simulated rooms
(RT60 0.3-1.2 s, direct-to-reverberant ratio -10 to +6 dB, a soft-clipping speaker) scored
0.08 at the least (0.23 from -3 dB up). Per 256 ms frame instead, chance likeness between two
voices reached 0.6: only the whole utterance tells them apart."""


WAKE_WORDS = ("okay_nabu", "hey_jarvis", "hey_mycroft", "alexa")
"""The wake-word models the ``pymicro-wakeword`` 2.5.0 wheel ships (``[live] wake_word``)."""


def check_wake_word(ref: str) -> str:
    """``[live] wake_word`` as given, when it names a built-in model or an existing model file.

    Raises:
        ValueError: neither a name of :data:`WAKE_WORDS` nor a path (``~`` expanded) to an existing
            ``.json`` or ``.tflite`` file (a ``.tflite`` needs its ``.json`` beside it).
    """
    if ref in WAKE_WORDS:
        return ref
    path = Path(ref).expanduser()
    if path.suffix not in (".tflite", ".json"):
        raise ValueError(
            f"unknown wake word {ref!r}: use one of {', '.join(WAKE_WORDS)} (the models pymicro-wakeword "
            "ships) or the path of a microWakeWord model (.tflite with its .json beside it, or the .json)"
        )
    if not path.is_file():
        raise ValueError(f"wake word model file not found: {path}")
    if path.suffix == ".tflite" and not path.with_suffix(".json").is_file():
        raise ValueError(f"wake word model {path}: its JSON {path.with_suffix('.json')} is missing")
    return ref


class AudioConfig(StrictModel):
    """Audio devices for live mode (name substring or index; None = system default)."""

    input_device: str | int | None = None
    output_device: str | int | None = None
    input_sample_rate: int | None = Field(
        None, ge=8000, le=192000, description="None = the device's own rate, Hz"
    )
    input_channels: int | None = Field(None, ge=1, le=32, description="None = the device's, at most 2")
    output_sample_rate: int | None = Field(
        None, ge=8000, le=192000, description="None = the device's own rate, Hz"
    )
    block_ms: int = Field(20, ge=5, le=200, description="sounddevice block length, ms")
    stall_s: float = Field(3.0, gt=0.1, le=30, description="no mic audio for this long = device lost, s")
    backoff_initial_s: float = Field(0.5, gt=0, le=60, description="first retry after a lost device, s")
    backoff_max_s: float = Field(8.0, gt=0, le=600)


class LiveConfig(StrictModel):
    """``bolt-agent run``: attention, barge-in, echo safety, stop words (units: ms, s, score 0..100).

    Endpointing, pre-roll and the longest utterance come from ``[vad]`` (``min_silence_ms``,
    ``speech_pad_ms``, ``max_utterance_s``).
    """

    attention: Literal["always", "wake", "wake_word"] = Field(
        "always",
        description="always: every utterance is a turn; wake: a transcript must start with a wake "
        "phrase; wake_word: standby until the acoustic wake word (docs/wake-word.md)",
    )
    wake_phrases: list[str] = Field(default_factory=lambda: ["hey robot", "hey bolt", "okay bolt"])
    wake_score: float = Field(80.0, ge=50, le=100, description="fuzzy match score a wake phrase needs")
    follow_up_s: float = Field(
        8.0, ge=0, le=120, description="after a reply, no wake phrase needed for this long"
    )
    wake_word: str = Field(
        "okay_nabu",
        description="attention = wake_word: okay_nabu, hey_jarvis, hey_mycroft, alexa, or a path to a "
        "microWakeWord .tflite (its .json beside it) or .json",
    )
    wake_cutoff: float | None = Field(
        None, gt=0, lt=1, description="sliding-window mean probability the wake word needs; None: the model's"
    )
    wake_window: int | None = Field(
        None, ge=1, le=50, description="probabilities (30 ms each) averaged; None: the model's"
    )
    wake_verify: bool = Field(
        True,
        description="attention = wake_word: the detector at wake_candidate_cutoff proposes, the ASR model "
        "confirms the phrase in the last 2 s (docs/wake-word.md)",
    )
    wake_candidate_cutoff: float = Field(
        0.2,
        gt=0,
        lt=1,
        description="wake_verify: the sliding-window mean that makes a candidate (window: wake_window, "
        "else 5)",
    )
    wake_noise_suppression: int = Field(
        3,
        ge=0,
        le=4,
        description="attention = wake_word: WebRTC noise suppression before the wake-word model "
        "(0: off, 1-4: mild to strongest; docs/wake-word.md)",
    )
    wake_reply: str = Field(
        "", max_length=60, description="said on waking (the robot's voice); empty: a short chime"
    )
    standby_after_s: float = Field(
        30.0, ge=2, le=3600, description="attention = wake_word: nobody spoke for this long: standby, s"
    )
    standby_motors: Literal["hold", "off"] = Field(
        "hold", description="in standby the motors hold the sleep pose, or are turned off once there"
    )
    sleep_phrases: list[str] = Field(
        default_factory=lambda: ["go to sleep", "goodbye", "good night", "stand by", "that's all"],
        description="attention = wake_word: these (in a short transcript) return to standby",
    )
    barge_in: bool = True
    barge_in_ms: int = Field(
        600,
        ge=32,
        le=3000,
        description="user speech sustained this long over the robot stops it before any of its words "
        "are known (with backchannels off: any speech this long stops it), ms",
    )
    backchannels: bool = Field(
        True,
        description="speech over the robot is transcribed early and only an interruption stops it: "
        "acknowledgements ('uh-huh', 'yeah'), laughs, coughs and noise never stop it or become turns",
    )
    overlap_words_ms: int = Field(
        192, ge=32, le=2000, description="speech over the robot after which its words are transcribed, ms"
    )
    overlap_recheck_ms: int = Field(
        160,
        ge=32,
        le=3000,
        description="while speech over the robot goes on without interrupting, its words are "
        "transcribed again after this much more, ms",
    )
    resume_false_interruption: bool = Field(
        True,
        description="a stop for speech over the robot keeps its turn: when the speech turns out to be "
        "no interruption (an acknowledgement, a noise, nothing) it resumes from the start of the "
        "sentence it was cut in",
    )
    false_interruption_ms: int = Field(
        2000,
        ge=100,
        le=10000,
        description="a held turn resumes after this much silence from the user when no utterance "
        "came of the speech that held it, ms (LiveKit's false_interruption_timeout)",
    )
    echo_guard: bool = True
    echo_tail_ms: int = Field(
        600, ge=0, le=5000, description="mic is treated as echo this long after playback"
    )
    echo_min_unexplained: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="fraction of mic energy playback must not explain for it to count as user speech",
    )
    echo_max_delay_ms: int = Field(
        800, ge=50, le=3000, description="longest speaker-to-mic delay searched, ms"
    )
    echo_text_score: float = Field(
        75.0,
        ge=50,
        le=100,
        description="transcripts this similar to the robot's own recent speech are dropped",
    )
    echo_text_min_share: float = Field(
        ECHO_TEXT_MIN_SHARE,
        ge=0,
        le=1,
        description="the text echo check applies only where playback explains this share of the"
        " utterance's energy (rho² at one delay over all of it); 0: wherever the robot was audible",
    )
    stop_phrases: list[str] = Field(
        default_factory=lambda: [
            "stop",
            "freeze",
            "be quiet",
            "quiet",
            "shut up",
            "halt",
            "stop it",
            "stop talking",
            "stop moving",
            "hold still",
            "silence",
            "enough",
        ]
    )
    stop_max_words: int = Field(4, ge=1, le=12, description="longer transcripts go to the model")
    clause_chars: int = Field(
        120, ge=20, le=400, description="a sentence longer than this is cut at a clause"
    )
    tts_lookahead_s: float = Field(
        3.0,
        ge=0.0,
        le=60.0,
        description="the next sentence is synthesized once less than this much of the reply's audio "
        "is left to play, s (synthesis far ahead takes the CPU from listening); 0 = at once",
    )
    stall_limit_s: float = Field(
        45.0,
        gt=0,
        lt=60,
        description="a pipeline stage stuck this long on one item withholds the systemd watchdog "
        "pings (below WatchdogSec=60), s",
    )

    @field_validator("wake_word")
    @classmethod
    def _wake_word(cls, v: str) -> str:
        return check_wake_word(v)
