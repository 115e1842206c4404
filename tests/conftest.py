"""Shared pytest fixtures: where the test data lives, the packaged models, and missing data under CI.

The data is in the repository (``tests/data/``, its sources and licences in its README);
``$BOLT_FIXTURES`` names another folder of the same layout. The Gemma 4 vocabulary is too large
to keep there: ``launch/setup.sh test`` takes it from llama-cpp-python's source archive into
:data:`CACHE_DATA`. A test whose data is absent skips with a reason that starts with
:data:`DATA_MISSING`; when ``$CI`` or ``BOLT_STRICT_DATA=1`` is set (``make test``, ``.ci/run``)
such a skip is reported as a failure (:func:`pytest_runtest_makereport`), so a green run tested
everything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
"""The test data kept in the repository."""
CACHE_DATA = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bolt-agent" / "test-data"
"""Where ``launch/setup.sh test`` puts the test data fetched at set-up (the Gemma 4 vocabulary)."""
GEMMA4_VOCAB = "ggml-vocab-gemma-4.gguf"
DATA_MISSING = "test data missing"
"""How every skip for absent data begins (a failure under CI or ``BOLT_STRICT_DATA=1``)."""


def find_fixtures() -> Path | None:
    """The test data folder: ``$BOLT_FIXTURES`` when it is a folder, else ``tests/data``."""
    env = os.environ.get("BOLT_FIXTURES")
    for cand in ([Path(env)] if env else []) + [DATA]:
        if cand.is_dir():
            return cand
    return None


def find_gemma4_vocab() -> Path | None:
    """``ggml-vocab-gemma-4.gguf``: in the data folder's ``gguf/``, else where set-up put it."""
    data = find_fixtures()
    for cand in ([data / "gguf" / GEMMA4_VOCAB] if data else []) + [CACHE_DATA / GEMMA4_VOCAB]:
        if cand.is_file():
            return cand
    return None


def missing_data(what: str) -> NoReturn:
    """Skip the test for absent data (a failure under CI or ``BOLT_STRICT_DATA=1``)."""
    pytest.skip(f"{DATA_MISSING}: {what}")


def strict_data(env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether a skip for missing data fails the run: ``$CI`` set (not 0/false) or ``BOLT_STRICT_DATA=1``."""
    ci = env.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return ci or env.get("BOLT_STRICT_DATA") == "1"


def skip_reason(report: pytest.TestReport) -> str:
    """The reason of a skipped test's report (``""`` when it has none)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Under CI or ``BOLT_STRICT_DATA=1``, a skip for missing data is a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and strict_data():
        reason = skip_reason(report)
        if reason.startswith(DATA_MISSING):
            report.outcome = "failed"
            report.longrepr = (
                f"{reason}\n(a skip for missing data fails when CI or BOLT_STRICT_DATA=1 is set)"
            )


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The test data folder (``tests/data`` or ``$BOLT_FIXTURES``)."""
    path = find_fixtures()
    if path is None:
        missing_data(f"$BOLT_FIXTURES={os.environ.get('BOLT_FIXTURES')} is not a folder and {DATA} is gone")
    return path


@pytest.fixture(scope="session")
def gemma4_vocab() -> Path:
    """Gemma 4's vocabulary-only GGUF (tokenizer and chat template, no weights)."""
    path = find_gemma4_vocab()
    if path is None:
        missing_data(
            f"{GEMMA4_VOCAB} (launch/setup.sh test takes it from llama-cpp-python's source archive "
            f"into {CACHE_DATA}; or put it in $BOLT_FIXTURES/gguf/)"
        )
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
def pulse():
    """A PulseAudio server of the test's own with null sinks (``pulse.PulseRig``), one per test module.

    Skips when PulseAudio is not installed (a failure under ``BOLT_STRICT_DATA``).
    """
    from tools.pulse import PulseRig, missing

    why = missing()
    if why:
        pytest.skip(why)
    rig = PulseRig()
    rig.start()
    yield rig
    rig.cleanup()


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
