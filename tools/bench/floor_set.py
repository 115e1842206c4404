"""What ``bench --floor`` plays over the robot's speech: acknowledgements, laughs, noise, interruptions.

Five kinds of clip (:data:`CLIPS`), each a WAV of 0.3 s of silence, the sound, 0.5 s of silence:

* ``ack`` — an acknowledgement ("uh-huh", "yeah", "mm hmm", "right", "okay", "I see", "got it")
  in espeak-ng voices and the product's piper voice at other noise settings: the robot must not
  stop, and must not answer it;
* ``laugh`` — "ha ha ha", "heh heh" spoken by espeak-ng and piper, and a laugh synthesized here
  (voiced "ha" bursts: a glottal pulse train through two vowel formants, four or five a second);
* ``cough`` — synthesized coughs (a sharp burst of band-passed noise with a voiced tail) and a
  spoken throat-clearing "ahem";
* ``noise`` — synthesized knocks, a clatter, a fan's rush, a clap, at speech level;
* ``interrupt`` — a real interruption ("wait", "stop", "no, the other hand", a question, a new
  request) in espeak-ng and piper voices, and a person (the first words of ``tests/data/audio/
  jfk.flac``): the robot must stop within 400 ms and take the turn.

Clips are synthesized once into ``$XDG_CACHE_HOME/bolt-agent/floor-set`` (``~/.cache``) with a
manifest, as the turn-taking set is (:mod:`tools.bench.turn_set`); nothing is committed but this
recipe. The synthesized sounds use a fixed seed, so every machine plays the same audio.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from agent.speech.audio import SAMPLE_RATE
from tools.bench.turn_set import Synthesizer, Voice, write_wav

KINDS = ("ack", "laugh", "cough", "noise", "interrupt")
"""The kinds of clip; all but ``interrupt`` must neither stop the robot nor be answered."""

LEAD_S, TAIL_S = 0.3, 0.5
"""Silence before and after each clip's sound, s."""

ESPEAK = {
    "us": Voice("espeak-ng en-us", "espeak-ng", espeak_voice="en-us"),
    "gbf": Voice("espeak-ng en-gb+f3", "espeak-ng", espeak_voice="en-gb+f3", rate=150),
    "car": Voice("espeak-ng en-029", "espeak-ng", espeak_voice="en-029", rate=160),
    "usm": Voice("espeak-ng en-us+m3", "espeak-ng", espeak_voice="en-us+m3", rate=180),
    "sco": Voice("espeak-ng en-gb-scotland", "espeak-ng", espeak_voice="en-gb-scotland", rate=150),
}
PIPER = {
    "joe": Voice("piper-joe-default", "piper", noise_scale=0.667, noise_w_scale=0.8),
    "joe_noisy": Voice("piper-joe-noisy", "piper", noise_scale=1.0, noise_w_scale=1.2, length_scale=1.1),
}
VOICES = {**ESPEAK, **PIPER}


@dataclass(frozen=True)
class Clip:
    """One clip of the floor set.

    Attributes:
        file: WAV name in the set's folder.
        kind: One of :data:`KINDS`.
        said: What it says or is ("(laugh)", "(knock)" for sounds).
        source: A voice of :data:`VOICES`, ``synth`` (made here) or ``jfk`` (a person).
    """

    file: str
    kind: str
    said: str
    source: str


def _spoken(kind: str, items: tuple[tuple[str, str], ...]) -> list[Clip]:
    return [Clip(f"{kind}_{i:02d}.wav", kind, said, voice) for i, (said, voice) in enumerate(items)]


