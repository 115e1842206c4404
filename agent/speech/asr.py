"""Speech recognition with faster-whisper, guarded against Whisper's known failure modes.

Guards (all configurable in ``[asr]``):

* **No speech → no text.** Segments with a high no-speech probability *and* a low mean
  log-probability are dropped (Whisper's own rule, thresholds 0.6 / -1.0 from the paper's
  decoding heuristics, as faster-whisper uses them).
* **Repetition loops.** The temperature-fallback tuple and the compression-ratio check
  (2.4) are kept, so a looping decode is retried at a higher temperature. A decode stops after
  :func:`token_cap` tokens (16 plus ``tokens_per_s`` per second of audio: more than any speech
  holds), so a loop costs a fraction of Whisper's own 224-token limit. A looping segment (over the
  ratio, or at the cap) that is one phrase said again and again is kept as the phrase once
  (:func:`repeated_phrase`); any other segment over the ratio is dropped. The loop this answers
  is in ``docs/turn-taking.md``.
* **Unsure short decodes are flagged.** When the greedy decode (temperature 0) of audio shorter
  than ``unsure_max_s`` failed Whisper's own checks, so a fallback temperature was needed and
  its sample stays under ``sure_fallback_logprob`` (-0.5), or even the last one leaves the mean
  log-probability under ``log_prob_threshold`` (-1.0), the transcript is marked
  :attr:`ASRResult.unsure` (a hum, a noise: the samples measured are in
  ``docs/turn-taking.md``). The ASR stage drops an unsure transcript unless it is a stop phrase,
  and end-of-turn waits on it as on a hesitation.
* **Sign-off hallucinations on noise** ("Thanks for watching", "you", ...) are dropped when
  they are the whole transcript and the audio is short or the decode unsure.
* **Language fixed in config** (no detection on a 1-second command).
* ``condition_on_previous_text=False``: one bad segment cannot poison the next.

**Encoder context.** Whisper's encoder always sees a 30 s window (3000 mel frames), padded; on
two cores that costs ~320 ms whatever the audio's length. CTranslate2 encodes a shorter window
as well (whisper.cpp's ``audio_ctx`` does the same): ``transcribe(context_s=…)`` gives the encoder
the audio's own frames (plus 1 s) and at least ``context_s`` (``docs/turn-taking.md`` has the
accuracy and speed measured). Used where speed decides, for the checks of speech over the robot.

ASR biasing: skill and animation names and the wake phrase go to faster-whisper as
``hotwords`` or as an ``initial_prompt`` (``[asr] bias_mode``); they nudge the decoder toward
the robot's vocabulary.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.config import ASRConfig
from agent.speech.audio import SAMPLE_RATE
from agent.speech.words import normalize

log = logging.getLogger(__name__)

# Whole-transcript phrases Whisper emits on noise or silence (from its YouTube-subtitle
# training data); seen in faster-whisper and whisper.cpp issue reports.
SIGN_OFF_HALLUCINATIONS = frozenset(
    {
        "you",
        "thank you",
        "thanks for watching",
        "thank you for watching",
        "thanks for watching!",
        "please subscribe",
        "subscribe",
        "bye",
        "bye bye",
        "so",
        "okay",
        "the end",
        "uh",
        "um",
        "hmm",
        "thank you so much for watching",
        "see you next time",
        "i'll see you next time",
    }
)


@dataclass(frozen=True)
class ASRResult:
    """Transcript of one utterance.

    Attributes:
        text: The transcript; empty when nothing trustworthy was heard.
        dropped: Why text was dropped (empty when kept).
        avg_logprob: Mean token log-probability over kept segments.
        duration_ms: Decode time, ms.
        unsure: ``text`` is Whisper's guess at short audio (under ``[asr] unsure_max_s``) that
            the greedy decode did not pass (``temperature`` over 0) and the fallback sampled
            under ``[asr] sure_fallback_logprob``, or that no temperature decoded over ``[asr]
            log_prob_threshold``: likely a hum or a noise, not words.
        temperature: The highest fallback temperature a kept segment was decoded at; 0 is the
            greedy decode (faster-whisper ``Segment.temperature``).
    """

    text: str
    dropped: str = ""
    avg_logprob: float = 0.0
    duration_ms: float = 0.0
    unsure: bool = False
    temperature: float = 0.0


FRAMES_PER_S = 100
"""Whisper's log-mel frames per second of audio (10 ms hop)."""
WINDOW_S = 30.0
"""Whisper's encoder window, s."""
WINDOW_FRAMES = int(WINDOW_S * FRAMES_PER_S)
MAX_SEGMENT_TOKENS = 220
"""The most tokens one 30 s segment's decode may write: Whisper's context is 448 tokens and
faster-whisper's longest prompt 228 (223 of hotwords, 5 special), so a longer limit can raise."""
CONTEXT_MARGIN_FRAMES = 100
"""Frames past the audio's own end kept in a shortened window (1 s of the window's padding)."""


