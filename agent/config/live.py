"""``[audio]`` and ``[live]``: sound devices, attention, barge-in, echo safety, stop words."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

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

    attention: Literal["always", "wake"] = "always"
    wake_phrases: list[str] = Field(default_factory=lambda: ["hey robot", "hey bolt", "okay bolt"])
    wake_score: float = Field(80.0, ge=50, le=100, description="fuzzy match score a wake phrase needs")
    follow_up_s: float = Field(
        8.0, ge=0, le=120, description="after a reply, no wake phrase needed for this long"
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
        320,
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
    stall_limit_s: float = Field(
        45.0,
        gt=0,
        lt=60,
        description="a pipeline stage stuck this long on one item withholds the systemd watchdog "
        "pings (below WatchdogSec=60), s",
    )
