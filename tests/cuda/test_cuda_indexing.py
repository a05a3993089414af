"""CUDA indexing kernels (``numbagrad/kernels/cuda/indexing.py``) against the CPU kernels.

Tiny ``(A, N, B) = (2, 3, 4)`` views with more indices than rows (``M = 5 > N``), so the
scatters always see duplicate indices: the atomic scatter-adds must accumulate them,
``scatter`` must let the last one win (as the CPU does), in both of its schemes. float16 runs the atomic-free
fallback of the accumulating kernels and is checked against the float32 CPU kernels;
copies (gather, index_select, embedding) must be exact in every dtype.
"""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import indexing as C  # noqa: E402
from numbagrad.kernels.cuda import indexing as G  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
A, N, B, M = 2, 3, 4, 5
DTYPES = [np.float32, np.float64]
TOL = {np.float32: dict(rtol=1e-6, atol=1e-6), np.float64: dict(rtol=1e-14, atol=1e-14)}
TOL16 = dict(rtol=2e-3, atol=2e-3)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _data(shape, dtype, seed=0):
    a = _rng(seed).standard_normal(shape) * 2
    if np.dtype(dtype).kind in "iu":
        a = np.round(a * 10)
    return np.ascontiguousarray(a.astype(dtype))


def _index(shape, hi, seed=1):
    return _rng(seed).integers(0, hi, size=shape).astype(np.int64)


def _cuda(fn, *args):
    """Run a CUDA launcher on device copies of the array arguments; return host copies
    of every array argument (in order)."""
    d = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    fn(*d)
    return [x.copy_to_host() for x, a in zip(d, args) if isinstance(a, np.ndarray)]


def _cpu32(fn, *args):
    """Run a CPU kernel with float16 arrays widened to float32 (CPU njit has no half)."""
    w = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float16 else
         (np.float32(a) if isinstance(a, np.float16) else a) for a in args]
    fn(*w)
    return [a for a in w if isinstance(a, np.ndarray)]


def _exact(cpu, gpu, args, out_at, ref, dtype):
    """The CPU kernel (not in float16: CPU njit has no half) and the CUDA launcher, each on
    its own copy of the output ``args[out_at]`` (arrays come first), both give exactly
    ``ref``; returns the CUDA output."""
    if dtype != np.float16:
        host = [a.copy() if k == out_at else a for k, a in enumerate(args)]
        cpu(*host)
        np.testing.assert_array_equal(host[out_at], ref)
    got = _cuda(gpu, *args)[out_at]
    np.testing.assert_array_equal(got, ref)
    return got


def _accumulates_like_cpu(cpu, gpu, args, dtype):
    """The CUDA launcher against the CPU kernel, both accumulating into ``args[0]``: to
    ``TOL``, float16 to ``TOL16`` against the float32 CPU kernel; returns the CUDA output."""
    got = _cuda(gpu, *args)[0]
    if dtype == np.float16:
        ref = _cpu32(cpu, *args)[0]
        np.testing.assert_allclose(got.astype(np.float32), ref, **TOL16)
    else:
        ref = args[0].copy()
        cpu(ref, *args[1:])
        np.testing.assert_allclose(got, ref, **TOL[dtype])
    return got


# ---- copies: gather, index_select, embedding_fwd, one_hot -----------------------------------------
@pytest.mark.parametrize("dtype", DTYPES + [np.float16, np.int64])
def test_gather(dtype):
    x = _data((A, N, B), dtype)
    idx = _index((A, M, B), N)
    out = np.zeros((A, M, B), dtype)
    got = _exact(C._gather_fwd_cpu, G._gather_fwd_cuda, [x, idx, out], 2, np.take_along_axis(x, idx, axis=1), dtype)
    assert got.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", DTYPES + [np.float16])
def test_index_select(dtype):
    x = _data((A, N, B), dtype)
    idx = np.array([2, 0, 2, 1, 2], np.int64)  # duplicates
    out = np.zeros((A, idx.size, B), dtype)
    _exact(C._index_select_fwd_cpu, G._index_select_fwd_cuda, [x, idx, out], 2, x[:, idx, :], dtype)


