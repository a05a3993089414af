"""CUDA activation kernels (``numbagrad/kernels/cuda/activation.py``) at the kernel level.

The ops' float32/float64 results on CUDA, on random inputs and on the kinks themselves,
+-30, +-1e4 and NaN, are rows of the op table (``tests/opdb.py``, run on CUDA by
``tests/cuda/test_opdb_cuda.py``). Here what the table cannot reach: the float16 kernels
against the float32 CPU kernel (the CUDA half kernels compute in float32 and round once
at the store), a grid-stride launch with fewer threads than elements and an empty input.
(``tests/test_kernel_twins.py`` checks every kernel's CUDA twin and its parameters.)
"""
import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import activation as C  # noqa: E402
from numbagrad.kernels.cuda import activation as G  # noqa: E402
from optest import randn  # noqa: E402

# the half kernels: (id, kernel stem, params, saves (as the op's Function), kinks, input scale)
HALF_OPS = [
    ("relu", "relu", (), "y", [0.0], 2.0),
    ("leaky_relu", "leaky_relu", (0.2,), "x", [0.0], 2.0),
    ("sigmoid", "sigmoid", (), "y", [], 3.0),
    ("tanh", "tanh", (), "y", [], 2.0),
    ("silu", "silu", (), "x", [], 3.0),
    ("elu", "elu", (1.0, 1.0, 1.0), "xy", [0.0], 2.0),
    ("gelu", "gelu", (), "x", [], 2.0),
]

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14)}
# A half result is the float32 result rounded once: within half an ulp (2**-11 relative).
TOL16 = dict(rtol=1e-3, atol=1e-5)
SPECIAL = [-1e4, -30.0, 30.0, 1e4, np.nan]


def _x(kinks, scale, dtype, n=45, seed=0):
    x = np.concatenate([randn(n, seed=seed) * scale, kinks, SPECIAL])
    return np.ascontiguousarray(x, dtype=dtype)


def _g(n, dtype, seed=1):
    return np.ascontiguousarray(randn(n, seed=seed), dtype=dtype)


def _cuda_call(kernel, *args):
    """Run a CUDA launcher on host arrays (copied to the device); return the array
    arguments back on the host, in order (scalars are passed through)."""
    d = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel(*d)
    return [a.copy_to_host() for a in d if not np.isscalar(a)]


def _fwd(mod, stem, suffix, x, p):
    k = getattr(mod, f"_{stem}_fwd_{suffix}")
    if suffix == "cpu":
        out = np.empty_like(x)
        k(x, *p, out)
        return out
    return _cuda_call(k, x, *p, np.empty_like(x))[-1]


def _bwd(mod, stem, suffix, g, saved, p):
    k = getattr(mod, f"_{stem}_bwd_{suffix}")
    if suffix == "cpu":
        out = np.empty_like(g)
        k(g, *saved, *p, out)
        return out
    return _cuda_call(k, g, *saved, *p, np.empty_like(g))[-1]


def _saved(saves, x, y):
    return [x if c == "x" else y for c in saves]


@pytest.mark.parametrize("name,stem,params,saves,kinks,scale", HALF_OPS, ids=[o[0] for o in HALF_OPS])
def test_float16_matches_float32_cpu(name, stem, params, saves, kinks, scale):
    x16 = _x(kinks, scale, np.float16)
    x32 = x16.astype(np.float32)
    p16 = tuple(np.float16(v) for v in params)
    p32 = tuple(np.float32(v) for v in p16)
    y32 = _fwd(C, stem, "cpu", x32, p32)
    y16 = _fwd(G, stem, "cuda", x16, p16)
    assert y16.dtype == np.float16
    np.testing.assert_allclose(y16.astype(np.float32), y32, **TOL16, err_msg=f"{name} fwd")
    g16 = _g(x16.size, np.float16)
    ys16 = y32.astype(np.float16)  # what a half forward saved
    saved16 = _saved(saves, x16, ys16)
    ref = _bwd(C, stem, "cpu", g16.astype(np.float32), [s.astype(np.float32) for s in saved16], p32)
    np.testing.assert_allclose(_bwd(G, stem, "cuda", g16, saved16, p16).astype(np.float32), ref,
                               **TOL16, err_msg=f"{name} bwd")


def test_logsigmoid_float16():
    x16 = _x([], 3.0, np.float16)
    out32, buf32 = np.empty(x16.size, np.float32), np.empty(x16.size, np.float32)
    C._logsigmoid_fwd_cpu(x16.astype(np.float32), out32, buf32)
    _, out16, buf16 = _cuda_call(G._logsigmoid_fwd_cuda, x16, np.empty_like(x16), np.empty_like(x16))
    np.testing.assert_allclose(out16.astype(np.float32), out32, **TOL16)
    np.testing.assert_allclose(buf16.astype(np.float32), buf32, **TOL16)


def test_grid_stride_covers_any_launch():
    """A kernel launched with far fewer threads than elements still writes every one."""
    x = _x([], 3.0, np.float32, n=60)
    ref = _fwd(C, "silu", "cpu", x, ())
    for grid, block in ((1, 1), (2, 4), (3, 32)):
        xd, od = cuda.to_device(x), cuda.to_device(np.full_like(x, 7.0))
        G._silu_fwd_kernel[grid, block](xd, od)
        np.testing.assert_allclose(od.copy_to_host(), ref, **TOL[np.float32])


def test_empty_input_is_a_no_op():
    x = np.empty(0, np.float32)
    assert _fwd(G, "relu", "cuda", x, ()).size == 0
