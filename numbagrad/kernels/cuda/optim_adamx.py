"""CUDA twins of ``kernels/cpu/optim_adamx.py``: fused Adamax, RAdam and NAdam over a
flat arena.

The contract is the CPU kernels' (and that of ``kernels/cuda/optim.py``, whose
docstring describes the arena, blocks, ``active`` flags and float16 handling): each
launcher takes the CPU kernel's arguments in the same order. Per algorithm, a
per-segment kernel (one thread per parameter) bumps the float32 ``steps`` of active
parameters and computes their scalars in float64 into ``seg_scal`` (NAdam also updates
its float32 ``mu_product``); then an element kernel (grid-stride over the arena, each
element finds its block by binary search: ``optim._segment_of``) applies the update.
Kernels on the default stream run in order, so the element kernel sees the new
scalars. float16 arenas compute in float32 (``_ct``) and store back to half.
"""
import math

from numba import cuda, float32, float64
from numba import types as nbtypes

from ._launch import cuda_kernel, device_fn, launch
from .optim import (_BOOL, _F32, _F64, _TABLES_T, _U8, _adam_elem, _bias_corrections, _bump, _ct, _ctype, _l2_grad,
                    _lerp, _maximum, _segment_of, _tables)

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("adamax_step", "radam_step", "nadam_step")

__all__ = ["_adamax_step_cuda", "_radam_step_cuda", "_nadam_step_cuda"]


# ---- Adamax -------------------------------------------------------------------------------------
@cuda_kernel(lambda T: (_U8[::1], _F32[::1], T[::1], _F64, _F64))
def _adamax_segments_kernel(active, steps, seg_scal, lr, beta1):
    s = cuda.grid(1)
    while s < active.size:
        if active[s]:
            seg_scal[2 * s] = -(lr / (1.0 - beta1 ** _bump(steps, s)))
        s += cuda.gridsize(1)


@cuda_kernel(lambda T: (T[::1],) * 4 + (_TABLES_T,) + (T[::1],) + (nbtypes.Tuple((_ct(T),) * 6 + (_BOOL,)),))
def _adamax_elements_kernel(param, grad, exp_avg, exp_inf, tables, seg_scal, hyper):
    omb1, omw, b2, eps, wd, sign, lerp_small = hyper
    ct = type(omb1)
    n = param.size
    e = cuda.grid(1)
    while e < n:
        s = _segment_of(tables, e)
        if s >= 0:
            nclr = ct(seg_scal[2 * s])
            p = ct(param[e])
            g = _l2_grad(p, wd, ct(grad[e]) * sign)
            m = _lerp(ct(exp_avg[e]), g, omb1, omw, lerp_small)
            u = _maximum(ct(exp_inf[e]) * b2, abs(g) + eps)
            exp_avg[e] = m
            exp_inf[e] = u
            param[e] = p + nclr * m / u
        e += cuda.gridsize(1)


def _adamax_step_cuda(param, grad, exp_avg, exp_inf, layout, steps, seg_scal, hyper):
    """Adamax over a flat arena; see ``_adamax_step_cpu`` for every argument."""
    active = layout.active
    tables = _tables(layout)
    lr, beta1, omb1, omw, b2, eps, wd, sign, lerp_small = hyper
    if active.size == 0:
        return
    t = _ctype(param.dtype)
    launch(_adamax_segments_kernel, active.size, active, steps, seg_scal, float(lr), float(beta1))
    launch(_adamax_elements_kernel, param.size, param, grad, exp_avg, exp_inf, tables, seg_scal,
           (t(omb1), t(omw), t(b2), t(eps), t(wd), t(sign), bool(lerp_small)))


# ---- RAdam --------------------------------------------------------------------------------------
@cuda_kernel(lambda T: (_U8[::1], _F32[::1], _ct(T)[::1], _F64, _F64))
def _radam_segments_kernel(active, steps, seg_scal, beta1, beta2):
    s = cuda.grid(1)
    rho_inf = 2.0 / (1.0 - beta2) - 1.0
    while s < active.size:
        if active[s]:
            st = _bump(steps, s)
            bc1, bc2 = _bias_corrections(beta1, beta2, st)
            rho_t = rho_inf - 2.0 * st * (beta2 ** st) / bc2
            rect = 0.0
            if rho_t > 5.0:
                rect = math.sqrt((rho_t - 4.0) * (rho_t - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t))
            seg_scal[3 * s] = bc1
            seg_scal[3 * s + 1] = math.sqrt(bc2)
            seg_scal[3 * s + 2] = rect
        s += cuda.gridsize(1)


