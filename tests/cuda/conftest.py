"""The CUDA test suite: the same checks on the CUDA backend.

It runs either on a real GPU (``python -m pytest tests/cuda``) or under numba's CUDA
simulator, which must be switched on before numba is imported, hence in its own
process: ``NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda`` (what ``.ci/run`` does).
The simulator costs ~0.3 ms per simulated thread: shapes here stay tiny.
Inside an ordinary test run without a GPU, every test in this folder is skipped.
"""
import os
import sys

import pytest

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")

def _lock_shared_allocation():
    """Make the simulator's ``cuda.shared.array`` safe under a short switch interval.

    numba-cuda 0.30's ``FakeCUDAShared.array`` looks the block's array up by the calling
    line and creates it when missing, without a lock. At the default 5 ms switch interval
    the first thread always finished that before the others ran; at 50 us two threads of
    a block sometimes both create one, so they reduce in different "shared" arrays
    (seen: NaN in the std gradient through the row-reduce kernel, 1 run in 3). The same
    lookup, under a lock, keyed like the original by (file, line) of the caller."""
    import threading

    import numpy as np
    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    original = kernelapi.FakeCUDAShared.array
    lock = threading.Lock()

    def array(self, shape, dtype, alignment=None):
        if alignment is not None or shape == 0:   # errors, and dynamic shared memory: no lookup
            return original(self, shape, dtype, alignment)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        f = sys._getframe(1)
        caller = (f.f_code.co_filename, f.f_lineno)
        with lock:
            res = self._allocations.get(caller)
            if res is None:
                res = self._allocations[caller] = np.empty(shape, dtype)
        return res

    kernelapi.FakeCUDAShared.array = array


if SIM:
    # The simulator runs each block's threads as Python threads and its launching thread
    # polls them in a loop; at CPython's default GIL switch interval (5 ms) that poller
    # keeps the GIL for 5 ms each time a simulated thread wants it (at every
    # syncthreads), and a tiled GEMM launch took ~50 ms. At 50 us the same launches take
    # ~7x less time (a 2-layer MLP forward: 0.26 s -> 0.038 s; measured on this suite's
    # machine, numba-cuda 0.30).
    sys.setswitchinterval(5e-5)
    _lock_shared_allocation()


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
