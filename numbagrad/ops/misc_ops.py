"""More tensor ops under PyTorch's names: ``index_copy``/``index_fill``, ``scatter_reduce``,
``isin``, ``fmax``/``fmin``, ``isposinf``/``isneginf``/``isreal``, ``bincount``, ``histc``,
``column_stack``/``dstack``/``row_stack``, ``trapezoid``/``trapz``/``cumulative_trapezoid``,
``cov``/``corrcoef``, ``unique_consecutive`` and ``nanmedian``.

How it works, and why
---------------------
* The differentiable ops are compositions of existing differentiable ops, so gradients and
  the CUDA backend come from those: ``index_copy`` is a ``scatter`` with the index vector
  broadcast over the other dimensions (built on the device with the backend's
  ``broadcast_to``), ``index_fill`` a ``scatter`` of a scalar (or of a 0-d tensor expanded, so
  it gets a gradient; the index is made unique first, as torch's gradient for ``value`` is),
  ``fmax(a, b)`` is ``where((a >= b) | isnan(b), a, b)`` (all of a tie's gradient goes to
  ``a``, as torch's), ``trapezoid`` is ``narrow``/``add``/``mul``/``sum``, ``cov`` is a
  weighted mean and a ``matmul``, ``corrcoef`` divides by the ``sqrt`` of its diagonal.
* ``scatter_reduce`` has no scatter-max kernel to compose from, so it is one ``Function``
  whose forward and backward run NumPy's unbuffered ``ufunc.at`` on the host (a CUDA array
  is copied there and back). Backward is torch's: ``sum`` passes the gradient, ``mean``
  divides it by the count, ``amax``/``amin`` share it evenly among every operand (input
  entry and source entries) equal to the result, ``prod`` is ``g * result / x`` (it refuses
  inputs holding zeros there); with ``include_self=False`` the input's gradient is zero
  wherever something was scattered.
* Integer-valued and counting ops (``isin``, ``bincount``, ``histc``,
  ``unique_consecutive``) compute on the host with NumPy and return a tensor on the input's
  device; they record no graph, as in torch.
* ``nanmedian`` is :func:`~numbagrad.ops.scan.median` with NaN sorted last and ignored:
  the index of the lower median among the non-NaN entries, the values a differentiable
  ``gather``; over all elements the gradient is spread evenly over ties.
* Every index argument is checked (dtype, shape, range: ``ops/_check.py``) before any op
  sees it: numba does not bounds-check.
"""
import collections
import math
import warnings

import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from ._check import check_index
from ._util import as_tensor_arg, broadcast_shape, wrap_dim
from . import elementwise as ew
from . import reduce as red
from . import shape as sh
from .indexing import _index_arg, _src_arg, _check_gather_shapes, scatter
from .matmul import matmul
from .scan import _MedianAll, _host_array, _median_like, _on

__all__ = ["index_copy", "index_copy_", "index_fill", "index_fill_", "scatter_reduce", "scatter_reduce_", "isin",
           "fmax", "fmin", "isposinf", "isneginf", "isreal", "bincount", "histc", "column_stack", "dstack",
           "row_stack", "trapezoid", "trapz", "cumulative_trapezoid", "cov", "corrcoef", "unique_consecutive",
           "nanmedian"]

METHODS = ("index_copy", "index_copy_", "index_fill", "index_fill_", "scatter_reduce", "scatter_reduce_", "fmax",
           "fmin", "isposinf", "isneginf", "isreal", "bincount", "histc", "cov", "corrcoef", "unique_consecutive",
           "nanmedian")
"""Names in ``__all__`` that are also ``Tensor`` methods (in-place ``name_`` forms included);
bound by ``tensor._install_operators``."""

_NanMedian = collections.namedtuple("nanmedian", ["values", "indices"])


# ---- helpers -----------------------------------------------------------------------------------
def _tensor(opname, x, what="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{opname}(): argument '{what}' must be Tensor, not {type(x).__name__}")
    return x


