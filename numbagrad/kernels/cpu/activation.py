"""CPU kernels of the activation functions.

Contract (the same for every backend): ``_<op>_fwd_cpu(x, *params, out)`` and
``_<op>_bwd_cpu(g, *saved, *params, out)`` on 1-D C-contiguous arrays of one floating
dtype (float32 or float64), ``params`` NumPy scalars of that dtype, ``out`` preallocated.
The scalar math lives in :mod:`numbagrad.kernels.scalar`.

Piecewise-algebraic ops (relu, leaky_relu, hardtanh, hardsigmoid, hardswish, softsign)
and every backward pass are single fused @njit loops (:func:`flat_kernel`: serial below
``config.PARALLEL_THRESHOLD`` elements, ``prange`` twin above).

Transcendentals: pip's llvmlite has no SVML, so ``math.exp``/``math.tanh`` in an @njit
loop is a scalar libm call, while NumPy's own float32/float64 ufuncs run AVX-512 SIMD.
Ops that need exp/tanh/log1p/expm1 are therefore *hybrid*: one NumPy ufunc pass (in
place, into ``out`` or one scratch buffer) computes the transcendental of a cheap
argument (``-|x|``, ``min(x, 0)``, the gelu-tanh inner polynomial) and fused @njit loops
do the rest. ``erf`` has no NumPy ufunc: float32 uses a vectorisable rational fit
(``scalar.erf_f32``), float64 ``math.erf``.

Measured on this machine (2 cores shared with other jobs, Xeon with AVX-512; 1M-element
float32, serial twins, best of 30, ms; +-10 % run to run):

==============  ===============  ======================  =====================================
op              @njit loop,      pure NumPy ufuncs       chosen (fwd / bwd)
                libm math.*      (with temporaries)
==============  ===============  ======================  =====================================
relu            -                -                       0.29 / 0.36 fused loops
hardswish       -                -                       0.30 / 0.43 fused loops
sigmoid         2.97             5.43                    1.19 hybrid / 0.36 fused g*y*(1-y)
                                                         (NumPy's g*y*(1-y): 1.03)
tanh            13.3             0.30 (np.tanh)          0.31 np.tanh / 0.36 fused g*(1-y*y)
                                                         (NumPy's g*(1-y*y): 0.90)
silu            ~3 (as sigmoid)  -                       1.18 / 1.23 hybrid
logsigmoid      -                -                       1.45 / 0.57 (exp(-|x|) kept)
softplus        11.4             2.55                    1.61 / 1.32 hybrid
elu             5.06 (exp - 1)   4.76                    0.86 hybrid (np.expm1) / 0.57 fused
gelu (erf)      13.1 (math.erf)  - (no erf ufunc)        1.00 erf_f32 in-loop / 2.0 hybrid
gelu (tanh)     20.6             -                       0.86 / 1.00 hybrid (np.tanh)
mish            37.7             2.8 (softplus, tanh)    1.12 / 1.41 hybrid, exp-only formula
==============  ===============  ======================  =====================================

A NumPy exp over 1M float32 takes ~0.45 ms and a fused algebraic loop ~0.3-0.4 ms, so a
hybrid costs about ``n_ufunc_passes * 0.45 + n_loops * 0.35`` ms. The finishing loops
update the scratch buffer *in place* (``e[i] = f(x[i], e[i])``): with separate ``e`` and
``out`` arguments that alias, LLVM's runtime overlap check sends the loop to its scalar
fallback (mish ran 5.3 ms instead of 1.1). Backward passes of softplus, silu, mish and
gelu recompute the one exp they need from the saved input (as PyTorch does) instead of
keeping a second activation-sized buffer alive.
"""
import math

import numpy as np
from numba import prange

from .._jit import flat_kernel
from .. import scalar as S


# ---- helpers producing the argument of a NumPy transcendental --------------------------------
@flat_kernel
def _neg_abs_cpu(x, out):
    """out = -|x|"""
    for i in prange(out.size):
        out[i] = -abs(x[i])


@flat_kernel
def _neg_abs_scaled_cpu(x, beta, out):
    """out = -|beta * x|"""
    for i in prange(out.size):
        out[i] = -abs(beta * x[i])


@flat_kernel
def _min0_scaled_cpu(x, s, out):
    """out = min(x, 0) * s"""
    for i in prange(out.size):
        v = x[i]
        out[i] = (v if v < 0 else type(v)(0)) * s


@flat_kernel
def _neg_half_sq_cpu(x, out):
    """out = -x*x/2"""
    for i in prange(out.size):
        v = x[i]
        out[i] = -(v * v) * type(v)(0.5)


@flat_kernel
def _gelu_tanh_inner_cpu(x, out):
    for i in prange(out.size):
        out[i] = S.gelu_tanh_inner(x[i])


