"""Fused Adamax, RAdam and NAdam: one kernel call updates every parameter of a group.

The flat arena, its blocks and the ``active`` / ``steps`` contract are those of
``numbagrad/kernels/cpu/optim.py`` (read its docstring first): ``param``, ``grad`` and
the state buffers are 1-D arrays holding a group's parameters back to back, the
parallel twin runs ``prange`` over blocks ``blk_start[b]:blk_end[b]`` (each inside
parameter ``blk_seg[b]``), inactive parameters (no gradient this step) are left
untouched, counters included.

Each kernel first runs a serial loop over parameters that bumps ``steps`` (float32, as
torch's ``state['step']``) and computes the per-parameter scalars in float64, as
PyTorch does on the host with Python floats, then stores them in ``seg_scal`` rounded
to the parameter dtype (where torch hands them to a float32 tensor op). The moments,
``torch.lerp`` and the step/bias-correction helpers are ``optim.py``'s. The element
loops follow PyTorch's single-tensor implementations op by op, rounding where torch
rounds (how it was measured: ``perf/README.md``, "Optimizer kernels"):

* ``add(x, y, alpha=a)`` is ``fma(y, a, x)``; ``lerp`` is ``fma(w, e - s, s)``
  (``fma(w - 1, e - s, e)`` for ``w >= 0.5``); ``addcmul(x, y, z, value=c)`` is
  ``fma(c*y, z, x)``; ``addcdiv(x, y, z, value=c)`` is ``x + (c*y)/z`` rounded three
  times (as in ``optim.py``).
* ``tensor / scalar`` is a true division by the scalar rounded to float32 (not a
  multiplication by its reciprocal); ``scalar / tensor`` (``Tensor.__rtruediv__``) is
  ``reciprocal(tensor) * scalar``, two roundings; ``tensor * scalar`` multiplies by the
  float32 scalar; ``abs(g) + eps`` rounds once.
* a 0-d float32 tensor ``*=`` a Python float multiplies by the float32 scalar
  (NAdam's ``mu_product``).
* torch's float32 ``sqrt`` is MKL's and differs from the correctly rounded one in the
  last bit for a CPU-dependent share of inputs; that residue is accepted (see
  ``optimkit.TOL``).
"""
import math

import numpy as np
from numba import prange

from .._jit import flat_kernel, scalar_helper
from .optim import adam_elem, arena_block, bias_corrections, decayed_grad, lerp, maximum, step_count

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("adamax_step", "radam_step", "nadam_step")


# ---- Adamax ------------------------------------------------------------------------------------
@flat_kernel
def _adamax_step_cpu(param, grad, exp_avg, exp_inf, layout, steps, seg_scal, hyper):
    """Adamax (``torch.optim.adamax._single_tensor_adamax``) over a flat arena.

    ``lr`` and ``beta1`` are float64 (the bias correction ``clr = lr / (1 - beta1**step)``
    is computed per parameter into ``seg_scal[2*s] = -clr``); the others come typed like
    ``param``: ``omb1 = 1 - beta1`` (the lerp weight), ``omw = 1 - omb1``, ``b2 = beta2``,
    ``eps``, ``wd`` (L2 weight decay added to the gradient), ``sign`` (-1 when
    maximizing). ``lerp_small`` selects ``torch.lerp``'s branch (weight < 0.5).

    Per element: ``g = sign*grad + wd*p``, ``m = lerp(m, g, 1-beta1)``,
    ``u = max(beta2*u, |g| + eps)`` (NaN propagates, as ``torch.maximum``),
    ``p = p + (-clr*m)/u``.
    """
    blk_start, _, _, active, _ = layout
    lr, beta1, omb1, omw, b2, eps, wd, sign, lerp_small = hyper
    for s in range(active.size):
        if active[s]:
            seg_scal[2 * s] = -(lr / (1.0 - beta1 ** step_count(steps, s)))
    for b in prange(blk_start.size):
        s, lo, hi, pp, gg = arena_block(param, grad, layout, b)
        if s < 0:
            continue
        nclr = seg_scal[2 * s]
        mm = exp_avg[lo:hi]
        uu = exp_inf[lo:hi]
        for i in range(hi - lo):
            p, g = decayed_grad(pp, gg, i, wd, sign)
            m = lerp(mm[i], g, omb1, omw, lerp_small)
            u = maximum(uu[i] * b2, abs(g) + eps)
            mm[i] = m
            uu[i] = u
            pp[i] = p + nclr * m / u


# ---- RAdam -------------------------------------------------------------------------------------
@scalar_helper
def radam_scalars(beta1, beta2, st):
    """RAdam's per-parameter scalars at step ``st`` (the CUDA kernels call it too):
    ``(bc1, sqrt(bc2), r)``, ``r`` the rectification, 0 while ``rho_t <= 5``."""
    rho_inf = 2.0 / (1.0 - beta2) - 1.0
    bc1, bc2 = bias_corrections(beta1, beta2, st)
    rho_t = rho_inf - 2.0 * st * (beta2 ** st) / bc2
    rect = 0.0
    if rho_t > 5.0:
        rect = math.sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
    return bc1, math.sqrt(bc2), rect


