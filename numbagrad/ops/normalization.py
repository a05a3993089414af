"""Normalisation ops with ``torch.nn.functional`` semantics: ``layer_norm``, ``rms_norm``,
``batch_norm``, ``group_norm``, ``instance_norm``.

Each op is one fused :class:`Function` whose forward and backward are the kernels of the
``normalization`` family (``numbagrad/kernels/cpu/normalization.py``; its docstring has the
measurements against the composed NumPy expressions, which the fused kernels beat 3-11x).
The op brings the input to a canonical C-contiguous layout first (a copy only for a
strided input):

* layer_norm / rms_norm: ``(rows, n)`` with ``n = prod(normalized_shape)``; the forward
  saves the per-row ``mean`` and ``rstd`` (1/std) for the backward, the backward returns
  ``dweight``/``dbias`` as the sum of per-chunk partial rows (a race-free parallel column
  reduction inside the dx pass);
* batch_norm / group_norm / instance_norm: ``(N, C, L)`` with ``L`` the product of the
  spatial dimensions. Batch statistics are reduced per channel over N and L; group norm
  per ``(n, group)``; instance norm is batch norm of the ``(1, N*C, L)`` view, as in
  PyTorch (so its running statistics are the batch means of the per-instance ones).

Semantics follow PyTorch: statistics use the biased variance; in training, batch_norm
updates ``running_mean``/``running_var`` in place with
``(1 - momentum) * running + momentum * batch`` (the unbiased variance for
``running_var``), and raises ``ValueError`` for one value per channel. ``momentum=None``
(a cumulative average) is resolved by the modules through ``num_batches_tracked``; the
functional form raises ``TypeError`` for it, as PyTorch's does. float16 inputs are computed
in float32 and the result is cast back (CPU kernels have no float16); weights are cast to
the input's dtype. Higher-order gradients are not supported (numbagrad-wide).
"""
import math

import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from ._util import as_tensor_arg, cast_back

__all__ = ["layer_norm", "rms_norm", "batch_norm", "group_norm", "instance_norm"]

_CHUNK_ELEMS = 1 << 15
"""LayerNorm backward: about this many elements per partial-sum chunk (at most 64 chunks),
so small inputs use one chunk and need no final sum."""


def _vec(be, a, dtype):
    """A parameter array as a contiguous 1-D kernel argument, or an empty array if absent."""
    if a is None:
        return be.empty((0,), dtype)
    return be.contiguous(a).reshape(-1)


def _reduce_rows(p, shape):
    """Sum of the partial rows ``p`` (P, ...) reshaped to ``shape``."""
    r = p[0] if p.shape[0] == 1 else np.sum(p, axis=0)
    return r.reshape(shape)


