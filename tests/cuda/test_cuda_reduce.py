"""CUDA middle-axis reductions and scans (``numbagrad/kernels/cuda/reduce.py``) against NumPy.

Every op runs through both kernel families (one block per output with a shared-memory
tree, and one thread per output looping over K) on shapes ``(2, 5, 1)``, ``(2, 5, 3)``
and ``(1, 17, 1)`` (K > ROW_TPB under the simulator: several elements per thread before
the tree), plus NaNs (max/min/absmax propagate them, argmax/argmin pick the first NaN),
ties (the first index wins even when the tied elements sit in different threads), rows
of only -inf/+inf, K = 0 (identities), int32/int64/bool inputs, and float16 against a
float32 NumPy reference. The PTX check (skipped under the simulator) compiles every
kernel of the module for its example signatures.
"""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cuda import reduce as R  # noqa: E402
from numbagrad.kernels.cuda._launch import ROW_TPB  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
SHAPES = [(2, 5, 1), (2, 5, 3), (1, 17, 1)]
FLOAT_OPS = ["sum", "prod", "max", "min", "any", "all", "argmax", "argmin", "sumsq", "abssum", "absmax"]
TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-14),
       np.float16: dict(rtol=2e-3, atol=1e-3)}
SCAN_TOL = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-13),
            np.float16: dict(rtol=2e-3, atol=2e-3)}
STRATEGIES = pytest.mark.parametrize("rows", [True, False], ids=["rows", "cols"])


def _numpy_reduce(x, op, out_dtype):
    """NumPy's answer over axis 1 (float16 inputs are reduced in float32, as the kernels do)."""
    if x.dtype == np.float16:
        x = x.astype(np.float32)
    if op == "sum":
        r = np.sum(x, axis=1, dtype=out_dtype if np.dtype(out_dtype).kind != "f" else None)
    elif op == "prod":
        r = np.prod(x, axis=1, dtype=out_dtype if np.dtype(out_dtype).kind != "f" else None)
    elif op == "sumsq":
        r = np.sum(x * x, axis=1)
    elif op == "abssum":
        r = np.sum(np.abs(x), axis=1)
    elif op == "absmax":
        r = np.max(np.abs(x), axis=1)
    else:
        r = getattr(np, op)(x, axis=1)
    return np.asarray(r).astype(out_dtype)


def _out_dtype(op, x_dtype):
    if op in ("any", "all"):
        return np.bool_
    if op in ("argmax", "argmin"):
        return np.int64
    if op in ("sum", "prod") and np.dtype(x_dtype).kind in "biu":
        return np.int64
    return x_dtype


def _cuda_reduce(x, op, rows=None, out_dtype=None):
    out_dtype = out_dtype or _out_dtype(op, x.dtype)
    A, K, B = x.shape
    xd = cuda.to_device(np.ascontiguousarray(x))
    od = cuda.to_device(np.zeros((A, B), out_dtype))
    if rows is None:
        R.reduce_mid(xd, od, op)
    else:
        R._reduce_mid(xd, od, op, rows)
    return od.copy_to_host()


def _check(x, op, rows, out_dtype=None):
    out_dtype = out_dtype or _out_dtype(op, x.dtype)
    got = _cuda_reduce(x, op, rows, out_dtype)
    ref = _numpy_reduce(x, op, out_dtype)
    assert got.dtype == np.dtype(out_dtype), (op, got.dtype)
    if np.dtype(out_dtype).kind == "f":
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64),
                                   **TOL[np.dtype(x.dtype).type], err_msg=f"{op} rows={rows}")
    else:
        np.testing.assert_array_equal(got, ref, err_msg=f"{op} rows={rows}")
    return got


def _data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2.0, 2.0, shape)
    # near 1 in magnitude keeps prod of 17 factors well conditioned
    return x.astype(dtype)


