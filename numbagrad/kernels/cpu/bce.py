"""Fused binary cross-entropy with logits (``F.binary_cross_entropy_with_logits``).

Contract (the CUDA twins in ``kernels/cuda/bce.py`` take the same arguments)
--------------------------------------------------------------------------
``x``, ``y`` (logits and targets) and ``loss`` / ``grad`` are 1-D C-contiguous arrays of
``n`` elements of one float dtype. The elements are viewed as rows of ``L`` columns (the
last row may be short). ``w`` (weight) and ``pw`` (pos_weight) are 1-D arrays of that
dtype read as ``w[r * w_rs + j]`` for element ``i = r * L + j``: ``w_rs = 0`` gives one
value per column (a per-last-dim vector of ``L`` values), ``w_rs = L`` a full-size
array. ``has_w`` / ``has_pw`` false means the array is a placeholder never read.
With ``l = 1 + (pw - 1) y`` and ``sp(z) = log(1 + exp(z))``::

    loss = w [ (1 - y) x + l sp(-x) ],  sp(-x) = max(-x, 0) + log1p(exp(-|x|))
    dx   = g w [ l sigmoid(x) - pw y ]

which is ``-w [pw y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))]`` without overflow for
any finite ``x`` (``|x| = 1e4`` gives the exact limits). ``_bce_logits_fwd_cpu`` writes
the per-element loss and returns its float64 sum (``need_total`` false lets the CUDA
twin skip the reduction; here the sum is free). ``_bce_logits_bwd_cpu`` reads the
upstream gradient per element (``per_elem``) or as ``gout[0]`` (already divided by the
mean's count).

Transcendentals: libm ``exp`` + ``log1p`` in the loop do not vectorise, so the loops use
:func:`~numbagrad.kernels.cpu.loss.vexp` and :func:`vlog1p_unit` below (both vectorise):
the forward over 1M float32 elements takes 2.2 ms against 16 ms with libm and 3.8 ms for
the NumPy composition (more: ``perf/README.md``, "Measurement notes", ``kernels/cpu/bce.py``).
Two details keep the loops vectorised: the float64 total is not summed in the element loop
but row by row with ``_rowreduce.vsum`` in a pass after all rows (in row order, so it does
not depend on the thread count), and the upstream gradient is applied in a second pass over
the row, not chosen per element.
Rows are ``prange`` tasks: ``L`` is a per-last-dim operand's length, else a chunk of
4096 elements chosen by the caller. ``tests/nn/test_loss_pointwise.py`` checks both
twins against the composed float64 formula.
"""
import numpy as np
from numba import prange
from numba.core import types
from numba.extending import overload

from .._jit import flat_kernel, scalar_helper
from .. import scalar as S
from ._rowreduce import vsum
from .loss import vexp

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("bce_logits_fwd", "bce_logits_bwd")


def vlog1p_unit(e):
    """``log1p(e)`` for ``0 <= e <= 1`` (float32/float64), vectorisable in @njit loops.

    ``log1p(e) = 2 atanh(s)``, ``s = e / (2 + e) <= 1/3``, by the odd series
    ``2 s (1 + s^2/3 + s^4/5 + ...)`` truncated where the next term is below one ulp
    (8 terms float32, 16 float64); relative error a few ulp. (From plain Python:
    ``math.log1p``.)
    """
    import math
    return math.log1p(e)


_C32 = tuple(np.float32(1.0 / (2 * k + 1)) for k in range(8))
_C64 = tuple(1.0 / (2 * k + 1) for k in range(16))


@overload(vlog1p_unit, inline="always")
def _vlog1p_unit_impl(e):
    if e == types.float32:
        c0, c1, c2, c3, c4, c5, c6, c7 = _C32
        two = np.float32(2.0)

        def impl(e):
            s = e / (two + e)
            q = s * s
            p = c0 + q * (c1 + q * (c2 + q * (c3 + q * (c4 + q * (c5 + q * (c6 + q * c7))))))
            return two * s * p
        return impl
    if e == types.float64:
        (c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15) = _C64

        def impl(e):
            s = e / (2.0 + e)
            q = s * s
            p = c0 + q * (c1 + q * (c2 + q * (c3 + q * (c4 + q * (c5 + q * (c6 + q * (c7 + q * (
                c8 + q * (c9 + q * (c10 + q * (c11 + q * (c12 + q * (c13 + q * (c14 + q * c15))))))))))))))
            return 2.0 * s * p
        return impl
    return None


@scalar_helper
def _row_span(r, L, n):
    """(first element, length) of row ``r`` of ``L`` columns over ``n`` elements (the last
    row may be short)."""
    i0 = r * L
    return i0, min(L, n - i0)


@scalar_helper
def _softplus_neg(x):
    """``sp(-x) = max(-x, 0) + log1p(exp(-|x|))``, vectorisable."""
    return max(-x, type(x)(0.0)) + vlog1p_unit(vexp(-abs(x)))


@flat_kernel
def _bce_logits_fwd_cpu(x, y, w, w_rs, pw, pw_rs, has_w, has_pw, L, loss, need_total):
    """Per-element loss into ``loss``; returns the float64 sum (see the module docstring)."""
    n = x.size
    nrows = (n + L - 1) // L
    total = 0.0
    for r in prange(nrows):
        i0, m = _row_span(r, L, n)
        xr = x[i0:i0 + m]
        yr = y[i0:i0 + m]
        lr = loss[i0:i0 + m]
        for j in range(m):
            xv = xr[j]
            yv = yr[j]
            one = type(xv)(1.0)
            lw = one
            if has_pw:
                lw = one + (pw[r * pw_rs + j] - one) * yv
            v = (one - yv) * xv + lw * _softplus_neg(xv)
            if has_w:
                v = v * w[r * w_rs + j]
            lr[j] = v
    # the rows' sums in row order, after the rows: not a prange reduction, whose per-thread
    # partial sums would depend on the thread count (see loss._ordered_sum). Each row is
    # summed by vsum: a float64 running sum in the loop above would keep it from
    # vectorising (22 ms against 1.5 ms per 1M float32).
    if need_total:
        for r in range(nrows):
            i0, m = _row_span(r, L, n)
            total += vsum(loss[i0:i0 + m], 0.0)
    return total


@flat_kernel
def _bce_logits_bwd_cpu(x, y, w, w_rs, pw, pw_rs, has_w, has_pw, L, gout, per_elem, grad):
    """``grad = g w (l sigmoid(x) - pw y)`` (see the module docstring)."""
    n = x.size
    nrows = (n + L - 1) // L
    for r in prange(nrows):
        i0, m = _row_span(r, L, n)
        xr = x[i0:i0 + m]
        yr = y[i0:i0 + m]
        gr = grad[i0:i0 + m]
        for j in range(m):
            xv = xr[j]
            yv = yr[j]
            one = type(xv)(1.0)
            sig = S.sigmoid_from_exp(xv, vexp(-abs(xv)))
            if has_pw:
                p = pw[r * pw_rs + j]
                d = (one + (p - one) * yv) * sig - p * yv
            else:
                d = sig - yv
            if has_w:
                d = d * w[r * w_rs + j]
            gr[j] = d
        # the upstream gradient in a second pass over the row (in L1): a load chosen per
        # element inside the loop above kept it from vectorising (8.6 ms against 2 ms)
        if per_elem:
            gg = gout[i0:i0 + m]
            for j in range(m):
                gr[j] = gr[j] * gg[j]
        else:
            g0 = gout[0]
            for j in range(m):
                gr[j] = gr[j] * g0