def _exp_neg_abs(x, out):
    """out = exp(-|x|) (in (0, 1]: never overflows)."""
    _neg_abs_cpu(x, out)
    np.exp(out, out=out)
    return out


# ---- relu / leaky_relu / hardtanh (relu6) ------------------------------------------------------
@flat_kernel
def _relu_fwd_cpu(x, out):
    for i in prange(out.size):
        out[i] = S.relu(x[i])


@flat_kernel
def _relu_bwd_cpu(g, y, out):
    for i in prange(out.size):
        out[i] = S.relu_grad(g[i], y[i])


@flat_kernel
def _leaky_relu_fwd_cpu(x, slope, out):
    for i in prange(out.size):
        out[i] = S.leaky_relu(x[i], slope)


@flat_kernel
def _leaky_relu_bwd_cpu(g, x, slope, out):
    for i in prange(out.size):
        out[i] = S.leaky_relu_grad(g[i], x[i], slope)


@flat_kernel
def _hardtanh_fwd_cpu(x, lo, hi, out):
    for i in prange(out.size):
        out[i] = S.hardtanh(x[i], lo, hi)


@flat_kernel
def _hardtanh_bwd_cpu(g, x, lo, hi, out):
    for i in prange(out.size):
        out[i] = S.hardtanh_grad(g[i], x[i], lo, hi)


@flat_kernel
def _hardsigmoid_fwd_cpu(x, out):
    for i in prange(out.size):
        out[i] = S.hardsigmoid(x[i])


@flat_kernel
def _hardsigmoid_bwd_cpu(g, x, out):
    for i in prange(out.size):
        out[i] = S.hardsigmoid_grad(g[i], x[i])


@flat_kernel
def _hardswish_fwd_cpu(x, out):
    for i in prange(out.size):
        out[i] = S.hardswish(x[i])


@flat_kernel
def _hardswish_bwd_cpu(g, x, out):
    for i in prange(out.size):
        out[i] = S.hardswish_grad(g[i], x[i])


@flat_kernel
def _softsign_fwd_cpu(x, out):
    for i in prange(out.size):
        out[i] = S.softsign(x[i])


@flat_kernel
def _softsign_bwd_cpu(g, x, out):
    for i in prange(out.size):
        out[i] = S.softsign_grad(g[i], x[i])


# ---- sigmoid / tanh / silu / logsigmoid -----------------------------------------------------------
@flat_kernel
def _sigmoid_from_exp_cpu(x, e):
    """e = sigmoid(x) in place, from e = exp(-|x|)."""
    for i in prange(e.size):
        e[i] = S.sigmoid_from_exp(x[i], e[i])


def _sigmoid_fwd_cpu(x, out):
    _sigmoid_from_exp_cpu(x, _exp_neg_abs(x, out))


@flat_kernel
def _sigmoid_bwd_cpu(g, y, out):
    for i in prange(out.size):
        out[i] = S.sigmoid_grad(g[i], y[i])


def _tanh_fwd_cpu(x, out):
    np.tanh(x, out=out)


@flat_kernel
def _tanh_bwd_cpu(g, y, out):
    for i in prange(out.size):
        out[i] = S.tanh_grad(g[i], y[i])


@flat_kernel
def _silu_from_exp_cpu(x, e):
    for i in prange(e.size):
        e[i] = S.silu_from_exp(x[i], e[i])


def _silu_fwd_cpu(x, out):
    _silu_from_exp_cpu(x, _exp_neg_abs(x, out))


@flat_kernel
def _silu_grad_from_exp_cpu(g, x, e):
    for i in prange(e.size):
        e[i] = S.silu_grad_from_exp(g[i], x[i], e[i])


def _silu_bwd_cpu(g, x, out):
    _silu_grad_from_exp_cpu(g, x, _exp_neg_abs(x, out))


@flat_kernel
def _logsigmoid_from_log1p_cpu(x, l1p):
    for i in prange(l1p.size):
        l1p[i] = S.logsigmoid_from_log1p(x[i], l1p[i])


def _logsigmoid_fwd_cpu(x, out, buf):
    """out = logsigmoid(x); buf = exp(-|x|), kept for the backward (as PyTorch's buffer)."""
    _exp_neg_abs(x, buf)
    np.log1p(buf, out=out)
    _logsigmoid_from_log1p_cpu(x, out)


@flat_kernel
def _logsigmoid_bwd_cpu(g, x, buf, out):
    for i in prange(out.size):
        out[i] = S.logsigmoid_grad_from_exp(g[i], x[i], buf[i])


# ---- softplus -------------------------------------------------------------------------------------
@flat_kernel
def _softplus_from_log1p_cpu(x, l1p, beta, threshold):
    for i in prange(l1p.size):
        v = x[i]
        l1p[i] = S.softplus_from_log1p(v, beta * v, l1p[i], beta, threshold)


