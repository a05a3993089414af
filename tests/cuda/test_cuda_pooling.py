"""CUDA pooling (``numbagrad/kernels/cuda/pooling.py``) against the CPU kernels, and the pooling
ops on ``device="cuda"`` against the CPU ops.

Inputs hold many ties (small integers) so that the first-maximum rule and the gradient
routing through ``idx`` are exercised; float32/float64 results must equal the CPU's
(the gather visits windows in the CPU's scatter order), float16 is compared with the
float32 CPU kernels. Shapes are tiny: every simulated thread costs ~0.3 ms.
"""

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

import numbagrad as ng  # noqa: E402
from numbagrad.kernels.cpu import pooling as C  # noqa: E402
from numbagrad.kernels.cuda import pooling as G  # noqa: E402
from numbagrad.ops import pooling as Pool  # noqa: E402
from optest import check_device, randn  # noqa: E402

NAMES = ["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d"]

# (kH, kW, sH, sW, pH, pW, dH, dW) for max; the avg rows use (k, s, p) and (count_include_pad, divisor)
MAX_GEOS = [((2, 2, 2, 2, 0, 0, 1, 1), (2, 5, 4)),       # plain 2x2/2
            ((3, 2, 2, 1, 1, 1, 2, 1), (1, 6, 5)),       # overlapping, padded, dilated rows
            ((1, 3, 1, 2, 0, 1, 1, 2), (2, 1, 7)),       # a 1-D pool seen as (P, 1, L)
            ((1, 2, 1, 1, 0, 1, 1, 2), (1, 3, 1))]       # dilated windows wholly in the padding
AVG_GEOS = [((3, 3, 2, 2, 1, 1, 1, 0), (1, 5, 5)),
            ((3, 2, 2, 1, 1, 0, 0, 0), (1, 5, 4)),
            ((2, 3, 1, 2, 1, 1, 0, 3), (1, 4, 5))]
ADAPT = [((1, 5, 7), (3, 4)), ((2, 3, 2), (4, 3))]


def _out_shape(geo, shape, ceil=False):
    kH, kW, sH, sW, pH, pW, dH, dW = geo
    P, H, W = shape
    return (P, Pool._out_size(H, kH, sH, pH, dH, ceil), Pool._out_size(W, kW, sW, pW, dW, ceil))


def _tied(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return np.ascontiguousarray(rng.integers(-3, 4, size=shape), dtype=dtype)


def _cuda_run(fn, *arrays):
    """Run launcher ``fn`` on device copies of the arrays (scalars pass through); return the
    host copies of the array arguments, in order."""
    d = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in arrays]
    fn(*d)
    return [x.copy_to_host() for x in d if hasattr(x, "copy_to_host")]


def _max_case(geo, shape, dtype, cpu_dtype):
    x = _tied(shape, dtype)
    oshape = _out_shape(geo, shape, ceil=True)
    out, idx = np.empty(oshape, cpu_dtype), np.empty(oshape, np.int64)
    C._max_pool2d_fwd_cpu(x.astype(cpu_dtype), out, idx, *geo)
    _, out_d, idx_d = _cuda_run(G._max_pool2d_fwd_cuda, x, np.empty(oshape, dtype),
                                np.empty(oshape, np.int64), *geo)
    g = randn(*oshape, seed=1).astype(dtype)
    gx = np.empty(shape, cpu_dtype)
    C._max_pool2d_bwd_cpu(g.astype(cpu_dtype), idx, gx, *geo)
    gx_d = _cuda_run(G._max_pool2d_bwd_cuda, g, idx, np.full(shape, np.nan, dtype), *geo)[2]
    return (out, idx, gx), (out_d, idx_d, gx_d)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geo,shape", MAX_GEOS, ids=str)
def test_max_pool_kernels_equal_cpu(geo, shape, dtype):
    (out, idx, gx), (out_d, idx_d, gx_d) = _max_case(geo, shape, dtype, dtype)
    np.testing.assert_array_equal(out_d, out)
    np.testing.assert_array_equal(idx_d, idx)
    np.testing.assert_array_equal(gx_d, gx)