@STRATEGIES
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_op_matches_numpy(shape, dtype, rows):
    x = _data(shape, dtype)
    x[..., 0, :] = 0  # a zero makes any/all differ
    for op in FLOAT_OPS:
        _check(x if op != "prod" else _data(shape, dtype, 1) * dtype(0.5) + dtype(1), op, rows)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_public_launcher_picks_a_strategy(shape):
    x = _data(shape, np.float32)
    for op in FLOAT_OPS:
        _check(x, op, None)


@STRATEGIES
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_nan_propagation_and_first_nan_index(dtype, rows):
    x = _data((2, 17, 1), dtype)
    x[0, 13, 0] = np.nan   # two NaNs in different threads (k mod ROW_TPB differs)
    x[0, 10, 0] = np.nan
    x[1, 16, 0] = np.nan   # the last element only
    for op in ("max", "min", "absmax", "sum", "sumsq"):
        got = _cuda_reduce(x, op, rows)
        assert np.isnan(got.astype(np.float64)).all(), op
    for op in ("argmax", "argmin"):
        got = _cuda_reduce(x, op, rows)
        np.testing.assert_array_equal(got.ravel(), [10, 16], err_msg=op)
        np.testing.assert_array_equal(got, _numpy_reduce(x, op, np.int64))
    x = np.zeros((1, 3, 2), dtype)
    x[0, 1, 0] = np.nan
    np.testing.assert_array_equal(_cuda_reduce(x, "any", rows), [[True, False]])
    np.testing.assert_array_equal(_cuda_reduce(x, "all", rows), [[False, False]])


@STRATEGIES
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_argmax_ties_take_the_first_index(dtype, rows):
    x = np.zeros((2, 17, 2), dtype)
    # ties at 3 and 9: in rows, thread 1 (9 = 1 + 8 under the simulator) holds the later
    # index and meets thread 3 in the tree; the lower index must win either way
    x[0, 3, :] = 5
    x[0, 9, :] = 5
    x[0, 16, 1] = 5
    x[1, 14, :] = -5     # argmin ties
    x[1, 2, :] = -5
    for op in ("argmax", "argmin", "max", "min"):
        _check(x, op, rows)
    ones = np.ones((1, 17, 1), dtype)   # every element ties: index 0
    assert _cuda_reduce(ones, "argmax", rows)[0, 0] == 0
    assert _cuda_reduce(ones, "argmin", rows)[0, 0] == 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # simulated threads overflow NumPy scalars
@STRATEGIES
def test_infinite_and_extreme_rows(rows):
    x = np.full((2, 9, 1), -np.inf, np.float32)
    x[1] = np.inf
    np.testing.assert_array_equal(_cuda_reduce(x, "max", rows), [[-np.inf], [np.inf]])
    np.testing.assert_array_equal(_cuda_reduce(x, "argmax", rows), [[0], [0]])
    np.testing.assert_array_equal(_cuda_reduce(x, "argmin", rows), [[0], [0]])
    xi = np.full((1, 9, 1), np.iinfo(np.int64).min, np.int64)
    assert _cuda_reduce(xi, "argmax", rows)[0, 0] == 0
    assert _cuda_reduce(xi, "max", rows)[0, 0] == np.iinfo(np.int64).min
    big = np.full((1, 5, 1), 3e38, np.float32)
    assert _cuda_reduce(big, "sum", rows)[0, 0] == np.inf


@STRATEGIES
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.bool_])
def test_empty_axis_gives_the_identity(dtype, rows):
    x = np.zeros((1, 0, 2), dtype)
    ops = ["sum", "prod", "any", "all"] + (["sumsq", "abssum"] if np.dtype(dtype).kind == "f" else [])
    for op in ops:
        if op == "prod" and dtype == np.bool_:
            continue
        _check(x, op, rows)


@STRATEGIES
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("shape", [(2, 5, 3), (1, 17, 1)], ids=str)
def test_int_and_bool_inputs(shape, dtype, rows):
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, shape).astype(dtype)
    if dtype == np.bool_:
        x[0, :, 0] = True   # an all-true output
    else:
        x[0, :, 0] = 2      # ... and a row whose prod is nonzero
    ops = ["sum", "any", "all", "max", "min", "argmax", "argmin"]
    if dtype != np.bool_:
        ops.append("prod")
    for op in ops:
        _check(x, op, rows)
    # int32 sum into int32 (an out dtype declared lazily)
    if dtype == np.int32:
        _check(x, "sum", rows, out_dtype=np.int32)


