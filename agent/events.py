"""Typed messages between the pipeline's stages, grouped by the edge they cross.

Every stage of the one pipeline (:mod:`agent.pipeline`) talks to the next only through these
frozen dataclasses, and the outside world (CLI printer, JSON Lines, tests, systemd) sees the
same objects: nothing is translated into a second hierarchy. Each message carries the
``turn_id`` of the conversation turn it belongs to (-1: outside any turn).

Two kinds, after pipecat's frames and huggingface/speech-to-speech's ``messages.py``:

* **data** — flow downstream in order; a stage drops data of a cancelled turn (the turn
  generation, :class:`agent.pipeline.queues.TurnGate`);
* **control** (``control = True``) — overtake data in every stage queue (barge-in, history
  cut, shutdown).

``public`` messages are reports for people and machines: ``Event.to_json()`` gives the JSON
Lines shape of ``bolt-agent ... --json`` (``{"event": name, "turn_id": ..., ...fields}``);
fields whose metadata says ``json=False`` (audio arrays) are left out. Internal messages
(``public = False``) carry audio or bookkeeping and are never printed.

Times are ``time.perf_counter()`` seconds unless a field says ms; audio is float32 mono in
[-1, 1] at 16 kHz on the input side and int16 at the voice's rate on the output side.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from agent.control import ReleaseGate, StopSignal
    from agent.speech.asr import ASRResult


def _no_json(default: Any = None) -> Any:
    return field(default=default, repr=False, compare=False, metadata={"json": False})


@dataclass(frozen=True)
class Event:
    """Base class of every pipeline message.

    Attributes:
        turn_id: Index of the conversation turn, 0-based; -1 for messages outside any turn.
    """

    name: ClassVar[str] = "event"
    public: ClassVar[bool] = True
    control: ClassVar[bool] = False
    turn_id: int

    def to_json(self) -> dict[str, Any]:
        """Return the JSON Lines form ``{"event": name, "turn_id": ..., ...fields}``."""
        body = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.metadata.get("json", True)
        }
        return {"event": self.name, **body}


# --- source → listener: what came in --------------------------------------------------------------


@dataclass(frozen=True)
class AudioIn(Event):
    """A block of input audio.

    Attributes:
        samples: ``(n,)`` float32 mono at 16 kHz.
        t_end: Wall-clock time of the block's last sample (perf_counter s).
    """

    name: ClassVar[str] = "audio_in"
    public: ClassVar[bool] = False
    samples: np.ndarray = _no_json()
    t_end: float = 0.0


@dataclass(frozen=True)
class TextIn(Event):
    """A typed user turn (``chat``): goes straight to the turn driver."""

    name: ClassVar[str] = "text_in"
    public: ClassVar[bool] = False
    text: str = ""


@dataclass(frozen=True)
class InputStarted(Event):
    """A source began a new input (a file, the microphone, the keyboard)."""

    name: ClassVar[str] = "input"
    source: str = ""


@dataclass(frozen=True)
class InputEnded(Event):
    """A source finished one input; ``last`` when nothing more will come from it."""

    name: ClassVar[str] = "input_end"
    public: ClassVar[bool] = False
    source: str = ""
    last: bool = False


# --- listener → turn-taking: voice activity, frame by frame -----------------------------------------


@dataclass(frozen=True)
class VoiceFrame(Event):
    """One 32 ms VAD frame of input, with the listener's speech probability.

    Attributes:
        samples: ``(512,)`` float32 mono at 16 kHz.
        prob: Speech probability 0..1 (0 where the echo gate found the robot's own voice).
        t_end: Wall-clock time of the frame's last sample (perf_counter s).
        source: File path or device name the audio came from.
        fresh: The first frame after the stream (re)started: drop any utterance in progress.
        robot_audible: The robot's own speech could be in this frame (it played audible sound
            within the echo gate's tail, :meth:`agent.listening.echo.EchoGate.active`).
    """

    name: ClassVar[str] = "voice_frame"
    public: ClassVar[bool] = False
    samples: np.ndarray = _no_json()
    prob: float = 0.0
    t_end: float = 0.0
    source: str = ""
    fresh: bool = False
    robot_audible: bool = False


# --- turn-taking → ASR: pauses to transcribe, utterances ---------------------------------------------


@dataclass(frozen=True)
class Utterance(Event):
    """A span of speech found by the VAD in a file or stream.

    Attributes:
        source: File path or device name the audio came from.
        start_ms: Speech start within the source, ms.
        end_ms: Speech end within the source, ms (the VAD's speech end).
        audio: ``(n,)`` float32 16 kHz with pre- and post-roll (not printed).
        t_speech_end: Wall-clock time of the speech end (perf_counter s).
        t_endpoint: Wall-clock time the endpoint was decided (perf_counter s).
        end_rule: What ended it: ``silence``, ``max_length``, or an end-of-turn rule
            (``text``, ``smart_turn``, ``stop``; see :mod:`agent.listening.end_of_turn`).
        transcript: The ASR result made at the pause, when the utterance ended with no speech
            after it: nothing is left to decode.
        release: Set when the utterance ended on a verdict the silence has not confirmed yet:
            its turn is prepared at once and heard only once the gate is released
            (``[turn] confirm_ms``); None: heard at once.
        robot_audible: The robot's own speech could be in the utterance's audio (some frame of
            it came while the speaker played, or within the echo gate's tail after): only then
            can its transcript be an echo.
        overlap: It began while the robot was speaking a turn: an acknowledgement or a noise
            (:func:`agent.listening.floor.overlap_kind`) is no turn, and a turn held for it
            resumes.
    """

    name: ClassVar[str] = "utterance"
    source: str = ""
    start_ms: float = 0.0
    end_ms: float = 0.0
    audio: np.ndarray | None = _no_json()
    t_speech_end: float = _no_json(0.0)
    t_endpoint: float = _no_json(0.0)
    end_rule: str = "silence"
    transcript: ASRResult | None = _no_json(None)
    release: ReleaseGate | None = _no_json(None)
    robot_audible: bool = _no_json(False)
    overlap: bool = False


@dataclass(frozen=True)
class PauseCheck(Event):
    """Turn-taking → ASR stage: transcribe the utterance so far, for the judgement of a pause.

    Attributes:
        pause_id: The endpointer's pause number (a transcript for an older pause is stale).
        audio: ``(n,)`` float32 16 kHz, the utterance so far with the pause's first silence.
        early: Made at ``[turn] early_asr_ms`` of silence, ahead of the judgement at the short
            silence: it lacks that much silence, which the ASR stage pads.
        stale: Set by the turn-taking stage once the pause is over (the user spoke again): the
            transcript is no longer wanted and the ASR stage skips it.
    """

    name: ClassVar[str] = "pause_check"
    public: ClassVar[bool] = False
    pause_id: int = 0
    audio: np.ndarray | None = _no_json()
    early: bool = False
    stale: StopSignal | None = _no_json()


@dataclass(frozen=True)
class PauseTranscript(Event):
    """ASR stage → turn-taking: the transcript of a pause (the answer to a :class:`PauseCheck`).

    Attributes:
        pause_id: The pause transcribed.
        result: The transcript, or None when the recognizer failed (``error`` says why).
        error: What went wrong ("" when it worked).
    """

    name: ClassVar[str] = "pause_transcript"
    public: ClassVar[bool] = False
    pause_id: int = 0
    result: ASRResult | None = _no_json(None)
    error: str = ""


@dataclass(frozen=True)
class PauseVerdict(Event):
    """One pause judged by the turn-taking stage: what was heard so far and whether the turn is over.

    Attributes:
        pause_id: The endpointer's pause number.
        text: The transcript so far.
        complete: The user has finished.
        rule: The deciding rule (:class:`agent.listening.end_of_turn.Verdict`; ``error`` when
            the transcript or the judgement failed: the turn then ends by silence).
        smart_turn: Smart Turn's probability, at every pause (-1: no Smart Turn model).
        text_score: log10 probability that the sentence ends here (1: not run).
        asr_ms: Transcription time, ms.
        judge_ms: Judging time, ms.
        asr_logprob: Whisper's mean token log-probability of ``text`` (natural log; 0: nothing
            decoded).
        unclear: ``asr_logprob`` is under ``[turn] unclear_logprob``: Whisper may have misheard.
        confirm_ms: Silence that must confirm a finished verdict before its reply is heard
            (:func:`agent.pipeline.turn_taking.confirm_ms`: ``[turn] strong_confirm_ms``,
            ``confirm_ms`` or ``doubtful_confirm_ms`` by the evidence, grown by the speaker's
            learned pauses), ms; 0: at once.
        command_ms: The silence that confirms it instead once its prepared reply called a skill
            as the skill asks (:func:`agent.listening.pace.command_wait_ms`), ms.
        evidence: How sure the verdict is (:func:`agent.listening.pace.evidence`: ``stop``,
            ``strong``, ``normal``, ``doubtful``, ``unfinished``).
        pause_ms: The speaker's learned pause inside a turn, ms (0: not learned).
    """

    name: ClassVar[str] = "end_of_turn_check"
    pause_id: int = 0
    text: str = ""
    complete: bool = False
    rule: str = ""
    smart_turn: float = -1.0
    text_score: float = 1.0
    asr_ms: float = 0.0
    judge_ms: float = 0.0
    asr_logprob: float = 0.0
    unclear: bool = False
    confirm_ms: int = 0
    command_ms: int = 0
    evidence: str = ""
    pause_ms: int = 0


@dataclass(frozen=True)
class OverlapCheck(Event):
    """Turn-taking → ASR stage: transcribe the user's speech over the robot's (does it want the floor?).

    Attributes:
        check_id: Names the question (an answer to an older one is stale).
        audio: ``(n,)`` float32 16 kHz: the speech so far, with its pre-roll.
    """

    name: ClassVar[str] = "overlap_check"
    public: ClassVar[bool] = False
    check_id: int = 0
    audio: np.ndarray | None = _no_json()


@dataclass(frozen=True)
class OverlapTranscript(Event):
    """ASR stage → turn-taking: the words of an :class:`OverlapCheck` and what they are.

    Attributes:
        check_id: The question answered.
        result: The transcript (None: the recognizer failed).
        kind: :func:`agent.listening.floor.early_kind`'s answer: ``backchannel``, ``nothing``,
            ``interruption`` or ``""`` (not known yet).
    """

    name: ClassVar[str] = "overlap_transcript"
    public: ClassVar[bool] = False
    check_id: int = 0
    result: ASRResult | None = _no_json(None)
    kind: str = ""


@dataclass(frozen=True)
class Backchannel(Event):
    """The user spoke over the robot without taking the floor: an acknowledgement or a noise, no turn.

    Attributes:
        text: What Whisper heard ("" for a cough or a noise).
        kind: ``backchannel`` (an acknowledgement: "uh-huh", "yeah", "right") or ``nothing``
            (a laugh, a cough, a noise).
    """

    name: ClassVar[str] = "backchannel"
    text: str = ""
    kind: str = ""


# --- ASR → turn driver ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Transcript(Event):
    """Final ASR text of one utterance (already filtered for hallucinations), or typed text."""

    name: ClassVar[str] = "transcript"
    text: str = ""


@dataclass(frozen=True)
class UserTurn(Event):
    """A user turn for the turn driver, with the times its latency trace starts from.

    Attributes:
        text: What the user said (wake phrase removed).
        t_speech_end: End of user speech (perf_counter s); the moment text arrived for typed input.
        t_endpoint: Endpoint decided (perf_counter s).
        t_asr: Transcript ready (perf_counter s).
        asr_ms: Transcription time, ms.
        end_rule: What ended the user's turn (``Utterance.end_rule``; ``typed`` for text).
        release: The turn's output waits for this gate (``Utterance.release``); None: no wait.
        continues: The turn this one finishes (the user went on with "and then ..." after a
            pause that ended it): ``text`` holds both, and that turn is dropped; -1: none.
    """

    name: ClassVar[str] = "user_turn"
    public: ClassVar[bool] = False
    text: str = ""
    t_speech_end: float = 0.0
    t_endpoint: float = 0.0
    t_asr: float = 0.0
    asr_ms: float = 0.0
    end_rule: str = ""
    release: ReleaseGate | None = _no_json(None)
    continues: int = -1


@dataclass(frozen=True)
class TurnConfirmed(Event):
    """The user's silence confirmed a turn prepared before it was sure: its reply may be heard.

    Attributes:
        pause_id: The endpointer's pause whose verdict the turn was.
        silence_ms: The silence that confirmed it, ms: the verdict's ``confirm_ms``, or its
            ``command_ms`` once the prepared reply called a skill as the skill asks.
        command: The prepared reply's clear command set the wait (``[turn] strong_on_command``).
    """

    name: ClassVar[str] = "turn_confirmed"
    pause_id: int = 0
    silence_ms: int = 0
    command: bool = False


@dataclass(frozen=True)
class TurnDropped(Event):
    """A turn was dropped because the user went on: its words become part of the next turn.

    Either the silence had not confirmed it yet (``[turn] confirm_ms``): nothing of it was heard
    or done; or it had been answered and the user's next words only finish its sentence
    (``continued``, ``[turn] continue_ms``): what is left of its reply is cut, it leaves the
    history, and the next turn answers the whole sentence (its motions stay done).

    Attributes:
        text: What the dropped turn had heard.
        continued: Dropped after it was answered (the user continued its sentence).
    """

    name: ClassVar[str] = "turn_dropped"
    text: str = ""
    continued: bool = False


@dataclass(frozen=True)
class Skipped(Event):
    """Input that produced no turn (no speech, hallucination filtered, echo), with the reason."""

    name: ClassVar[str] = "skipped"
    reason: str = ""
    source: str = ""


# --- turn driver → speech: the reply as it is written, tools as they run ----------------------------


@dataclass(frozen=True)
class ReplyDelta(Event):
    """Reply text as the model writes it (no markup), for the sentence chunker.

    ``flush``: the text so far is a finished utterance (a model round that spoke, with another
    round to come): release it for synthesis now instead of waiting for the next sentence.
    """

    name: ClassVar[str] = "reply_delta"
    public: ClassVar[bool] = False
    text: str = ""
    flush: bool = False


@dataclass(frozen=True)
class ReplyEnd(Event):
    """The turn's model rounds are over: the chunker releases the rest."""

    name: ClassVar[str] = "reply_end"
    public: ClassVar[bool] = False


@dataclass(frozen=True)
class ToolCall(Event):
    """The model asked for a skill to run.

    Attributes:
        tool: Tool (skill) name as the model wrote it; may be unknown.
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
    """What a skill returned (``ok``) or why it failed (``ok=False``, ``result`` is the message).

    ``reason``: what the skill raised for people when it failed ("I have no camera, so I cannot
    see."), which the reply says; "" for a success, a failure without one, or a call the turn did
    not run (the user's words asked for another tool: nothing is said about it).
    """

    name: ClassVar[str] = "tool_result"
    tool: str = ""
    ok: bool = True
    result: Any = None
    call_id: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON form with the tool's name under ``name``."""
        return {
            "event": self.name,
            "turn_id": self.turn_id,
            "name": self.tool,
            "ok": self.ok,
            "result": self.result,
            "call_id": self.call_id,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class BackgroundDone(Event):
    """A background (asynchronous) tool call finished; the robot will speak about it.

    Attributes:
        tool: Tool name.
        ok: Whether it succeeded.
        result: Its result, or the error message.
        call_id: The id of the call that started it (matches the earlier ``tool_call``).
    """

    name: ClassVar[str] = "background_done"
    tool: str = ""
    ok: bool = True
    result: Any = None
    call_id: str = ""


@dataclass(frozen=True)
class FirstToken(Event):
    """The model's first token of the turn (latency mark; ``t`` perf_counter s)."""

    name: ClassVar[str] = "first_token"
    public: ClassVar[bool] = False
    t: float = 0.0


@dataclass(frozen=True)
class TurnGenerated(Event):
    """The turn driver finished a turn's model rounds and tool calls.

    Attributes:
        text: The whole reply text (no markup).
        llm_ms: Time in the model over all rounds, ms.
        ttft_ms: First round's time to first token, ms.
        prompt_tokens: Prompt tokens evaluated (KV-cache reuse excluded).
        tokens_per_s: Decoding speed of the turn's longest round, tokens/s.
        draft_tokens: Tokens proposed by a drafter (speculative decoding), 0 without one.
        draft_accepted: Of those, tokens the model accepted.
        rounds: Model rounds run (0 when the turn failed before its first round).
    """

    name: ClassVar[str] = "turn_generated"
    public: ClassVar[bool] = False
    text: str = ""
    llm_ms: float = 0.0
    ttft_ms: float = 0.0
    prompt_tokens: int = 0
    tokens_per_s: float = 0.0
    draft_tokens: int = 0
    draft_accepted: int = 0
    rounds: int = 0


# --- speech (chunker + TTS) → sink ----------------------------------------------------------------


@dataclass(frozen=True)
class SentenceReady(Event):
    """The chunker released a piece of the reply for synthesis."""

    name: ClassVar[str] = "sentence"
    public: ClassVar[bool] = False
    text: str = ""


@dataclass(frozen=True)
class AudioOut(Event):
    """Synthesized audio of one sentence.

    Attributes:
        text: What it says (cleaned for speech).
        piece: The reply piece (chunker output) it belongs to.
        last_of_piece: The piece has been heard once this audio is played to the end.
        audio: ``(n,)`` int16 mono at ``sample_rate`` (not printed).
        sample_rate: Hz.
        synth_ms: Time piper took for it, ms.
    """

    name: ClassVar[str] = "audio_out"
    public: ClassVar[bool] = False
    text: str = ""
    piece: str = ""
    last_of_piece: bool = True
    audio: np.ndarray | None = _no_json()
    sample_rate: int = 22050
    synth_ms: float = 0.0


# --- sink → pipeline: what was actually played ------------------------------------------------------


@dataclass(frozen=True)
class PlaybackStarted(Event):
    """The robot starts saying a sentence: its first sample reached the output (``t`` perf_counter s)."""

    name: ClassVar[str] = "speaking"
    text: str = ""
    t: float = _no_json(0.0)


@dataclass(frozen=True)
class Spoken(Event):
    """A piece of the reply finished playing (``completed``) or was cut off by a barge-in or stop."""

    name: ClassVar[str] = "spoken"
    text: str = ""
    completed: bool = True
    piece: str = _no_json("")
    last_of_piece: bool = _no_json(True)


@dataclass(frozen=True)
class TurnPlayed(Event):
    """Everything of the turn that was synthesized has been played (or written, for file sinks).

    Attributes:
        audio: Path of the reply WAV when the sink writes files, else None.
    """

    name: ClassVar[str] = "turn_played"
    public: ClassVar[bool] = False
    audio: str | None = None


# --- control: overtakes data ------------------------------------------------------------------------


@dataclass(frozen=True)
class BargeIn(Event):
    """The user spoke over the robot (or said stop): playback stopped, generation and synthesis cancelled.

    Attributes:
        reason: ``speech`` (sustained user speech), ``stop`` (a stop phrase), ``new_turn``,
            ``device`` or ``shutdown``.
        stop_ms: Time from the decision to the speaker going silent, ms.
    """

    name: ClassVar[str] = "barge_in"
    control: ClassVar[bool] = True
    reason: str = "speech"
    stop_ms: float = 0.0


@dataclass(frozen=True)
class Interrupt(Event):
    """A stage asks that the turn being generated or spoken stop (the pipeline does; ``BargeIn`` reports it).

    Attributes:
        reason: ``speech`` (sustained user speech over the robot), ``stop`` (a stop phrase),
            ``new_turn``, ``device`` or ``shutdown``.
    """

    name: ClassVar[str] = "interrupt"
    public: ClassVar[bool] = False
    control: ClassVar[bool] = True
    reason: str = "speech"


@dataclass(frozen=True)
class Hold(Event):
    """Turn-taking asks that the robot fall silent now and keep its turn: the user may be interrupting.

    The speaker pauses; the turn goes on being prepared. An interruption then becomes a turn (which
    cancels the held one); an acknowledgement, a noise or nothing within ``[live]
    false_interruption_ms`` resumes it (:class:`Resume`).

    Attributes:
        onset_t: When the user's speech began (perf_counter s).
        reason: What decided: the words (``words: 'wait'``) or speech sustained this long
            before any word was known (``speech``).
    """

    name: ClassVar[str] = "hold"
    public: ClassVar[bool] = False
    control: ClassVar[bool] = True
    onset_t: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class Resume(Event):
    """A held turn goes on: the speech that stopped the robot was no interruption.

    Attributes:
        reason: ``backchannel``, ``nothing`` or ``no turn`` (what the speech turned out to be),
            or ``timeout`` (no words within ``[live] false_interruption_ms``).
    """

    name: ClassVar[str] = "resume"
    public: ClassVar[bool] = False
    control: ClassVar[bool] = True
    reason: str = ""


@dataclass(frozen=True)
class Held(Event):
    """The robot fell silent because the user may be interrupting; its turn is kept.

    Attributes:
        after_ms: From the start of the user's speech to the speaker going silent, ms.
        reason: What decided (:attr:`Hold.reason`).
        stop_ms: Time the speaker took to go silent, ms.
    """

    name: ClassVar[str] = "held"
    after_ms: float = 0.0
    reason: str = ""
    stop_ms: float = 0.0


@dataclass(frozen=True)
class Resumed(Event):
    """A false interruption: the robot goes on from the start of the sentence it was cut in.

    Attributes:
        held_ms: How long it was silent, ms.
        reason: What the speech turned out to be (:attr:`Resume.reason`).
    """

    name: ClassVar[str] = "resumed"
    held_ms: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class CutHistory(Event):
    """Tell the turn driver to keep in the history only what the user heard of the turn's reply.

    Attributes:
        heard: Reply pieces played to the end, in order.
        generated: Every piece the chunker released.
    """

    name: ClassVar[str] = "cut_history"
    public: ClassVar[bool] = False
    control: ClassVar[bool] = True
    heard: tuple[str, ...] = ()
    generated: tuple[str, ...] = ()


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
class ContextTidied(Event):
    """Between turns the driver compacted the context ahead of need and read it into the KV cache.

    Attributes:
        dropped: Old turns compacted into the summary line (0: none needed).
        evaluated: Prompt tokens evaluated into the KV cache.
        complete: The evaluation ran to the end (False: stopped because the user spoke or work
            arrived; the next quiet moment goes on).
        took_ms: Time it took, ms.
    """

    name: ClassVar[str] = "context_tidied"
    dropped: int = 0
    evaluated: int = 0
    complete: bool = True
    took_ms: float = 0.0


@dataclass(frozen=True)
class Shutdown(Event):
    """Stop every stage (SIGTERM, Ctrl-C, end of input)."""

    name: ClassVar[str] = "shutdown"
    public: ClassVar[bool] = False
    control: ClassVar[bool] = True


# --- reports ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ready(Event):
    """All models are loaded and warmed; the agent takes input from now on.

    Attributes:
        load_ms: Loading and warming every model, ms.
        profile: The model profile the conversation runs (``plain`` or ``small``).
        tool_format: How the model writes tool calls (``bolt``, ``hermes``, ``grammar``...).
    """

    name: ClassVar[str] = "ready"
    load_ms: float = 0.0
    profile: str = ""
    tool_format: str = ""


@dataclass(frozen=True)
class Reply(Event):
    """The assistant's reply for a turn, once it was spoken (or written).

    Attributes:
        text: The model's text without markup (speech cleaning is applied only for synthesis).
        audio: Path of the reply WAV, or ``None`` when nothing was written (speaker, no output).
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
    """Per-turn latency, ms; the ``*_ms`` marks are from the end of user speech (-1: did not happen).

    ``asr_ms`` transcription time; ``llm_ttft_ms`` the first round's time to first token (with
    any wait for the model: an early start finishing, a read-ahead making way);
    ``llm_ms`` all model rounds; ``tts_first_audio_ms`` first sentence ready → its audio ready;
    ``tts_ms`` all synthesis; ``turn_ms`` speech end → turn played; ``prompt_tokens`` tokens
    evaluated (KV-cache reuse excluded). Marks: ``endpoint_ms`` endpoint decided,
    ``asr_done_ms`` transcript ready, ``first_token_ms`` model first token,
    ``first_sentence_ms`` first sentence ready for synthesis, ``first_audio_ms`` its audio
    ready, ``first_played_ms`` first audio handed to the speaker (voice-to-voice).
    ``tokens_per_s`` is the model's decoding speed (longest round), ``draft_acceptance`` the
    accepted share of drafted tokens (speculative decoding; -1 without a drafter).
    ``llm_rounds`` is the number of model rounds the turn took (a movement with its
    acknowledgement takes one, a data skill two).
    ``endpoint_rule`` says what ended the user's turn: ``silence``, ``max_length``, an
    end-of-turn rule (``text``, ``smart_turn``, ``stop``) or ``typed``.
    """

    name: ClassVar[str] = "timing"
    asr_ms: float = 0.0
    llm_ttft_ms: float = 0.0
    llm_ms: float = 0.0
    tts_first_audio_ms: float = 0.0
    tts_ms: float = 0.0
    turn_ms: float = 0.0
    prompt_tokens: int = 0
    endpoint_ms: float = -1.0
    asr_done_ms: float = -1.0
    first_token_ms: float = -1.0
    first_sentence_ms: float = -1.0
    first_audio_ms: float = -1.0
    first_played_ms: float = -1.0
    tokens_per_s: float = 0.0
    draft_acceptance: float = -1.0
    endpoint_rule: str = ""
    llm_rounds: int = 0


@dataclass(frozen=True)
class Error(Event):
    """A problem the agent survived: one line saying what, where and what to do."""

    name: ClassVar[str] = "error"
    message: str = ""


@dataclass(frozen=True)
class Notice(Event):
    """Something the user should know that is not a problem (e.g. "no camera: running without vision")."""

    name: ClassVar[str] = "notice"
    message: str = ""


@dataclass(frozen=True)
class Standby(Event):
    """``[live] attention = "wake_word"``: the agent went into standby, or its wake word woke it.

    In standby only the wake-word model hears the microphone (no VAD, ASR or chat model).

    Attributes:
        state: ``standby`` or ``awake``.
        reason: ``start``, ``asked`` (a sleep phrase, or a sleep skill put the robot to rest),
            ``quiet`` (nobody spoke for ``[live] standby_after_s``) or ``wake_word``.
        wake_word: The phrase it listens for ("Okay Nabu").
        score: The detection's sliding-window mean probability (0..1; ``wake_word`` only).
        text: The sleep phrase heard (``asked`` by a phrase), else "".
    """

    name: ClassVar[str] = "standby"
    state: str = "standby"
    reason: str = ""
    wake_word: str = ""
    score: float = 0.0
    text: str = ""


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
class PlayedBlock(Event):
    """A block the speaker just played, resampled to 16 kHz mono: the echo guard's reference.

    Attributes:
        samples: ``(n,)`` float32 at 16 kHz (not printed).
        t: Wall-clock time of the block's last sample (perf_counter s).
    """

    name: ClassVar[str] = "played_block"
    public: ClassVar[bool] = False
    samples: np.ndarray | None = _no_json()
    t: float = 0.0


@dataclass(frozen=True)
class RobotParked(Event):
    """The agent stopped and parked the robot (:class:`hardware.layers.ParkReport`).

    Attributes:
        positions: Every joint where it ended, degrees (mm for a Reachy Mini's head
            translations): read back from the hardware when ``read_back``, else last commanded.
        torque: Whether the motors still hold (False once parked).
        pose: ``neutral``, ``sleep`` (the body's rest pose), ``held`` (it did not move: after an
            e-stop or while offline) or ``elsewhere``.
        read_back: Positions and motors were reported by the hardware (a Reachy Mini's daemon).
    """

    name: ClassVar[str] = "robot_parked"
    positions: dict[str, float] = field(default_factory=dict)
    torque: bool = False
    pose: str = "neutral"
    read_back: bool = False


@dataclass(frozen=True)
class SceneDescribed(Event):
    """A vision-language model described what the camera sees (it replaces the previous description).

    Attributes:
        text: The description as it enters the chat model's context.
        trigger: ``asked`` (the ``describe_scene`` skill), ``arrived``, ``scene changed`` or ``first look``.
        took_ms: Image encode + generation, ms.
        image_tokens: Image tokens the engine reported (0 where it does not say).
        frames: Frames described.
    """

    name: ClassVar[str] = "scene_described"
    text: str = ""
    trigger: str = ""
    took_ms: float = 0.0
    image_tokens: int = 0
    frames: int = 1
