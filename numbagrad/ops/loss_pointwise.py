"""Regression and classification losses beyond cross-entropy (PyTorch's names, arguments
and semantics): the Functions and their functional forms (the Module wrappers live in
:mod:`numbagrad.nn.loss_pointwise`).

Each loss is one graph node. Forward and backward work on backend arrays with NumPy
ufuncs (which run CUDA kernels on ``CudaArray`` inputs), in numerically stable forms:

* softplus terms as ``max(z, 0) + log1p(exp(-|z|))`` and sigmoids from ``exp(-|x|)``, so
  logits of +-1e4 give exact limits and no inf/NaN;
* ``binary_cross_entropy_with_logits`` is a fused kernel pair (``kernels/{cpu,cuda}/bce.py``:
  one @njit pass forward, one backward);
* the focal losses write ``(1 - p_t)^gamma`` and its derivative through ``q = 1 - p_t``
  computed as ``-expm1(log p_t)`` (softmax form) or as ``sigmoid(-+x)`` (sigmoid form),
  and the factor ``q^(gamma-1)`` of the derivative as ``q^gamma * (dq / q)`` with the ratio's
  finite limit where ``q = 0``: finite for ``gamma < 1`` as ``p_t -> 1``.

Reductions: 'mean' / 'sum' give 0-d results (sums accumulate in float64); 'mean' of an
empty input is NaN, as in PyTorch. float16 inputs are computed in float32 and the result
cast back. Broadcasting between input and target follows PyTorch per loss (smooth_l1,
huber, poisson, gaussian (var rules), kl_div broadcast; the BCE losses require equal
shapes); incompatible shapes raise :class:`LossShapeError`, which is both a ``ValueError``
and a ``RuntimeError`` (PyTorch raises either, depending on the loss).

Gradients flow to ``input`` and, where PyTorch's formula is differentiable in it, to
``target`` (and to ``var`` in ``gaussian_nll_loss``); never to ``weight`` / ``pos_weight`` /
``alpha``, nor to the targets of the two focal losses and ``multi_margin_loss``.
"""
import functools
import math
import warnings

import numpy as np

from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from . import _autocast
from ._util import broadcast_shape, cast_back, float_operands, same_device
from .loss import (_check_reduction, _empty, _legacy_reduction, _report_bad_targets,
                   _rows_first, _scalar_out)

__all__ = ["smooth_l1_loss", "huber_loss", "poisson_nll_loss", "gaussian_nll_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "kl_div", "sigmoid_focal_loss", "focal_loss", "multi_margin_loss",
           "multilabel_soft_margin_loss", "LossShapeError"]

_F32 = np.dtype(np.float32)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class LossShapeError(ValueError, RuntimeError):
    """Operand shapes a loss cannot combine (a ``ValueError`` and a ``RuntimeError``)."""


# ---- shared helpers ------------------------------------------------------------------------------
def _tensor(x, opname, what):
    if isinstance(x, Tensor):
        return x
    try:
        return Tensor(np.asarray(x))
    except Exception:
        raise TypeError(f"{opname}: {what} must be a Tensor, got {type(x).__name__}") from None


# the prologue every loss here shares: one floating dtype, float16 (and bfloat16) computed in float32
_float_operands = functools.partial(float_operands, upcast_bfloat16=True)


def _broadcast_shape(opname, a, b, what=("input", "target")):
    return broadcast_shape(opname, tuple(a), tuple(b), names=what, error=LossShapeError)


def _warn_size(opname, input, target):
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"{opname}: using a target size {tuple(target.shape)} that is different to the input "
                      f"size {tuple(input.shape)}. This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", stacklevel=3)


def _aux(a, be, dt, opname, what, shape=None):
    """An auxiliary operand (weight, pos_weight, alpha) as a ``dt`` array on ``be``'s device,
    checked to broadcast to ``shape`` (when given). No gradient flows to it."""
    if a is None:
        return None
    if isinstance(a, Tensor):
        arr = a.array
        if backend_of(arr).name != be.name:
            raise RuntimeError(f"{opname}: {what} is on {a.device} but the input is on {be.device}")
    else:
        arr = be.asarray(np.asarray(a))
    if arr.dtype != dt:
        arr = arr.astype(dt)
    if shape is not None:
        try:
            ok = tuple(np.broadcast_shapes(tuple(arr.shape), tuple(shape))) == tuple(shape)
        except ValueError:
            ok = False
        if not ok:
            raise LossShapeError(f"{opname}: {what} of shape {tuple(arr.shape)} cannot be broadcast to the "
                                 f"input's shape {tuple(shape)}")
    return arr


def _reduced(be, e, reduction, count=None):
    """The forward result of an elementwise loss ``e`` under ``reduction``."""
    if reduction == "none":
        return e
    s = float(e.sum(dtype=np.float64)) if e.size else 0.0
    if reduction == "sum":
        return _scalar_out(be, s, e.dtype)
    n = e.size if count is None else count
    return _scalar_out(be, s / n if n else math.nan, e.dtype)


