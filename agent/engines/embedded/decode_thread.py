"""One thread for all of a model's llama.cpp decodes.

llama.cpp's CPU backend (built with OpenMP, as llama-cpp-python builds it on Linux) runs each
decode as an OpenMP parallel region, and libgomp keeps one thread team per thread that starts
such a region. A pipeline decodes from several threads (the main thread warms the model up,
the turn thread writes replies, a third thread starts the model early), so several teams stay
alive. libgomp then counts more OpenMP threads than CPUs and cuts its spin-wait to 100 spins
(libgomp manual, ``GOMP_SPINCOUNT``: "If there are more OpenMP threads than available CPUs,
1000 and 100 spins for OMP_WAIT_POLICY being ACTIVE or undefined"), so every barrier of the
graph, hundreds per token, sleeps in the kernel and wakes late.

A decode from a second thread is much slower while the first one's team is alive (measured:
``docs/facts.md``, "This machine class"). Neither ``OMP_WAIT_POLICY=active`` nor
``GOMP_SPINCOUNT`` restored it (active waiting teams then take the cores from each other).
Decoding on one thread keeps one team.

A model decoding with one thread (the text end-of-turn scorer) starts no parallel region and
needs no thread of its own, but using one costs only a thread switch per call (tens of us).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class DecodeThread:
    """Runs calls on one long-lived thread and waits for their results.

    Args:
        name: Thread name (shown by py-spy and in thread dumps).
    """

    def __init__(self, name: str = "llama-decode") -> None:
        self._ident: int | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=self._mark)

    def _mark(self) -> None:
        self._ident = threading.get_ident()

    def run(self, fn: Callable[..., T], *args: object) -> T:
        """Call ``fn(*args)`` on the decode thread and return its result.

        A call made on the decode thread itself runs directly (no deadlock).

        Args:
            fn: The call (``Llama.eval`` with a token list, in
                :class:`agent.engines.embedded.model.ChatModel`).
            *args: Its arguments.

        Returns:
            What ``fn`` returns.

        Raises:
            Whatever ``fn`` raises; RuntimeError after :meth:`close`.
        """
        if threading.get_ident() == self._ident:
            return fn(*args)
        return self._pool.submit(fn, *args).result()

    def close(self) -> None:
        """Let the thread finish its current call and end (later calls raise RuntimeError)."""
        self._pool.shutdown(wait=True)
