"""Fused LAMB and Lion updates over a flat arena (one kernel call per bucket).

The arena is the optimizer's (``numbagrad/optim/optimizer.py``; the contract of blocks,
segments, ``active`` and ``steps`` is the one of ``kernels/cpu/optim.py``): ``param``,
``grad`` and the state buffers are 1-D arrays holding a group's parameters back to
back, cut into blocks ``blk_start[b]:blk_end[b]`` inside parameter ``blk_seg[b]``
(blocks sorted by start, each parameter's blocks consecutive). Inactive parameters (no
gradient this step) are left untouched, step counts included.

Neither optimizer is in ``torch.optim``; the oracle is a float64 NumPy per-tensor
reference of the papers' formulas (``tests/optim/test_optim_lamb_lion.py``). The
float32 arithmetic follows how the usual PyTorch implementations would round (timm's
``Lamb``, lucidrains' ``lion-pytorch``), with ``fma`` where torch's ``add(x, y,
alpha=a)`` and ``lerp`` round once (see the docstring of ``kernels/cpu/optim.py``).

LAMB needs a reduction per parameter (the trust ratio ``phi(||p||) / ||r||``), done in
the kernel and deterministic:

1. ``prange`` over blocks: update the moments, write the update ``r`` into the scratch
   arena ``update`` and the block's partial sums of ``p*p`` and ``r*r`` (float64, see
   ``_sumsq``) into ``blk_part[2b]``, ``blk_part[2b+1]``;
2. serially, per parameter, sum its blocks' partials in block order and turn them into
   ``-lr * trust`` (``seg_scal[2s]``);
3. ``prange`` over blocks: ``p += (-lr * trust) * r``.

So the result does not depend on the number of threads (nor on serial vs parallel
twin). When the group does not adapt (``adapt`` false: ``weight_decay == 0`` and not
``always_adapt``), step 1 applies ``p -= lr * r`` directly and 2 and 3 are skipped;
``update`` and ``blk_part`` are then not touched.
"""
import math

import numpy as np
from numba import prange

from .._jit import flat_kernel, scalar_helper
from ._fma import fma
from .clip import sumsq as _sumsq  # the float64 sum of squares (reduction_jit's flags)
from .optim import arena_block, axpy, bias_corrections, block_of, count_steps, moments, step_count

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("lamb_step", "lion_step")

__all__ = ["_lamb_step_cpu", "_lion_step_cpu"]


@scalar_helper
def lamb_corrections(beta1, beta2, st, bias_correction):
    """LAMB's per-parameter scalars at step ``st`` (the CUDA kernels call it too):
    ``(1/bc1, sqrt(bc2))``, or ``(1, 1)`` without ``bias_correction``."""
    if bias_correction:
        bc1, bc2 = bias_corrections(beta1, beta2, st)
        return 1.0 / bc1, bc2 ** 0.5
    return 1.0, 1.0


@scalar_helper
def lamb_trust(sp, sr, lr, clamp):
    """``-lr * trust`` of a parameter from its sums of squares ``sp = ||p||^2`` and
    ``sr = ||r||^2`` (the CUDA kernels call it too): ``trust = min(||p||, clamp) / ||r||``,
    1 when either norm is 0."""
    wn = math.sqrt(sp)
    rn = math.sqrt(sr)
    if wn > clamp:
        wn = clamp
    trust = 1.0
    if wn != 0.0 and rn != 0.0:
        trust = wn / rn
    return -(lr * trust)


@scalar_helper
def _lamb_elem(p, gr, m, v, sign, mom, rbc1, bc2s, dec):
    """One element of LAMB's first pass: the new moments and the update ``r``. Loop-
    invariant choices are selects (``lerp_small``: ``torch.lerp``'s branch, see
    ``optim.lerp``; ``use_wd``), so the loop vectorises. ``mom``: ``(omb1, omw, b2, omb2,
    lerp_small)`` (``optim.moments``' scalars); ``dec``: ``(eps, wd, use_wd)``."""
    omb1, omw, b2, omb2, lerp_small = mom
    eps, wd, use_wd = dec
    g = gr * sign
    m, v = moments(g, m, v, omb1, omw, b2, omb2, lerp_small)
    r = m * rbc1 / (np.sqrt(v) / bc2s + eps)
    rw = fma(p, wd, r)
    return m, v, (rw if use_wd else r)