def _int64_vector(opname, index, input, n, dim, negative_ok=False):
    """``index`` as a checked int64 backend vector on ``input``'s device, in ``[0, n)``
    (``[-n, n)`` wrapped with ``negative_ok``)."""
    if isinstance(index, Tensor) and index.dtype != _dtype.int64:
        raise RuntimeError(f"{opname}: Expected a long tensor for index, but got {index.dtype}")
    idx = _index_arg(index, opname, like=input.array)
    if idx.ndim > 1:
        raise RuntimeError(f"{opname}: Index has to be a vector/scalar, got shape {tuple(idx.shape)}")
    idx = idx.reshape(-1)
    check_index(opname, idx, n, dim, input.shape, allow_negative=negative_ok)
    if negative_ok and idx.size and int(idx.min()) < 0:
        idx = idx + (idx < 0) * n
    return idx


def _spread(idx, dim, shape):
    """The index vector ``idx`` broadcast to ``shape`` (``shape[dim] == idx.size``) along ``dim``,
    as a contiguous int64 Tensor on ``idx``'s device: the ``scatter`` index of an ``index_*`` op."""
    be = backend_of(idx)
    view = idx.reshape(tuple(-1 if d == dim else 1 for d in range(len(shape))))
    return Tensor._from_array(be.copy(be.broadcast_to(view, tuple(shape))))


# ---- index_copy / index_fill -------------------------------------------------------------------
def _index_copy_args(opname, input, dim, index, source):
    input = as_tensor_arg(input, opname)
    source = _src_arg(source, opname, input)
    if source.dtype != input.dtype:
        raise RuntimeError(f"{opname}: self ({input.dtype}) and source ({source.dtype}) must have the same "
                           "scalar type")
    dim = wrap_dim(dim, input.ndim, opname)
    shape = tuple(input.shape) or (1,)
    idx = _int64_vector(opname, index, input, shape[dim], dim)
    sshape = tuple(source.shape) or (1,)
    if len(sshape) != len(shape):
        raise IndexError(f"{opname}: When source and destination are not scalars, their dimensionality must "
                         f"match. Source dimensionality ({source.ndim}), destination dimensionality ({input.ndim})")
    if sshape[dim] != idx.size:
        raise IndexError(f"{opname}: Number of indices ({idx.size}) should be equal to source.size(dim) "
                         f"({sshape[dim]})")
    if any(a != b for d, (a, b) in enumerate(zip(sshape, shape)) if d != dim):
        raise RuntimeError(f"{opname}: source of shape {tuple(source.shape)} does not match input of shape "
                           f"{tuple(input.shape)} outside dimension {dim}")
    return input, source, dim, idx


def _index_copy(input, source, dim, idx):
    x = input if input.ndim else sh.reshape(input, (1,))
    s = sh.reshape(source, tuple(x.shape[:dim]) + (idx.size,) + tuple(x.shape[dim + 1:]))
    out = scatter(x, dim, _spread(idx, dim, s.shape), s)
    return out if input.ndim else sh.reshape(out, ())


def index_copy(input, dim, index, source):
    """A copy of ``input`` with the slices ``source[.., i, ..]`` written at ``index[i]`` along ``dim``.

    Parameters
    ----------
    input : Tensor
    dim : int
    index : Tensor
        int64 vector, entries in ``[0, input.size(dim))``.
    source : Tensor
        Same dtype as ``input``; its shape is ``input``'s with ``index.numel()`` at ``dim``.

    Returns
    -------
    Tensor, differentiable in ``input`` (zero gradient at the overwritten slices) and ``source``
    (the gradient's slices at ``index``). With duplicate indices the last one wins.
    """
    input, source, dim, idx = _index_copy_args("index_copy", input, dim, index, source)
    return _index_copy(input, source, dim, idx)


def index_copy_(input, dim, index, source):
    """In-place :func:`index_copy`: ``input`` holds the result and is returned."""
    input, source, dim, idx = _index_copy_args("index_copy_", input, dim, index, source)
    return input._inplace_result("index_copy_", _index_copy(input, source, dim, idx))


def _index_fill_args(opname, input, dim, index, value):
    input = as_tensor_arg(input, opname)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"{opname} only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
    elif isinstance(value, (bool, int, float, np.number, np.bool_)):
        value = input.array.dtype.type(value)
    else:
        raise TypeError(f"{opname}(): argument 'value' must be a number or a 0-d Tensor, "
                        f"not {type(value).__name__}")
    if isinstance(index, Tensor) and index.dtype != _dtype.int64:
        raise IndexError(f"{opname}(): Expected dtype int64 for index.")
    dim = wrap_dim(dim, input.ndim, opname)
    shape = tuple(input.shape) or (1,)
    idx = _int64_vector(opname, index, input, shape[dim], dim, negative_ok=True)
    if idx.size:
        idx = _on(input, np.unique(backend_of(idx).to_numpy(idx)).astype(np.int64))  # value's grad counts each once
        idx = idx.array
    return input, dim, idx, value


