"""The one pipeline of bolt-agent: every input, every output, the same stages.

Modules, one per stage, wired in :mod:`agent.pipeline.pipeline` (read that first):

* :mod:`~agent.pipeline.core` — the agent's parts built from a config (models, skills,
  robot, camera, conversation), shared by every run.
* :mod:`~agent.pipeline.sources` — microphone, audio files (real time or as fast as
  possible), typed text.
* :mod:`~agent.pipeline.listener` — VAD, endpointing, echo gate, barge-in.
* :mod:`~agent.pipeline.asr_stage` — transcripts, echo/stop/wake decisions, new turns.
* :mod:`~agent.pipeline.driver` — the turn driver (model, tools, robot), background
  results and arrival greetings.
* :mod:`~agent.pipeline.speech` — the sentence chunker and TTS.
* :mod:`~agent.pipeline.sinks` — speaker, reply WAV files, nothing.
* :mod:`~agent.pipeline.queues`, :mod:`~agent.pipeline.bus`, :mod:`~agent.pipeline.turnbook`
  — stage inboxes with the turn generation, the message bus, the per-turn latency trace.

The messages between the stages are the typed dataclasses of :mod:`agent.events`.
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