# ---- layer norm / rms norm ---------------------------------------------------------------------
class LayerNormFn(Function):
    """Layer norm over the trailing ``n`` elements (``center=False``: RMS norm)."""

    @staticmethod
    def forward(ctx, x, w, b, n, center, eps):
        be = backend_of(x)
        dt = x.dtype
        rows = x.size // n if n else math.prod(x.shape[:x.ndim - 1])
        x2 = be.contiguous(x).reshape(rows, n)
        out = be.empty(x2.shape, dt)
        mean = be.empty((rows,), dt)
        rstd = be.empty((rows,), dt)
        wk = _vec(be, w, dt)
        be.kernel("normalization", "layer_norm_fwd")(x2, wk, _vec(be, b, dt), bool(center), dt.type(eps),
                                                     out, mean, rstd)
        ctx.n = n
        ctx.center = bool(center)
        ctx.wshape = None if w is None else w.shape
        ctx.bshape = None if b is None else b.shape
        ctx.save_for_backward(x, mean, rstd, wk)
        return out.reshape(x.shape)

    @staticmethod
    def backward(ctx, g):
        be = backend_of(g)
        x, mean, rstd, wk = ctx.saved_tensors
        n = ctx.n
        dt = x.dtype
        rows = mean.shape[0]
        g2 = be.contiguous(g).reshape(rows, n)
        x2 = be.contiguous(x).reshape(rows, n)
        chunks = max(1, min(rows, 64, (rows * n) // _CHUNK_ELEMS))
        dx = be.empty(g2.shape, dt)
        dwp = be.empty((chunks, n), dt)
        dbp = be.empty((chunks, n), dt)
        be.kernel("normalization", "layer_norm_bwd")(g2, x2, mean, rstd, wk, ctx.center, dx, dwp, dbp)
        needs = ctx.needs_input_grad
        dw = _reduce_rows(dwp, ctx.wshape) if needs[1] else None
        db = _reduce_rows(dbp, ctx.bshape) if needs[2] else None
        return (dx.reshape(x.shape) if needs[0] else None), dw, db, None, None, None


def _float_input(x, opname):
    """(x in a kernel dtype, dtype to cast the result back to or None)."""
    dt = x.dtype
    if dt.kind != "f" and not _dtype.is_float(dt):
        raise RuntimeError(f"{opname}: expected a floating-point input, got {dt} "
                           f"(shape {tuple(x.shape)})")
    if dt.itemsize == 2:  # float16 or bfloat16: no CPU @njit type
        from .shape import cast
        return cast(x, _dtype.float32), dt
    return x, None


def _param(p, x, opname, what, shape):
    """Check a weight/bias against ``shape`` and the input's device; cast to x's dtype."""
    if p is None:
        return None
    p = as_tensor_arg(p, opname)
    if tuple(p.shape) != tuple(shape):
        raise RuntimeError(f"{opname}: expected {what} of shape {tuple(shape)}, got {tuple(p.shape)} "
                           f"{p.dtype} (input {tuple(x.shape)} {x.dtype})")
    if type(p.array) is not type(x.array):
        raise RuntimeError(f"{opname}: expected all tensors to be on the same device, got input on "
                           f"{x.device} and {what} on {p.device}")
    if p.dtype != x.dtype:
        from .shape import cast
        p = cast(p, x.dtype)
    return p


def _affine(x, weight, bias, shape, opname):
    """``(x, back, w, b)``: :func:`_float_input` and the weight and bias (each ``shape``, or
    None) checked and cast by :func:`_param`."""
    x, back = _float_input(x, opname)
    return x, back, _param(weight, x, opname, "weight", shape), _param(bias, x, opname, "bias", shape)


def _nc_input(input, opname, exc=ValueError, ndim=2, layout="(N, C, *)"):
    """``input`` as a Tensor with at least ``ndim`` dimensions (``layout``), else ``exc``."""
    x = as_tensor_arg(input, opname)
    if x.ndim < ndim:
        raise exc(f"{opname}: expected an input of shape {layout}, got {tuple(x.shape)} {x.dtype}")
    return x


def _normalized_shape(normalized_shape):
    if isinstance(normalized_shape, (int, np.integer)):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


def _check_normalized(x, shape, opname):
    k = len(shape)
    if k == 0 or x.ndim < k or tuple(x.shape[x.ndim - k:]) != shape:
        raise RuntimeError(f"{opname}: given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in shape)}], but got input of size "
                           f"{tuple(x.shape)} {x.dtype}")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Layer normalisation over the trailing ``normalized_shape`` dimensions.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the mean and the biased
    variance over the last ``len(normalized_shape)`` dimensions of ``input``.

    Parameters
    ----------
    input : Tensor
        ``(*, *normalized_shape)``.
    normalized_shape : int or tuple of int
        The trailing shape to normalise over.
    weight, bias : Tensor, optional
        Of shape ``normalized_shape``; absent means 1 and 0.
    eps : float
        Added to the variance.

    Returns
    -------
    Tensor
        The input's shape and dtype.
    """
    x = as_tensor_arg(input, "layer_norm")
    shape = _normalized_shape(normalized_shape)
    _check_normalized(x, shape, "layer_norm")
    x, back, w, b = _affine(x, weight, bias, shape, "layer_norm")
    return cast_back(LayerNormFn.apply(x, w, b, math.prod(shape), True, float(eps)), back)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` dimensions.

    ``y = x / sqrt(mean(x**2) + eps) * weight``; ``eps=None`` is the machine epsilon of
    the computation dtype (``torch.finfo(float32).eps`` for float16/float32 inputs).

    Parameters
    ----------
    input : Tensor
        ``(*, *normalized_shape)``.
    normalized_shape : int or tuple of int
    weight : Tensor, optional
        Of shape ``normalized_shape``.
    eps : float, optional

    Returns
    -------
    Tensor
    """
    x = as_tensor_arg(input, "rms_norm")
    shape = _normalized_shape(normalized_shape)
    _check_normalized(x, shape, "rms_norm")
    x, back, w, _ = _affine(x, weight, None, shape, "rms_norm")
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    return cast_back(LayerNormFn.apply(x, w, None, math.prod(shape), False, float(eps)), back)


# ---- batch norm -------------------------------------------------------------------------------
def _ncl(be, a):
    """``a`` (N, C, *) as a C-contiguous (N, C, L) array."""
    return be.contiguous(a).reshape(a.shape[0], a.shape[1], math.prod(a.shape[2:]))


def batch_stats(be, x3):
    """``(mean, var, m)``: the per-channel mean and biased variance of ``x3`` (N, C, L) by
    the stats kernel, and the count ``m`` of values per channel. An empty batch gives
    statistics 0 (finite gradients, as torch). Also SyncBatchNorm's."""
    C, dt = x3.shape[1], x3.dtype
    m = x3.shape[0] * x3.shape[2]
    if m == 0:
        return be.zeros((C,), dt), be.zeros((C,), dt), m
    mean = be.empty((C,), dt)
    var = be.empty((C,), dt)
    be.kernel("normalization", "batch_norm_stats")(x3, mean, var)
    return mean, var, m


class BatchNormFn(Function):
    """Batch norm of (N, C, *) with batch statistics (``training``) or given ones.

    ``rm``/``rv`` are the running-statistics arrays (or None); with ``training`` they are
    updated in place (the public function bumps their tensors' versions)."""

    @staticmethod
    def forward(ctx, x, w, b, rm, rv, training, momentum, eps):
        be = backend_of(x)
        dt = x.dtype
        x3 = _ncl(be, x)
        if training:
            mean, var, m = batch_stats(be, x3)
            invstd = 1.0 / np.sqrt(var + dt.type(eps))
            if m and (rm is not None or rv is not None):  # an empty batch leaves them untouched, as torch
                mom = float(momentum)
                if rm is not None:
                    np.copyto(rm, rm * (1.0 - mom) + mean * mom, casting="unsafe")
                if rv is not None:
                    unbiased = var * dt.type(m / (m - 1)) if m > 1 else var
                    np.copyto(rv, rv * (1.0 - mom) + unbiased * mom, casting="unsafe")
        else:
            mean = be.astype(rm, dt)
            invstd = 1.0 / np.sqrt(be.astype(rv, dt) + dt.type(eps))
        invstd = be.astype(invstd, dt) if invstd.dtype != dt else invstd
        ctx.training = bool(training)
        return batch_norm_out(ctx, be, x, x3, mean, invstd, w, b)

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensors[0]
        dx, dw, db, _ = batch_norm_grads(ctx, g, ctx.training)
        return batch_norm_returns(ctx, x, dx, dw, db)


def batch_norm_out(ctx, be, x, x3, mean, invstd, w, b):
    """The batch-norm forward kernel on ``x3`` (``x`` as (N, C, L)) with the per-channel
    ``mean`` and ``invstd``; saves ``(x, mean, invstd, weight)`` for :func:`batch_norm_grads`
    and returns the output in ``x``'s shape. Also SyncBatchNorm's."""
    dt = x.dtype
    out = be.empty(x3.shape, dt)
    wk = _vec(be, w, dt)
    be.kernel("normalization", "batch_norm_fwd")(x3, mean, invstd, wk, _vec(be, b, dt), out)
    ctx.save_for_backward(x, mean, invstd, wk)
    return out.reshape(x.shape)


def _saved_ncl(ctx, g):
    """``(be, x, mean, rstd, wk, g3, x3)`` of a norm node over (N, C, *) that saved
    ``(x, mean, rstd, weight)``: ``g3``/``x3`` are ``g``/``x`` as (N, C, L)."""
    be = backend_of(g)
    x, mean, rstd, wk = ctx.saved_tensors
    return be, x, mean, rstd, wk, _ncl(be, g), _ncl(be, x)


def batch_norm_grads(ctx, g, training):
    """The batch-norm backward kernel on a node that saved ``(x, mean, invstd, weight)``:
    ``(dx as (N, C, L), dweight, dbias, x as (N, C, L))``; ``training``: batch statistics
    (else the statistics are constants: ``dx = g * weight * invstd``). Also SyncBatchNorm's."""
    be, x, mean, invstd, wk, g3, x3 = _saved_ncl(ctx, g)
    dt = x.dtype
    C = x3.shape[1]
    dx = be.empty(x3.shape, dt)
    dw = be.empty((C,), dt)
    db = be.empty((C,), dt)
    be.kernel("normalization", "batch_norm_bwd")(g3, x3, mean, invstd, wk, training, dx, dw, db)
    return dx, dw, db, x3


def batch_norm_returns(ctx, x, dx, dw, db):
    """A batch-norm node's backward result: the needed gradients, None for the rest."""
    needs = ctx.needs_input_grad
    return ((dx.reshape(x.shape) if needs[0] else None), (dw if needs[1] else None),
            (db if needs[2] else None)) + (None,) * (len(needs) - 3)


def _verify_batch_size(shape, opname):
    size = shape[0]
    for s in shape[2:]:
        size *= s
    if size == 1:
        raise ValueError(f"{opname}: Expected more than 1 value per channel when training, got input size "
                         f"{tuple(shape)}")


def _stat(t, C, opname, what, x):
    if t is None:
        return None
    if not isinstance(t, Tensor):
        raise TypeError(f"{opname}: {what} must be a Tensor or None, got {type(t).__name__}")
    if tuple(t.shape) != (C,):
        raise RuntimeError(f"{opname}: {what} should contain {C} elements not {t.array.size} "
                           f"(input {tuple(x.shape)} {x.dtype})")
    if type(t.array) is not type(x.array):
        raise RuntimeError(f"{opname}: expected all tensors to be on the same device, got input on "
                           f"{x.device} and {what} on {t.device}")
    return t


def _stats(running_mean, running_var, C, opname, x):
    """The running mean and variance, each checked by :func:`_stat`."""
    return (_stat(running_mean, C, opname, "running_mean", x), _stat(running_var, C, opname, "running_var", x))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5):
    """Batch normalisation over every dimension but the channel dimension 1.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` per channel. With ``training``
    the batch's mean and biased variance are used and ``running_mean``/``running_var``
    (when given) are updated in place:
    ``running = (1 - momentum) * running + momentum * batch_stat`` (unbiased variance).
    Otherwise the running statistics are used.

    Parameters
    ----------
    input : Tensor
        ``(N, C, *)``.
    running_mean, running_var : Tensor or None
        ``(C,)`` buffers; required when ``training`` is False.
    weight, bias : Tensor, optional
        ``(C,)``.
    training : bool
    momentum : float
    eps : float

    Returns
    -------
    Tensor
        The input's shape and dtype.
    """
    x = _nc_input(input, "batch_norm")
    C = x.shape[1]
    rm, rv = _stats(running_mean, running_var, C, "batch_norm", x)
    if training:
        _verify_batch_size(tuple(x.shape), "batch_norm")
        if eps <= 0.0:
            raise ValueError(f"batch_norm: eps must be positive during training, but got {eps}")
    elif eps < 0.0:
        raise ValueError(f"batch_norm: eps must be non-negative, but got {eps}")
    if not training and (rm is None or rv is None):
        raise RuntimeError("batch_norm: running_mean and running_var must be defined in evaluation mode "
                           "(training=False)")
    x, back, w, b = _affine(x, weight, bias, (C,), "batch_norm")
    if momentum is None:  # as torch.nn.functional.batch_norm (the modules resolve None themselves)
        raise TypeError("batch_norm(): argument 'momentum' must be float, not NoneType")
    y = BatchNormFn.apply(x, w, b, None if rm is None else rm.array, None if rv is None else rv.array,
                          bool(training), float(momentum), float(eps))
    if training:
        for t in (rm, rv):
            if t is not None:
                t._bump_version()
    return cast_back(y, back)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Instance normalisation: each (sample, channel) normalised over its spatial elements.

    Computed as batch norm of the ``(1, N*C, *)`` view (PyTorch's definition): with
    ``use_input_stats`` the running statistics, when given, move towards the batch mean of
    the per-instance statistics; otherwise they are used to normalise.

    Parameters
    ----------
    input : Tensor
        ``(N, C, *)``.
    running_mean, running_var : Tensor, optional
        ``(C,)``.
    weight, bias : Tensor, optional
        ``(C,)``.
    use_input_stats : bool
    momentum, eps : float

    Returns
    -------
    Tensor
    """
    from .shape import repeat
    x = _nc_input(input, "instance_norm", ndim=3, layout="(N, C, L, ...)")
    N, C = x.shape[0], x.shape[1]
    rm, rv = _stats(running_mean, running_var, C, "instance_norm", x)
    if use_input_stats and math.prod(x.shape[2:]) == 1:
        raise ValueError(f"instance_norm: Expected more than 1 spatial element when training, got input size "
                         f"{tuple(x.shape)}")
    if not use_input_stats and (rm is None or rv is None):
        raise RuntimeError("instance_norm: Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    x, back, w, b = _affine(x, weight, bias, (C,), "instance_norm")
    be = backend_of(x.array)

    def tiled(t):
        if t is None:
            return None
        return be.copy(np.broadcast_to(t.array.reshape(1, C), (N, C))).reshape(N * C)

    trm, trv = tiled(rm), tiled(rv)
    w2 = None if w is None else repeat(w, N)
    b2 = None if b is None else repeat(b, N)
    x2 = x.reshape((1, N * C) + tuple(x.shape[2:]))
    y = BatchNormFn.apply(x2, w2, b2, trm, trv, bool(use_input_stats), float(momentum or 0.0), float(eps))
    if use_input_stats:
        for t, tt in ((rm, trm), (rv, trv)):
            if t is not None:
                np.copyto(t.array, np.mean(tt.reshape(N, C), axis=0), casting="unsafe")
                t._bump_version()
    return cast_back(y.reshape(tuple(x.shape)), back)


# ---- group norm -------------------------------------------------------------------------------
class GroupNormFn(Function):
    """Group norm of (N, C, *) over ``groups`` groups of channels."""

    @staticmethod
    def forward(ctx, x, w, b, groups, eps):
        be = backend_of(x)
        dt = x.dtype
        x3 = _ncl(be, x)
        N = x3.shape[0]
        out = be.empty(x3.shape, dt)
        mean = be.empty((N, groups), dt)
        rstd = be.empty((N, groups), dt)
        wk = _vec(be, w, dt)
        be.kernel("normalization", "group_norm_fwd")(x3, wk, _vec(be, b, dt), dt.type(eps), out, mean, rstd)
        ctx.save_for_backward(x, mean, rstd, wk)
        return out.reshape(x.shape)

    @staticmethod
    def backward(ctx, g):
        be, x, mean, rstd, wk, g3, x3 = _saved_ncl(ctx, g)
        dt = x.dtype
        N, C = x3.shape[0], x3.shape[1]
        dx = be.empty(x3.shape, dt)
        dwp = be.empty((N, C), dt)
        dbp = be.empty((N, C), dt)
        be.kernel("normalization", "group_norm_bwd")(g3, x3, mean, rstd, wk, dx, dwp, dbp)
        needs = ctx.needs_input_grad
        return ((dx.reshape(x.shape) if needs[0] else None),
                (_reduce_rows(dwp, (C,)) if needs[1] else None),
                (_reduce_rows(dbp, (C,)) if needs[2] else None), None, None)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalisation: channels split into ``num_groups`` groups, each (sample, group)
    normalised over its channels and spatial elements, then a per-channel affine map.

    Parameters
    ----------
    input : Tensor
        ``(N, C, *)`` with ``C`` divisible by ``num_groups``.
    num_groups : int
    weight, bias : Tensor, optional
        ``(C,)``.
    eps : float

    Returns
    -------
    Tensor
    """
    x = _nc_input(input, "group_norm", RuntimeError)
    C = x.shape[1]
    num_groups = int(num_groups)
    if num_groups <= 0 or C % num_groups:
        raise RuntimeError(f"group_norm: expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {tuple(x.shape)} and num_groups={num_groups}")
    x, back, w, b = _affine(x, weight, bias, (C,), "group_norm")
    return cast_back(GroupNormFn.apply(x, w, b, num_groups, float(eps)), back)
