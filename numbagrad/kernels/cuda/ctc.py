"""CUDA twins of ``kernels/cpu/ctc.py``: the CTC alpha / beta recursions in log space.

Same contract as the CPU kernels (see that module for the arrays, their widths and the
math): ``_ctc_loss_fwd_cuda(log_probs, targets, input_lengths, target_lengths, blank,
zero_infinity, lab, smask, alpha, nll, loss)`` and ``_ctc_loss_bwd_cuda(log_probs,
input_lengths, target_lengths, zero_infinity, lab, smask, alpha, nll, gscale, work, grad)``.

Design
------
* One block of ``ROW_TPB`` threads per sample (``launch_rows``; blocks grid-stride over the
  batch, so any grid is correct). The threads stride over the ``2L+1`` extended labels;
  one ``syncthreads`` per time step separates reading row ``t-1`` of ``alpha`` (global
  memory, written by the block itself) from writing row ``t``. Only the ``s < 2L+1``
  cells are computed (no vector padding here), with explicit bounds for ``s-1``, ``s-2``
  (alpha) and ``s+1``, ``s+2`` (beta).
* ``lse3`` returns -inf when every operand is -inf (no ``-inf - -inf``), else
  ``m + log(sum exp(x - m))``.
* Backward, per time step (``t = T_b-1 .. 0``): the beta row (ping-pong rows ``work[b,
  0:W]`` / ``work[b, W:2W]``), then ``gamma = exp(alpha + beta - y + nll)`` into
  ``work[b, 2W:3W]``, then the gradient row: every class first gets ``g exp(y[t, c])``;
  after a barrier the blank's class gets ``g (exp(y) - sum of the even-s gammas)`` (a
  shared-memory tree sum) and each label the same with the sum of its gammas, written by
  the thread of the label's first occurrence, which walks the later occurrences in order.
  No atomics: the result is deterministic (and float16 needs no atomic add).
* Precision: the compute type is ``alpha``'s dtype (float32 for float16 ``log_probs``:
  the caller allocates ``smask``, ``alpha``, ``nll``, ``gscale``, ``work`` in float32, and
  ``loss``/``grad`` in float16 are narrowed at the store).
"""
import math

from numba import cuda

from ._launch import FLOAT_TYPES, ROW_TPB, cuda_kernel, device_fn, launch_rows
from .loss import _BOOL, _I64, _ct, _zero
from ._blockreduce import _block_sum_device

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("ctc_loss_fwd", "ctc_loss_bwd")

__all__ = ["_ctc_loss_fwd_cuda", "_ctc_loss_bwd_cuda"]


@device_fn
def _lse3(a, b, c):
    """log(e^a + e^b + e^c), -inf when all three are -inf."""
    m = a
    if b > m:
        m = b
    if c > m:
        m = c
    if m == -math.inf:
        return m
    return m + math.log(math.exp(a - m) + math.exp(b - m) + math.exp(c - m))


@device_fn
def _lengths_device(input_lengths, target_lengths, b):
    """Sample ``b``'s input length, target length ``L`` and extended-label length ``2L + 1``
    (the targets with a blank before, between and after them)."""
    L = target_lengths[b]
    return input_lengths[b], L, 2 * L + 1


@cuda_kernel(lambda T: (T[:, :, ::1], _I64[:, ::1], _I64[::1], _I64[::1], _I64, _BOOL, _I64[:, ::1],
                        _ct(T)[:, ::1], _ct(T)[:, :, ::1], _ct(T)[::1], T[::1], _ct(T)), dtypes=FLOAT_TYPES)
