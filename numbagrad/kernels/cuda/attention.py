"""CUDA attention-softmax kernels (twins of ``kernels/cpu/attention.py``).

Contract: the CPU module's, on device arrays. ``s``, ``p``, ``pd``, ``dp``, ``ds`` are
C-contiguous ``(N, L, S)`` arrays of one floating dtype (float16, float32 or float64),
``mask`` a ``(Nm, L, S)`` view with any strides (stride 0 over broadcast dims), ``dmask``
uint8 ``(N, L, S)`` (or any 3-D uint8 array without dropout):

* ``_attn_softmax_fwd_cuda(s, mask, mdiv, has_mask, causal, scale, empty_nan, dropout,
  seed, thr53, dscale, p, pd, dmask)``;
* ``_attn_softmax_bwd_cuda(dp, p, dmask, dropout, dscale, scale, ds)``.

One block of :data:`~._launch.ROW_TPB` threads per query row ``r = n * L + i`` (rows
beyond the grid cap are taken grid-stride by the same blocks); thread ``t`` walks the
keys ``t, t + ROW_TPB, ...`` and the block combines partials with the shared-memory tree
reductions of ``kernels/cuda/softmax.py``. Unlike the CPU (three passes around NumPy's
SIMD ``exp``), the forward is one kernel: max pass, exp-sum pass, and a last pass that
recomputes ``exp`` and writes ``p`` (and, with dropout, ``pd`` and ``dmask`` from the
same counter-based hash as the CPU, so a seed gives the same mask on both devices).
``p`` may alias ``s`` and ``ds`` may alias ``dp``: each thread reads an element before it
writes it and touches only its own columns.

float16 rows are read and computed in float32 and narrowed at the store; float64 rows
accumulate in float64 (the shared arrays' dtype is a compile-time constant, so a factory
builds both variants and the launcher picks by dtype).
"""
import math

import numpy as np
from numba import cuda, types as nbtypes

from .. import scalar as S
from ._launch import widen as _w
from ._launch import ROW_TPB, cuda_kernel, dev, launch_rows
from .softmax import _block_max_device, _block_sum_device

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("attn_softmax_fwd", "attn_softmax_bwd")

_U64 = nbtypes.uint64
_I64 = nbtypes.int64
_B = nbtypes.boolean
_U8 = nbtypes.uint8[:, :, ::1]


def _fwd_sig(T):
    c3 = T[:, :, ::1]
    return (c3, T[:, :, :], _I64, _B, _B, T, _B, _B, _U64, _U64, T, c3, c3, _U8)


def _bwd_sig(T):
    c3 = T[:, :, ::1]
    return (c3, c3, _U8, _B, T, T, c3)


def _make_kernels(acc, acc_nb, in_types, suffix):
    neg_inf = acc(-np.inf)
    zero = acc(0)
    one = acc(1)
    nan = acc(np.nan)

    def attn_fwd(s, mask, mdiv, has_mask, causal, scale, empty_nan, dropout, seed, thr53, dscale, p, pd,
                 dmask):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        N, L, Sk = s.shape
        Nm = mask.shape[0]
        sc = acc(_w(scale))
        dsc = acc(_w(dscale))
        for r in range(cuda.blockIdx.x, N * L, cuda.gridDim.x):
            n = r // L
            i = r - n * L
            lim = min(i + 1, Sk) if causal else Sk
            nm = (n // mdiv) % Nm
            m = neg_inf
            for j in range(t, lim, ROW_TPB):
                v = acc(_w(s[n, i, j])) * sc
                if has_mask:
                    v += acc(_w(mask[nm, i, j]))
                m = v if v > m else m
            m = _block_max_device(sm, t, m)
            tot = zero
            if m != neg_inf:
                for j in range(t, lim, ROW_TPB):
                    v = acc(_w(s[n, i, j])) * sc
                    if has_mask:
                        v += acc(_w(mask[nm, i, j]))
                    tot += math.exp(v - m)
            tot = _block_sum_device(sm, t, tot)
            inv = one / tot if tot > zero else zero
            fill = nan if (empty_nan and not tot > zero) else zero
            for j in range(t, Sk, ROW_TPB):
                val = fill
                if j < lim and tot > zero:
                    v = acc(_w(s[n, i, j])) * sc
                    if has_mask:
                        v += acc(_w(mask[nm, i, j]))
                    val = math.exp(v - m) * inv
                p[n, i, j] = val
                if dropout:
                    keep = S.keep_bit(seed, r * Sk + j, thr53)
                    dmask[n, i, j] = keep
                    pd[n, i, j] = val * (dsc if keep else zero)

    def attn_bwd(dp, p, dmask, dropout, dscale, scale, ds):
        sm = cuda.shared.array(ROW_TPB, acc_nb)
        t = cuda.threadIdx.x
        N, L, Sk = dp.shape
        sc = acc(_w(scale))
        dsc = acc(_w(dscale))
        for r in range(cuda.blockIdx.x, N * L, cuda.gridDim.x):
            n = r // L
            i = r - n * L
            d = zero
            for j in range(t, Sk, ROW_TPB):
                g = acc(_w(dp[n, i, j]))
                if dropout:
                    g *= dsc if dmask[n, i, j] else zero
                d += g * acc(_w(p[n, i, j]))
            d = _block_sum_device(sm, t, d)
            for j in range(t, Sk, ROW_TPB):
                g = acc(_w(dp[n, i, j]))
                if dropout:
                    g *= dsc if dmask[n, i, j] else zero
                ds[n, i, j] = sc * acc(_w(p[n, i, j])) * (g - d)

    mod = __name__
    fwd = cuda_kernel([_fwd_sig(T) for T in in_types], name=f"{mod}._attn_fwd_{suffix}_kernel")(attn_fwd)
    bwd = cuda_kernel([_bwd_sig(T) for T in in_types], name=f"{mod}._attn_bwd_{suffix}_kernel")(attn_bwd)
    return fwd, bwd


_attn_fwd_acc32_kernel, _attn_bwd_acc32_kernel = _make_kernels(
    np.float32, nbtypes.float32, (nbtypes.float16, nbtypes.float32), "acc32")
_attn_fwd_acc64_kernel, _attn_bwd_acc64_kernel = _make_kernels(
    np.float64, nbtypes.float64, (nbtypes.float64,), "acc64")


# ---- host launchers: the names ``backend.kernel("attention", name)`` resolves -------------------------
def _attn_softmax_fwd_cuda(s, mask, mdiv, has_mask, causal, scale, empty_nan, dropout, seed, thr53, dscale,
                           p, pd, dmask):
    """Masked, scaled row softmax of ``s`` into ``p`` (+ dropout into ``pd``/``dmask``)."""
    d = dev(s)
    if d.size == 0:
        return
    k = _attn_fwd_acc64_kernel if d.dtype == np.float64 else _attn_fwd_acc32_kernel
    launch_rows(k, d.shape[0] * d.shape[1], s, mask, np.int64(mdiv), bool(has_mask), bool(causal), scale,
                bool(empty_nan), bool(dropout), np.uint64(seed), np.uint64(thr53), dscale, p, pd, dmask)


def _attn_softmax_bwd_cuda(dp, p, dmask, dropout, dscale, scale, ds):
    """ds = scale * p * (g - <g, p>) per row, g = dp (* dmask * dscale with dropout)."""
    d = dev(dp)
    if d.size == 0:
        return
    k = _attn_bwd_acc64_kernel if d.dtype == np.float64 else _attn_bwd_acc32_kernel
    launch_rows(k, d.shape[0] * d.shape[1], dp, p, dmask, bool(dropout), dscale, scale, ds)
