"""Live conversation, assembled: mic → VAD → ASR → LLM → chunker → TTS → speaker, with barge-in.

Threads (asyncio is not needed: every stage is a blocking model call or a device):

* PortAudio's callbacks (edges): copy audio in / out, nothing else (:mod:`.mic`, :mod:`.speaker`).
* **listener** (:meth:`LiveAgent.run`, the caller's thread): reads 16 kHz mic blocks, runs
  Silero per 32 ms frame, the echo guard and the endpointer, decides barge-in, drains the
  speaker's reports, and supervises the devices (a stalled mic = sound server gone: close,
  re-initialise PortAudio, reopen with backoff).
* **asr** worker: transcribes an utterance, then drops echoes and unaddressed speech, runs
  the stop fast path, or starts a turn.
* **llm** worker: one :meth:`Conversation.turn` at a time; its text deltas go through the
  :class:`~.chunker.SentenceChunker` and each piece is queued for synthesis at once; tool
  calls run inside the turn as soon as they are complete. History edits (barge-in cuts)
  also run here, so they never race a generation.
* **tts** worker: synthesizes queued pieces sentence by sentence and queues the audio.

Interruption = a new turn number + cancellation: the turn's ``cancel`` event stops the model
after the current token and the synthesizer before the next sentence, the speaker is
cleared at once, and the assistant message keeps only the pieces whose audio was played to
the end (:class:`~agent.events.HistoryCut`). Times are ``time.perf_counter()`` seconds;
every event carries the turn id.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from agent.events import (
    BargeIn,
    Error,
    HistoryCut,
    Reply,
    Skipped,
    Spoken,
    ToolCall,
    ToolResult,
    Transcript,
    Utterance,
)
from agent.live.chunker import SentenceChunker
from agent.live.devices import SoundBackend
from agent.live.echo import EchoGate
from agent.live.speaker import PlayItem
from agent.live.supervisor import Devices
from agent.live.turns import Attention, LiveTurn, is_echo, normalize, stop_command, timing_event
from agent.live.vad_stream import FRAME, RATE, Endpointer, SileroFrameVAD
from hardware.speech_motion import speak_along

log = logging.getLogger(__name__)
SORRY = "Sorry, I had a problem thinking about that."
ZERO_WARN_S = 10.0
"""A mic that delivers exact zeros this long gets one warning, s."""


class LiveAgent:
    """Continuous listening and speaking around a warmed :class:`~agent.pipeline.VoiceAgent`.

    Args:
        agent: Models, conversation, skills, robot (``agent.cfg`` holds ``[audio]``, ``[vad]``, ``[live]``).
        emit: Receives every event (called from several threads).
        backend: Sound devices (sounddevice, or fake streams in the benchmark).

    """

    def __init__(self, agent: Any, emit: Any, backend: SoundBackend) -> None:
        self.agent, self.emit, self.backend = agent, emit, backend
        self.cfg = agent.cfg
        self.live = agent.cfg.live
        self.devices = Devices(self.cfg.audio, backend, emit)
        self.mic, self.speaker = self.devices.mic, self.devices.speaker
        self.vad = SileroFrameVAD()
        self.vad(np.zeros(FRAME, dtype=np.float32))  # warm the ONNX session
        self.vad.reset()
        self.endpointer = Endpointer(self.cfg.vad)
        self.echo = EchoGate(self.live.echo_max_delay_ms, self.live.echo_tail_ms)
        self.attention = Attention(self.live)
        self._asr_pool = ThreadPoolExecutor(1, thread_name_prefix="asr")
        self._llm_pool = ThreadPoolExecutor(1, thread_name_prefix="llm")
        self._tts_q: queue.Queue[tuple[LiveTurn | None, str | None]] = queue.Queue()
        self._tts_thread = threading.Thread(target=self._tts_loop, name="tts", daemon=True)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._drain_lock = threading.Lock()
        self._current: LiveTurn | None = None
        self._turns: dict[int, LiveTurn] = {}
        self._recent_speech: collections.deque[tuple[float, str]] = collections.deque(maxlen=50)

    def open_devices(self) -> None:
        """Open the mic (required) and the speaker (optional: failures are reported and retried).

        Raises:
            DeviceError: the input device is missing or refuses to open.
        """
        self.devices.open()

    # --- the listener ----------------------------------------------------------------------
    def stop(self) -> None:
        """Ask :meth:`run` to return (safe from any thread or a signal handler)."""
        self._stop.set()

    def run(self) -> None:
        """Listen until :meth:`stop`; devices must have been opened (:meth:`open_devices`)."""
        self._tts_thread.start()
        buf = np.zeros(0, dtype=np.float32)
        recent = np.zeros(4096, dtype=np.float32)
        n_total, last_audio, zero_since, zero_warned = 0, time.perf_counter(), None, False
        while not self._stop.is_set():
            self._drain_speaker()
            if not self.mic.is_open:
                if self.devices.recover():
                    self.endpointer.reset()
                    self.vad.reset()
                last_audio, buf = time.perf_counter(), np.zeros(0, dtype=np.float32)
                continue
            got = self.mic.read(0.05)
            now = time.perf_counter()
            if got is None:
                if now - last_audio > self.cfg.audio.stall_s:
                    self.interrupt("device")
                    self.devices.lost(f"no audio from {self.mic.name!r} for {now - last_audio:.1f} s")
                continue
            samples, t_end = got
            last_audio = now
            self.devices.retry_speaker(now)
            if samples.size and not np.any(samples):
                zero_since = zero_since or now
                if not zero_warned and now - zero_since > ZERO_WARN_S:
                    zero_warned = True
                    self.emit(Error(-1, f"microphone {self.mic.name!r} delivers only digital silence (muted or "
                                        f"wrong device?); still listening"))
            elif samples.size:
                zero_since = None  # warned once per run: a null sink is all zeros between sounds
            buf = np.concatenate([buf, samples])
            while buf.size >= FRAME:
                frame, buf = buf[:FRAME], buf[FRAME:]
                n_total += FRAME
                recent = np.concatenate([recent[FRAME:], frame])
                self._frame(frame, recent, n_total, t_end - buf.size / RATE)
        self.close()

    def _frame(self, frame: np.ndarray, recent: np.ndarray, n_total: int, t: float) -> None:
        prob = self.vad(frame)
        thr = self.cfg.vad.threshold
        if self.live.echo_guard and prob >= thr - 0.15 and self.echo.active(t):
            if self.echo.user_share(recent, t) < self.live.echo_min_unexplained:
                prob = 0.0  # the robot hearing itself
        upd = self.endpointer.feed(frame, prob)
        cur = self._current
        if self.live.barge_in and cur is not None and not cur.interrupted and self.speaker.busy \
                and upd.speaking and prob >= thr:
            cur.marks["_user_run"] = cur.marks.get("_user_run", 0.0) + FRAME * 1000 / RATE
            if cur.marks["_user_run"] >= self.live.barge_in_ms:
                self.interrupt("speech")
        elif cur is not None and prob < thr - 0.15:
            cur.marks["_user_run"] = 0.0
        if upd.ended and upd.audio is not None:
            t_end = t - (n_total - upd.end_sample) / RATE
            self._asr_pool.submit(self._guard, self._on_utterance, upd.audio, t_end, time.perf_counter())

    def _guard(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as e:  # a failing stage reports and the agent keeps listening
            log.exception("live stage failed")
            self.emit(Error(-1, f"{fn.__name__} failed: {e.__class__.__name__}: {e}; still listening"))

    # --- asr worker ------------------------------------------------------------------------
    def _on_utterance(self, audio: np.ndarray, t_speech_end: float, t_endpoint: float) -> None:
        if np.mean(np.abs(audio) >= 0.99) > 0.01:
            log.warning("input is clipping (%.1f%% of samples at full scale); lower the mic gain",
                        100 * np.mean(np.abs(audio) >= 0.99))
        res = self.agent.asr.transcribe(audio)
        t_asr = time.perf_counter()
        self.emit(Utterance(-1, self.mic.name, 0.0, round(audio.size / RATE * 1000, 1)))
        if not res.text:
            self.emit(Skipped(-1, f"live: {res.dropped}", self.mic.name))
            return
        recent = [s for t, s in self._recent_speech if t_asr - t < 30.0]
        if self.live.echo_guard and is_echo(res.text, recent, self.live.echo_text_score):
            self.emit(Skipped(-1, f"echo of the robot's own speech: {res.text!r}", self.mic.name))
            return
        if stop_command(res.text, self.live.stop_phrases, self.live.stop_max_words):
            self.interrupt("stop")
            turn_id = self.agent.clock.next()
            self.emit(Transcript(turn_id, res.text))
            call_id = f"t{turn_id}stop"
            self.emit(ToolCall(turn_id, "stop", {}, call_id))
            outcome = self.agent.registry.call("stop", {}, self.agent.ctx)
            self.emit(ToolResult(turn_id, "stop", outcome.ok, outcome.result, call_id))
            return
        text = self.attention.accept(res.text)
        if text is None:
            self.emit(Skipped(-1, f"not addressed to the robot (no wake phrase): {res.text!r}", self.mic.name))
            return
        self.interrupt("new_turn")
        turn = LiveTurn(self.agent.clock.next(), text, t_speech_end, t_endpoint, t_asr, res.duration_ms)
        with self._lock:
            self._current = turn
            self._turns[turn.id] = turn
            for old in [k for k in self._turns if k < turn.id - 8]:
                del self._turns[old]
        self._llm_pool.submit(self._guard, self._run_turn, turn)

    # --- llm worker ------------------------------------------------------------------------
    def _run_turn(self, turn: LiveTurn) -> None:
        if turn.cancel.is_set():
            return
        self.emit(Transcript(turn.id, turn.text))
        chunker = SentenceChunker(self.live.clause_chars)

        def on_text(delta: str) -> None:
            for piece in chunker.feed(delta):
                self._piece(turn, piece)

        turn.mark("llm_start")
        try:
            result = self.agent.conversation.turn(turn.text, turn.id, state=self.agent.state_line(),
                                                  on_text=on_text, cancel=turn.cancel)
        except Exception as e:  # the conversation guards rounds; this is the last line
            log.exception("turn %d failed", turn.id)
            self.emit(Error(turn.id, f"model error: {e}"))
            result = None
            chunker.flush()
            self._piece(turn, SORRY)
        for piece in chunker.flush():
            self._piece(turn, piece)
        self._tts_q.put((turn, None))
        if result is not None:
            for problem in result.problems:
                self.emit(Error(turn.id, problem))
            turn.mark("first_token", turn.marks["llm_start"] + result.ttft_ms / 1000)
        turn.result = result
        self.emit(Reply(turn.id, result.text if result else SORRY, None))
        with self._lock:
            turn.generated = True
            cut = turn.interrupted
        if cut:
            self._cut_history(turn)
        self._maybe_timing(turn)

    def _piece(self, turn: LiveTurn, piece: str) -> None:
        if turn.cancel.is_set():
            return
        turn.mark("first_sentence")
        turn.pieces.append(piece)
        self._tts_q.put((turn, piece))

    def _cut_history(self, turn: LiveTurn) -> None:
        hist = self.agent.conversation.history
        full = next((m["content"] for m in reversed(hist) if m["role"] == "assistant"), "") or ""
        kept = " ".join(p for p in turn.heard if normalize(p) and normalize(p) in normalize(full))
        self.agent.conversation.truncate_last_reply(kept)
        dropped = " ".join(p for p in turn.pieces if p not in turn.heard)
        self.emit(HistoryCut(turn.id, kept, dropped))

    # --- tts worker ------------------------------------------------------------------------
    def _tts_loop(self) -> None:
        while True:
            turn, piece = self._tts_q.get()
            if turn is None:
                return
            if piece is None:
                if not self.speaker.enqueue(PlayItem(turn.id, "", end_of_turn=True)):
                    self._played(turn)
                continue
            try:
                self._synthesize(turn, piece)
            except Exception as e:  # one bad piece must not silence the rest
                log.exception("turn %d: TTS failed on %r", turn.id, piece)
                self.emit(Error(turn.id, f"speech synthesis failed on {piece!r}: {e}; continuing"))

    def _synthesize(self, turn: LiveTurn, piece: str) -> None:
        prev = None
        t0 = time.perf_counter()
        for chunk in self.agent.tts.synthesize(piece):  # lazy: one sentence per step
            turn.tts_ms += (time.perf_counter() - t0) * 1000
            if turn.cancel.is_set():
                return
            turn.mark("first_audio")
            if prev is not None:
                self.speaker.enqueue(PlayItem(turn.id, prev.text, piece, False), prev.audio, prev.sample_rate)
            prev = chunk
            t0 = time.perf_counter()
        if prev is not None and not turn.cancel.is_set():
            self.speaker.enqueue(PlayItem(turn.id, prev.text, piece, True), prev.audio, prev.sample_rate)

    # --- speaker reports -------------------------------------------------------------------
    def _drain_speaker(self) -> None:
        with self._drain_lock:
            while True:
                try:
                    r = self.speaker.reports.get_nowait()
                except queue.Empty:
                    return
                turn = self._turns.get(r.item.turn_id) if r.item is not None else None
                if r.kind == "block" and r.block is not None:
                    if self.devices.ref_resampler is not None:
                        self.echo.add_reference(self.devices.ref_resampler.resample_chunk(r.block), r.t)
                elif r.kind == "started" and r.item is not None:
                    self._recent_speech.append((r.t, r.item.text))
                    if r.item.audio is not None:  # head motion driven by the speech envelope
                        rc = self.agent.cfg.robot
                        pcm = (np.clip(r.item.audio, -1.0, 1.0) * 32767).astype(np.int16)
                        speak_along(self.agent.robot, pcm, self.speaker.rate, enabled=rc.speech_motion,
                                    max_deg=rc.speech_motion_deg, joint=rc.speech_motion_joint)
                    if turn is not None:
                        turn.mark("first_played", r.t)
                elif r.kind == "finished" and r.item is not None:
                    if r.item.end_of_turn:
                        if turn is not None:
                            self._played(turn)
                        continue
                    self.emit(Spoken(r.item.turn_id, r.item.text, True))
                    if turn is not None and r.item.last_of_piece:
                        turn.heard.append(r.item.piece)

    def _played(self, turn: LiveTurn) -> None:
        with self._lock:
            turn.played = True
            if self._current is turn:
                self._current = None
        self.attention.replied()
        self._maybe_timing(turn)

    def interrupt(self, reason: str) -> None:
        """Stop the current turn: cancel generation and synthesis, silence the speaker, cut history.

        Args:
            reason: ``speech`` (barge-in), ``stop`` (stop phrase), ``new_turn`` or ``device``.

        """
        with self._lock:
            turn = self._current
            if turn is None or turn.interrupted or turn.played:
                return
            turn.interrupted = True
            turn.cancel.set()
            self._current = None
        t0 = time.perf_counter()
        dropped = self.speaker.clear()
        stop_ms = (time.perf_counter() - t0) * 1000
        self._drain_speaker()
        self.emit(BargeIn(turn.id, reason, round(stop_ms, 2)))
        for it in dropped:
            if it.pos > 0 and it.audio is not None:
                self.emit(Spoken(turn.id, it.text, False))
        with self._lock:
            cut = turn.generated
        if cut:
            self._llm_pool.submit(self._guard, self._cut_history, turn)
        self._maybe_timing(turn)

    def _maybe_timing(self, turn: LiveTurn) -> None:
        with self._lock:
            if turn.timed or not turn.generated or not (turn.played or turn.interrupted):
                return
            turn.timed = True
        self.emit(timing_event(turn))

    def close(self) -> None:
        """Cancel the current turn, stop the workers and close the devices."""
        self._stop.set()
        self.interrupt("device")
        self._tts_q.put((None, None))
        self._asr_pool.shutdown(wait=False, cancel_futures=True)
        self._llm_pool.shutdown(wait=False, cancel_futures=True)
        self.devices.close()
