"""Loss kernels: fused softmax + cross-entropy over rows of logits.

Every array is 1-D and C-contiguous (logits and probabilities are ``(N*C,)``
row-major, ``ncls`` columns per row), so each kernel is a
:class:`~numbagrad.kernels._jit.FlatKernel`: a serial twin for small batches, a
``prange``-over-rows twin from ``config.PARALLEL_THRESHOLD`` elements on.

Forward, per row ``i`` with target ``t`` and (optional) class weights ``w``::

    lse  = max_c x_c + log(sum_c exp(x_c - max_c x_c))
    p_c  = exp(x_c - lse)                                   (kept for backward)
    loss = (1-eps) w_t (lse - x_t) + eps/C * sum_c w_c (lse - x_c)

and backward (``g`` the upstream gradient of the row)::

    dx_c = g [ (1-eps) w_t (p_c - [c == t]) + eps/C (W p_c - w_c) ],  W = sum_c w_c

which without weights is ``g (p_c - (1-eps)[c == t] - eps/C)``. Rows whose target is
``ignore_index`` contribute nothing and get a zero gradient. Accumulations run in
float64 whatever the input dtype.
"""
import numpy as np
from numba import prange

from .._jit import flat_kernel


@flat_kernel
def _cross_entropy_fwd_cpu(x, target, weight, has_weight, ignore_index, smoothing, ncls,
                           loss, row_w, prob):
    """Class-index targets. Writes per-row ``loss``, the row's weight in a mean
    (``row_w``: ``w_t``, 1 without weights, 0 when ignored) and the softmax ``prob``.

    Returns ``(sum of loss, sum of row_w, number of out-of-range targets)``; rows with
    an out-of-range target are skipped (the caller raises).
    """
    n = target.size
    C = ncls
    total = 0.0
    wtot = 0.0
    nbad = 0
    for i in prange(n):
        t = target[i]
        base = i * C
        if t == ignore_index or t < 0 or t >= C:
            if t != ignore_index:
                nbad += 1
            loss[i] = 0.0
            row_w[i] = 0.0
            for c in range(C):
                prob[base + c] = 0.0
            continue
        m = x[base]
        for c in range(1, C):
            v = x[base + c]
            if v > m:
                m = v
        s = 0.0
        for c in range(C):
            e = np.exp(x[base + c] - m)
            prob[base + c] = e
            s += e
        lse = m + np.log(s)
        inv = 1.0 / s
        for c in range(C):
            prob[base + c] = prob[base + c] * inv
        wt = weight[t] if has_weight else 1.0
        li = (1.0 - smoothing) * wt * (lse - x[base + t])
        if smoothing != 0.0:
            acc = 0.0
            if has_weight:
                for c in range(C):
                    acc += weight[c] * (lse - x[base + c])
            else:
                for c in range(C):
                    acc += lse - x[base + c]
            li += smoothing / C * acc
        loss[i] = li
        row_w[i] = wt
        total += li
        wtot += wt
    return total, wtot, nbad


@flat_kernel
def _cross_entropy_bwd_cpu(prob, target, weight, has_weight, ignore_index, smoothing, ncls,
                           gout, per_row, grad):
    """Gradient of the class-index loss w.r.t. the logits, from the saved softmax.

    ``gout`` holds the upstream gradient: one value per row when ``per_row``
    (reduction='none'), else ``gout[0]`` for every row (already divided by the mean's
    denominator).
    """
    n = target.size
    C = ncls
    wsum = 0.0
    if has_weight:
        for c in range(C):
            wsum += weight[c]
    eps_c = smoothing / C
    for i in prange(n):
        t = target[i]
        base = i * C
        g = gout[i] if per_row else gout[0]
        if t == ignore_index or t < 0 or t >= C:
            for c in range(C):
                grad[base + c] = 0.0
            continue
        if has_weight:
            a = g * (1.0 - smoothing) * weight[t]
            b = g * eps_c
            for c in range(C):
                pc = prob[base + c]
                grad[base + c] = a * pc + b * (wsum * pc - weight[c])
            grad[base + t] -= a
        else:
            for c in range(C):
                grad[base + c] = g * (prob[base + c] - eps_c)
            grad[base + t] -= g * (1.0 - smoothing)


@flat_kernel
def _cross_entropy_soft_fwd_cpu(x, target, weight, has_weight, smoothing, ncls, loss, prob, ywsum):
    """Probability targets ``y`` (same shape as ``x``), smoothed to ``(1-eps) y + eps/C``:
    ``loss_i = sum_c w_c y_c (lse - x_c)``. Stores ``ywsum[i] = sum_c w_c y_c`` for
    backward. Returns the sum of the row losses."""
    n = loss.size
    C = ncls
    total = 0.0
    eps_c = smoothing / C
    for i in prange(n):
        base = i * C
        m = x[base]
        for c in range(1, C):
            v = x[base + c]
            if v > m:
                m = v
        s = 0.0
        for c in range(C):
            e = np.exp(x[base + c] - m)
            prob[base + c] = e
            s += e
        lse = m + np.log(s)
        inv = 1.0 / s
        li = 0.0
        yw = 0.0
        for c in range(C):
            prob[base + c] = prob[base + c] * inv
            y = (1.0 - smoothing) * target[base + c] + eps_c
            if has_weight:
                y = y * weight[c]
            yw += y
            li += y * (lse - x[base + c])
        loss[i] = li
        ywsum[i] = yw
        total += li
    return total


@flat_kernel
def _cross_entropy_soft_bwd_cpu(prob, target, weight, has_weight, smoothing, ncls, ywsum,
                                gout, per_row, grad):
    """``dx_c = g (p_c sum_k w_k y_k - w_c y_c)`` for probability targets."""
    n = ywsum.size
    C = ncls
    eps_c = smoothing / C
    for i in prange(n):
        base = i * C
        g = gout[i] if per_row else gout[0]
        yw = ywsum[i]
        for c in range(C):
            y = (1.0 - smoothing) * target[base + c] + eps_c
            if has_weight:
                y = y * weight[c]
            grad[base + c] = g * (prob[base + c] * yw - y)
