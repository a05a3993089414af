"""Row-wise softmax / log_softmax kernels on a 2-D C-contiguous ``(rows, n)`` array.

Contract (the same for every backend): ``_softmax_fwd_cpu(x, out)``,
``_softmax_bwd_cpu(g, y, out)``, ``_log_softmax_fwd_cpu(x, out)``,
``_log_softmax_bwd_cpu(g, y, out)``; the op moves the softmax dim last first.

Every row loop is a ``prange`` over rows wrapped in :func:`flat_kernel` (the serial
twin below ``config.PARALLEL_THRESHOLD`` elements, the parallel one above). Row
reductions use eight independent accumulators: without ``fastmath`` LLVM may not
reorder a float sum, and one accumulator runs at the add latency (~4 cycles/element).

The exponentials are one in-place NumPy ``np.exp`` pass (SIMD; ``math.exp`` in a loop is
a scalar libm call with pip's llvmlite): softmax forward on 1024 x 1024 float32 takes
1.15 ms against 6.2 ms for one fused libm loop per row and 1.76 ms for the NumPy
composition (the table for three shapes and the backward passes: ``perf/README.md``,
"Measurement notes", ``kernels/cpu/softmax.py``). The backward of softmax is one fused
loop (``y * (g - <g, y>)``); the backward of log_softmax needs ``exp(y)``: one NumPy
pass into the output buffer, then a fused in-place loop ``g - exp(y) * sum(g)``.
"""
import math

import numpy as np
from numba import prange

from .._jit import flat_kernel, scalar_helper

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("softmax_fwd", "log_softmax_fwd", "softmax_bwd", "log_softmax_bwd")


@scalar_helper
def _row_max(x, r, n):
    """max of x[r, :n] with 8 independent running maxima (NaNs are skipped here; they
    still propagate through ``x - max`` and the sum)."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = x[r, 0]
    j = 0
    while j + 8 <= n:
        v0 = x[r, j]
        v1 = x[r, j + 1]
        v2 = x[r, j + 2]
        v3 = x[r, j + 3]
        v4 = x[r, j + 4]
        v5 = x[r, j + 5]
        v6 = x[r, j + 6]
        v7 = x[r, j + 7]
        m0 = v0 if v0 > m0 else m0
        m1 = v1 if v1 > m1 else m1
        m2 = v2 if v2 > m2 else m2
        m3 = v3 if v3 > m3 else m3
        m4 = v4 if v4 > m4 else m4
        m5 = v5 if v5 > m5 else m5
        m6 = v6 if v6 > m6 else m6
        m7 = v7 if v7 > m7 else m7
        j += 8
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    m4 = m5 if m5 > m4 else m4
    m6 = m7 if m7 > m6 else m6
    m0 = m2 if m2 > m0 else m0
    m4 = m6 if m6 > m4 else m4
    m = m4 if m4 > m0 else m0
    while j < n:
        v = x[r, j]
        m = v if v > m else m
        j += 1
    return m


@scalar_helper
def _row_sum(x, r, n):
    """sum of x[r, :n] with 8 independent accumulators."""
    z = type(x[r, 0])(0)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
    j = 0
    while j + 8 <= n:
        s0 += x[r, j]
        s1 += x[r, j + 1]
        s2 += x[r, j + 2]
        s3 += x[r, j + 3]
        s4 += x[r, j + 4]
        s5 += x[r, j + 5]
        s6 += x[r, j + 6]
        s7 += x[r, j + 7]
        j += 8
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        s += x[r, j]
        j += 1
    return s


@scalar_helper
def _row_dot(a, b, r, n):
    """sum of a[r, :n] * b[r, :n] with 8 independent accumulators."""
    z = type(a[r, 0])(0)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
    j = 0
    while j + 8 <= n:
        s0 += a[r, j] * b[r, j]
        s1 += a[r, j + 1] * b[r, j + 1]
        s2 += a[r, j + 2] * b[r, j + 2]
        s3 += a[r, j + 3] * b[r, j + 3]
        s4 += a[r, j + 4] * b[r, j + 4]
        s5 += a[r, j + 5] * b[r, j + 5]
        s6 += a[r, j + 6] * b[r, j + 6]
        s7 += a[r, j + 7] * b[r, j + 7]
        j += 8
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        s += a[r, j] * b[r, j]
        j += 1
    return s


@flat_kernel
def _shift_by_row_max(x, out):
    """out = x - max(x, axis=1) row by row."""
    rows, n = x.shape
    for r in prange(rows):
        m = _row_max(x, r, n)
        for j in range(n):
            out[r, j] = x[r, j] - m


@flat_kernel
def _normalize_rows(out):
    """out /= sum(out, axis=1), in place."""
    rows, n = out.shape
    for r in prange(rows):
        s = _row_sum(out, r, n)
        inv = type(s)(1) / s
        for j in range(n):
            out[r, j] *= inv


@flat_kernel
def _sub_log_row_sum(out, e):
    """out -= log(sum(e, axis=1)) row by row."""
    rows, n = out.shape
    for r in prange(rows):
        lse = math.log(_row_sum(e, r, n))
        for j in range(n):
            out[r, j] -= lse


def _softmax_fwd_cpu(x, out):
    if x.size == 0:
        return
    _shift_by_row_max(x, out)
    np.exp(out, out=out)
    _normalize_rows(out)


def _log_softmax_fwd_cpu(x, out):
    if x.size == 0:
        return
    _shift_by_row_max(x, out)
    e = np.exp(out)
    _sub_log_row_sum(out, e)


@flat_kernel
def _softmax_bwd_rows(g, y, out):
    rows, n = g.shape
    for r in prange(rows):
        d = _row_dot(g, y, r, n)
        for j in range(n):
            out[r, j] = y[r, j] * (g[r, j] - d)


def _softmax_bwd_cpu(g, y, out):
    """out = y * (g - sum(g * y, axis=1))."""
    if g.size:
        _softmax_bwd_rows(g, y, out)


@flat_kernel
def _log_softmax_bwd_from_exp(g, e):
    """e = g - e * sum(g, axis=1), in place."""
    rows, n = g.shape
    for r in prange(rows):
        s = _row_sum(g, r, n)
        for j in range(n):
            e[r, j] = g[r, j] - e[r, j] * s


def _log_softmax_bwd_cpu(g, y, out):
    """out = g - exp(y) * sum(g, axis=1)."""
    if g.size:
        np.exp(y, out=out)
        _log_softmax_bwd_from_exp(g, out)
