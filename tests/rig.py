"""A test rig around the one pipeline: models loaded once, inputs run through real pipelines.

``AgentRig.listen(paths)`` is what ``bolt-agent listen`` does (file source as fast as possible,
WAV sink); ``AgentRig.text(lines)`` is ``bolt-agent chat``; ``AgentRig.live(backend)`` is
``bolt-agent run`` on fake sound devices (the OS boundary). Each returns the public messages
of its run.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from agent.config import Config, load_config
from agent.events import Event, Shutdown
from agent.pipeline import Bus, FileSource, NullSink, Pipeline, TextSource, WavSink, build_core
from agent.pipeline.driver import TurnDriver
from agent.pipeline.pipeline import live_pipeline, run_to_end
from agent.pipeline.queues import StageQueue
from agent.pipeline.work import WorkTracker
from tools.bench.latency import EventLog


class DriverThread:
    """The real turn driver on a thread of its own, fed as the ASR stage feeds it (``inbox``).

    ``work`` is its work tracker (the test plays the other stages' part); every message it
    publishes is kept in ``seen``. A context manager: started on entry, shut down on exit.
    """

    def __init__(self, core) -> None:
        self.core = core
        self.seen: list[Event] = []
        self._cv = threading.Condition()
        self.work = WorkTracker()
        self.inbox = StageQueue(core.gate)
        self.driver = TurnDriver(
            core, self.inbox, StageQueue(core.gate), core.gate, self._publish, self.work, core.arbiter
        )
        self._thread = threading.Thread(target=self.driver.run, daemon=True)

    def _publish(self, ev: Event) -> None:
        with self._cv:
            self.seen.append(ev)
            self._cv.notify_all()

    def wait_for(self, kind: type, n: int, timeout: float = 120.0) -> list:
        """The messages of ``kind`` once there are ``n`` of them (asserts they come within ``timeout`` s)."""
        with self._cv:
            ok = self._cv.wait_for(lambda: len([e for e in self.seen if isinstance(e, kind)]) >= n, timeout)
            assert ok, self.seen
            return [e for e in self.seen if isinstance(e, kind)]

    def __enter__(self) -> DriverThread:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inbox.put(Shutdown(-1))
        self._thread.join(30)


class Events(list):
    """Messages with a filter by type and turn."""

    def of(self, kind, turn_id=None):
        return [e for e in self if isinstance(e, kind) and (turn_id is None or e.turn_id == turn_id)]


class AgentRig:
    """The shared models and one bus; ``observe`` also sees every public message as it is emitted."""

    def __init__(
        self,
        cfg: Config | None = None,
        out: Path | None = None,
        observe: Callable[[Event], None] | None = None,
        state: bool = False,
    ) -> None:
        self.log = EventLog()
        self.observe = observe
        self.bus = Bus(self._emit)
        # state=True: the config's [state] store, as `run` does (point [state] path at a tmp folder).
        self.core = build_core(cfg or load_config(), self.bus.publish, state=state)
        self.core.warmup()
        self.out = out

    def _emit(self, ev: Event) -> None:
        if self.observe is not None:
            self.observe(ev)
        self.log(ev)

    @property
    def events(self) -> list[Event]:
        return self.log.events

    def _run(self, pipeline: Pipeline, wait_background: float) -> Events:
        start = len(self.log.events)
        assert run_to_end(pipeline, wait_background)
        return Events(self.log.events[start:])

    def listen(self, *paths: Path, wait_background: float = 0.0) -> Events:
        sink = WavSink(self.out) if self.out else NullSink()
        return self._run(
            Pipeline(self.core, self.bus, FileSource(paths, False, self.bus.publish), sink), wait_background
        )

    def text(self, *lines: str, wait_background: float = 0.0) -> Events:
        sink = WavSink(self.out) if self.out else NullSink()
        return self._run(
            Pipeline(
                self.core,
                self.bus,
                TextSource(list(lines), publish=self.bus.publish),
                sink,
                speak=self.out is not None,
            ),
            wait_background,
        )

    @contextlib.contextmanager
    def live(self, backend) -> Iterator[Pipeline]:
        pipeline = live_pipeline(self.core, self.bus, backend)
        pipeline.start()
        try:
            yield pipeline
        finally:
            pipeline.close()

    def close(self) -> None:
        self.core.close()