def _gscale(g, reduction, n, dt):
    """The upstream gradient as a multiplier: an array for 'none', a Python float (already
    divided by the mean's count) otherwise."""
    if reduction == "none":
        return g if g.dtype == dt else g.astype(dt)
    s = float(g)
    if reduction == "mean":
        s = s / n if n else math.nan
    return s


def _to_shape(be, k, shape, full_shape):
    """``k`` (broadcastable to ``full_shape``) as the gradient of an operand of ``shape``."""
    if tuple(k.shape) != tuple(full_shape):
        k = be.contiguous(be.broadcast_to(k, full_shape))
    return be.sum_to_shape(k, tuple(shape))


def _errstate():
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")


def _softplus_parts(x):
    """``(e, sp(x), sp(-x))`` with ``e = exp(-|x|)``, ``sp(z) = log(1 + exp(z))``, overflow-free."""
    be = backend_of(x)
    e = be.exp(-be.abs(x))
    l1 = be.log1p(e)
    return e, be.maximum(x, 0) + l1, be.maximum(-x, 0) + l1


def _sigmoids(x, e):
    """``(sigmoid(x), sigmoid(-x))`` from ``e = exp(-|x|)``, each accurate to relative rounding."""
    inv = 1.0 / (1.0 + e)
    ei = e * inv
    pos = x >= 0
    be = backend_of(x)
    return be.where(pos, inv, ei), be.where(pos, ei, inv)


def _legacy(size_average, reduce, reduction, opname=None):
    """``reduction``, or the one the deprecated ``size_average`` / ``reduce`` name; checked
    when ``opname`` is given."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    if opname is not None:
        _check_reduction(reduction, opname)
    return reduction


def _weighted_operands(opname, input, target, weight):
    """``(input, target, w, back)`` of a loss whose ``target`` has the input's shape: the two
    in a float dtype (``back``: the dtype to cast the loss back to, see
    :func:`_float_operands`) and ``weight`` (or None) an array of that dtype on their device
    that broadcasts to their shape (:func:`_aux`)."""
    (input, target), back = _float_operands(opname, input, target)
    w = _aux(weight, backend_of(input.array), input.dtype, opname, "weight", input.shape)
    return input, target, w, back


def _pair(input, target, opname):
    """``input`` and ``target`` as tensors on one device."""
    input, target = _tensor(input, opname, "input"), _tensor(target, opname, "target")
    same_device(opname, input, target)
    return input, target


# ---- smooth L1 / Huber ----------------------------------------------------------------------------
class _SmoothFn(Function):
    """``smooth_l1`` (kind 0, parameter beta) or ``huber`` (kind 1, parameter delta) of ``x - y``."""

    @staticmethod
    def forward(ctx, x, y, reduction, kind, c):
        be = backend_of(x)
        d = be.sub(x, y)
        a = be.abs(d)
        if kind == 0 and c == 0.0:
            e = a
        elif kind == 0:
            e = be.where(a < c, (0.5 / c) * (d * d), a - 0.5 * c)
        else:
            e = be.where(a < c, 0.5 * (d * d), c * (a - 0.5 * c))
        e = e.astype(x.dtype, copy=False)
        ctx.save_for_backward(d)
        ctx.info = (x.shape, y.shape, reduction, kind, c, e.size)
        return _reduced(be, e, reduction)

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        xs, ys, reduction, kind, c, n = ctx.info
        be = backend_of(d)
        s = be.sign(d)
        if kind == 0 and c == 0.0:
            k = s
        elif kind == 0:
            k = be.where(be.abs(d) < c, d * (1.0 / c), s)
        else:
            k = be.where(be.abs(d) < c, d, c * s)
        k = (k * _gscale(g, reduction, n, d.dtype)).astype(d.dtype, copy=False)
        gx = _to_shape(be, k, xs, d.shape) if ctx.needs_input_grad[0] else None
        gy = _to_shape(be, -k, ys, d.shape) if ctx.needs_input_grad[1] else None
        return gx, gy, None, None, None


def _smooth(input, target, reduction, kind, c, opname):
    _check_reduction(reduction, opname)
    input, target = _pair(input, target, opname)
    _broadcast_shape(opname, input.shape, target.shape)
    _warn_size(opname, input, target)
    (input, target), back = _float_operands(opname, input, target)
    return cast_back(_SmoothFn.apply(input, target, reduction, kind, float(c)), back)


@_autocast.fp32
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Smooth L1 loss (``torch.nn.functional.smooth_l1_loss``): ``0.5 d^2 / beta`` where
    ``|d| < beta``, else ``|d| - 0.5 beta``, ``d = input - target`` (broadcast);
    ``beta = 0`` is the L1 loss."""
    reduction = _legacy(size_average, reduce, reduction)
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss does not support negative values for beta, got beta={beta}")
    return _smooth(input, target, reduction, 0, beta, "smooth_l1_loss")


