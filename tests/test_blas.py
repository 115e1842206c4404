"""numpy's BLAS on one thread (agent/blas.py): numpy's own library is limited, no other is."""

from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController

from agent.blas import limit_numpy_blas
from agent.blas import numpy_blas_controllers as numpy_blas


def test_numpy_blas_is_limited_and_other_thread_pools_keep_their_settings():
    import ctranslate2  # noqa: F401 (loads CTranslate2's own OpenMP runtime)
    import cv2  # noqa: F401 (OpenCV's wheel bundles an OpenBLAS of its own)

    before = ThreadpoolController()
    mine = numpy_blas(before)
    assert mine, "the test environment's numpy bundles its BLAS (numpy.libs)"
    start = [lib.num_threads for lib in mine]
    others = {lib.filepath: lib.num_threads for lib in before.lib_controllers if lib not in mine}
    assert any("ctranslate2" in path for path in others), others
    for lib in mine:
        lib.set_num_threads(2)
    try:
        limited = limit_numpy_blas()
        after = ThreadpoolController()
        assert sorted(limited) == sorted(str(Path(lib.filepath).resolve()) for lib in mine)
        assert [lib.num_threads for lib in numpy_blas(after)] == [1] * len(mine)
        assert {
            lib.filepath: lib.num_threads for lib in after.lib_controllers if lib.filepath in others
        } == others
        a = np.random.default_rng(0).standard_normal((200, 80))
        assert np.allclose(a.T @ a, (a.T @ a).T)  # BLAS still works on one thread
    finally:
        for lib, n in zip(mine, start, strict=True):
            lib.set_num_threads(n)
