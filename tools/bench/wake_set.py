"""The wake-word test set: the word in many voices, long speech without it, and noise.

* **The wake word** (:func:`wake_clips`): each voice says it in :data:`CARRIERS` ("Okay Nabu.",
  "Okay Nabu, what time is it?", "Um, Okay Nabu." ...) in :data:`RENDITIONS` renditions (espeak-ng
  at four speeds; piper four times, its noise making each one different, the noiseless voice at
  four paces). Voices are split in two: :data:`TUNING_VOICES` (settings such as the cutoff may
  be chosen on them) and :data:`TEST_VOICES` (never tuned on): the product's piper voice with
  other noise settings and paces, and espeak-ng voices and variants not in the tuning set.
  Synthesized once and cached (WAV, 16 kHz) with a manifest; the noisy piper voices sample
  differently each time, so the cache keeps runs comparable. Each voice also says
  :data:`NEAR_MISSES` once: phrases that sound partly like the wake word ("Okay, now.", "Okay,
  bamboo.", "Hey, Nabil.") and must not wake it.
* **Speech without it** (:func:`paragraphs`): the checkout's prose (``README.md``, ``docs/*.md``,
  code and tables left out, any sentence naming a wake word dropped) read by espeak-ng voices
  (regenerated each run: deterministic and about 1000 times faster than real time here) and,
  for :data:`PIPER_PARAGRAPHS` paragraphs, by the piper voice (cached); and the real recordings
  of ``tests/data/audio``.
* **Noise** (:func:`noise`): pink, brown and white noise, a motor-like hum and babble (the
  real recordings, four at once), generated from a seed; :func:`noise_gain` sets a signal-to-noise
  ratio over the speech.
"""

from __future__ import annotations

import hashlib
import json
import re
import wave
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from agent.speech.audio import SAMPLE_RATE
from tools.bench.turn_set import Synthesizer, Voice, write_wav

PHRASES = {
    "okay_nabu": "Okay Nabu",
    "hey_jarvis": "Hey Jarvis",
    "hey_mycroft": "Hey Mycroft",
    "alexa": "Alexa",
}
"""What each built-in model listens for, as it is written for a synthesizer."""
CARRIERS = ("{w}.", "{w}, what time is it?", "{w}, turn your head to the left.", "Um, {w}.", "{w}!")
"""The sentences the wake word is said in (``{w}``: the phrase)."""
RENDITIONS = 4
"""Renditions of each sentence per voice."""
ESPEAK_RATES = (1.0, 0.88, 1.12, 0.95)
"""espeak-ng's words per minute of each rendition, as a factor of the voice's own."""
PIPER_PACES = (1.0, 0.9, 1.15, 1.3)
"""piper's length scale of each rendition for a voice without noise (a noisy one varies by itself)."""
SYNTHESIS = 2
"""Version of the rendering kept in the cache's manifest: a cache of another version is made again
(2: near misses added)."""

TUNING_VOICES = (
    Voice("piper-joe-noise0", "piper"),
    Voice("piper-joe-default", "piper", noise_scale=0.667, noise_w_scale=0.8, length_scale=1.1),
    Voice("espeak-ng en-us", "espeak-ng", espeak_voice="en-us", rate=165),
    Voice("espeak-ng en-gb+m3", "espeak-ng", espeak_voice="en-gb+m3", rate=150),
    Voice("espeak-ng en-us+f2", "espeak-ng", espeak_voice="en-us+f2", rate=175),
    Voice("espeak-ng en-029", "espeak-ng", espeak_voice="en-029", rate=160),
)
"""Voices settings may be chosen on."""
TEST_VOICES = (
    Voice("piper-joe-noisy-slow", "piper", noise_scale=1.0, noise_w_scale=1.2, length_scale=1.2),
    Voice("piper-joe-half-fast", "piper", noise_scale=0.5, noise_w_scale=0.5, length_scale=0.85),
    Voice("espeak-ng en-gb-scotland", "espeak-ng", espeak_voice="en-gb-scotland", rate=150),
    Voice("espeak-ng en-us-nyc+m5", "espeak-ng", espeak_voice="en-us-nyc+m5", rate=185),
    Voice("espeak-ng en-gb-x-rp+f4", "espeak-ng", espeak_voice="en-gb-x-rp+f4", rate=160),
    Voice("espeak-ng en-gb+f5", "espeak-ng", espeak_voice="en-gb+f5", rate=140),
    Voice("espeak-ng en-029+m7", "espeak-ng", espeak_voice="en-029+m7", rate=170),
    Voice("espeak-ng en-us+klatt2", "espeak-ng", espeak_voice="en-us+klatt2", rate=165),
)
"""Voices never tuned on."""
PARAGRAPH_VOICES = (
    Voice("espeak-ng en-us+m1", "espeak-ng", espeak_voice="en-us+m1", rate=170),
    Voice("espeak-ng en-gb+f3", "espeak-ng", espeak_voice="en-gb+f3", rate=155),
    Voice("espeak-ng en-us-nyc+m6", "espeak-ng", espeak_voice="en-us-nyc+m6", rate=180),
)
"""The voices that read the prose (each all of it)."""
PIPER_PARAGRAPHS = 25
"""Paragraphs the piper voice (default noise) reads, cached (about 25 minutes of speech)."""
NOISES = ("pink", "babble", "hum", "brown", "white")
"""Noise kinds; clip ``i`` of the set is mixed with ``NOISES[i % 3]`` (the first three), and every
kind plays for the false-wake count."""
FLOOR_DBFS = -70.0
"""A microphone's own noise floor under the quiet clips, dBFS (white)."""