@_autocast.fp32
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """Huber loss (``torch.nn.functional.huber_loss``): ``0.5 d^2`` where ``|d| < delta``,
    else ``delta (|d| - 0.5 delta)``. ``weight`` (input's shape, as PyTorch) scales each
    element before the reduction."""
    if delta <= 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta, got delta={delta}")
    if weight is None:
        return _smooth(input, target, reduction, 1, delta, "huber_loss")
    _check_reduction(reduction, "huber_loss")
    input = _tensor(input, "huber_loss", "input")
    weight = _tensor(weight, "huber_loss", "weight")
    if tuple(weight.shape) != tuple(input.shape):
        raise LossShapeError(f"huber_loss: weights and input must have the same size, got weight of shape "
                             f"{tuple(weight.shape)} and input of shape {tuple(input.shape)}")
    e = _smooth(input, target, "none", 1, delta, "huber_loss") * weight.detach()
    if reduction == "none":
        return e
    from .reduce import sum as _sum
    s = _sum(e)
    if reduction == "mean":
        s = s / e.numel() if e.numel() else s * math.nan
    return s


# ---- Poisson / Gaussian negative log-likelihood ------------------------------------------------------
class _PoissonNLLFn(Function):
    @staticmethod
    def forward(ctx, x, t, log_input, full, eps, reduction):
        be = backend_of(x)
        with _errstate():
            if log_input:
                ex = be.exp(x)
                e = ex - t * x
                aux = ex
            else:
                lx = be.log(x + eps)
                e = x - t * lx
                aux = lx
            big = None
            if full:
                big = t > 1
                ts = be.where(big, t, 1)
                e = e + be.where(big, ts * be.log(ts) - ts + 0.5 * be.log((2 * math.pi) * ts), 0)
        e = e.astype(x.dtype, copy=False)
        ctx.save_for_backward(x, t, aux)
        ctx.info = (log_input, full, eps, reduction, e.shape, e.size)
        return _reduced(be, e, reduction)

    @staticmethod
    def backward(ctx, g):
        x, t, aux = ctx.saved_tensors
        log_input, full, eps, reduction, shape, n = ctx.info
        be = backend_of(x)
        gs = _gscale(g, reduction, n, x.dtype)
        gx = gt = None
        if ctx.needs_input_grad[0]:
            k = (aux - t) if log_input else (1.0 - t / (x + eps))
            gx = _to_shape(be, (k * gs).astype(x.dtype, copy=False), x.shape, shape)
        if ctx.needs_input_grad[1]:
            k = -x if log_input else -aux
            if full:
                big = t > 1
                ts = be.where(big, t, 1)
                k = k + be.where(big, be.log(ts) + 0.5 / ts, 0)
            gt = _to_shape(be, (k * gs).astype(x.dtype, copy=False), t.shape, shape)
        return gx, gt, None, None, None, None


@_autocast.fp32
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """Poisson negative log-likelihood (``torch.nn.functional.poisson_nll_loss``):
    ``exp(input) - target * input`` (``log_input``) or ``input - target * log(input + eps)``,
    plus the Stirling term ``t log t - t + 0.5 log(2 pi t)`` for targets > 1 when ``full``."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction, "poisson_nll_loss")
    input = _tensor(input, "poisson_nll_loss", "input")
    target = _tensor(target, "poisson_nll_loss", "target")
    same_device("poisson_nll_loss", input, target)
    _broadcast_shape("poisson_nll_loss", input.shape, target.shape)
    (input, target), back = _float_operands("poisson_nll_loss", input, target)
    return cast_back(_PoissonNLLFn.apply(input, target, bool(log_input), bool(full), float(eps), reduction), back)


class _GaussianNLLFn(Function):
    @staticmethod
    def forward(ctx, x, t, v, full, eps, reduction):
        be = backend_of(x)
        vc = be.maximum(v, eps)  # the clamp passes the gradient straight through, as PyTorch's no_grad clamp_
        d = be.sub(x, t)
        with _errstate():
            e = 0.5 * (be.log(vc) + d * d / vc)
        if full:
            e = e + _HALF_LOG_2PI
        e = e.astype(x.dtype, copy=False)
        ctx.save_for_backward(d, vc)
        ctx.info = (x.shape, t.shape, v.shape, e.shape, reduction, e.size)
        return _reduced(be, e, reduction)

    @staticmethod
    def backward(ctx, g):
        d, vc = ctx.saved_tensors
        xs, ts, vs, shape, reduction, n = ctx.info
        be = backend_of(d)
        gs = _gscale(g, reduction, n, d.dtype)
        inv = 1.0 / vc
        kx = (d * inv * gs).astype(d.dtype, copy=False)
        gx = _to_shape(be, kx, xs, shape) if ctx.needs_input_grad[0] else None
        gt = _to_shape(be, -kx, ts, shape) if ctx.needs_input_grad[1] else None
        gv = None
        if ctx.needs_input_grad[2]:
            kv = (0.5 * (inv - d * d * inv * inv) * gs).astype(d.dtype, copy=False)
            gv = _to_shape(be, kv, vs, shape)
        return gx, gt, gv, None, None, None


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Gaussian negative log-likelihood (``torch.nn.functional.gaussian_nll_loss``):
    ``0.5 (log max(var, eps) + (input - target)^2 / max(var, eps))`` (+ ``0.5 log 2 pi`` when
    ``full``). ``var`` is a float, the input's shape, the input's shape without its last
    dimension, or that shape with one dimension of size 1; negative entries raise
    ``ValueError``. The clamp at ``eps`` passes gradients straight through, as PyTorch."""
    from .shape import unsqueeze
    opname = "gaussian_nll_loss"
    input = _tensor(input, opname, "input")
    target = _tensor(target, opname, "target")
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError(f"{opname}: var has negative entry/entries (var={var})")
        var = Tensor._from_array(backend_of(input.array).full(
            tuple(input.shape), float(var), input.dtype if input.dtype.kind == "f" else _F32))
    var = _tensor(var, opname, "var")
    same_device(opname, input, target, var)
    be = backend_of(var.array)
    if var.numel() and bool(be.any(be.less(var.array, 0))):
        raise ValueError(f"{opname}: var has negative entry/entries")
    ish, vsh = tuple(input.shape), tuple(var.shape)
    if vsh != ish:
        if ish[:-1] == vsh and len(ish) >= 1:
            var = unsqueeze(var, -1)
        elif len(ish) == len(vsh) and sum(b for a, b in zip(ish, vsh) if a != b) == 1:
            pass
        else:
            raise LossShapeError(f"{opname}: var is of incorrect size {vsh} for input of shape {ish} (expected "
                                 f"{ish}, {ish[:-1]}, or {ish} with one dimension of size 1)")
    _check_reduction(reduction, opname)
    _broadcast_shape(opname, input.shape, target.shape)
    _broadcast_shape(opname, _broadcast_shape(opname, input.shape, target.shape), var.shape, ("input", "var"))
    (input, target, var), back = _float_operands(opname, input, target, var)
    return cast_back(_GaussianNLLFn.apply(input, target, var, bool(full), float(eps), reduction), back)


