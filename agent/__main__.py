"""``python -m agent`` runs the bolt-agent CLI."""

from agent.cli.main import main

main()
