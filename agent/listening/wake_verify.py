"""The wake word's second stage: Whisper confirms a candidate from the last seconds of audio.

The acoustic detector (:mod:`agent.listening.wake_word`), run at a low candidate cutoff, proposes
a candidate; :class:`WakeVerifier` decodes the clip that ends a little after it with the agent's
own faster-whisper model (the ASR instance, not a second one) and wakes only when the decode
says the wake phrase (the model's JSON ``wake_word``: "Okay Nabu").

How one clip is decoded (:meth:`WakeVerifier.verify`): the audio (at most :data:`CLIP_S`) is
zero-padded to :data:`PAD_S` and turned into log-mel features of that length only (not Whisper's
30 s: CTranslate2's encoder takes fewer frames, about 20-40 ms instead of 300 here); the decoder
starts from the phrase as a previous-text prompt (``<|startofprev|> Okay Nabu``: the spelling
Whisper would not guess for a made-up word) and runs greedily for at most
:data:`MAX_TOKENS` tokens. Decodes of so short an encoder context repeat themselves ("Okay Nabu
Okay Nabu ..."); only the words matter, and only whether the phrase is among them.

The match (:func:`says_phrase`): the decode's words, lower case, with ``ok``/``o.k.`` read as
``okay`` and ``oo``/``ou``/``ew`` as ``u``, hold the phrase's words in order, each the same or
(words of 4 letters or more) at most one edit apart with the same first letter: "Okay Naboo",
"OK, Nabu" and "Okay Navu" are the phrase; "Okay, now", "Okay, Naomi", "Okay, taboo", "Hey, Nabu",
"Okay, number two" are not.

The margin (:meth:`WakeVerifier.verify`, when the decode does not say the phrase but holds its
first word, "okay"): the rest of the phrase (" Nabu" or ", Nabu") is forced after that word, and
its summed log-probability is compared with the greedy decode's over as many tokens. tiny.en
writes an unclear "Nabu" as "now"; a candidate whose rest of the phrase is at most
``min_margin`` nats (:data:`MIN_MARGIN`) less likely than the decode's own words is still
accepted. A decode without the first word (noise: "I'm going to try to get") has no margin.
The verdict keeps the features, so a benchmark can judge it again at other thresholds
(:meth:`WakeVerifier.judge`).

Not thread-safe by itself: the standby's listener thread verifies while the agent is in standby,
when the ASR stage decodes nothing (CTranslate2 would queue concurrent calls anyway).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent.speech.audio import SAMPLE_RATE
from agent.speech.words import words

CLIP_S = 2.0
"""Audio verified, s: the clip ending :data:`DELAY_S` after the candidate."""
DELAY_S = 0.3
"""Audio awaited after a candidate before it is verified, s: a low cutoff fires inside the word."""
PAD_S = 2.5
"""The clip is zero-padded to this before its features are taken, s."""
CANDIDATE_WINDOW = 5
"""The detector's window when it proposes candidates, unless ``[live] wake_window`` sets one."""
MIN_MARGIN = 1.0
"""The verifier's default ``min_margin``, nats (chosen on the tuning voices: docs/wake-word.md)."""
MAX_TOKENS = 8
"""Tokens decoded at most after the prompt (the phrase and a few words after it)."""


def _words(text: str) -> list[str]:
    low = re.sub(r"\bo\.k\.?", "ok", text.lower())
    out = []
    for w in words(low):
        w = "okay" if w in ("ok", "okey") else w
        out.append(re.sub(r"oo|ou|ew", "u", w.replace("'", "")))
    return out