# ---- binary cross-entropy ----------------------------------------------------------------------------
class _BCEFn(Function):
    @staticmethod
    def forward(ctx, x, y, w, reduction):
        be = backend_of(x)
        if x.size and not bool(be.all((x >= 0) & (x <= 1))):
            raise RuntimeError(f"binary_cross_entropy: all elements of input should be between 0 and 1 "
                               f"(input of shape {tuple(x.shape)}, dtype {x.dtype})")
        with _errstate():
            lx = be.maximum(be.log(x), -100.0)
            l1x = be.maximum(be.log1p(-x), -100.0)
        e = -(y * lx + (1.0 - y) * l1x)
        if w is not None:
            e = e * w
        e = e.astype(x.dtype, copy=False)
        ctx.save_for_backward(x, y, w, lx, l1x)
        ctx.info = (reduction, e.size)
        return _reduced(be, e, reduction)

    @staticmethod
    def backward(ctx, g):
        x, y, w, lx, l1x = ctx.saved_tensors
        reduction, n = ctx.info
        be = backend_of(x)
        gs = _gscale(g, reduction, n, x.dtype)
        if w is not None:
            gs = gs * w
        gx = gy = None
        if ctx.needs_input_grad[0]:
            gx = ((x - y) / be.maximum(x * (1.0 - x), 1e-12) * gs).astype(x.dtype, copy=False)
            gx = _to_shape(be, gx, x.shape, x.shape)
        if ctx.needs_input_grad[1]:
            gy = _to_shape(be, ((l1x - lx) * gs).astype(x.dtype, copy=False), y.shape, x.shape)
        return gx, gy, None, None


