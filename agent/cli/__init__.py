"""The ``bolt-agent`` command line (:mod:`agent.cli.main` assembles it; ``main`` is the entry point)."""

from agent.cli.main import app, main

__all__ = ["app", "main"]
