"""CUDA twins of ``kernels/cpu/optim_lamb.py``: fused LAMB and Lion over a flat arena.

Same arguments, name for name, as the CPU kernels (see there and
``numbagrad/optim/optimizer.py`` for the arena: blocks ``blk_start[b]:blk_end[b]`` inside
parameter ``blk_seg[b]``, sorted and disjoint, each parameter's blocks consecutive;
``active[s]`` marks the parameters with a gradient; inactive ones are untouched, their
step counts included). Nothing is returned.

Design
------
* LAMB, four launches on the default stream (so each sees the previous one's writes):

  1. a per-segment kernel (one thread per parameter) bumps ``steps`` and writes the bias
     corrections ``[1/bc1, sqrt(bc2)]`` into ``seg_scal`` (``kernels/cpu/optim_lamb.py``'s
     ``lamb_corrections``, the CPU's pre-pass: scalar math written once for both);
  2. a block kernel, one thread block per arena block (grid-stride over blocks):
     its threads update the moments of the block's elements and write the update ``r``
     into the scratch arena ``update``, accumulating ``p*p`` and ``r*r`` in float64; a
     shared-memory tree (``_blockreduce._block_sums_device``, both sums under one set of
     barriers) combines the block's threads into ``blk_part[2b]``,
     ``blk_part[2b+1]``. Without adaptation (``adapt`` false) it applies ``p -= lr * r``
     itself and the launches 3 and 4 are skipped;
  3. a per-segment kernel (one thread per parameter) sums its blocks' partials in block
     order (its first block found by binary search over ``blk_seg``) and writes
     ``-lr * trust`` into ``seg_scal[2s]`` (the CPU's ``lamb_trust``);
  4. an element kernel (grid-stride over the arena, ``_find_block``) applies
     ``p += seg_scal[2s] * r``.

  The reductions have a fixed order for a given launch configuration, so results are
  deterministic (they differ from the CPU's by the summation order, ~1e-16 relative,
  in the norms).
* Lion: ``optim.py``'s ``_count_steps_kernel`` bumps ``steps``; an element kernel does
  the update.
* float16 arenas read and compute in float32 and narrow at the stores (the update ``r``
  is re-read after its store, so the norm is the norm of what pass 4 applies).
"""
import math

from numba import cuda, float64
from numba import types as nbtypes

from ..cpu.optim_lamb import lamb_corrections, lamb_trust
from ._blockreduce import _block_sums_device
from ._launch import MAX_BLOCKS, SIM, cuda_kernel, dev, widen
from .optim import (_BOOL, _F32, _F64, _I64, _TABLES_T, _U8, _bump, _count_steps_kernel, _ct, _ctype, _elements_kernel,
                    _launch_elements, _launch_segments, _moments, _segments_kernel, _tables, _typed)

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("lamb_step", "lion_step")

__all__ = ["_lamb_step_cuda", "_lion_step_cuda"]

BLOCK_TPB = 8 if SIM else 256
"""Threads per block of the LAMB block kernel (a power of two: the shared-memory tree)."""


# ---- LAMB ------------------------------------------------------------------------------------
@_segments_kernel(lambda T: (_U8[::1], _F32[::1], T[::1], _F64, _F64, _BOOL))
def _lamb_segments_kernel(steps, seg_scal, beta1, beta2, bias_correction, s):
    rbc1, bc2s = lamb_corrections(beta1, beta2, _bump(steps, s), bias_correction)
    seg_scal[2 * s] = rbc1
    seg_scal[2 * s + 1] = bc2s


@cuda_kernel(lambda T: (T[::1],) * 5 + (_TABLES_T, T[::1], _F64[::1], nbtypes.Tuple((_ct(T),) * 8 + (_BOOL, _BOOL))))
def _lamb_blocks_kernel(param, grad, exp_avg, exp_avg_sq, update, tables, seg_scal, blk_part, hyper):
    blk_start, blk_end, blk_seg, active = tables
    omb1, omw, b2, omb2, eps, wd, sign, neg_lr, adapt, lerp_small = hyper
    sh = cuda.shared.array((2, BLOCK_TPB), float64)  # row 0: sums of p*p, row 1: of r*r
    ct = type(omb1)
    tid = cuda.threadIdx.x
    b = cuda.blockIdx.x
    while b < blk_start.size:
        s = blk_seg[b]
        if active[s]:  # uniform over the thread block: the syncthreads below are safe
            rbc1 = ct(seg_scal[2 * s])
            bc2s = ct(seg_scal[2 * s + 1])
            sp = 0.0
            sr = 0.0
            e = blk_start[b] + tid
            hi = blk_end[b]
            while e < hi:
                p = ct(param[e])
                g = ct(grad[e]) * sign
                m, v = _moments(g, ct(exp_avg[e]), ct(exp_avg_sq[e]), omb1, omw, b2, omb2, lerp_small)
                exp_avg[e] = m
                exp_avg_sq[e] = v
                r = m * rbc1 / (math.sqrt(v) / bc2s + eps)
                if wd != ct(0):
                    r = r + wd * p
                if adapt:
                    update[e] = r
                    r = ct(update[e])  # what pass 4 will apply (half: narrowed)
                    pd = float64(p)
                    rd = float64(r)
                    sp += pd * pd
                    sr += rd * rd
                else:
                    param[e] = p + neg_lr * r
                e += BLOCK_TPB
            if adapt:
                sh[0, tid] = sp
                sh[1, tid] = sr
                _block_sums_device(sh, tid)
                if tid == 0:
                    blk_part[2 * b] = sh[0, 0]
                    blk_part[2 * b + 1] = sh[1, 0]
                cuda.syncthreads()  # sh is read before the next block writes it
        b += cuda.gridDim.x


