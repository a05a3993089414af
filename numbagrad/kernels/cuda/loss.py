"""CUDA twins of ``kernels/cpu/loss.py``: fused softmax + cross-entropy over rows of logits.

Contract (as the CPU twins): every array is 1-D and C-contiguous; logits ``x``, soft
targets, ``prob`` and ``grad`` are ``(N*C,)`` row-major with ``ncls = C`` columns per row,
class targets are int64 ``(N,)``, ``weight`` is ``(C,)`` (an empty array when
``has_weight`` is false). Forward per row ``i`` with target ``t``::

    lse  = max_c x_c + log(sum_c exp(x_c - max_c x_c))
    p_c  = exp(x_c - lse)                                   (written to ``prob``)
    loss = (1-eps) w_t (lse - x_t) + eps/C * sum_c w_c (lse - x_c)

rows whose target is ``ignore_index`` get loss 0, weight 0, prob 0 and (backward) a
zero gradient; out-of-range targets are treated the same way and counted.
``_cross_entropy_fwd_cuda`` returns ``(sum of loss, sum of row_w, number of
out-of-range targets)`` as ``(np.float64, np.float64, np.int64)``,
``_cross_entropy_soft_fwd_cuda`` the sum of the row losses as ``np.float64``; the
backward launchers return nothing. See the CPU module for the backward formulas.

Design
------
* Forward: one block of ``ROW_TPB`` threads per row (``launch_rows``), threads striding
  over the row's columns, shared-memory tree reductions for the row max and then, in
  one pass, ``S = sum exp(x - m)`` (and the smoothing / soft-target sums). Each
  ``sum w (lse - x)`` is evaluated as ``sum w (m - x) + W log S``: every term is
  non-negative, so there is no cancellation (the CPU computes ``W lse - <w, x>``; the
  values agree to rounding). The per-row scalar epilogue (one thread) runs in float64
  as on the CPU.
* Totals: the rows are split into ``P <= MAX_BLOCKS`` interleaved groups ("virtual
  blocks", grid-striding over groups, so any grid size is correct); thread 0 of a
  group sums its rows' loss / weight / bad count in float64 into ``part[P, k]``, and a
  one-block kernel tree-reduces ``part`` into a 3-element device result that is
  copied to the host. Deterministic for a given ``P``.
* Backward: flat, one thread per logit (grid-stride); the class-weight total ``W``
  needed with weights is reduced first by a one-block kernel (float64, as the CPU).
* Precision: float32 and float64 compute in their own type; float16 reads half
  elements and computes (and accumulates) in float32, storing half results. Row
  reductions are tree sums, so float32 results match the CPU (which sums in float64)
  to a few ulp.
"""
import math

import numpy as np
from numba import cuda, float64
from numba import types as nbtypes

from ._launch import scratch, MAX_BLOCKS, ROW_TPB, cuda_kernel, dev, device_fn, launch, launch_rows
from ._blockreduce import _array_sum_device, _block_max_device, _block_sums_device

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "cross_entropy_fwd", "cross_entropy_bwd", "cross_entropy_soft_fwd", "cross_entropy_soft_bwd",
)

__all__ = ["_cross_entropy_fwd_cuda", "_cross_entropy_bwd_cuda", "_cross_entropy_soft_fwd_cuda",
           "_cross_entropy_soft_bwd_cuda"]

_I64 = nbtypes.int64
_F64 = nbtypes.float64
_BOOL = nbtypes.boolean


def _ct(T):
    """Compute type of element type ``T``: float32 for half and float32, else float64."""
    return nbtypes.float64 if T == nbtypes.float64 else nbtypes.float32


def _zero(dtype):
    """A zero of the compute type of ``dtype`` (kernels take its type as ``type(z)``)."""
    return np.float64(0) if np.dtype(dtype) == np.float64 else np.float32(0)


def _scratch(shape, dtype):
    return scratch(shape, dtype)


