"""Losses: the differentiable Functions and their functional forms (re-exported by
:mod:`numbagrad.nn.functional`; the Module wrappers live in :mod:`numbagrad.nn.loss`).
This module holds cross-entropy, NLL, MSE and L1 and the shared helpers; the rest of the
library lives in :mod:`.loss_pointwise` (regression and classification), :mod:`.ctc` and
:mod:`.loss_metric` (metric learning).

``cross_entropy`` is one fused node: a single @njit pass per row computes the
max-shifted log-sum-exp, the loss and the softmax (kept for backward), and backward
is a single pass producing ``softmax - onehot`` (weighted and smoothed as asked).
It equals ``nll_loss(log_softmax(x), t)`` (tested) without materialising the
log-probabilities or running two graph nodes.
"""
import math

import numpy as np

from ..autograd.function import Function, keep_versions
from .. import _dtype
from ..backend import backend_of
from ..tensor import Tensor
from . import _autocast
from ._check import out_of_range
from ._util import as_tensor_arg, broadcast_shape

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss"]

_REDUCTIONS = ("none", "mean", "sum")
_EMPTY = {}


def _empty(be, dtype):
    """A 1-element placeholder weight array on ``be``'s device (kernels ignore it)."""
    e = _EMPTY.get((be.name, dtype))
    if e is None:
        e = _EMPTY[(be.name, dtype)] = be.zeros(1, dtype)
    return e


def _scalar_out(be, value, dt):
    """A 0-d result array on ``be``'s device."""
    return be.asarray(np.asarray(value, dtype=dt))


def _check_reduction(reduction, opname):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{opname}: reduction={reduction!r} is not valid; expected 'none', 'mean' or 'sum'")


def _weight_array(weight, ncls, dtype, opname):
    if weight is None:
        return None
    w = weight.array if isinstance(weight, Tensor) else np.asarray(weight)
    if w.shape != (ncls,):
        raise ValueError(f"{opname}: weight tensor should be defined either for all {ncls} classes or no "
                         f"classes but got weight tensor of shape: {tuple(w.shape)}")
    be = backend_of(w)
    return be.contiguous(w if w.dtype == dtype else w.astype(dtype))


def _check_targets(t, ncls, ignore_index, opname):
    """Raise :func:`_report_bad_targets` unless every class target of the backend array ``t``
    is in ``[0, ncls)`` or ``ignore_index`` (one range pass when all are in range)."""
    if out_of_range(t, 0, ncls) is not None:
        h = backend_of(t).to_numpy(t)  # the rare path: ignore_index out of range, or a bad target
        if ((h != ignore_index) & ((h < 0) | (h >= ncls))).any():
            _report_bad_targets(h, ncls, ignore_index, opname)


def _report_bad_targets(t, ncls, ignore_index, opname):
    t = backend_of(t).to_numpy(t)
    bad = t[(t != ignore_index) & ((t < 0) | (t >= ncls))]
    v = int(bad.reshape(-1)[0])
    raise IndexError(f"{opname}: target {v} is out of bounds for {ncls} classes (valid class indices are "
                     f"0..{ncls - 1}, or ignore_index={ignore_index}); {bad.size} invalid target(s)")


