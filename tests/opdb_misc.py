"""Rows of the op table (``tests/opdb.py``) for ``numbagrad/ops/misc_ops.py``;
``opdb.py`` appends ``ROWS`` to ``OPS`` and ``NO_ROW`` to its ``NO_ROW``.

Each row's ``fn`` and ``torch_fn`` come from one function of the library (``opdb.lib_row``), so the
PyTorch parity check runs the same call; the references are float64 NumPy below, written
independently of the library (``ufunc.at`` loops, NumPy's ``trapezoid``/``cov``/``corrcoef``)."""
import numpy as np

import numbagrad as ng
from opdb import Op, randn, pos, I, lib_row



_row = lib_row


# ---- float64 NumPy references ------------------------------------------------------------------
def _index_copy(x, axis, idx, src):
    out = np.array(x, copy=True)
    for i, j in enumerate(idx):
        np.moveaxis(out, axis, 0)[j] = np.moveaxis(src, axis, 0)[i]
    return out


def _index_fill(x, axis, idx, v):
    out = np.array(x, copy=True)
    np.moveaxis(out, axis, 0)[np.asarray(idx)] = v
    return out


def _scatter_reduce(x, axis, idx, src, reduce, include_self=True):
    """Loop over every entry of ``idx`` (``axis`` 0 or 1 of 2-d arrays)."""
    out = np.array(x, copy=True)
    groups = {}
    for pos_ in np.ndindex(idx.shape):
        t = list(pos_)
        t[axis] = idx[pos_]
        groups.setdefault(tuple(t), []).append(src[pos_])
    for t, vals in groups.items():
        vals = ([x[t]] if include_self else []) + vals
        out[t] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](vals)
    return out


def _cumtrapz(y, dx, axis):
    n = y.shape[axis]
    a, b = np.take(y, range(1, n), axis), np.take(y, range(n - 1), axis)
    return np.cumsum((a + b) / 2 * dx, axis)


