"""``python -m agent`` runs the bolt-agent CLI."""

from agent.cli import main

main()