@flat_kernel
def _lamb_step_cpu(param, grad, exp_avg, exp_avg_sq, update, layout, steps, seg_scal, blk_part, hyper):
    """LAMB (You et al. 2019) over a flat arena; see the module docstring for the passes.

    Per element, in the parameter dtype (float64 sums of squares)::

        g = sign * grad
        m = lerp(m, g, omb1)                     # beta1*m + (1-beta1)*g
        v = fma(omb2*g, g, b2*v)                 # beta2*v + (1-beta2)*g*g
        r = m * (1/bc1) / (sqrt(v) / sqrt(bc2) + eps)
        r = fma(p, wd, r)                        # + weight_decay * p (when wd != 0)
        p = fma(r, -(lr * trust), p)

    ``trust = min(||p||, clamp) / ||r||`` per parameter (``||p||`` before the update;
    1 when either norm is 0; ``clamp = inf`` disables the clamp), or 1 when not
    ``adapt``. ``bc1 = 1 - beta1**step``, ``bc2 = 1 - beta2**step`` from the float32
    per-parameter ``steps`` (incremented here for active parameters), or 1 without
    ``bias_correction``. Scalars typed like ``param``: ``omb1 = 1-beta1`` (the lerp
    weight), ``omw = 1 - omb1`` (the other ``torch.lerp`` branch, chosen by
    ``lerp_small``), ``b2``, ``omb2 = 1-beta2``, ``eps``, ``wd``, ``sign`` (-1 when
    maximizing). float64: ``lr``, ``beta1``, ``beta2``, ``clamp``. ``seg_scal`` (2 per
    parameter, the parameter dtype) holds ``[1/bc1, sqrt(bc2)]`` during the first pass,
    then ``[-lr*trust, sqrt(bc2)]``; ``blk_part`` (float64, 2 per block) the per-block
    sums of squares of ``p`` and ``r``; ``update`` (like ``param``) the update ``r``.
    """
    blk_start, blk_end, blk_seg, active, _ = layout
    lr, beta1, beta2, omb1, omw, b2, omb2, eps, wd, sign, clamp, bias_correction, adapt, lerp_small = hyper
    nseg = active.size
    nblk = blk_start.size
    for s in range(nseg):
        if active[s]:
            rbc1, bc2s = lamb_corrections(beta1, beta2, step_count(steps, s), bias_correction)
            seg_scal[2 * s] = rbc1
            seg_scal[2 * s + 1] = bc2s
    neg_lr = type(eps)(-lr)
    use_wd = wd != 0
    mom = (omb1, omw, b2, omb2, lerp_small)
    dec = (eps, wd, use_wd)
    for b in prange(nblk):
        # zero-based loops over slices vectorise (see kernels/cpu/optim.py)
        s, lo, hi, pp, gg = arena_block(param, grad, layout, b)
        if s < 0:
            continue
        rbc1 = seg_scal[2 * s]
        bc2s = seg_scal[2 * s + 1]
        mm = exp_avg[lo:hi]
        vv = exp_avg_sq[lo:hi]
        uu = update[lo:hi]
        # Two loops, not a branch per element: LLVM vectorises each (a store to one
        # array or the other inside one loop kept it scalar).
        if adapt:
            for i in range(hi - lo):
                m, v, r = _lamb_elem(pp[i], gg[i], mm[i], vv[i], sign, mom, rbc1, bc2s, dec)
                mm[i] = m
                vv[i] = v
                uu[i] = r
        else:
            for i in range(hi - lo):
                p = pp[i]
                m, v, r = _lamb_elem(p, gg[i], mm[i], vv[i], sign, mom, rbc1, bc2s, dec)
                mm[i] = m
                vv[i] = v
                pp[i] = fma(r, neg_lr, p)
        if adapt:
            blk_part[2 * b] = _sumsq(pp)
            blk_part[2 * b + 1] = _sumsq(uu)
    if not adapt:
        return
    # per parameter: its blocks' partials in block order, then the trust ratio
    acc = np.zeros(2 * nseg)
    for b in range(nblk):
        s = blk_seg[b]
        if active[s]:
            acc[2 * s] += blk_part[2 * b]
            acc[2 * s + 1] += blk_part[2 * b + 1]
    for s in range(nseg):
        if active[s]:
            seg_scal[2 * s] = lamb_trust(acc[2 * s], acc[2 * s + 1], lr, clamp)
    for b in prange(nblk):
        s, lo, hi = block_of(blk_start, blk_end, blk_seg, active, b)
        if s >= 0:
            axpy(param[lo:hi], update[lo:hi], seg_scal[2 * s])


@flat_kernel
def _lion_step_cpu(param, grad, exp_avg, layout, steps, hyper):
    """Lion (Chen et al. 2023) over a flat arena. Per element, in the parameter dtype::

        g = sign * grad
        c = fma(g, omb1, b1*m)                   # beta1*m + (1-beta1)*g
        p = fma(sgn(c), neg_lr, p*decay)         # decay = 1 - lr*weight_decay
        m = fma(g, omb2, b2*m)                   # beta2*m + (1-beta2)*g

    ``sgn`` is -1/0/+1 and NaN for NaN (a NaN gradient shows in the parameter).
    ``steps`` (float32) counts the steps of each parameter (bookkeeping, as Adam's).
    Scalars typed like ``param``: ``neg_lr = -lr``, ``b1``, ``omb1 = 1-beta1``, ``b2``,
    ``omb2 = 1-beta2``, ``decay``, ``sign`` (-1 when maximizing).
    """
    blk_start, _, _, active, _ = layout
    neg_lr, b1, omb1, b2, omb2, decay, sign = hyper
    count_steps(active, steps)
    one = type(decay)(1)
    for b in prange(blk_start.size):
        s, lo, hi, pp, gg = arena_block(param, grad, layout, b)
        if s < 0:
            continue
        mm = exp_avg[lo:hi]
        for i in range(hi - lo):
            g = gg[i] * sign
            m = mm[i]
            c = fma(g, omb1, m * b1)
            if c > 0:
                u = one
            elif c < 0:
                u = -one
            elif c == 0:
                u = c - c  # +0
            else:
                u = c      # NaN
            pp[i] = fma(u, neg_lr, pp[i] * decay)
            mm[i] = fma(g, omb2, m * b2)
