"""Shared pytest fixtures: where the read-only fixtures live, and the packaged models.

Tests that need ``../shared/fixtures`` (or ``$BOLT_FIXTURES``) skip with a reason where it
is absent, so ``make test`` also passes on a fresh clone without it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def find_fixtures() -> Path | None:
    """The fixtures folder, found the way the CLI finds it ($BOLT_FIXTURES, or ../shared/fixtures)."""
    from agent.cli import fixtures_root

    return fixtures_root()


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The shared fixtures folder; skips the test where it is absent."""
    path = find_fixtures()
    if path is None:
        pytest.skip("shared fixtures not found: set $BOLT_FIXTURES or place them at ../shared/fixtures")
    return path
