"""Inputs for ``bolt-agent demo``: recorded robot commands, or built-in ones synthesized once.

With a folder of recorded commands in ``$BOLT_FIXTURES`` (``commands/manifest.json`` and its
WAVs; the project's test fixtures have that shape) the demo plays them. Without it it
synthesizes a few built-in utterances with the packaged piper voice at first run and caches them under
``$XDG_CACHE_HOME/bolt-agent/demo`` (``~/.cache`` by default).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from agent.speech.audio import write_wav
from agent.speech.tts import PiperTTS

# The timer runs in the background while the next commands are handled, then is reported.
DEMO_FILES = ("wave_right.wav", "timer.wav", "look_left.wav", "time.wav", "nod.wav", "joke.wav", "stop.wav")
BUILTIN_UTTERANCES = (
    ("wave_right", "Please wave your right hand."),
    ("timer", "Set a timer for five seconds."),
    ("look_left", "Please look to the left."),
    ("time", "What time is it?"),
    ("nod", "Nod your head if you can hear me."),
    ("joke", "Tell me a short joke."),
)


def cache_dir() -> Path:
    """Folder for cached demo audio."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bolt-agent" / "demo"


def demo_inputs(fixtures: Path | None, tts: PiperTTS) -> tuple[list[tuple[Path, str]], str]:
    """The demo's spoken user turns.

    Args:
        fixtures: A folder of recorded commands (:func:`agent.cli.common.fixtures_root`), or None.
        tts: Voice used to synthesize the built-in utterances when fixtures are absent.

    Returns:
        ``([(wav path, text said)], where they came from)``.
    """
    if fixtures is not None and (fixtures / "commands" / "manifest.json").is_file():
        manifest = json.loads((fixtures / "commands" / "manifest.json").read_text())
        by_file = {m["file"]: m["text"] for m in manifest}
        picked = [(fixtures / "commands" / f, by_file[f]) for f in DEMO_FILES if f in by_file]
        if picked:
            return picked, str(fixtures / "commands")
    folder = cache_dir()
    out = []
    for stem, text in BUILTIN_UTTERANCES:
        # The text is in the name: a changed utterance is synthesized again, not read from the cache.
        path = folder / f"{stem}-{hashlib.sha1(text.encode()).hexdigest()[:8]}.wav"
        if not path.exists():
            import numpy as np

            chunks = [c.audio for c in tts.synthesize(text)]
            lead = np.zeros(int(0.3 * tts.sample_rate), dtype=np.int16)  # silence around speech, as recorded
            tail = np.zeros(int(0.6 * tts.sample_rate), dtype=np.int16)
            write_wav(path, np.concatenate([lead, *chunks, tail]), tts.sample_rate)
        out.append((path, text))
    return out, f"built-in utterances synthesized into {folder}"
