"""Every real pause of a recorded turn, with what the end-of-turn judge knows at it (``bench --eot``'s input).

The way LiveKit's eot-bench scores a detector: each recording is run through the live
endpointer's rules (:class:`~agent.listening.vad.Endpointer`, Silero frame by frame) with the
utterance never ended by a verdict, so every pause of the turn is reached; at each pause's
``[turn] short_silence_ms`` the utterance so far is transcribed as the ASR stage does it (the
pause's silence plus the padding of :data:`agent.pipeline.asr_stage.PAUSE_PAD`) and judged by the
real :class:`~agent.listening.end_of_turn.EndOfTurnJudge` (Smart Turn and the text model, both
at every pause). What happened next is the truth: the user went on after the pause (a pause
inside the turn, ``length_ms`` long) or said nothing more (the turn's end). A policy (how long
to wait after each verdict) is then scored on these records without running the models again
(:mod:`tools.bench.eot`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.speech.audio import SAMPLE_RATE

TAIL_S = 4.0
"""Silence appended to each recording, s: past the longest wait a policy is scored at."""


@dataclass(frozen=True)
class PauseRecord:
    """One judged pause of a recorded turn.

    Attributes:
        case: The recording's file name.
        speaker: Who said it (a voice of the turn-taking set, or a held-out speaker).
        kind: The case's kind (``paused``, ``plain``).
        order: The case's place in its speaker's conversation.
        index: The pause's number in the recording (0 first).
        length_ms: Silence before the user went on, ms; -1 at the end of the turn.
        heard: The transcript of the utterance so far.
        asr_logprob: Whisper's mean token log-probability of ``heard``.
        unsure: Whisper only guessed (:attr:`agent.speech.asr.ASRResult.unsure`).
        rule: The verdict's rule.
        complete: The verdict says finished.
        smart_turn: Smart Turn's probability (-1: no model).
        text_score: The text model's log10 probability that the sentence ends here (computed at
            every pause with words, whichever rule decided; 1.0: no words or no model).
        judge_ms: Judging time, ms (ASR excluded).
    """

    case: str
    speaker: str
    kind: str
    order: int
    index: int
    length_ms: float
    heard: str
    asr_logprob: float
    unsure: bool
    rule: str
    complete: bool
    smart_turn: float
    text_score: float
    judge_ms: float = 0.0

    @property
    def end(self) -> bool:
        """The user said nothing more after this pause."""
        return self.length_ms < 0

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class Recording:
    """A recording to collect the pauses of: its WAV and who says it."""

    path: Path
    speaker: str
    kind: str
    order: int


def pauses_of(audio: np.ndarray, short_ms: int, vad_cfg: Any) -> list[tuple[np.ndarray, float]]:
    """The pauses of one recorded turn, found by the live endpointer's rules.

    Args:
        audio: ``(n,)`` float32 16 kHz (:data:`TAIL_S` of silence is appended).
        short_ms: ``[turn] short_silence_ms``: a pause is judged after this much silence.
        vad_cfg: ``[vad]``.

    Returns:
        Per pause: the utterance so far at its short silence (what the judge is given) and the
        silence the user left before going on, ms (-1: nothing more was said).
    """
    from agent.listening.vad import FRAME, Endpointer, SileroFrameVAD

    vad = SileroFrameVAD()
    ep = Endpointer(vad_cfg, short_ms, long_silence_ms=int(TAIL_S * 1000) + 1000)
    x = np.concatenate([audio.astype(np.float32), np.zeros(int(TAIL_S * SAMPLE_RATE), np.float32)])
    out: list[tuple[np.ndarray, float]] = []
    open_at: int | None = None  # index in out of the pause still open
    silence = 0.0
    for i in range(0, x.size - FRAME + 1, FRAME):
        frame = x[i : i + FRAME]
        upd = ep.feed(frame, vad(frame))
        if upd.paused and upd.audio is not None:
            out.append((upd.audio, -1.0))
            open_at = len(out) - 1
        now = ep.silence_ms
        if open_at is not None and upd.speaking and now == 0.0 and silence > 0.0:
            out[open_at] = (out[open_at][0], silence)  # the user went on
            open_at = None
        silence = now
    return out


def collect(
    core: Any, recordings: list[Recording], note: Callable[[str], None] = lambda _s: None
) -> list[PauseRecord]:
    """Judge every pause of every recording with the core's ASR and end-of-turn judge.

    Args:
        core: A warmed :class:`~agent.pipeline.core.AgentCore` with a semantic judge.
        recordings: What to play.
        note: Progress lines.

    Returns:
        The records, recording after recording, pause after pause.

    Raises:
        RuntimeError: the config has no end-of-turn judge (``[turn] end_of_turn = "silence"``).
    """
    from agent.pipeline.asr_stage import PAUSE_PAD
    from tools.bench.turn_set import read_wav

    judge = core.end_of_turn
    if judge is None:
        raise RuntimeError('bench --eot needs [turn] end_of_turn = "semantic" and its models')
    cfg = core.cfg
    out: list[PauseRecord] = []
    for n, rec in enumerate(recordings):
        if n % 20 == 0:
            note(f"judging the pauses of {rec.path.name} ({n + 1} of {len(recordings)})")
        for index, (audio, length) in enumerate(
            pauses_of(read_wav(rec.path), cfg.turn.short_silence_ms, cfg.vad)
        ):
            res = core.asr.transcribe(np.concatenate([audio, np.zeros(PAUSE_PAD, np.float32)]))
            v = judge.judge(audio, res.text, unsure=res.unsure)
            text = v.text_score
            if text >= 1.0 and res.text.strip() and judge.text is not None:
                text = round(judge.text.score(res.text), 2)
            out.append(
                PauseRecord(
                    rec.path.name, rec.speaker, rec.kind, rec.order, index, round(length, 1), res.text,
                    round(res.avg_logprob, 3), res.unsure, v.rule, v.complete, v.smart_turn, text, v.ms,
                )
            )  # fmt: skip
    return out
