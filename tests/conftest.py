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


@pytest.fixture(scope="session", autouse=True)
def _private_state_home(tmp_path_factory):
    """No test, and no ``bolt-agent run`` a test starts, writes the state store under the user's home.

    ``run`` keeps timers, the conversation and the e-stop under ``$XDG_STATE_HOME`` (or a
    systemd ``$STATE_DIRECTORY``). Session-wide first, so module-scoped fixtures that snapshot
    the environment get it too; :func:`_private_state_dir` gives each test a fresh one.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
        mp.delenv("STATE_DIRECTORY", raising=False)
        yield


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path_factory, monkeypatch):
    """A fresh state folder per test: what one test's agent saved is never restored in another."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


@pytest.fixture(scope="module")
def greedy_agent():
    """The agent on the embedded models (``AgentRig``), decoding greedily, one per test module.

    Greedy: a check of what the model and prompts make of a turn, not of one sampler draw (at
    the default 0.2, 2 of 6 seeds told a joke the reply check refuses); ``bench --accuracy``
    measures the default temperature.
    """
    from rig import AgentRig

    from agent.config import load_config

    cfg = load_config()
    rig = AgentRig(cfg.model_copy(update={"llm": cfg.llm.model_copy(update={"temperature": 0.0})}))
    yield rig
    rig.close()
