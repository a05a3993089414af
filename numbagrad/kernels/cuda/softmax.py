"""CUDA row-wise softmax / log_softmax kernels (twins of ``kernels/cpu/softmax.py``).

Contract: the CPU module's. ``_softmax_fwd_cuda(x, out)``, ``_softmax_bwd_cuda(g, y, out)``,
``_log_softmax_fwd_cuda(x, out)``, ``_log_softmax_bwd_cuda(g, y, out)`` on 2-D
C-contiguous ``(rows, n)`` device arrays of one floating dtype (float16, float32 or
float64); the op has already moved the softmax dim last.

One block of :data:`~._launch.ROW_TPB` threads per row (rows beyond the grid cap are
taken grid-stride by the same blocks). Within a row, thread ``t`` walks columns
``t, t + ROW_TPB, ...`` (coalesced) keeping a private partial, and the block combines the
``ROW_TPB`` partials with a shared-memory tree reduction (:func:`_block_max_device`,
:func:`_block_sum_device`; ``ROW_TPB`` is a power of two). Per row:

* softmax fwd: ``m = max x``; ``s = sum exp(x - m)``; ``out = exp(x - m) * (1 / s)``
  (the exponential is recomputed in the last pass instead of stored and re-read: same
  memory traffic, and a half output is rounded once, not twice);
* log_softmax fwd: ``out = (x - m) - log(s)``;
* softmax bwd: ``out = y * (g - <g, y>)``;
* log_softmax bwd: ``out = g - exp(y) * sum(g)``.

Shifting by the row max keeps logits of +-1e4 exact; a ``-inf`` logit gives probability 0
(log-probability ``-inf``); NaNs are skipped by the max (``v > m`` is false) and then
propagate through the sum to the whole row, as on the CPU.

Accumulation: float16 rows are widened to float32 (``v * 1.0f``, exact) and reduced in
float32 shared memory, float32 in float32 (as the CPU kernels), float64 in float64. The
shared array's dtype must be a compile-time constant, so each kernel body is built twice
by a factory: a float32-accumulating kernel (float16, float32 inputs) and a
float64-accumulating one; the launcher picks by the input's dtype.
"""
import math

import numpy as np
from numba import cuda, types as nbtypes

from ._launch import widen as _wide_device
from ._launch import ROW_TPB, cuda_kernel, dev, device_fn, launch_rows

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("softmax_fwd", "log_softmax_fwd", "softmax_bwd", "log_softmax_bwd")


@device_fn
def _block_max_device(sm, t, v):
    """Max over the block of each thread's ``v`` (thread index ``t``), via ``sm``.

    Every thread of the block must call it (it synchronises); all get the result.
    Partials never hold NaN (the callers skip them), so ``b > a`` is a total order here.
    """
    sm[t] = v
    cuda.syncthreads()
    s = ROW_TPB // 2
    while s > 0:
        if t < s:
            a = sm[t]
            b = sm[t + s]
            sm[t] = b if b > a else a
        cuda.syncthreads()
        s //= 2
    r = sm[0]
    cuda.syncthreads()  # everyone has read sm[0] before sm is reused
    return r


@device_fn
def _block_sum_device(sm, t, v):
    """Sum over the block of each thread's ``v`` (thread index ``t``), via ``sm``
    (a pairwise tree: also more accurate than one running sum)."""
    sm[t] = v
    cuda.syncthreads()
    s = ROW_TPB // 2
    while s > 0:
        if t < s:
            sm[t] += sm[t + s]
        cuda.syncthreads()
        s //= 2
    r = sm[0]
    cuda.syncthreads()
    return r


def _row_sigs(n_arrays, dtypes):
    return [tuple(T[:, ::1] for _ in range(n_arrays)) for T in dtypes]


_ACC32_IN = (nbtypes.float16, nbtypes.float32)
_ACC64_IN = (nbtypes.float64,)