@flat_kernel
def _radam_step_cpu(param, grad, exp_avg, exp_avg_sq, layout, steps, seg_scal, hyper):
    """RAdam (``torch.optim.radam._single_tensor_radam``) over a flat arena.

    ``beta1``, ``beta2`` are float64: per parameter, from its own step ``t``, the
    pre-pass computes ``bc1 = 1 - beta1**t``, ``bc2 = 1 - beta2**t``,
    ``rho_inf = 2/(1-beta2) - 1``, ``rho_t = rho_inf - 2 t beta2**t / bc2`` and, when
    ``rho_t > 5``, the rectification ``r = sqrt((rho_t-4)(rho_t-2)rho_inf /
    ((rho_inf-4)(rho_inf-2)rho_t))``; ``seg_scal[3*s:3*s+3] = [bc1, sqrt(bc2), r]``
    (``r = 0`` marks the un-rectified steps). The others come typed like ``param``:
    ``lr_t = lr``, ``omb1 = 1-beta1``, ``omw = 1-omb1``, ``b2 = beta2``, ``omb2 =
    1-beta2``, ``eps``, ``wd`` (L2 decay added to the gradient; 0 when decoupled),
    ``decay`` (``1 - lr*weight_decay`` when decoupled, else 1), ``sign``.

    Per element: ``m = lerp(m, g, 1-beta1)``, ``v = beta2*v + (1-beta2)*g*g``, then
    ``p -= ((m/bc1)*lr) * (sqrt(bc2) / (sqrt(v) + eps)) * r`` when rectified, else
    ``p -= (m/bc1)*lr``.
    """
    blk_start, _, _, active, _ = layout
    beta1, beta2, lr_t, omb1, omw, b2, omb2, eps, wd, decay, sign, lerp_small = hyper
    mom = (omb1, omw, b2, omb2, lerp_small)
    for s in range(active.size):
        if active[s]:
            bc1, bc2s, rect = radam_scalars(beta1, beta2, step_count(steps, s))
            seg_scal[3 * s] = bc1
            seg_scal[3 * s + 1] = bc2s
            seg_scal[3 * s + 2] = rect
    one = type(lr_t)(1.0)  # 1 in the parameter dtype (torch's reciprocal)
    for b in prange(blk_start.size):
        s, lo, hi, pp, gg = arena_block(param, grad, layout, b)
        if s < 0:
            continue
        bc1 = seg_scal[3 * s]
        bc2s = seg_scal[3 * s + 1]
        rect = seg_scal[3 * s + 2]
        rectified = rect > 0
        mm = exp_avg[lo:hi]
        vv = exp_avg_sq[lo:hi]
        for i in range(hi - lo):
            p, _, m, v = adam_elem(pp, gg, mm, vv, i, wd, sign, mom)
            upd = m / bc1 * lr_t
            ada = one / (np.sqrt(v) + eps) * bc2s
            pp[i] = p * decay - (upd * ada * rect if rectified else upd)


# ---- NAdam -------------------------------------------------------------------------------------
@scalar_helper
def nadam_mu(beta1, momentum_decay, t):
    """NAdam's momentum schedule ``beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))`` (the
    CUDA kernels call it too)."""
    return beta1 * (1.0 - 0.5 * (0.96 ** (t * momentum_decay)))


@flat_kernel
def _nadam_step_cpu(param, grad, exp_avg, exp_avg_sq, layout, steps, mu_product, seg_scal, hyper):
    """NAdam (``torch.optim.nadam._single_tensor_nadam``) over a flat arena.

    ``lr``, ``beta1``, ``beta2``, ``momentum_decay`` are float64. Per parameter, from
    its own step ``t``: ``mu = beta1*(1 - 0.5*0.96**(t*momentum_decay))``, ``mu_next``
    the same at ``t+1``, ``mu_product *= mu`` (``mu_product``: float32 per parameter,
    torch's 0-d float32 ``state['mu_product']``, rounded as torch rounds it), and
    ``seg_scal[3*s:3*s+3] = [1 - beta2**t, -lr(1-mu)/(1-mu_product),
    -lr*mu_next/(1 - mu_product*mu_next)]``. The others come typed like ``param``, as
    for RAdam.

    Per element: ``m = lerp(m, g, 1-beta1)``, ``v = beta2*v + (1-beta2)*g*g``,
    ``d = sqrt(v/bc2) + eps``, ``p += (c1*g)/d``, ``p += (c2*m)/d``.
    """
    blk_start, _, _, active, _ = layout
    lr, beta1, beta2, momentum_decay, omb1, omw, b2, omb2, eps, wd, decay, sign, lerp_small = hyper
    mom = (omb1, omw, b2, omb2, lerp_small)
    for s in range(active.size):
        if active[s]:
            st = step_count(steps, s)
            mu = nadam_mu(beta1, momentum_decay, st)
            mu_next = nadam_mu(beta1, momentum_decay, st + 1.0)
            mu_product[s] = mu_product[s] * np.float32(mu)
            mp = np.float64(mu_product[s])
            seg_scal[3 * s] = 1.0 - beta2 ** st
            seg_scal[3 * s + 1] = -lr * (1.0 - mu) / (1.0 - mp)
            seg_scal[3 * s + 2] = (-lr * mu_next) / (1.0 - mp * mu_next)
    for b in prange(blk_start.size):
        s, lo, hi, pp, gg = arena_block(param, grad, layout, b)
        if s < 0:
            continue
        bc2 = seg_scal[3 * s]
        c1 = seg_scal[3 * s + 1]
        c2 = seg_scal[3 * s + 2]
        mm = exp_avg[lo:hi]
        vv = exp_avg_sq[lo:hi]
        for i in range(hi - lo):
            p, g, m, v = adam_elem(pp, gg, mm, vv, i, wd, sign, mom)
            d = np.sqrt(v / bc2) + eps
            p = p * decay
            p = p + c1 * g / d
            pp[i] = p + c2 * m / d
