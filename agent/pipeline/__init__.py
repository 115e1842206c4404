"""The one pipeline of bolt-agent: every input, every output, the same stages.

Modules, one per stage, wired in :mod:`agent.pipeline.pipeline` (read that first):

* :mod:`~agent.pipeline.core` — the agent's parts built from a config (models, skills,
  robot, camera, conversation, the CPU arbiter), shared by every run.
* :mod:`~agent.pipeline.sources` — microphone, audio files (real time or as fast as
  possible), typed text.
* :mod:`~agent.pipeline.listener` — Silero VAD per 32 ms frame, echo gate.
* :mod:`~agent.pipeline.turn_taking` — endpointing, pause verdicts (end-of-turn), barge-in,
  the model's early start.
* :mod:`~agent.pipeline.asr_stage` — transcripts, echo/stop/wake decisions, new turns.
* :mod:`~agent.pipeline.driver` — the turn driver (model, tools, robot), background
  results and arrival greetings.
* :mod:`~agent.pipeline.speech` — the sentence chunker and TTS.
* :mod:`~agent.pipeline.sinks` — speaker, reply WAV files, nothing.
* :mod:`~agent.pipeline.queues`, :mod:`~agent.pipeline.bus`, :mod:`~agent.pipeline.turnbook`,
  :mod:`~agent.pipeline.work` — stage inboxes with the turn generation, the message bus, the
  per-turn latency trace, the work in flight.

The messages between the stages are the typed dataclasses of :mod:`agent.events`; the
control edges that cross threads are :mod:`agent.control` and :mod:`agent.pipeline.work`.
"""

from agent.pipeline.bus import Bus
from agent.pipeline.core import AgentCore, build_core
from agent.pipeline.pipeline import Pipeline
from agent.pipeline.sinks import NullSink, SpeakerSink, WavSink
from agent.pipeline.sources import FileSource, MicSource, TextSource

__all__ = [
    "AgentCore",
    "Bus",
    "FileSource",
    "MicSource",
    "NullSink",
    "Pipeline",
    "SpeakerSink",
    "TextSource",
    "WavSink",
    "build_core",
]