def _index_fill(input, dim, idx, value):
    if idx.size == 0:
        return sh.clone(input)
    x = input if input.ndim else sh.reshape(input, (1,))
    spread = _spread(idx, dim, tuple(x.shape[:dim]) + (idx.size,) + tuple(x.shape[dim + 1:]))
    if isinstance(value, Tensor):
        v = value if value.dtype == x.dtype else sh.cast(value, x.dtype)
        out = scatter(x, dim, spread, sh.expand(v, spread.shape))
    else:
        out = scatter(x, dim, spread, value=value)
    return out if input.ndim else sh.reshape(out, ())


def index_fill(input, dim, index, value):
    """A copy of ``input`` with ``value`` written at the positions ``index`` along ``dim``.

    Parameters
    ----------
    input : Tensor
    dim : int
    index : Tensor
        int64 vector (0-d or 1-d); negative entries count from the end.
    value : number or 0-d Tensor
        A 0-d tensor receives the gradient summed over the filled entries (each index once).

    Returns
    -------
    Tensor, differentiable in ``input`` (zero where filled) and a tensor ``value``.
    """
    input, dim, idx, value = _index_fill_args("index_fill", input, dim, index, value)
    return _index_fill(input, dim, idx, value)


def index_fill_(input, dim, index, value):
    """In-place :func:`index_fill`: ``input`` holds the result and is returned."""
    input, dim, idx, value = _index_fill_args("index_fill_", input, dim, index, value)
    return input._inplace_result("index_fill_", _index_fill(input, dim, idx, value))


# ---- scatter_reduce ----------------------------------------------------------------------------
_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _full_index(idx, dim):
    """The ``np.ix_``-style tuple that addresses ``out[..., idx[...], ...]`` for each entry of ``idx``."""
    grids = list(np.indices(idx.shape, sparse=True))
    grids[dim] = idx
    return tuple(grids)


class _ScatterReduce(Function):
    """Forward and backward on the host with NumPy's unbuffered ``ufunc.at`` (see the module
    docstring); the arrays are moved back to the input's device."""

    @staticmethod
    def forward(ctx, x, dim, idx, src, reduce, include_self):
        be = backend_of(x)
        # copies: backward reads them, and a CPU array's to_numpy is the caller's own array
        xh, ih, src_h = (np.array(be.to_numpy(a)) for a in (x, idx, src))
        xs = xh.reshape(xh.shape or (1,))
        ih = ih.reshape(ih.shape or (1,))
        sv = src_h.reshape(src_h.shape or (1,))[tuple(slice(0, n) for n in ih.shape)]
        where = _full_index(ih, dim)
        scattered = np.zeros(xs.shape, bool)
        scattered[where] = True
        count = np.zeros(xs.shape, np.int64)
        np.add.at(count, where, 1)
        if include_self:
            out = xs.copy()
        else:
            init = {"sum": 0, "mean": 0, "prod": 1}
            if reduce in init:
                fill = init[reduce]
            elif xs.dtype.kind == "f":
                fill = -np.inf if reduce == "amax" else np.inf
            elif xs.dtype.kind == "b":
                fill = reduce == "amin"
            else:
                info = np.iinfo(xs.dtype)
                fill = info.min if reduce == "amax" else info.max
            out = np.where(scattered, xs.dtype.type(fill), xs)
        ufunc = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
                 "amin": np.minimum}[reduce]
        ufunc.at(out, where, sv)
        if reduce == "mean":
            n = count + (1 if include_self else 0)
            n = np.maximum(n, 1)
            if out.dtype.kind == "f":
                out = out / n.astype(out.dtype)
            else:
                out = np.floor_divide(out, n).astype(out.dtype)
            ctx.count = n
        ctx.meta = (xh.shape, src_h.shape, dim, reduce, include_self)
        ctx.host = (xs, ih, sv, out, scattered)
        return be.asarray(np.array(out.reshape(xh.shape), order="C"))  # not ascontiguousarray: 0-d stays 0-d

    @staticmethod
    def backward(ctx, g):
        be = backend_of(g)
        xshape, sshape, dim, reduce, include_self = ctx.meta
        xs, ih, sv, out, scattered = ctx.host
        gh = be.to_numpy(g).reshape(xs.shape)
        where = _full_index(ih, dim)
        if reduce == "sum":
            gx, gsrc = gh, gh[where]
        elif reduce == "mean":
            gd = gh / ctx.count.astype(gh.dtype)
            gx, gsrc = gd, gd[where]
        elif reduce == "prod":
            if (xs == 0).any() or (sv == 0).any():
                raise NotImplementedError("scatter_reduce: the gradient of reduce='prod' with zeros in the "
                                          "input or src is not implemented")
            go = gh * out
            gx, gsrc = go / xs, go[where] / sv
        else:
            x_is = (xs == out).astype(gh.dtype)
            s_is = (sv == out[where]).astype(gh.dtype)
            n = x_is.copy()
            np.add.at(n, where, s_is)
            gd = gh / n
            gx, gsrc = x_is * gd, s_is * gd[where]
        if not include_self:
            gx = np.where(scattered, gh.dtype.type(0), gx)
        nx, _, _, ns, _, _ = ctx.needs_input_grad
        gs = None
        if ns:
            full = np.zeros(sshape or (1,), gh.dtype)
            full[tuple(slice(0, n) for n in ih.shape)] = gsrc
            gs = be.asarray(np.array(full.reshape(sshape), order="C"))
        gx = be.asarray(np.array(np.asarray(gx, gh.dtype).reshape(xshape), order="C")) if nx else None
        return gx, None, None, gs, None, None


