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

Each op's choice (fused loops, NumPy ufunc, or hybrid) is the fastest of the three measured
at 1M float32 elements; the table is in ``perf/README.md`` ("Measurement notes",
``kernels/cpu/activation.py``). The finishing loops update the scratch buffer *in place*
(``e[i] = f(x[i], e[i])``): with separate ``e`` and ``out`` arguments that alias, LLVM's
runtime overlap check sends the loop to its scalar fallback (mish: 5.3 ms instead of 1.1).
Backward passes of softplus, silu, mish and gelu recompute the one exp they need from the
saved input (as PyTorch does) instead of keeping a second activation-sized buffer alive.
"""
import math

import numpy as np
from numba import prange

from .._jit import flat_kernel
from .. import scalar as S

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "relu_fwd", "relu_bwd", "leaky_relu_fwd", "leaky_relu_bwd", "hardtanh_fwd", "hardtanh_bwd",
    "hardsigmoid_fwd", "hardsigmoid_bwd", "hardswish_fwd", "hardswish_bwd", "softsign_fwd",
    "softsign_bwd", "sigmoid_fwd", "sigmoid_bwd", "tanh_fwd", "tanh_bwd", "silu_fwd", "silu_bwd",
    "logsigmoid_fwd", "logsigmoid_bwd", "softplus_fwd", "softplus_bwd", "mish_fwd", "mish_bwd",
    "elu_fwd", "elu_bwd", "gelu_fwd", "gelu_bwd", "gelu_tanh_fwd", "gelu_tanh_bwd",
)


# ---- helpers producing the argument of a NumPy transcendental --------------------------------
@flat_kernel
def _neg_abs(x, out):
    """out = -|x|"""
    for i in prange(out.size):
        out[i] = -abs(x[i])


@flat_kernel
def _neg_abs_scaled(x, beta, out):
    """out = -|beta * x|"""
    for i in prange(out.size):
        out[i] = -abs(beta * x[i])


@flat_kernel
def _min0_scaled(x, s, out):
    """out = min(x, 0) * s"""
    for i in prange(out.size):
        v = x[i]
        out[i] = (v if v < 0 else type(v)(0)) * s


@flat_kernel
def _neg_half_sq(x, out):
    """out = -x*x/2"""
    for i in prange(out.size):
        v = x[i]
        out[i] = -(v * v) * type(v)(0.5)


@flat_kernel
def _gelu_tanh_inner(x, out):
    for i in prange(out.size):
        out[i] = S.gelu_tanh_inner(x[i])


def _exp_neg_abs(x, out):
    """out = exp(-|x|) (in (0, 1]: never overflows)."""
    _neg_abs(x, out)
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
def _sigmoid_from_exp(x, e):
    """e = sigmoid(x) in place, from e = exp(-|x|)."""
    for i in prange(e.size):
        e[i] = S.sigmoid_from_exp(x[i], e[i])


def _sigmoid_fwd_cpu(x, out):
    _sigmoid_from_exp(x, _exp_neg_abs(x, out))


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
def _silu_from_exp(x, e):
    for i in prange(e.size):
        e[i] = S.silu_from_exp(x[i], e[i])


def _silu_fwd_cpu(x, out):
    _silu_from_exp(x, _exp_neg_abs(x, out))


@flat_kernel
def _silu_grad_from_exp(g, x, e):
    for i in prange(e.size):
        e[i] = S.silu_grad_from_exp(g[i], x[i], e[i])


def _silu_bwd_cpu(g, x, out):
    _silu_grad_from_exp(g, x, _exp_neg_abs(x, out))


@flat_kernel
def _logsigmoid_from_log1p(x, l1p):
    for i in prange(l1p.size):
        l1p[i] = S.logsigmoid_from_log1p(x[i], l1p[i])


def _logsigmoid_fwd_cpu(x, out, buf):
    """out = logsigmoid(x); buf = exp(-|x|), kept for the backward (as PyTorch's buffer)."""
    _exp_neg_abs(x, buf)
    np.log1p(buf, out=out)
    _logsigmoid_from_log1p(x, out)


@flat_kernel
def _logsigmoid_bwd_cpu(g, x, buf, out):
    for i in prange(out.size):
        out[i] = S.logsigmoid_grad_from_exp(g[i], x[i], buf[i])


# ---- softplus -------------------------------------------------------------------------------------
@flat_kernel
def _softplus_from_log1p(x, l1p, beta, threshold):
    for i in prange(l1p.size):
        v = x[i]
        l1p[i] = S.softplus_from_log1p(v, beta * v, l1p[i], beta, threshold)


def _softplus_fwd_cpu(x, beta, threshold, out):
    _neg_abs_scaled(x, beta, out)
    np.exp(out, out=out)
    np.log1p(out, out=out)
    _softplus_from_log1p(x, out, beta, threshold)


@flat_kernel
def _softplus_grad_from_exp(g, x, e, beta, threshold):
    for i in prange(e.size):
        e[i] = S.softplus_grad_from_exp(g[i], beta * x[i], e[i], threshold)


def _softplus_bwd_cpu(g, x, beta, threshold, out):
    _neg_abs_scaled(x, beta, out)
    np.exp(out, out=out)
    _softplus_grad_from_exp(g, x, out, beta, threshold)


# ---- mish ------------------------------------------------------------------------------------------
@flat_kernel
def _mish_from_exp(x, e):
    for i in prange(e.size):
        e[i] = S.mish_from_exp(x[i], e[i])


def _mish_fwd_cpu(x, out):
    _mish_from_exp(x, _exp_neg_abs(x, out))


@flat_kernel
def _mish_grad_from_exp(g, x, e):
    for i in prange(e.size):
        e[i] = S.mish_grad_from_exp(g[i], x[i], e[i])


def _mish_bwd_cpu(g, x, out):
    _mish_grad_from_exp(g, x, _exp_neg_abs(x, out))


# ---- elu / selu / celu ----------------------------------------------------------------------------
@flat_kernel
def _elu_from_expm1(x, em, alpha, scale):
    for i in prange(em.size):
        em[i] = S.elu_from_expm1(x[i], em[i], alpha, scale)


def _elu_fwd_cpu(x, alpha, scale, input_scale, out):
    """scale * (x if x > 0 else alpha * expm1(x * input_scale))"""
    _min0_scaled(x, input_scale, out)
    np.expm1(out, out=out)
    _elu_from_expm1(x, out, alpha, scale)


@flat_kernel
def _elu_bwd_cpu(g, x, y, alpha, scale, input_scale, out):
    for i in prange(out.size):
        out[i] = S.elu_grad(g[i], x[i], y[i], alpha, scale, input_scale)


# ---- gelu -----------------------------------------------------------------------------------------
@flat_kernel
def _gelu_fwd_f32(x, out):
    for i in prange(out.size):
        v = x[i]
        out[i] = S.gelu_from_erf(v, S.erf_f32(v * type(v)(S.SQRT1_2)))


@flat_kernel
def _gelu_fwd_f64(x, out):
    for i in prange(out.size):
        v = x[i]
        out[i] = S.gelu_from_erf(v, math.erf(v * S.SQRT1_2))


def _gelu_fwd_cpu(x, out):
    (_gelu_fwd_f32 if x.dtype == np.float32 else _gelu_fwd_f64)(x, out)


@flat_kernel
def _gelu_grad_f32(g, x, pdf_e):
    for i in prange(pdf_e.size):
        v = x[i]
        pdf_e[i] = S.gelu_grad_from_erf_exp(g[i], v, S.erf_f32(v * type(v)(S.SQRT1_2)), pdf_e[i])


@flat_kernel
def _gelu_grad_f64(g, x, pdf_e):
    for i in prange(pdf_e.size):
        v = x[i]
        pdf_e[i] = S.gelu_grad_from_erf_exp(g[i], v, math.erf(v * S.SQRT1_2), pdf_e[i])


def _gelu_bwd_cpu(g, x, out):
    _neg_half_sq(x, out)
    np.exp(out, out=out)
    (_gelu_grad_f32 if x.dtype == np.float32 else _gelu_grad_f64)(g, x, out)


@flat_kernel
def _gelu_tanh_from_tanh(x, th):
    for i in prange(th.size):
        th[i] = S.gelu_tanh_from_tanh(x[i], th[i])


def _gelu_tanh_fwd_cpu(x, out):
    _gelu_tanh_inner(x, out)
    np.tanh(out, out=out)
    _gelu_tanh_from_tanh(x, out)


@flat_kernel
def _gelu_tanh_grad_from_tanh(g, x, th):
    for i in prange(th.size):
        th[i] = S.gelu_tanh_grad_from_tanh(g[i], x[i], th[i])


def _gelu_tanh_bwd_cpu(g, x, out):
    _gelu_tanh_inner(x, out)
    np.tanh(out, out=out)
    _gelu_tanh_grad_from_tanh(g, x, out)
