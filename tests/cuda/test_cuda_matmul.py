"""CUDA batched GEMM (``numbagrad/kernels/cuda/matmul.py``) against ``np.matmul``.

Shapes are not multiples of the tile (``TILE = 4`` under the simulator), include
matrix-vector products (M = 1, N = 1), K = 1 and K = 0, several output tiles per block
(grid-stride) and explicit multi-block grids; operands are C-contiguous, transposed
views (the other staging mapping) and batch-broadcast views (batch stride 0). Every
register-block size the module declares is run. float16 is checked against a float32
NumPy product of the same half values. The PTX check (skipped under the simulator)
compiles every kernel for its example signatures and checks nothing spills to local
memory (the R x R accumulators stay in registers).
"""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cuda import matmul as G  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}
TOL16 = dict(rtol=2e-3, atol=2e-3)
REGS = pytest.mark.parametrize("R", G.REG_BLOCKS, ids=lambda r: f"R{r}")


def _view(base, shape, strides):
    """A device array over a copy of the contiguous ``base`` with ``shape`` and element
    ``strides`` (any strides, 0 included), under the simulator or on a GPU."""
    base = np.ascontiguousarray(base)
    d = cuda.to_device(base)
    bstrides = tuple(int(s) * base.itemsize for s in strides)
    if SIM:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        return FakeCUDAArray(np.lib.stride_tricks.as_strided(d._ary, shape, bstrides))
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    return DeviceNDArray(shape, bstrides, base.dtype, gpu_data=d.gpu_data)


def _dev(x, layout):
    """``x`` (Bt, P, Q) on the device as a C-contiguous array ('C'), or as a transposed
    view of a (Bt, Q, P) buffer ('T')."""
    if layout == "C":
        return cuda.to_device(np.ascontiguousarray(x))
    bt, p, q = x.shape
    return _view(x.transpose(0, 2, 1), x.shape, (p * q, 1, p))


def _run(a, b, R=None, la="C", lb="C", grid=None, out_dtype=None):
    bt, m, _ = a.shape
    dt = np.dtype(out_dtype or a.dtype)
    # prefilled with NaN (or 1): an output the kernel forgets shows
    out = cuda.to_device(np.full((bt, m, b.shape[2]), np.nan if dt.kind == "f" else 1, dt))
    ad, bd = (_dev(a, la) if not hasattr(a, "copy_to_host") else a), _dev(b, lb)
    if R is None:
        G.matmul(ad, bd, out)
    else:
        G._matmul(ad, bd, out, R, grid)
    return out.copy_to_host()


def _rand(shape, dtype, seed):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


SHAPES = [((1, 3, 5), (1, 5, 2)), ((2, 7, 9), (2, 9, 6)), ((2, 1, 9), (2, 9, 6)),
          ((2, 7, 9), (2, 9, 1)), ((1, 6, 1), (1, 1, 5)), ((1, 9, 5), (1, 5, 10))]


@REGS
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("sa,sb", SHAPES, ids=str)
def test_matches_numpy(sa, sb, dtype, R):
    a, b = _rand(sa, dtype, 0), _rand(sb, dtype, 1)
    got = _run(a, b, R)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, np.matmul(a, b), **TOL[dtype])


@pytest.mark.parametrize("sa,sb", SHAPES[:3], ids=str)
def test_public_launcher(sa, sb):
    a, b = _rand(sa, np.float32, 0), _rand(sb, np.float32, 1)
    np.testing.assert_allclose(_run(a, b), np.matmul(a, b), **TOL[np.float32])


@REGS
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("la,lb", [("T", "C"), ("C", "T"), ("T", "T")])
def test_transposed_operands(la, lb, dtype, R):
    for sa, sb in (SHAPES[1], SHAPES[5]):
        a, b = _rand(sa, dtype, 2), _rand(sb, dtype, 3)
        np.testing.assert_allclose(_run(a, b, R, la, lb), np.matmul(a, b), **TOL[dtype])


