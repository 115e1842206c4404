"""``python -m tools.bench bench|soak|motion-bench ...`` (what ``bolt-agent bench`` runs in a checkout)."""

from tools.bench.cli import main

main()
