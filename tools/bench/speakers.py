"""Speakers the turn-taking judge was not tuned on: other voices, other sentences, each their own pace.

The turn-taking set (:mod:`tools.bench.turn_set`) is where the end-of-turn rules were measured and
set; this set is for checking them on what they never saw. Each :class:`Speaker` is a voice (an
espeak-ng voice or accent the set does not use, or the product's piper voice at another pace and
noise) with a pace of its own: the pauses it makes inside a sentence (:attr:`Speaker.pauses_s`:
brisk speakers 0.3-0.55 s, slow ones 1.1-1.9 s). A speaker says its cases in order, as one
conversation, so a policy that learns a speaker's pauses (``[turn] learn_pauses``) can be measured
as it would learn them live (:mod:`tools.bench.eot`), and ``bench --conversation`` plays them
through the live audio path.

Two kinds of case, as in the turn-taking set: ``paused`` (a sentence with one pause inside it, of
the speaker's length: kept whole is right) and ``plain`` (a command in one breath). The sentences
(:data:`PAUSED`, :data:`PLAIN`) share none with the turn-taking set's. Synthesized WAVs are cached
with a manifest (:func:`build_speakers`), as the turn-taking set's are.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from agent.speech.audio import SAMPLE_RATE
from tools.bench.turn_set import Synthesizer, Voice, write_wav


@dataclass(frozen=True)
class Speaker:
    """One held-out speaker.

    Attributes:
        name: Label in reports (``ana``).
        pace: ``brisk``, ``average`` or ``slow``: the kind of pauses it makes.
        voice: The synthetic voice.
        pauses_s: The pauses it makes inside a sentence, s, used in turn.
    """

    name: str
    pace: str
    voice: Voice
    pauses_s: tuple[float, ...]


SPEAKERS = (
    Speaker("ana", "brisk", Voice("espeak-ng en-us+f4", "espeak-ng", espeak_voice="en-us+f4", rate=185),
            (0.35, 0.45, 0.55)),
    Speaker("ben", "slow", Voice("espeak-ng en-gb-scotland", "espeak-ng", espeak_voice="en-gb-scotland",
                                 rate=140), (1.1, 1.4, 1.7)),
    Speaker("cai", "average", Voice("piper-joe-quick", "piper", noise_scale=0.8, noise_w_scale=1.0,
                                    length_scale=0.9), (0.6, 0.8, 1.0)),
    Speaker("dee", "slow", Voice("espeak-ng en-029", "espeak-ng", espeak_voice="en-029", rate=150),
            (1.2, 1.5, 1.9)),
    Speaker("eli", "average", Voice("piper-joe-slow", "piper", noise_scale=0.5, noise_w_scale=0.6,
                                    length_scale=1.2), (0.7, 0.9, 1.1)),
    Speaker("fay", "brisk", Voice("espeak-ng en-gb-x-rp+f2", "espeak-ng", espeak_voice="en-gb-x-rp+f2",
                                  rate=190), (0.3, 0.4, 0.5)),
)  # fmt: skip
"""The held-out speakers: no voice of the turn-taking set, two of each pace."""

PAUSED: tuple[tuple[str, str], ...] = (
    ("Could you look", "to your right?"),
    ("Raise your right arm,", "then lower it."),
    ("What's the", "weather like?"),
    ("I'd like you to", "nod three times."),
    ("Turn around,", "and then wave."),
    ("Set an alarm for", "seven o'clock."),
    ("Show me", "how you dance."),
    ("Look at the door,", "then look back at me."),
    ("Can you tell me", "what you see over there?"),
    ("Shake your head", "two times."),
    ("Wave with", "both hands."),
    ("Tell me something", "about yourself."),
    ("Please nod,", "if you agree."),
    ("How long", "have you been awake?"),
    ("Move your head", "to the left a bit."),
    ("Give me", "a high five."),
    ("Look down,", "then up again."),
    ("Start a timer", "for thirty seconds."),
    ("Can you", "say good morning?"),
    ("Turn your head", "slowly to the right."),
    ("What can", "you see on the table?"),
    ("I need you to", "look at the window."),
    ("Nod once,", "and then shake your head."),
    ("Tell me", "what time it is."),
    ("Wave your hand,", "like you are saying goodbye."),
    ("Could you please", "turn to face me?"),
    ("Hmm,", "can you look up?"),
    ("Well,", "what do you think?"),
    ("Um, could you", "wave at my friend?"),
    ("Look to the right,", "and then back to the left."),
    ("Raise", "your left hand."),
    ("Please", "tell me a riddle."),
    ("Do you know", "what day it is?"),
    ("Lift your arm,", "and hold it there."),
    ("Spin around", "once."),
    ("Let me think,", "how about a dance?"),
)
"""Sentences with a pause inside (none of the turn-taking set's)."""

PLAIN: tuple[str, ...] = (
    "Please wave at me.",
    "Look over there.",
    "What day is it today?",
    "Can you shake your head?",
    "Tell me a riddle.",
    "Nod three times.",
    "Look to your left.",
    "Raise your right arm.",
    "Turn around.",
    "What are you looking at?",
    "Give me a wave.",
    "Start a timer for one minute.",
    "Say good morning.",
    "How old are you?",
    "Look up at the ceiling.",
    "Clap your hands.",
    "Can you see me?",
    "Do a dance.",
    "Tell me about yourself.",
    "What is the weather like?",
    "Look down.",
    "Shake your head twice.",
    "Turn to face the door.",
    "Where are you?",
    "Please nod.",
    "What can you see?",
    "Are you awake?",
    "Wave at my friend.",
    "Look at the window.",
    "Good morning!",
    "Can you dance?",
    "Show me your hands.",
    "Is it raining outside?",
    "Lower your arm.",
    "Look at the table.",
    "What is two plus two?",
)
"""Commands in one breath (none of the turn-taking set's)."""

SYNTHESIS = 1
"""Version of how a case is rendered (kept in the manifest; a change makes the cache again)."""


@dataclass(frozen=True)
class SpeakerCase:
    """One WAV: a speaker's turn.

    Attributes:
        file: WAV file name in the set's folder.
        speaker: :attr:`Speaker.name`.
        kind: ``paused`` or ``plain``.
        parts: What is said, one entry per stretch of speech.
        pause_s: Silence between the parts, s (0 for one part).
        order: The case's place in its speaker's conversation (0 first).
    """

    file: str
    speaker: str
    kind: str
    parts: tuple[str, ...]
    pause_s: float
    order: int

    @property
    def text(self) -> str:
        """The whole sentence."""
        return " ".join(self.parts)


def speaker_cases(per_speaker: int = 12) -> list[SpeakerCase]:
    """Each speaker's conversation: paused and plain cases in turn, ``per_speaker`` in all.

    Speaker ``s`` says paused sentences ``s, s + 6, ...`` and plain commands likewise, so no two
    speakers say the same sentence; its paused cases take its pauses in turn.

    Args:
        per_speaker: Cases per speaker (at most 12: the sentences run out).

    Returns:
        The cases, speaker after speaker, each speaker's in conversation order.
    """
    n = len(SPEAKERS)
    out = []
    for s, spk in enumerate(SPEAKERS):
        paused = [PAUSED[i] for i in range(s, len(PAUSED), n)]
        plain = [PLAIN[i] for i in range(s, len(PLAIN), n)]
        for k in range(min(per_speaker, 2 * min(len(paused), len(plain)))):
            if k % 2 == 0:
                parts: tuple[str, ...] = paused[k // 2]
                pause = spk.pauses_s[(k // 2) % len(spk.pauses_s)]
                kind = "paused"
            else:
                parts, pause, kind = (plain[k // 2],), 0.0, "plain"
            out.append(SpeakerCase(f"{spk.name}_{k:02d}_{kind}.wav", spk.name, kind, parts, pause, k))
    return out


def speaker_of(case: SpeakerCase) -> Speaker:
    """The :class:`Speaker` who says ``case``."""
    return next(s for s in SPEAKERS if s.name == case.speaker)


def default_folder() -> Path:
    """Where the set is cached: ``$XDG_CACHE_HOME/bolt-agent/speakers`` (``~/.cache``)."""
    import os

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bolt-agent" / "speakers"


def build_speakers(
    folder: Path, piper_voice: Path, only: list[SpeakerCase] | None = None
) -> list[SpeakerCase]:
    """Synthesize the held-out cases into ``folder`` (WAVs + ``manifest.json``), reusing what is there.

    Each WAV is 0.5 s of silence, the speech (parts parted by the case's pause, the sentence's
    prosody kept: :meth:`Synthesizer.speak_parts`), 0.5 s of silence.

    Args:
        folder: The cache (created).
        piper_voice: The product's piper voice.
        only: These cases instead of all of :func:`speaker_cases`.

    Returns:
        The cases, each with its WAV at ``folder / case.file``.

    Raises:
        RuntimeError: a synthesizer failed (espeak-ng missing included).
    """
    wanted = only if only is not None else speaker_cases()
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "manifest.json"
    have = {c["file"]: c for c in json.loads(manifest.read_text())} if manifest.is_file() else {}
    syn: Synthesizer | None = None
    pad = np.zeros(SAMPLE_RATE // 2, np.float32)
    for case in wanted:
        voice = speaker_of(case).voice
        entry = {**asdict(case), "parts": list(case.parts), "voice": asdict(voice), "synthesis": SYNTHESIS}
        if have.get(case.file) == entry and (folder / case.file).is_file():
            continue
        syn = syn or Synthesizer(piper_voice)
        speech = syn.speak_parts(case.parts, voice, case.pause_s)
        write_wav(folder / case.file, np.concatenate([pad, speech, pad]))
        have[case.file] = entry
    manifest.write_text(json.dumps(sorted(have.values(), key=lambda c: c["file"]), indent=1))
    return wanted
