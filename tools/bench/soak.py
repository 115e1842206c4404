"""``bolt-agent soak``: drive ``bolt-agent run`` for N turns or H hours and watch what it holds.

The agent runs as a child process (:class:`~tools.bench.soak_child.Child`) on a private
PulseAudio server's null sinks (``tools/pulse.py``), with the live console on a loopback
port and a camera that plays an image folder. Each turn is one of (:data:`PLAN`):

* ``speak`` — a spoken command played into the virtual mic (``paplay``); every fifth is
  preceded by a noise clip;
* ``typed`` — a line typed through the console's HTTP API (``POST /api/say``);
* ``barge`` — a request for a story, then a command played as soon as the robot speaks;
* ``timer`` — "set a timer for two seconds": answered, then the timer's result announced.

A turn is answered when its :class:`~agent.events.Timing` arrives (the robot replied and
played it); its voice-to-voice latency is that event's ``first_played_ms`` (end of the user's
speech → first reply audio handed to the speaker, as in :mod:`tools.bench.latency`). The
child's memory (RSS, PSS), threads and open descriptors are sampled every ``sample_s`` s and
after each turn (:mod:`tools.bench.procstat`). A crash is recorded with its exit status and
the child is restarted (at most ``max_restarts`` times). The child's state store (``[state]``,
in a state folder of the soak's own) survives it, as it would a service restart: the timers
the dead child left pending are read from it, and the restarted child must announce each one
(:func:`~tools.bench.soak_child.restored_timers`; the crash record lists them).
``SoakOptions.after_input`` is the hook for injecting such a crash at a chosen moment. The
report is :mod:`tools.bench.soak_report`'s.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import load_config
from agent.state.keep import state_path
from tools.bench.procstat import ProcSample, read_sample
from tools.bench.soak_child import Child, ChildExited, restored_timers
from tools.bench.soak_set import SoakSet
from tools.pulse import PulseRig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

log = logging.getLogger(__name__)

KINDS = ("speak", "typed", "barge", "timer")
"""The kinds of turn (see the module docstring)."""
PLAN = ("speak", "typed", "speak", "barge", "speak", "speak", "typed", "timer", "speak", "speak")
"""The default kinds of turn, in rotation (turn ``i`` is ``PLAN[i % len(PLAN)]``)."""
READY_TIMEOUT_S = 600.0
"""Longest wait for the child's models to load and its devices to open, s."""
TURN_TIMEOUT_S = 120.0
"""Longest wait for a reply, s (the 135M model on a loaded 2-core machine takes a few s)."""
QUIET_S = 1.0
"""A turn is over once no event has come for this long after its reply, s."""
BREAKDOWN = (
    "endpoint_ms",
    "asr_ms",
    "asr_done_ms",
    "llm_ttft_ms",
    "first_token_ms",
    "first_sentence_ms",
    "first_audio_ms",
    "llm_ms",
    "prompt_tokens",
    "llm_rounds",
    "tokens_per_s",
)
"""Fields of a turn's ``timing`` event each report row keeps (:class:`agent.events.Timing`)."""


@dataclass
class SoakOptions:
    """How long and how the soak runs.

    Attributes:
        turns: Turns to run (0: until ``hours``).
        hours: Hours to run (0: until ``turns``).
        sample_s: Period of the background samples, s.
        max_restarts: Crashes after which the soak stops.
        console: Drive typed turns through the live console (needs starlette and uvicorn).
        env: Extra environment of the child (e.g. ``MALLOC_ARENA_MAX``).
        progress: Called with each turn's row as it ends (the CLI prints a line).
        plan: The kinds of turn in rotation (turn ``i`` is ``plan[i % len(plan)]``), each one
            of :data:`KINDS`.
        after_input: Fault injection: called with the turn number, its kind and the child as
            soon as the turn's input was given (its clip played, its line typed; a barge-in's
            story request), before the soak waits for the answer. The soak waits for it to
            return. A test kills the child here (``child.proc.kill()``) to exercise the crash
            and restart path; None (the default) does nothing.
    """

    turns: int = 150
    hours: float = 0.0
    sample_s: float = 5.0
    max_restarts: int = 3
    console: bool = True
    env: dict[str, str] = field(default_factory=dict)
    progress: Callable[[dict[str, Any]], None] | None = None
    plan: tuple[str, ...] = PLAN
    after_input: Callable[[int, str, Child], None] | None = None