def _scatter_reduce_args(opname, input, dim, index, src, reduce):
    input = as_tensor_arg(input, opname)
    src = _src_arg(src, opname, input)
    if reduce not in _REDUCES:
        raise RuntimeError(f"{opname}: reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce!r}")
    if src.dtype != input.dtype:
        raise RuntimeError(f"{opname}: Expected self.dtype to be equal to src.dtype (got {input.dtype} and "
                           f"{src.dtype})")
    idx = _index_arg(index, opname, like=input.array)
    dim = wrap_dim(dim, input.ndim, opname)
    _check_gather_shapes(opname, input.shape, dim, idx.shape, src.shape)
    check_index(opname, idx, input.shape[dim] if input.ndim else 1, dim, input.shape)
    return input, dim, Tensor._from_array(idx), src


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """A copy of ``input`` with the entries of ``src`` reduced into it at ``index`` along ``dim``.

    ``out[..., index[i, j], ...] = reduce(input[...] (if include_self), src[i, j], ...)``
    for ``dim=0``, and so on, as ``torch.scatter_reduce``.

    Parameters
    ----------
    input : Tensor
    dim : int
    index : Tensor
        Integer, with ``input``'s number of dimensions, no larger than ``src`` anywhere nor
        than ``input`` outside ``dim``; entries in ``[0, input.size(dim))``.
    src : Tensor
        Same dtype as ``input``.
    reduce : {'sum', 'prod', 'mean', 'amax', 'amin'}
        ``'mean'`` of integers rounds down.
    include_self : bool, default True
        Whether ``input``'s entries at the scattered positions take part in the reduction.

    Returns
    -------
    Tensor, differentiable in ``input`` and ``src`` (see the module docstring; ties of
    ``amax``/``amin`` share the gradient evenly, as torch's).
    """
    input, dim, idx, src = _scatter_reduce_args("scatter_reduce", input, dim, index, src, reduce)
    return _ScatterReduce.apply(input, dim, idx, src, reduce, bool(include_self))


def scatter_reduce_(input, dim, index, src, reduce, *, include_self=True):
    """In-place :func:`scatter_reduce`: ``input`` holds the result and is returned."""
    input, dim, idx, src = _scatter_reduce_args("scatter_reduce_", input, dim, index, src, reduce)
    out = _ScatterReduce.apply(input, dim, idx, src, reduce, bool(include_self))
    return input._inplace_result("scatter_reduce_", out)