def test_max_pool_kernels_float16():
    geo, shape = MAX_GEOS[1]
    (out, idx, gx), (out_d, idx_d, gx_d) = _max_case(geo, shape, np.float16, np.float32)
    assert out_d.dtype == np.float16 and gx_d.dtype == np.float16
    np.testing.assert_array_equal(out_d.astype(np.float32), out)
    np.testing.assert_array_equal(idx_d, idx)
    np.testing.assert_allclose(gx_d.astype(np.float32), gx, rtol=1e-3, atol=1e-3)


def test_max_pool_nan_and_all_padding_window():
    # a NaN wins its window (and propagates), as on the CPU and in torch
    geo, shape = MAX_GEOS[0]
    x = _tied(shape, np.float32)
    x[0, 1, 1] = np.nan
    oshape = _out_shape(geo, shape)
    out, idx = np.empty(oshape, np.float32), np.empty(oshape, np.int64)
    C._max_pool2d_fwd_cpu(x, out, idx, *geo)
    _, out_d, idx_d = _cuda_run(G._max_pool2d_fwd_cuda, x, np.empty_like(out), np.empty_like(idx), *geo)
    assert np.isnan(out_d[0, 0, 0]) and idx_d[0, 0, 0] == 1 * shape[2] + 1
    np.testing.assert_array_equal(out_d, out)
    np.testing.assert_array_equal(idx_d, idx)


def _avg_case(geo, shape, dtype, cpu_dtype):
    k, s, p, (cip, div) = geo[0:2], geo[2:4], geo[4:6], geo[6:8]
    mgeo = k + s + p + (1, 1)
    args = k + s + p + (cip, div)
    x = randn(*shape, seed=2).astype(dtype)
    oshape = _out_shape(mgeo, shape, ceil=True)
    out = np.empty(oshape, cpu_dtype)
    C._avg_pool2d_fwd_cpu(x.astype(cpu_dtype), out, *args)
    out_d = _cuda_run(G._avg_pool2d_fwd_cuda, x, np.empty(oshape, dtype), *args)[1]
    g = randn(*oshape, seed=3).astype(dtype)
    gx = np.empty(shape, cpu_dtype)
    C._avg_pool2d_bwd_cpu(g.astype(cpu_dtype), gx, *args)
    gx_d = _cuda_run(G._avg_pool2d_bwd_cuda, g, np.full(shape, np.nan, dtype), *args)[1]
    return (out, gx), (out_d, gx_d)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geo,shape", AVG_GEOS, ids=str)
def test_avg_pool_kernels_equal_cpu(geo, shape, dtype):
    (out, gx), (out_d, gx_d) = _avg_case(geo, shape, dtype, dtype)
    np.testing.assert_array_equal(out_d, out)
    np.testing.assert_array_equal(gx_d, gx)