def test_int_sum_accumulates_in_out_dtype():
    x = np.full((1, 17, 1), 2 ** 30, np.int32)  # the sum overflows int32
    assert _cuda_reduce(x, "sum", True)[0, 0] == 17 * 2 ** 30
    assert _cuda_reduce(x, "sum", False)[0, 0] == 17 * 2 ** 30


def test_half_sum_accumulates_in_float32():
    x = np.full((1, 17, 3), 2048, np.float16)
    x[0, 1:, :] = 1   # 2048 + 1 rounds back to 2048 in float16; float32 keeps every 1
    for rows in (True, False):
        got = _cuda_reduce(x, "sum", rows)
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, np.float16(2048 + 16))


def test_many_outputs_per_block():
    """More outputs than blocks (the simulator's grid is one block): grid-stride rows."""
    x = _data((3, ROW_TPB + 1, 1), np.float64)
    for op in ("sum", "argmax", "max"):
        _check(x, op, True)


def test_unknown_op_raises():
    x = cuda.to_device(np.zeros((1, 2, 1), np.float32))
    with pytest.raises(ValueError, match="unknown op"):
        R.reduce_mid(x, cuda.to_device(np.zeros((1, 1), np.float32)), "median")
    with pytest.raises(ValueError, match="unknown op"):
        R.scan_mid(x, cuda.to_device(np.zeros((1, 2, 1), np.float32)), "max")


# ---- scans ---------------------------------------------------------------------------------------


def _cuda_scan(x, op, rows, out_dtype):
    xd = cuda.to_device(np.ascontiguousarray(x))
    od = cuda.to_device(np.zeros(x.shape, out_dtype))
    if rows is None:
        R.scan_mid(xd, od, op)
    else:
        R._scan_mid(xd, od, op, rows)
    return od.copy_to_host()


@pytest.mark.parametrize("rows", [True, False, None], ids=["rows", "cols", "auto"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("shape", SHAPES + [(1, 2 * ROW_TPB + 3, 1)], ids=str)
def test_scan_matches_numpy(shape, dtype, rows):
    for op, ref_fn in (("sum", np.cumsum), ("prod", np.cumprod)):
        x = _data(shape, dtype, 2)
        if op == "prod":
            x = (x * dtype(0.25) + dtype(1)).astype(dtype)
        got = _cuda_scan(x, op, rows, dtype)
        ref = ref_fn(x.astype(np.float64 if dtype == np.float64 else np.float32), axis=1)
        assert got.dtype == dtype
        np.testing.assert_allclose(got.astype(np.float64), ref, **SCAN_TOL[dtype], err_msg=op)


@pytest.mark.parametrize("rows", [True, False], ids=["rows", "cols"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_scan_int_and_bool(dtype, rows):
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 4, (2, 17, 1) if rows else (2, 5, 3)).astype(dtype)
    np.testing.assert_array_equal(_cuda_scan(x, "sum", rows, np.int64), np.cumsum(x, axis=1))
    if dtype != np.bool_:
        np.testing.assert_array_equal(_cuda_scan(x, "prod", rows, np.int64),
                                      np.cumprod(x, axis=1, dtype=np.int64))


def test_scan_nan_and_empty():
    x = _data((1, 17, 2), np.float32)
    x[0, 9, 0] = np.nan
    for rows in (True, False):
        got = _cuda_scan(x, "sum", rows, np.float32)
        assert not np.isnan(got[0, :9, 0]).any() and np.isnan(got[0, 9:, 0]).all()
        np.testing.assert_allclose(got[0, :, 1], np.cumsum(x[0, :, 1]), **SCAN_TOL[np.float32])
        assert _cuda_scan(np.zeros((2, 0, 1), np.float32), "sum", rows, np.float32).shape == (2, 0, 1)


# ---- PTX -----------------------------------------------------------------------------------------