# ---- elementwise predicates and NaN-ignoring extremes -------------------------------------------
def _bool_like(input, a):
    return Tensor._from_array(backend_of(input.array).asarray(np.array(a, dtype=bool, order="C")))


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each entry of ``elements`` occurs in ``test_elements`` (a bool tensor of
    ``elements``' shape; ``invert=True`` negates it). Either argument may be a scalar, not both."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): expected elements or test_elements to be a Tensor")
    like = elements if isinstance(elements, Tensor) else test_elements
    e = _host_array(elements) if isinstance(elements, Tensor) else np.asarray(elements)
    t = _host_array(test_elements) if isinstance(test_elements, Tensor) else np.asarray(test_elements)
    return _bool_like(like, np.isin(e, t, assume_unique=assume_unique, invert=invert))


def _nan_extreme(opname, input, other, larger):
    input, other = _tensor(opname, input), _tensor(opname, other, "other")
    broadcast_shape(opname, tuple(input.shape), tuple(other.shape))  # the error names this op
    keep = ew.ge(input, other) if larger else ew.le(input, other)
    if _dtype.is_float(other.dtype):
        keep = ew.logical_or(keep, ew.isnan(other))
    return ew.where(keep, input, other)


def fmax(input, other):
    """The elementwise maximum, ignoring NaN (NaN only where both are NaN), as ``torch.fmax``.
    The gradient goes to ``input`` where ``input >= other`` (ties included) or ``other`` is
    NaN, else to ``other``."""
    return _nan_extreme("fmax", input, other, True)


def fmin(input, other):
    """The elementwise minimum, ignoring NaN, as ``torch.fmin`` (gradient rule of :func:`fmax`)."""
    return _nan_extreme("fmin", input, other, False)


def _inf_test(opname, input, sign):
    input = _tensor(opname, input)
    a = _host_array(input)
    return _bool_like(input, a == sign * np.inf if a.dtype.kind == "f" else np.zeros(a.shape, bool))


def isposinf(input):
    """Whether each entry is +inf (a bool tensor; all False for integer dtypes)."""
    return _inf_test("isposinf", input, 1)


def isneginf(input):
    """Whether each entry is -inf (a bool tensor; all False for integer dtypes)."""
    return _inf_test("isneginf", input, -1)


def isreal(input):
    """Whether each entry has a zero imaginary part: all True (numbagrad has no complex dtypes)."""
    input = _tensor("isreal", input)
    return _bool_like(input, np.ones(tuple(input.shape), bool))


# ---- counting ---------------------------------------------------------------------------------
def bincount(input, weights=None, minlength=0):
    """The number of occurrences of each value in the non-negative integer vector ``input``
    (or the sum of ``weights`` at them): length ``max(input) + 1``, at least ``minlength``.

    Returns int64 without weights; with them float64, or float32 for float32 weights (as
    torch). Not differentiable.
    """
    input = _tensor("bincount", input)
    if weights is not None:
        weights = _tensor("bincount", weights, "weights")
    if input.array.dtype.kind not in "iu":
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{input.dtype}'")
    if isinstance(minlength, bool) or not isinstance(minlength, (int, np.integer)):
        raise TypeError(f"bincount(): argument 'minlength' must be int, not {type(minlength).__name__}")
    if minlength < 0:
        raise RuntimeError(f"bincount: minlength should be >= 0, got {minlength}")
    a = _host_array(input)
    if a.ndim != 1 or (a.size and int(a.min()) < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    w = None
    if weights is not None:
        if weights.ndim != 1 or weights.shape[0] != a.shape[0]:
            raise RuntimeError(f"bincount: weights should be 1-d and have the same length as input (got "
                               f"shapes {tuple(weights.shape)} and {tuple(input.shape)})")
        w = _host_array(weights)
    out = np.bincount(a.astype(np.int64), weights=w, minlength=int(minlength))
    if w is None:
        out = out.astype(np.int64)
    else:
        out = out.astype(np.float32 if w.dtype == np.float32 else np.float64)
    return _on(input, out)


def histc(input, bins=100, min=0, max=0):
    """The histogram of ``input`` (floating) in ``bins`` equal bins over ``[min, max]``.

    ``min == max`` takes the data's minimum and maximum (widened by 1 on each side when they
    are equal too); entries outside the range are ignored; ``max`` falls in the last bin.
    Returns ``input``'s dtype. Not differentiable.
    """
    input = _tensor("histc", input)
    a = _host_array(input)
    if a.dtype.kind != "f":
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{input.dtype}'")
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)):
        raise TypeError(f"histc(): argument 'bins' must be int, not {type(bins).__name__}")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    lo, hi = float(min), float(max)
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    if lo == hi and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    v = a.reshape(-1).astype(np.float64)
    v = v[(v >= lo) & (v <= hi)]
    pos = np.minimum(((v - lo) * bins / (hi - lo)).astype(np.int64), bins - 1)
    return _on(input, np.bincount(pos, minlength=bins).astype(a.dtype))


