"""The turn-taking test set: paused sentences, hesitations and plain commands, in several voices.

Three kinds of case, each one WAV of one user turn:

* ``paused`` — a sentence with a pause of 0.6-1.2 s in it (:data:`PAUSED`): after a clause that
  could end a sentence ("Turn your head to the left, [0.8 s] and then wave"), after a verb or a
  preposition, or after a hesitation ("Hmm, let me think. [1 s] Can you nod?"). Kept whole is
  right: one utterance, one turn;
* ``plain`` — a command said in one breath (:data:`PLAIN`): it must end at the first short
  silence, and any extra wait a rule adds is latency;
* ``filler`` — a hesitation alone (:data:`FILLERS`): it must never be answered.

Voices rotate over the cases (:data:`VOICES`): the product's piper voice without noise (the same
audio on every machine), with its default noise and with more noise at a slower pace, and
espeak-ng in three voices (robotic prosody: the hard case for an audio end-of-turn model).
Synthesized WAVs are cached in a folder with a ``manifest.json``; the noisy piper voices
sample differently on every synthesis, so a cached set is what makes two runs comparable.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import wave
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from agent.speech.audio import SAMPLE_RATE


@dataclass(frozen=True)
class Voice:
    """One synthetic voice of the set.

    Attributes:
        name: Label in reports (``piper-joe-noise0``, ``espeak-ng en-gb``).
        engine: ``piper`` (the product's voice) or ``espeak-ng``.
        noise_scale: piper's audio variation (0 = deterministic).
        noise_w_scale: piper's phoneme-duration variation (0 = deterministic).
        length_scale: piper's pace (> 1 slower).
        espeak_voice: espeak-ng's ``-v`` voice.
        rate: espeak-ng's words per minute.
    """

    name: str
    engine: str
    noise_scale: float = 0.0
    noise_w_scale: float = 0.0
    length_scale: float = 1.0
    espeak_voice: str = ""
    rate: int = 165


VOICES = (
    Voice("piper-joe-noise0", "piper"),
    Voice("espeak-ng en-us", "espeak-ng", espeak_voice="en-us"),
    Voice("piper-joe-default", "piper", noise_scale=0.667, noise_w_scale=0.8),
    Voice("espeak-ng en-gb+f3", "espeak-ng", espeak_voice="en-gb+f3", rate=150),
    Voice("piper-joe-noisy-slow", "piper", noise_scale=1.0, noise_w_scale=1.2, length_scale=1.15),
    Voice("espeak-ng en-us+m3", "espeak-ng", espeak_voice="en-us+m3", rate=180),
)
"""The set's voices; case ``i`` of a kind is spoken by ``VOICES[i % len(VOICES)]``."""

CLICK_HOPS = 3
"""Loud 10 ms hops between two silent runs that still make them one pause (a click, not a word)."""

SYNTHESIS = 2
"""Version of how a case is rendered, kept in the cache's manifest: a set made before a change
to the rendering is made again (2: a comma pause is stretched across a click)."""

PAUSES_S = (0.6, 0.8, 1.0, 1.2)
"""Pause lengths of the paused cases, s (case ``i`` pauses ``PAUSES_S[i % 4]``)."""

PAUSED: tuple[tuple[str, ...], ...] = (
    ("Turn your head to the left,", "and then wave with your right hand."),
    ("Hmm, let me think.", "Can you nod your head twice?"),
    ("Can you", "look to the right?"),
    ("What time", "is it?"),
    ("Set a timer for", "five minutes."),
    ("Um,", "wave your left hand."),
    ("Could you tell me", "what you see?"),
    ("I want you to", "dance for me."),
    ("Look up,", "and then look down."),
    ("Well,", "tell me a joke."),
    ("Okay so,", "turn your head to the right."),
    ("Please raise", "your right arm."),
    ("Let me see.", "What is the weather like today?"),
    ("Nod your head,", "if you can hear me."),
    ("Turn your head thirty degrees", "to the right."),
    ("Can you wave", "with your left hand?"),
    ("So,", "what can you do?"),
    ("Give me a second.", "Look at me."),
    ("Tell me", "a short story about a cat."),
    ("Set a timer", "for ten seconds."),
    ("Uh,", "what time is it?"),
    ("Hold on.", "Can you dance?"),
    ("I was wondering if you could", "shake your head."),
    ("Look to the left,", "and then to the right."),
    ("How far can you", "turn your head?"),
    ("Hmm.", "Nod twice."),
    ("Could you please", "look down at the table?"),
    ("What do you", "see on the table?"),
    ("Wave your right hand,", "and say hello."),
    ("Let me think.", "Tell me a joke about robots."),
    ("Turn", "your head to the left."),
    ("Move your head up,", "a little bit."),
    ("Um, let me think.", "Set a timer for one minute."),
    ("Can you tell me", "the time?"),
    ("Okay, um,", "nod your head."),
    ("After that,", "wave goodbye."),
)
"""Sentences with a pause (between the parts): each must stay one turn."""

PLAIN: tuple[str, ...] = (
    "Hey robot, wave your right hand.",
    "Please look to the left.",
    "What do you see right now?",
    "Nod your head if you can hear me.",
    "What time is it?",
    "Tell me a short joke.",
    "Turn your head thirty degrees to the right and then wave.",
    "Can you dance for me?",
    "Set a timer for ten seconds.",
    "Look up.",
    "Look down at the floor.",
    "Shake your head.",
    "Wave goodbye.",
    "Turn your head to the right.",
    "How are you today?",
    "What is your name?",
    "Raise your left arm.",
    "Dance for me.",
    "Look at me.",
    "Can you nod twice?",
    "Set a timer for five minutes.",
    "What can you do?",
    "Tell me a fun fact.",
    "Look to the right.",
    "Wave with your left hand.",
    "What is the time?",
    "Turn left.",
    "Say hello to my friend.",
    "Do a little dance.",
    "Are you listening?",
    "Who made you?",
    "Thank you.",
    "Look straight ahead.",
)
"""Commands said in one breath: each must end at the first short silence."""

FILLERS: tuple[str, ...] = (
    "Um.",
    "Hmm.",
    "Hmm, let me think.",
    "Uh...",
    "Well...",
    "Okay so...",
    "Let me see.",
    "Hold on.",
    "Um, let me think.",
    "Hmm, let me see.",
)
"""Hesitations alone: each must never be answered."""


@dataclass(frozen=True)
class TurnCase:
    """One WAV of the set.

    Attributes:
        file: WAV file name in the set's folder.
        kind: ``paused``, ``plain`` or ``filler``.
        parts: What is said, one entry per stretch of speech.
        pause_s: Silence between the parts, s (0 for one part).
        voice: :attr:`Voice.name`.
    """

    file: str
    kind: str
    parts: tuple[str, ...]
    pause_s: float
    voice: str

    @property
    def text(self) -> str:
        """The whole sentence."""
        return " ".join(self.parts)


def cases(espeak: bool = True) -> list[TurnCase]:
    """Every case of the set (names and voices, no audio).

    Args:
        espeak: Include the espeak-ng voices (False where espeak-ng is not installed: their cases
            are spoken by the piper voices instead).

    Returns:
        The paused cases, then the plain ones, then the fillers.
    """
    voices = [v for v in VOICES if espeak or v.engine != "espeak-ng"]
    out = []
    for kind, items in (
        ("paused", PAUSED),
        ("plain", [(t,) for t in PLAIN]),
        ("filler", [(t,) for t in FILLERS]),
    ):
        for i, parts in enumerate(items):
            voice = voices[i % len(voices)]
            pause = PAUSES_S[i % len(PAUSES_S)] if len(parts) > 1 else 0.0
            out.append(TurnCase(f"{kind}_{i:02d}.wav", kind, tuple(parts), pause, voice.name))
    return out


def espeak_available() -> bool:
    """Whether the ``espeak-ng`` program is on PATH."""
    return shutil.which("espeak-ng") is not None


class Synthesizer:
    """Speaks a case's parts in its voice, as 16 kHz float32 audio.

    Args:
        piper_voice: The product's piper voice (``.onnx``, its ``.onnx.json`` beside it).

    Raises:
        agent.speech.tts.TTSError: the voice cannot be loaded.
    """

    def __init__(self, piper_voice: Path) -> None:
        self.piper_voice = piper_voice
        self._piper: dict[str, object] = {}

    def speak(self, text: str, voice: Voice, ssml: bool = False) -> np.ndarray:
        """``text`` (SSML for espeak-ng when ``ssml``) in ``voice``, silence trimmed at both ends.

        Returns:
            ``(n,)`` float32 at :data:`SAMPLE_RATE`.

        Raises:
            RuntimeError: espeak-ng failed or made no audio.
        """
        import soxr

        if voice.engine == "espeak-ng":
            pcm, rate = self._espeak(text, voice, ssml)
        else:
            pcm, rate = self._piper_audio(text, voice)
        audio = soxr.resample(pcm, rate, SAMPLE_RATE).astype(np.float32)
        loud = np.nonzero(np.abs(audio) > 0.01)[0]
        if loud.size == 0:
            raise RuntimeError(f"{voice.name} made no audio for {text!r}")
        return audio[loud[0] : loud[-1] + 1]

    def speak_parts(self, parts: tuple[str, ...], voice: Voice, pause_s: float) -> np.ndarray:
        """``parts`` as one sentence with ``pause_s`` of silence between them, prosody kept.

        A pause inside a sentence is not the end of one: the voice must keep the sentence's
        intonation across it. espeak-ng gets the pauses as SSML ``<break>`` elements in one
        sentence. piper has no such element: a sentence whose part ends with a comma is
        synthesized whole and the comma's own short silence is stretched to ``pause_s`` (found as
        the silent stretch nearest to where that part ends when spoken alone); other parts
        ("Can you" / "look to the right?", "Hmm." / "Nod twice.") are synthesized one by one.

        Returns:
            ``(n,)`` float32 at :data:`SAMPLE_RATE`, silence trimmed at both ends.

        Raises:
            RuntimeError: a synthesizer failed.
        """
        gap = np.zeros(int(pause_s * SAMPLE_RATE), np.float32)
        if voice.engine == "espeak-ng":
            from xml.sax.saxutils import escape

            brk = f' <break time="{round(pause_s * 1000)}ms"/> '
            return self.speak("<speak>" + brk.join(escape(p) for p in parts) + "</speak>", voice, ssml=True)
        pieces: list[np.ndarray] = []
        i = 0
        while i < len(parts):
            j = i
            while j + 1 < len(parts) and parts[j].rstrip().endswith(","):
                j += 1  # parts i..j are one sentence with comma pauses
            pieces += [gap] if pieces else []
            pieces.append(self._one_sentence(parts[i : j + 1], voice, gap))
            i = j + 1
        return np.concatenate(pieces)

    def _one_sentence(self, parts: tuple[str, ...], voice: Voice, gap: np.ndarray) -> np.ndarray:
        whole = self.speak(" ".join(parts), voice)
        if len(parts) == 1:
            return whole
        cuts = []
        for k in range(1, len(parts)):
            alone = self.speak(" ".join(parts[:k]), voice).size
            cut = _nearest_silence(whole, alone)
            if cut is None:  # no comma pause found: the parts one by one
                return np.concatenate([x for p in parts for x in (gap, self.speak(p, voice))][1:])
            cuts.append(cut)
        out, at = [], 0
        for lo, hi in cuts:
            out += [whole[at:lo], gap]
            at = hi
        return np.concatenate([*out, whole[at:]])

    def _piper_audio(self, text: str, voice: Voice) -> tuple[np.ndarray, int]:
        from agent.speech.tts import PiperTTS

        tts = self._piper.get(voice.name)
        if tts is None:
            tts = self._piper[voice.name] = PiperTTS(
                self.piper_voice,
                length_scale=voice.length_scale,
                noise_scale=voice.noise_scale,
                noise_w_scale=voice.noise_w_scale,
            )
        assert isinstance(tts, PiperTTS)
        chunks = list(tts.synthesize(text))
        if not chunks:
            raise RuntimeError(f"{voice.name} made no audio for {text!r}")
        pcm = np.concatenate([c.audio for c in chunks]).astype(np.float32) / 32768
        return pcm, chunks[0].sample_rate

    @staticmethod
    def _espeak(text: str, voice: Voice, ssml: bool) -> tuple[np.ndarray, int]:
        out = subprocess.run(
            [
                "espeak-ng",
                *(["-m"] if ssml else []),
                "-v",
                voice.espeak_voice,
                "-s",
                str(voice.rate),
                "--stdout",
                text,
            ],
            capture_output=True,
            timeout=30,
        )
        if out.returncode != 0 or len(out.stdout) < 64:
            raise RuntimeError(f"espeak-ng failed for {text!r}: {out.stderr.decode(errors='replace')[:200]}")
        import io

        with wave.open(io.BytesIO(out.stdout)) as w:
            rate = w.getframerate()
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768
        return pcm, rate


def render(case: TurnCase, syn: Synthesizer) -> np.ndarray:
    """A case's audio: 0.5 s of silence, the parts with the case's pause between them, 0.5 s.

    Returns:
        ``(n,)`` float32 at :data:`SAMPLE_RATE`.

    Raises:
        RuntimeError: a synthesizer failed.
    """
    voice = next(v for v in VOICES if v.name == case.voice)
    pad = np.zeros(SAMPLE_RATE // 2, np.float32)
    return np.concatenate([pad, syn.speak_parts(case.parts, voice, case.pause_s), pad])


def _nearest_silence(audio: np.ndarray, at: int) -> tuple[int, int] | None:
    """The silent stretch (>= 30 ms under 0.01) nearest to sample ``at``, within 35 % of it.

    Silent runs parted by a click of up to :data:`CLICK_HOPS` loud 10 ms hops are one stretch:
    piper's comma silence in "Turn your head to the left, and then wave" has a 20 ms click
    30 ms after the comma, and stretching only the run before it left 320 ms of the voice's own
    silence beside the inserted pause (a 0.6 s case paused 0.92 s).
    """
    hop = SAMPLE_RATE // 100
    loud = np.abs(audio[: audio.size // hop * hop]).reshape(-1, hop).max(axis=1) > 0.01
    runs: list[tuple[int, int]] = []
    start = None
    for i, v in enumerate(loud):
        if not v and start is None:
            start = i
        elif v and start is not None:
            if i - start >= 3:
                if runs and start - runs[-1][1] <= CLICK_HOPS:
                    runs[-1] = (runs[-1][0], i)
                else:
                    runs.append((start, i))
            start = None
    spans = [(a * hop, b * hop) for a, b in runs]
    near = [r for r in spans if abs((r[0] + r[1]) / 2 - at) <= 0.35 * at]
    return min(near, key=lambda r: abs((r[0] + r[1]) / 2 - at)) if near else None


def espeak_ng(text: str, espeak_voice: str = "en-us", rate: int = 175) -> np.ndarray:
    """``text`` said by espeak-ng (``-v espeak_voice -s rate``; 175 wpm is its default pace).

    Returns:
        ``(n,)`` float32 at :data:`SAMPLE_RATE`, silence trimmed at both ends.

    Raises:
        RuntimeError: espeak-ng failed or made no audio.
    """
    # No piper voice is needed: the synthesizer opens one only for a piper Voice.
    return Synthesizer(Path()).speak(
        text, Voice(f"espeak-ng {espeak_voice}", "espeak-ng", espeak_voice=espeak_voice, rate=rate)
    )


def write_wav(path: Path, audio: np.ndarray) -> None:
    """Write ``(n,)`` float32 16 kHz audio as 16-bit mono PCM."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())


def read_wav(path: Path) -> np.ndarray:
    """A 16 kHz mono 16-bit WAV of the set as ``(n,)`` float32."""
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768


def build_set(folder: Path, piper_voice: Path, only: list[TurnCase] | None = None) -> list[TurnCase]:
    """Synthesize the set into ``folder`` (WAVs + ``manifest.json``), reusing what is there.

    A cached set is reused as it is when its manifest lists the same cases rendered by the same
    :data:`SYNTHESIS` (the noisy piper voices sample anew on every synthesis). espeak-ng's cases
    are spoken by piper where espeak-ng is not installed.

    Args:
        folder: Where the WAVs go (created).
        piper_voice: The product's piper voice.
        only: Synthesize these cases instead of the whole set (tests take a sample).

    Returns:
        The cases, each with its WAV at ``folder / case.file``.

    Raises:
        RuntimeError: a synthesizer failed.
    """
    wanted = only if only is not None else cases(espeak_available())
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "manifest.json"
    listed = json.loads(manifest.read_text()) if manifest.is_file() else []
    have = {c["file"]: c for c in listed}
    syn = Synthesizer(piper_voice)
    for case in wanted:
        entry = {**asdict(case), "parts": list(case.parts), "synthesis": SYNTHESIS}
        if have.get(case.file) == entry and (folder / case.file).is_file():
            continue
        write_wav(folder / case.file, render(case, syn))
        have[case.file] = entry
    manifest.write_text(json.dumps(sorted(have.values(), key=lambda c: c["file"]), indent=1))
    return wanted
