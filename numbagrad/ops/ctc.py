"""Connectionist temporal classification loss: ``ctc_loss`` (``CTCLoss``, its module,
lives in :mod:`numbagrad.nn.loss_ctc`)
(``torch.nn.functional.ctc_loss`` / ``torch.nn.CTCLoss``).

One graph node, :class:`CTCLossFn`. Its forward is one kernel launch, parallel over the
batch, running the alpha recursion in log space per sample (``kernels/cpu/ctc.py``, CUDA
twin in ``kernels/cuda/ctc.py``); the alphas are kept for the backward, which runs the beta
recursion and writes the gradient in the same per-sample pass. Lengths and targets are
validated and padded on the host (they are small, and usually host data in PyTorch too).

The gradient is PyTorch's: for ``t < input_lengths[b]``,
``grad[t, b, c] = g_b * (exp(log_probs[t, b, c]) - sum_{s: l'_s = c} gamma[t, s])`` with
``gamma`` the alignment posteriors; 0 for ``t >= input_lengths[b]``. It is the gradient
w.r.t. the logits when ``log_probs = log_softmax(logits)`` -- the ``exp(log_probs)`` term
is exactly what log_softmax's backward subtracts again, so ``ctc_loss(log_softmax(x))``
gets the true gradient w.r.t. ``x`` -- but it is *not* the derivative w.r.t. unnormalised
``log_probs`` treated as free inputs (that one is ``-g_b * sum gamma``), as in PyTorch.
"""
import math

import numpy as np

from ..autograd.function import Function, keep_versions
from ..backend import backend_of
from ..tensor import Tensor
from ._util import cast_back, float_operands
from .loss import _check_reduction, _scalar_out

__all__ = ["ctc_loss"]

_OP = "ctc_loss"


def ctc_width(smax):
    """Row width of the kernels' per-sample arrays for targets of at most ``smax`` labels:
    ``2*smax+1`` extended labels rounded up to a multiple of 8, plus 2 (the CPU kernels'
    vector loops run over whole multiples of 8)."""
    return (2 * smax + 1 + 7) // 8 * 8 + 2


class CTCLossFn(Function):
    """CTC negative log-likelihood of ``(T, N, C)`` log-probabilities and padded targets.

    forward(log_probs, targets (N, S) int64, input_lengths, target_lengths (int64 (N,), on
    the log_probs' device), blank, reduction, zero_infinity, host target lengths)
    """

    @staticmethod
    def forward(ctx, lp, targets, il, tl, blank, reduction, zero_infinity, tl_host):
        be = backend_of(lp)
        lp = be.contiguous(lp)
        T, N, C = lp.shape
        dt = lp.dtype
        smax = targets.shape[1]
        W = ctc_width(smax)
        lab = be.empty((N, W), np.int64)
        smask = be.empty((N, W), dt)
        alpha = be.empty((N, T, W), dt)
        nll = be.empty(N, dt)
        loss = be.empty(N, dt)
        be.kernel("ctc", "ctc_loss_fwd")(lp, targets, il, tl, int(blank), bool(zero_infinity),
                                         lab, smask, alpha, nll, loss)
        ctx.save_for_backward(lp, il, tl, lab, smask, alpha, nll)
        wts = None
        if reduction == "mean":
            # torch: (loss / target_lengths.clamp_min(1)).mean()
            wts = 1.0 / (np.maximum(tl_host, 1).astype(np.float64) * N) if N else np.zeros(0)
        ctx.info = (reduction, bool(zero_infinity), wts, N)
        if reduction == "none":
            return loss
        host = be.to_numpy(loss).astype(np.float64)
        if reduction == "sum":
            return _scalar_out(be, host.sum(), dt)
        return _scalar_out(be, float(host @ wts) if N else math.nan, dt)

    @staticmethod
    def backward(ctx, g):
        lp, il, tl, lab, smask, alpha, nll = ctx.saved_tensors
        reduction, zero_infinity, wts, N = ctx.info
        be = backend_of(lp)
        dt = lp.dtype
        if reduction == "none":
            gs = be.contiguous(g if g.dtype == dt else be.astype(g, dt))
        else:
            s = float(g)
            host = np.full(N, s) if reduction == "sum" else s * wts
            gs = be.asarray(host.astype(dt))
        T, _, C = lp.shape
        W = lab.shape[1]
        work = be.empty((N, 3 * W + C), dt)
        grad = be.empty((T, N, C), dt)
        be.kernel("ctc", "ctc_loss_bwd")(lp, il, tl, zero_infinity, lab, smask, alpha, nll, gs, work, grad)
        return grad, None, None, None, None, None, None, None