# ---- stacking ---------------------------------------------------------------------------------
def _tensor_seq(opname, tensors):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{opname}(): argument 'tensors' must be tuple of Tensors, not {type(tensors).__name__}")
    if not tensors:
        raise RuntimeError(f"{opname}: expects a non-empty TensorList")
    return [_tensor(opname, t, "tensors") for t in tensors]


def column_stack(tensors):
    """The tensors side by side as columns: 0-d and 1-d ones become ``(n, 1)`` columns, then
    :func:`hstack`. Differentiable."""
    ts = _tensor_seq("column_stack", tensors)
    return sh.cat([sh.reshape(t, (t.numel() if t.ndim else 1, 1)) if t.ndim <= 1 else t for t in ts], 1)


def _atleast_3d(t):
    if t.ndim == 0:
        return sh.reshape(t, (1, 1, 1))
    if t.ndim == 1:
        return sh.reshape(t, (1, t.shape[0], 1))
    if t.ndim == 2:
        return sh.unsqueeze(t, 2)
    return t


def dstack(tensors):
    """The tensors concatenated along the third dimension (after making each at least 3-d,
    ``(n,) -> (1, n, 1)``, ``(m, n) -> (m, n, 1)``). Differentiable."""
    ts = _tensor_seq("dstack", tensors)
    return sh.cat([_atleast_3d(t) for t in ts], 2)


def row_stack(tensors):
    """The tensors stacked as rows (``torch.vstack``): each made at least 2-d (a 0-d one
    ``(1, 1)``, a 1-d one ``(1, n)``), then concatenated along dim 0. Differentiable."""
    ts = _tensor_seq("row_stack", tensors)
    return sh.cat([sh.reshape(t, (1, -1) if t.ndim else (1, 1)) if t.ndim < 2 else t for t in ts], 0)


# ---- trapezoid rule ---------------------------------------------------------------------------
def _trapezoid_terms(opname, y, x, dx, dim):
    """The per-interval areas ``(y[i] + y[i+1]) / 2 * dx_i`` along ``dim`` and that dim."""
    y = _tensor(opname, y, "y")
    if x is not None and dx is not None:
        raise TypeError(f"{opname}(): received an invalid combination of arguments: pass x or dx, not both")
    dim = wrap_dim(dim, y.ndim, opname)
    if y.ndim == 0:
        raise IndexError(f"{opname}: Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
    n = y.shape[dim]
    if not _dtype.is_float(y.dtype):
        y = sh.cast(y, _dtype.get_default_dtype())
    if n == 0:
        return ew.mul(sh.narrow(y, dim, 0, 0), 0.0), dim
    mid = ew.mul(ew.add(sh.narrow(y, dim, 1, n - 1), sh.narrow(y, dim, 0, n - 1)), 0.5)
    if x is None:
        return ew.mul(mid, 1.0 if dx is None else float(dx)), dim
    x = _tensor(opname, x, "x")
    if x.ndim == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"{opname}: There must be one `x` value for each sample point (got {x.shape[0]} "
                               f"x values and {n} samples along dim {dim})")
        d = ew.sub(sh.narrow(x, 0, 1, n - 1), sh.narrow(x, 0, 0, n - 1))
        d = sh.reshape(d, tuple(-1 if k == dim else 1 for k in range(y.ndim)))
    else:
        xd = wrap_dim(dim - y.ndim, x.ndim, opname) if x.ndim else 0
        if x.ndim == 0 or x.shape[xd] != n:
            raise RuntimeError(f"{opname}: There must be one `x` value for each sample point")
        d = ew.sub(sh.narrow(x, xd, 1, n - 1), sh.narrow(x, xd, 0, n - 1))
    return ew.mul(mid, d), dim


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule along ``dim``: ``sum_i (y[i] + y[i+1]) / 2 * (x[i+1] - x[i])``, with
    sample points ``x`` (1-d of ``y.size(dim)``, or broadcasting with ``y``) or the spacing
    ``dx`` (default 1). Differentiable in ``y`` and ``x``."""
    terms, dim = _trapezoid_terms("trapezoid", y, x, dx, dim)
    return red.sum(terms, dim)


def trapz(y, x=None, *, dx=None, dim=-1):
    """Alias of :func:`trapezoid`."""
    terms, dim = _trapezoid_terms("trapz", y, x, dx, dim)
    return red.sum(terms, dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoid rule along ``dim`` (``y.size(dim) - 1`` partial integrals), as
    ``torch.cumulative_trapezoid``; arguments as :func:`trapezoid`. Differentiable."""
    terms, dim = _trapezoid_terms("cumulative_trapezoid", y, x, dx, dim)
    return red.cumsum(terms, dim)


