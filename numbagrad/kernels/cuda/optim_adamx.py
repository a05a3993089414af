"""CUDA twins of ``kernels/cpu/optim_adamx.py``: fused Adamax, RAdam and NAdam over a
flat arena.

The contract is the CPU kernels' (and that of ``kernels/cuda/optim.py``, whose
docstring describes the arena, blocks, ``active`` flags and float16 handling): each
launcher takes the CPU kernel's arguments in the same order. Per algorithm, a
per-segment kernel (one thread per parameter) bumps the float32 ``steps`` of active
parameters and computes their scalars in float64 into ``seg_scal`` (NAdam also updates
its float32 ``mu_product``); then an element kernel (grid-stride over the arena, each
element finds its block by binary search: ``optim._segment_of``) applies the update. Both
are made by ``optim.py``'s factories from the work on one parameter or element.
Kernels on the default stream run in order, so the element kernel sees the new
scalars. float16 arenas compute in float32 (``_ct``) and store back to half. The
per-parameter scalar math of RAdam and NAdam is the CPU module's (``radam_scalars``,
``nadam_mu``), written once for both devices.
"""
import math

from numba import float32, float64
from numba import types as nbtypes

from ..cpu.optim_adamx import nadam_mu, radam_scalars
from .optim import (_BOOL, _F32, _F64, _TABLES_T, _U8, _adam_elem, _bump, _ct, _decayed_grad,
                    _elements_kernel, _launch_elements, _launch_segments, _lerp, _maximum, _segments_kernel, _typed)

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("adamax_step", "radam_step", "nadam_step")

__all__ = ["_adamax_step_cuda", "_radam_step_cuda", "_nadam_step_cuda"]


# ---- Adamax -------------------------------------------------------------------------------------
@_segments_kernel(lambda T: (_U8[::1], _F32[::1], T[::1], _F64, _F64))
def _adamax_segments_kernel(steps, seg_scal, lr, beta1, s):
    seg_scal[2 * s] = -(lr / (1.0 - beta1 ** _bump(steps, s)))


@_elements_kernel(lambda T: (_TABLES_T,) + (T[::1],) * 5 + (nbtypes.Tuple((_ct(T),) * 6 + (_BOOL,)),))
def _adamax_elements_kernel(param, grad, exp_avg, exp_inf, seg_scal, hyper, e, s):
    omb1, omw, b2, eps, wd, sign, lerp_small = hyper
    ct = type(omb1)
    nclr = ct(seg_scal[2 * s])
    p, g = _decayed_grad(param, grad, e, wd, sign)
    m = _lerp(ct(exp_avg[e]), g, omb1, omw, lerp_small)
    u = _maximum(ct(exp_inf[e]) * b2, abs(g) + eps)
    exp_avg[e] = m
    exp_inf[e] = u
    param[e] = p + nclr * m / u


def _adamax_step_cuda(param, grad, exp_avg, exp_inf, layout, steps, seg_scal, hyper):
    """Adamax over a flat arena; see ``_adamax_step_cpu`` for every argument."""
    lr, beta1, omb1, omw, b2, eps, wd, sign, lerp_small = hyper
    _launch_segments(_adamax_segments_kernel, layout, steps, seg_scal, float(lr), float(beta1))
    _launch_elements(_adamax_elements_kernel, layout, param, grad, exp_avg, exp_inf, seg_scal,
                     _typed(param, (omb1, omw, b2, eps, wd, sign), (lerp_small,)))


# ---- RAdam --------------------------------------------------------------------------------------
@_segments_kernel(lambda T: (_U8[::1], _F32[::1], _ct(T)[::1], _F64, _F64))
def _radam_segments_kernel(steps, seg_scal, beta1, beta2, s):
    bc1, bc2s, rect = radam_scalars(beta1, beta2, _bump(steps, s))
    seg_scal[3 * s] = bc1
    seg_scal[3 * s + 1] = bc2s
    seg_scal[3 * s + 2] = rect


@_elements_kernel(lambda T: (_TABLES_T,) + (T[::1],) * 4 + (_ct(T)[::1],)
                  + (nbtypes.Tuple((_ct(T),) * 9 + (_BOOL,)),))
