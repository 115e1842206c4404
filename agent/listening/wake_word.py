"""Wake word: a microWakeWord model on the microphone's 10 ms frames (``pymicro-wakeword``).

``[live] wake_word`` names a model the ``pymicro-wakeword`` wheel ships
(:data:`~agent.config.live.WAKE_WORDS`: ``okay_nabu``, ``hey_jarvis``, ``hey_mycroft``,
``alexa``) or a custom model: a path to its JSON (microWakeWord's format: ``wake_word``,
``model``, ``micro.probability_cutoff``, ``micro.sliding_window_size``) or to its ``.tflite``
with that JSON beside it (same stem).
:func:`find_model` reads it (:class:`WakeWordError` names what is wrong).

How it runs (:class:`WakeWordDetector`): 16 kHz float32 blocks of any length are converted to
int16 and cut into 10 ms frames (160 samples); with ``noise_suppression`` (``[live]
wake_noise_suppression``, 1-4) each frame first goes through WebRTC's noise suppressor and
high-pass filter (``webrtc-noise-gain``; measured in docs/wake-word.md); each frame gives one
feature slice (the micro front end: 40 mel channels with noise reduction and gain control, state
kept between calls); every ``stride`` slices (3 for the shipped models: every 30 ms) the streaming model
gives one probability. The wake word is heard when the mean of the last ``window``
probabilities exceeds ``cutoff`` (the model's own ``sliding_window_size`` and
``probability_cutoff`` unless ``[live] wake_window`` / ``wake_cutoff`` say otherwise). After a
detection the window is cleared and nothing is heard for :data:`REFRACTORY_S`: one utterance
of the word is one detection.

:class:`WakeDecider` is the decision alone, on a stream of probabilities: the benchmark scores
settings on probabilities computed once (``tools/bench/wake.py``). Not thread-safe: one thread
(the listener) owns a detector. Costs about 0.2 s of one core per minute of audio on a 2-core x86-64
(the noise suppressor adds about 0.1 s).
"""

from __future__ import annotations

import collections
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent.config.live import WAKE_WORDS

FRAME = 160
"""Samples per front-end frame (10 ms at 16 kHz)."""
REFRACTORY_S = 2.0
"""After a detection nothing more is heard for this long, s (one utterance, one detection)."""
PACKAGE = "pymicro_wakeword"


class WakeWordError(ValueError):
    """A wake-word model that cannot be used: the message names it and what to do."""


@dataclass(frozen=True)
class WakeModel:
    """A wake-word model as its JSON describes it.

    Attributes:
        name: The built-in name (``okay_nabu``) or the model file's stem.
        phrase: What to say, as the model's author wrote it ("Okay Nabu").
        config: The JSON file.
        tflite: The model file.
        cutoff: The model's own probability cutoff (sliding-window mean, 0..1).
        window: The model's own sliding window, probabilities (one per ``stride`` frames).
    """

    name: str
    phrase: str
    config: Path
    tflite: Path
    cutoff: float
    window: int