NEAR_MISSES = {
    "okay_nabu": (
        "Okay.",
        "Okay, now.",
        "Okay, no.",
        "Okay, nobody knew.",
        "Okay, noodles.",
        "Okay, bamboo.",
        "Okay, taboo.",
        "Okay, Nairobi.",
        "Okay, number two.",
        "Okay, let me know.",
        "Okay, Naomi.",
        "Okay, Nala.",
        "Okay, my boo.",
        "Okay, I knew.",
        "Okay, new boots.",
        "Hey, Nabil.",
        "Oh, Cabo.",
        "Okay, Google.",
        "Okay, now move.",
        "Okay, not you.",
    ),
}
"""Phrases that sound partly like a wake word without being it (a stricter false-wake test)."""


@dataclass(frozen=True)
class WakeClip:
    """One clip of the wake word.

    Attributes:
        file: WAV name in the set's folder.
        voice: :attr:`Voice.name`.
        text: What is said.
        tuning: The voice belongs to the tuning set.
    """

    file: str
    voice: str
    text: str
    tuning: bool
    near_miss: bool = False


def _renditions(voice: Voice) -> list[Voice]:
    if voice.engine == "espeak-ng":
        return [replace(voice, rate=round(voice.rate * f)) for f in ESPEAK_RATES]
    if voice.noise_scale == 0:
        return [replace(voice, length_scale=p) for p in PIPER_PACES]
    return [voice] * RENDITIONS


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def wake_clips(folder: Path, wake_word: str, piper_voice: Path) -> list[WakeClip]:
    """The wake-word clips in ``folder`` (synthesized into it once; a stale cache is redone).

    Args:
        folder: The set's cache folder (made if missing).
        wake_word: A built-in model name (:data:`PHRASES`).
        piper_voice: The product's piper voice (``.onnx``).

    Returns:
        Every clip, tuning voices first.

    Raises:
        RuntimeError: a synthesizer failed.
    """
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "manifest.json"
    if manifest.is_file():
        saved = json.loads(manifest.read_text())
        if saved.get("synthesis") == SYNTHESIS and saved.get("wake_word") == wake_word:
            return [WakeClip(**c) for c in saved["clips"]]
    syn = Synthesizer(piper_voice)
    phrase = PHRASES[wake_word]
    clips = []
    for tuning, voices in ((True, TUNING_VOICES), (False, TEST_VOICES)):
        for voice in voices:
            for k, rendition in enumerate(_renditions(voice)):
                for j, carrier in enumerate(CARRIERS):
                    text = carrier.format(w=phrase)
                    clip = WakeClip(f"{_slug(voice.name)}_{k}_{j}.wav", voice.name, text, tuning)
                    write_wav(folder / clip.file, syn.speak(text, rendition))
                    clips.append(clip)
            for j, text in enumerate(NEAR_MISSES.get(wake_word, ())):
                clip = WakeClip(f"{_slug(voice.name)}_near_{j}.wav", voice.name, text, tuning, True)
                write_wav(folder / clip.file, syn.speak(text, voice))
                clips.append(clip)
    doc = {"synthesis": SYNTHESIS, "wake_word": wake_word, "clips": [asdict(c) for c in clips]}
    manifest.write_text(json.dumps(doc, indent=1))
    return clips


def read_clip(path: Path) -> np.ndarray:
    """A 16-bit mono WAV of the set as float32 at :data:`SAMPLE_RATE`."""
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768


def prose(root: Path, avoid: tuple[str, ...]) -> list[str]:
    """The checkout's prose as paragraphs: ``README.md`` and ``docs/*.md`` without code, tables, marks.

    Args:
        root: The checkout.
        avoid: Words (lower case) a paragraph may not hold (the wake words: nothing may wake).

    Returns:
        Paragraphs of plain sentences, in file order; ``docs/wake-word.md`` left out (it quotes
        the near misses).
    """
    out = []
    for path in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        if path.name == "wake-word.md":
            continue
        text = re.sub(r"```.*?```", " ", path.read_text(encoding="utf-8"), flags=re.S)
        for para in re.split(r"\n\s*\n", text):
            if para.lstrip().startswith(("|", "#", "    ")):
                continue  # tables, headings, indented code
            plain = re.sub(r"`[^`]*`|https?://\S+|\[([^\]]*)\]\([^)]*\)", r"\1", para)
            plain = " ".join(re.sub(r"[*_#>|=<~^\\{}\[\]]", " ", plain).split())
            # List marks go: espeak-ng reads a leading "- " as an option.
            plain = re.sub(r"(^|\s)[-+](\s|$)", " ", plain).strip()
            if len(plain.split()) >= 8 and not any(a in plain.lower() for a in avoid):
                out.append(plain)
    return out