def _make_kernels(acc, acc_nb, in_types, suffix):
    """The four row kernels accumulating in ``acc`` (a NumPy scalar type; ``acc_nb`` its
    numba type, for the shared arrays)."""
    neg_inf = acc(-np.inf)
    zero = acc(0)
    one = acc(1)

    @device_fn
    def max_sumexp(sm, t, x, r, n):
        """Row ``r``'s max ``m`` and ``sum(exp(x - m))`` over the block (every thread calls it)."""
        m = neg_inf
        for j in range(t, n, ROW_TPB):
            v = _wide_device(x[r, j])
            m = v if v > m else m
        m = _block_max_device(sm, t, m)
        s = zero
        for j in range(t, n, ROW_TPB):
            s += math.exp(_wide_device(x[r, j]) - m)
        return m, _block_sum_device(sm, t, s)

    def softmax_fwd(x, out):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        rows, n = x.shape
        for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            m, s = max_sumexp(sm, t, x, r, n)
            inv = one / s
            for j in range(t, n, ROW_TPB):
                out[r, j] = math.exp(_wide_device(x[r, j]) - m) * inv

    def log_softmax_fwd(x, out):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        rows, n = x.shape
        for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            m, s = max_sumexp(sm, t, x, r, n)
            lse = math.log(s)
            for j in range(t, n, ROW_TPB):
                out[r, j] = (_wide_device(x[r, j]) - m) - lse

    def softmax_bwd(g, y, out):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        rows, n = g.shape
        for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            d = zero
            for j in range(t, n, ROW_TPB):
                d += _wide_device(g[r, j]) * _wide_device(y[r, j])
            d = _block_sum_device(sm, t, d)
            for j in range(t, n, ROW_TPB):
                out[r, j] = _wide_device(y[r, j]) * (_wide_device(g[r, j]) - d)

    def log_softmax_bwd(g, y, out):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        rows, n = g.shape
        for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
            s = zero
            for j in range(t, n, ROW_TPB):
                s += _wide_device(g[r, j])
            s = _block_sum_device(sm, t, s)
            for j in range(t, n, ROW_TPB):
                out[r, j] = _wide_device(g[r, j]) - math.exp(_wide_device(y[r, j])) * s

    mod = __name__
    return tuple(
        cuda_kernel(_row_sigs(n_arrays, in_types), name=f"{mod}._{fn.__name__}_{suffix}_kernel")(fn)
        for fn, n_arrays in ((softmax_fwd, 2), (log_softmax_fwd, 2), (softmax_bwd, 3), (log_softmax_bwd, 3)))


(_softmax_fwd_acc32_kernel, _log_softmax_fwd_acc32_kernel,
 _softmax_bwd_acc32_kernel, _log_softmax_bwd_acc32_kernel) = _make_kernels(
    np.float32, nbtypes.float32, _ACC32_IN, "acc32")
(_softmax_fwd_acc64_kernel, _log_softmax_fwd_acc64_kernel,
 _softmax_bwd_acc64_kernel, _log_softmax_bwd_acc64_kernel) = _make_kernels(
    np.float64, nbtypes.float64, _ACC64_IN, "acc64")


def _launch_rowwise(k32, k64, *args):
    """Launch the variant accumulating in the first array's precision, one block per row."""
    d = dev(args[0])
    if d.size == 0:
        return
    launch_rows(k64 if d.dtype == np.float64 else k32, d.shape[0], *args)


# ---- host launchers: the names ``backend.kernel("softmax", name)`` resolves -----------------------
def _softmax_fwd_cuda(x, out):
    """out = exp(x - max) / sum(exp(x - max)) row by row."""
    _launch_rowwise(_softmax_fwd_acc32_kernel, _softmax_fwd_acc64_kernel, x, out)


def _log_softmax_fwd_cuda(x, out):
    """out = (x - max) - log(sum(exp(x - max))) row by row."""
    _launch_rowwise(_log_softmax_fwd_acc32_kernel, _log_softmax_fwd_acc64_kernel, x, out)


def _softmax_bwd_cuda(g, y, out):
    """out = y * (g - sum(g * y, axis=1))."""
    _launch_rowwise(_softmax_bwd_acc32_kernel, _softmax_bwd_acc64_kernel, g, y, out)


def _log_softmax_bwd_cuda(g, y, out):
    """out = g - exp(y) * sum(g, axis=1)."""
    _launch_rowwise(_log_softmax_bwd_acc32_kernel, _log_softmax_bwd_acc64_kernel, g, y, out)
