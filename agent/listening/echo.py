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

A second test, over a whole utterance, backs the text echo check (a transcript like what the
robot said): :meth:`EchoGate.echo_share` finds the one delay at which the playback best explains
the utterance's audio, over all of it. A frame of 256 ms against 800 ms of delays finds chance
likeness between two voices (rho² up to 0.6 for a person's command over the robot's unrelated
speech); seconds of audio at one delay do not (0.03 at most), while the robot's echo keeps
0.08 or more even in a reverberant room (see :data:`agent.config.live.ECHO_TEXT_MIN_SHARE`).

Thread-safety: :meth:`EchoGate.add_reference` is called from the speaker side,
:meth:`EchoGate.user_share` from the listener, :meth:`EchoGate.echo_share` from the ASR stage; a
lock guards the reference rings.
"""

from __future__ import annotations

import threading

import numpy as np

from agent.speech.audio import SAMPLE_RATE

_WINDOW = 4096  # mic samples compared, 256 ms
_JITTER = 160  # playback reports this far (10 ms) off the wall clock are not gaps, samples


class EchoGate:
    """Reference ring buffer plus the correlation test.

    Args:
        max_delay_ms: Longest speaker-to-mic delay searched, ms.
        tail_ms: After the last non-silent reference sample, keep checking this long, ms.
        history_s: Playback kept on the wall clock for :meth:`echo_share`, s (the longest
            utterance, its pre-roll and the time its transcription takes).

    """

    def __init__(self, max_delay_ms: int = 800, tail_ms: int = 600, history_s: float = 40.0) -> None:
        self.max_delay = int(max_delay_ms * SAMPLE_RATE / 1000)
        self.tail_s = tail_ms / 1000.0
        self._cap = self.max_delay + 2 * _WINDOW + SAMPLE_RATE
        self._ref = np.zeros(self._cap, dtype=np.float32)
        self._ref_end_t = 0.0  # wall time (perf_counter) of the newest reference sample
        self._last_loud_t = -1e9
        self._history = _History(int(history_s * SAMPLE_RATE))
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
            self._history.add(samples, t_end)
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
        return 1.0 - _best_rho2(ref, x)

    def echo_share(self, audio: np.ndarray, t_end: float, slack_s: float = 0.0) -> float:
        """Share of ``audio``'s energy the playback explains at one delay, over all of it.

        The one-tap echo model of :meth:`user_share` fitted to the whole utterance: rho² at
        the best delay in ``-slack_s .. max_delay + slack_s``. Near 0 for a person's voice
        (whatever the robot said meanwhile), clearly above for audio that holds the robot's.

        Args:
            audio: ``(n,)`` float32 16 kHz mic audio, e.g. an utterance.
            t_end: Wall time of its last sample, s (``time.perf_counter()``).
            slack_s: How far off ``t_end`` may be, s (an utterance's post-roll).

        Returns:
            rho² in 0..1; 0.0 when no playback overlaps it or either side is silent.
        """
        x = audio.astype(np.float64)
        ex = float(x @ x)
        if x.size == 0 or ex < 1e-8:
            return 0.0
        slack = int(slack_s * SAMPLE_RATE)
        with self._lock:
            ref = self._history.span(t_end + slack_s, x.size + self.max_delay + 2 * slack)
        ref = ref.astype(np.float64)
        if float(ref @ ref) < 1e-8:
            return 0.0
        return _best_rho2(ref, x)


class _History:
    """Playback on the wall clock: the newest ``cap`` samples, silence where nothing played."""

    def __init__(self, cap: int) -> None:
        self.buf = np.zeros(max(cap, 1), dtype=np.float32)
        self.pos = 0  # where the next sample goes
        self.end_t = -1e9  # wall time of the newest sample

    def add(self, samples: np.ndarray, t_end: float) -> None:
        start_t = t_end - samples.size / SAMPLE_RATE
        gap = int(round((start_t - self.end_t) * SAMPLE_RATE))
        if gap > _JITTER:  # nothing played in between (or it was not reported): silence
            self._write(np.zeros(min(gap, self.buf.size), dtype=np.float32))
        self._write(samples[-self.buf.size :])
        self.end_t = t_end

    def _write(self, x: np.ndarray) -> None:
        first = min(x.size, self.buf.size - self.pos)
        self.buf[self.pos : self.pos + first] = x[:first]
        self.buf[: x.size - first] = x[first:]
        self.pos = (self.pos + x.size) % self.buf.size

    def span(self, t_end: float, n: int) -> np.ndarray:
        """The ``n`` samples that ended at wall time ``t_end``, zeros where none are kept."""
        out = np.zeros(n, dtype=np.float32)
        ahead = int(round((t_end - self.end_t) * SAMPLE_RATE))  # samples after the newest one
        have = min(n - max(ahead, 0), self.buf.size + min(ahead, 0))
        if have <= 0:
            return out
        newest = min(ahead, 0)  # offset of the span's last kept sample from the newest (<= 0)
        idx = (self.pos - 1 + newest - np.arange(have)[::-1]) % self.buf.size
        out[n - max(ahead, 0) - have : n - max(ahead, 0)] = self.buf[idx]
        return out


def _best_rho2(ref: np.ndarray, x: np.ndarray) -> float:
    """Largest squared normalised correlation of ``x`` with a same-length window of ``ref``.

    Both float64, ``ref.size >= x.size``; FFT cross-correlation, one value per window start.
    """
    n = 1 << int(np.ceil(np.log2(ref.size + x.size)))
    corr = np.fft.irfft(np.fft.rfft(ref, n) * np.conj(np.fft.rfft(x, n)), n)[: ref.size - x.size + 1]
    # energy of each reference window of length len(x)
    c2 = np.concatenate([[0.0], np.cumsum(ref * ref)])
    e_ref = c2[x.size :] - c2[: -x.size]
    rho2 = np.where(e_ref > 1e-9, corr * corr / (np.maximum(e_ref, 1e-9) * float(x @ x)), 0.0)
    return float(np.clip(np.max(rho2), 0.0, 1.0))
