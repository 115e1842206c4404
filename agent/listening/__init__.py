"""Listening: deciding about incoming speech, frame by frame and turn by turn.

* :mod:`~agent.listening.vad` — Silero VAD one 32 ms frame at a time, and the endpointer
  (pre-roll, pauses, the end of an utterance, the longest utterance).
* :mod:`~agent.listening.echo` — is mic audio the user, or the robot's own voice coming back.
* :mod:`~agent.listening.end_of_turn` — the end-of-turn judgement of a pause (audio and words).
* :mod:`~agent.listening.smart_turn` — Smart Turn v3.2, the audio end-of-turn model.
* :mod:`~agent.listening.turns` — decisions on a transcript: echo, stop phrases, wake phrase.

The pipeline's stages that use them are in :mod:`agent.pipeline` (``listener``, ``turn_taking``).
"""