def token_cap(n_samples: int, tokens_per_s: float) -> int:
    """The most tokens a decode of ``n_samples`` of 16 kHz audio may write.

    16 plus ``tokens_per_s`` per second (fast speech is ~4 words, ~6 tokens, a second), and
    :data:`MAX_SEGMENT_TOKENS` at most.
    """
    return min(MAX_SEGMENT_TOKENS, 16 + math.ceil(tokens_per_s * n_samples / SAMPLE_RATE))


def repeated_phrase(text: str) -> str | None:
    """``text``'s first words when the whole of it is one phrase said at least twice in a row.

    "turn your head to the left turn your head to the left turn your" → "turn your head to the
    left". The phrase is at least two words; words compare without case and punctuation; the
    last repeat may be cut short.

    Returns:
        The phrase (as written the first time, trailing punctuation dropped); None when
        ``text`` is not such a loop.
    """
    words = text.split()
    keys = [normalize(w) for w in words]
    for period in range(2, len(words) // 2 + 1):
        if all(keys[i] == keys[i % period] for i in range(period, len(words))):
            return " ".join(words[:period]).rstrip(",.;:!?")
    return None


def context_frames(n_samples: int, context_s: float) -> int:
    """Encoder frames for ``n_samples`` of 16 kHz audio in a window of at least ``context_s``.

    The audio's frames plus :data:`CONTEXT_MARGIN_FRAMES`, rounded up to 100 (1 s), at least
    ``context_s`` and at most Whisper's 30 s window.
    """
    need = n_samples * FRAMES_PER_S // SAMPLE_RATE + CONTEXT_MARGIN_FRAMES
    need = -(-need // 100) * 100
    return int(min(WINDOW_FRAMES, max(need, round(context_s * FRAMES_PER_S))))


def _short_window_model(model_cls: type) -> type:
    """``model_cls`` (faster-whisper's ``WhisperModel``) whose encoder sees a shortened window.

    faster-whisper pads every segment's features to 3000 frames before :meth:`encode`; the
    subclass cuts them to the calling thread's ``window.frames`` when one is set.
    """

    class ShortWindowWhisper(model_cls):  # type: ignore[misc, valid-type]
        window = threading.local()

        def encode(self, features: np.ndarray):  # noqa: ANN202 (CTranslate2's StorageView)
            frames = getattr(self.window, "frames", None)
            if frames is not None and isinstance(features, np.ndarray) and features.shape[-1] > frames:
                features = np.ascontiguousarray(features[..., :frames])
            return super().encode(features)

    return ShortWindowWhisper


class WhisperASR:
    """faster-whisper model with the guards above.

    Args:
        model_path: CTranslate2 model folder (e.g. the packaged tiny.en).
        cfg: ``[asr]`` settings.
        hotwords: Words to bias decoding toward (skill names, wake phrase).
    """

    def __init__(self, model_path: Path, cfg: ASRConfig, hotwords: list[str] | None = None) -> None:
        from faster_whisper import WhisperModel

        self.cfg = cfg
        self.hotwords = list(dict.fromkeys([*cfg.hotwords, *(hotwords or [])]))
        self.model = _short_window_model(WhisperModel)(
            str(model_path), device=cfg.device, compute_type=cfg.compute_type, cpu_threads=cfg.threads
        )

    def warmup(self) -> None:
        """Decode 1 s of low noise once so the first real turn is not slower than later ones."""
        rng = np.random.default_rng(0)
        self.transcribe((rng.standard_normal(SAMPLE_RATE) * 0.01).astype(np.float32))

    def transcribe(
        self,
        audio: np.ndarray,
        bias: bool = True,
        context_s: float | None = None,
        fallback: bool = True,
        max_tokens: int | None = None,
        sure_logprob: float | None = None,
    ) -> ASRResult:
        """Transcribe one utterance.

        Args:
            audio: ``(n,)`` float32 mono at 16 kHz.
            bias: Pass the hotwords to the decoder.
            context_s: Encode a window of at least this many seconds (and the audio's own
                length plus 1 s, :func:`context_frames`) instead of Whisper's 30 s: faster, a
                little less accurate. None (or 30 and more): the full window.
            fallback: Decode again at Whisper's fallback temperatures when the greedy decode fails
                its checks (with ``context_s``: the full window is decoded that way once the
                short window's greedy decode failed, or kept no words). False: the greedy decode
                only (a failed one is :attr:`ASRResult.unsure`), at most one decode's time.
            max_tokens: Stop the decode after this many tokens (the first words are enough);
                None: :func:`token_cap` of the audio (220 per 30 s segment at most).
            sure_logprob: With ``context_s`` and ``fallback``: the short window's greedy decode
                is kept only at this mean token log-probability or over (natural log; a short
                window makes Whisper less sure, and an unsure transcript waits longer for its
                turn's end); None: ``[asr] log_prob_threshold``.

        Returns:
            :class:`ASRResult`; ``text`` is empty with ``dropped`` set when nothing passes the guards.
        """
        t0 = time.perf_counter()
        cfg = self.cfg
        words = " ".join(self.hotwords) if bias and self.hotwords else None
        hot = words if cfg.bias_mode == "hotwords" else None
        prompt = (
            f"Robot commands: {', '.join(self.hotwords)}."
            if words and cfg.bias_mode == "initial_prompt"
            else None
        )
        temperatures = list(cfg.temperature) if fallback else [0.0]
        cap = token_cap(audio.size, cfg.tokens_per_s)
        options = {
            "hotwords": hot,
            "initial_prompt": prompt,
            "max_new_tokens": cap if max_tokens is None else min(max_tokens, cap),
        }
        short = context_s is not None and context_s < WINDOW_S
        if short and fallback:
            res = self._decode(audio, t0, [0.0], context_s, options)
            floor = (
                cfg.log_prob_threshold if sure_logprob is None else max(sure_logprob, cfg.log_prob_threshold)
            )
            if res.text and res.avg_logprob >= floor:
                return res
            log.info(
                "short-window decode unsure (%r, %s); decoding the full window",
                res.text,
                res.dropped or f"logprob {res.avg_logprob:.2f}",
            )
            return self._decode(audio, t0, temperatures, None, options)
        return self._decode(audio, t0, temperatures, context_s if short else None, options)

    def _decode(
        self,
        audio: np.ndarray,
        t0: float,
        temperatures: list[float],
        context_s: float | None,
        options: dict[str, Any],
    ) -> ASRResult:
        """Decode ``audio`` in a ``context_s`` window (None: the full one) and apply the guards.

        Args:
            audio: As for :meth:`transcribe`.
            t0: When the transcription started (``perf_counter`` s): the result's ``duration_ms``.
            temperatures: Whisper's temperatures, the greedy 0.0 first.
            context_s: The encoder's window, s (:func:`context_frames`); None: 30 s.
            options: ``hotwords``, ``initial_prompt`` and ``max_new_tokens`` for faster-whisper.
        """
        window = self.model.window
        window.frames = None if context_s is None else context_frames(audio.size, context_s)
        try:
            return self._guarded(audio, t0, temperatures, options)
        finally:
            window.frames = None

    def _guarded(
        self, audio: np.ndarray, t0: float, temperatures: list[float], options: dict[str, Any]
    ) -> ASRResult:
        """faster-whisper's decode of ``audio`` (see :meth:`_decode`) and the guards of :meth:`transcribe`."""
        cfg = self.cfg
        segments, _info = self.model.transcribe(
            audio,
            language=cfg.language,
            beam_size=cfg.beam_size,
            temperature=temperatures,
            compression_ratio_threshold=cfg.compression_ratio_threshold,
            log_prob_threshold=cfg.log_prob_threshold,
            no_speech_threshold=cfg.no_speech_threshold,
            condition_on_previous_text=False,
            vad_filter=False,
            without_timestamps=True,
            **options,
        )
        kept, reasons, logprobs = [], [], []
        temp = 0.0  # the highest fallback temperature a kept segment needed
        for seg in segments:  # lazy: decoding happens while iterating
            if seg.no_speech_prob > cfg.no_speech_threshold and seg.avg_logprob < cfg.log_prob_threshold:
                reasons.append(f"no speech (p={seg.no_speech_prob:.2f})")
                continue
            said = seg.text.strip()
            over_ratio = seg.compression_ratio > cfg.compression_ratio_threshold
            if over_ratio or len(seg.tokens) >= options["max_new_tokens"]:
                if phrase := repeated_phrase(said):
                    log.info("repetition loop %r kept as %r", said[:80], phrase)
                    said = phrase
                elif over_ratio:
                    reasons.append(f"repetition loop (compression ratio {seg.compression_ratio:.1f})")
                    continue
            if said:
                kept.append(said)
                logprobs.append(seg.avg_logprob)
                temp = max(temp, seg.temperature)
        text = " ".join(kept).strip()
        ms = (time.perf_counter() - t0) * 1000.0
        mean_lp = float(np.mean(logprobs)) if logprobs else 0.0
        if text and normalize(text) in SIGN_OFF_HALLUCINATIONS:
            short = audio.size < 1.5 * SAMPLE_RATE
            if (
                short
                or mean_lp < -0.6
                or normalize(text) in {"you", "thanks for watching", "thank you for watching"}
            ):
                log.info("dropped likely hallucination %r (logprob %.2f)", text, mean_lp)
                return ASRResult("", f"likely hallucination {text!r}", mean_lp, ms)
        if not text:
            return ASRResult("", "; ".join(reasons) or "no words recognised", mean_lp, ms)
        # Sampling at a fallback temperature is random: the same hum came back as "them." at 1.0
        # and as "One, two, three, four." at -0.75 at a lower one; a word said came back sure.
        sampled = temp > 0.0 and mean_lp < cfg.sure_fallback_logprob
        guessed = sampled or mean_lp < cfg.log_prob_threshold
        unsure = guessed and audio.size < cfg.unsure_max_s * SAMPLE_RATE
        if unsure:
            log.info("unsure transcript %r (logprob %.2f at temperature %.1f)", text, mean_lp, temp)
        return ASRResult(text, "", mean_lp, ms, unsure, temp)