# ---- covariance -------------------------------------------------------------------------------
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of ``input`` (observations in the
    columns; a 1-d input is one variable, giving a 0-d result), as ``torch.cov``.

    Parameters
    ----------
    input : Tensor
        At most 2-d.
    correction : int, default 1
        Subtracted from the (weighted) number of observations: 1 is Bessel's correction.
    fweights : Tensor, optional
        Integer frequency weights, one per observation, non-negative.
    aweights : Tensor, optional
        Floating observation weights, one per observation, non-negative.

    Returns
    -------
    Tensor, differentiable in ``input`` and ``aweights``: with ``w = fweights * aweights``,
    ``avg = sum(x w) / sum(w)`` and ``C = (x - avg) w (x - avg)^T / f`` where ``f`` is
    ``N - correction`` unweighted, else ``sum(w) - correction * sum(w aweights) / sum(w)``
    (``sum(w) - correction`` without aweights). ``f <= 0`` warns and gives inf/NaN.
    """
    op = "cov()"
    input = _tensor("cov", input)
    if input.ndim > 2:
        raise RuntimeError(f"{op}: expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input if _dtype.is_float(input.dtype) else sh.cast(input, _dtype.get_default_dtype())
    x = sh.reshape(x, (1, -1)) if x.ndim < 2 else x
    n = x.shape[1]
    w = None
    for name, wt, want_int in (("fweights", fweights, True), ("aweights", aweights, False)):
        if wt is None:
            continue
        wt = _tensor("cov", wt, name)
        if wt.ndim > 1:
            raise RuntimeError(f"{op}: expected {name} to have one or fewer dimensions but got {name} with "
                               f"{wt.ndim} dimensions")
        kind = wt.array.dtype.kind
        if want_int and kind not in "iu":
            raise RuntimeError(f"{op}: expected fweights to have integral dtype but got fweights with "
                               f"{wt.dtype} dtype")
        if not want_int and kind != "f":
            raise RuntimeError(f"{op}: expected aweights to have floating point dtype but got aweights with "
                               f"{wt.dtype} dtype")
        if wt.numel() != n:
            raise RuntimeError(f"{op}: expected {name} to have the same numel as there are observations in the "
                               f"input but got {wt.numel()} != {n}")
        h = _host_array(wt)
        if h.size and h.min() < 0:
            raise RuntimeError(f"{op}: {name} cannot be negative")
        wt = sh.reshape(wt, (n,))
        if not want_int and wt.dtype != x.dtype:
            wt = sh.cast(wt, x.dtype)
        if want_int:
            wt = sh.cast(wt, x.dtype)
        w = wt if w is None else ew.mul(w, wt)
    if w is None:
        avg = red.mean(x, 1)
        norm = n - correction
    else:
        w_sum = red.sum(w)
        avg = ew.div(red.sum(ew.mul(x, w), 1), w_sum)
        ws = float(_host_array(w_sum))
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = ws - correction
        else:
            a = sh.reshape(aweights, (n,))
            a = a if a.dtype == x.dtype else sh.cast(a, x.dtype)
            norm = ew.sub(w_sum, ew.div(ew.mul(red.sum(ew.mul(w, a)), correction), w_sum))
    nv = float(_host_array(norm)) if isinstance(norm, Tensor) else float(norm)
    if nv <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number "
                      "of observations.", RuntimeWarning, stacklevel=2)
        norm = 0.0
    xm = ew.sub(x, sh.unsqueeze(avg, 1))
    xw = xm if w is None else ew.mul(xm, w)
    c = ew.div(matmul(xw, sh.transpose(xm, 0, 1)), norm)
    return sh.reshape(c, ()) if tuple(c.shape) == (1, 1) else c  # torch squeezes


def corrcoef(input):
    """The Pearson correlation coefficients of the variables in the rows of ``input``:
    ``cov(input)`` divided by the outer product of the standard deviations, clipped to
    ``[-1, 1]``, as ``torch.corrcoef``. Differentiable."""
    c = cov(input)
    if c.ndim == 0:
        return ew.div(c, c)
    from .linalg_basic import diagonal
    std = ew.sqrt(diagonal(c))
    c = ew.div(c, sh.reshape(std, (-1, 1)))
    c = ew.div(c, sh.reshape(std, (1, -1)))
    return ew.clamp(c, -1, 1)


# ---- unique_consecutive -----------------------------------------------------------------------
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """``input`` with each run of equal consecutive entries (slices along ``dim``, or of the
    flattened input) kept once, as ``torch.unique_consecutive``.

    Returns the values, then (when asked) the inverse (for each entry or slice, the position of
    its run: ``input``'s shape, or ``(input.size(dim),)``) and the count of each run, both int64.
    Not differentiable.
    """
    input = _tensor("unique_consecutive", input)
    a = _host_array(input)
    if dim is None:
        v = a.reshape(-1)
        change = v[1:] != v[:-1]
        axis = 0
    else:
        axis = wrap_dim(dim, input.ndim, "unique_consecutive", scalar_ok=False)
        v = np.moveaxis(a, axis, 0)
        m = v.reshape(v.shape[0], -1)
        change = (m[1:] != m[:-1]).any(axis=1) if m.shape[1] else np.zeros(max(m.shape[0] - 1, 0), bool)
    n = v.shape[0]
    start = np.concatenate([[True], change]) if n else np.zeros(0, bool)
    inverse = np.cumsum(start) - 1
    counts = np.diff(np.append(np.flatnonzero(start), n))
    out = v[start]
    if dim is not None:
        out = np.moveaxis(out, 0, axis)
    else:
        inverse = inverse.reshape(a.shape)
    res = [_on(input, np.ascontiguousarray(out))]
    if return_inverse:
        res.append(_on(input, np.array(inverse, np.int64, order="C")))
    if return_counts:
        res.append(_on(input, counts.astype(np.int64)))
    return res[0] if len(res) == 1 else tuple(res)


# ---- nanmedian --------------------------------------------------------------------------------
class _NanMedianAll(_MedianAll):
    """The median of the non-NaN elements (NaN when there are none); the gradient is spread
    evenly over the elements equal to it (:class:`~numbagrad.ops.scan._MedianAll`'s backward)."""

    @staticmethod
    def forward(ctx, x):
        be = backend_of(x)
        a = be.to_numpy(x).reshape(-1)
        if a.dtype.kind == "f":
            a = a[~np.isnan(a)]
        m = np.asarray(np.sort(a, kind="stable")[(a.size - 1) // 2] if a.size else np.nan, x.dtype)
        y = be.asarray(m)
        ctx.save_for_backward(x, y)
        return y


def nanmedian(input, dim=None, keepdim=False):
    """The lower median ignoring NaN, as ``torch.nanmedian``: of all elements (``dim=None``)
    or along ``dim`` (a ``(values, indices)`` namedtuple). A row of NaN only gives NaN.
    Gradients as :func:`~numbagrad.median`."""
    return _median_like("nanmedian", input, dim, keepdim, _NanMedianAll, _NanMedian, _nanmedian_index)


def _nanmedian_index(a, axis):
    """Host int64 index of the lower median of the non-NaN values of ``a`` along ``axis``
    (position ``(n - 1) // 2`` of a stable sort, NaN sorting last; a NaN-only row: the
    median's position), keeping ``axis`` with size 1."""
    order = np.argsort(a, axis=axis, kind="stable")
    valid = (~np.isnan(a)).sum(axis=axis, keepdims=True) if a.dtype.kind == "f" else a.shape[axis]
    valid = np.asarray(valid)
    k = np.where(valid > 0, (valid - 1) // 2, (a.shape[axis] - 1) // 2)
    k = np.broadcast_to(k, tuple(1 if d == axis else s for d, s in enumerate(a.shape)))
    return np.take_along_axis(order, k, axis=axis).astype(np.int64)
