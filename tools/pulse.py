"""A private PulseAudio server with null sinks (a virtual microphone and speaker), and the helpers around it.

    mic_in (null sink)  --monitor-->  mic (remapped source, the default input)
    spk    (null sink)  --monitor-->  spk.monitor (what the agent played)

``paplay --device=mic_in x.wav`` is heard by anything recording from ``mic``;
``parecord --device=spk.monitor`` records the agent's voice. Each server gets its own
``XDG_RUNTIME_DIR`` (so it never touches a user's session) and is stopped by its pid.
Used by the tests and by ``bolt-agent soak`` (:mod:`tools.bench.soak`, which imports it as
``tools.pulse``): stdlib and numpy only. The modules are PulseAudio's own
(``module-null-sink``, ``module-remap-source``: see
https://www.freedesktop.org/wiki/Software/PulseAudio/Documentation/User/Modules/).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

__all__ = ["MODULES", "PulseRig", "missing", "read_wav", "stop_recording", "wait_recorded"]

MODULES = [
    "module-native-protocol-unix",
    "module-null-sink sink_name=spk",
    "module-null-sink sink_name=mic_in",
    "module-remap-source master=mic_in.monitor source_name=mic",
]
"""Modules loaded at start: the socket, the speaker and microphone sinks, the microphone source."""


def missing() -> str | None:
    """Why a PulseAudio rig cannot run here (None when it can): the first tool not on ``PATH``."""
    for tool in ("pulseaudio", "pactl", "paplay", "parecord"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (apt-get install pulseaudio pulseaudio-utils)"
    return None


class PulseRig:
    """Start, stop and drive one private PulseAudio server.

    ``env`` is the environment every client of this server runs in (the agent, ``paplay``).
    """

    def __init__(self) -> None:
        self.runtime = Path(tempfile.mkdtemp(prefix="bolt-pulse-"))
        self.env = {
            **os.environ,
            "XDG_RUNTIME_DIR": str(self.runtime),
            "PULSE_RUNTIME_PATH": str(self.runtime / "pulse"),
        }
        self.env.pop("PULSE_SERVER", None)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Start the server and wait until it answers.

        Args:
            timeout: Longest wait for ``pactl info`` to answer, s.

        Raises:
            RuntimeError: the server exited or did not answer in time.
        """
        args = [
            "pulseaudio",
            "-n",
            "--daemonize=no",
            "--exit-idle-time=-1",
            "--use-pid-file=no",
            "--disallow-exit",
            "--log-target=stderr",
            "--log-level=error",
        ]
        args += [f"--load={m}" for m in MODULES]
        self.proc = subprocess.Popen(args, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if subprocess.run(["pactl", "info"], env=self.env, capture_output=True).returncode == 0:
                self.pactl("set-default-source", "mic")
                self.pactl("set-default-sink", "spk")
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"pulseaudio exited with {self.proc.returncode}")
            time.sleep(0.1)
        raise RuntimeError("pulseaudio did not answer")

    def stop(self) -> None:
        """Stop the server (by its pid)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def pactl(self, *args: str) -> str:
        """Run pactl against this server; return stdout.

        Raises:
            subprocess.CalledProcessError: pactl failed.
        """
        return subprocess.run(
            ["pactl", *args], env=self.env, capture_output=True, text=True, check=True
        ).stdout

    def play(self, wav: Path, device: str = "mic_in") -> None:
        """Play a file into the virtual mic (blocks until done).

        Raises:
            subprocess.CalledProcessError: paplay failed.
        """
        subprocess.run(["paplay", f"--device={device}", str(wav)], env=self.env, check=True)

    def play_async(self, wav: Path, device: str = "mic_in") -> subprocess.Popen:
        """Start playing a file into the virtual mic; the caller waits for the process."""
        return subprocess.Popen(["paplay", f"--device={device}", str(wav)], env=self.env)

    def record(self, path: Path) -> subprocess.Popen:
        """Start recording the speaker (16 kHz mono WAV); stop with :func:`stop_recording`."""
        return subprocess.Popen(
            [
                "parecord",
                "--device=spk.monitor",
                "--rate=16000",
                "--channels=1",
                "--format=s16le",
                "--file-format=wav",
                str(path),
            ],
            env=self.env,
        )

    def cleanup(self) -> None:
        """Stop the server and remove its runtime folder."""
        self.stop()
        shutil.rmtree(self.runtime, ignore_errors=True)


def stop_recording(proc: subprocess.Popen) -> None:
    """End a ``parecord`` so it writes a complete WAV."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()


def wait_recorded(path: Path, seconds: float, timeout: float = 10.0) -> bool:
    """Wait until the recording being written at ``path`` holds ``seconds`` of audio (16 kHz s16 mono).

    ``parecord`` hands audio to the file in fragments, some way behind the sound server: a
    recording started at ``t0`` holds everything played until ``t`` once it holds ``t - t0``
    seconds (its header, a few dozen bytes, is counted as audio: under a millisecond).

    Returns:
        Whether it holds that much before ``timeout`` s pass (polled every 50 ms).
    """
    need = int(seconds * 16000) * 2
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_size >= need):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def read_wav(path: Path) -> np.ndarray:
    """A 16-bit WAV as float32 mono in [-1, 1] (its rate is not checked: recordings here are 16 kHz)."""
    with wave.open(str(path)) as w:
        a = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32) / 32768.0
        return a.reshape(-1, w.getnchannels()).mean(axis=1)