@pytest.mark.parametrize("dtype", DTYPES + [np.float16])
def test_embedding_fwd(dtype):
    w = _data((4, 3), dtype)
    idx = np.array([3, 0, 3, 1, 1, 2], np.int64)
    out = np.zeros((idx.size, 3), dtype)
    _exact(C._embedding_fwd_cpu, G._embedding_fwd_cuda, [w, idx, out], 2, w[idx], dtype)


def test_one_hot():
    idx = np.array([2, 0, 4, 2, 1], np.int64)
    out = np.zeros((idx.size, 5), np.int64)
    _exact(C._one_hot_fwd_cpu, G._one_hot_fwd_cuda, [idx, out], 1, np.eye(5, dtype=np.int64)[idx], np.int64)


# ---- scatters ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES + [np.int64])
def test_scatter_add_duplicates(dtype):
    out = _data((A, N, B), dtype)
    idx = _index((A, M, B), N)
    src = _data((A, M, B), dtype, seed=2)
    out_c = out.copy()
    C._scatter_add_fwd_cpu(out_c, idx, src)
    ref = out.copy()
    for a in range(A):  # np.add.at as an independent reference
        for b in range(B):
            np.add.at(ref[:, :, b], (a, idx[a, :, b]), src[a, :, b])
    (got, _, _) = _cuda(G._scatter_add_fwd_cuda, out, idx, src)
    tol = TOL.get(dtype, dict(rtol=0, atol=0))
    np.testing.assert_allclose(out_c, ref, **tol)
    np.testing.assert_allclose(got, out_c, **tol)


def test_scatter_add_float16_fallback():
    out = _data((A, N, B), np.float16)
    idx = _index((A, M, B), N)
    src = _data((A, M, B), np.float16, seed=2)
    got = _accumulates_like_cpu(C._scatter_add_fwd_cpu, G._scatter_add_fwd_cuda, [out, idx, src], np.float16)
    assert got.dtype == np.float16


@pytest.mark.parametrize("scheme", ["columns", "claims"])
@pytest.mark.parametrize("dtype", DTYPES + [np.float16])
def test_scatter_last_duplicate_wins(dtype, scheme, monkeypatch):
    if scheme == "claims":  # force the atomic-max claim scheme on these tiny shapes
        monkeypatch.setattr(G, "_MANY_COLUMNS", 1 << 30)
        monkeypatch.setattr(G, "_SHORT_COLUMN", 0)
    out = _data((A, N, B), dtype)
    idx = _index((A, M, B), N)
    src = _data((A, M, B), dtype, seed=2)
    ref = out.copy()
    for a in range(A):
        for i in range(M):
            for b in range(B):
                ref[a, idx[a, i, b], b] = src[a, i, b]
    _exact(C._scatter_fwd_cpu, G._scatter_fwd_cuda, [out, idx, src], 0, ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES + [np.float16])
def test_scatter_fill(dtype):
    out = _data((A, N, B), dtype)
    idx = _index((A, M, B), N)
    value = np.dtype(dtype).type(-2.5)
    ref = out.copy()
    for a in range(A):
        for b in range(B):
            ref[a, idx[a, :, b], b] = value
    _exact(C._scatter_fill_fwd_cpu, G._scatter_fill_fwd_cuda, [out, idx, value], 0, ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES + [np.float16])
def test_index_add_duplicates(dtype):
    out = _data((A, N, B), dtype)
    idx = np.array([1, 1, 0, 2, 1], np.int64)
    src = _data((A, idx.size, B), dtype, seed=2)
    alpha = np.dtype(dtype).type(0.5)
    _accumulates_like_cpu(C._index_add_fwd_cpu, G._index_add_fwd_cuda, [out, idx, src, alpha], dtype)


@pytest.mark.parametrize("padding_idx", [-1, 1])
@pytest.mark.parametrize("dtype", DTYPES + [np.float16])
def test_embedding_bwd(dtype, padding_idx):
    idx = np.array([3, 1, 3, 0, 1, 3], np.int64)
    grad = _data((idx.size, 3), dtype, seed=2)
    gw = np.zeros((4, 3), dtype)
    got = _accumulates_like_cpu(C._embedding_bwd_cpu, G._embedding_bwd_cuda, [gw, idx, grad, padding_idx], dtype)
    if padding_idx >= 0:
        assert (got[padding_idx] == 0).all()
    assert (got[2] == 0).all()  # row never indexed


# ---- PTX: every kernel of the module compiles (no simulator) -----------------------------------