def _softplus_fwd_cpu(x, beta, threshold, out):
    _neg_abs_scaled_cpu(x, beta, out)
    np.exp(out, out=out)
    np.log1p(out, out=out)
    _softplus_from_log1p_cpu(x, out, beta, threshold)


@flat_kernel
def _softplus_grad_from_exp_cpu(g, x, e, beta, threshold):
    for i in prange(e.size):
        e[i] = S.softplus_grad_from_exp(g[i], beta * x[i], e[i], threshold)


def _softplus_bwd_cpu(g, x, beta, threshold, out):
    _neg_abs_scaled_cpu(x, beta, out)
    np.exp(out, out=out)
    _softplus_grad_from_exp_cpu(g, x, out, beta, threshold)


# ---- mish ------------------------------------------------------------------------------------------
@flat_kernel
def _mish_from_exp_cpu(x, e):
    for i in prange(e.size):
        e[i] = S.mish_from_exp(x[i], e[i])


def _mish_fwd_cpu(x, out):
    _mish_from_exp_cpu(x, _exp_neg_abs(x, out))


@flat_kernel
def _mish_grad_from_exp_cpu(g, x, e):
    for i in prange(e.size):
        e[i] = S.mish_grad_from_exp(g[i], x[i], e[i])


def _mish_bwd_cpu(g, x, out):
    _mish_grad_from_exp_cpu(g, x, _exp_neg_abs(x, out))


# ---- elu / selu / celu ----------------------------------------------------------------------------
@flat_kernel
def _elu_from_expm1_cpu(x, em, alpha, scale):
    for i in prange(em.size):
        em[i] = S.elu_from_expm1(x[i], em[i], alpha, scale)


def _elu_fwd_cpu(x, alpha, scale, input_scale, out):
    """scale * (x if x > 0 else alpha * expm1(x * input_scale))"""
    _min0_scaled_cpu(x, input_scale, out)
    np.expm1(out, out=out)
    _elu_from_expm1_cpu(x, out, alpha, scale)


@flat_kernel
def _elu_bwd_cpu(g, x, y, alpha, scale, input_scale, out):
    for i in prange(out.size):
        out[i] = S.elu_grad(g[i], x[i], y[i], alpha, scale, input_scale)


# ---- gelu -----------------------------------------------------------------------------------------
@flat_kernel
def _gelu_fwd_f32_cpu(x, out):
    for i in prange(out.size):
        v = x[i]
        out[i] = S.gelu_from_erf(v, S.erf_f32(v * type(v)(S.SQRT1_2)))


@flat_kernel
def _gelu_fwd_f64_cpu(x, out):
    for i in prange(out.size):
        v = x[i]
        out[i] = S.gelu_from_erf(v, math.erf(v * S.SQRT1_2))


def _gelu_fwd_cpu(x, out):
    (_gelu_fwd_f32_cpu if x.dtype == np.float32 else _gelu_fwd_f64_cpu)(x, out)


@flat_kernel
def _gelu_grad_f32_cpu(g, x, pdf_e):
    for i in prange(pdf_e.size):
        v = x[i]
        pdf_e[i] = S.gelu_grad_from_erf_exp(g[i], v, S.erf_f32(v * type(v)(S.SQRT1_2)), pdf_e[i])


@flat_kernel
def _gelu_grad_f64_cpu(g, x, pdf_e):
    for i in prange(pdf_e.size):
        v = x[i]
        pdf_e[i] = S.gelu_grad_from_erf_exp(g[i], v, math.erf(v * S.SQRT1_2), pdf_e[i])


def _gelu_bwd_cpu(g, x, out):
    _neg_half_sq_cpu(x, out)
    np.exp(out, out=out)
    (_gelu_grad_f32_cpu if x.dtype == np.float32 else _gelu_grad_f64_cpu)(g, x, out)


@flat_kernel
def _gelu_tanh_from_tanh_cpu(x, th):
    for i in prange(th.size):
        th[i] = S.gelu_tanh_from_tanh(x[i], th[i])


def _gelu_tanh_fwd_cpu(x, out):
    _gelu_tanh_inner_cpu(x, out)
    np.tanh(out, out=out)
    _gelu_tanh_from_tanh_cpu(x, out)


@flat_kernel
def _gelu_tanh_grad_from_tanh_cpu(g, x, th):
    for i in prange(th.size):
        th[i] = S.gelu_tanh_grad_from_tanh(g[i], x[i], th[i])


def _gelu_tanh_bwd_cpu(g, x, out):
    _gelu_tanh_inner_cpu(x, out)
    np.tanh(out, out=out)
    _gelu_tanh_grad_from_tanh_cpu(g, x, out)