@_segments_kernel(lambda T: (_U8[::1], _I64[::1], T[::1], _F64[::1], _F64, _F64))
def _lamb_trust_kernel(blk_seg, seg_scal, blk_part, lr, clamp, s):
    nblk = blk_seg.size
    lo = 0
    hi = nblk
    while lo < hi:  # the first block of segment s (blk_seg is non-decreasing)
        mid = (lo + hi) >> 1
        if blk_seg[mid] < s:
            lo = mid + 1
        else:
            hi = mid
    sp = 0.0
    sr = 0.0
    b = lo
    while b < nblk and blk_seg[b] == s:
        sp += blk_part[2 * b]
        sr += blk_part[2 * b + 1]
        b += 1
    seg_scal[2 * s] = lamb_trust(sp, sr, lr, clamp)


@_elements_kernel(lambda T: (_TABLES_T,) + (T[::1],) * 3)
def _lamb_apply_kernel(param, update, seg_scal, e, s):
    u = widen(update[e])
    ct = type(u)
    param[e] = widen(param[e]) + ct(seg_scal[2 * s]) * u


def _lamb_step_cuda(param, grad, exp_avg, exp_avg_sq, update, layout, steps, seg_scal, blk_part, hyper):
    """LAMB over a flat arena (You et al. 2019); see the CPU twin ``_lamb_step_cpu`` for
    the meaning of every argument and the module docstring for the four launches."""
    blk_start, blk_seg, active = layout.blk_start, layout.blk_seg, layout.active
    lr, beta1, beta2, omb1, omw, b2, omb2, eps, wd, sign, clamp, bias_correction, adapt, lerp_small = hyper
    if active.size == 0:
        return
    t = _ctype(param.dtype)
    adapt = bool(adapt)
    _launch_segments(_lamb_segments_kernel, layout, steps, seg_scal, float(beta1), float(beta2), bool(bias_correction))
    nblk = blk_start.size
    if nblk == 0:
        return
    _lamb_blocks_kernel[max(1, min(MAX_BLOCKS, nblk)), BLOCK_TPB](*[dev(a) for a in (
        param, grad, exp_avg, exp_avg_sq, update)], _tables(layout), dev(seg_scal), dev(blk_part),
        (t(omb1), t(omw), t(b2), t(omb2), t(eps), t(wd), t(sign), t(-lr), adapt, bool(lerp_small)))
    if adapt:
        _launch_segments(_lamb_trust_kernel, layout, blk_seg, seg_scal, blk_part, float(lr), float(clamp))
        _launch_elements(_lamb_apply_kernel, layout, param, update, seg_scal)


# ---- Lion --------------------------------------------------------------------------------------
@_elements_kernel(lambda T: (_TABLES_T,) + (T[::1],) * 3 + (nbtypes.Tuple((_ct(T),) * 7),))
def _lion_elements_kernel(param, grad, exp_avg, hyper, e, s):
    neg_lr, b1, omb1, b2, omb2, decay, sign = hyper
    ct = type(neg_lr)
    g = ct(grad[e]) * sign
    m = ct(exp_avg[e])
    c = m * b1 + g * omb1
    if c > ct(0):
        u = ct(1)
    elif c < ct(0):
        u = ct(-1)
    elif c == ct(0):
        u = ct(0)
    else:
        u = c  # NaN
    param[e] = ct(param[e]) * decay + neg_lr * u
    exp_avg[e] = m * b2 + g * omb2


def _lion_step_cuda(param, grad, exp_avg, layout, steps, hyper):
    """Lion over a flat arena (Chen et al. 2023); see the CPU twin ``_lion_step_cpu``."""
    neg_lr, b1, omb1, b2, omb2, decay, sign = hyper
    _launch_segments(_count_steps_kernel, layout, steps)
    _launch_elements(_lion_elements_kernel, layout, param, grad, exp_avg,
                     _typed(param, (neg_lr, b1, omb1, b2, omb2, decay, sign)))
