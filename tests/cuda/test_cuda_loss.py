"""CUDA fused softmax + cross-entropy (``numbagrad/kernels/cuda/loss.py``) against the CPU
kernels, forward (prob, per-row loss / weight / ywsum, returned totals) and backward.

Cases: 4 rows x 7 classes with an ignored target, class weights on/off, label smoothing
on/off; a row of +-1e4 logits and a ``-inf`` logit; rows wider than ``ROW_TPB``; an
out-of-range target (counted, row skipped); a NaN logit (NaN row, as on the CPU); the
per-block partial totals split over several "virtual blocks". float16 is checked
against the float32 CPU kernels.
"""
import functools
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import loss as C  # noqa: E402
from numbagrad.kernels.cuda import loss as G  # noqa: E402
from numbagrad.kernels.cuda._launch import ROW_TPB  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
IGN = -100
TOL = {np.float32: dict(rtol=2e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}
TOL16 = dict(rtol=2e-2, atol=2e-3)


def _logits(n, c, dtype, seed=0, extremes=True):
    x = np.random.default_rng(seed).standard_normal((n, c)) * 3
    if extremes and n >= 3 and c >= 3:
        x[1, ::2] = 1e4            # exp(x) alone would overflow
        x[1, 1::2] = -1e4
        x[2, 1] = -np.inf          # probability exactly 0 (not the target)
    return np.ascontiguousarray(x.astype(dtype)).reshape(-1)


def _targets(n, c):
    t = np.arange(n, dtype=np.int64) * 3 % c
    t[min(3, n - 1)] = IGN        # an ignored row
    return t


def _weight(c, dtype, has_weight):
    if not has_weight:
        return np.empty(0, dtype)
    return (np.random.default_rng(5).random(c) + 0.5).astype(dtype)


def _to(a):
    return cuda.to_device(a)


def _run(mod, kernels, args, n_out):
    """The CPU kernel of the pair ``kernels`` (``mod is C``) or its CUDA twin on ``args``
    (arrays moved to the device for CUDA); returns its result and the host values of the
    last ``n_out`` arguments (the outputs)."""
    cpu, gpu = kernels
    if mod is C:
        return (cpu(*args),) + tuple(args[-n_out:])
    args = [_to(a) if isinstance(a, np.ndarray) else a for a in args]
    return (gpu(*args),) + tuple(a.copy_to_host() for a in args[-n_out:])


def _fwd(mod, x, t, w, smoothing, c, dtype):
    n = t.size
    outs = np.zeros(n * c, dtype), np.zeros(n, dtype), np.zeros(n, dtype)   # prob, loss, row_w
    return _run(mod, (C._cross_entropy_fwd_cpu, G._cross_entropy_fwd_cuda),
                [x, t, w, w.size > 0, IGN, smoothing, c, *outs], 3)


def _bwd(mod, prob, t, w, smoothing, c, gout, per_row, dtype):
    return _run(mod, (C._cross_entropy_bwd_cpu, G._cross_entropy_bwd_cuda),
                [prob, t, w, w.size > 0, IGN, smoothing, c, gout, per_row, np.zeros(prob.size, dtype)], 1)[1]


def _soft_y(n, c, dtype, seed=3):
    y = np.random.default_rng(seed).random((n, c))
    y[0, 1] = 0.0                  # a zero target probability
    return np.ascontiguousarray((y / y.sum(1, keepdims=True)).astype(dtype)).reshape(-1)


def _soft_fwd(mod, x, y, w, smoothing, c, dtype):
    n = y.size // c
    outs = np.zeros(n * c, dtype), np.zeros(n, dtype), np.zeros(n, dtype)   # prob, loss, yws
    return _run(mod, (C._cross_entropy_soft_fwd_cpu, G._cross_entropy_soft_fwd_cuda),
                [x, y, w, w.size > 0, smoothing, c, *outs], 3)


def _soft_bwd(mod, prob, y, w, smoothing, c, yws, gout, per_row, dtype):
    return _run(mod, (C._cross_entropy_soft_bwd_cpu, G._cross_entropy_soft_bwd_cuda),
                [prob, y, w, w.size > 0, smoothing, c, yws, gout, per_row, np.zeros(prob.size, dtype)], 1)[1]


def _check_totals(got, ref, tol):
    total, wtot, nbad = got
    assert type(total) is np.float64 and type(wtot) is np.float64 and type(nbad) is np.int64
    np.testing.assert_allclose([total, wtot], [ref[0], ref[1]], **tol)
    assert nbad == ref[2]


def _check_arrays(got, ref, tol, dtype):
    """A forward's arrays after its totals (prob, per-row loss, then per-row weight or
    ``ywsum``): the device's, in ``dtype``, against the CPU's."""
    for g, r in zip(got[1:], ref[1:]):
        assert g.dtype == np.dtype(dtype)
        np.testing.assert_allclose(g.astype(r.dtype), r, **tol)


SHAPES = [(4, 7), (4, 2 * ROW_TPB + 3)]


def _grid(smoothings):
    """The matches-the-CPU grid of both kinds of target: dtype x shape x class weights x
    label smoothing (``smoothings``)."""
    marks = [pytest.mark.parametrize("smoothing", smoothings), pytest.mark.parametrize("has_weight", [False, True]),
             pytest.mark.parametrize("shape", SHAPES, ids=str),
             pytest.mark.parametrize("dtype", [np.float32, np.float64])]
    return lambda test: functools.reduce(lambda fn, mark: mark(fn), reversed(marks), test)


# ---- class-index targets ------------------------------------------------------------------------
@_grid([0.0, 0.1])
def test_cross_entropy_matches_cpu(dtype, shape, has_weight, smoothing):
    n, c = shape
    x, t, w = _logits(n, c, dtype), _targets(n, c), _weight(c, dtype, has_weight)
    ref = _fwd(C, x, t, w, smoothing, c, dtype)
    got = _fwd(G, x, t, w, smoothing, c, dtype)
    _check_totals(got[0], ref[0], TOL[dtype])
    _check_arrays(got, ref, TOL[dtype], dtype)
    assert np.isfinite(got[2]).all() == (smoothing == 0.0)  # smoothing meets the -inf logit
    prob = ref[1]
    for per_row, gout in [(True, np.linspace(-1, 2, n).astype(dtype)), (False, np.array([0.7], dtype))]:
        gr = _bwd(C, prob, t, w, smoothing, c, gout, per_row, dtype)
        gg = _bwd(G, prob, t, w, smoothing, c, gout, per_row, dtype)
        np.testing.assert_allclose(gg, gr, **TOL[dtype])
        assert (gg.reshape(n, c)[3] == 0).all()  # ignored row


def test_cross_entropy_out_of_range_targets_counted():
    n, c = 4, 7
    x = _logits(n, c, np.float32, extremes=False)
    t = np.array([7, IGN, -3, 2], np.int64)  # two bad, one ignored
    w = _weight(c, np.float32, True)
    ref = _fwd(C, x, t, w, 0.05, c, np.float32)
    got = _fwd(G, x, t, w, 0.05, c, np.float32)
    _check_totals(got[0], ref[0], TOL[np.float32])
    assert got[0][2] == 2
    _check_arrays(got, ref, TOL[np.float32], np.float32)


def test_cross_entropy_nan_logit_gives_nan_row():
    n, c = 3, 5
    x = _logits(n, c, np.float64, extremes=False).reshape(n, c)
    x[1, 3] = np.nan
    x = x.reshape(-1)
    t = np.array([0, 1, 2], np.int64)
    w = _weight(c, np.float64, False)
    ref = _fwd(C, x, t, w, 0.0, c, np.float64)
    got = _fwd(G, x, t, w, 0.0, c, np.float64)
    assert np.isnan(got[0][0]) and np.isnan(ref[0][0])
    np.testing.assert_allclose(got[2], ref[2], **TOL[np.float64])  # NaN where the CPU has NaN
    assert np.isnan(got[1].reshape(n, c)[1]).all() and np.isfinite(got[1].reshape(n, c)[[0, 2]]).all()


def test_cross_entropy_partial_totals_over_virtual_blocks(monkeypatch):
    # Three interleaved row groups whatever the grid (one block under the simulator).
    monkeypatch.setattr(G, "MAX_BLOCKS", 3)
    n, c = 7, 5
    x, t, w = _logits(n, c, np.float64), _targets(n, c), _weight(c, np.float64, True)
    t[5] = 99
    ref = _fwd(C, x, t, w, 0.1, c, np.float64)
    got = _fwd(G, x, t, w, 0.1, c, np.float64)
    _check_totals(got[0], ref[0], TOL[np.float64])
    np.testing.assert_allclose(got[2], ref[2], **TOL[np.float64])


def test_cross_entropy_empty_batch():
    z = np.zeros(0, np.float32)
    got = G._cross_entropy_fwd_cuda(_to(z), _to(np.zeros(0, np.int64)), _to(z), False, IGN, 0.0, 4,
                                    _to(z), _to(z), _to(z))
    assert got == (0.0, 0.0, 0) and type(got[2]) is np.int64


@pytest.mark.parametrize("has_weight", [False, True])
def test_cross_entropy_float16_matches_float32_cpu(has_weight):
    n, c = 4, 7
    x16 = _logits(n, c, np.float16, extremes=False)
    t = _targets(n, c)
    w16 = _weight(c, np.float16, has_weight)
    x32, w32 = x16.astype(np.float32), w16.astype(np.float32)
    ref = _fwd(C, x32, t, w32, 0.1, c, np.float32)
    got = _fwd(G, x16, t, w16, 0.1, c, np.float16)
    _check_totals(got[0], ref[0], TOL16)
    _check_arrays(got, ref, TOL16, np.float16)
    gout = np.linspace(-1, 2, n)
    gr = _bwd(C, ref[1], t, w32, 0.1, c, gout.astype(np.float32), True, np.float32)
    gg = _bwd(G, ref[1].astype(np.float16), t, w16, 0.1, c, gout.astype(np.float16), True, np.float16)
    np.testing.assert_allclose(gg.astype(np.float32), gr, **TOL16)


# ---- probability targets ----------------------------------------------------------------------
@_grid([0.0, 0.2])
def test_soft_cross_entropy_matches_cpu(dtype, shape, has_weight, smoothing):
    n, c = shape
    x, y, w = _logits(n, c, dtype, extremes=False), _soft_y(n, c, dtype), _weight(c, dtype, has_weight)
    x.reshape(n, c)[1, ::2] += 30.0  # a confident row: lse - x_c small for the large logits
    ref = _soft_fwd(C, x, y, w, smoothing, c, dtype)
    got = _soft_fwd(G, x, y, w, smoothing, c, dtype)
    assert type(got[0]) is np.float64
    np.testing.assert_allclose(got[0], ref[0], **TOL[dtype])
    _check_arrays(got, ref, TOL[dtype], dtype)
    prob, yws = ref[1], ref[3]
    for per_row, gout in [(True, np.linspace(-1, 2, n).astype(dtype)), (False, np.array([0.3], dtype))]:
        gr = _soft_bwd(C, prob, y, w, smoothing, c, yws, gout, per_row, dtype)
        gg = _soft_bwd(G, prob, y, w, smoothing, c, yws, gout, per_row, dtype)
        np.testing.assert_allclose(gg, gr, **TOL[dtype])


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # 0 * inf under the simulator
def test_soft_cross_entropy_extremes_and_virtual_blocks(monkeypatch):
    monkeypatch.setattr(G, "MAX_BLOCKS", 2)
    n, c = 5, 6
    x, y, w = _logits(n, c, np.float64), _soft_y(n, c, np.float64), _weight(c, np.float64, True)
    y.reshape(n, c)[2, 1] = 0.0  # (zero target) x (-inf logit) -> NaN, on both targets
    ref = _soft_fwd(C, x, y, w, 0.0, c, np.float64)
    got = _soft_fwd(G, x, y, w, 0.0, c, np.float64)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, **TOL[np.float64])
    assert np.isfinite(got[2][[0, 1, 3, 4]]).all()


def test_soft_cross_entropy_float16_matches_float32_cpu():
    n, c = 4, 7
    x16, y16, w16 = _logits(n, c, np.float16, extremes=False), _soft_y(n, c, np.float16), _weight(c, np.float16, True)
    x32, y32, w32 = (a.astype(np.float32) for a in (x16, y16, w16))
    ref = _soft_fwd(C, x32, y32, w32, 0.1, c, np.float32)
    got = _soft_fwd(G, x16, y16, w16, 0.1, c, np.float16)
    np.testing.assert_allclose(got[0], ref[0], **TOL16)
    _check_arrays(got, ref, TOL16, np.float16)
    gout = np.array([0.5], np.float32)
    gr = _soft_bwd(C, ref[1], y32, w32, 0.1, c, ref[3], gout, False, np.float32)
    gg = _soft_bwd(G, ref[1].astype(np.float16), y16, w16, 0.1, c, ref[3].astype(np.float16),
                   gout.astype(np.float16), False, np.float16)
    np.testing.assert_allclose(gg.astype(np.float32), gr, **TOL16)


# ---- PTX: every kernel of the module compiles (no simulator) -----------------------------------