# ---- argument handling -----------------------------------------------------------------------
def _describe(name, x):
    if isinstance(x, Tensor):
        return f"{name} of shape {tuple(x.shape)} and dtype {x.dtype}"
    a = np.asarray(x)
    return f"{name} of shape {a.shape} and dtype {a.dtype} ({type(x).__name__})"


def _host_ints(x, name):
    """``x`` (Tensor, array, sequence or int) as a host int64 array."""
    if isinstance(x, Tensor):
        a = backend_of(x.array).to_numpy(x.array)
    else:
        try:
            a = np.asarray(x)
        except (TypeError, ValueError):
            raise TypeError(f"{_OP}: {name} must be a tensor, an array or a sequence of ints, got "
                            f"{type(x).__name__}") from None
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"{_OP}: {_describe(name, x)} must be integral (got dtype {a.dtype})")
    return a.astype(np.int64, copy=False)


def _host_targets(x):
    a = backend_of(x.array).to_numpy(x.array) if isinstance(x, Tensor) else np.asarray(x)
    if a.dtype.kind == "f":  # torch casts floating targets; accept them when they hold integers
        if not np.all(np.isfinite(a)) or not np.array_equal(a, np.floor(a)):
            raise RuntimeError(f"{_OP}: {_describe('targets', x)} must hold integer class indices")
        a = a.astype(np.int64)
    elif a.dtype.kind not in "iu":
        raise RuntimeError(f"{_OP}: {_describe('targets', x)} must hold integer class indices "
                           f"(got dtype {a.dtype})")
    return a.astype(np.int64, copy=False)


def _lengths(x, name, n, unbatched, lp_desc):
    a = _host_ints(x, name)
    if unbatched:
        if a.shape not in ((), (1,)):
            raise RuntimeError(f"{_OP}: for unbatched {lp_desc()}, {_describe(name, x)} must hold one length "
                               f"(shape () or (1,))")
        a = a.reshape(1)
    elif a.ndim != 1 or a.shape[0] != n:
        raise RuntimeError(f"{_OP}: {name} must be of size batch_size={n} (from {lp_desc()}), got {_describe(name, x)}")
    if a.size and a.min() < 0:
        raise RuntimeError(f"{_OP}: expected {name} to have value at least 0, but got value {int(a.min())} "
                           f"({_describe(name, x)})")
    # a copy of its own: backward's kernel loops up to these lengths, so a later write to
    # the caller's array must not reach it (PyTorch copies them to host ints too)
    return np.array(a, np.int64, order="C")


