"""CUDA twins of ``kernels/cpu/bce.py``: fused binary cross-entropy with logits.

Same contract as the CPU module (arguments name for name): flat ``x``, ``y``, ``loss`` /
``grad`` of ``n`` elements viewed as rows of ``L`` columns, ``w`` / ``pw`` read as
``w[r * w_rs + j]`` (``w_rs`` 0: one value per column; ``L``: full size)::

    loss = w [ (1 - y) x + l sp(-x) ],  l = 1 + (pw - 1) y,  sp(-x) = max(-x, 0) + log1p(exp(-|x|))
    dx   = g w [ l sigmoid(x) - pw y ]

* Forward: ``ROW_TPB`` threads per block over ``P <= MAX_BLOCKS`` interleaved "virtual
  blocks" (blocks stride over them, so any grid is correct); each thread keeps a float64
  partial sum of its elements, a shared-memory tree sums a virtual block into
  ``part[vb, 0]`` and ``loss.py``'s one-block kernel sums the parts (deterministic for a
  given ``P``). The launcher
  returns that total as ``np.float64`` (a host copy), or ``0.0`` without reducing when
  ``need_total`` is false (reduction='none' needs no sum).
* Backward: a flat grid-stride kernel, one thread per element.
* ``exp``/``log1p`` are libdevice calls (``math.exp``, ``math.log1p``); float16 is read
  and computed in float32 and narrowed at the store.
"""
import math

import numpy as np
from numba import cuda, float64

from ._launch import MAX_BLOCKS, ROW_TPB, cuda_kernel, dev, launch, scratch, widen
from .loss import _BOOL, _F64, _I64, _ct, _reduce_parts, _zero
from ._blockreduce import _block_sum_device

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("bce_logits_fwd", "bce_logits_bwd")

__all__ = ["_bce_logits_fwd_cuda", "_bce_logits_bwd_cuda"]


@cuda_kernel(lambda T: (T[::1], T[::1], T[::1], _I64, T[::1], _I64, _BOOL, _BOOL, _I64, T[::1],
                        _F64[:, ::1], _BOOL, _ct(T)))
def _bce_logits_fwd_kernel(x, y, w, w_rs, pw, pw_rs, has_w, has_pw, L, loss, part, need_total, z):
    ct = type(z)
    one = ct(1)
    zero = ct(0)
    sh = cuda.shared.array(ROW_TPB, float64)
    tid = cuda.threadIdx.x
    n = x.size
    nparts = part.shape[0]
    stride = nparts * ROW_TPB
    # "virtual blocks": part row vb sums elements vb * ROW_TPB + tid + k * stride, whatever
    # the launched grid (blocks stride over the virtual blocks), so any grid is correct
    vb = cuda.blockIdx.x
    while vb < nparts:
        acc = 0.0
        i = vb * ROW_TPB + tid
        while i < n:
            xv = ct(widen(x[i]))
            yv = ct(widen(y[i]))
            r = i // L
            j = i - r * L
            spn = max(-xv, zero) + ct(math.log1p(math.exp(-abs(xv))))
            lw = one
            if has_pw:
                lw = one + (ct(widen(pw[r * pw_rs + j])) - one) * yv
            v = (one - yv) * xv + lw * spn
            if has_w:
                v = v * ct(widen(w[r * w_rs + j]))
            loss[i] = v
            acc += float64(v)
            i += stride
        if need_total:
            tot = _block_sum_device(sh, tid, acc)
            if tid == 0:
                part[vb, 0] = tot
        vb += cuda.gridDim.x


@cuda_kernel(lambda T: (T[::1], T[::1], T[::1], _I64, T[::1], _I64, _BOOL, _BOOL, _I64, T[::1], _BOOL,
                        T[::1], _ct(T)))
def _bce_logits_bwd_kernel(x, y, w, w_rs, pw, pw_rs, has_w, has_pw, L, gout, per_elem, grad, z):
    ct = type(z)
    one = ct(1)
    zero = ct(0)
    n = x.size
    g0 = ct(widen(gout[0]))
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        xv = ct(widen(x[i]))
        yv = ct(widen(y[i]))
        r = i // L
        j = i - r * L
        e = ct(math.exp(-abs(xv)))
        inv = one / (one + e)
        sig = inv if xv >= zero else e * inv
        if has_pw:
            p = ct(widen(pw[r * pw_rs + j]))
            d = (one + (p - one) * yv) * sig - p * yv
        else:
            d = sig - yv
        if has_w:
            d = d * ct(widen(w[r * w_rs + j]))
        g = ct(widen(gout[i])) if per_elem else g0
        grad[i] = g * d


def _bce_logits_fwd_cuda(x, y, w, w_rs, pw, pw_rs, has_w, has_pw, L, loss, need_total):
    """Per-element loss into ``loss``; returns the float64 total (0.0 if not ``need_total``)."""
    xd = dev(x)
    n = xd.size
    if n == 0:
        return np.float64(0.0)
    nb = max(1, min(MAX_BLOCKS, -(-n // ROW_TPB)))
    part = scratch((nb, 1), np.float64)
    _bce_logits_fwd_kernel[nb, ROW_TPB](xd, dev(y), dev(w), int(w_rs), dev(pw), int(pw_rs), bool(has_w),
                                        bool(has_pw), int(L), dev(loss), part, bool(need_total),
                                        _zero(xd.dtype))
    if not need_total:
        return np.float64(0.0)
    return np.float64(_reduce_parts(part)[0])


def _bce_logits_bwd_cuda(x, y, w, w_rs, pw, pw_rs, has_w, has_pw, L, gout, per_elem, grad):
    """``grad = g w (l sigmoid(x) - pw y)``."""
    xd = dev(x)
    launch(_bce_logits_bwd_kernel, xd.size, xd, y, w, int(w_rs), pw, int(pw_rs), bool(has_w), bool(has_pw),
           int(L), gout, bool(per_elem), grad, _zero(xd.dtype))
