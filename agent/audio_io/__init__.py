"""Sound devices: what touches the microphone and the speaker.

* :mod:`~agent.audio_io.devices` — find sound devices by name or index; PortAudio re-initialisation.
* :mod:`~agent.audio_io.mic` — the input stream at the device's own rate and channels, resampled
  to 16 kHz mono with a streaming soxr resampler; its callback only copies into a queue.
* :mod:`~agent.audio_io.speaker` — the output stream; plays queued chunks, can be cleared at once.
* :mod:`~agent.audio_io.supervisor` — device loss, retry with backoff, reopen.
* :mod:`~agent.audio_io.fake` — in-process real-time streams at the OS boundary (benchmark, fault tests).
"""
