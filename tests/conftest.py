"""Shared pytest fixtures: where the read-only fixtures live, and the packaged models.

Tests that need ``../shared/fixtures`` (or ``$BOLT_FIXTURES``) skip with a reason where it
is absent, so ``make test`` also passes on a fresh clone without it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def find_fixtures() -> Path | None:
    """The shared fixtures folder: ``$BOLT_FIXTURES``, else ``../shared/fixtures`` beside the repository."""
    env = os.environ.get("BOLT_FIXTURES")
    for cand in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "fixtures"]:
        if cand.is_dir():
            return cand
    return None


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The shared fixtures folder; skips the test where it is absent."""
    path = find_fixtures()
    if path is None:
        pytest.skip("shared fixtures not found: set $BOLT_FIXTURES or place them at ../shared/fixtures")
    return path
