"""Reductions over any set of axes, with ``keepdim``."""
import builtins
import collections
import math

import numpy as np

from ..autograd.function import Function
from .. import _dtype
from ..backend import backend_of
from ..tensor import Tensor
from ._autocast import fp32
from ._check import check_index
from ._util import as_tensor_arg, norm_axis, wrap_dim
from . import elementwise as ew

values_indices = collections.namedtuple("values_indices", ["values", "indices"])


def _keep_shape(shape, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _squeeze(y, axes, keepdim):
    """A ``keepdims=True`` reduction result ``y`` as the caller asked: kept, or without ``axes``."""
    return y if keepdim else y.reshape(tuple(s for i, s in enumerate(y.shape) if i not in axes))


def _kept(ctx, y, axes, keepdim, *saved):
    """A forward's last step for a ``keepdims=True`` reduction ``y`` over ``axes``: save
    ``saved`` and ``axes`` for backward and return ``y`` as the caller asked."""
    ctx.save_for_backward(*saved)
    ctx.axes = axes
    return _squeeze(y, axes, keepdim)


class Sum(Function):
    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.meta = (x.shape, axes)
        return backend_of(x).sum(x, axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        shape, axes = ctx.meta
        be = backend_of(g)
        return be.broadcast_to(g.reshape(_keep_shape(shape, axes)), shape), None, None


class Mean(Function):
    """The mean of a bfloat16 input as one node, so its float32 sum is scaled before the one
    rounding to bfloat16 (``Sum`` then ``mul`` would round twice; torch rounds once)."""

    @staticmethod
    def forward(ctx, x, axes, keepdim, n):
        ctx.meta = (x.shape, axes, n)
        be = backend_of(x)
        return be.mul(be.sum(x, axis=axes, keepdims=keepdim), x.dtype.type(1.0 / n if n else float("nan")))

    @staticmethod
    def backward(ctx, g):
        shape, axes, n = ctx.meta
        be = backend_of(g)
        g = be.mul(g, g.dtype.type(1.0 / n if n else float("nan")))
        return be.broadcast_to(g.reshape(_keep_shape(shape, axes)), shape), None, None, None


def _axes_or_all(dim, x, opname):
    return norm_axis(dim, x.ndim, opname)


def sum(input, dim=None, keepdim=False, dtype=None):
    """Sum over ``dim`` (all dims if None). Integer and bool inputs sum to int64, as in PyTorch."""
    input = as_tensor_arg(input, "sum")
    if dtype is not None:
        input = input.to(_dtype.as_dtype(dtype))
    elif input.dtype.kind in "biu":
        input = input.long()
    return Sum.apply(input, _axes_or_all(dim, input, "sum"), keepdim)


def mean(input, dim=None, keepdim=False, dtype=None):
    """Arithmetic mean over ``dim``; floating inputs only, as in PyTorch."""
    input = as_tensor_arg(input, "mean")
    if dtype is not None:
        input = input.to(dtype)
    if not _dtype.is_float(input.dtype):
        raise RuntimeError(f"mean: could not infer output dtype; input dtype must be floating "
                           f"point, got {input.dtype}")
    axes = _axes_or_all(dim, input, "mean")
    n = int(np.prod([input.shape[a] for a in axes])) if axes else 1
    if input.dtype == _dtype.bfloat16:
        return Mean.apply(input, axes, keepdim, n)
    return ew.mul(Sum.apply(input, axes, keepdim), 1.0 / n if n else float("nan"))


def var(input, dim=None, unbiased=None, keepdim=False, correction=None):
    """Variance with ``correction`` (1 = unbiased, PyTorch's default)."""
    input = as_tensor_arg(input, "var")
    if input.dtype == _dtype.bfloat16:  # in float32, rounded once (as torch): composed bfloat16
        return _via_float32(var, input, dim, unbiased, keepdim, correction)  # ops round each step
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    axes = _axes_or_all(dim, input, "var")
    n = int(np.prod([input.shape[a] for a in axes])) if axes else 1
    mu = mean(input, axes, keepdim=True)
    d = ew.sub(input, mu)
    return ew.mul(sum(ew.mul(d, d), axes, keepdim), 1.0 / builtins.max(n - correction, 0) if n - correction > 0 else float("nan"))


def _via_float32(fn, input, *args):
    from .shape import cast
    return cast(fn(cast(input, _dtype.float32), *args), _dtype.bfloat16)


class _StdSqrt(Function):
    """``sqrt`` of a variance with torch's ``std_backward``: ``g / (2 * std)``, and 0 where the
    std is 0 (a constant input), where the chain rule through ``sqrt`` gives ``0 * inf = NaN``."""

    @staticmethod
    def forward(ctx, v):
        y = backend_of(v).sqrt(v)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        be = backend_of(g)
        t = y.dtype.type
        with np.errstate(divide="ignore", invalid="ignore"):
            return be.where(be.equal(y, t(0)), t(0), be.div(g, be.mul(y, t(2))))


def std(input, dim=None, unbiased=None, keepdim=False, correction=None):
    """The standard deviation over ``dim``, with Bessel's correction unless ``correction=0`` (or
    ``unbiased=False``), as ``torch.std``.
    """
    input = as_tensor_arg(input, "std")
    if input.dtype == _dtype.bfloat16:
        return _via_float32(std, input, dim, unbiased, keepdim, correction)
    if dim is not None:
        norm_axis(dim, input.ndim, "std")  # so that a bad dim names std, not var
    v = var(input, dim, unbiased, keepdim, correction)
    return _StdSqrt.apply(v) if _dtype.is_float(v.dtype) else ew.sqrt(v)


def var_mean(input, dim=None, unbiased=None, keepdim=False, correction=None):
    """``(var(input, ...), mean(input, ...))`` over the same ``dim`` in one call."""
    return var(input, dim, unbiased, keepdim, correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, correction=None):
    """``(std(input, ...), mean(input, ...))`` over the same ``dim`` in one call."""
    return std(input, dim, unbiased, keepdim, correction), mean(input, dim, keepdim)


class Prod(Function):
    @staticmethod
    def forward(ctx, x, axes, keepdim):
        be = backend_of(x)
        y = be.prod(x, axis=axes, keepdims=True)
        return _kept(ctx, y, axes, keepdim, x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        axes = ctx.axes
        g = g.reshape(y.shape)
        # d prod / d x_i = prod of the others; computed with exclusive cumulative
        # products along the flattened reduced axes so zeros in x are exact.
        be = backend_of(g)
        keep = [i for i in range(x.ndim) if i not in axes]
        perm = keep + list(axes)
        xp = np.transpose(x, perm).reshape(tuple(x.shape[i] for i in keep) + (-1,))
        ones = be.ones(xp.shape[:-1] + (1,), dtype=x.dtype)
        left = np.cumprod(np.concatenate([ones, xp[..., :-1]], -1), -1)
        right = np.flip(np.cumprod(np.flip(np.concatenate([xp[..., 1:], ones], -1), -1), -1), -1)
        others = (left * right).reshape(tuple(x.shape[i] for i in perm))
        others = np.transpose(others, tuple(int(i) for i in np.argsort(perm)))
        return (g * others).astype(x.dtype, copy=False), None, None


@fp32
def prod(input, dim=None, keepdim=False, dtype=None):
    """The product of the elements over ``dim`` (all of them by default), as ``torch.prod``; autocast
    runs it in float32.
    """
    input = as_tensor_arg(input, "prod")
    if dtype is not None:
        input = input.to(dtype)
    return Prod.apply(input, _axes_or_all(dim, input, "prod"), keepdim)


class _Extreme(Function):
    """max/min over axes; the gradient is split evenly among tied extremes (PyTorch's
    rule for full reductions ``amax``/``amin``)."""
    _fn = "amax"

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        be = backend_of(x)
        if x.size == 0:
            raise RuntimeError(f"{ctx._fn}: cannot reduce an empty tensor of shape {tuple(x.shape)}")
        y = getattr(be, ctx._fn)(x, axis=axes, keepdims=True)
        return _kept(ctx, y, axes, keepdim, x, y)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        be = backend_of(g)
        mask = be.equal(x, y).astype(g.dtype)
        count = be.sum(mask, axis=ctx.axes, keepdims=True)
        return be.mul(mask, be.div(g.reshape(y.shape), count)), None, None


class _Amin(_Extreme):
    _fn = "amin"


class _DimExtreme(Function):
    """max/min along one dim returning (values, indices); the gradient goes to the
    selected index only (PyTorch's rule for ``max(dim)``)."""
    _fn = "argmax"

    @staticmethod
    def forward(ctx, x, axis, keepdim):
        be = backend_of(x)
        if x.shape[axis] == 0:
            raise IndexError(f"{ctx._fn[3:]}(): cannot reduce over a zero-size dimension {axis} of "
                             f"shape {tuple(x.shape)}")
        idx = getattr(be, ctx._fn)(x, axis=axis).astype(np.int64, copy=False)
        # vals = take_along_axis(x, idx): the gather kernel on the (A, N, B) view
        shape = x.shape
        A, N, B = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
        half = x.dtype == np.float16  # CPU @njit has no float16: gather in float32
        xs = be.contiguous(x.astype(np.float32) if half else x)
        vals = be.empty(idx.shape, xs.dtype)
        be.kernel("indexing", "gather_fwd")(xs.reshape(A, N, B), be.contiguous(idx).reshape(A, 1, B),
                                            vals.reshape(A, 1, B))
        if half:
            vals = vals.astype(x.dtype)
        ctx.meta = (shape, axis)
        if keepdim:
            idx = np.expand_dims(idx, axis)
            vals = np.expand_dims(vals, axis)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)  # the returned indices: writing them raises at backward, as torch
        return vals, idx

    @staticmethod
    def backward(ctx, g, _gi):
        shape, axis = ctx.meta
        (idx,) = ctx.saved_tensors
        be = backend_of(g)
        check_index(f"{ctx._fn[3:]} backward", idx, shape[axis], axis, shape)  # the caller's indices tensor
        half = g.dtype == np.float16  # CPU @njit has no float16: scatter in float32
        gs = g.astype(np.float32) if half else g
        out = be.zeros(shape, gs.dtype)
        # out[.., idx, ..] = g along ``axis``: the scatter kernel on the (A, N, B) view.
        A, N, B = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
        if out.size:
            be.kernel("indexing", "scatter_fwd")(out.reshape(A, N, B), be.contiguous(idx).reshape(A, 1, B),
                                                 be.contiguous(gs).reshape(A, 1, B))
        return (out.astype(g.dtype) if half else out), None, None


class _DimMin(_DimExtreme):
    _fn = "argmin"


def _max_min(input, dim, keepdim, full, along, opname, other_fn):
    input = as_tensor_arg(input, opname)
    if isinstance(dim, Tensor):
        return other_fn(input, dim)
    if dim is None:
        return full.apply(input, tuple(range(input.ndim)), False)
    axis = wrap_dim(dim, input.ndim, opname)
    if input.ndim == 0:
        return values_indices(input, Tensor._from_array(backend_of(input.array).zeros((), np.int64)))
    v, i = along.apply(input, axis, keepdim)
    return values_indices(v, i)


def max(input, dim=None, keepdim=False):
    """``max(x)`` -> the largest element; ``max(x, dim)`` -> ``(values, indices)``;
    ``max(x, other_tensor)`` -> elementwise maximum."""
    return _max_min(input, dim, keepdim, _Extreme, _DimExtreme, "max", ew.maximum)


def min(input, dim=None, keepdim=False):
    """Like :func:`max`, for the smallest element."""
    return _max_min(input, dim, keepdim, _Amin, _DimMin, "min", ew.minimum)


def amax(input, dim=None, keepdim=False):
    """The maximum over ``dim`` (one int or several; all of them by default), as ``torch.amax``."""
    input = as_tensor_arg(input, "amax")
    return _Extreme.apply(input, _axes_or_all(dim, input, "amax"), keepdim)


def amin(input, dim=None, keepdim=False):
    """The minimum over ``dim`` (one int or several; all of them by default), as ``torch.amin``."""
    input = as_tensor_arg(input, "amin")
    return _Amin.apply(input, _axes_or_all(dim, input, "amin"), keepdim)


def _arg(input, dim, keepdim, fn, opname):
    input = as_tensor_arg(input, opname)
    be = backend_of(input.array)
    if dim is None:
        if input.numel() == 0:
            raise IndexError(f"{opname}: Expected reduction dim to be specified for input.numel() == 0 "
                             f"(input of shape {tuple(input.shape)})")
        return Tensor._from_array(be.asarray(getattr(be, fn)(input.array), np.int64).reshape(
            (1,) * input.ndim if keepdim else ()))
    axis = wrap_dim(dim, input.ndim, opname)
    if input.ndim and input.shape[axis] == 0:
        raise IndexError(f"{opname}: Expected reduction dim {axis} to have non-zero size (input of shape "
                         f"{tuple(input.shape)})")
    r = getattr(be, fn)(input.array, axis=axis)
    if keepdim:
        r = np.expand_dims(r, axis)
    return Tensor._from_array(r.astype(np.int64))


def argmax(input, dim=None, keepdim=False):
    """Index of the largest element (first on ties), over all elements or along ``dim``."""
    return _arg(input, dim, keepdim, "argmax", "argmax")


def argmin(input, dim=None, keepdim=False):
    """The index of the minimum over ``dim`` (of the flattened tensor when ``dim`` is ``None``)."""
    return _arg(input, dim, keepdim, "argmin", "argmin")


class LogSumExp(Function):
    @staticmethod
    def forward(ctx, x, axes, keepdim):
        be = backend_of(x)
        if x.size == 0:  # no max to shift by; the log of an empty sum is -inf, as in PyTorch
            m = be.zeros(tuple(1 if i in axes else d for i, d in enumerate(x.shape)), x.dtype)
        else:
            m = be.amax(x, axis=axes, keepdims=True)
            m = be.where(be.isfinite(m), m, x.dtype.type(0))
        e = be.exp(be.sub(x, m))
        s = be.sum(e, axis=axes, keepdims=True)
        with np.errstate(divide="ignore"):
            y = be.add(be.log(s), m)
        return _kept(ctx, y, axes, keepdim, x, m, s)

    @staticmethod
    def backward(ctx, g):
        x, m, s = ctx.saved_tensors
        be = backend_of(g)
        # d lse / dx = softmax(x) = exp(x - m) / s. NOTE: not exp(x - lse): in float32
        # lse = 1e4 + log(s) is rounded to ~1e-3, which would bias the gradient.
        return be.mul(be.div(g.reshape(m.shape), s), be.exp(be.sub(x, m))), None, None


def logsumexp(input, dim=None, keepdim=False):
    """``log(sum(exp(x)))`` over ``dim``, computed stably (shifted by the max)."""
    input = as_tensor_arg(input, "logsumexp")
    if not _dtype.is_float(input.dtype):
        input = input.float()
    return LogSumExp.apply(input, _axes_or_all(dim, input, "logsumexp"), keepdim)


class PNorm(Function):
    """The vector p-norm over ``axes`` for a finite ``p > 0`` other than 1, as one node with
    torch's gradient (``norm_backward``): where the norm is 0 the gradient is 0, not the
    NaN that the chain rule through ``sqrt`` (or ``pow(., 1/p)``) gives at 0."""

    @staticmethod
    def forward(ctx, x, axes, keepdim, p):
        be = backend_of(x)
        t = x.dtype.type
        if p == 2:
            n = be.sqrt(be.sum(be.mul(x, x), axis=axes, keepdims=True))
        else:
            n = be.pow(be.sum(be.pow(be.abs(x), t(p)), axis=axes, keepdims=True), t(1.0 / p))
        ctx.p = p
        return _kept(ctx, n, axes, keepdim, x, n)

    @staticmethod
    def backward(ctx, g):
        x, n = ctx.saved_tensors
        p = ctx.p
        be = backend_of(g)
        t = x.dtype.type
        g = g.reshape(n.shape)
        zero = be.equal(n, t(0))
        with np.errstate(divide="ignore", invalid="ignore"):
            if p == 2:  # x * g / n
                return be.mul(x, be.where(zero, t(0), be.div(g, n))), None, None, None
            if p < 1:   # sgn(x) |x|^(p-1) (0 at x = 0) * g * n^(1-p)
                ax = be.abs(x)
                xs = be.where(be.equal(x, t(0)), t(0), be.mul(be.sign(x), be.pow(ax, t(p - 1))))
                return be.mul(xs, be.mul(g, be.pow(n, t(1 - p)))), None, None, None
            # sgn(x) |x|^(p-1) * g / n^(p-1), 0 where n == 0
            xs = be.mul(be.sign(x), be.pow(be.abs(x), t(p - 1))) if p < 2 else \
                be.mul(x, be.pow(be.abs(x), t(p - 2)))
            return be.mul(xs, be.where(zero, t(0), be.div(g, be.pow(n, t(p - 1))))), None, None, None


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """Vector p-norm over ``dim`` (all elements by default): p = 2/'fro', 1, inf, -inf,
    0 (count of non-zeros) or any positive number."""
    input = as_tensor_arg(input, "norm")
    if dtype is not None:
        input = input.to(dtype)
    axes = _axes_or_all(dim, input, "norm")
    if p in ("fro", 2, 2.0):
        p = 2
    if p in (float("inf"), "inf"):
        return amax(ew.abs(input), axes, keepdim)
    if p in (float("-inf"), "-inf"):
        return amin(ew.abs(input), axes, keepdim)
    if p == 1:
        return sum(ew.abs(input), axes, keepdim)
    if p == 0:
        return sum(ew.ne(input, 0).float(), axes, keepdim)
    if isinstance(p, (int, float)) and p > 0:
        if not _dtype.is_float(input.dtype):
            input = input.float()
        return PNorm.apply(input, axes, keepdim, float(p))
    raise ValueError(f"norm: unsupported p={p!r}")


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """``input / max(||input||_p over dim, eps)`` (``torch.nn.functional.normalize``): unit
    vectors along ``dim``, composed of :func:`norm`, ``clamp`` and a division; at an
    all-zero vector the gradient is torch's (``1 / eps``, the norm's gradient being 0)."""
    input = as_tensor_arg(input, "normalize")
    return ew.div(input, ew.clamp(norm(input, p, dim, keepdim=True), min=eps))


def all(input, dim=None, keepdim=False):
    """Whether every element is nonzero, over ``dim`` (all of them by default), as a bool tensor."""
    input = as_tensor_arg(input, "all")
    axes = None if dim is None else norm_axis(dim, input.ndim, "all")
    be = backend_of(input.array)
    return Tensor._from_array(be.asarray(be.all(input.array, axis=axes, keepdims=keepdim)))


def any(input, dim=None, keepdim=False):
    """Whether any element is nonzero, over ``dim`` (all of them by default), as a bool tensor."""
    input = as_tensor_arg(input, "any")
    axes = None if dim is None else norm_axis(dim, input.ndim, "any")
    be = backend_of(input.array)
    return Tensor._from_array(be.asarray(be.any(input.array, axis=axes, keepdims=keepdim)))


class CumSum(Function):
    @staticmethod
    def forward(ctx, x, axis):
        ctx.axis = axis
        return np.cumsum(x, axis=axis, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        a = ctx.axis
        return np.flip(np.cumsum(np.flip(g, a), axis=a), a).astype(g.dtype, copy=False), None


def cumsum(input, dim):
    """The cumulative sum along ``dim``."""
    input = as_tensor_arg(input, "cumsum")
    return CumSum.apply(input, wrap_dim(dim, input.ndim, "cumsum"))