def test_avg_pool_kernels_float16():
    (out, gx), (out_d, gx_d) = _avg_case(*AVG_GEOS[0], np.float16, np.float32)
    assert out_d.dtype == np.float16
    np.testing.assert_allclose(out_d.astype(np.float32), out, rtol=2e-3, atol=1e-3)
    np.testing.assert_allclose(gx_d.astype(np.float32), gx, rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape,osz", ADAPT, ids=str)
def test_adaptive_kernels_equal_cpu(shape, osz, dtype):
    cpu_dtype = np.float32 if dtype == np.float16 else dtype
    x = _tied(shape, dtype, seed=4) + randn(*shape, seed=5).astype(dtype) * (dtype != np.float16)
    x = np.ascontiguousarray(x, dtype=dtype)
    oshape = (shape[0],) + osz
    g = randn(*oshape, seed=6).astype(dtype)
    xc, gc = x.astype(cpu_dtype), g.astype(cpu_dtype)
    # average
    out = np.empty(oshape, cpu_dtype)
    C._adaptive_avg_pool2d_fwd_cpu(xc, out)
    out_d = _cuda_run(G._adaptive_avg_pool2d_fwd_cuda, x, np.empty(oshape, dtype))[1]
    gx = np.empty(shape, cpu_dtype)
    C._adaptive_avg_pool2d_bwd_cpu(gc, gx)
    gx_d = _cuda_run(G._adaptive_avg_pool2d_bwd_cuda, g, np.full(shape, np.nan, dtype))[1]
    # max
    mo, mi = np.empty(oshape, cpu_dtype), np.empty(oshape, np.int64)
    C._adaptive_max_pool2d_fwd_cpu(xc, mo, mi)
    _, mo_d, mi_d = _cuda_run(G._adaptive_max_pool2d_fwd_cuda, x, np.empty(oshape, dtype),
                              np.empty(oshape, np.int64))
    mgx = np.empty(shape, cpu_dtype)
    C._adaptive_max_pool2d_bwd_cpu(gc, mi, mgx)
    mgx_d = _cuda_run(G._adaptive_max_pool2d_bwd_cuda, g, mi, np.full(shape, np.nan, dtype))[2]
    np.testing.assert_array_equal(mi_d, mi)
    got = [a.astype(cpu_dtype) for a in (out_d, gx_d, mo_d, mgx_d)]
    for a, b in zip(got, (out, gx, mo, mgx)):
        if dtype == np.float16:
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-3)
        else:
            np.testing.assert_array_equal(a, b)


def test_grid_stride_with_a_small_grid():
    """More elements than threads: each thread takes several outputs."""
    geo, shape = MAX_GEOS[0]
    x = randn(*shape, seed=7).astype(np.float64)
    oshape = _out_shape(geo, shape)
    out, idx = np.empty(oshape), np.empty(oshape, np.int64)
    C._max_pool2d_fwd_cpu(x, out, idx, *geo)
    d = [cuda.to_device(a) for a in (x, np.empty(oshape), np.empty(oshape, np.int64))]
    G._K64["max_fwd"][1, 2](*d, *geo)
    np.testing.assert_array_equal(d[1].copy_to_host(), out)
    np.testing.assert_array_equal(d[2].copy_to_host(), idx)


# ---- the ops on device vs the CPU ops ---------------------------------------------------------------
def _distinct(*shape, seed=0):
    """Values without ties (a permutation), so max-pool gradients are unambiguous."""
    rng = np.random.default_rng(seed)
    return rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64) / 7.0


OP_CASES = [
    ("max2d_idx", lambda t: Pool.max_pool2d(t, 3, 2, 1, ceil_mode=True, return_indices=True), (1, 2, 5, 4)),
    ("max1d_unbatched", lambda t: Pool.max_pool1d(t, 2, 1, 1, dilation=2), (2, 6)),
    ("avg2d_nopad", lambda t: Pool.avg_pool2d(t, 3, 2, 1, ceil_mode=True, count_include_pad=False),
     (1, 1, 5, 5)),
    ("avg1d", lambda t: Pool.avg_pool1d(t, 3, 2, 1), (1, 2, 7)),
    ("adaptive_avg2d", lambda t: Pool.adaptive_avg_pool2d(t, (2, 3)), (1, 2, 5, 4)),
    ("adaptive_max2d_idx", lambda t: Pool.adaptive_max_pool2d(t, (3, 2), return_indices=True), (2, 5, 3)),
]


@pytest.mark.parametrize("fn,shape", [c[1:] for c in OP_CASES], ids=[c[0] for c in OP_CASES])
def test_op_on_device_equals_cpu(fn, shape):
    check_device(fn, None, [_distinct(*shape)], dtypes=(np.float32,), grad_dtypes=(np.float64,),
                 grad_tol={np.float64: dict(rtol=0, atol=0)})


def test_float16_op_on_device():
    x = _distinct(1, 1, 4, 4)
    y = Pool.max_pool2d(ng.tensor(x.astype(np.float16), device="cuda"), 2)
    assert y.dtype == ng.float16 and y.device == ng.device("cuda")
    ref = Pool.max_pool2d(ng.tensor(x.astype(np.float16)), 2)
    np.testing.assert_array_equal(y.cpu().numpy(), ref.numpy())
