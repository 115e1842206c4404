"""What ``bolt-agent soak`` says to the agent: spoken commands, typed lines, noise.

The spoken commands are synthesized once with the product's own piper voice (deterministic:
no noise, so every machine plays the same audio; :class:`tools.bench.turn_set.Synthesizer`)
into ``$XDG_CACHE_HOME/bolt-agent/soak`` (``~/.cache``) as 16 kHz WAVs with a
``manifest.json`` in the fixtures' ``commands/`` format (``file``, ``text``, ``intent``), so a
fresh clone needs no fixtures. A folder of WAVs with such a manifest can be used instead
(``--commands DIR``); its ``stop`` commands are left out (a stop phrase gets no reply). The
noise clip (white noise, 1.5 s at -40 dBFS RMS: audible, under the VAD's speech threshold)
and the barge-in opener (a request for a story: a long reply to talk over) are synthesized
the same way. The camera's frames for ``[camera]`` (an image folder) are drawn here too.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agent.speech.audio import SAMPLE_RATE

SPOKEN = (
    ("wave_right.wav", "Hey robot, wave your right hand.", "animation"),
    ("look_left.wav", "Please look to the left.", "actuator"),
    ("what_see.wav", "What do you see right now?", "vision"),
    ("nod.wav", "Nod your head if you can hear me.", "animation"),
    ("time.wav", "What time is it?", "skill"),
    ("joke.wav", "Tell me a short joke.", "chat"),
    ("dance.wav", "Can you dance for me?", "animation"),
    ("look_up.wav", "Please look up at the ceiling.", "actuator"),
)
"""The default spoken commands: ``(file, text, intent)``."""
STORY = ("story.wav", "Tell me a long story about a cat and a robot.", "chat")
"""The barge-in opener: its reply is long enough to talk over."""
TIMER = ("timer_2s.wav", "Set a timer for two seconds.", "skill")
"""The timer command; its background result is announced about 2 s later. Short, because a
timer turn waits for the announcement and a longer timer adds nothing a soak measures; a
restart with one pending still finds it due (the agent takes longer than 2 s to start)."""
TYPED = (
    "What time is it?",
    "Wave your left hand.",
    "Tell me something about yourself.",
    "Look to the right.",
)
"""Lines typed into the live console (``POST /api/say``)."""
NOISE_FILE = "noise.wav"


@dataclass(frozen=True)
class Command:
    """One spoken command.

    Attributes:
        wav: The 16 kHz mono WAV.
        text: What it says.
        intent: The manifest's intent (``animation``, ``chat``, ``stop``...).
    """

    wav: Path
    text: str
    intent: str = ""


@dataclass(frozen=True)
class SoakSet:
    """Everything a soak plays: rotating commands, the story opener, the timer, noise, typed lines."""

    commands: tuple[Command, ...]
    story: Command
    timer: Command
    noise: Path
    typed: tuple[str, ...] = TYPED


def default_folder() -> Path:
    """The cache of synthesized clips: ``$XDG_CACHE_HOME/bolt-agent/soak`` (``~/.cache``)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bolt-agent" / "soak"


def build_soak_set(piper_voice: Path, folder: Path | None = None, commands: Path | None = None) -> SoakSet:
    """Synthesize what is missing in ``folder`` and return the set.

    Args:
        piper_voice: The product's piper voice (``.onnx``).
        folder: The cache (default :func:`default_folder`); created.
        commands: A folder of WAVs with ``manifest.json`` to rotate instead of :data:`SPOKEN`.

    Returns:
        The set, every file present.

    Raises:
        RuntimeError: piper made no audio, or ``commands`` has no usable ``manifest.json``.
        agent.speech.tts.TTSError: the voice cannot be loaded.
    """
    from tools.bench.turn_set import VOICES, Synthesizer, write_wav

    folder = folder or default_folder()
    folder.mkdir(parents=True, exist_ok=True)
    syn: Synthesizer | None = None
    manifest = folder / "manifest.json"
    listed = {c["file"]: c for c in json.loads(manifest.read_text())} if manifest.is_file() else {}
    pad = np.zeros(SAMPLE_RATE // 2, np.float32)
    for file, text, intent in (*SPOKEN, STORY, TIMER):
        entry = {"file": file, "text": text, "voice": "piper-joe-noise0", "intent": intent}
        if listed.get(file) == entry and (folder / file).is_file():
            continue
        if syn is None:
            syn = Synthesizer(piper_voice)
        write_wav(folder / file, np.concatenate([pad, syn.speak(text, VOICES[0]), pad]))
        listed[file] = entry
    manifest.write_text(json.dumps(sorted(listed.values(), key=lambda c: c["file"]), indent=1))
    noise = folder / NOISE_FILE
    if not noise.is_file():
        rng = np.random.default_rng(0)
        write_wav(noise, (rng.standard_normal(int(1.5 * SAMPLE_RATE)) * 0.01).astype(np.float32))

    def cmd(spec: tuple[str, str, str]) -> Command:
        return Command(folder / spec[0], spec[1], spec[2])

    rotation = load_commands(commands) if commands is not None else tuple(cmd(s) for s in SPOKEN)
    return SoakSet(rotation, cmd(STORY), cmd(TIMER), noise)


def load_commands(folder: Path) -> tuple[Command, ...]:
    """The commands of a fixtures-style folder (``manifest.json``: ``file``, ``text``, ``intent``).

    Raises:
        RuntimeError: no manifest, or no command in it whose WAV exists (stop phrases excluded).
    """
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        raise RuntimeError(f"{folder} has no manifest.json (file, text per command)")
    out = tuple(
        Command(folder / c["file"], c.get("text", ""), c.get("intent", ""))
        for c in json.loads(manifest.read_text())
        if c.get("intent") != "stop" and (folder / c["file"]).is_file()
    )
    if not out:
        raise RuntimeError(f"{manifest} lists no command WAV that exists here")
    return out


def camera_frames(folder: Path, n: int = 4) -> Path:
    """Draw ``n`` 640x480 JPEG frames (coloured shapes on a grey table) into ``folder``, once.

    Returns:
        ``folder``, for ``[camera] source`` (an image folder is played as a slide show).
    """
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        path = folder / f"frame{i}.jpg"
        if path.is_file():
            continue
        img = np.full((480, 640, 3), 120, np.uint8)
        cv2.rectangle(img, (60 + 40 * i, 200), (220 + 40 * i, 380), (40, 40, 200), -1)
        cv2.circle(img, (460 - 30 * i, 260), 70, (30, 180, 60), -1)
        cv2.imwrite(str(path), img)
    return folder