def _radam_elements_kernel(param, grad, exp_avg, exp_avg_sq, seg_scal, hyper, e, s):
    lr_t, omb1, omw, b2, omb2, eps, wd, decay, sign, lerp_small = hyper
    ct = type(omb1)
    bc1 = ct(seg_scal[3 * s])
    bc2s = ct(seg_scal[3 * s + 1])
    rect = ct(seg_scal[3 * s + 2])
    p, _, m, v = _adam_elem(param, grad, exp_avg, exp_avg_sq, e, wd, sign, (omb1, omw, b2, omb2, lerp_small))
    upd = m / bc1 * lr_t
    if rect > 0:
        upd = upd * (ct(1.0) / (ct(math.sqrt(v)) + eps) * bc2s) * rect
    param[e] = p * decay - upd


def _radam_step_cuda(param, grad, exp_avg, exp_avg_sq, layout, steps, seg_scal, hyper):
    """RAdam over a flat arena; see ``_radam_step_cpu`` for every argument (``seg_scal``
    holds 3 scalars per parameter, in the compute type)."""
    beta1, beta2, lr_t, omb1, omw, b2, omb2, eps, wd, decay, sign, lerp_small = hyper
    _launch_segments(_radam_segments_kernel, layout, steps, seg_scal, float(beta1), float(beta2))
    _launch_elements(_radam_elements_kernel, layout, param, grad, exp_avg, exp_avg_sq, seg_scal,
                     _typed(param, (lr_t, omb1, omw, b2, omb2, eps, wd, decay, sign), (lerp_small,)))


# ---- NAdam --------------------------------------------------------------------------------------
@_segments_kernel(lambda T: (_U8[::1], _F32[::1], _F32[::1], _ct(T)[::1], _F64, _F64, _F64, _F64))
def _nadam_segments_kernel(steps, mu_product, seg_scal, lr, beta1, beta2, momentum_decay, s):
    st = _bump(steps, s)
    mu = nadam_mu(beta1, momentum_decay, st)
    mu_next = nadam_mu(beta1, momentum_decay, st + 1.0)
    mu_product[s] = float32(mu_product[s] * float32(mu))
    mp = float64(mu_product[s])
    seg_scal[3 * s] = 1.0 - beta2 ** st
    seg_scal[3 * s + 1] = -lr * (1.0 - mu) / (1.0 - mp)
    seg_scal[3 * s + 2] = (-lr * mu_next) / (1.0 - mp * mu_next)


@_elements_kernel(lambda T: (_TABLES_T,) + (T[::1],) * 4 + (_ct(T)[::1],)
                  + (nbtypes.Tuple((_ct(T),) * 8 + (_BOOL,)),))
def _nadam_elements_kernel(param, grad, exp_avg, exp_avg_sq, seg_scal, hyper, e, s):
    omb1, omw, b2, omb2, eps, wd, decay, sign, lerp_small = hyper
    ct = type(omb1)
    bc2 = ct(seg_scal[3 * s])
    c1 = ct(seg_scal[3 * s + 1])
    c2 = ct(seg_scal[3 * s + 2])
    p, g, m, v = _adam_elem(param, grad, exp_avg, exp_avg_sq, e, wd, sign, (omb1, omw, b2, omb2, lerp_small))
    d = ct(math.sqrt(v / bc2)) + eps
    p = p * decay
    p = p + c1 * g / d
    param[e] = p + c2 * m / d


def _nadam_step_cuda(param, grad, exp_avg, exp_avg_sq, layout, steps, mu_product, seg_scal, hyper):
    """NAdam over a flat arena; see ``_nadam_step_cpu`` for every argument
    (``mu_product``: float32 per parameter; ``seg_scal``: 3 scalars per parameter, in
    the compute type)."""
    lr, beta1, beta2, momentum_decay, omb1, omw, b2, omb2, eps, wd, decay, sign, lerp_small = hyper
    _launch_segments(_nadam_segments_kernel, layout, steps, mu_product, seg_scal, float(lr), float(beta1),
                     float(beta2), float(momentum_decay))
    _launch_elements(_nadam_elements_kernel, layout, param, grad, exp_avg, exp_avg_sq, seg_scal,
                     _typed(param, (omb1, omw, b2, omb2, eps, wd, decay, sign), (lerp_small,)))