CLIPS: tuple[Clip, ...] = tuple(
    _spoken(
        "ack",
        (
            ("Uh-huh.", "us"), ("Yeah.", "gbf"), ("Mm hmm.", "car"), ("Right.", "usm"), ("Okay.", "sco"),
            ("I see.", "joe"), ("Yeah.", "joe_noisy"), ("Got it.", "us"), ("Uh-huh.", "joe"),
            ("Sure.", "car"), ("Mm hmm.", "joe_noisy"), ("Right, right.", "gbf"),
        ),
    )
    + _spoken("laugh", (("Ha ha ha!", "us"), ("Ha ha.", "joe")))
    + [Clip(f"laugh_{i:02d}.wav", "laugh", "(laugh)", "synth") for i in (2, 3)]
    + [Clip("laugh_04.wav", "laugh", "Hahaha.", "car")]
    + [Clip("laugh_05.wav", "laugh", "Heh heh.", "joe_noisy")]
    + [Clip(f"cough_{i:02d}.wav", "cough", "(cough)", "synth") for i in range(2)]
    + [Clip("cough_02.wav", "cough", "Ahem.", "us"), Clip("cough_03.wav", "cough", "Ahem, ahem.", "joe")]
    + [
        Clip("noise_00.wav", "noise", "(knocks)", "synth"),
        Clip("noise_01.wav", "noise", "(clatter)", "synth"),
        Clip("noise_02.wav", "noise", "(fan)", "synth"),
        Clip("noise_03.wav", "noise", "(clap)", "synth"),
    ]
    + _spoken(
        "interrupt",
        (
            ("Wait.", "us"), ("Stop.", "gbf"), ("No, the other hand.", "joe"), ("What time is it?", "car"),
            ("Hold on, stop talking.", "usm"), ("Actually, look to the left.", "joe_noisy"),
            ("Can you wave instead?", "sco"), ("No no no.", "gbf"), ("Wait, what did you say?", "joe"),
            ("Hey, listen to me.", "car"), ("Stop.", "joe_noisy"),
        ),
    )
    + [Clip("interrupt_11.wav", "interrupt", "And so my fellow Americans", "jfk")]
)  # fmt: skip
"""The set: 12 acknowledgements, 6 laughs, 4 coughs (two of them a spoken "ahem"), 4 noises, 12
interruptions. The synthesized laughs, coughs and noises are not speech to Silero (its probability
stays under 0.15); the spoken ones are, and reach Whisper."""

SYNTHESIS = 1
"""Version of how a clip is rendered (kept in the manifest; a change makes the cache again)."""


