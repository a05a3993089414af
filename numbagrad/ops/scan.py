"""Scans, differences, NaN-aware and counting reductions, splitting, repeating and
rotating: ``cumprod``, ``cummax``/``cummin``, ``logcumsumexp``, ``diff``, ``nansum``,
``nanmean``, ``count_nonzero``, ``aminmax``, ``median``, ``msort``, ``repeat_interleave``,
``tensor_split`` (and ``hsplit``/``vsplit``/``dsplit``), ``fliplr``/``flipud``/``rot90``.

How it works, and why
---------------------
* Most ops are compositions of existing differentiable ops, so their gradients and
  their CUDA support come from those: ``repeat_interleave`` is an ``index_select`` with
  indices built on the host, ``tensor_split`` is basic slicing, ``diff`` is ``narrow`` and
  ``sub``, ``nansum`` is ``sum`` of the input with NaN zeroed, ``rot90`` is ``flip`` and
  ``transpose``, ``aminmax`` is ``amin`` and ``amax`` (the gradient is shared evenly among
  tied extremes, as torch's).
* Index-returning ops (``cummax``/``cummin``, ``median(dim)``) find their int64 indices on
  the host with NumPy, as :mod:`.sorting` does, and take their values with the
  differentiable ``gather``: the gradient goes to the selected index only, as in torch.
  ``cummax`` keeps the *last* of tied maxima (torch compares with ``>=``) and, once a NaN is
  seen, NaN with the index of the latest NaN; ``median`` takes position ``(n - 1) // 2`` of a stable sort
  (torch's lower median and, on its CPU, its index among ties), or the first NaN of a row.
* Three ``Function`` nodes of their own, written with NumPy calls that a CUDA array
  dispatches too (ufuncs, ``np.cumprod``, ``np.stack``, ``np.moveaxis``), each with a Python
  loop over the scanned axis and vectorised work across the others:

  - ``cumprod``: forward ``np.cumprod``; backward exact also where the input holds zeros
    (no division by ``x``): with ``E_i = prod_{k<i} x_k`` (exclusive product) and the reverse
    linear scan ``R_{n-1} = g_{n-1}``, ``R_i = g_i + x_{i+1} R_{i+1}``, the gradient is
    ``dL/dx_i = E_i R_i``.
  - ``logcumsumexp``: ``y_i = logaddexp(y_{i-1}, x_i)``, each step shifted by the larger
    operand (stable where a global shift underflows: ``[-1000, 1000]``), with torch's rule for
    equal infinities. Backward is torch's: the gradient split by sign,
    ``exp(x + rev_logcumsumexp(log|g±| - y))``, so no ``exp`` of a large number is formed.
  - ``median()`` over all elements: the gradient is spread evenly over the elements equal to
    the median (the NaNs, when it is NaN), as torch's ``evenly_distribute_backward``.
* Every argument is checked before any array is touched (``wrap_dim`` for dims; negative
  repeats, bad ``n``, bad split indices raise with torch's exception type), so no index
  reaches a kernel unchecked.
"""
import collections

import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from ._util import as_tensor_arg, norm_axis, wrap_dim
from . import elementwise as ew
from . import reduce as red
from .indexing import gather, index_select, getitem
from .pointwise import _inplace
from .shape import cast, clone, flatten, flip, narrow, cat, transpose, squeeze, reshape
from .sorting import sort

__all__ = ["repeat_interleave", "tensor_split", "hsplit", "vsplit", "dsplit", "diff", "nansum", "nanmean",
           "count_nonzero", "cumprod", "cumprod_", "cummax", "cummin", "logcumsumexp", "aminmax", "fliplr",
           "flipud", "rot90", "msort", "median"]

METHODS = ("repeat_interleave", "tensor_split", "hsplit", "vsplit", "dsplit", "diff", "nansum", "nanmean",
           "count_nonzero", "cumprod", "cumprod_", "cummax", "cummin", "logcumsumexp", "aminmax", "fliplr",
           "flipud", "rot90", "msort", "median")
"""Names in ``__all__`` that are also ``Tensor`` methods (``x.name(...)`` is ``name(x, ...)``;
in-place ``name_`` forms included). Bound by ``tensor._install_operators``."""

