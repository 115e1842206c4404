"""Typed events that cross stage boundaries, in one place.

Every stage of the pipeline (audio → VAD → ASR → LLM → skills/robot → TTS) talks to the
next one and to the outside world (CLI, JSON Lines, tests) only through these frozen
dataclasses. Each carries the ``turn_id`` of the conversation turn it belongs to, so a
stage can drop events of a cancelled turn and logs can be correlated.

``Event.to_json()`` gives the JSON Lines shape used by ``bolt-agent listen --json``:
``{"event": <name>, ...fields}`` with ``turn_id`` included.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    """Base class of every pipeline event.

    Attributes:
        turn_id: Index of the conversation turn, 0-based; -1 for events outside any turn.
    """

    name: ClassVar[str] = "event"
    turn_id: int

    def to_json(self) -> dict[str, Any]:
        """Return the JSON Lines form ``{"event": name, "turn_id": ..., ...fields}``."""
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {"event": self.name, **body}


@dataclass(frozen=True)
class Ready(Event):
    """All models are loaded and warmed; the agent takes input from now on."""

    name: ClassVar[str] = "ready"
    load_ms: float = 0.0


@dataclass(frozen=True)
class Utterance(Event):
    """A span of speech found by the VAD in a file or stream.

    Attributes:
        source: File path or device name the audio came from.
        start_ms: Speech start within the source, ms.
        end_ms: Speech end within the source, ms (the VAD's speech end).
    """

    name: ClassVar[str] = "utterance"
    source: str = ""
    start_ms: float = 0.0
    end_ms: float = 0.0


@dataclass(frozen=True)
class Transcript(Event):
    """Final ASR text of one utterance (already filtered for hallucinations)."""

    name: ClassVar[str] = "transcript"
    text: str = ""


@dataclass(frozen=True)
class ToolCall(Event):
    """The model asked for a skill to run.

    Attributes:
        name: Tool (skill) name as the model wrote it; may be unknown.
        arguments: Arguments as parsed from the model output (not yet validated).
        call_id: Unique id within the turn, links the call to its ``ToolResult``.
    """

    name: ClassVar[str] = "tool_call"
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form with the tool's name under ``name`` (the issue's wire format)."""
        return {
            "event": self.name,
            "turn_id": self.turn_id,
            "name": self.tool,
            "arguments": self.arguments,
            "call_id": self.call_id,
        }


@dataclass(frozen=True)
class ToolResult(Event):
    """What a skill returned (``ok``) or why it failed (``ok=False``, ``result`` is the message)."""

    name: ClassVar[str] = "tool_result"
    tool: str = ""
    ok: bool = True
    result: Any = None
    call_id: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form with the tool's name under ``name``."""
        return {
            "event": self.name,
            "turn_id": self.turn_id,
            "name": self.tool,
            "ok": self.ok,
            "result": self.result,
            "call_id": self.call_id,
        }


@dataclass(frozen=True)
class Reply(Event):
    """The assistant's spoken reply for a turn.

    Attributes:
        text: Text as spoken (after cleaning for speech is *not* applied here: this is the
            model's text without markup).
        audio: Path of the reply WAV, or ``None`` when nothing was synthesized.
    """

    name: ClassVar[str] = "reply"
    text: str = ""
    audio: str | None = None


@dataclass(frozen=True)
class RobotCommand(Event):
    """One joint command that reached the robot driver (after clamping).

    Attributes:
        joint: Joint name from the config.
        deg: Target position in degrees, inside the joint's limits.
        t_ms: Time of the command in ms since the robot started.
    """

    name: ClassVar[str] = "robot"
    joint: str = ""
    deg: float = 0.0
    t_ms: float = 0.0


@dataclass(frozen=True)
class Timing(Event):
    """Per-turn stage timings in milliseconds.

    ``llm_ttft_ms`` is the time to the model's first generated token in the turn's first
    round; ``llm_ms`` covers all LLM rounds; ``tts_first_audio_ms`` is the time from the
    reply text being ready to the first synthesized chunk; ``turn_ms`` the whole turn from
    the end of the utterance. ``prompt_tokens`` counts tokens evaluated (not reused from the
    KV cache) over the turn.
    """

    name: ClassVar[str] = "timing"
    asr_ms: float = 0.0
    llm_ttft_ms: float = 0.0
    llm_ms: float = 0.0
    tts_first_audio_ms: float = 0.0
    tts_ms: float = 0.0
    turn_ms: float = 0.0
    prompt_tokens: int = 0


@dataclass(frozen=True)
class Skipped(Event):
    """Input that produced no turn (no speech, hallucination filtered), with the reason."""

    name: ClassVar[str] = "skipped"
    reason: str = ""
    source: str = ""


@dataclass(frozen=True)
class Error(Event):
    """A problem the agent survived: one line saying what, where and what to do."""

    name: ClassVar[str] = "error"
    message: str = ""


@dataclass(frozen=True)
class BackgroundDone(Event):
    """A background (asynchronous) tool call finished; the robot will speak about it.

    Attributes:
        name: Tool name.
        ok: Whether it succeeded.
        result: Its result, or the error message.
        call_id: The id of the call that started it (matches the earlier ``tool_call``).
    """

    name: ClassVar[str] = "background_done"
    tool: str = ""
    ok: bool = True
    result: Any = None
    call_id: str = ""



# --- live mode (``bolt-agent run``) -----------------------------------------------------------


@dataclass(frozen=True)
class LiveTiming(Timing):
    """Per-turn latency of live mode, ms from the end of user speech (the VAD's speech end).

    A :class:`Timing` (same event name, the inherited fields keep their meaning) with:
    ``endpoint_ms`` endpoint decided, ``asr_done_ms`` transcript ready, ``first_token_ms`` LLM
    first token, ``first_sentence_ms`` first sentence ready for synthesis, ``first_audio_ms``
    first synthesized audio ready, ``first_played_ms`` first audio handed to the speaker
    (voice-to-voice). A stage that did not happen is -1.
    """

    name: ClassVar[str] = "timing"
    endpoint_ms: float = -1.0
    asr_done_ms: float = -1.0
    first_token_ms: float = -1.0
    first_sentence_ms: float = -1.0
    first_audio_ms: float = -1.0
    first_played_ms: float = -1.0


@dataclass(frozen=True)
class Spoken(Event):
    """A piece of the reply finished playing (``completed``) or was cut off by a barge-in or stop."""

    name: ClassVar[str] = "spoken"
    text: str = ""
    completed: bool = True


@dataclass(frozen=True)
class BargeIn(Event):
    """The user spoke over the robot: playback stopped, generation and synthesis were cancelled.

    Attributes:
        reason: ``speech`` (sustained user speech) or ``stop`` (a stop phrase).
        stop_ms: Time from the decision to the speaker going silent, ms.
    """

    name: ClassVar[str] = "barge_in"
    reason: str = "speech"
    stop_ms: float = 0.0


@dataclass(frozen=True)
class HistoryCut(Event):
    """After an interruption the assistant message in the history keeps only what was played.

    Attributes:
        kept: The assistant message as it now stands in the history.
        dropped: Reply text that was generated but never played.
    """

    name: ClassVar[str] = "history_cut"
    kept: str = ""
    dropped: str = ""


@dataclass(frozen=True)
class DeviceState(Event):
    """An audio device opened, was lost, or is being retried.

    Attributes:
        kind: ``input`` or ``output``.
        device: Device name as PortAudio reports it.
        state: ``open``, ``lost``, ``retry`` or ``failed``.
        sample_rate: Rate the stream runs at, Hz (0 when not open).
        channels: Channel count of the stream (0 when not open).
        message: What happened, for people.
    """

    name: ClassVar[str] = "device"
    kind: str = ""
    device: str = ""
    state: str = ""
    sample_rate: int = 0
    channels: int = 0
    message: str = ""


@dataclass(frozen=True)
class Notice(Event):
    """Something the user should know that is not a problem (e.g. "no camera: running without vision")."""

    name: ClassVar[str] = "notice"
    message: str = ""
