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
from ._blockreduce import _block_max_device, _block_sum_device

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("softmax_fwd", "log_softmax_fwd", "softmax_bwd", "log_softmax_bwd")


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

    def forward(row_const, elem):
        """A forward kernel: ``c = row_const(s)`` per row, then ``out = elem(x, m, c)``."""
        def kernel(x, out):
            sm = cuda.shared.array(ROW_TPB, acc_nb)
            t = cuda.threadIdx.x
            rows, n = x.shape
            for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
                m, s = max_sumexp(sm, t, x, r, n)
                c = row_const(s)
                for j in range(t, n, ROW_TPB):
                    out[r, j] = elem(_wide_device(x[r, j]), m, c)
        return kernel

    def backward(term, elem):
        """A backward kernel: ``d = sum term(g, y)`` per row, then ``out = elem(g, y, d)``."""
        def kernel(g, y, out):
            sm = cuda.shared.array(ROW_TPB, acc_nb)
            t = cuda.threadIdx.x
            rows, n = g.shape
            for r in range(cuda.blockIdx.x, rows, cuda.gridDim.x):
                d = zero
                for j in range(t, n, ROW_TPB):
                    d += term(_wide_device(g[r, j]), _wide_device(y[r, j]))
                d = _block_sum_device(sm, t, d)
                for j in range(t, n, ROW_TPB):
                    out[r, j] = elem(_wide_device(g[r, j]), _wide_device(y[r, j]), d)
        return kernel

    @device_fn
    def reciprocal(s):
        return one / s

    @device_fn
    def prob(v, m, inv):
        return math.exp(v - m) * inv

    @device_fn
    def log_prob(v, m, lse):
        return (v - m) - lse

    @device_fn
    def gy(gv, yv):
        return gv * yv

    @device_fn
    def g_only(gv, yv):
        return gv

    @device_fn
    def softmax_grad(gv, yv, d):
        return yv * (gv - d)

    @device_fn
    def log_softmax_grad(gv, yv, s):
        return gv - math.exp(yv) * s

    kernels = (("softmax_fwd", forward(reciprocal, prob), 2),
               ("log_softmax_fwd", forward(math.log, log_prob), 2),
               ("softmax_bwd", backward(gy, softmax_grad), 3),
               ("log_softmax_bwd", backward(g_only, log_softmax_grad), 3))
    mod = __name__
    for name, fn, _ in kernels:
        fn.__name__ = name
    return tuple(
        cuda_kernel(_row_sigs(n_arrays, in_types), name=f"{mod}._{name}_{suffix}_kernel")(fn)
        for name, fn, n_arrays in kernels)


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