@dataclass
class SoakRun:
    """What a soak gathered (the input of :func:`tools.bench.soak_report.build_report`)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    samples: list[ProcSample] = field(default_factory=list)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    restarts: int = 0
    final_exit: int | None = None
    load_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def soak_config(base: Path, out: Path, camera: Path) -> Path:
    """The child's config: ``base`` with ``[camera] source`` set to ``camera`` when it has none.

    Args:
        base: The robot config (TOML).
        out: Folder for the derived file.
        camera: An image folder or video file.

    Returns:
        ``base`` itself when it has a camera, else ``out/soak.toml``.

    Raises:
        OSError: ``base`` cannot be read or the file cannot be written.
        tomllib.TOMLDecodeError: ``base`` is not TOML.
    """
    text = base.read_text(encoding="utf-8")
    if tomllib.loads(text).get("camera", {}).get("source"):
        return base
    path = out / "soak.toml"
    path.write_text(f"{text}\n\n# added by bolt-agent soak\n[camera]\nsource = {str(camera)!r}\n")
    return path


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for the console)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Soak:
    """One soak: a sound server, the child, the sampler and the turn loop.

    Args:
        config: The child's config (:func:`soak_config`).
        clips: What to play and type.
        out: Folder for the child's log.
        opts: Length and sampling.

    Ctrl-C (``KeyboardInterrupt``) ends the loop early; what was gathered is kept.

    Raises:
        ValueError: ``opts.plan`` is empty or names a kind not in :data:`KINDS`.
        agent.config.ConfigError: ``config`` is not a valid config.
    """

    def __init__(self, config: Path, clips: SoakSet, out: Path, opts: SoakOptions) -> None:
        if not opts.plan or not set(opts.plan) <= set(KINDS):
            raise ValueError(f"soak plan {opts.plan!r}: each turn must be one of {KINDS}")
        self.config, self.clips, self.out, self.opts = config, clips, out, opts
        self.run = SoakRun()
        self.pulse = PulseRig()
        self.child: Child | None = None
        self.t0 = time.monotonic()
        self._halt = threading.Event()
        self._state = load_config(config).state

    def _start_child(self) -> Child:
        port = free_port() if self.opts.console else 0
        # A state folder of its own: the soak neither restores nor overwrites the user's saved conversation.
        env = {**self.pulse.env, "XDG_STATE_HOME": str(self.out / "state"), **self.opts.env}
        env.pop("STATE_DIRECTORY", None)
        state_file = state_path(self._state.path, env) if self._state.enabled else None
        child = Child(self.config, env, port, self.out / "agent.log", state_file)
        t = time.monotonic()
        ready = child.wait(
            lambda e: e["event"] == "device" and e.get("kind") == "output" and e.get("state") == "open",
            0,
            READY_TIMEOUT_S,
        )
        if ready is None:
            child.close()
            raise RuntimeError(f"bolt-agent run did not open its devices in {READY_TIMEOUT_S:.0f} s")
        self.run.load_s = round(time.monotonic() - t, 1)
        return child

    def _sampler(self) -> None:
        while not self._halt.wait(self.opts.sample_s):
            child = self.child
            if child is not None and (s := read_sample(child.pid, self.t0)) is not None:
                self.run.samples.append(s)

    def execute(self) -> SoakRun:
        """Run the soak to its end (turns, hours, a signal or too many crashes).

        Returns:
            What was gathered.

        Raises:
            RuntimeError: the sound server or the first child did not start.
        """
        self.pulse.start()
        sampler = threading.Thread(target=self._sampler, name="soak-sampler", daemon=True)
        try:
            self.child = self._start_child()
            sampler.start()
            self._loop()
        except KeyboardInterrupt:
            self.run.notes.append(f"interrupted after {len(self.run.rows)} turns")
        finally:
            self._halt.set()
            if self.child is not None:
                self.run.final_exit = self.child.close()
            self.pulse.cleanup()
        return self.run

    def _done(self, turn: int) -> bool:
        o = self.opts
        if o.turns and turn >= o.turns:
            return True
        if o.hours and time.monotonic() - self.t0 >= o.hours * 3600:
            return True
        return self.run.restarts > o.max_restarts

    def _loop(self) -> None:
        turn = 0
        plan = self.opts.plan
        while not self._done(turn):
            kind = plan[turn % len(plan)]
            if kind == "typed" and not self.opts.console:
                kind = "speak"
            assert self.child is not None
            child = self.child
            start = child.mark()
            row: dict[str, Any] | None = None
            try:
                row = getattr(self, f"_{kind}")(child, turn, start)
                child.quiet(QUIET_S, 30.0)
            except ChildExited as e:
                # A turn answered before the crash keeps its answer; either way it is marked.
                row = {**(row or {"kind": kind, "answered": False, "latency_ms": -1.0}), "crashed": True}
                self._restart(child, turn, e)
            row.update(turn=turn, t_s=round(time.monotonic() - self.t0, 2))
            sample = read_sample(child.pid, self.t0, turn) if self.child is child else None
            if sample is not None:
                self.run.samples.append(sample)
                row.update(
                    rss_mib=sample.rss_mib,
                    pss_mib=sample.pss_mib,
                    anon_mib=sample.anon_mib,
                    threads=sample.threads,
                    fds=sample.fds,
                    cpu_s=sample.cpu_s,
                    maps=sample.maps,
                )
            heard = [e.get("text", "") for e in child.since(start, "transcript")]
            errors = [e.get("message", "") for e in child.since(start, "error")]
            # Why input gave no turn (echo, hesitation, no speech): the first thing to read on a miss.
            skipped = [e.get("reason", "") for e in child.since(start, "skipped")]
            row.update(heard=heard, skipped=skipped, errors=len(errors), error_messages=errors)
            tidied = child.take_tidied()  # between the previous turn and this one's end
            row.update(
                tidy_dropped=sum(e.get("dropped", 0) for e in tidied),
                tidy_tokens=sum(e.get("evaluated", 0) for e in tidied),
                tidy_stopped=sum(not e.get("complete", True) for e in tidied),
            )
            self.run.rows.append(row)
            log.info("soak turn %d %s: %s", turn, kind, row)
            if self.opts.progress is not None:
                self.opts.progress(row)
            child.forget(child.mark())
            turn += 1
        if self.run.restarts > self.opts.max_restarts:
            self.run.notes.append(f"stopped after {self.run.restarts} crashes")

    def _restart(self, child: Child, turn: int, e: ChildExited) -> None:
        """Record a crash and start a new child (unless past ``max_restarts``).

        The new child must announce the timers the dead one left in the state store.
        """
        log.error("soak: the agent exited with %s at turn %d", e.code, turn)
        child.close()
        pending = child.pending_timers()  # the dead child's store, as the new one will find it
        crash: dict[str, Any] = {
            "turn": turn,
            "exit_code": e.code,
            "stderr": e.tail[-1000:],
            "pending_timers": len(pending),
        }
        self.run.crashes.append(crash)
        self.run.restarts += 1
        self.child = None
        if self.run.restarts <= self.opts.max_restarts:
            self.child = self._start_child()
            crash["restored_timers"] = restored_timers(self.child, pending, TURN_TIMEOUT_S)
            self.child.quiet(QUIET_S, 30.0)

    def _given(self, child: Child, turn: int, kind: str) -> None:
        """The turn's input was given: run the fault-injection hook, if any."""
        if self.opts.after_input is not None:
            self.opts.after_input(turn, kind, child)

    # --- the kinds of turn ----------------------------------------------------------------------

    def _answer(self, child: Child, start: int, typed: bool = False) -> dict[str, Any] | None:
        """The timing of the turn a command became: the first turn heard after ``start``.

        Matching by the transcript's turn keeps a late turn (a timer's announcement, a
        command split in two) from being taken for this command's answer.
        """

        def mine(e: dict[str, Any]) -> bool:
            if e["event"] != "timing" or (e.get("endpoint_rule") == "typed") != typed:
                return False
            return any(t["turn_id"] == e["turn_id"] for t in child.since(start, "transcript"))

        return child.wait(mine, start, TURN_TIMEOUT_S)

    @staticmethod
    def _row(kind: str, text: str, timing: dict[str, Any] | None, **more: Any) -> dict[str, Any]:
        return {
            "kind": kind,
            "text": text,
            "answered": timing is not None,
            "latency_ms": float(timing.get("first_played_ms", -1.0)) if timing else -1.0,
            # End of the user's speech -> whole reply played: with the clip and QUIET_S, a turn's length.
            "turn_ms": float(timing.get("turn_ms", -1.0)) if timing else -1.0,
            "turn_id": timing["turn_id"] if timing else -1,
            # Where a slow turn's time went: speech end -> endpoint -> transcript -> first token.
            **{k: timing.get(k, -1) if timing else -1 for k in BREAKDOWN},
            **more,
        }

    def _speak(self, child: Child, turn: int, start: int) -> dict[str, Any]:
        cmd = self.clips.commands[turn % len(self.clips.commands)]
        noise = turn % 5 == 4
        if noise:
            self.pulse.play(self.clips.noise)
        self.pulse.play(cmd.wav)
        self._given(child, turn, "speak")
        return self._row(
            "speak",
            cmd.text,
            self._answer(child, start),
            noise=noise,
        )

    def _typed(self, child: Child, turn: int, start: int) -> dict[str, Any]:
        text = self.clips.typed[turn % len(self.clips.typed)]
        status = child.say(text)
        self._given(child, turn, "typed")
        timing = self._answer(child, start, typed=True) if status == 200 else None
        return self._row("typed", text, timing, http_status=status)

    def _barge(self, child: Child, turn: int, start: int) -> dict[str, Any]:
        cmd = self.clips.commands[turn % len(self.clips.commands)]
        self.pulse.play(self.clips.story.wav)
        self._given(child, turn, "barge")
        speaking = child.wait(lambda e: e["event"] == "speaking", start, TURN_TIMEOUT_S)
        if speaking is None:
            return self._row("barge", cmd.text, None, barge_in=False)
        after = child.mark()  # the command's turn is heard after the story's reply started
        self.pulse.play(cmd.wav)
        timing = self._answer(child, after)
        return self._row("barge", cmd.text, timing, barge_in=bool(child.since(start, "barge_in")))

    def _timer(self, child: Child, turn: int, start: int) -> dict[str, Any]:
        self.pulse.play(self.clips.timer.wav)
        self._given(child, turn, "timer")
        timing = self._answer(child, start)
        set_it = any(e.get("name") == "set_timer" for e in child.since(start, "tool_call"))
        done = child.wait(lambda e: e["event"] == "background_done", start, 60.0) if set_it else None
        if done is not None:  # the announcement is a turn of its own: wait until it is played
            child.wait(
                lambda e: e["event"] == "timing" and e["turn_id"] >= done["turn_id"], start, TURN_TIMEOUT_S
            )
        fired = done is not None and bool(done.get("ok"))
        return self._row("timer", self.clips.timer.text, timing, timer_set=set_it, timer_fired=fired)


def run_soak(config: Path, clips: SoakSet, out: Path, opts: SoakOptions) -> SoakRun:
    """Run one soak (see the module docstring); ``out`` receives ``agent.log``.

    Raises:
        RuntimeError: PulseAudio or the agent did not start.
    """
    return Soak(config, clips, out, opts).execute()
