"""Packaged configs (``desktop.toml``) and the set-up script."""