# ---- block pieces (all threads of the block call these) ---------------------------------------
@cuda_kernel(lambda T: (T[:, ::1], _F64[::1]))
def _sum_parts_kernel(part, res):
    """res[k] = sum_j part[j, k] in float64 (one block; extra blocks do nothing)."""
    sh = cuda.shared.array(ROW_TPB, float64)
    tid = cuda.threadIdx.x
    if cuda.blockIdx.x == 0:
        for k in range(part.shape[1]):
            tot = _array_sum_device(sh, tid, part[:, k])
            if tid == 0:
                res[k] = tot


@device_fn
def _row_max_device(sm, tid, x, base, C, m):
    """Max of ``x[base:base + C]`` (read in ``m``'s type) over the block, from ``m`` (-inf);
    NaN never compares greater, so it is skipped here and propagates through exp()
    into S, lse and every output instead."""
    c = tid
    while c < C:
        v = type(m)(x[base + c])
        if v > m:
            m = v
        c += ROW_TPB
    return _block_max_device(sm, tid, m)


@device_fn
def _write_prob_device(prob, x, base, C, tid, m, S):
    """``prob[base + c] = exp(x - m) / S`` over the row's columns (this thread's share)."""
    inv = type(m)(1) / S
    c = tid
    while c < C:
        prob[base + c] = math.exp(type(m)(x[base + c]) - m) * inv
        c += ROW_TPB


def _row_pass(y_of):
    """The second pass over a row of logits, after its max ``m``: with ``y_c = y_of(..., c)``
    (the target weight of column ``c``, needed only with ``need_y``), the block sums
    ``S = sum exp(x - m)``, ``A = sum y (m - x)``, ``Y = sum y`` (one set of barriers), then
    ``prob``; returns ``(log S, A, Y)``. Every ``sum y (lse - x)`` of the loss is
    ``A + Y log S``: all terms non-negative, no cancellation."""
    @device_fn
    def row_pass(red, tid, x, base, C, m, need_y, target, weight, has_weight, keep, eps_c, prob):
        ct = type(m)
        se = ct(0)
        sa = ct(0)
        sy = ct(0)
        c = tid
        while c < C:
            v = ct(x[base + c])
            se += math.exp(v - m)
            if need_y:
                y = y_of(target, weight, has_weight, keep, eps_c, base, c)
                sa += y * (m - v)
                sy += y
            c += ROW_TPB
        red[0, tid] = se
        red[1, tid] = sa
        red[2, tid] = sy
        _block_sums_device(red, tid)
        S = red[0, 0]
        _write_prob_device(prob, x, base, C, tid, m, S)
        return math.log(S), red[1, 0], red[2, 0]
    return row_pass


@device_fn
def _class_y_device(target, weight, has_weight, keep, eps_c, base, c):
    """Class-index targets with smoothing: ``y_c = w_c`` (1 without weights)."""
    return type(keep)(weight[c]) if has_weight else type(keep)(1)


@device_fn
def _soft_y_device(target, weight, has_weight, keep, eps_c, base, c):
    """Probability targets: the smoothed, weighted ``y_c = ((1-eps) t_c + eps/C) w_c``."""
    y = keep * type(keep)(target[base + c]) + eps_c
    if has_weight:
        y = y * type(keep)(weight[c])
    return y


_class_row_pass = _row_pass(_class_y_device)
_soft_row_pass = _row_pass(_soft_y_device)


def _reduce_parts(part):
    """Column sums of the float64 device array ``part`` (P, K), as a host array."""
    return _sum_parts(part).copy_to_host()


def _sum_parts(part):
    """Column sums of the device array ``part`` (P, K) in float64, on the device."""
    res = _scratch(part.shape[1], np.float64)
    launch_rows(_sum_parts_kernel, 1, part, res)
    return res


def _nparts(n):
    return max(1, min(int(n), MAX_BLOCKS))


# ---- class-index targets --------------------------------------------------------------------
@cuda_kernel(lambda T: (T[::1], _I64[::1], T[::1], _BOOL, _I64, _F64, _I64, T[::1], T[::1], T[::1],
                        _F64[:, ::1], _ct(T)))
