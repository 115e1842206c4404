"""``[asr]``, ``[vad]``, ``[turn]`` and ``[tts]``: hearing and speaking (units: ms, s, probability 0..1)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hardware.config import StrictModel


class VADConfig(StrictModel):
    """Silero VAD settings (units: probability 0..1, ms, s)."""

    threshold: float = Field(0.5, ge=0.05, le=0.95)
    min_speech_ms: int = Field(250, ge=0)
    min_silence_ms: int = Field(500, ge=50, description="endpointing silence, ms")
    speech_pad_ms: int = Field(400, ge=0, description="pre-roll / post-roll kept around speech, ms")
    max_utterance_s: float = Field(30.0, gt=1.0)


class TurnConfig(StrictModel):
    """End-of-turn detection (units: ms, probability 0..1, log10 probability).

    ``semantic``: after ``short_silence_ms`` of silence the utterance so far is judged
    (:mod:`agent.listening.end_of_turn`) on a transcript started at ``early_asr_ms`` of silence
    (Whisper's 0.6 s then overlaps the rest of the wait; the transcript of a pause the user
    talks through is dropped): a finished turn ends at once, its reply heard once
    ``confirm_ms`` of silence confirm it (prepared meanwhile; dropped if the user goes on), an
    unfinished one waits for more speech, ending anyway after ``long_silence_ms``. ``silence``: the turn ends
    after ``[vad] min_silence_ms`` of silence, nothing else (also the fallback when the
    end-of-turn models are missing, with a notice).

    The text thresholds are log10 of the chat model's probability that the user's sentence
    ends where the transcript ends, measured on SmolLM2-135M with the robot's system prompt:
    finished commands -0.1 … -1.9, cut sentences -1.7 … -5.4 (see the module docstring).
    """

    end_of_turn: Literal["semantic", "silence"] = "semantic"
    short_silence_ms: int = Field(200, ge=64, le=1000, description="silence before the turn is judged, ms")
    early_asr_ms: int = Field(
        96,
        ge=0,
        le=1000,
        description="silence after which the utterance so far is transcribed, ahead of the judgement "
        "at short_silence_ms, ms; 0 = transcribe at short_silence_ms",
    )
    smart_turn_ms: int = Field(
        32,
        ge=0,
        le=1000,
        description="silence after which Smart Turn judges the utterance so far by its sound, ahead of "
        "the judgement at short_silence_ms, ms (the CPU waits for speech or the transcript then: both "
        "signals at every pause at no cost); 0 = at short_silence_ms",
    )
    long_silence_ms: int = Field(
        1600, ge=300, le=5000, description="silence that ends an unfinished-sounding turn anyway, ms"
    )
    confirm_ms: int = Field(
        600,
        ge=0,
        le=3000,
        description="silence that confirms a turn the words called finished on ordinary evidence, ms: until "
        "then its reply is prepared but not heard (skills that only read already run), and dropped if "
        "the user goes on; 0 = heard at once. Every wait grows with the speaker's learned pauses "
        "(learn_pauses); bench --eot measures the false cut-offs each wait costs",
    )
    strong_confirm_ms: int = Field(
        300,
        ge=0,
        le=3000,
        description="silence that confirms a finished verdict on strong evidence, ms: the words "
        "complete (text score >= strong_text, heard clearly) and a second signal agrees (Smart Turn "
        "> strong_smart_turn, or a question); 0 = confirm_ms for every clear verdict",
    )
    strong_on_command: bool = Field(
        True,
        description="a finished verdict on ordinary evidence whose prepared reply calls a skill with side "
        "effects, its arguments valid as written, is confirmed after strong_confirm_ms when Smart Turn "
        "agrees (> strong_smart_turn): the clear command says the words are whole, the sound that "
        "the user is done",
    )
    strong_text: float = Field(
        -0.5, le=0.0, description="text score (log10) at or over which the words are surely complete"
    )
    strong_smart_turn: float = Field(
        0.5, ge=0.0, le=1.0, description="Smart Turn probability over which the audio agrees the turn is over"
    )
    learn_pauses: bool = Field(
        True,
        description="learn the speaker's pauses inside their turns over a conversation and lengthen every "
        "wait by how much longer than pause_min_ms they are (pause_alpha, pause_min_ms, pause_max_ms; "
        "LiveKit's dynamic endpointing)",
    )
    pause_alpha: float = Field(0.9, gt=0.0, le=1.0, description="weight of the history in the pause average")
    pause_min_ms: int = Field(
        500,
        ge=100,
        le=3000,
        description="the learned pause's lower bound and start, ms: no wait grows below it",
    )
    pause_max_ms: int = Field(3000, ge=100, le=10000, description="the learned pause's upper bound, ms")
    unclear_logprob: float = Field(
        -0.5,
        le=0.0,
        description="a transcript Whisper decoded under this mean token log-probability (natural log) "
        "is unclear: the words the text model judged may not be what the user said",
    )
    doubtful_confirm_ms: int = Field(
        1400,
        ge=0,
        le=5000,
        description="silence that confirms a finished verdict on doubtful evidence, ms: unclear words "
        "('Can you wave' heard as 'come your way' sounds finished), or words that alone did not say "
        "finished (Smart Turn decided); 0 = confirm_ms for every verdict",
    )
    continue_ms: int = Field(
        2000,
        ge=0,
        le=10000,
        description="an utterance that starts this soon after the last one ended, with words that only "
        "finish a sentence ('and then wave', 'to the right'), continues that turn: its reply is cut and "
        "the whole sentence is answered, ms; 0 = every utterance is a turn of its own",
    )
    smart_turn_model: str = Field("", description="Smart Turn ONNX path; empty = the one from pipecat-ai")
    smart_turn_threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="complete when p > this (pipecat: 0.5)"
    )
    text_model: str = Field(
        "packaged:smollm2-135m", description='GGUF that scores "does the sentence end here"; "" = off'
    )
    text_complete: float = Field(-1.2, le=0.0, description="text alone says finished at or over this")
    text_with_audio: float = Field(
        -1.6, le=0.0, description="finished when Smart Turn agrees and text is over this"
    )

    @model_validator(mode="after")
    def _confirmations_before_the_long_silence(self) -> TurnConfig:
        for name, off in (
            ("confirm_ms", "answer at the verdict"),
            ("doubtful_confirm_ms", "use confirm_ms"),
            ("strong_confirm_ms", "use confirm_ms"),
        ):
            ms = getattr(self, name)
            if ms and ms >= self.long_silence_ms:
                raise ValueError(
                    f"{name} ({ms}) must be below long_silence_ms ({self.long_silence_ms}), or 0 to {off}"
                )
        return self

    @model_validator(mode="after")
    def _pause_bounds(self) -> TurnConfig:
        if self.pause_min_ms > self.pause_max_ms:
            raise ValueError(
                f"pause_min_ms ({self.pause_min_ms}) must be at most pause_max_ms ({self.pause_max_ms})"
            )
        return self

    @model_validator(mode="after")
    def _smart_turn_by_the_judgement(self) -> TurnConfig:
        if self.smart_turn_ms > self.short_silence_ms:
            raise ValueError(
                f"smart_turn_ms ({self.smart_turn_ms}) must be at most short_silence_ms "
                f"({self.short_silence_ms}), or 0 to run Smart Turn at the judgement"
            )
        return self

    @model_validator(mode="after")
    def _early_asr_before_the_judgement(self) -> TurnConfig:
        if self.early_asr_ms and self.early_asr_ms >= self.short_silence_ms:
            raise ValueError(
                f"early_asr_ms ({self.early_asr_ms}) must be below short_silence_ms "
                f"({self.short_silence_ms}), or 0 to transcribe at the judgement"
            )
        return self


class ASRConfig(StrictModel):
    """faster-whisper settings.

    ``temperature`` keeps Whisper's fallback tuple: a segment whose compression ratio or
    mean log-probability fails the thresholds is decoded again at the next temperature.
    """

    model: str = "packaged:whisper-tiny.en"
    language: str = "en"
    device: str = "cpu"
    compute_type: str = "int8"
    threads: int = Field(2, ge=1)
    beam_size: int = Field(
        1,
        ge=1,
        description="1 = greedy (as accurate as beam 5 on the shared commands, 80-90 ms faster per "
        "pause); 5 = Whisper's own default",
    )
    temperature: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    compression_ratio_threshold: float = 2.4
    log_prob_threshold: float = -1.0
    no_speech_threshold: float = 0.6
    unsure_max_s: float = Field(
        1.5,
        ge=0.0,
        le=30.0,
        description="audio shorter than this, s, whose greedy decode failed (a fallback temperature "
        "was needed) or stays under log_prob_threshold at every temperature is an unsure transcript "
        "(a hum, a noise): not answered unless it is a stop phrase; 0 = answer every transcript",
    )
    sure_fallback_logprob: float = Field(
        -0.5,
        le=0.0,
        description="a fallback temperature's decode at or over this mean token log-probability "
        "(natural log) is sure all the same: words Whisper sampled that confidently were said "
        "(hums sampled at -0.75 and under)",
    )
    tokens_per_s: float = Field(
        12.0,
        gt=0.0,
        description="a decode stops after 16 tokens plus this many per second of audio: more than "
        "any speech holds; a decode that reaches it looped",
    )
    overlap_context_s: float = Field(
        7.0,
        ge=1.0,
        le=30.0,
        description="encoder window, s, for the checks of speech over the robot's ([live] "
        "overlap_words_ms): 7 s decodes a check in ~90 ms where 10 s takes ~120 ms and Whisper's "
        "own 30 s ~330 ms on 2 cores (docs/facts.md); 30 = the full window",
    )
    turn_context_s: float = Field(
        15.0,
        ge=1.0,
        le=30.0,
        description="encoder window, s, for a turn's words: a shorter window (at least the audio plus "
        "1 s) encodes faster; its greedy decode that fails Whisper's checks is decoded again on the "
        "full window with the fallback temperatures; 30 = the full window only",
    )
    hotwords: list[str] = Field(default_factory=list)
    bias_with_skills: bool = True
    bias_mode: Literal["hotwords", "initial_prompt"] = Field(
        "hotwords",
        description="how skill names and the wake phrase reach Whisper: as hotwords, or as a "
        "prompt that reads like earlier speech",
    )


class TTSConfig(StrictModel):
    """Piper voice settings."""

    voice: str = "packaged:piper-joe-medium"
    length_scale: float = Field(1.0, gt=0.2, le=3.0, description=">1 speaks slower")
    speaker_id: int | None = None
    max_sentences: int = Field(0, ge=0, description="0 = no limit")
