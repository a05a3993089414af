"""Every CUDA kernel compiles to PTX.

The simulator runs kernels as Python, so a typing error (a float64 constant meeting a
float16 array, an unsupported math call, an int/float mix in a store) only shows up
when numba's CUDA compiler types and lowers the kernel. ``numba.cuda.compile_ptx``
does that without a GPU (NVVM comes with ``numba-cuda[cu12]``), for each example
signature each kernel declares (float32, float16, float64 and the integer/bool types
it is used with). Skipped when numba-cuda/NVVM is missing or under the simulator.
"""
import importlib
import os
import pkgutil

import pytest

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _registry():
    if SIM:
        return []
    try:
        from numba import cuda  # noqa: F401
        import numbagrad.kernels.cuda as pkg
        from numbagrad.kernels.cuda import _launch
    except Exception:
        return []
    for m in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"numbagrad.kernels.cuda.{m.name}")
    return list(_launch.REGISTRY)


KERNELS = _registry()


def _nvvm_ok():
    try:
        from numba import cuda, int64

        def k(x):
            x[0] = 1
        cuda.compile_ptx(k, (int64[::1],), cc=(8, 0))
        return True
    except Exception:
        return False


pytestmark = pytest.mark.skipif(SIM or not KERNELS or not _nvvm_ok(),
                                reason="needs numba-cuda with NVVM (numba-cuda[cu12]) and no simulator")


def test_registry_covers_every_family():
    fams = {k.name.split(".")[0] if not k.name.startswith("numbagrad") else k.name.split(".")[3] for k in KERNELS}
    assert {"elementwise"} <= fams, fams
    assert len(KERNELS) > 100


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
def test_compiles_to_ptx(kernel):
    from numba import cuda
    sigs = kernel.example_signatures()
    assert sigs, f"{kernel.name} declares no example signature"
    for sig in sigs:
        try:
            ptx, _ = cuda.compile_ptx(kernel.fn, sig, cc=(8, 0))
        except Exception as e:  # name the kernel and the signature
            raise AssertionError(f"{kernel.name}{sig}: {type(e).__name__}: {e}") from None
        assert ".entry" in ptx or ".visible .entry" in ptx
