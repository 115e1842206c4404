"""Print events for people (one readable line per step) or machines (JSON Lines)."""

from __future__ import annotations

import json
import sys
import threading
from typing import TextIO

from agent.events import (
    BackgroundDone,
    Error,
    Event,
    InputStarted,
    Notice,
    PlaybackStarted,
    Ready,
    Reply,
    RobotCommand,
    RobotParked,
    Skipped,
    Spoken,
    Timing,
    ToolCall,
    ToolResult,
    Transcript,
    Utterance,
)


class EventPrinter:
    """Callable event sink for the CLI.

    In JSON mode every event is one line on stdout (whole lines even when events come from
    several threads). In text mode joint commands are
    summarized per turn (the player sends 50 per second) and printed with the timing line.

    Args:
        json_mode: JSON Lines instead of text.
        out: Stream for events (stdout); notes and errors in text mode also go here.
    """

    def __init__(self, json_mode: bool = False, out: TextIO | None = None) -> None:
        self.json_mode = json_mode
        self.out = out or sys.stdout
        self.errors = 0
        self._robot: dict[str, tuple[float, float, int]] = {}
        self._lock = threading.Lock()

    def _line(self, text: str) -> None:
        with self._lock:  # robot events arrive from the animation thread
            self.out.write(text + "\n")
            self.out.flush()

    def note(self, text: str) -> None:
        """A human note (suppressed in JSON mode so stdout stays pure JSON Lines)."""
        if not self.json_mode:
            self._line(text)

    def __call__(self, ev: Event) -> None:
        """Print one event."""
        if isinstance(ev, Error):
            self.errors += 1
        if self.json_mode:
            self._line(json.dumps(ev.to_json(), default=str))
            return
        if isinstance(ev, RobotCommand):
            lo, hi, n = self._robot.get(ev.joint, (ev.deg, ev.deg, 0))
            self._robot[ev.joint] = (min(lo, ev.deg), max(hi, ev.deg), n + 1)
        elif isinstance(ev, Ready):
            self._line(f"ready (models loaded and warmed in {ev.load_ms / 1000:.1f} s)")
        elif isinstance(ev, Transcript):
            self._line(f"[turn {ev.turn_id}] you said: {ev.text}")
        elif isinstance(ev, ToolCall):
            self._line(f"  tool call  {ev.tool}({json.dumps(ev.arguments)})")
        elif isinstance(ev, ToolResult):
            self._line(f"  tool {'result' if ev.ok else 'ERROR '} {ev.tool}: {ev.result}")
        elif isinstance(ev, Reply):
            self._line(
                f"  robot says: {ev.text or '(nothing)'}"
                + (f"\n  reply audio: {ev.audio}" if ev.audio else "")
            )
        elif isinstance(ev, Timing):
            if self._robot:
                moves = ", ".join(
                    f"{j} {lo:.0f}..{hi:.0f} deg ({n} cmds)" for j, (lo, hi, n) in self._robot.items()
                )
                self._line(f"  robot moved: {moves}")
                self._robot.clear()
            self._line(
                f"  timing: asr {ev.asr_ms:.0f} ms | llm first token {ev.llm_ttft_ms:.0f} ms | llm "
                f"{ev.llm_ms:.0f} ms ({ev.prompt_tokens} prompt tokens) | tts first audio "
                f"{ev.tts_first_audio_ms:.0f} ms | turn {ev.turn_ms:.0f} ms"
            )
        elif isinstance(ev, BackgroundDone):
            self._line(
                f"[turn {ev.turn_id}] background {ev.tool} {'finished' if ev.ok else 'FAILED'}: {ev.result}"
            )
        elif isinstance(ev, (Utterance, Spoken, PlaybackStarted)):
            return  # per-sentence detail: JSON mode only
        elif isinstance(ev, RobotParked):
            self._line(f"robot parked at neutral, torque {'ON' if ev.torque else 'off'}")
        elif isinstance(ev, InputStarted):
            self._line(f"\n>>> playing {ev.source}")
        elif isinstance(ev, Notice):
            self._line(f"note: {ev.message}")
        elif isinstance(ev, Skipped):
            self._line(f"  skipped: {ev.reason}")
        elif isinstance(ev, Error):
            self._line(f"  problem: {ev.message}")
        else:
            self._line(f"  {ev.name}: {ev.to_json()}")