def _ctc_fwd_kernel(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity, lab, smask,
                    alpha, nll, loss, z):
    ct = type(z)
    neg = ct(-math.inf)
    tid = cuda.threadIdx.x
    N = input_lengths.size
    W = lab.shape[1]
    b = cuda.blockIdx.x
    while b < N:
        T_b, L, Sp = _lengths_device(input_lengths, target_lengths, b)
        s = tid
        while s < W:
            if s % 2 == 1 and s < Sp:
                lab[b, s] = targets[b, s // 2]
            else:
                lab[b, s] = blank
            s += ROW_TPB
        cuda.syncthreads()
        s = tid
        while s < W:
            if s % 2 == 1 and s >= 3 and s < Sp and lab[b, s] != lab[b, s - 2]:
                smask[b, s] = ct(0)
            else:
                smask[b, s] = neg
            s += ROW_TPB
        if T_b > 0:
            s = tid
            while s < Sp:
                if s < 2:
                    alpha[b, 0, s] = ct(log_probs[0, b, lab[b, s]])
                else:
                    alpha[b, 0, s] = neg
                s += ROW_TPB
            cuda.syncthreads()
            for t in range(1, T_b):
                s = tid
                while s < Sp:
                    a1 = alpha[b, t - 1, s]
                    a2 = alpha[b, t - 1, s - 1] if s >= 1 else neg
                    a3 = alpha[b, t - 1, s - 2] + smask[b, s] if s >= 2 else neg
                    alpha[b, t, s] = _lse3(a1, a2, a3) + ct(log_probs[t, b, lab[b, s]])
                    s += ROW_TPB
                cuda.syncthreads()
        if tid == 0:
            if T_b == 0:
                v = ct(0) if L == 0 else ct(math.inf)
            else:
                last = alpha[b, T_b - 1, Sp - 1]
                if Sp > 1:
                    v = -_lse3(last, alpha[b, T_b - 1, Sp - 2], neg)
                else:
                    v = -last
            nll[b] = v
            if zero_infinity and v == math.inf:
                loss[b] = 0
            else:
                loss[b] = v
        cuda.syncthreads()
        b += cuda.gridDim.x


@cuda_kernel(lambda T: (T[:, :, ::1], _I64[::1], _I64[::1], _BOOL, _I64[:, ::1], _ct(T)[:, ::1],
                        _ct(T)[:, :, ::1], _ct(T)[::1], _ct(T)[::1], _ct(T)[:, ::1], T[:, :, ::1], _ct(T)),
             dtypes=FLOAT_TYPES)
def _ctc_bwd_kernel(log_probs, input_lengths, target_lengths, zero_infinity, lab, smask, alpha, nll,
                    gscale, work, grad, z):
    ct = type(z)
    neg = ct(-math.inf)
    red = cuda.shared.array(ROW_TPB, ct)
    tid = cuda.threadIdx.x
    N = input_lengths.size
    T = log_probs.shape[0]
    C = log_probs.shape[2]
    W = lab.shape[1]
    b = cuda.blockIdx.x
    while b < N:
        T_b, L, Sp = _lengths_device(input_lengths, target_lengths, b)
        nl = nll[b]
        g = gscale[b]
        blank = lab[b, 0]
        # rows past the input length: 0; impossible alignments: NaN (0 with zero_infinity)
        fill = ct(0)
        if not (nl < math.inf):
            fill = ct(0) if zero_infinity else ct(math.nan)
        k = tid
        while k < T * C:
            t = k // C
            if t >= T_b:
                grad[t, b, k - t * C] = 0
            elif not (nl < math.inf):
                grad[t, b, k - t * C] = fill
            k += ROW_TPB
        if T_b > 0 and nl < math.inf:
            for i in range(T_b):
                t = T_b - 1 - i
                o = (i % 2) * W        # this step's beta row
                on = W - o             # the next step's (t + 1)
                s = tid
                while s < Sp:
                    y = ct(log_probs[t, b, lab[b, s]])
                    if i == 0:
                        v = y if s >= Sp - 2 else neg
                    else:
                        a1 = work[b, on + s]
                        a2 = work[b, on + s + 1] if s + 1 < Sp else neg
                        a3 = work[b, on + s + 2] + smask[b, s + 2] if s + 2 < Sp else neg
                        v = _lse3(a1, a2, a3) + y
                    work[b, o + s] = v
                    work[b, 2 * W + s] = math.exp(alpha[b, t, s] + v - y + nl)
                    s += ROW_TPB
                c = tid
                while c < C:
                    grad[t, b, c] = math.exp(ct(log_probs[t, b, c])) * g
                    c += ROW_TPB
                cuda.syncthreads()  # gammas and these writes are in before the sums below
                # blank: tree sum of the even-s gammas (fixed order: deterministic)
                acc = ct(0)
                s = 2 * tid
                while s < Sp:
                    acc += work[b, 2 * W + s]
                    s += 2 * ROW_TPB
                tot = _block_sum_device(red, tid, acc)
                if tid == 0:
                    grad[t, b, blank] = (math.exp(ct(log_probs[t, b, blank])) - tot) * g
                # labels: the first occurrence's thread sums all occurrences in order
                s = 2 * tid + 1
                while s < Sp:
                    c = lab[b, s]
                    first = True
                    j = 1
                    while j < s:
                        if lab[b, j] == c:
                            first = False
                        j += 2
                    if first:
                        acc = ct(0)
                        j = s
                        while j < Sp:
                            if lab[b, j] == c:
                                acc += work[b, 2 * W + j]
                            j += 2
                        grad[t, b, c] = (math.exp(ct(log_probs[t, b, c])) - acc) * g
                    s += 2 * ROW_TPB
                cuda.syncthreads()  # beta row t is read by step t - 1; red is reused
        cuda.syncthreads()
        b += cuda.gridDim.x


def _ctc_loss_fwd_cuda(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity,
                       lab, smask, alpha, nll, loss):
    """Alpha recursion, one block per sample: writes ``lab``, ``smask``, ``alpha``, ``nll``, ``loss``."""
    n = input_lengths.shape[0]
    if n == 0:
        return
    launch_rows(_ctc_fwd_kernel, n, log_probs, targets, input_lengths, target_lengths, int(blank),
                bool(zero_infinity), lab, smask, alpha, nll, loss, _zero(alpha.dtype))


def _ctc_loss_bwd_cuda(log_probs, input_lengths, target_lengths, zero_infinity, lab, smask, alpha,
                       nll, gscale, work, grad):
    """Beta recursion and PyTorch's gradient w.r.t. ``log_probs``, one block per sample."""
    n = input_lengths.shape[0]
    if n == 0:
        return
    launch_rows(_ctc_bwd_kernel, n, log_probs, input_lengths, target_lengths, bool(zero_infinity), lab,
                smask, alpha, nll, gscale, work, grad, _zero(alpha.dtype))