class CrossEntropy(Function):
    """Fused softmax + cross-entropy for ``(N, C)`` logits and ``(N,)`` class indices."""

    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, reduction, smoothing):
        n, c = x.shape
        dt = x.dtype
        be = backend_of(x)
        x = be.contiguous(x)
        if target.dtype != np.int64 or not target.flags.c_contiguous:
            target = be.contiguous(target.astype(np.int64))
        prob = be.empty(n * c, dt)
        loss = be.empty(n, dt)
        row_w = be.empty(n, dt)
        has_w = weight is not None
        w = weight if has_w else _empty(be, dt)
        total, wtot, nbad = be.kernel("loss", "cross_entropy_fwd")(
            x.reshape(-1), target, w, has_w, ignore_index, smoothing, c, prob, loss, row_w)
        if nbad:
            _report_bad_targets(target, c, ignore_index, "cross_entropy")
        ctx.save_for_backward(prob, target, w)
        ctx.info = (n, c, has_w, ignore_index, smoothing, reduction, wtot)
        if reduction == "mean":
            return _scalar_out(be, total / wtot if wtot != 0 else math.nan, dt)
        if reduction == "sum":
            return _scalar_out(be, total, dt)
        return loss

    @staticmethod
    def backward(ctx, g):
        prob, target, w = ctx.saved_tensors
        be = backend_of(prob)
        n, c, has_w, ignore_index, smoothing, reduction, wtot = ctx.info
        # the kernel skips bad targets; the saved target may alias the caller's: say so instead
        _check_targets(target, c, ignore_index, "cross_entropy backward")
        dt = prob.dtype
        if reduction == "none":
            gout = be.contiguous(g if g.dtype == dt else g.astype(dt))
            per_row = True
        else:
            s = float(g)
            if reduction == "mean":
                s = s / wtot if wtot != 0 else math.nan
            gout = be.full(1, s, dt)
            per_row = False
        grad = be.empty(n * c, dt)
        be.kernel("loss", "cross_entropy_bwd")(
            prob, target, w, has_w, ignore_index, smoothing, c, gout, per_row, grad)
        return grad.reshape(n, c), None, None, None, None, None


class SoftCrossEntropy(Function):
    """Fused softmax + cross-entropy for ``(N, C)`` logits and ``(N, C)`` class probabilities."""

    @staticmethod
    def forward(ctx, x, target, weight, reduction, smoothing):
        n, c = x.shape
        dt = x.dtype
        be = backend_of(x)
        x = be.contiguous(x)
        y = be.contiguous(target if target.dtype == dt else target.astype(dt))
        prob = be.empty(n * c, dt)
        loss = be.empty(n, dt)
        ywsum = be.empty(n, dt)
        has_w = weight is not None
        w = weight if has_w else _empty(be, dt)
        total = be.kernel("loss", "cross_entropy_soft_fwd")(
            x.reshape(-1), y.reshape(-1), w, has_w, smoothing, c, prob, loss, ywsum)
        ctx.save_for_backward(prob, y, w, ywsum)
        ctx.info = (n, c, has_w, smoothing, reduction)
        if reduction == "mean":
            return _scalar_out(be, total / n if n else math.nan, dt)
        if reduction == "sum":
            return _scalar_out(be, total, dt)
        return loss

    @staticmethod
    def backward(ctx, g):
        prob, y, w, ywsum = ctx.saved_tensors
        be = backend_of(prob)
        n, c, has_w, smoothing, reduction = ctx.info
        dt = prob.dtype
        if reduction == "none":
            gout, per_row = be.contiguous(g if g.dtype == dt else g.astype(dt)), True
        else:
            s = float(g) / (n if reduction == "mean" else 1)
            gout, per_row = be.full(1, s, dt), False
        grad = be.empty(n * c, dt)
        be.kernel("loss", "cross_entropy_soft_bwd")(
            prob, y.reshape(-1), w, has_w, smoothing, c, ywsum, gout, per_row, grad)
        return grad.reshape(n, c), None, None, None, None


def _rows_first(input, target, opname, soft):
    """Bring ``(N, C, d1, ...)`` input to ``(N*d1*..., C)`` (class dim last) and the
    target alongside; ``(C,)`` input becomes one row. Returns the 2-D pair and the
    shape of the per-element loss."""
    from .shape import movedim, reshape
    nd = input.ndim
    if nd == 0:
        raise ValueError(f"{opname}: input must have at least 1 dimension (classes), got a 0-d tensor")
    if nd == 1:
        tshape = (input.shape[0],) if soft else ()
        if tuple(target.shape) != tshape:
            raise ValueError(f"{opname}: for input of shape {tuple(input.shape)} expected target of shape "
                             f"{tshape}, got {tuple(target.shape)}")
        return reshape(input, 1, -1), target.array.reshape(1, -1) if soft else target.array.reshape(1), ()
    c = input.shape[1]
    if soft:
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(f"{opname}: probability targets must have the input's shape "
                             f"{tuple(input.shape)}, got {tuple(target.shape)}")
    else:
        expect = (input.shape[0],) + tuple(input.shape[2:])
        if tuple(target.shape) != expect:
            raise ValueError(f"{opname}: expected target of shape {expect} for input of shape "
                             f"{tuple(input.shape)}, got target of shape {tuple(target.shape)}")
    if nd == 2:
        return input, target.array, (input.shape[0],)
    out_shape = (input.shape[0],) + tuple(input.shape[2:])
    x2 = reshape(movedim(input, 1, -1), -1, c)
    t = target.array
    t2 = backend_of(t).moveaxis(t, 1, -1).reshape(-1, c) if soft else t.reshape(-1)
    return x2, t2, out_shape