def _nanmedian(x):
    v = np.sort(x[~np.isnan(x)])
    return v[(v.size - 1) // 2]


def _nanmedian_dim(x, axis):
    xm = np.moveaxis(x, axis, -1)
    vals = np.empty(xm.shape[:-1])
    idx = np.empty(xm.shape[:-1], np.int64)
    for p in np.ndindex(xm.shape[:-1]):
        row = xm[p]
        ok = np.flatnonzero(~np.isnan(row))
        order = ok[np.argsort(row[ok], kind="stable")]
        idx[p] = order[(order.size - 1) // 2]
        vals[p] = row[idx[p]]
    return vals, idx


a34, a234, a4 = randn(3, 4, seed=401), randn(2, 3, 4, seed=402), randn(4, seed=403)
s24, s34 = randn(2, 4, seed=404), randn(3, 4, seed=405)
nan35 = randn(3, 5, seed=408)  # NaN inputs: strided=False (the strided copy check compares with ==)
nan35[0, 1] = nan35[1, 0] = nan35[1, 3] = nan35[2, 4] = np.nan
SRI = I(0, 2, 0, 1, 2, 2).reshape(2, 3)  # scatter_reduce index, duplicates in each column
INF = np.array([1.0, np.inf, -np.inf, np.nan, -2.0, 0.0])

ROWS = [
    _row("index_copy", lambda t, x, s: t.index_copy(x, 0, t.tensor([2, 0], device=x.device), s),
         lambda x, s: _index_copy(x, 0, [2, 0], s), [a34, s24],
         inplace=lambda x, s: ng.index_copy_(x, 0, ng.tensor([2, 0], device=x.device), s)),
    _row("index_copy-dim-neg", lambda t, x, s: t.index_copy(x, -1, t.tensor([3, 1, 0], device=x.device), s),
         lambda x, s: _index_copy(x, -1, [3, 1, 0], s), [a234, randn(2, 3, 3, seed=409)]),
    _row("index_fill", lambda t, x: t.index_fill(x, 1, t.tensor([3, -4], device=x.device), -1.5),
         lambda x: _index_fill(x.swapaxes(0, 1), 0, [3, 0], -1.5).swapaxes(0, 1), [a34],
         inplace=lambda x: ng.index_fill_(x, 1, ng.tensor([3, -4], device=x.device), -1.5)),
    _row("index_fill-tensor-value", lambda t, x, v: t.index_fill(x, 0, t.tensor([1, 1, 0], device=x.device), v),
         lambda x, v: _index_fill(x, 0, [1, 0], v), [a234, np.array(0.75)],
         cuda="a 0-d value input: the CUDA check hands it over reshaped; index_fill on CUDA: the rows above"),
] + [
    _row(f"scatter_reduce-{r}-{'self' if inc else 'noself'}",
         lambda t, x, s, r=r, inc=inc: t.scatter_reduce(x, 0, t.tensor(SRI, device=x.device), s, r,
                                                         include_self=inc),
         lambda x, s, r=r, inc=inc: _scatter_reduce(x, 0, SRI, s, r, inc),
         [pos(3, 4, seed=410), pos(2, 3, seed=411)] if r == "prod"
         else [a34, s24[:, :3]],
         inplace=(lambda x, s, r=r, inc=inc: ng.scatter_reduce_(x, 0, ng.tensor(SRI, device=x.device), s, r,
                                                                include_self=inc)) if r == "sum" else None)
    for r in ("sum", "mean", "amax", "amin", "prod") for inc in (True, False)
] + [
    _row("scatter_reduce-dim1-amax",
         lambda t, x, s: t.scatter_reduce(x, 1, t.tensor(SRI.T, device=x.device), s, "amax"),
         lambda x, s: _scatter_reduce(x, 1, SRI.T, s, "amax"), [s34[:3, :3], randn(3, 2, seed=412)]),
    _row("fmax", lambda t, a, b: t.fmax(a, b), np.fmax, [nan35, randn(3, 5, seed=413)], strided=False),
    _row("fmin", lambda t, a, b: t.fmin(a, b), np.fmin, [randn(3, 5, seed=414), nan35], strided=False),
    _row("fmax-broadcast", lambda t, a, b: t.fmax(a, b), np.fmax, [a34, a4]),
    _row("isposinf", lambda t, x: t.isposinf(x), np.isposinf, [INF], grad=False, strided=False),
    _row("isneginf", lambda t, x: t.isneginf(x), np.isneginf, [INF], grad=False, strided=False),
    _row("isreal", lambda t, x: t.isreal(x), np.isreal, [INF], grad=False, strided=False),
    _row("column_stack", lambda t, a, b, c: t.column_stack([a, b, c]),
         lambda a, b, c: np.column_stack([a, b, c]), [a4, a34.T, randn(4, seed=415)]),
    _row("dstack", lambda t, a, b: t.dstack([a, b]), lambda a, b: np.dstack([a, b]), [a34, s34]),
    _row("row_stack", lambda t, a, b: t.row_stack([a, b]), lambda a, b: np.vstack([a, b]), [a4, s34]),
    _row("trapezoid", lambda t, y: t.trapezoid(y), lambda y: np.trapezoid(y), [a34]),
    _row("trapezoid-x", lambda t, y, x: t.trapezoid(y, x, dim=1),
         lambda y, x: np.trapezoid(y, x, axis=1), [a234, randn(3, seed=416)]),
    _row("trapezoid-xfull-dim0", lambda t, y, x: t.trapezoid(y, x, dim=0),
         lambda y, x: np.trapezoid(y, x, axis=0), [a34, s34]),
    _row("trapz-dx", lambda t, y: t.trapz(y, dx=0.5, dim=0), lambda y: np.trapezoid(y, dx=0.5, axis=0), [a234]),
    _row("cumulative_trapezoid", lambda t, y: t.cumulative_trapezoid(y, dx=2.0),
         lambda y: _cumtrapz(y, 2.0, -1), [a34]),
    _row("cov", lambda t, x: t.cov(x), np.cov, [a34]),
    _row("cov-1d-correction0", lambda t, x: t.cov(x, correction=0), lambda x: np.cov(x, ddof=0), [a4]),
    _row("cov-weights", lambda t, x, w: t.cov(x, fweights=t.tensor([1, 3, 0, 2], device=x.device), aweights=w),
         lambda x, w: np.cov(x, fweights=[1, 3, 0, 2], aweights=w), [a34, pos(4, seed=417)]),
    _row("corrcoef", lambda t, x: t.corrcoef(x), np.corrcoef, [a34]),
    _row("nanmedian", lambda t, x: t.nanmedian(x), _nanmedian, [nan35], strided=False),
    _row("nanmedian-dim", lambda t, x: tuple(t.nanmedian(x, 1)), lambda x: _nanmedian_dim(x, 1), [nan35],
         strided=False),
]

NO_ROW = {
    "isin": "bool result of integer/exact comparisons: tests/ops/test_misc_ops.py::test_isin",
    "bincount": "integer input and counts: tests/ops/test_misc_ops.py::test_bincount",
    "histc": "counts, not differentiable: tests/ops/test_misc_ops.py::test_histc",
    "unique_consecutive": "integer inverse/counts, data-dependent shape: "
                          "tests/ops/test_misc_ops.py::test_unique_consecutive",
}