def _ce_fwd_kernel(x, target, weight, has_weight, ignore_index, smoothing, ncls, prob, loss, row_w,
                   part, z):
    ct = type(z)
    red = cuda.shared.array((3, ROW_TPB), ct)
    tid = cuda.threadIdx.x
    n = target.size
    C = ncls
    nparts = part.shape[0]
    smooth = smoothing != 0.0
    keep = ct(1.0 - smoothing)
    vb = cuda.blockIdx.x
    while vb < nparts:
        tot = 0.0
        wtot = 0.0
        nbad = 0.0
        i = vb
        while i < n:
            t = target[i]
            base = i * C
            # The branch depends on the row only: every thread of the block takes the
            # same side, so the barriers inside are reached by all.
            if t == ignore_index or t < 0 or t >= C:
                c = tid
                while c < C:
                    prob[base + c] = 0
                    c += ROW_TPB
                if tid == 0:
                    loss[i] = 0
                    row_w[i] = 0
                    if t != ignore_index:
                        nbad += 1.0
            else:
                m = _row_max_device(red[0], tid, x, base, C, ct(-math.inf))
                # with smoothing also A = sum w (m - x) and W = sum w
                ls, sa, sw = _class_row_pass(red, tid, x, base, C, m, smooth, target, weight, has_weight,
                                             keep, keep, prob)
                if tid == 0:
                    # lse - x_t = (m - x_t) + log S, in float64 as on the CPU.
                    wt = float64(weight[t]) if has_weight else 1.0
                    li = (1.0 - smoothing) * wt * ((float64(m) - float64(x[base + t])) + float64(ls))
                    if smooth:
                        # sum_c w_c (lse - x_c) = sum_c w_c (m - x_c) + W log S
                        li += smoothing / C * (float64(sa) + float64(sw) * float64(ls))
                    loss[i] = li
                    row_w[i] = wt
                    tot += li
                    wtot += wt
                cuda.syncthreads()  # shared arrays are rewritten by the next row
            i += nparts
        if tid == 0:
            part[vb, 0] = tot
            part[vb, 1] = wtot
            part[vb, 2] = nbad
        vb += cuda.gridDim.x


def _cross_entropy_fwd_cuda(x, target, weight, has_weight, ignore_index, smoothing, ncls,
                            prob, loss, row_w):
    """Class-index targets: writes ``prob``, per-row ``loss`` and ``row_w``; returns
    ``(sum of loss, sum of row_w, number of out-of-range targets)`` (see the module)."""
    n = target.size
    if n == 0:
        return np.float64(0.0), np.float64(0.0), np.int64(0)
    part = _scratch((_nparts(n), 3), np.float64)
    launch_rows(_ce_fwd_kernel, part.shape[0], x, target, weight, bool(has_weight), int(ignore_index),
                float(smoothing), int(ncls), prob, loss, row_w, part, _zero(x.dtype))
    res = _reduce_parts(part)
    return np.float64(res[0]), np.float64(res[1]), np.int64(round(res[2]))


@cuda_kernel(lambda T: (T[::1], _I64[::1], T[::1], _BOOL, _I64, _F64, _I64, T[::1], _BOOL, T[::1],
                        _F64[::1], _ct(T)))
def _ce_bwd_kernel(prob, target, weight, has_weight, ignore_index, smoothing, ncls, gout, per_row,
                   grad, wsum, z):
    ct = type(z)
    C = ncls
    N = target.size * C
    keep = ct(1.0 - smoothing)
    eps_c = ct(smoothing / C)
    W = ct(wsum[0]) if has_weight else ct(0)
    k = cuda.grid(1)
    while k < N:
        i = k // C
        c = k - i * C
        t = target[i]
        if t == ignore_index or t < 0 or t >= C:
            grad[k] = 0
        else:
            g = ct(gout[i]) if per_row else ct(gout[0])
            p = ct(prob[k])
            if has_weight:
                # dx_c = a (p_c - [c == t]) + b (W p_c - w_c)
                a = g * keep * ct(weight[t])
                b = g * eps_c
                v = (a + b * W) * p - b * ct(weight[c])
            else:
                # dx_c = g (p_c - (1-eps)[c == t] - eps/C)
                a = g * keep
                v = g * p - g * eps_c
            if c == t:
                v -= a
            grad[k] = v
        k += cuda.gridsize(1)