def paragraphs(
    root: Path, folder: Path, piper_voice: Path, avoid: tuple[str, ...]
) -> Iterator[tuple[str, np.ndarray]]:
    """Speech without the wake word, one paragraph at a time: ``(voice, float32 16 kHz audio)``.

    The espeak-ng voices read every paragraph of :func:`prose`; the piper voice (default noise)
    reads the first :data:`PIPER_PARAGRAPHS`, cached in ``folder/piper`` by their text. Each paragraph is
    followed by 0.4 s of silence.

    Raises:
        RuntimeError: a synthesizer failed.
    """
    texts = prose(root, avoid)
    syn = Synthesizer(piper_voice)
    gap = np.zeros(int(0.4 * SAMPLE_RATE), np.float32)
    for voice in PARAGRAPH_VOICES:
        for text in texts:
            yield voice.name, np.concatenate([syn.speak(text, voice), gap])
    piper = Voice("piper-joe-default", "piper", noise_scale=0.667, noise_w_scale=0.8)
    cache = folder / "piper"
    cache.mkdir(parents=True, exist_ok=True)
    for text in texts[:PIPER_PARAGRAPHS]:
        # Named by the text: the checkout's prose changes between runs.
        path = cache / f"{hashlib.sha1(text.encode()).hexdigest()[:16]}.wav"
        if not path.is_file():
            write_wav(path, syn.speak(text, piper))
        yield piper.name, np.concatenate([read_clip(path), gap])


def recordings(root: Path) -> list[np.ndarray]:
    """The real speech of ``tests/data/audio`` (every file, 16 kHz mono; none when missing)."""
    from agent.speech.audio import AudioError, decode_file

    out = []
    for path in sorted((root / "tests" / "data" / "audio").glob("*")):
        try:
            out.append(decode_file(path))
        except AudioError:
            continue
    return out


def _colored(n: int, alpha: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` samples of noise whose power falls as ``1/f**alpha``, unit RMS."""
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1 / SAMPLE_RATE)
    f[0] = f[1]
    x = np.fft.irfft(spec / f ** (alpha / 2), n)
    return (x / (np.sqrt(np.mean(x**2)) + 1e-12)).astype(np.float32)


def noise(kind: str, seconds: float, seed: int, speech: list[np.ndarray] | None = None) -> np.ndarray:
    """``seconds`` of one kind of noise at unit RMS (float32, 16 kHz).

    Args:
        kind: One of :data:`NOISES`: ``pink`` (1/f), ``brown`` (1/f²), ``white``, ``hum`` (a motor:
            120 Hz and its harmonics, a 1.4 kHz whine that swells and fades, and brown noise) or
            ``babble`` (four of ``speech`` at once, each from a random point, looped).
        seconds: Length, s.
        seed: The random generator's seed.
        speech: Real recordings for ``babble`` (:func:`recordings`); white noise stands in without.
    """
    rng = np.random.default_rng(seed)
    n = int(seconds * SAMPLE_RATE)
    if kind == "pink":
        return _colored(n, 1.0, rng)
    if kind == "brown":
        return _colored(n, 2.0, rng)
    if kind == "hum":
        t = np.arange(n) / SAMPLE_RATE
        tone = sum(np.sin(2 * np.pi * 120 * k * t + rng.uniform(0, 6)) / k for k in range(1, 6))
        whine = np.sin(2 * np.pi * 1400 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 0.3 * t + rng.uniform(0, 6)))
        x = tone + 0.4 * whine + 0.5 * _colored(n, 2.0, rng)
        return (x / np.sqrt(np.mean(x**2))).astype(np.float32)
    if kind == "babble" and speech:
        x = np.zeros(n, np.float32)
        for _ in range(4):
            src = speech[int(rng.integers(len(speech)))]
            start = int(rng.integers(src.size))
            looped = np.resize(np.roll(src, -start), n)
            x += looped / (np.sqrt(np.mean(src**2)) + 1e-9)
        return x / np.sqrt(np.mean(x**2))
    return rng.standard_normal(n).astype(np.float32)


def noise_gain(speech: np.ndarray, snr_db: float) -> float:
    """The gain that puts unit-RMS noise ``snr_db`` dB under ``speech``'s power.

    The speech's power is taken over its samples above 1 % of full scale (the voiced part).
    """
    loud = speech[np.abs(speech) > 0.01]
    power = float(np.mean(loud**2)) if loud.size else float(np.mean(speech**2))
    return float(np.sqrt(power / 10 ** (snr_db / 10)))


def floor(n: int, seed: int) -> np.ndarray:
    """A microphone's noise floor (white, :data:`FLOOR_DBFS` RMS), ``n`` samples."""
    return (np.random.default_rng(seed).standard_normal(n) * 10 ** (FLOOR_DBFS / 20)).astype(np.float32)