@cuda_kernel(lambda T: (T[::1],) * 4 + (_TABLES_T,) + (_ct(T)[::1],) + (nbtypes.Tuple((_ct(T),) * 9 + (_BOOL,)),))
def _radam_elements_kernel(param, grad, exp_avg, exp_avg_sq, tables, seg_scal, hyper):
    lr_t, omb1, omw, b2, omb2, eps, wd, decay, sign, lerp_small = hyper
    ct = type(omb1)
    n = param.size
    e = cuda.grid(1)
    while e < n:
        s = _segment_of(tables, e)
        if s >= 0:
            bc1 = ct(seg_scal[3 * s])
            bc2s = ct(seg_scal[3 * s + 1])
            rect = ct(seg_scal[3 * s + 2])
            p, _, m, v = _adam_elem(param, grad, exp_avg, exp_avg_sq, e, wd, sign, (omb1, omw, b2, omb2, lerp_small))
            upd = m / bc1 * lr_t
            if rect > 0:
                upd = upd * (ct(1.0) / (ct(math.sqrt(v)) + eps) * bc2s) * rect
            param[e] = p * decay - upd
        e += cuda.gridsize(1)


def _radam_step_cuda(param, grad, exp_avg, exp_avg_sq, layout, steps, seg_scal, hyper):
    """RAdam over a flat arena; see ``_radam_step_cpu`` for every argument (``seg_scal``
    holds 3 scalars per parameter, in the compute type)."""
    active = layout.active
    tables = _tables(layout)
    beta1, beta2, lr_t, omb1, omw, b2, omb2, eps, wd, decay, sign, lerp_small = hyper
    if active.size == 0:
        return
    t = _ctype(param.dtype)
    launch(_radam_segments_kernel, active.size, active, steps, seg_scal, float(beta1), float(beta2))
    launch(_radam_elements_kernel, param.size, param, grad, exp_avg, exp_avg_sq, tables, seg_scal,
           (t(lr_t), t(omb1), t(omw), t(b2), t(omb2), t(eps), t(wd), t(decay), t(sign), bool(lerp_small)))


# ---- NAdam --------------------------------------------------------------------------------------
@device_fn
def _mu(beta1, momentum_decay, t):
    """NAdam's momentum schedule ``beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))``."""
    return beta1 * (1.0 - 0.5 * (0.96 ** (t * momentum_decay)))


@cuda_kernel(lambda T: (_U8[::1], _F32[::1], _F32[::1], _ct(T)[::1], _F64, _F64, _F64, _F64))
def _nadam_segments_kernel(active, steps, mu_product, seg_scal, lr, beta1, beta2, momentum_decay):
    s = cuda.grid(1)
    while s < active.size:
        if active[s]:
            st = _bump(steps, s)
            mu = _mu(beta1, momentum_decay, st)
            mu_next = _mu(beta1, momentum_decay, st + 1.0)
            mu_product[s] = float32(mu_product[s] * float32(mu))
            mp = float64(mu_product[s])
            seg_scal[3 * s] = 1.0 - beta2 ** st
            seg_scal[3 * s + 1] = -lr * (1.0 - mu) / (1.0 - mp)
            seg_scal[3 * s + 2] = (-lr * mu_next) / (1.0 - mp * mu_next)
        s += cuda.gridsize(1)


@cuda_kernel(lambda T: (T[::1],) * 4 + (_TABLES_T,) + (_ct(T)[::1],) + (nbtypes.Tuple((_ct(T),) * 8 + (_BOOL,)),))
def _nadam_elements_kernel(param, grad, exp_avg, exp_avg_sq, tables, seg_scal, hyper):
    omb1, omw, b2, omb2, eps, wd, decay, sign, lerp_small = hyper
    ct = type(omb1)
    n = param.size
    e = cuda.grid(1)
    while e < n:
        s = _segment_of(tables, e)
        if s >= 0:
            bc2 = ct(seg_scal[3 * s])
            c1 = ct(seg_scal[3 * s + 1])
            c2 = ct(seg_scal[3 * s + 2])
            p, g, m, v = _adam_elem(param, grad, exp_avg, exp_avg_sq, e, wd, sign, (omb1, omw, b2, omb2, lerp_small))
            d = ct(math.sqrt(v / bc2)) + eps
            p = p * decay
            p = p + c1 * g / d
            param[e] = p + c2 * m / d
        e += cuda.gridsize(1)


def _nadam_step_cuda(param, grad, exp_avg, exp_avg_sq, layout, steps, mu_product, seg_scal, hyper):
    """NAdam over a flat arena; see ``_nadam_step_cpu`` for every argument
    (``mu_product``: float32 per parameter; ``seg_scal``: 3 scalars per parameter, in
    the compute type)."""
    active = layout.active
    tables = _tables(layout)
    lr, beta1, beta2, momentum_decay, omb1, omw, b2, omb2, eps, wd, decay, sign, lerp_small = hyper
    if active.size == 0:
        return
    t = _ctype(param.dtype)
    launch(_nadam_segments_kernel, active.size, active, steps, mu_product, seg_scal, float(lr), float(beta1),
           float(beta2), float(momentum_decay))
    launch(_nadam_elements_kernel, param.size, param, grad, exp_avg, exp_avg_sq, tables, seg_scal,
           (t(omb1), t(omw), t(b2), t(omb2), t(eps), t(wd), t(decay), t(sign), bool(lerp_small)))
