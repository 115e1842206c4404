"""Audio devices and the live-mode building blocks the pipeline's stages use.

The pipeline itself (stages, wiring) is :mod:`agent.pipeline`; this package holds what
touches sound devices or decides about live audio:

* :mod:`~agent.live.devices` — find sound devices by name or index; PortAudio re-initialisation.
* :mod:`~agent.live.mic` — the input stream at the device's own rate and channels, resampled
  to 16 kHz mono with a streaming soxr resampler; its callback only copies into a queue.
* :mod:`~agent.live.speaker` — the output stream; plays queued chunks, can be cleared at once.
* :mod:`~agent.live.supervisor` — device loss, retry with backoff, reopen.
* :mod:`~agent.live.vad_stream` — Silero VAD frame by frame (512 samples = 32 ms) with
  pre-roll, endpointing and a longest utterance.
* :mod:`~agent.live.echo` — decides whether mic audio is the user or the robot's own voice.
* :mod:`~agent.live.turns` — wake phrase, stop phrases and echo-transcript matching.
* :mod:`~agent.live.fake` — in-process real-time fake streams (benchmark, fault tests).
"""