@_autocast.fp32
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Cross-entropy between logits and class indices (or class probabilities)
    (``torch.nn.functional.cross_entropy``).

    ``input`` is ``(N, C)``, ``(C,)`` or ``(N, C, d1, ...)``; ``target`` holds int class
    indices of shape ``(N,)`` / ``()`` / ``(N, d1, ...)``, or floating class
    probabilities of the input's shape. ``weight`` rescales each class; rows whose target
    is ``ignore_index`` are skipped (index targets only); ``label_smoothing`` mixes the
    target with the uniform distribution. ``reduction='mean'`` divides by the summed
    weight of the non-ignored rows (by N for probability targets). No gradient flows to
    the targets or the weights. float16 logits are computed in float32.
    """
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction, "cross_entropy")
    if not isinstance(input, Tensor):
        raise TypeError(f"cross_entropy: input must be a Tensor, got {type(input).__name__}")
    if not isinstance(target, Tensor):
        target = Tensor(np.asarray(target))
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if not _dtype.is_float(input.array.dtype):
        raise TypeError(f"cross_entropy: expected floating point logits, got dtype {input.dtype}")
    soft = _dtype.is_float(target.array.dtype)
    if not soft and target.array.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: target must hold integer class indices or floating class "
                        f"probabilities, got dtype {target.dtype}")
    if input.ndim == 2 and not soft and target.array.shape == (input.array.shape[0],):
        x2, t2, out_shape = input, target.array, None  # the common case, checked above
    else:
        x2, t2, out_shape = _rows_first(input, target, "cross_entropy", soft)
    c = x2.shape[1]
    half = x2.array.dtype if x2.array.dtype.itemsize == 2 else None  # float16 or bfloat16
    if half is not None:  # CPU @njit has no float16/bfloat16: compute in float32, cast back
        from .shape import cast
        x2 = cast(x2, np.dtype(np.float32))
    w = _weight_array(weight, c, x2.dtype, "cross_entropy")
    if soft:
        out = SoftCrossEntropy.apply(x2, t2, w, reduction, float(label_smoothing))
    else:
        out = CrossEntropy.apply(x2, t2, w, int(ignore_index), reduction, float(label_smoothing))
    keep_versions(out, target, weight)  # backward reads both (PyTorch saves them)
    if reduction == "none" and out_shape is not None and tuple(out.shape) != out_shape:
        out = out.reshape(out_shape)
    if half is not None:
        out = cast(out, half)
    return out


class NLLLossFn(Function):
    """Negative log-likelihood of ``(N, C)`` log-probabilities at class indices."""

    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, reduction):
        n, c = x.shape
        be = backend_of(x)
        t = target.astype(np.int64, copy=False)
        _check_targets(t, c, ignore_index, "nll_loss")
        valid = t != ignore_index
        ts = be.where(valid, t, 0)
        rows = be.arange(n)
        wr = (weight[ts] if weight is not None else be.ones(n, x.dtype)) * valid
        wr = wr.astype(x.dtype, copy=False)
        loss = -x[rows, ts] * wr
        wtot = float(wr.sum(dtype=np.float64))
        ctx.save_for_backward(ts, wr)
        ctx.info = (x.shape, x.dtype, reduction, wtot)
        if reduction == "mean":
            return _scalar_out(be, float(loss.sum(dtype=np.float64)) / wtot if wtot else math.nan, x.dtype)
        if reduction == "sum":
            return _scalar_out(be, float(loss.sum(dtype=np.float64)), x.dtype)
        return loss

    @staticmethod
    def backward(ctx, g):
        ts, wr = ctx.saved_tensors
        shape, dt, reduction, wtot = ctx.info
        be = backend_of(wr)
        if reduction == "none":
            gr = -(g if g.dtype == dt else g.astype(dt)) * wr
        else:
            s = float(g)
            if reduction == "mean":
                s = s / wtot if wtot else math.nan
            gr = (-s * wr).astype(dt)
        gx = be.zeros(shape, dt)
        gx[be.arange(shape[0]), ts] = gr
        return gx, None, None, None, None


@_autocast.fp32
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood loss on log-probabilities (``torch.nn.functional.nll_loss``):
    ``-weight[t] * input[n, t]``, reduced like :func:`cross_entropy`."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    _check_reduction(reduction, "nll_loss")
    if not isinstance(target, Tensor):
        target = Tensor(np.asarray(target))
    if target.array.dtype.kind not in "iu":
        raise TypeError(f"nll_loss: target must hold integer class indices, got dtype {target.dtype}")
    x2, t2, out_shape = _rows_first(input, target, "nll_loss", False)
    w = _weight_array(weight, x2.shape[1], x2.dtype, "nll_loss")
    out = keep_versions(NLLLossFn.apply(x2, t2, w, int(ignore_index), reduction), target, weight)
    if reduction == "none" and tuple(out.shape) != out_shape:
        out = out.reshape(out_shape)
    return out


class _PointwiseLoss(Function):
    """``mean/sum/none`` of an elementwise loss of ``input - target`` (broadcasting)."""

    @staticmethod
    def forward(ctx, x, y, reduction, kind):
        be = backend_of(x)
        d = be.sub(x, y)
        e = d * d if kind == "mse" else be.abs(d)
        ctx.save_for_backward(d)
        ctx.info = (x.shape, y.shape, reduction, kind, d.size)
        if reduction == "mean":
            return _scalar_out(be, float(e.mean(dtype=np.float64)) if e.size else math.nan, e.dtype)
        if reduction == "sum":
            return _scalar_out(be, float(e.sum(dtype=np.float64)), e.dtype)
        return e

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        xs, ys, reduction, kind, n = ctx.info
        be = backend_of(d)
        if kind == "mse":
            k = d * (2.0 if reduction == "none" else 2.0 * float(g) / (n if reduction == "mean" else 1))
            if reduction == "none":
                k = k * g
        else:
            k = be.sign(d)
            k = k * (g if reduction == "none" else float(g) / (n if reduction == "mean" else 1))
        k = k if k.dtype == d.dtype else k.astype(d.dtype)
        gx = be.sum_to_shape(k, xs) if ctx.needs_input_grad[0] else None
        gy = be.sum_to_shape(-k, ys) if ctx.needs_input_grad[1] else None
        return gx, gy, None, None


def _pointwise(input, target, reduction, kind, opname):
    _check_reduction(reduction, opname)
    input = as_tensor_arg(input, opname)
    target = as_tensor_arg(target, opname)
    if input.shape != target.shape:
        broadcast_shape(opname, input.shape, target.shape, names=("input", "target"), error=ValueError)
        import warnings
        warnings.warn(f"{opname}: using a target size {tuple(target.shape)} that is different from the input "
                      f"size {tuple(input.shape)}; this will likely lead to incorrect results due to "
                      "broadcasting.", stacklevel=3)
    if input.dtype != target.dtype:
        from .shape import cast
        from .. import _dtype
        d = _dtype.promote(input.dtype, target.dtype)
        input = cast(input, d) if input.dtype != d else input
        target = cast(target, d) if target.dtype != d else target
    return _PointwiseLoss.apply(input, target, reduction, kind)


@_autocast.fp32
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean squared error (``torch.nn.functional.mse_loss``)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    return _pointwise(input, target, reduction, "mse", "mse_loss")


@_autocast.fp32
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean absolute error (``torch.nn.functional.l1_loss``)."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    return _pointwise(input, target, reduction, "l1", "l1_loss")


def _legacy_reduction(size_average, reduce):
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"
