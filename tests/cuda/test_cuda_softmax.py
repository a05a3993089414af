"""CUDA row-wise softmax / log_softmax (``numbagrad/kernels/cuda/softmax.py``) against the
CPU kernels, forward and backward.

Shapes cover a row shorter than the block, rows not a multiple of the block and rows
longer than ``ROW_TPB`` (several columns per thread before the shared-memory tree), plus
a row of +-1e4 logits (max shift: no inf/NaN) and a ``-inf`` logit (probability 0,
log-probability ``-inf``). float16 is checked against the float32 CPU kernels (the CUDA
kernel accumulates in float32 and rounds once at the store).
"""

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import softmax as C  # noqa: E402
from numbagrad.kernels.cuda import softmax as G  # noqa: E402
from numbagrad.kernels.cuda._launch import ROW_TPB  # noqa: E402
from optest import randn  # noqa: E402

SHAPES = [(3, 5), (2, 17), (2, 2 * ROW_TPB + 3), (1, 1), (4, ROW_TPB)]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-7), np.float64: dict(rtol=1e-12, atol=1e-15)}
# The backward g - p * sum(g) (softmax: p * (g - sum(g * p))) cancels: its absolute error is
# that of the row sum (the GPU sums a row as a block tree, the CPU in eight running sums), a few
# float32 ulps of terms of size ~1, not of the small result. Seen on an H200: 5.8e-7 off at
# -0.0184 (log_softmax, rows of 128); float64 keeps its tolerance.
BWD_TOL = {np.float32: dict(rtol=1e-5, atol=4e-6), np.float64: TOL[np.float64]}
TOL16 = dict(rtol=1e-3, atol=1e-6)
NAMES = ["softmax", "log_softmax"]


def _logits(shape, dtype, seed=0):
    x = randn(*shape, seed=seed) * 3
    rows, n = shape
    if rows >= 2 and n >= 2:
        x[0, ::2] = 1e4           # a row of huge logits: exp(x) alone would overflow
        x[0, 1::2] = -1e4
        x[0, 1] = 1e4 - 1.0
        x[1, n // 2] = -np.inf    # probability exactly 0
    return np.ascontiguousarray(x, dtype=dtype)


def _run(mod, name, suffix, *arrays):
    k = getattr(mod, f"_{name}_{suffix}")
    out = np.empty_like(arrays[0])
    if suffix.endswith("cpu"):
        k(*arrays, out)
        return out
    d = [cuda.to_device(a) for a in arrays + (out,)]
    k(*d)
    return d[-1].copy_to_host()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_fwd_bwd_match_cpu(name, shape, dtype):
    x = _logits(shape, dtype)
    y = _run(C, name, "fwd_cpu", x)
    y_d = _run(G, name, "fwd_cuda", x)
    np.testing.assert_allclose(y_d, y, **TOL[dtype])
    if name == "softmax":
        assert np.isfinite(y_d).all()
        np.testing.assert_allclose(y_d.sum(1), 1.0, rtol=10 * TOL[dtype]["rtol"])
    else:
        assert not np.isnan(y_d).any()
    if shape[0] >= 2 and shape[1] >= 2:
        assert y_d[1, shape[1] // 2] == (0.0 if name == "softmax" else -np.inf)
    g = np.ascontiguousarray(randn(*shape, seed=1), dtype=dtype)
    gx = _run(C, name, "bwd_cpu", g, y)  # both backwards read the CPU forward's y
    gx_d = _run(G, name, "bwd_cuda", g, y)
    assert np.isfinite(gx_d).all()
    np.testing.assert_allclose(gx_d, gx, **BWD_TOL[dtype])


@pytest.mark.parametrize("shape", [(3, 5), (2, 2 * ROW_TPB + 3)], ids=str)
@pytest.mark.parametrize("name", NAMES)
def test_float16_matches_float32_cpu(name, shape):
    x16 = _logits(shape, np.float16)
    y32 = _run(C, name, "fwd_cpu", x16.astype(np.float32))
    y16 = _run(G, name, "fwd_cuda", x16)
    assert y16.dtype == np.float16
    np.testing.assert_allclose(y16.astype(np.float32), y32, **TOL16)
    g16 = randn(*shape, seed=1).astype(np.float16)
    ys16 = y32.astype(np.float16)  # what a half forward saved
    ref = _run(C, name, "bwd_cpu", g16.astype(np.float32), ys16.astype(np.float32))
    np.testing.assert_allclose(_run(G, name, "bwd_cuda", g16, ys16).astype(np.float32), ref, **TOL16)


@pytest.mark.parametrize("name", NAMES)
def test_nan_row_and_empty_shapes(name):
    x = _logits((3, 6), np.float32)
    x[2, 3] = np.nan
    y, y_d = _run(C, name, "fwd_cpu", x), _run(G, name, "fwd_cuda", x)
    assert np.isnan(y_d[2]).all() and np.isnan(y[2]).all()  # a NaN poisons its row only
    np.testing.assert_allclose(y_d[:2], y[:2], **TOL[np.float32])
    for shape in ((0, 5), (3, 0)):
        e = np.empty(shape, np.float32)
        assert _run(G, name, "fwd_cuda", e).shape == shape
        assert _run(G, name, "bwd_cuda", e, e).shape == shape


def test_many_rows_per_block():
    """More rows than blocks: each block takes rows grid-stride."""
    x = _logits((7, 11), np.float64)
    ref = _run(C, "softmax", "fwd_cpu", x)
    xd, od = cuda.to_device(x), cuda.to_device(np.zeros_like(x))
    G._softmax_fwd_acc64_kernel[2, ROW_TPB](xd, od)
    np.testing.assert_allclose(od.copy_to_host(), ref, **TOL[np.float64])