_CumMax = collections.namedtuple("cummax", ["values", "indices"])
_CumMin = collections.namedtuple("cummin", ["values", "indices"])
_AMinMax = collections.namedtuple("aminmax", ["min", "max"])
_Median = collections.namedtuple("median", ["values", "indices"])


# ---- helpers -----------------------------------------------------------------------------------
def _int(opname, name, v):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{opname}: argument '{name}' must be int, not {type(v).__name__} ({v!r})")
    return int(v)


def _host_array(t):
    return backend_of(t.array).to_numpy(t.array)


def _on(like, a):
    """The host array ``a`` as a Tensor (outside the graph) on the device of Tensor ``like``."""
    return Tensor._from_array(backend_of(like.array).asarray(a))


def _index_like(opname, idx, input):
    if idx.ndim:
        return _on(input, np.ascontiguousarray(idx, dtype=np.int64))
    return _on(input, np.asarray(idx, np.int64))


# ---- repeat_interleave -------------------------------------------------------------------------
def _repeats_host(opname, repeats):
    """``repeats`` (a Tensor) as a host int64 array, with torch's checks."""
    if repeats.dtype.kind not in "iu":
        raise NotImplementedError(f"{opname}: repeats must be an integer tensor, got dtype {repeats.dtype} "
                                  f"(shape {tuple(repeats.shape)})")
    r = _host_array(repeats).astype(np.int64)
    if r.size and r.min() < 0:
        raise RuntimeError(f"{opname}: repeats can not be negative (got {int(r.min())})")
    return r


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Repeat each element (each slice along ``dim``) ``repeats`` times, as ``torch.repeat_interleave``.

    Parameters
    ----------
    input : Tensor
        With ``repeats`` omitted, ``input`` is itself a 1-D integer tensor of repeats and the
        result is ``arange(len(input))`` repeated by it (``repeat_interleave(tensor([2, 0, 1]))``
        is ``[0, 0, 2]``).
    repeats : int or Tensor
        Non-negative. A 0-d or one-element tensor repeats every slice alike; a 1-D tensor gives
        one count per slice (its length must be ``input.size(dim)``).
    dim : int, optional
        The dimension to repeat along; ``None`` flattens ``input`` first.
    output_size : int, optional
        The total size of the result along ``dim``; must equal the sum of the repeats.

    Returns
    -------
    Tensor, differentiable: an ``index_select`` whose gradient sums the copies.

    Example
    -------
    >>> repeat_interleave(tensor([[1, 2], [3, 4]]), 2, dim=0).shape
    (4, 2)
    """
    op = "repeat_interleave"
    if repeats is None:
        r = as_tensor_arg(input, op)
        if r.ndim != 1:
            raise RuntimeError(f"{op}: repeat_interleave only accept 1D vector as repeat (got shape "
                               f"{tuple(r.shape)})")
        reps = _repeats_host(op, r)
        out = np.repeat(np.arange(len(reps), dtype=np.int64), reps)
        if output_size is not None and _int(op, "output_size", output_size) != len(out):
            raise RuntimeError(f"{op}: Invalid output_size, expected {len(out)} but got {output_size}")
        return _on(r, out)
    input = as_tensor_arg(input, op)
    if dim is None:
        input, axis = flatten(input), 0
    else:
        # NOTE: torch refuses a 0-d input with an explicit dim (any dim), unlike most ops
        axis = wrap_dim(dim, input.ndim, op, scalar_ok=False)
    n = input.shape[axis]
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1:
            raise RuntimeError(f"{op}: repeats must be 0-dim or 1-dim tensor, got shape {tuple(repeats.shape)}")
        reps = _repeats_host(op, repeats).reshape(-1)
        if reps.size != 1 and reps.size != n:
            raise RuntimeError(f"{op}: repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {reps.size} and input.size({axis}) = {n}")
    else:
        reps = _int(op, "repeats", repeats)
        if reps < 0:
            raise RuntimeError(f"{op}: Repeats must be non-negative, got {reps}")
        reps = np.array([reps], np.int64)
    if reps.size == 1:
        reps = np.full(n, reps[0], np.int64)
    idx = np.repeat(np.arange(n, dtype=np.int64), reps)
    if output_size is not None and _int(op, "output_size", output_size) != len(idx):
        raise RuntimeError(f"{op}: Invalid output_size, expected {len(idx)} but got {output_size}")
    return index_select(input, axis, _on(input, idx))


# ---- tensor_split / hsplit / vsplit / dsplit ----------------------------------------------------
def _bounds(n, sections=None, indices=None):
    """The ``(start, stop)`` of each piece of a dimension of size ``n``: ``sections`` pieces
    (the first ``n % sections`` one longer), or split before each of ``indices`` with
    Python's slice semantics (negative ones count from the end; out of order gives empties)."""
    if sections is not None:
        q, r = divmod(n, sections)
        out, start = [], 0
        for i in range(sections):
            stop = start + q + (1 if i < r else 0)
            out.append((start, stop))
            start = stop
        return out
    cuts = [None] + list(indices) + [None]
    out = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        s, e, _ = slice(a, b).indices(n)
        out.append((s, max(s, e)))
    return out


