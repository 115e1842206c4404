"""Speech in and out: recognition, synthesis, audio files, and the text a voice says.

* :mod:`~agent.speech.audio` — decode any audio file to 16 kHz mono float32 (:data:`SAMPLE_RATE`),
  write WAVs.
* :mod:`~agent.speech.asr` — faster-whisper with guards against its hallucinations.
* :mod:`~agent.speech.tts` — piper: reply text in, one int16 chunk per sentence out.
* :mod:`~agent.speech.sentences` — the one sentence splitter (synthesis, streaming, the reply cap).
* :mod:`~agent.speech.text` and :mod:`~agent.speech.numbers` — a reply made sayable: markup
  dropped, numbers, times and units read out.
* :mod:`~agent.speech.words` — the one word normaliser every text comparison uses.
"""
