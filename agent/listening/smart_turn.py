"""Smart Turn v3.2: has the user finished their turn? (audio-only end-of-turn model).

Semantic endpointing asks this after a short silence: a finished turn ends at once, an
unfinished one waits for more speech (up to a longer silence). The model is Smart Turn v3.2
(pipecat-ai/smart-turn, BSD-2-Clause, Daily): a Whisper-based classifier, CPU int8 ONNX of
8,679,182 bytes, shipped inside the ``pipecat-ai`` wheel (1.14.0) at
``pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx``. We need that file, not the
framework (its modules import loguru; its dependencies include numba and aiohttp): ``launch/setup.sh``
downloads the wheel and unpacks only the file, with pipecat's licence, into the environment's
:data:`UNPACKED` folder (``.venv/share/bolt-agent/smart-turn/``, which travels with the
installation: a system service finds it too). :func:`find_smart_turn_model` looks in an installed
``pipecat`` package first (through ``importlib.util.find_spec``, without importing it), then there.

Input preparation follows pipecat 1.14.0 exactly
(``pipecat/audio/turn/smart_turn/local_smart_turn_v3.py``,
``LocalSmartTurnAnalyzerV3._predict_endpoint``, and ``_whisper_features.py``,
``compute_whisper_log_mel_features``, a numpy copy of transformers'
``WhisperFeatureExtractor(chunk_length=8)``):

1. 16 kHz mono float audio; keep the **last** 8 s (128,000 samples), or **left**-pad with
   zeros to 8 s, so the end of speech always sits at the end of the window;
2. zero-mean, unit-variance normalisation of that whole padded window, in float32:
   ``(x - mean) / sqrt(var + 1e-7)`` (transformers' ``do_normalize=True``);
3. Whisper log-mel features: 80 Slaney mel bands, 400-point periodic Hann STFT, hop 160
   (10 ms), reflect-centred, last frame dropped, ``log10`` floored at 1e-10, clamped to
   ``max - 8``, then ``(x + 4) / 4``: ``(80, 800)`` float32. faster-whisper's
   ``FeatureExtractor(feature_size=80, chunk_length=8)`` called with ``padding=0`` is this same
   computation (in float32 rather than float64);
4. ONNX input ``input_features`` ``(batch, 80, 800)`` float32; output ``logits``
   ``(batch, 1)``, already a sigmoid probability that the turn is complete (pipecat reads it as
   such); pipecat calls a turn complete when ``probability > 0.5``.

pipecat feeds the model the turn's audio from 500 ms (plus the VAD's start delay) before the
speech start up to the current frame (``base_smart_turn.py``,
``BaseSmartTurn._process_speech_segment``), so the short trailing silence the VAD has already
seen is part of the input; do the same.

Checked here: on the 11 test data clips (``tests/data``: 10 espeak-ng commands, jfk.flac) these features
differ from pipecat's ``compute_whisper_log_mel_features`` by at most 1.1e-5 (asserted < 1e-4 in
``tests/test_smart_turn.py``) and from transformers 5.24's ``WhisperFeatureExtractor(chunk_length=8)``
by at most 1.1e-5 (pipecat's own copy: 1.2e-7); the model's probabilities agree to 5 decimals.

Speed, measured here on 2 x86 cores shared with other jobs (load average 5-6), onnxruntime
1.32, 30 calls: one :meth:`SmartTurn.probability` call takes 76 ms at best and 114 ms median with
``threads=1`` (features about 20 ms, model about 60 ms at best); ``threads=2`` was no faster
under that load. The time does not depend on the audio length: the window is always 8 s.

Threading: :meth:`SmartTurn.probability` holds no state between calls (the ONNX session is
thread-safe), so one instance may serve several threads; each call blocks for the time above.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from agent.speech.audio import SAMPLE_RATE

if TYPE_CHECKING:
    from faster_whisper.feature_extractor import FeatureExtractor

"""Model input rate in Hz."""
WINDOW_S = 8
"""Seconds of audio the model sees (the last 8 s of the turn)."""
WINDOW_SAMPLES = SAMPLE_RATE * WINDOW_S
N_MELS = 80
N_FRAMES = 800
"""Feature frames per window (10 ms hop)."""
DEFAULT_THRESHOLD = 0.5
"""pipecat's decision threshold: complete when ``probability > 0.5``."""
WARMUP_RUNS = 2
"""Model runs on a silent window at load. onnxruntime's CPU arena for this session grows over the
first two runs and then stays: measured here (onnxruntime 1.32, 2026-12-04) resident memory of a
process holding only the session was +25 MiB after the first run and +17 MiB after the second,
then within 1 MiB over 40 more runs of 0.3-12 s audio; each warm-up run takes 40-55 ms. Without
the warm-up, ``bolt-agent soak`` showed a one-off step of 16 + 8 MiB (two onnxruntime
``aligned_alloc`` calls from the turn-taking thread) whenever the judge first asked Smart Turn,
at a different turn each run (turns 17-78)."""