def _split_arg(opname, arg):
    """``(sections, indices)``: exactly one is not None."""
    if isinstance(arg, Tensor):
        if arg.dtype != _dtype.int64:
            raise RuntimeError(f"{opname}: expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{arg.dtype}")
        if arg.ndim > 1:
            raise RuntimeError(f"{opname}: expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {arg.ndim} dims")
        a = _host_array(arg)
        return (int(a), None) if arg.ndim == 0 else (None, [int(v) for v in a])
    if isinstance(arg, (list, tuple)):
        return None, [_int(opname, "indices", v) for v in arg]
    return _int(opname, "indices_or_sections", arg), None


def tensor_split(input, indices_or_sections, dim=0):
    """Split ``input`` along ``dim`` into views, as ``torch.tensor_split``.

    Parameters
    ----------
    input : Tensor
        At least 1-D.
    indices_or_sections : int, sequence of int, or int64 Tensor (0-d or 1-D)
        An int ``s > 0``: ``s`` pieces, the first ``size % s`` of them one longer (pieces may be
        empty). Indices ``[i0, i1, ...]``: the pieces ``input[:i0], input[i0:i1], ..., input[ik:]``
        along ``dim``, with Python's slicing rules (negative indices count from the end, indices
        out of order or past the end give empty pieces).
    dim : int, default 0

    Returns
    -------
    tuple of Tensor, each differentiable.
    """
    op = "tensor_split"
    input = as_tensor_arg(input, op)
    if input.ndim == 0:
        raise RuntimeError(f"{op}: tensor_split expected at least a 1-dimensional tensor, but got a tensor "
                           "with 0 dims")
    sections, indices = _split_arg(op, indices_or_sections)
    axis = wrap_dim(dim, input.ndim, op)
    if sections is not None and sections <= 0:
        raise RuntimeError(f"{op}: number of sections must be larger than 0, got {sections}")
    pre = (slice(None),) * axis
    return tuple(getitem(input, pre + (slice(s, e),))
                 for s, e in _bounds(input.shape[axis], sections, indices))


def _xsplit(opname, input, indices_or_sections, min_dim, dim):
    input = as_tensor_arg(input, opname)
    if input.ndim < min_dim:
        raise RuntimeError(f"torch.{opname} requires a tensor with at least {min_dim} dimension, but got a "
                           f"tensor with {input.ndim} dimensions!")
    if not isinstance(indices_or_sections, (list, tuple, Tensor)):
        s = _int(opname, "indices_or_sections", indices_or_sections)
        n = input.shape[dim]
        if s == 0 or n % s:
            raise RuntimeError(f"torch.{opname} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {n} is not divisible by the split_size {s}!")
    return tensor_split(input, indices_or_sections, dim)


def hsplit(input, indices_or_sections):
    """``tensor_split`` along dimension 1 (0 for a 1-D tensor); an int must divide that size.

    Parameters
    ----------
    input : Tensor
        At least 1-D.
    indices_or_sections : int or sequence of int
        As in :func:`tensor_split`; an int must divide the size evenly.

    Returns
    -------
    tuple of Tensor
    """
    input = as_tensor_arg(input, "hsplit")
    return _xsplit("hsplit", input, indices_or_sections, 1, 0 if input.ndim == 1 else 1)