def builtin_dir() -> Path | None:
    """The ``models`` folder inside the installed ``pymicro-wakeword`` (found without importing it)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "models"


def find_model(ref: str) -> WakeModel:
    """The model ``[live] wake_word`` names.

    Args:
        ref: A built-in name (:data:`~agent.config.live.WAKE_WORDS`), or a path (``~`` expanded)
            to a microWakeWord JSON or to a ``.tflite`` with its JSON beside it.

    Returns:
        The model's files, phrase and own settings.

    Raises:
        WakeWordError: ``pymicro-wakeword`` is not installed (built-in names), the file is
            missing, or its JSON lacks a field or names a missing ``.tflite``.
    """
    if ref in WAKE_WORDS:
        folder = builtin_dir()
        if folder is None:
            raise WakeWordError(
                f"wake word {ref!r} is a model of the pymicro-wakeword package, which is not installed: "
                "pip install 'pymicro-wakeword>=2.5'"
            )
        return _read(folder / f"{ref}.json", ref)
    path = Path(ref).expanduser()
    if path.suffix == ".tflite":
        path = path.with_suffix(".json")
        if not path.is_file():
            raise WakeWordError(f"wake word model {ref}: its JSON {path} is missing (microWakeWord's format)")
    elif path.suffix != ".json":
        raise WakeWordError(
            f"wake word {ref!r}: not a built-in model ({', '.join(WAKE_WORDS)}) nor a path to a .tflite "
            "or .json file"
        )
    if not path.is_file():
        raise WakeWordError(f"wake word model file not found: {path}; fix [live] wake_word")
    return _read(path, path.stem)


def _read(path: Path, name: str) -> WakeModel:
    try:
        cfg: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        micro = cfg["micro"]
        model = WakeModel(
            name,
            str(cfg["wake_word"]),
            path,
            path.parent / str(cfg["model"]),
            float(micro["probability_cutoff"]),
            int(micro["sliding_window_size"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as e:
        what = f"no {e}" if isinstance(e, KeyError) else str(e)
        raise WakeWordError(
            f"wake word model {path}: not a microWakeWord JSON ({what}); it needs wake_word, model, "
            "micro.probability_cutoff and micro.sliding_window_size"
        ) from None
    if not model.tflite.is_file():
        raise WakeWordError(f"wake word model {path} names {model.tflite}, which is missing")
    if not 0 < model.cutoff < 1 or model.window < 1:
        raise WakeWordError(
            f"wake word model {path}: cutoff {model.cutoff} or window {model.window} out of range"
        )
    return model


class WakeDecider:
    """Probabilities in, detections out: the sliding-window mean over a cutoff, then a quiet spell.

    Args:
        cutoff: The window's mean must exceed this (0..1).
        window: Probabilities averaged (each covers ``step_s``).
        step_s: Audio per probability, s (0.03 for the shipped models).
        refractory_s: Nothing is heard this long after a detection, s.
    """

    def __init__(self, cutoff: float, window: int, step_s: float, refractory_s: float = REFRACTORY_S) -> None:
        self.cutoff, self.window = cutoff, window
        self._probs: collections.deque[float] = collections.deque(maxlen=window)
        self._deaf = 0
        self._deaf_steps = round(refractory_s / step_s)

    def push(self, prob: float) -> float | None:
        """One probability; the window's mean when this one completes a detection, else None."""
        if self._deaf > 0:
            self._deaf -= 1
            return None
        self._probs.append(prob)
        if len(self._probs) < self.window:
            return None
        mean = sum(self._probs) / self.window
        if mean <= self.cutoff:
            return None
        self._probs.clear()
        self._deaf = self._deaf_steps
        return mean

    def reset(self) -> None:
        """Forget the window and any quiet spell."""
        self._probs.clear()
        self._deaf = 0


class _Denoiser:
    """WebRTC's noise suppressor on int16 PCM of any length, in whole 10 ms frames.

    A frame's remainder waits for the next call, so the output lags the input by under 10 ms.
    """

    def __init__(self, level: int) -> None:
        if not 1 <= level <= 4:
            raise WakeWordError(f"wake_noise_suppression must be 0-4, not {level}")
        try:
            from webrtc_noise_gain import AudioProcessor
        except ImportError as e:
            raise WakeWordError(
                f"wake_noise_suppression needs webrtc-noise-gain ({e}): pip install 'webrtc-noise-gain>=1.2'"
            ) from None
        self._make = lambda: AudioProcessor(0, level)  # auto gain off: the front end has its own
        self._proc = self._make()
        self._rest = b""

    def process(self, pcm: bytes) -> bytes:
        """The suppressed audio for ``pcm`` (16-bit mono 16 kHz), whole frames only."""
        buf = self._rest + pcm
        whole = len(buf) - len(buf) % (2 * FRAME)
        self._rest = buf[whole:]
        return b"".join(
            self._proc.Process10ms(buf[i : i + 2 * FRAME]).audio for i in range(0, whole, 2 * FRAME)
        )

    def reset(self) -> None:
        """Forget the noise estimate and any partial frame."""
        self._proc = self._make()
        self._rest = b""