PACKAGE_DIST = "pipecat-ai"
"""The PyPI distribution that ships the model (import name ``pipecat``), 1.14.0 or later."""
MODEL_IN_PACKAGE = "audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"
"""Path of the ONNX file inside the ``pipecat`` package folder."""
UNPACKED = Path(sys.prefix) / "share" / "bolt-agent" / "smart-turn"
"""Where ``launch/setup.sh`` unpacks the model from the wheel, as pipecat's ``smart_turn`` folder is
laid out (``data/smart-turn-v3.2-cpu.onnx``, ``_whisper_features.py``, pipecat's ``LICENSE``)."""
INSTALL_HINT = (
    f"bash launch/setup.sh run (it unpacks the file from the {PACKAGE_DIST} 1.14.0 wheel into "
    f"{UNPACKED}), or set [turn] smart_turn_model to the file"
)

_NORM_EPS = 1e-7  # transformers' zero_mean_unit_var_norm, copied by pipecat's _whisper_features.py


class EndOfTurnModelMissing(FileNotFoundError):
    """The Smart Turn ONNX file is absent; the message says what to install or fix."""


def find_smart_turn_model(unpacked: Path = UNPACKED) -> Path | None:
    """Locate the Smart Turn v3.2 ONNX: in an installed ``pipecat`` package, else where set-up unpacked it.

    The package is found without importing it (``importlib.util.find_spec`` runs none of its code).

    Args:
        unpacked: The folder ``launch/setup.sh`` unpacks the model into (:data:`UNPACKED`).

    Returns:
        Path of ``smart-turn-v3.2-cpu.onnx``, or None when neither holds it.
    """
    spec = importlib.util.find_spec("pipecat")  # finds the top-level package; runs none of its code
    bases = list(spec.submodule_search_locations or []) if spec is not None else []
    for base in bases:
        path = Path(base) / MODEL_IN_PACKAGE
        if path.is_file():
            return path
    path = unpacked / "data" / Path(MODEL_IN_PACKAGE).name
    return path if path.is_file() else None


@functools.lru_cache(maxsize=1)
def _extractor() -> FeatureExtractor:
    from faster_whisper.feature_extractor import FeatureExtractor

    return FeatureExtractor(
        feature_size=N_MELS, sampling_rate=SAMPLE_RATE, hop_length=160, chunk_length=WINDOW_S, n_fft=400
    )