@_autocast.fp32
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Binary cross-entropy on probabilities (``torch.nn.functional.binary_cross_entropy``):
    ``-w (t log x + (1 - t) log(1 - x))`` with each log clamped at -100, as PyTorch (so
    ``x`` exactly 0 or 1 is finite); ``target`` must have the input's shape, ``weight``
    broadcasts to it; inputs outside [0, 1] raise ``RuntimeError``."""
    opname = "binary_cross_entropy"
    reduction = _legacy(size_average, reduce, reduction, opname)
    input, target = _pair(input, target, opname)
    if tuple(target.shape) != tuple(input.shape):
        raise LossShapeError(f"{opname}: using a target size {tuple(target.shape)} that is different to the "
                             f"input size {tuple(input.shape)} is not supported; please ensure they have the "
                             "same size")
    input, target, w, back = _weighted_operands(opname, input, target, weight)
    return cast_back(_BCEFn.apply(input, target, w, reduction), back)


_CHUNK = 4096   # elements per prange task when no per-column operand fixes the row length
_MIN_COL = 64   # a per-last-dim operand shorter than this is expanded to full size instead


def _kernel_operand(a, shape, be):
    """``(flat array, is_per_column)`` for a weight broadcastable to ``shape``."""
    if a is None:
        return None, False
    if (len(shape) >= 1 and a.ndim >= 1 and a.shape[-1] == shape[-1] and shape[-1] >= _MIN_COL
            and all(s == 1 for s in a.shape[:-1])):
        return be.contiguous(a.reshape(-1)), True
    if tuple(a.shape) != tuple(shape):
        a = be.broadcast_to(a, tuple(shape))
    return be.contiguous(a).reshape(-1), False


class _BCEWithLogitsFn(Function):
    """Fused ``binary_cross_entropy_with_logits`` (kernels ``bce.bce_logits_fwd/bwd``)."""

    @staticmethod
    def forward(ctx, x, y, w, pw, reduction):
        be = backend_of(x)
        shape, dt, n = x.shape, x.dtype, x.size
        xf = be.contiguous(x).reshape(-1)
        yf = be.contiguous(y).reshape(-1)
        wf, wcol = _kernel_operand(w, shape, be)
        pf, pcol = _kernel_operand(pw, shape, be)
        L = shape[-1] if (wcol or pcol) else max(1, min(n, _CHUNK))
        w_rs = 0 if wcol else L
        pw_rs = 0 if pcol else L
        ph = _empty(be, dt)
        kargs = (xf, yf, ph if wf is None else wf, w_rs, ph if pf is None else pf, pw_rs, wf is not None,
                 pf is not None, L)
        loss = be.empty(n, dt)
        total = be.kernel("bce", "bce_logits_fwd")(*kargs, loss, reduction != "none")
        ctx.save_for_backward(x, y, w, pw)
        ctx.info = (kargs, reduction, n)
        if reduction == "none":
            return loss.reshape(shape)
        if reduction == "sum":
            return _scalar_out(be, float(total), dt)
        return _scalar_out(be, float(total) / n if n else math.nan, dt)

    @staticmethod
    def backward(ctx, g):
        x, y, w, pw = ctx.saved_tensors
        kargs, reduction, n = ctx.info
        be = backend_of(x)
        dt = x.dtype
        gx = gy = None
        if ctx.needs_input_grad[0]:
            if reduction == "none":
                gout, per_elem = be.contiguous(g if g.dtype == dt else g.astype(dt)).reshape(-1), True
            else:
                gout, per_elem = be.full(1, _gscale(g, reduction, n, dt), dt), False
            grad = be.empty(n, dt)
            be.kernel("bce", "bce_logits_bwd")(*kargs, gout, per_elem, grad)
            gx = grad.reshape(x.shape)
        if ctx.needs_input_grad[1]:
            # d/dy = w ((pw - 1) sp(-x) - x)
            k = -x
            if pw is not None:
                with _errstate():
                    k = k + (pw - 1.0) * _softplus_parts(x)[2]
            if w is not None:
                k = k * w
            gy = (k * _gscale(g, reduction, n, dt)).astype(dt, copy=False)
            gy = _to_shape(be, gy, y.shape, x.shape)
        return gx, gy, None, None, None


@_autocast.fp32
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Binary cross-entropy on logits (``torch.nn.functional.binary_cross_entropy_with_logits``):
    ``-w [pw t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))]`` in the overflow-free softplus
    form, one fused kernel forward and one backward. ``target`` must have the input's
    shape; ``weight`` and ``pos_weight`` broadcast to it (``pos_weight`` typically one value
    per class along the last dimension)."""
    opname = "binary_cross_entropy_with_logits"
    reduction = _legacy(size_average, reduce, reduction, opname)
    input, target = _pair(input, target, opname)
    if tuple(target.shape) != tuple(input.shape):
        raise LossShapeError(f"{opname}: target size {tuple(target.shape)} must be the same as input size "
                             f"{tuple(input.shape)}")
    input, target, w, back = _weighted_operands(opname, input, target, weight)
    pw = _aux(pos_weight, backend_of(input.array), input.dtype, opname, "pos_weight", input.shape)
    return cast_back(_BCEWithLogitsFn.apply(input, target, w, pw, reduction), back)


# ---- KL divergence ------------------------------------------------------------------------------------
class _KLDivFn(Function):
    @staticmethod
    def forward(ctx, x, t, log_target, reduction, batch):
        be = backend_of(x)
        with _errstate():
            if log_target:
                aux = be.exp(t)
                e = aux * (t - x)
            else:
                aux = be.log(be.where(t == 0, 1, t))   # xlogy(t, t): 0 where t == 0
                e = t * aux - t * x
        e = e.astype(x.dtype, copy=False)
        ctx.save_for_backward(x, t, aux)
        if reduction == "batchmean":
            red, count = ("mean", batch) if batch is not None else ("sum", None)
        else:
            red, count = reduction, e.size
        ctx.info = (log_target, red, count, e.shape)
        return _reduced(be, e, red, count)

    @staticmethod
    def backward(ctx, g):
        x, t, aux = ctx.saved_tensors
        log_target, red, count, shape = ctx.info
        be = backend_of(x)
        gs = _gscale(g, red, count, x.dtype)
        gx = gt = None
        if ctx.needs_input_grad[0]:
            k = -aux if log_target else -t
            gx = _to_shape(be, (k * gs).astype(x.dtype, copy=False), x.shape, shape)
        if ctx.needs_input_grad[1]:
            k = aux * (t - x + 1.0) if log_target else aux + 1.0 - x
            gt = _to_shape(be, (k * gs).astype(x.dtype, copy=False), t.shape, shape)
        return gx, gt, None, None, None