def _cross_entropy_bwd_cuda(prob, target, weight, has_weight, ignore_index, smoothing, ncls,
                            gout, per_row, grad):
    """Gradient of the class-index loss w.r.t. the logits, from the saved softmax
    (``gout``: one value per row when ``per_row``, else ``gout[0]`` for every row)."""
    has_weight = bool(has_weight)
    if has_weight:
        w = dev(weight)
        wsum = _sum_parts(w.reshape(w.size, 1))
    else:
        wsum = _scratch(1, np.float64)
    launch(_ce_bwd_kernel, target.size * int(ncls), prob, target, weight, has_weight, int(ignore_index),
           float(smoothing), int(ncls), gout, bool(per_row), grad, wsum, _zero(prob.dtype))


# ---- probability targets ----------------------------------------------------------------------
@cuda_kernel(lambda T: (T[::1], T[::1], T[::1], _BOOL, _F64, _I64, T[::1], T[::1], T[::1],
                        _F64[:, ::1], _ct(T)))
def _ce_soft_fwd_kernel(x, target, weight, has_weight, smoothing, ncls, prob, loss, ywsum, part, z):
    ct = type(z)
    red = cuda.shared.array((3, ROW_TPB), ct)
    tid = cuda.threadIdx.x
    n = loss.size
    C = ncls
    nparts = part.shape[0]
    keep = ct(1.0 - smoothing)
    eps_c = ct(smoothing / C)
    vb = cuda.blockIdx.x
    while vb < nparts:
        tot = 0.0
        i = vb
        while i < n:
            base = i * C
            m = _row_max_device(red[0], tid, x, base, C, ct(-math.inf))
            ls, sa, sy = _soft_row_pass(red, tid, x, base, C, m, True, target, weight, has_weight, keep, eps_c,
                                        prob)
            if tid == 0:
                # sum_c y_c (lse - x_c) = sum_c y_c (m - x_c) + Y log S
                li = float64(sa) + float64(sy) * float64(ls)
                loss[i] = li
                ywsum[i] = sy
                tot += li
            cuda.syncthreads()
            i += nparts
        if tid == 0:
            part[vb, 0] = tot
        vb += cuda.gridDim.x


def _cross_entropy_soft_fwd_cuda(x, target, weight, has_weight, smoothing, ncls, prob, loss, ywsum):
    """Probability targets: writes ``prob``, per-row ``loss`` and ``ywsum`` (``sum_c w_c y_c``);
    returns the sum of the row losses (np.float64)."""
    n = loss.size
    if n == 0:
        return np.float64(0.0)
    part = _scratch((_nparts(n), 1), np.float64)
    launch_rows(_ce_soft_fwd_kernel, part.shape[0], x, target, weight, bool(has_weight), float(smoothing),
                int(ncls), prob, loss, ywsum, part, _zero(x.dtype))
    return np.float64(_reduce_parts(part)[0])


@cuda_kernel(lambda T: (T[::1], T[::1], T[::1], _BOOL, _F64, _I64, T[::1], T[::1], _BOOL, T[::1], _ct(T)))
def _ce_soft_bwd_kernel(prob, target, weight, has_weight, smoothing, ncls, ywsum, gout, per_row, grad, z):
    ct = type(z)
    C = ncls
    N = ywsum.size * C
    keep = ct(1.0 - smoothing)
    eps_c = ct(smoothing / C)
    k = cuda.grid(1)
    while k < N:
        i = k // C
        c = k - i * C
        g = ct(gout[i]) if per_row else ct(gout[0])
        y = keep * ct(target[k]) + eps_c
        if has_weight:
            y = y * ct(weight[c])
        grad[k] = g * (ct(prob[k]) * ct(ywsum[i]) - y)
        k += cuda.gridsize(1)


def _cross_entropy_soft_bwd_cuda(prob, target, weight, has_weight, smoothing, ncls, ywsum,
                                 gout, per_row, grad):
    """``dx_c = g (p_c sum_k w_k y_k - w_c y_c)`` for probability targets."""
    launch(_ce_soft_bwd_kernel, ywsum.size * int(ncls), prob, target, weight, bool(has_weight),
           float(smoothing), int(ncls), ywsum, gout, bool(per_row), grad, _zero(prob.dtype))
