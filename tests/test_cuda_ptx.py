"""Every CUDA kernel compiles to PTX, checked entry point by entry point.

The simulator runs kernels as Python, so a typing error (a float64 constant meeting a
float16 array, an unsupported math call, an int/float mix in a store) only shows up
when numba's CUDA compiler types and lowers the kernel. ``numba.cuda.compile_ptx``
does that without a GPU (NVVM comes with ``numba-cuda[cu12]``), for each example
signature each kernel declares (float32, float16, float64 and the integer/bool types
it is used with). Skipped when numba-cuda/NVVM is missing or under the simulator.

This is the one place that compiles kernels to PTX: one case per CUDA entry point
(``kernels/cuda/<family>.py``'s ``ENTRY_POINTS``: the launcher's kernels, followed
through its helpers; ``tests/test_kernel_twins.py`` checks the twins' names and
parameters), then one case per kernel no entry point reaches (the backend's primitives:
elementwise, reductions, GEMM). Each kernel is compiled once.
"""
import os

import pytest

from _kernel_families import cuda_module, families, reached_kernels

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _match(entry, kernel):
    """How well a kernel's name matches an entry point's (Jaccard of their ``_`` words):
    a launcher that picks from a table of kernels reaches all of them."""
    a, b = set(entry.split("_")), set(kernel.fn.__name__.strip("_").split("_"))
    return len(a & b) / len(a | b)


def _cases():
    """``(id, launcher or None, [kernels])``: each registered kernel in exactly one case,
    the entry point reaching it whose name matches best, else a case of its own."""
    if SIM:
        return []
    try:
        from numba import cuda  # noqa: F401
        import numbagrad.kernels.cuda as pkg
        from numbagrad.kernels.cuda._launch import REGISTRY, Kernel
    except Exception:
        return []
    import numpy as np
    from numbagrad.kernels.cuda import matmul, reduce
    # kernels made on demand (integer GEMMs, an int32 row sum) carry their launch's dtypes
    matmul._make_gemm(np.int64, 1, (np.dtype(np.int32), np.dtype(np.int32)))
    matmul._make_gemm(np.int64, 2, (np.dtype(np.bool_), np.dtype(np.bool_)))
    i32 = np.dtype(np.int32)
    reduce._make_row("sum", i32, (i32, i32))
    reduce._make_scan_row("sum", i32, (i32, i32))
    cases, reach = [], {}
    for fam in families(pkg):
        mod = cuda_module(fam)
        for name in getattr(mod, "ENTRY_POINTS", ()):   # (a family without one: its kernels below)
            case = (f"{fam}.{name}", getattr(mod, f"_{name}_cuda"), [])
            cases.append(case)
            for k in reached_kernels(case[1], Kernel):
                reach.setdefault(id(k), []).append(case)
    for k in REGISTRY:
        by = reach.get(id(k))
        if by:
            max(by, key=lambda c: _match(c[0].split(".")[1], k))[2].append(k)
        else:
            cases.append((k.name.replace("numbagrad.kernels.cuda.", ""), None, [k]))
    return cases


CASES = _cases()


def _nvvm_ok():
    try:
        from numba import cuda, int64

        def k(x):
            x[0] = 1
        cuda.compile_ptx(k, (int64[::1],), cc=(8, 0))
        return True
    except Exception:
        return False


pytestmark = pytest.mark.skipif(SIM or not CASES or not _nvvm_ok(),
                                reason="needs numba-cuda with NVVM (numba-cuda[cu12]) and no simulator")


def test_cases_cover_every_family_and_kernel():
    from numbagrad.kernels.cuda import matmul, reduce
    from numbagrad.kernels.cuda._launch import REGISTRY
    assert set(matmul.KERNELS) | set(reduce.KERNELS) <= {k for c in CASES for k in c[2]}
    ids = [c[0] for c in CASES]
    assert {"elementwise", "softmax", "conv", "fused", "rnn"} <= {i.split(".")[0] for i in ids}
    assert sum(len(c[2]) for c in CASES) == len(REGISTRY) > 100
    assert [c[0] for c in CASES if c[1] is not None and not c[2]] == [], "entry points that launch no kernel"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_compiles_to_ptx(case):
    from numba import cuda
    name, launcher, kernels = case
    for kernel in kernels:
        sigs = kernel.example_signatures()
        assert sigs, f"{kernel.name} declares no example signature"
        for sig in sigs:
            try:
                ptx, _ = cuda.compile_ptx(kernel.fn, sig, cc=(8, 0))
            except Exception as e:  # name the kernel and the signature
                raise AssertionError(f"{kernel.name}{sig}: {type(e).__name__}: {e}") from None
            assert ".entry" in ptx or ".visible .entry" in ptx
            _check_family(kernel, sig, ptx)


def _check_family(kernel, sig, ptx):
    """What the GEMM and the reductions promise beyond compiling."""
    fam = kernel.name.replace("numbagrad.kernels.cuda.", "").split(".")[0]
    if fam in ("matmul", "reduce"):
        assert ".local" not in ptx, (kernel.name, sig)  # accumulators stay in registers, nothing spills
    if fam == "matmul" and str(sig[-1]).startswith("float"):
        assert "fma.rn" in ptx, (kernel.name, sig)