def default_folder() -> Path:
    """Where the set is cached: ``$XDG_CACHE_HOME/bolt-agent/floor-set`` (``~/.cache``)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bolt-agent" / "floor-set"


def _glottal(f0: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """A voiced source: a pulse train at ``f0`` Hz with a little jitter, ``n`` samples."""
    out = np.zeros(n, np.float32)
    t = 0.0
    while t < n:
        out[int(t)] = 1.0
        t += SAMPLE_RATE / (f0 * (1.0 + 0.03 * rng.standard_normal()))
    return out


def _formants(x: np.ndarray, freqs: tuple[float, ...], bw: float = 90.0) -> np.ndarray:
    """``x`` through two-pole resonators at ``freqs`` Hz (a vowel), summed."""
    out = np.zeros(x.size, np.float64)
    r = float(np.exp(-np.pi * bw / SAMPLE_RATE))
    for f in freqs:
        a1, a2 = 2 * r * float(np.cos(2 * np.pi * f / SAMPLE_RATE)), -r * r
        y1 = y2 = 0.0
        for i, v in enumerate(x.tolist()):  # y[i] = (1 - r) x[i] + a1 y[i-1] + a2 y[i-2]
            y = (1.0 - r) * v + a1 * y1 + a2 * y2
            out[i] += y
            y1, y2 = y, y1
    return out.astype(np.float32)


def _level(x: np.ndarray, rms: float = 0.08) -> np.ndarray:
    """``x`` scaled to ``rms`` (speech level of the set's voices), clipped to [-1, 1]."""
    return np.clip(x * rms / max(float(np.sqrt(np.mean(x * x))), 1e-9), -1, 1).astype(np.float32)


def laugh(seed: int, bursts: int = 5, f0: float = 230.0) -> np.ndarray:
    """A synthesized laugh: ``bursts`` voiced "ha"s, breathy onset, falling pitch."""
    rng = np.random.default_rng(seed)
    parts = []
    for b in range(bursts):
        n = int(rng.uniform(0.12, 0.16) * SAMPLE_RATE)
        voiced = _formants(_glottal(f0 * (1 - 0.05 * b), n, rng), (750.0, 1200.0))
        breath = _formants(rng.standard_normal(n).astype(np.float32) * 0.3, (1000.0, 2500.0), 400.0)
        env = np.sin(np.linspace(0, np.pi, n)) ** 0.7
        parts += [(voiced + breath) * env, np.zeros(int(rng.uniform(0.06, 0.1) * SAMPLE_RATE), np.float32)]
    return _level(np.concatenate(parts))


def cough(seed: int, coughs: int = 1) -> np.ndarray:
    """A synthesized cough: a sharp burst of band-passed noise with a short voiced tail."""
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(coughs):
        n = int(rng.uniform(0.18, 0.28) * SAMPLE_RATE)
        burst = _formants(rng.standard_normal(n).astype(np.float32), (500.0, 1500.0, 3000.0), 600.0)
        tail = _formants(_glottal(rng.uniform(150, 200), n, rng), (600.0, 1100.0)) * 0.5
        env = np.exp(-np.linspace(0, 6, n)) * (1 - np.exp(-np.linspace(0, 60, n)))
        parts += [(burst + tail) * env, np.zeros(int(0.15 * SAMPLE_RATE), np.float32)]
    return _level(np.concatenate(parts), 0.1)


def noise(kind: str, seed: int) -> np.ndarray:
    """A synthesized household noise: ``knocks``, ``clatter``, ``fan`` or ``clap``."""
    rng = np.random.default_rng(seed)
    if kind == "fan":  # a second of low rushing noise (brown-ish)
        x = np.cumsum(rng.standard_normal(SAMPLE_RATE)).astype(np.float32)
        x -= np.convolve(x, np.ones(400) / 400, mode="same")
        return _level(x, 0.05)
    times = {"knocks": (0.0, 0.25, 0.5), "clatter": tuple(sorted(rng.uniform(0, 0.7, 9))), "clap": (0.0,)}[
        kind
    ]
    x = np.zeros(int((max(times) + 0.3) * SAMPLE_RATE), np.float32)
    for t in times:
        n = int(0.06 * SAMPLE_RATE)
        hit = rng.standard_normal(n).astype(np.float32) * np.exp(-np.linspace(0, 8, n))
        if kind == "knocks":
            hit = _formants(hit, (180.0, 400.0), 120.0)
        i = int(t * SAMPLE_RATE)
        x[i : i + n] += hit
    return _level(x, 0.12)


def _render(clip: Clip, syn: Synthesizer, jfk: Path | None) -> np.ndarray:
    """The clip's sound (no silence around it), 16 kHz float32."""
    if clip.source in VOICES:
        return syn.speak(clip.said, VOICES[clip.source])
    if clip.source == "jfk":
        from agent.speech.audio import decode_file

        if jfk is None:
            raise RuntimeError("the jfk clip needs tests/data/audio/jfk.flac")
        audio = decode_file(jfk)
        return audio[int(0.3 * SAMPLE_RATE) : int(2.2 * SAMPLE_RATE)]  # "And so my fellow Americans"
    seed = int(clip.file[-6:-4])
    if clip.kind == "laugh":
        return laugh(seed, bursts=4 + seed % 2, f0=230.0 if seed % 2 else 180.0)
    if clip.kind == "cough":
        return cough(seed, coughs=1 + seed % 2)
    return noise(
        {"(knocks)": "knocks", "(clatter)": "clatter", "(fan)": "fan", "(clap)": "clap"}[clip.said], seed
    )


def build_floor_set(folder: Path, piper_voice: Path, jfk: Path | None = None) -> list[Clip]:
    """Synthesize the clips into ``folder`` (WAVs + ``manifest.json``), reusing what is there.

    Args:
        folder: The cache (created).
        piper_voice: The product's piper voice.
        jfk: ``tests/data/audio/jfk.flac`` (the person's interruption).

    Returns:
        The clips, each with its WAV at ``folder / clip.file``.

    Raises:
        RuntimeError: a synthesizer failed, or the jfk recording is missing.
    """
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "manifest.json"
    have = {c["file"]: c for c in json.loads(manifest.read_text())} if manifest.is_file() else {}
    syn = Synthesizer(piper_voice)
    lead, tail = (
        np.zeros(int(LEAD_S * SAMPLE_RATE), np.float32),
        np.zeros(int(TAIL_S * SAMPLE_RATE), np.float32),
    )
    for clip in CLIPS:
        entry = {**asdict(clip), "synthesis": SYNTHESIS}
        if have.get(clip.file) == entry and (folder / clip.file).is_file():
            continue
        write_wav(folder / clip.file, np.concatenate([lead, _render(clip, syn, jfk), tail]))
        have[clip.file] = entry
    manifest.write_text(json.dumps(sorted(have.values(), key=lambda c: c["file"]), indent=1))
    return list(CLIPS)


STORY_FILE = "story.wav"
STORY = "Tell me a story about a cat and a robot."
"""The request the robot answers at length while the clips are played. Not the soak's "Tell me a
*long* story": the small stand-in model hears a timer in "long" and asks "For how long?"."""


def build_story(folder: Path, piper_voice: Path) -> Path:
    """The spoken story request (:data:`STORY`, the product's voice) in ``folder``, made once.

    Raises:
        RuntimeError: piper made no audio.
    """
    from tools.bench.turn_set import VOICES as TURN_VOICES

    folder.mkdir(parents=True, exist_ok=True)
    wav, said = folder / STORY_FILE, folder / (STORY_FILE + ".txt")
    if wav.is_file() and said.is_file() and said.read_text() == STORY:
        return wav
    pad = np.zeros(SAMPLE_RATE // 2, np.float32)
    write_wav(wav, np.concatenate([pad, Synthesizer(piper_voice).speak(STORY, TURN_VOICES[0]), pad]))
    said.write_text(STORY)
    return wav
