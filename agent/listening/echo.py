"""Echo safety: does mic audio hold the user, or only the robot's own voice coming back?

While the robot speaks (and ``echo_tail_ms`` after), each mic frame is compared with what
the speaker played: the played audio (the *reference*, 16 kHz mono, on the same sample
clock as the mic) is searched for the delay (0..``echo_max_delay_ms``) at which it best
explains the last 256 ms of mic audio (FFT cross-correlation), and the explained share of
the mic energy is ``rho²`` (squared normalised correlation at that delay; one-tap echo model
with a free gain). Mic audio counts as user speech only when the unexplained share
``1 - rho²`` is at least ``echo_min_unexplained``: a robot hearing itself gives rho² near 1
(it clearly is the playback), a person talking gives rho² near 0, whatever the volumes.
This is a guard, not an echo canceller: in a reverberant room it errs on the side of
"echo" (barge-in needs a clearly louder voice), which is the safe side.

Thread-safety: :meth:`EchoGate.add_reference` is called from the speaker side,
:meth:`EchoGate.user_share` from the listener; a lock guards the reference ring.
"""

from __future__ import annotations

import threading

import numpy as np

from agent.speech.audio import SAMPLE_RATE

_WINDOW = 4096  # mic samples compared, 256 ms


class EchoGate:
    """Reference ring buffer plus the correlation test.

    Args:
        max_delay_ms: Longest speaker-to-mic delay searched, ms.
        tail_ms: After the last non-silent reference sample, keep checking this long, ms.

    """

    def __init__(self, max_delay_ms: int = 800, tail_ms: int = 600) -> None:
        self.max_delay = int(max_delay_ms * SAMPLE_RATE / 1000)
        self.tail_s = tail_ms / 1000.0
        self._cap = self.max_delay + 2 * _WINDOW + SAMPLE_RATE
        self._ref = np.zeros(self._cap, dtype=np.float32)
        self._ref_end_t = 0.0  # wall time (perf_counter) of the newest reference sample
        self._last_loud_t = -1e9
        self._lock = threading.Lock()

    def add_reference(self, samples: np.ndarray, t_end: float) -> None:
        """Append audio that reached the speaker.

        Args:
            samples: ``(n,)`` float32 mono 16 kHz as played (zeros for silence).
            t_end: ``time.perf_counter()`` when the last sample was played, s.

        """
        n = min(samples.size, self._cap)
        if n == 0:
            return
        with self._lock:
            self._ref = np.roll(self._ref, -n)
            self._ref[-n:] = samples[-n:]
            self._ref_end_t = t_end
            if n and float(np.max(np.abs(samples[-n:]))) > 1e-3:
                self._last_loud_t = t_end

    def active(self, now: float) -> bool:
        """The speaker played audible sound within the last ``tail_ms``."""
        return now - self._last_loud_t <= self.tail_s

    def user_share(self, mic: np.ndarray, t_end: float) -> float:
        """Share of the recent mic energy that playback does not explain.

        Args:
            mic: ``(n,)`` float32 16 kHz, the newest mic audio (at least 512 samples; the
                last 4096 are used).
            t_end: Wall time of the last mic sample, s (``time.perf_counter()``).

        Returns:
            ``1 - rho²`` in 0..1; 1.0 when no reference is active or the mic is silent.

        """
        if not self.active(t_end):
            return 1.0
        x = mic[-_WINDOW:].astype(np.float64)
        ex = float(x @ x)
        if ex < 1e-8:
            return 1.0
        with self._lock:
            # reference sample aligned with the mic's last sample (delay 0)
            offset = int(round((self._ref_end_t - t_end) * SAMPLE_RATE))
            end = self._cap - max(0, offset)
            start = end - x.size - self.max_delay
            if start < 0:
                start = 0
            ref = self._ref[start:end].astype(np.float64)
        if ref.size < x.size or float(ref @ ref) < 1e-8:
            return 1.0
        n = 1 << int(np.ceil(np.log2(ref.size + x.size)))
        corr = np.fft.irfft(np.fft.rfft(ref, n) * np.conj(np.fft.rfft(x, n)), n)[: ref.size - x.size + 1]
        # energy of each reference window of length len(x)
        c2 = np.concatenate([[0.0], np.cumsum(ref * ref)])
        e_ref = c2[x.size :] - c2[: -x.size]
        rho2 = np.where(e_ref > 1e-9, corr * corr / (np.maximum(e_ref, 1e-9) * ex), 0.0)
        return float(np.clip(1.0 - np.max(rho2), 0.0, 1.0))
