"""Rows of the op table (``tests/opdb.py``) for ``numbagrad/ops/scan.py``;
``opdb.py`` appends ``ROWS`` to ``OPS`` and ``NO_ROW`` to its ``NO_ROW``.

Each row's ``fn`` and ``torch_fn`` come from one function of the library (``opdb.lib_row``), so the
PyTorch parity check runs the same call; the references are float64 NumPy below."""
import numpy as np

import numbagrad as ng
from opdb import Op, randn, I, lib_row



_row = lib_row


# ---- float64 NumPy references ------------------------------------------------------------------
def _cum_ext(x, axis, largest):
    """Running max (min) and torch's index (the last of tied extremes) along ``axis``."""
    xm = np.moveaxis(x, axis, 0)
    vals, idx = np.empty_like(xm), np.empty(xm.shape, np.int64)
    for pos in np.ndindex(xm.shape[1:]):
        best, bi = None, 0
        for i in range(xm.shape[0]):
            v = xm[(i,) + pos]
            if best is None or (v >= best if largest else v <= best):
                best, bi = v, i
            vals[(i,) + pos], idx[(i,) + pos] = best, bi
    return np.moveaxis(vals, 0, axis), np.moveaxis(idx, 0, axis)


def _median_dim(x, axis, keepdim=False):
    k = (x.shape[axis] - 1) // 2
    idx = np.take(np.argsort(x, axis=axis, kind="stable"), [k], axis=axis)
    vals = np.take_along_axis(x, idx, axis)
    return (vals, idx) if keepdim else (vals.squeeze(axis), idx.squeeze(axis))


def _rot90(x, k, dims):
    return np.rot90(x, k, axes=dims)


def _repeat(x, reps, axis):
    return np.repeat(x, reps, axis=axis)


def _split(x, arg, axis):
    if isinstance(arg, int):
        return tuple(np.array_split(x, arg, axis=axis))
    return tuple(np.split(x, arg, axis=axis))


a34, a234, a24 = randn(3, 4, seed=301), randn(2, 3, 4, seed=302), randn(2, 4, seed=303)
z34 = a34.copy()
z34[0, 1] = z34[1, 0] = z34[1, 2] = z34[2, 3] = 0.0  # one zero, two zeros, a trailing zero
nan34 = np.where(np.abs(a34) > 1.0, np.nan, a34)
nan34[2, :] = np.nan  # an all-NaN row

ROWS = [
    _row("repeat_interleave", lambda t, x: t.repeat_interleave(x, 2, dim=1),
         lambda x: _repeat(x, 2, 1), [a24]),
    _row("repeat_interleave-tensor", lambda t, x, r: t.repeat_interleave(x, t.as_tensor(r), dim=0),
         lambda x, r: _repeat(x, r, 0), [a34, I(1, 0, 2)]),
    _row("repeat_interleave-flat", lambda t, x: t.repeat_interleave(x, 2), lambda x: np.repeat(x.ravel(), 2),
         [a24]),
    _row("repeat_interleave-indices", lambda t, r: t.repeat_interleave(t.as_tensor(r)), lambda r: np.repeat(np.arange(3), r),
         [I(2, 0, 3)], grad=False),
    _row("tensor_split", lambda t, x: t.tensor_split(x, 3, dim=1), lambda x: _split(x, 3, 1), [a24]),
    _row("tensor_split-indices", lambda t, x: t.tensor_split(x, [1, 3], dim=-1),
         lambda x: _split(x, [1, 3], -1), [a234]),
    _row("hsplit", lambda t, x: t.hsplit(x, 2), lambda x: _split(x, 2, 1), [a24]),
    _row("vsplit", lambda t, x: t.vsplit(x, [1]), lambda x: _split(x, [1], 0), [a34]),
    _row("dsplit", lambda t, x: t.dsplit(x, 2), lambda x: _split(x, 2, 2), [a234]),
    _row("diff", lambda t, x: t.diff(x), lambda x: np.diff(x), [a34]),
    _row("diff-n2-dim0-prepend-append", lambda t, x, p, q: t.diff(x, 2, 0, prepend=p, append=q),
         lambda x, p, q: np.diff(x, 2, 0, prepend=p, append=q), [a24, randn(1, 4, seed=304), randn(2, 4, seed=305)]),
    _row("nansum", lambda t, x: t.nansum(x, 1), lambda x: np.nansum(x, 1), [nan34], strided=False),
    _row("nansum-all", lambda t, x: t.nansum(x), np.nansum, [nan34], strided=False),
    _row("nanmean", lambda t, x: t.nanmean(x, 0, keepdim=True), lambda x: np.nanmean(x, 0, keepdims=True),
         [np.where(np.abs(a34) > 1.0, np.nan, a34)], strided=False),
    _row("count_nonzero", lambda t, x: t.count_nonzero(x, (0, 2)), lambda x: np.count_nonzero(x, (0, 2)),
         [np.round(a234)], grad=False),
    _row("cumprod", lambda t, x: t.cumprod(x, 1), lambda x: np.cumprod(x, 1), [a34],
         inplace=lambda x: ng.cumprod_(x, 1), noncontig=True),
    _row("cumprod-zeros", lambda t, x: t.cumprod(x, -1), lambda x: np.cumprod(x, -1), [z34]),
    _row("cumprod-dim0", lambda t, x: t.cumprod(x, 0), lambda x: np.cumprod(x, 0), [a234]),
    _row("cummax", lambda t, x: tuple(t.cummax(x, 1)), lambda x: _cum_ext(x, 1, True), [a34]),
    _row("cummin", lambda t, x: tuple(t.cummin(x, 0)), lambda x: _cum_ext(x, 0, False), [a234]),
    _row("logcumsumexp", lambda t, x: t.logcumsumexp(x, 1), lambda x: np.logaddexp.accumulate(x, 1),
         [a34 * 30]),
    _row("logcumsumexp-dim0", lambda t, x: t.logcumsumexp(x, 0), lambda x: np.logaddexp.accumulate(x, 0), [a234]),
    _row("aminmax", lambda t, x: tuple(t.aminmax(x)), lambda x: (np.min(x), np.max(x)), [a34]),
    _row("aminmax-dim", lambda t, x: tuple(t.aminmax(x, dim=1, keepdim=True)),
         lambda x: (np.min(x, 1, keepdims=True), np.max(x, 1, keepdims=True)), [a234]),
    _row("fliplr", lambda t, x: t.fliplr(x), np.fliplr, [a34]),
    _row("flipud", lambda t, x: t.flipud(x), np.flipud, [a234]),
    _row("rot90", lambda t, x: t.rot90(x), lambda x: _rot90(x, 1, (0, 1)), [a34]),
    _row("rot90-k3-dims", lambda t, x: t.rot90(x, -1, (2, 0)), lambda x: _rot90(x, -1, (2, 0)), [a234]),
    _row("rot90-k2", lambda t, x: t.rot90(x, 2, (1, 2)), lambda x: _rot90(x, 2, (1, 2)), [a234]),
    _row("msort", lambda t, x: t.msort(x), lambda x: np.sort(x, 0), [a34]),
    _row("median", lambda t, x: t.median(x), lambda x: np.sort(x.ravel())[(x.size - 1) // 2], [a34]),
    _row("median-dim", lambda t, x: tuple(t.median(x, 1)), lambda x: _median_dim(x, 1), [a34]),
    _row("median-dim-keepdim", lambda t, x: tuple(t.median(x, 0, keepdim=True)),
         lambda x: _median_dim(x, 0, True), [a234]),
]

NO_ROW = {}
