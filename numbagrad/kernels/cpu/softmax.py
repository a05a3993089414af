"""Row-wise softmax / log_softmax kernels on a 2-D C-contiguous ``(rows, n)`` array.

Contract (the same for every backend): ``_softmax_fwd_cpu(x, out)``,
``_softmax_bwd_cpu(g, y, out)``, ``_log_softmax_fwd_cpu(x, out)``,
``_log_softmax_bwd_cpu(g, y, out)``; the op moves the softmax dim last first.

Every row loop is a ``prange`` over rows wrapped in :func:`flat_kernel` (the serial
twin below ``config.PARALLEL_THRESHOLD`` elements, the parallel one above). Row
reductions are ``_rowreduce``'s, with eight independent accumulators: without ``fastmath``
LLVM may not reorder a float sum, and one accumulator runs at the add latency (~4
cycles/element).

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

from .._jit import flat_kernel
from ._rowreduce import vdot_dev, vmax, vsum

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("softmax_fwd", "log_softmax_fwd", "softmax_bwd", "log_softmax_bwd")


@flat_kernel
def _shift_by_row_max(x, out):
    """out = x - max(x, axis=1) row by row."""
    rows, n = x.shape
    for r in prange(rows):
        m = vmax(x[r])
        for j in range(n):
            out[r, j] = x[r, j] - m


@flat_kernel
def _normalize_rows(out):
    """out /= sum(out, axis=1), in place."""
    rows, n = out.shape
    for r in prange(rows):
        s = vsum(out[r], out.dtype.type(0))
        inv = type(s)(1) / s
        for j in range(n):
            out[r, j] *= inv


@flat_kernel
def _sub_log_row_sum(out, e):
    """out -= log(sum(e, axis=1)) row by row."""
    rows, n = out.shape
    for r in prange(rows):
        lse = math.log(vsum(e[r], e.dtype.type(0)))
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
        d = vdot_dev(g[r], y[r], y.dtype.type(0))
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
        s = vsum(g[r], g.dtype.type(0))
        for j in range(n):
            e[r, j] = g[r, j] - e[r, j] * s


def _log_softmax_bwd_cpu(g, y, out):
    """out = g - exp(y) * sum(g, axis=1)."""
    if g.size:
        np.exp(y, out=out)
        _log_softmax_bwd_from_exp(g, out)