@_autocast.fp32
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """Kullback-Leibler divergence (``torch.nn.functional.kl_div``) of log-probabilities
    ``input`` from ``target`` (probabilities, or log-probabilities with ``log_target``):
    ``t (log t - input)`` with ``0 log 0 = 0``. ``reduction='batchmean'`` divides the sum
    by ``input.shape[0]``; 'mean' divides by the number of elements (PyTorch's semantics,
    with its warning)."""
    opname = "kl_div"
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce)
    elif reduction == "mean":
        warnings.warn("kl_div: reduction='mean' divides the total loss by both the batch size and the support "
                      "size; 'batchmean' divides only by the batch size and aligns with the KL divergence "
                      "definition.", stacklevel=2)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{opname}: reduction={reduction!r} is not valid; expected 'none', 'batchmean', "
                         "'mean' or 'sum'")
    input, target = _pair(input, target, opname)
    _broadcast_shape(opname, input.shape, target.shape)
    (input, target), back = _float_operands(opname, input, target)
    batch = input.shape[0] if input.ndim else None
    return cast_back(_KLDivFn.apply(input, target, bool(log_target), reduction, batch), back)


# ---- focal losses ---------------------------------------------------------------------------------------
class _SigmoidFocalFn(Function):
    @staticmethod
    def forward(ctx, x, t, alpha, gamma, reduction):
        be = backend_of(x)
        with _errstate():
            e, spp, spn = _softplus_parts(x)
            s, sn = _sigmoids(x, e)
            ce = t * spn + (1.0 - t) * spp          # binary_cross_entropy_with_logits(x, t)
            q = t * sn + (1.0 - t) * s              # 1 - p_t
            qg = be.pow(q, gamma)
            at = alpha * t + (1.0 - alpha) * (1.0 - t) if alpha >= 0 else None
            e_ = ce * qg
            if at is not None:
                e_ = e_ * at
        e_ = e_.astype(x.dtype, copy=False)
        ctx.save_for_backward(x, t)
        ctx.info = (alpha, gamma, reduction, e_.size)
        return _reduced(be, e_, reduction)

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        alpha, gamma, reduction, n = ctx.info
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None
        be = backend_of(x)
        with _errstate():
            e, spp, spn = _softplus_parts(x)
            s, sn = _sigmoids(x, e)
            ce = t * spn + (1.0 - t) * spp
            q = t * sn + (1.0 - t) * s
            qg = be.pow(q, gamma)
            # d q / d x = s sn (1 - 2t); divided by q with its limit (1 - 2t) where q == 0
            pos = q > 0
            ratio = be.where(pos, s * sn * (1.0 - 2.0 * t) / be.where(pos, q, 1.0), 1.0 - 2.0 * t)
            k = (s - t) * qg + gamma * ce * qg * ratio
            if alpha >= 0:
                k = k * (alpha * t + (1.0 - alpha) * (1.0 - t))
        gx = (k * _gscale(g, reduction, n, x.dtype)).astype(x.dtype, copy=False)
        return gx, None, None, None, None


def sigmoid_focal_loss(inputs, targets, alpha=0.25, gamma=2.0, reduction="none"):
    """Sigmoid focal loss (``torchvision.ops.sigmoid_focal_loss``, RetinaNet): with
    ``p = sigmoid(inputs)``, ``p_t = p t + (1 - p)(1 - t)``,
    ``loss = alpha_t (1 - p_t)^gamma BCE_with_logits(inputs, targets)``,
    ``alpha_t = alpha t + (1 - alpha)(1 - t)`` (no weighting when ``alpha < 0``).
    ``targets`` has the inputs' shape (binary or soft labels); no gradient flows to it."""
    opname = "sigmoid_focal_loss"
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{opname}: invalid value for arg 'reduction': {reduction!r}; supported reduction "
                         "modes: 'none', 'mean', 'sum'")
    inputs, targets = _tensor(inputs, opname, "inputs"), _tensor(targets, opname, "targets")
    same_device(opname, inputs, targets)
    if tuple(targets.shape) != tuple(inputs.shape):
        raise LossShapeError(f"{opname}: targets of shape {tuple(targets.shape)} must have the inputs' shape "
                             f"{tuple(inputs.shape)}")
    (inputs, targets), back = _float_operands(opname, inputs, targets)
    return cast_back(_SigmoidFocalFn.apply(inputs, targets, float(alpha), float(gamma), reduction), back)


