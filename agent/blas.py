"""numpy's BLAS on the calling thread only: its idle worker thread would spin on a core the agent needs.

numpy's wheels bundle OpenBLAS, which starts a worker thread per core at import and, after each
call, keeps it spinning a while before it sleeps (OpenBLAS's ``THREAD_TIMEOUT``). The agent's
numpy work is small (Whisper's and Smart Turn's mel filterbanks, the echo gate's correlations)
and runs on many threads at once, so a second BLAS thread gains nothing there and takes a core
from what does the heavy work (CTranslate2, onnxruntime, llama.cpp, each with its own threads):
measured in docs/facts.md ("numpy's OpenBLAS spins on an idle core").

Only numpy's own library is limited (threadpoolctl, found by its path): a BLAS another library
bundles (CTranslate2's, onnxruntime's) keeps its own thread settings.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def is_numpy_blas(filepath: str) -> bool:
    """Whether the shared library at ``filepath`` is the BLAS numpy's wheel bundles.

    True for a file under ``numpy.libs`` or ``scipy_openblas*`` beside numpy's package; False otherwise.
    """
    import numpy

    site = Path(numpy.__file__).resolve().parent.parent
    path = Path(filepath).resolve()
    return path.is_relative_to(site) and path.parts[len(site.parts)].startswith(("numpy", "scipy_openblas"))


def numpy_blas_controllers(controller: Any) -> list[Any]:
    """The thread-pool controllers of numpy's own BLAS among ``controller``'s; empty when none.

    Args:
        controller: A threadpoolctl ``ThreadpoolController``; its BLAS libraries (``user_api ==
            "blas"``) that :func:`is_numpy_blas` recognizes are returned.
    """
    return [
        lib for lib in controller.lib_controllers if lib.user_api == "blas" and is_numpy_blas(lib.filepath)
    ]


def limit_numpy_blas(threads: int = 1) -> list[str]:
    """Run numpy's bundled BLAS on at most ``threads`` threads, for the rest of the process.

    Args:
        threads: The limit (1: BLAS calls run on the calling thread).

    Returns:
        The paths of the BLAS libraries limited ([] when numpy's could not be found: a numpy
        linked against a system BLAS whose path is outside numpy's folders, or no threadpoolctl
        support for it; the agent then runs as before).
    """
    from threadpoolctl import ThreadpoolController

    limited: list[str] = []
    for lib in numpy_blas_controllers(ThreadpoolController()):
        lib.set_num_threads(threads)
        limited.append(str(Path(lib.filepath).resolve()))
    if not limited:
        log.debug("numpy's BLAS was not found: its threads are left as they are")
    return limited