def vsplit(input, indices_or_sections):
    """``tensor_split`` along dimension 0 of an at least 2-D tensor; an int must divide that size.

    Returns
    -------
    tuple of Tensor
    """
    return _xsplit("vsplit", input, indices_or_sections, 2, 0)


def dsplit(input, indices_or_sections):
    """``tensor_split`` along dimension 2 of an at least 3-D tensor; an int must divide that size.

    Returns
    -------
    tuple of Tensor
    """
    return _xsplit("dsplit", input, indices_or_sections, 3, 2)


# ---- diff -------------------------------------------------------------------------------------
def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``: ``out[i] = x[i + 1] - x[i]``, applied ``n``
    times, as ``torch.diff``.

    Parameters
    ----------
    input : Tensor
        At least 1-D. For bool tensors the difference is ``x[i + 1] != x[i]``.
    n : int, default 1
        Non-negative; ``0`` returns ``input``; past the size the result is empty along ``dim``.
    dim : int, default -1
    prepend, append : Tensor, optional
        Concatenated before/after ``input`` along ``dim`` first; same number of dimensions as
        ``input`` and the same sizes except along ``dim``.

    Returns
    -------
    Tensor, differentiable (with respect to ``prepend`` and ``append`` too).
    """
    op = "diff"
    input = as_tensor_arg(input, op)
    if input.ndim == 0:
        raise RuntimeError(f"{op}: diff expects input to be at least one-dimensional")
    n = _int(op, "n", n)
    if n < 0:
        raise RuntimeError(f"{op}: order must be non-negative but got {n}")
    axis = wrap_dim(dim, input.ndim, op)
    parts = []
    for name, t in (("prepend", prepend), ("append", append)):
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: argument '{name}' must be Tensor, not {type(t).__name__}")
        if t.ndim != input.ndim:
            raise RuntimeError(f"{op}: diff expects prepend or append to be the same dimension as input "
                               f"({name} of shape {tuple(t.shape)}, input of shape {tuple(input.shape)})")
        for i, (a, b) in enumerate(zip(input.shape, t.shape)):
            if i != axis and a != b:
                raise RuntimeError(f"{op}: diff expects the shape of tensor to prepend or append to match that "
                                   f"of input except along the differencing dimension; input.size({i}) = {a}, "
                                   f"but got tensor.size({i}) = {b}")
        parts.append((name, t))
    if parts:
        seq = [t for nm, t in parts if nm == "prepend"] + [input] + [t for nm, t in parts if nm == "append"]
        input = cat(seq, axis)
    x = input
    for _ in range(n):
        m = x.shape[axis]
        if m == 0:
            break
        hi, lo = narrow(x, axis, 1, m - 1), narrow(x, axis, 0, m - 1)
        x = ew.ne(hi, lo) if x.dtype == _dtype.bool_ else ew.sub(hi, lo)
    return x


# ---- nansum / nanmean / count_nonzero ----------------------------------------------------------
class _NanToZero(Function):
    """``x`` with NaN replaced by 0; the gradient is ``g * (x == x)``, a product as in torch's
    ``nansum`` backward (so an infinite ``g`` at a NaN gives NaN, as ``nanmean`` of an all-NaN
    row does in torch), not a ``where``."""

    @staticmethod
    def forward(ctx, x):
        keep = np.logical_not(np.isnan(x))
        ctx.save_for_backward(keep)
        return np.where(keep, x, x.dtype.type(0))

    @staticmethod
    def backward(ctx, g):
        (keep,) = ctx.saved_tensors
        return np.multiply(g, keep.astype(g.dtype))


def _nan_to_zero(input):
    if not _dtype.is_float(input.dtype):
        return input
    return _NanToZero.apply(input)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum over ``dim`` (all dims by default) counting NaN as zero, as ``torch.nansum``.

    Parameters
    ----------
    input : Tensor
    dim : int or tuple of int, optional
    keepdim : bool, default False
    dtype : dtype, optional
        Cast ``input`` to it first. Integer and bool inputs sum to int64.

    Returns
    -------
    Tensor; the gradient is ``g`` where ``input`` is not NaN and 0 where it is.
    """
    input = as_tensor_arg(input, "nansum")
    if dim is not None:
        norm_axis(dim, input.ndim, "nansum")
    if dtype is not None:
        input = cast(input, _dtype.as_dtype(dtype))
    return red.sum(_nan_to_zero(input), dim, keepdim)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean over ``dim`` of the elements that are not NaN, as ``torch.nanmean``: ``nansum``
    divided by the number of non-NaN elements (NaN where every element is NaN).

    Parameters
    ----------
    input : Tensor
        Floating point (an integer input raises, even with ``dtype``).
    dim : int or tuple of int, optional
    keepdim : bool, default False
    dtype : dtype, optional

    Returns
    -------
    Tensor, differentiable.
    """
    input = as_tensor_arg(input, "nanmean")
    if not _dtype.is_float(input.dtype):
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype but got "
                           f"{input.dtype}")
    if dim is not None:
        norm_axis(dim, input.ndim, "nanmean")
    count = red.sum(ew.logical_not(ew.isnan(input)), dim, keepdim)
    with np.errstate(invalid="ignore", divide="ignore"):  # an all-NaN slice is 0 / 0 = NaN, quietly
        return ew.div(nansum(input, dim, keepdim, dtype=dtype), count)


def count_nonzero(input, dim=None):
    """The number of nonzero elements (NaN counts) over ``dim``: one int, a tuple of ints,
    or all dims (``None`` or an empty tuple), as ``torch.count_nonzero``.

    Returns
    -------
    Tensor of int64, not differentiable.
    """
    input = as_tensor_arg(input, "count_nonzero")
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        dim = None
    axes = norm_axis(dim, input.ndim, "count_nonzero")
    be = backend_of(input.array)
    nz = be.asarray(input.array != 0)
    return Tensor._from_array(be.asarray(be.sum(nz, axis=axes, dtype=np.int64)).astype(np.int64))


# ---- cumprod -----------------------------------------------------------------------------------
class CumProd(Function):
    """The cumulative product along ``axis``; the backward is the exact reverse scan of the
    module docstring (no division, so zeros in ``x`` are handled)."""

    @staticmethod
    def forward(ctx, x, axis):
        ctx.axis = axis
        ctx.save_for_backward(x)
        return np.cumprod(x, axis=axis, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        a = ctx.axis
        be = backend_of(g)
        n = x.shape[a]
        if n == 0 or x.size == 0:
            return be.zeros(x.shape, x.dtype), None
        xm, gm = np.moveaxis(x, a, 0), np.moveaxis(g, a, 0)
        one = be.ones((1,) + xm.shape[1:], x.dtype)
        # E_i = prod_{k<i} x_k: the inclusive product of [1, x_0, ..., x_{n-2}]
        excl = np.cumprod(be.concatenate([one, xm[:n - 1]], axis=0), axis=0, dtype=x.dtype)
        rs = [None] * n
        r = gm[n - 1]
        rs[n - 1] = r
        for i in range(n - 2, -1, -1):  # R_i = g_i + x_{i+1} R_{i+1}
            r = be.add(gm[i], be.mul(xm[i + 1], r))
            rs[i] = r
        grad = be.mul(excl, np.stack(rs, 0))
        return np.moveaxis(grad, 0, a).astype(g.dtype, copy=False), None


def cumprod(input, dim, *, dtype=None):
    """The cumulative product along ``dim``: ``y_i = x_0 x_1 ... x_i``, as ``torch.cumprod``.

    Parameters
    ----------
    input : Tensor
    dim : int
    dtype : dtype, optional
        Cast ``input`` to it first; integer and bool inputs give int64.

    Returns
    -------
    Tensor. The gradient is exact also where ``input`` holds zeros:
    ``dL/dx_i = (prod_{k<i} x_k) R_i`` with ``R_i = g_i + x_{i+1} R_{i+1}``.
    """
    input = as_tensor_arg(input, "cumprod")
    axis = wrap_dim(dim, input.ndim, "cumprod")
    if dtype is not None:
        input = cast(input, _dtype.as_dtype(dtype))
    elif input.dtype.kind in "biu":
        input = cast(input, _dtype.int64)
    if input.ndim == 0:
        return clone(input)
    return CumProd.apply(input, axis)


cumprod_ = _inplace("cumprod", cumprod)


# ---- cummax / cummin ---------------------------------------------------------------------------
def _cum_index(a, axis, largest):
    """Host int64 indices of the running max (min) of ``a`` along ``axis``: torch's rule, the
    last of tied extremes, and from a NaN on the NaN, with the index of the latest NaN."""
    am = np.moveaxis(a, axis, 0)
    out = np.empty(am.shape, np.int64)
    if am.shape[0] == 0 or am.size == 0:
        return np.moveaxis(out, 0, axis)
    floating = a.dtype.kind == "f"
    best, bi = am[0].copy(), np.zeros(am.shape[1:], np.int64)
    out[0] = bi
    for i in range(1, am.shape[0]):
        x = am[i]
        with np.errstate(invalid="ignore"):
            take = (x >= best) if largest else (x <= best)
        if floating:
            take = np.isnan(x) | (~np.isnan(best) & take)  # every NaN takes over, as in torch
        best = np.where(take, x, best)
        bi = np.where(take, i, bi)
        out[i] = bi
    return np.moveaxis(out, 0, axis)


def _cum_extreme(opname, input, dim, largest, kind):
    input = as_tensor_arg(input, opname)
    axis = wrap_dim(dim, input.ndim, opname)
    if input.ndim == 0:
        return kind(clone(input), _on(input, np.zeros((), np.int64)))
    idx = _index_like(opname, _cum_index(_host_array(input), axis, largest), input)
    return kind(gather(input, axis, idx), idx)


def cummax(input, dim):
    """The running maximum along ``dim`` and where it was found, as ``torch.cummax``.

    Returns
    -------
    (values, indices) : namedtuple
        ``indices`` (int64) is the position of the *last* of tied maxima seen so far; a NaN
        propagates, with the index of the latest NaN seen. ``values`` is a differentiable gather:
        the gradient goes to ``indices``.
    """
    return _cum_extreme("cummax", input, dim, True, _CumMax)


def cummin(input, dim):
    """The running minimum along ``dim`` and where it was found, as ``torch.cummin`` (ties and
    NaN as in :func:`cummax`).

    Returns
    -------
    (values, indices) : namedtuple
    """
    return _cum_extreme("cummin", input, dim, False, _CumMin)


# ---- logcumsumexp ------------------------------------------------------------------------------
def _logaddexp(a, b):
    """``log(exp(a) + exp(b))`` on backend arrays, shifted by the larger operand; equal
    infinities give themselves and NaN propagates (torch's ``_log_add_exp_helper``)."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    with np.errstate(invalid="ignore", over="ignore"):
        r = hi + np.log1p(np.exp(lo - hi))
        special = np.logical_and(np.equal(lo, hi), np.logical_not(np.isfinite(lo)))
    return np.where(special, a, r)


def _lcse(x, axis):
    """logcumsumexp of the backend array ``x`` along ``axis`` (a loop over the axis)."""
    n = x.shape[axis]
    if n == 0 or x.size == 0:
        return backend_of(x).copy(x)
    xm = np.moveaxis(x, axis, 0)
    acc = xm[0]
    out = [acc]
    for i in range(1, n):
        acc = _logaddexp(acc, xm[i])
        out.append(acc)
    return np.moveaxis(np.stack(out, 0), 0, axis).astype(x.dtype, copy=False)


def _rev_lcse(x, axis):
    return np.flip(_lcse(np.flip(x, axis), axis), axis)


class LogCumSumExp(Function):
    """``y_i = log(sum_{k<=i} exp(x_k))`` along ``axis`` (see the module docstring)."""

    @staticmethod
    def forward(ctx, x, axis):
        y = _lcse(x, axis)
        ctx.axis = axis
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        a = ctx.axis
        t = x.dtype.type
        lowest = t(np.finfo(x.dtype).min)
        # dL/dx_i = sum_{j>=i} g_j exp(x_i - y_j), split by the sign of g so that every term is
        # a logcumsumexp of logs: exp(x_i + rev_lcse(log g+ - y)) - exp(x_i + rev_lcse(log g- - y)).
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            log_abs = np.log(np.abs(g))
            pos = np.where(np.greater(g, t(0)), log_abs, lowest) - y
            neg = np.where(np.less(g, t(0)), log_abs, lowest) - y
            out = np.exp(_rev_lcse(pos, a) + x) - np.exp(_rev_lcse(neg, a) + x)
        return out.astype(g.dtype, copy=False), None


def logcumsumexp(input, dim):
    """``log(cumsum(exp(x)))`` along ``dim``, computed stably, as ``torch.logcumsumexp``.

    Parameters
    ----------
    input : Tensor
        Floating point.
    dim : int

    Returns
    -------
    Tensor, differentiable: ``dy_j/dx_i = exp(x_i - y_j)`` for ``i <= j``.
    """
    op = "logcumsumexp"
    input = as_tensor_arg(input, op)
    axis = wrap_dim(dim, input.ndim, op)
    if not _dtype.is_float(input.dtype):
        raise NotImplementedError(f"{op}: not implemented for dtype {input.dtype} (expected a floating point "
                                  "tensor)")
    if input.ndim == 0:
        return clone(input)
    return LogCumSumExp.apply(input, axis)


# ---- aminmax -----------------------------------------------------------------------------------
def aminmax(input, *, dim=None, keepdim=False):
    """The minimum and the maximum over ``dim`` (all elements by default) in one call, as
    ``torch.aminmax``.

    Parameters
    ----------
    input : Tensor
    dim : int, optional
        One dimension (not a tuple); its size must be non-zero.
    keepdim : bool, default False

    Returns
    -------
    (min, max) : namedtuple
        Differentiable as :func:`amin` / :func:`amax`: the gradient is shared evenly among tied
        extremes.
    """
    op = "aminmax"
    input = as_tensor_arg(input, op)
    if dim is None:
        if input.numel() == 0:
            raise RuntimeError(f"aminmax(): cannot compute aminmax over an empty dimension as the operation has "
                               f"no identity (input of shape {tuple(input.shape)})")
        lo, hi = red.amin(input), red.amax(input)
        if keepdim:
            lo, hi = reshape(lo, (1,) * input.ndim), reshape(hi, (1,) * input.ndim)
        return _AMinMax(lo, hi)
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    axis = wrap_dim(dim, input.ndim, op)
    if input.ndim == 0:
        return _AMinMax(clone(input), clone(input))
    if input.shape[axis] == 0:
        raise IndexError(f"{op}: Expected reduction dim {axis} to have non-zero size (input of shape "
                         f"{tuple(input.shape)})")
    if input.numel() == 0:  # another dim is empty: empty results
        e = cast(red.sum(input, axis, keepdim), input.dtype)
        return _AMinMax(e, clone(e))
    return _AMinMax(red.amin(input, axis, keepdim), red.amax(input, axis, keepdim))


# ---- fliplr / flipud / rot90 -------------------------------------------------------------------
def fliplr(input):
    """Reverse the columns (dimension 1) of an at least 2-D tensor, as ``torch.fliplr``.

    Returns
    -------
    Tensor, differentiable.
    """
    input = as_tensor_arg(input, "fliplr")
    if input.ndim < 2:
        raise RuntimeError(f"fliplr: Input must be >= 2-d. (got shape {tuple(input.shape)})")
    return flip(input, (1,))


def flipud(input):
    """Reverse the rows (dimension 0) of an at least 1-D tensor, as ``torch.flipud``.

    Returns
    -------
    Tensor, differentiable.
    """
    input = as_tensor_arg(input, "flipud")
    if input.ndim < 1:
        raise RuntimeError("flipud: Input must be >= 1-d. (got a 0-d tensor)")
    return flip(input, (0,))


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by ``k`` quarter turns in the plane of ``dims``, from the first towards the second
    dimension, as ``torch.rot90`` (``k`` may be negative).

    Parameters
    ----------
    input : Tensor
        At least 2-D.
    k : int, default 1
    dims : pair of int, default (0, 1)
        Two different dimensions.

    Returns
    -------
    Tensor, differentiable (``flip`` then ``transpose``).
    """
    op = "rot90"
    input = as_tensor_arg(input, op)
    k = _int(op, "k", k)
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"{op}: expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"{op}: expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = (_int(op, "dims", d) for d in dims)
    if d0 == d1 or abs(d0 - d1) == input.ndim:
        raise RuntimeError(f"{op}: expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    a0, a1 = wrap_dim(d0, input.ndim, op, "dims"), wrap_dim(d1, input.ndim, op, "dims")
    k %= 4
    if k == 1:
        return transpose(flip(input, (a1,)), a0, a1)
    if k == 2:
        return flip(input, (a0, a1))
    if k == 3:
        return transpose(flip(input, (a0,)), a0, a1)
    return clone(input)


# ---- msort / median ----------------------------------------------------------------------------
def msort(input):
    """``input`` sorted along dimension 0 (the values of ``sort(input, 0)``), as ``torch.msort``.

    Returns
    -------
    Tensor, differentiable (a gather).
    """
    return sort(as_tensor_arg(input, "msort"), 0).values


class _MedianAll(Function):
    """The median of all elements, computed on the host; the gradient is spread evenly over
    the elements equal to it (over the NaNs when it is NaN), as torch's."""

    @staticmethod
    def forward(ctx, x):
        be = backend_of(x)
        a = be.to_numpy(x).reshape(-1)
        if a.size == 0:
            m = np.asarray(np.nan, x.dtype)
        elif a.dtype.kind == "f" and np.isnan(a).any():
            m = np.asarray(np.nan, x.dtype)
        else:
            m = np.asarray(np.sort(a, kind="stable")[(a.size - 1) // 2], x.dtype)
        y = be.asarray(m)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        be = backend_of(g)
        mask = np.isnan(x) if bool(np.isnan(y)) else np.equal(x, y)
        count = be.sum(mask.astype(g.dtype))
        return np.where(mask, be.div(g, count), g.dtype.type(0)).astype(g.dtype, copy=False)


def _median_index(a, axis):
    """Host int64 index of the lower median of ``a`` along ``axis`` (position ``(n - 1) // 2``
    of a stable sort; the first NaN where a row holds one), keeping ``axis`` with size 1."""
    n = a.shape[axis]
    idx = np.take(np.argsort(a, axis=axis, kind="stable"), [(n - 1) // 2], axis=axis)
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        has = nan.any(axis=axis, keepdims=True)
        idx = np.where(has, np.argmax(nan, axis=axis, keepdims=True), idx)
    return idx.astype(np.int64)


def median(input, dim=None, keepdim=False):
    """The lower median, as ``torch.median``: of all elements (``dim=None``), or along ``dim``.

    Parameters
    ----------
    input : Tensor
        Not bool. NaN propagates: a row holding NaN has median NaN.
    dim : int, optional
    keepdim : bool, default False
        With ``dim``, keep it with size 1.

    Returns
    -------
    Tensor (``dim=None``): the element at position ``(n - 1) // 2`` in sorted order (NaN for an
    empty input); the gradient is shared evenly among the elements equal to it.
    (values, indices) : namedtuple (with ``dim``): ``indices`` is the position in ``input``
    (among tied values, that of a stable sort, as torch's CPU); ``values`` is a differentiable
    gather, the gradient goes to ``indices``.
    """
    return _median_like("median", input, dim, keepdim, _MedianAll, _Median, _median_index)


def _median_like(op, input, dim, keepdim, whole, result, index_of):
    """The body :func:`median` and ``nanmedian`` share: the Function ``whole`` over all
    elements (``dim=None``), else ``result(values, indices)`` for the host indices
    ``index_of(array, axis)`` (``axis`` kept with size 1), the values gathered (so the
    gradient goes to the indices)."""
    input = as_tensor_arg(input, op)
    if input.dtype == _dtype.bool_:
        raise NotImplementedError(f"{op}: not implemented for dtype {input.dtype}")
    if dim is None:
        return whole.apply(input)
    axis = wrap_dim(dim, input.ndim, op)
    if input.ndim == 0:
        return result(clone(input), _on(input, np.zeros((), np.int64)))
    if input.shape[axis] == 0:
        raise IndexError(f"median(): Expected reduction dim {axis} to have non-zero size (input of shape "
                         f"{tuple(input.shape)})")
    idx = _index_like(op, np.ascontiguousarray(index_of(_host_array(input), axis)), input)
    values = gather(input, axis, idx)
    if not keepdim:
        values, idx = squeeze(values, axis), squeeze(idx, axis)
    return result(values, idx)