class _FocalFn(Function):
    """Softmax focal loss over ``(M, C)`` logits and ``(M,)`` class indices."""

    @staticmethod
    def forward(ctx, x, target, alpha, gamma, ignore_index, reduction):
        be = backend_of(x)
        m, c = x.shape
        t = target.astype(np.int64, copy=False)
        valid = t != ignore_index
        if m and bool(be.any(valid & ((t < 0) | (t >= c)))):
            _report_bad_targets(t, c, ignore_index, "focal_loss")
        ts = be.where(valid, t, 0)
        rows = be.arange(m)
        with _errstate():
            z = x - be.amax(x, axis=1, keepdims=True) if m else x
            ez = be.exp(z)
            s = be.sum(ez, axis=1, keepdims=True)
            lpt = (z[rows, ts] - be.log(s).reshape(-1)) if m else be.zeros(0, x.dtype)
            q = -be.expm1(lpt)                      # 1 - p_t, accurate as p_t -> 1
            qg = be.pow(q, gamma)
            if isinstance(alpha, float):
                at = alpha
            elif alpha is None:
                at = 1.0
            else:
                at = alpha[ts]
            vf = valid.astype(x.dtype)
            loss = (-(at * qg * lpt) * vf).astype(x.dtype, copy=False)
        count = int(be.sum(valid)) if m else 0
        ctx.save_for_backward(ez, s, ts, lpt, vf)
        ctx.info = (alpha, gamma, reduction, count)
        return _reduced(be, loss, reduction, count)

    @staticmethod
    def backward(ctx, g):
        ez, s, ts, lpt, vf = ctx.saved_tensors
        alpha, gamma, reduction, count = ctx.info
        be = backend_of(ez)
        dt = ez.dtype
        m = ez.shape[0]
        with _errstate():
            p = ez / s
            q = -be.expm1(lpt)
            qg = be.pow(q, gamma)
            pos = q > 0
            r = be.where(pos, lpt / be.where(pos, q, 1.0), -1.0)    # log(1 - q) / q, -1 at q = 0
            at = alpha if isinstance(alpha, float) else (1.0 if alpha is None else alpha[ts])
            dlp = at * qg * (gamma * be.exp(lpt) * r - 1.0) * vf     # d loss / d log p_t
            gl = (dlp * _gscale(g, reduction, count, dt)).astype(dt, copy=False)
        gx = (-p * gl.reshape(m, 1)).astype(dt, copy=False)
        if m:
            rows = be.arange(m)
            gx[rows, ts] = gx[rows, ts] + gl
        return gx, None, None, None, None, None


def focal_loss(input, target, alpha=None, gamma=2.0, reduction="mean", ignore_index=-100):
    """Multi-class (softmax) focal loss: ``-alpha_t (1 - p_t)^gamma log p_t`` with ``log p_t``
    the log-softmax of the logits at the target class.

    ``input`` is ``(N, C)``, ``(C,)`` or ``(N, C, d1, ...)`` logits, ``target`` the matching
    integer class indices; elements whose target is ``ignore_index`` contribute 0.
    ``alpha`` is None (no weighting), a float (one factor for every class) or a per-class
    sequence/tensor of length C. 'mean' divides by the number of non-ignored elements.
    ``gamma = 0`` is cross-entropy; ``gamma < 1`` has a finite gradient as ``p_t -> 1``.
    No gradient flows to ``target`` or ``alpha``."""
    opname = "focal_loss"
    _check_reduction(reduction, opname)
    if gamma < 0:
        raise ValueError(f"{opname}: gamma must be non-negative, got {gamma}")
    if not isinstance(input, Tensor):
        raise TypeError(f"{opname}: input must be a Tensor, got {type(input).__name__}")
    target = _tensor(target, opname, "target")
    same_device(opname, input, target)
    if input.dtype.kind != "f":
        raise TypeError(f"{opname}: expected floating point logits, got dtype {input.dtype}")
    if target.dtype.kind not in "iu":
        raise TypeError(f"{opname}: target must hold integer class indices, got dtype {target.dtype}")
    x2, t2, out_shape = _rows_first(input, target, opname, False)
    (x2,), back = _float_operands(opname, x2)
    c = x2.shape[1]
    be = backend_of(x2.array)
    if alpha is not None and not isinstance(alpha, (int, float)):
        a = _aux(alpha, be, x2.dtype, opname, "alpha")
        if tuple(a.shape) != (c,):
            raise LossShapeError(f"{opname}: alpha must be a float or hold one value per class ({c}), got "
                                 f"shape {tuple(a.shape)}")
        alpha = be.contiguous(a)
    elif alpha is not None:
        alpha = float(alpha)
    out = _FocalFn.apply(x2, t2, alpha, float(gamma), int(ignore_index), reduction)
    if reduction == "none" and tuple(out.shape) != tuple(out_shape):
        out = out.reshape(out_shape)
    return cast_back(out, back)


# ---- margin losses ----------------------------------------------------------------------------------------
class _MultiMarginFn(Function):
    @staticmethod
    def forward(ctx, x, t, p, margin, w, reduction):
        be = backend_of(x)
        n, c = x.shape
        rows = be.arange(n)
        notgt = be.arange(c).reshape(1, c) != t.reshape(n, 1)
        xt = x[rows, t].reshape(n, 1) if n else be.zeros((0, 1), x.dtype)
        z = (margin - xt) + x
        hz = be.where(notgt, be.maximum(z, 0), 0)
        h = hz if p == 1 else hz * hz
        wy = w[t] if w is not None else None
        e = be.sum(h, axis=1) * (1.0 / c)
        if wy is not None:
            e = e * wy
        e = e.astype(x.dtype, copy=False)
        ctx.save_for_backward(hz, t, wy, notgt)
        ctx.info = (p, c, reduction, n)
        return _reduced(be, e, reduction)

    @staticmethod
    def backward(ctx, g):
        hz, t, wy, notgt = ctx.saved_tensors
        p, c, reduction, n = ctx.info
        be = backend_of(hz)
        dt = hz.dtype
        gs = _gscale(g, reduction, n, dt)
        rs = gs * (1.0 / c) if wy is None else wy * (gs * (1.0 / c))
        rs = (be.full(n, rs, dt) if isinstance(rs, float) else rs).reshape(n, 1)
        dh = (hz > 0) & notgt if p == 1 else 2.0 * hz
        k = (dh * rs).astype(dt, copy=False)
        if n:
            rows = be.arange(n)
            k[rows, t] = -be.sum(k, axis=1)
        return k, None, None, None, None, None


