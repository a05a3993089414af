"""The CUDA test suite: the same checks on the CUDA backend.

It runs either on a real GPU (``python -m pytest tests/cuda``) or under numba's CUDA
simulator, which must be switched on before numba is imported, hence in its own
process: ``NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda`` (what ``.ci/run`` does).
The simulator costs ~0.3 ms per simulated thread: shapes here stay tiny.
Inside an ordinary test run without a GPU, every test in this folder is skipped.
"""
import os

import pytest

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _gpu_present():
    try:
        from numba import cuda
        return cuda.is_available()
    except Exception:  # numba-cuda missing or no driver
        return False


RUN = SIM or _gpu_present()


def pytest_collection_modifyitems(config, items):
    if RUN:
        return
    skip = pytest.mark.skip(reason="CUDA suite: needs a GPU, or NUMBA_ENABLE_CUDASIM=1 in its own process")
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(skip)