@REGS
def test_broadcast_batch_stride_zero(R):
    a1, b = _rand((1, 5, 7), np.float64, 4), _rand((3, 7, 6), np.float64, 5)
    ad = _view(a1, (3, 5, 7), (0, 7, 1))                   # a broadcast over the batch
    np.testing.assert_allclose(_run(ad, b, R), np.matmul(a1, b), **TOL[np.float64])
    a, b1 = _rand((3, 5, 7), np.float64, 6), _rand((1, 7, 6), np.float64, 7)
    out = cuda.to_device(np.zeros((3, 5, 6)))
    bd = _view(b1.transpose(0, 2, 1), (3, 7, 6), (0, 1, 7))  # broadcast and transposed
    G._matmul(cuda.to_device(a), bd, out, R)
    np.testing.assert_allclose(out.copy_to_host(), np.matmul(a, b1), **TOL[np.float64])


@REGS
@pytest.mark.parametrize("la,lb", [("C", "C"), ("C", "T")])
def test_float16_against_float32(la, lb, R):
    a, b = _rand((2, 7, 9), np.float16, 8), _rand((2, 9, 6), np.float16, 9)
    got = _run(a, b, R, la, lb)
    assert got.dtype == np.float16
    ref = np.matmul(a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_allclose(got.astype(np.float32), ref, **TOL16)


def test_float16_accumulates_in_float32():
    # 2048 + 1 + 1 + ... rounds back to 2048 at every step in float16
    a = np.ones((1, 1, 17), np.float16)
    b = np.ones((1, 17, 1), np.float16)
    b[0, 0, 0] = 2048
    assert _run(a, b, 1)[0, 0, 0] == np.float16(2048 + 16)


@REGS
def test_multi_block_grids_and_many_tiles(R):
    """Explicit grids: more tiles and batches than blocks in every grid dimension, and a
    grid larger than the work (idle blocks)."""
    a, b = _rand((3, 13, 6), np.float32, 10), _rand((3, 6, 11), np.float32, 11)
    ref = np.matmul(a, b)
    for grid in ((2, 2, 2), (1, 1, 1), (5, 5, 4)):
        np.testing.assert_allclose(_run(a, b, R, grid=grid), ref, **TOL[np.float32], err_msg=str(grid))


def test_empty_dims():
    a, b = np.zeros((2, 3, 0), np.float32), np.zeros((2, 0, 4), np.float32)
    np.testing.assert_array_equal(_run(a, b, 1), np.zeros((2, 3, 4), np.float32))  # K = 0: zeros
    for sa, sb in (((0, 3, 2), (0, 2, 4)), ((2, 0, 2), (2, 2, 4)), ((2, 3, 2), (2, 2, 0))):
        assert _run(np.zeros(sa, np.float32), np.zeros(sb, np.float32)).shape == (sa[0], sa[1], sb[2])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # simulated threads multiply inf * 0
def test_nan_and_inf_propagate():
    a, b = _rand((1, 3, 4), np.float32, 12), _rand((1, 4, 2), np.float32, 13)
    a[0, 1, 2] = np.nan
    b[0, 0, 1] = np.inf
    got = _run(a, b, 1)
    with np.errstate(invalid="ignore"):
        ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_and_bool_operands(dtype):
    """np.matmul's integer/bool results (the kernels accumulate in int64)."""
    rng = np.random.default_rng(14)
    a = rng.integers(-3, 4, (2, 5, 7)).astype(dtype)
    b = rng.integers(-3, 4, (2, 7, 3)).astype(dtype)
    got = _run(a, b, 1, "C", "T", out_dtype=dtype)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, np.matmul(a, b))


def test_shape_mismatch_raises():
    a = cuda.to_device(np.zeros((1, 2, 3), np.float32))
    b = cuda.to_device(np.zeros((1, 4, 2), np.float32))
    with pytest.raises(ValueError, match="matmul"):
        G.matmul(a, b, cuda.to_device(np.zeros((1, 2, 2), np.float32)))


def test_register_block_choice():
    assert G._pick_reg(1, 1, 1) == 1
    big = 64 * G.TILE * max(G.REG_BLOCKS)
    assert G._pick_reg(4, big, big) == max(G.REG_BLOCKS)


# ---- PTX -----------------------------------------------------------------------------------------