@_autocast.fp32
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Multi-class hinge loss (``torch.nn.functional.multi_margin_loss``): per sample,
    ``sum_{i != y} w_y max(0, margin - x_y + x_i)^p / C`` for ``(N, C)`` (or ``(C,)``)
    input and class indices ``y``; ``p`` is 1 or 2."""
    opname = "multi_margin_loss"
    reduction = _legacy(size_average, reduce, reduction, opname)
    if p not in (1, 2):
        raise ValueError(f"{opname}: only p == 1 and p == 2 supported, got p={p}")
    if not isinstance(input, Tensor):
        raise TypeError(f"{opname}: input must be a Tensor, got {type(input).__name__}")
    target = _tensor(target, opname, "target")
    same_device(opname, input, target)
    if target.dtype.kind not in "iu":
        raise TypeError(f"{opname}: target must hold integer class indices, got dtype {target.dtype}")
    if input.ndim not in (1, 2) or input.shape[-1] == 0:
        raise LossShapeError(f"{opname}: expected a non-empty vector or matrix input with an optional 0-dim "
                             f"batch size, got input of shape {tuple(input.shape)}")
    one = input.ndim == 1
    expect = () if one else (input.shape[0],)
    if tuple(target.shape) != expect and not (one and tuple(target.shape) == (1,)):
        raise LossShapeError(f"{opname}: inconsistent target size {tuple(target.shape)} for input of shape "
                             f"{tuple(input.shape)} (expected {expect})")
    c = input.shape[-1]
    t = target.array.astype(np.int64).reshape(-1)
    if t.size and bool(backend_of(t).any((t < 0) | (t >= c))):
        tt = backend_of(t).to_numpy(t)
        bad = tt[(tt < 0) | (tt >= c)]
        raise RuntimeError(f"{opname}: target {int(bad[0])} out of range for {c} classes (input of shape "
                           f"{tuple(input.shape)})")
    x2 = input.reshape(1, c) if one else input
    (x2,), back = _float_operands(opname, x2)
    be = backend_of(x2.array)
    w = None
    if weight is not None:
        w = _aux(weight, be, x2.dtype, opname, "weight")
        if tuple(w.shape) != (c,):
            raise LossShapeError(f"{opname}: weight must be a 1-D tensor of {c} values (one per class), got "
                                 f"shape {tuple(w.shape)}")
    out = _MultiMarginFn.apply(x2, be.contiguous(t), int(p), float(margin), w, reduction)
    if one and reduction == "none":
        out = out.reshape(())
    return cast_back(out, back)


class _MultiLabelSoftMarginFn(Function):
    @staticmethod
    def forward(ctx, x, t, w, reduction):
        be = backend_of(x)
        c = x.shape[-1]
        with _errstate():
            e, spp, spn = _softplus_parts(x)
            el = t * spn + (1.0 - t) * spp
        if w is not None:
            el = el * w
        per = (be.sum(el, axis=-1) * (1.0 / c)).astype(x.dtype, copy=False)
        ctx.save_for_backward(x, t, w, e)
        ctx.info = (reduction, per.size, c)
        return _reduced(be, per, reduction)

    @staticmethod
    def backward(ctx, g):
        x, t, w, e = ctx.saved_tensors
        reduction, n, c = ctx.info
        be = backend_of(x)
        dt = x.dtype
        gs = _gscale(g, reduction, n, dt)
        if not isinstance(gs, float):
            gs = gs.reshape(tuple(gs.shape) + (1,))
        scale = gs * (1.0 / c)
        if w is not None:
            scale = scale * w
        gx = gt = None
        if ctx.needs_input_grad[0]:
            s, _ = _sigmoids(x, e)
            gx = _to_shape(be, ((s - t) * scale).astype(dt, copy=False), x.shape, x.shape)
        if ctx.needs_input_grad[1]:
            gt = _to_shape(be, (-x * scale).astype(dt, copy=False), t.shape, x.shape)
        return gx, gt, None, None


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Multi-label one-versus-all logistic loss (``torch.nn.functional.multilabel_soft_margin_loss``):
    ``-(1/C) sum_c w_c [t_c log sigmoid(x_c) + (1 - t_c) log sigmoid(-x_c)]`` over the last
    dimension ``C``; ``target`` has the input's shape, ``weight`` broadcasts to it."""
    opname = "multilabel_soft_margin_loss"
    reduction = _legacy(size_average, reduce, reduction, opname)
    input, target = _pair(input, target, opname)
    if input.ndim < 1:
        raise LossShapeError(f"{opname}: input must have at least one dimension (classes), got a 0-d tensor")
    if tuple(target.shape) != tuple(input.shape):
        raise LossShapeError(f"{opname}: target of shape {tuple(target.shape)} must have the input's shape "
                             f"{tuple(input.shape)}")
    input, target, w, back = _weighted_operands(opname, input, target, weight)
    return cast_back(_MultiLabelSoftMarginFn.apply(input, target, w, reduction), back)