def _one_edit(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by at most one substitution, insertion or deletion."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b, strict=True)) <= 1
    if len(a) > len(b):
        a, b = b, a
    return any(b[:i] + b[i + 1 :] == a for i in range(len(b)))


def says_phrase(text: str, phrase: str) -> bool:
    """Whether a decode ``text`` holds the wake ``phrase`` (see the module docstring).

    Args:
        text: Whisper's decode ("Okay Naboo, what time").
        phrase: The wake phrase ("Okay Nabu").

    Returns:
        True when the phrase's words occur in order, next to each other, each the same after
        the spelling rules or, for words of at least 4 letters, one edit apart with the same
        first letter ("Navu"; not "Tabu").
    """
    want, got = _words(phrase), _words(text)
    if not want:
        return False
    # "Okay Nabu" may come out as one word ("Okaynabu") or split ("Na boo"): compare joined runs too.
    for i in range(len(got)):
        if all(
            i + k < len(got)
            and (got[i + k] == w or (len(w) >= 4 and got[i + k][0] == w[0] and _one_edit(got[i + k], w)))
            for k, w in enumerate(want)
        ):
            return True
    joined, target = "".join(got), "".join(want)
    return target in joined if len(target) >= 6 else False


@dataclass(frozen=True)
class Verdict:
    """What the verifier made of one candidate.

    Attributes:
        accepted: The candidate is confirmed (:meth:`WakeVerifier.judge`).
        text: The greedy decode (repetitions and all).
        logprob: The decode's mean token log-probability (its ``scores[0]``).
        no_speech: Whisper's no-speech probability of the clip (0..1).
        ms: Features, encoder and decoder time, ms.
        margin: The phrase's tokens forced where the decode's first word of it would start, their
            summed log-probability minus the decode's own over as many tokens (0 when the decode
            says the phrase; more negative: Whisper prefers what it decoded).
    """

    accepted: bool
    text: str
    logprob: float
    no_speech: float
    ms: float
    margin: float = 0.0


def _log_softmax(logits: Any) -> np.ndarray:
    x = np.asarray(logits, np.float64)
    top = x.max()
    return x - top - np.log(np.exp(x - top).sum())


class WakeVerifier:
    """Confirms a wake-word candidate with a faster-whisper model (see the module docstring).

    Args:
        model: A loaded ``faster_whisper.WhisperModel`` (the agent's ASR model, English or
            multilingual).
        phrase: The wake phrase as the model's JSON writes it ("Okay Nabu").
        min_logprob: A decode whose mean token log-probability is under this is refused (None:
            no floor).
        max_no_speech: A clip whose no-speech probability is over this is refused (0..1; None:
            no ceiling).
        min_margin: A decode that does not say the phrase is still accepted when the phrase's
            forced log-probability is at most this far under the decode's (nats; None: never,
            and the margin is not computed).
        prompt: Start the decoder from the phrase as previous text (bias toward its spelling).
    """

    def __init__(
        self,
        model: Any,
        phrase: str,
        min_logprob: float | None = None,
        max_no_speech: float | None = None,
        min_margin: float | None = MIN_MARGIN,
        prompt: bool = True,
    ) -> None:
        from faster_whisper.tokenizer import Tokenizer

        self.model, self.phrase = model, phrase.strip()
        self.min_logprob, self.max_no_speech, self.min_margin = min_logprob, max_no_speech, min_margin
        tok = Tokenizer(
            model.hf_tokenizer,
            model.model.is_multilingual,
            task="transcribe",
            language="en" if model.model.is_multilingual else None,
        )
        start = [*tok.sot_sequence, tok.no_timestamps]
        self._prompt = [tok.sot_prev, *tok.encode(" " + self.phrase), *start] if prompt else start
        self._tok = tok
        self._first = _words(self.phrase)[0] if _words(self.phrase) else ""
        # The phrase after its first word, as the decoder would go on: " Nabu" or ", Nabu".
        rest = " ".join(self.phrase.split()[1:])
        self._rests = [tok.encode(" " + rest), tok.encode(", " + rest)] if rest else []

    def judge(self, v: Verdict) -> bool:
        """Whether the features of ``v`` confirm the phrase under this verifier's thresholds."""
        if self.max_no_speech is not None and v.no_speech > self.max_no_speech:
            return False
        if self.min_logprob is not None and v.logprob < self.min_logprob:
            return False
        if says_phrase(v.text, self.phrase):
            return True
        return self.min_margin is not None and v.margin >= -self.min_margin

    def verify(self, audio: np.ndarray) -> Verdict:
        """Decode a candidate's clip and judge it.

        Args:
            audio: ``(n,)`` float32 mono 16 kHz, the clip ending :data:`DELAY_S` after the
                candidate; only its last :data:`CLIP_S` are used.

        Returns:
            The :class:`Verdict` (``accepted`` False for an empty clip).
        """
        import ctranslate2

        t0 = time.perf_counter()
        clip = np.asarray(audio, np.float32)[-int(CLIP_S * SAMPLE_RATE) :]
        if clip.size == 0:
            return Verdict(False, "", 0.0, 1.0, 0.0, -99.0)
        padded = np.zeros(max(int(PAD_S * SAMPLE_RATE), clip.size), np.float32)
        padded[: clip.size] = clip
        feats = self.model.feature_extractor(padded, padding=0)
        view = ctranslate2.StorageView.from_array(np.ascontiguousarray(feats[None], np.float32))
        whisper = self.model.model
        enc = whisper.encode(view, to_cpu=False)
        res = whisper.generate(
            enc,
            [self._prompt],
            beam_size=1,
            max_length=len(self._prompt) + MAX_TOKENS,
            return_scores=True,
            return_no_speech_prob=True,
            return_logits_vocab=self.min_margin is not None,
        )[0]
        ids = [t for t in res.sequences_ids[0] if t < self._tok.eot]
        text = self._tok.decode(ids).strip()
        logprob = float(res.scores[0]) if res.scores else -10.0
        margin = 0.0
        if self.min_margin is not None and not says_phrase(text, self.phrase):
            margin = self._margin(enc, ids, [_log_softmax(x) for x in res.logits[0]])
        v = Verdict(False, text, logprob, float(res.no_speech_prob), 0.0, margin)
        ms = (time.perf_counter() - t0) * 1000
        return Verdict(self.judge(v), text, logprob, v.no_speech, ms, margin)

    def _margin(self, enc: Any, ids: list[int], steps: list[np.ndarray]) -> float:
        """How much less likely the rest of the phrase is than the decode's own words, nats (<= 0).

        The decode must hold the phrase's first word ("okay", any case; else -99: refused). From
        the token after it, the rest of the phrase (" Nabu", or ", Nabu") is forced and its summed
        log-probability compared with the decode's own over as many tokens (a token the decode
        did not reach counts as certain).
        """
        at = next((k for k, t in enumerate(ids) if _words(self._tok.decode([t])) == [self._first]), None)
        if at is None or not self._rests:
            return -99.0
        best = -99.0
        for rest in self._rests:
            forced = self.model.model.generate(
                enc,
                [self._prompt + ids[: at + 1] + rest],
                beam_size=1,
                max_length=len(self._prompt) + at + 1 + len(rest) + 1,
                return_logits_vocab=True,
            )[0].logits[0]
            if len(forced) < at + 1 + len(rest):
                continue
            lp = sum(float(_log_softmax(forced[at + 1 + k])[t]) for k, t in enumerate(rest))
            own = sum(
                float(steps[k][ids[k]]) for k in range(at + 1, min(at + 1 + len(rest), len(ids), len(steps)))
            )
            best = max(best, lp - own)
        return best