class WakeWordDetector:
    """Streaming detection of one wake word on 16 kHz audio.

    Args:
        model: The model (:func:`find_model`).
        cutoff: Sliding-window mean probability needed (0..1); None: the model's own.
        window: Probabilities averaged; None: the model's own.
        noise_suppression: WebRTC's noise suppression level before the front end (0: none,
            1-4: mild to strongest).

    Raises:
        WakeWordError: ``pymicro-wakeword`` (or, with ``noise_suppression``,
            ``webrtc-noise-gain``) is missing or cannot load the model.
    """

    def __init__(
        self,
        model: WakeModel,
        cutoff: float | None = None,
        window: int | None = None,
        noise_suppression: int = 0,
    ) -> None:
        folder = builtin_dir()
        try:
            from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures
        except ImportError as e:
            raise WakeWordError(
                f"the wake word needs pymicro-wakeword ({e}): pip install 'pymicro-wakeword>=2.5'"
            ) from None
        libs = folder.parent / "lib" if folder is not None else Path(".")
        lib = next(iter(libs.glob("*tensorflowlite_c.*")), None)  # the runtime inside the wheel
        if lib is None:
            raise WakeWordError(f"pymicro-wakeword has no TensorFlow Lite library in {libs}")
        self.model = model
        self.noise_suppression = noise_suppression
        """WebRTC's noise suppression level before the front end (0: none)."""
        self._denoise = _Denoiser(noise_suppression) if noise_suppression else None
        try:
            # The package's own window is 1: the window and cutoff are ours (WakeDecider).
            self._mww = MicroWakeWord(
                model.name,
                wake_word=model.phrase,
                tflite_model=model.tflite,
                probability_cutoff=model.cutoff,
                sliding_window_size=1,
                trained_languages=[],
                libtensorflowlite_c_path=lib,
            )
        except (OSError, RuntimeError, ValueError) as e:
            raise WakeWordError(f"wake word model {model.tflite} cannot be loaded: {e}") from None
        self._features = MicroWakeWordFeatures()
        self.stride = int(self._mww.stride)
        """Feature frames per probability (3: one probability every 30 ms)."""
        self._slices = 0  # feature frames since the last probability
        self.decider = WakeDecider(
            cutoff if cutoff is not None else model.cutoff,
            window if window is not None else model.window,
            self.stride * FRAME / 16000,
        )

    @property
    def phrase(self) -> str:
        """What to say ("Okay Nabu")."""
        return self.model.phrase

    def probabilities(self, samples: np.ndarray) -> list[float]:
        """The model's probability for each complete step in ``samples`` (and what was left before).

        Args:
            samples: ``(n,)`` float32 mono 16 kHz in [-1, 1], any length.

        Returns:
            One probability (0..1) per ``stride`` 10 ms frames completed, oldest first.
        """
        pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
        if self._denoise is not None:
            pcm = self._denoise.process(pcm)
        out = []
        for features in self._features.process_streaming(pcm):
            prob = self._mww.process_streaming_prob(features)
            self._slices += 1
            if self._slices == self.stride:  # the package runs the model on every stride-th frame
                self._slices = 0
                out.append(float(prob or 0.0))
        return out

    def feed(self, samples: np.ndarray) -> float | None:
        """Listen to the next block.

        Args:
            samples: ``(n,)`` float32 mono 16 kHz in [-1, 1], any length (the microphone's blocks).

        Returns:
            The detection's score (the window's mean probability, 0..1) when the wake word
            ended in this block, else None.
        """
        hit = None
        for prob in self.probabilities(samples):
            score = self.decider.push(prob)
            if score is not None and hit is None:
                hit = score
        return hit

    def reset(self) -> None:
        """Start afresh (a new standby): the front end, the model's streaming state, the window."""
        self._features.reset()
        if self._denoise is not None:
            self._denoise.reset()
        self._mww.reset()
        self._slices = 0
        self.decider.reset()

    def close(self) -> None:
        """Free the interpreter."""
        self._mww.close()
