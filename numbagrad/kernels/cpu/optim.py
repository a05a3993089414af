"""Fused optimizer updates: one kernel call updates every parameter of a group.

The optimizer keeps each parameter group in flat arenas (see
``numbagrad/optim/optimizer.py``): ``param``, ``grad`` and each state buffer are one
1-D array holding all parameters back to back. The arena is cut into *blocks*
(``blk_start[b]:blk_end[b]``, each inside one parameter ``blk_seg[b]``, at most a
few thousand elements), and the parallel twin runs ``prange`` over blocks. Per
parameter (*segment*) ``s`` the kernels read ``active[s]`` (it had a gradient this
step; inactive parameters are skipped, as PyTorch skips parameters whose ``.grad``
is None) and keep their own per-parameter counters (Adam's ``steps``, SGD's
``has_buf``), so the result is exactly PyTorch's per-tensor loop.

Arithmetic follows PyTorch's single-tensor implementations operation by operation,
with scalars rounded to the parameter dtype where PyTorch rounds them (scalar
arguments of float32 tensor ops are applied in float32); only the bias corrections are
computed in float64, as PyTorch does on the host. Where PyTorch's vectorised CPU ops
round once for a multiply-add, the kernels call ``fma`` (measured against torch
2.13 on AVX-512: ``add(x, y, alpha=a)`` is ``fma(y, a, x)``, ``lerp`` is
``fma(w, e - s, s)`` (``fma(w - 1, e - s, e)`` for ``w >= 0.5``), ``addcmul(x, y, z,
value=c)`` is ``fma(c*y, z, x)``, ``addcdiv`` rounds ``x + (c*y)/z`` three times). Then
SGD follows torch bit for bit, and Adam up to torch's ``sqrt`` (MKL's, within 1 ulp
but not correctly rounded, so ~0.6% of the denominators differ in the last bit).
"""
import numpy as np
from numba import prange

from .._jit import flat_kernel
from ._fma import fma


@flat_kernel
def _adam_step_cpu(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq,
                   blk_start, blk_end, blk_seg, active, steps, seg_scal,
                   lr, beta1, beta2, omb1, omw, b2, omb2, eps, wd, decay, sign,
                   amsgrad, lerp_small):
    """Adam / AdamW (``torch.optim.adam._single_tensor_adam``) over a flat arena.

    Per-element scalars come typed like ``param`` (float32 for float32 arenas):
    ``omb1 = 1-beta1`` (the lerp weight), ``omw = 1 - omb1``, ``b2 = beta2``,
    ``omb2 = 1-beta2``, ``eps``, ``wd`` (L2 weight decay added to the gradient; 0 for
    AdamW), ``decay`` (``1 - lr*weight_decay`` for AdamW, else 1) and ``sign`` (-1
    when maximizing).
    ``lr``, ``beta1``, ``beta2`` are float64 for the bias corrections, which are
    computed per parameter from ``steps`` (float32, incremented here for active
    parameters) into ``seg_scal`` (``[-lr/bc1, sqrt(bc2)]`` per parameter, rounded to
    the parameter dtype). ``max_exp_avg_sq`` is only touched when ``amsgrad``.
    ``lerp_small`` selects the branch of ``torch.lerp`` (weight < 0.5; the other one
    uses ``omw = 1 - omb1``).
    """
    nseg = active.size
    for s in range(nseg):
        if active[s]:
            steps[s] += 1.0
            st = np.float64(steps[s])
            bc1 = 1.0 - beta1 ** st
            bc2 = 1.0 - beta2 ** st
            seg_scal[2 * s] = -(lr / bc1)
            seg_scal[2 * s + 1] = bc2 ** 0.5
    for b in prange(blk_start.size):
        s = blk_seg[b]
        if not active[s]:
            continue
        nss = seg_scal[2 * s]
        bc2s = seg_scal[2 * s + 1]
        lo = blk_start[b]
        hi = blk_end[b]
        # Zero-based loops over slices: indexing with ``range(lo, hi)`` makes numba emit
        # a negative-index wraparound per access, which blocks SIMD (4x slower).
        pp = param[lo:hi]
        gg = grad[lo:hi]
        mm = exp_avg[lo:hi]
        vv = exp_avg_sq[lo:hi]
        if amsgrad:
            xx = max_exp_avg_sq[lo:hi]
            for i in range(hi - lo):
                p = pp[i]
                g = fma(p, wd, gg[i] * sign)
                m = mm[i]
                if lerp_small:
                    m = fma(omb1, g - m, m)
                else:
                    m = fma(-omw, g - m, g)
                v = fma(omb2 * g, g, vv[i] * b2)
                mm[i] = m
                vv[i] = v
                vm = xx[i]
                if v > vm or v != v:
                    vm = v
                xx[i] = vm
                pp[i] = p * decay + nss * m / (np.sqrt(vm) / bc2s + eps)
        else:
            for i in range(hi - lo):
                p = pp[i]
                g = fma(p, wd, gg[i] * sign)
                m = mm[i]
                if lerp_small:
                    m = fma(omb1, g - m, m)
                else:
                    m = fma(-omw, g - m, g)
                v = fma(omb2 * g, g, vv[i] * b2)
                mm[i] = m
                vv[i] = v
                pp[i] = p * decay + nss * m / (np.sqrt(v) / bc2s + eps)


@flat_kernel
def _sgd_step_cpu(param, grad, buf, blk_start, blk_end, blk_seg, active, has_buf,
                  neg_lr, momentum, omd, wd, sign, use_momentum, nesterov):
    """SGD with momentum / dampening / nesterov / weight decay / maximize
    (``torch.optim.sgd._single_tensor_sgd``) over a flat arena.

    Scalars are typed like ``param``: ``neg_lr = -lr``, ``omd = 1 - dampening``,
    ``sign`` is -1 when maximizing. The first step of a parameter copies its gradient
    into the momentum buffer (``has_buf[s] == 0``), later steps do
    ``buf = momentum*buf + (1-dampening)*g``. ``buf`` is only touched when
    ``use_momentum``.
    """
    for b in prange(blk_start.size):
        s = blk_seg[b]
        if not active[s]:
            continue
        lo = blk_start[b]
        hi = blk_end[b]
        pp = param[lo:hi]
        gg = grad[lo:hi]
        if use_momentum:
            bf = buf[lo:hi]
            first = has_buf[s] == 0
            for i in range(hi - lo):
                g = fma(pp[i], wd, gg[i] * sign)
                if first:
                    bb = g
                else:
                    bb = fma(g, omd, bf[i] * momentum)
                bf[i] = bb
                if nesterov:
                    g = fma(bb, momentum, g)
                else:
                    g = bb
                pp[i] = fma(g, neg_lr, pp[i])
        else:
            for i in range(hi - lo):
                pp[i] = fma(fma(pp[i], wd, gg[i] * sign), neg_lr, pp[i])
    if use_momentum:
        for s in range(active.size):
            if active[s]:
                has_buf[s] = 1
