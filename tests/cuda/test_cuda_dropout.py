"""CUDA dropout kernels (``numbagrad/kernels/cuda/dropout.py``): the same mask as the CPU.

The mask is a counter-based hash of (seed, element index) shared with the CPU kernels, so
for the same seed the CUDA mask must be *identical* to the CPU mask, bit for bit, for any
launch configuration; the scaled outputs are then identical too (one IEEE product).
"""

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import dropout as C  # noqa: E402
from numbagrad.kernels.cuda import dropout as G  # noqa: E402
from numbagrad.ops.dropout import _alpha_coeffs, _thr53  # noqa: E402
from optest import randn  # noqa: E402

N = 1000
SEEDS = [np.uint64(0), np.uint64(12345), np.uint64(2 ** 64 - 1)]
PS = [0.0, 0.3, 0.5, 1.0]


def _x(dtype, n=N, seed=0):
    x = randn(n, seed=seed)
    x[7] = np.nan  # a product keeps NaN, kept or not, as on the CPU
    return x.astype(dtype)


def _cuda(kernel, *args):
    """Run a launcher on copies of the host arrays; return the arrays back, in order."""
    d = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    kernel(*d)
    return [a.copy_to_host() for a in d if not np.isscalar(a)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", SEEDS, ids=int)
@pytest.mark.parametrize("p", PS)
def test_dropout_fwd_bwd_identical_to_cpu(p, seed, dtype):
    x = _x(dtype)
    thr, scale = _thr53(p), dtype(1.0 / (1.0 - p)) if p < 1 else dtype(0)
    out, mask = np.empty_like(x), np.empty(N, np.uint8)
    C._dropout_fwd_cpu(x, seed, thr, scale, out, mask)
    _, out_d, mask_d = _cuda(G._dropout_fwd_cuda, x, seed, thr, scale, np.empty_like(x),
                             np.empty(N, np.uint8))
    np.testing.assert_array_equal(mask_d, mask)
    np.testing.assert_array_equal(out_d, out)
    if p == 0.0:
        assert mask_d.all()
    elif p == 1.0:
        assert not mask_d.any()
    else:
        assert 0.5 * (1 - p) < mask_d.mean() < 1.5 * (1 - p)
    g = randn(N, seed=1).astype(dtype)
    gx = np.empty_like(g)
    C._dropout_bwd_cpu(g, mask, scale, gx)
    np.testing.assert_array_equal(_cuda(G._dropout_bwd_cuda, g, mask, scale, np.empty_like(g))[-1], gx)


@pytest.mark.parametrize("seed", SEEDS, ids=int)
@pytest.mark.parametrize("p", PS)
def test_bernoulli_mask_identical_to_cpu(p, seed):
    mask = np.empty(N, np.uint8)
    C._bernoulli_mask_cpu(mask, seed, _thr53(p))
    mask_d = _cuda(G._bernoulli_mask_cuda, np.empty(N, np.uint8), seed, _thr53(p))[0]
    np.testing.assert_array_equal(mask_d, mask)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p", [0.3, 0.5])
def test_alpha_dropout_identical_mask(p, dtype):
    x = _x(dtype)
    seed, thr = np.uint64(99), _thr53(p)
    a, bk, bd = (dtype(v) for v in _alpha_coeffs(p))
    out, mask = np.empty_like(x), np.empty(N, np.uint8)
    C._alpha_dropout_fwd_cpu(x, seed, thr, a, bk, bd, out, mask)
    *_, out_d, mask_d = _cuda(G._alpha_dropout_fwd_cuda, x, seed, thr, a, bk, bd, np.empty_like(x),
                              np.empty(N, np.uint8))
    np.testing.assert_array_equal(mask_d, mask)
    # a * x + b may be fused into one FMA on the GPU: equal to rounding, not bit for bit
    rtol = 1e-6 if dtype == np.float32 else 1e-15
    np.testing.assert_allclose(out_d, out, rtol=rtol, atol=rtol)
    dropped = (mask_d == 0) & ~np.isnan(x)  # a dropped NaN stays NaN (x * 0 + b_drop)
    assert dropped.any() and np.all(out_d[dropped] == bd)


@pytest.mark.parametrize("p", [0.3, 1.0])
def test_float16_identical_to_float32_cpu(p):
    x16 = _x(np.float16)
    seed, thr = np.uint64(5), _thr53(p)
    s16 = np.float16(1.0 / (1.0 - p)) if p < 1 else np.float16(0)
    out32, mask = np.empty(N, np.float32), np.empty(N, np.uint8)
    C._dropout_fwd_cpu(x16.astype(np.float32), seed, thr, np.float32(s16), out32, mask)
    _, out16, mask_d = _cuda(G._dropout_fwd_cuda, x16, seed, thr, s16, np.empty_like(x16),
                             np.empty(N, np.uint8))
    np.testing.assert_array_equal(mask_d, mask)
    assert out16.dtype == np.float16
    # float32 product, rounded to half once by the store: exactly the CPU value rounded
    np.testing.assert_array_equal(out16, out32.astype(np.float16))
    g16 = randn(N, seed=1).astype(np.float16)
    gx32 = np.empty(N, np.float32)
    C._dropout_bwd_cpu(g16.astype(np.float32), mask, np.float32(s16), gx32)
    np.testing.assert_array_equal(_cuda(G._dropout_bwd_cuda, g16, mask, s16, np.empty_like(g16))[-1],
                                  gx32.astype(np.float16))


def test_mask_does_not_depend_on_the_launch_configuration():
    seed, thr = np.uint64(2024), _thr53(0.5)
    ref = np.empty(N, np.uint8)
    C._bernoulli_mask_cpu(ref, seed, thr)
    for grid, block in ((1, 1), (3, 16), (5, 64)):
        md = cuda.to_device(np.full(N, 9, np.uint8))
        G._bernoulli_mask_kernel[grid, block](md, seed, thr)
        np.testing.assert_array_equal(md.copy_to_host(), ref)