def _padded_targets(tg, tl, n, unbatched, tdesc, lp_desc):
    """Targets as a host ``(N, max(target_lengths))`` int64 array (padding never read)."""
    smax = int(tl.max()) if tl.size else 0
    if unbatched:
        if tg.ndim != 1:
            raise RuntimeError(f"{_OP}: for unbatched {lp_desc()}, expected 1-D targets, got {tdesc()}")
        tg = tg.reshape(1, -1)
    if tg.ndim == 2:
        if tg.shape[0] != n:
            raise RuntimeError(f"{_OP}: expected padded targets of shape (N={n}, S) for {lp_desc()}, got {tdesc()}")
        if tg.shape[1] < smax:
            raise RuntimeError(f"{_OP}: target_lengths has a value {smax} larger than the padded target "
                               f"length S={tg.shape[1]} of {tdesc()}")
        return np.ascontiguousarray(tg[:, :smax])
    if tg.ndim == 1:
        total = int(tl.sum())
        if tg.shape[0] != total:
            raise RuntimeError(f"{_OP}: concatenated {tdesc()} must have sum(target_lengths)={total} "
                               f"elements, got {tg.shape[0]}")
        out = np.zeros((n, smax), np.int64)
        out[np.arange(smax)[None, :] < tl[:, None]] = tg  # row-major order = concatenation order
        return out
    raise RuntimeError(f"{_OP}: targets must be 2-D (N, S) padded or 1-D concatenated, got {tdesc()}")


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """The connectionist temporal classification loss (``torch.nn.functional.ctc_loss``).

    ``log_probs`` is ``(T, N, C)`` (or ``(T, C)`` unbatched) log-probabilities, usually a
    ``log_softmax`` output; ``targets`` is ``(N, S)`` padded or 1-D concatenated
    (``sum(target_lengths)`` labels); ``input_lengths`` and ``target_lengths`` are ``(N,)``
    tensors, arrays or sequences of ints. Labels lie in ``[0, C)`` and are never ``blank``.
    ``reduction='mean'`` divides each sample's loss by its target length (at least 1) and
    averages over the batch; ``'none'`` returns ``(N,)``. ``zero_infinity`` turns the
    infinite losses of impossible alignments (and their gradients) into zeros. float16
    log-probabilities are computed in float32. The gradient is PyTorch's (see the module).
    """
    _check_reduction(reduction, _OP)
    if not isinstance(log_probs, Tensor):
        raise TypeError(f"{_OP}: log_probs must be a Tensor, got {type(log_probs).__name__}")

    def lp_desc():  # for error messages only: formatting the dtypes costs ~10 us
        return _describe("log_probs", log_probs)

    def tdesc():
        return _describe("targets", targets)
    if log_probs.array.dtype.kind != "f":
        raise TypeError(f"{_OP}: expected floating point {lp_desc()}")
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"{_OP}: expected 3-D (T, N, C) or 2-D (T, C) {lp_desc()}")
    unbatched = log_probs.ndim == 2
    if unbatched:
        T, C = log_probs.shape
        N = 1
    else:
        T, N, C = log_probs.shape
    blank = int(blank)
    if not 0 <= blank < C:
        raise RuntimeError(f"{_OP}: blank={blank} must be in label range [0, {C}) of {lp_desc()}")
    il = _lengths(input_lengths, "input_lengths", N, unbatched, lp_desc)
    tl = _lengths(target_lengths, "target_lengths", N, unbatched, lp_desc)
    if il.size and il.max() > T:
        raise RuntimeError(f"{_OP}: expected input_lengths to have value at most T={T} ({lp_desc()}), "
                           f"but got value {int(il.max())} ({_describe('input_lengths', input_lengths)})")
    tg = _host_targets(targets)
    tg = _padded_targets(tg, tl, N, unbatched, tdesc, lp_desc)
    used = np.arange(tg.shape[1])[None, :] < tl[:, None]
    vals = tg[used]
    if vals.size:
        bad = vals[(vals < 0) | (vals >= C)]
        if bad.size:
            raise IndexError(f"{_OP}: target index {int(bad[0])} is out of bounds for {C} classes "
                             f"({lp_desc()}, {tdesc()}); {bad.size} invalid target(s)")
        if (vals == blank).any():
            raise RuntimeError(f"{_OP}: targets must not contain the blank label {blank} ({tdesc()}); "
                               f"{int((vals == blank).sum())} occurrence(s)")
    be = backend_of(log_probs.array)
    from .shape import reshape
    (x,), back = float_operands(_OP, log_probs)
    if unbatched:
        x = reshape(x, T, 1, C)
    out = keep_versions(CTCLossFn.apply(x, be.asarray(tg), be.asarray(il), be.asarray(tl), blank, reduction,
                                        bool(zero_infinity), tl), targets)  # PyTorch keeps the targets
    if unbatched and reduction == "none":
        out = reshape(out, ())
    return cast_back(out, back)