def last_window(audio: np.ndarray) -> np.ndarray:
    """The model's 8 s window: the last 128,000 samples, zero-padded at the start when shorter.

    Args:
        audio: ``(n,)`` float 16 kHz mono, any length.

    Returns:
        ``(128000,)`` float32.

    Raises:
        ValueError: ``audio`` is not one-dimensional.
    """
    x = np.asarray(audio, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError(f"expected mono audio of shape (n,), got {x.shape}")
    if x.size >= WINDOW_SAMPLES:
        return x[-WINDOW_SAMPLES:]
    return np.pad(x, (WINDOW_SAMPLES - x.size, 0))


def smart_turn_features(audio: np.ndarray) -> np.ndarray:
    """Whisper log-mel features of the last 8 s, prepared as pipecat prepares them.

    Args:
        audio: ``(n,)`` float 16 kHz mono, any length (values in [-1, 1]; the normalisation
            makes the scale irrelevant).

    Returns:
        ``(80, 800)`` float32 features, roughly in [-1, 1.5].

    Raises:
        ValueError: ``audio`` is not one-dimensional.
    """
    x = last_window(audio)
    x = (x - x.mean()) / np.sqrt(x.var() + _NORM_EPS)
    return np.asarray(_extractor()(x, padding=0), dtype=np.float32)


class SmartTurn:
    """Smart Turn v3.2 on onnxruntime's CPU provider.

    Loading runs the model :data:`WARMUP_RUNS` times on a silent window (40-55 ms each here), so
    the first real call neither waits for nor grows onnxruntime's arena.

    Args:
        model_path: The ONNX file; None = the one shipped in pipecat-ai
            (:func:`find_smart_turn_model`).
        threads: onnxruntime intra-op threads (pipecat's ``cpu_count``, default 1).

    Raises:
        EndOfTurnModelMissing: the file does not exist (or, with ``model_path=None``, neither
            pipecat-ai >= 1.14.0 nor the unpacked file is here); the message says how to get it.
        RuntimeError: onnxruntime cannot load the file (not an ONNX model).

    Attributes:
        model_path: The file loaded.
        last_ms: Wall-clock ms of the last :meth:`probability` call (features + model), 0 before.
    """

    def __init__(self, model_path: Path | None = None, threads: int = 1) -> None:
        if model_path is None:
            found = find_smart_turn_model()
            if found is None:
                raise EndOfTurnModelMissing(
                    f"Smart Turn v3.2 end-of-turn model not found: the {PACKAGE_DIST} wheel (>= 1.14.0) "
                    f"ships it at pipecat/{MODEL_IN_PACKAGE}; get it with {INSTALL_HINT}"
                )
            model_path = found
        model_path = Path(model_path).expanduser()
        if not model_path.is_file():
            raise EndOfTurnModelMissing(
                f"Smart Turn end-of-turn model not found: {model_path}; fix the path, or leave it "
                f"unset to use the one from {PACKAGE_DIST} (set-up unpacks it: {INSTALL_HINT})"
            )
        import onnxruntime as ort

        opts = ort.SessionOptions()  # pipecat's settings (LocalSmartTurnAnalyzerV3.__init__)
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = max(1, int(threads))
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(
                str(model_path), sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # onnxruntime's pybind errors share no public base class
            raise RuntimeError(f"cannot load the Smart Turn model {model_path}: {e}") from e
        self.model_path = model_path
        self.last_ms = 0.0
        _extractor()  # build the mel filterbank now, not on the first turn
        self._warm_up()

    def _warm_up(self) -> None:
        """Run the model :data:`WARMUP_RUNS` times on a silent window, so its arena is at full size.

        The judge asks Smart Turn only when the words leave a pause uncertain, which may first
        happen hundreds of turns into a run; without this, that first call grows the process
        by the session's working memory at that moment (see :data:`WARMUP_RUNS`).
        """
        feats = smart_turn_features(np.zeros(WINDOW_SAMPLES, dtype=np.float32))[None]
        for _ in range(WARMUP_RUNS):
            self._session.run(None, {"input_features": feats})

    def probability(self, audio: np.ndarray) -> float:
        """Probability that the speaker has finished their turn.

        Args:
            audio: ``(n,)`` float32 16 kHz mono, the turn so far (with the short trailing
                silence the VAD has seen); any length, only the last 8 s are used.

        Returns:
            Probability in 0..1 that the turn is complete.

        Raises:
            ValueError: ``audio`` is empty or not one-dimensional.
        """
        if np.size(audio) == 0:
            raise ValueError("no audio to judge")
        t0 = time.perf_counter()
        feats = smart_turn_features(audio)[None]
        (out,) = self._session.run(None, {"input_features": feats})
        self.last_ms = (time.perf_counter() - t0) * 1000
        return float(np.asarray(out).reshape(-1)[0])

    def is_complete(self, audio: np.ndarray, threshold: float = DEFAULT_THRESHOLD) -> bool:
        """Whether the turn is complete: ``probability(audio) > threshold``.

        Args:
            audio: As for :meth:`probability`.
            threshold: Decision threshold in 0..1 (pipecat uses 0.5).

        Returns:
            True when the model judges the turn finished.

        Raises:
            ValueError: ``audio`` is empty or not one-dimensional.
        """
        return self.probability(audio) > threshold
