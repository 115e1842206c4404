"""``bench --wake``'s live part: the agent's CPU in standby, and the time the wake word takes to wake it.

``bolt-agent run --json`` with ``[live] attention = "wake_word"`` (the given config with that
set) runs as a child process on a private PulseAudio server (``tools/pulse.py``: null sinks for
the microphone and the speaker). Once it is in standby, speech without the wake word (the
checkout's prose, the first paragraphs of the wake-word set's piper and espeak-ng readings)
plays into its microphone for ``cpu_s`` seconds, and its CPU time (``/proc/PID/stat`` utime +
stime) over that wall time is its share of one core; the 1-minute load average is read before
and after. Then the wake word (the piper voice, without noise) wakes it and "Go to sleep." sends
it back, :data:`TRIALS` times: the time from the word's end to the ``standby`` event that says
``awake`` (the detection, the sound server's latency, the event's way out through the CLI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agent.speech.audio import SAMPLE_RATE
from tools.bench import wake_set
from tools.bench.procstat import read_sample

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (JetPack 6)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
TRIALS = 3
"""Wake-ups timed."""


def with_live(text: str, updates: dict[str, str]) -> str:
    """A TOML config's text with ``[live]`` keys set.

    Args:
        text: The config file's text.
        updates: Key -> TOML literal (``'"wake_word"'``, ``"3600"``).

    Returns:
        The text with those keys in its ``[live]`` table (added at the end when it has none;
        keys it had are replaced).
    """
    lines = [f"{k} = {v}" for k, v in updates.items()]
    if "live" not in tomllib.loads(text):
        return f"{text}\n\n# added by bolt-agent bench --wake\n[live]\n" + "\n".join(lines) + "\n"
    out, in_live = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            in_live = stripped == "[live]"
            out.append(line)
            if in_live:
                out += lines
            continue
        if in_live and stripped.split("=")[0].strip() in updates:
            continue
        out.append(line)
    return "\n".join(out) + "\n"


class _Child:
    """``bolt-agent run --json`` with its events and their arrival times (monotonic s)."""

    def __init__(self, config: Path, env: dict[str, str], log: Path) -> None:
        self._log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent", "run", "--json", "--config", str(config)],
            cwd=ROOT,
            env={**env, "XDG_STATE_HOME": tempfile.mkdtemp(prefix="bolt-wake-state-")},
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self.events: list[tuple[float, dict[str, Any]]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.append((time.monotonic(), json.loads(line)))
            except ValueError:
                continue

    def wait(
        self, pred: Callable[[dict[str, Any]], bool], start: int, timeout: float
    ) -> tuple[float, dict[str, Any]] | None:
        """The first event from ``start`` on that ``pred`` accepts, and its time (None: ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            for t, ev in self.events[start:]:
                if pred(ev):
                    return t, ev
            time.sleep(0.02)
        return None

    def cpu_s(self) -> float:
        """CPU time the agent has used, s."""
        sample = read_sample(self.proc.pid, 0.0)
        if sample is None:
            raise RuntimeError("the agent exited during the measurement")
        return sample.cpu_s

    def stop(self) -> None:
        """SIGTERM, then wait (a kill after 30 s)."""
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _standby(ev: dict[str, Any], state: str) -> bool:
    return ev["event"] == "standby" and ev["state"] == state


def _clips(work: Path, wake_word: str, folder: Path, piper_voice: Path, seconds: float) -> None:
    """``wake.wav``, ``sleep.wav`` and ``talk.wav`` (``seconds`` of speech without the wake word)."""
    from tools.bench.turn_set import Synthesizer, Voice, write_wav

    syn = Synthesizer(piper_voice)
    joe = Voice("piper-joe-noise0", "piper")
    pad = np.zeros(SAMPLE_RATE // 2, np.float32)
    write_wav(
        work / "wake.wav", np.concatenate([pad, syn.speak(wake_set.PHRASES[wake_word] + ".", joe), pad])
    )
    write_wav(work / "sleep.wav", np.concatenate([pad, syn.speak("Go to sleep.", joe), pad]))
    avoid = tuple(w.lower() for w in wake_set.PHRASES.values())
    talk, total = [], 0
    for _, audio in wake_set.paragraphs(ROOT, folder, piper_voice, avoid):
        talk.append(audio)
        total += audio.size
        if total >= (seconds + 10) * SAMPLE_RATE:
            break
    write_wav(work / "talk.wav", np.concatenate(talk))


def standby_cpu(
    config: Path, wake_word: str, folder: Path, piper_voice: Path, cpu_s: float, note: Callable[[str], None]
) -> dict[str, Any]:
    """The agent's CPU share in standby, and the wake-ups' times (see the module docstring).

    Args:
        config: The robot config to run (``[live]`` set for the wake word here).
        wake_word: A built-in model name.
        folder: The wake-word set's cache (the speech played comes from its readings).
        piper_voice: The product's piper voice (the wake word and "Go to sleep." are said in it).
        cpu_s: Seconds to measure over.
        note: Progress lines.

    Returns:
        ``cpu_percent`` (of one core), ``seconds``, ``load_before``/``load_after`` (1, 5, 15
        minutes), ``heard_in_standby`` (utterances or transcripts meanwhile: should be 0) and
        ``wake_ms`` (per trial; None: not woken within 10 s).

    Raises:
        RuntimeError: no PulseAudio, or the agent did not reach standby.
    """
    from tools.pulse import PulseRig, missing

    if (why := missing()) is not None:
        raise RuntimeError(f"standby CPU needs a PulseAudio server: {why}")
    work = Path(tempfile.mkdtemp(prefix="bolt-wake-bench-"))
    cfg = work / "wake.toml"
    live = {"attention": '"wake_word"', "wake_word": f'"{wake_word}"', "standby_after_s": "3600"}
    cfg.write_text(with_live(config.read_text(encoding="utf-8"), live))
    _clips(work, wake_word, folder, piper_voice, cpu_s)
    rig = PulseRig()
    rig.start()
    child = _Child(cfg, rig.env, work / "agent.log")
    try:
        if child.wait(lambda e: _standby(e, "standby"), 0, 300) is None:
            raise RuntimeError(f"the agent did not reach standby (its log: {work / 'agent.log'})")
        time.sleep(3.0)
        note(f"standby: measuring the agent's CPU for {cpu_s:g} s while speech plays into its microphone")
        load0 = os.getloadavg()
        start = len(child.events)
        talker = rig.play_async(work / "talk.wav")
        c0, t0 = child.cpu_s(), time.monotonic()
        time.sleep(cpu_s)
        c1, t1 = child.cpu_s(), time.monotonic()
        talker.terminate()
        talker.wait()
        load1 = os.getloadavg()
        heard = [ev for _, ev in child.events[start:] if ev["event"] in ("transcript", "utterance")]
        note("waking it with the wake word and sending it back with 'Go to sleep.'")
        wakes = _wake_trials(child, rig, work)
    finally:
        child.stop()
        rig.cleanup()
    return {
        "cpu_percent": round(100 * (c1 - c0) / (t1 - t0), 2),
        "seconds": round(t1 - t0, 1),
        "load_before": [round(x, 2) for x in load0],
        "load_after": [round(x, 2) for x in load1],
        "heard_in_standby": len(heard),
        "wake_ms": wakes,
    }


def _wake_trials(child: _Child, rig: Any, work: Path) -> list[float | None]:
    """Per trial, ms from the wake word's end to ``awake`` (None: missed); "Go to sleep." after each."""
    out: list[float | None] = []
    wav = work / "wake.wav"
    word_end_s = wav.stat().st_size / 2 / SAMPLE_RATE - 0.5  # 16-bit mono, 0.5 s of silence last
    for _ in range(TRIALS):
        start = len(child.events)
        t_end = time.monotonic() + word_end_s
        rig.play(wav)  # returns once the server has played it
        got = child.wait(lambda e: _standby(e, "awake"), start, 10)
        out.append(round((got[0] - t_end) * 1000) if got else None)
        if got is None:
            continue
        time.sleep(1.0)
        start = len(child.events)
        rig.play(work / "sleep.wav")
        child.wait(lambda e: _standby(e, "standby"), start, 30)
    return out
