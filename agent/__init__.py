"""bolt-agent: an on-device voice and robot agent built around Nemotron 3.5 Bolt E4B."""
