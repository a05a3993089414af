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


# ---- the pointwise passes, by code ---------------------------------------------------------------
# NOTE: the passes of one form are built by a factory whose closure holds the op's code, an int:
# numba prunes the other branches of the pass's table before typing (the code is a constant),
# so each pass compiles as fast as one written out; the code is appended to the pass's
# qualified name, so each has its own cache files. The measurements and the reason are in
# ``fused.py``'s note.
(_RELU, _SIGMOID, _TANH, _HARDSIGMOID, _HARDSWISH, _SOFTSIGN, _SILU, _LOGSIGMOID, _MISH, _GELU_F32,
 _GELU_F64, _GELU_TANH, _NEG_ABS, _NEG_HALF_SQ, _GELU_TANH_INNER) = range(15)


def _value_pass(code):
    """The pass ``out = op(x)`` of ``code``: the ops computed in one pass and the arguments of
    the NumPy passes from ``x`` alone; the others from ``e``, the NumPy pass's transcendental
    already in ``out`` (``exp(-|x|)``, ``log1p`` of it for logsigmoid, ``tanh`` of the inner
    polynomial for gelu_tanh), updated in place (see the module docstring)."""
    def value_pass(x, out):
        for i in prange(out.size):
            v = x[i]
            if code == _RELU:
                out[i] = S.relu(v)
            elif code == _HARDSIGMOID:
                out[i] = S.hardsigmoid(v)
            elif code == _HARDSWISH:
                out[i] = S.hardswish(v)
            elif code == _SOFTSIGN:
                out[i] = S.softsign(v)
            elif code == _GELU_F32:
                out[i] = S.gelu_from_erf(v, S.erf_f32(v * type(v)(S.SQRT1_2)))
            elif code == _GELU_F64:
                out[i] = S.gelu_from_erf(v, math.erf(v * S.SQRT1_2))
            elif code == _NEG_ABS:
                out[i] = -abs(v)
            elif code == _NEG_HALF_SQ:
                out[i] = -(v * v) * type(v)(0.5)
            elif code == _GELU_TANH_INNER:
                out[i] = S.gelu_tanh_inner(v)
            elif code == _SIGMOID:
                out[i] = S.sigmoid_from_exp(v, out[i])
            elif code == _SILU:
                out[i] = S.silu_from_exp(v, out[i])
            elif code == _LOGSIGMOID:
                out[i] = S.logsigmoid_from_log1p(v, out[i])
            elif code == _MISH:
                out[i] = S.mish_from_exp(v, out[i])
            else:   # _GELU_TANH
                out[i] = S.gelu_tanh_from_tanh(v, out[i])
    value_pass.__qualname__ += f"_{code}"   # its own cache files (the NOTE above)
    return flat_kernel(value_pass)


def _grad_pass(code):
    """The pass ``out = g * op'`` of ``code`` from the saved input ``x`` (relu, sigmoid and
    tanh: the output ``y``, passed in its place) and, for silu, mish, gelu and gelu_tanh, ``e``,
    the NumPy pass's transcendental already in ``out`` (``exp(-|x|)``, ``exp(-x^2/2)`` for
    gelu, ``tanh`` of the inner polynomial for gelu_tanh), updated in place."""
    def grad_pass(g, x, out):
        for i in prange(out.size):
            v = x[i]
            if code == _RELU:
                out[i] = S.relu_grad(g[i], v)
            elif code == _SIGMOID:
                out[i] = S.sigmoid_grad(g[i], v)
            elif code == _TANH:
                out[i] = S.tanh_grad(g[i], v)
            elif code == _HARDSIGMOID:
                out[i] = S.hardsigmoid_grad(g[i], v)
            elif code == _HARDSWISH:
                out[i] = S.hardswish_grad(g[i], v)
            elif code == _SOFTSIGN:
                out[i] = S.softsign_grad(g[i], v)
            elif code == _SILU:
                out[i] = S.silu_grad_from_exp(g[i], v, out[i])
            elif code == _MISH:
                out[i] = S.mish_grad_from_exp(g[i], v, out[i])
            elif code == _GELU_F32:
                out[i] = S.gelu_grad_from_erf_exp(g[i], v, S.erf_f32(v * type(v)(S.SQRT1_2)), out[i])
            elif code == _GELU_F64:
                out[i] = S.gelu_grad_from_erf_exp(g[i], v, math.erf(v * S.SQRT1_2), out[i])
            else:   # _GELU_TANH
                out[i] = S.gelu_tanh_grad_from_tanh(g[i], v, out[i])
    grad_pass.__qualname__ += f"_{code}"   # its own cache files (the NOTE above)
    return flat_kernel(grad_pass)


# ---- helpers producing the argument of a NumPy transcendental --------------------------------
_neg_abs = _value_pass(_NEG_ABS)                # out = -|x|
_neg_half_sq = _value_pass(_NEG_HALF_SQ)        # out = -x*x/2
_gelu_tanh_inner = _value_pass(_GELU_TANH_INNER)


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


def _exp_neg_abs(x, out):
    """out = exp(-|x|) (in (0, 1]: never overflows)."""
    _neg_abs(x, out)
    np.exp(out, out=out)
    return out


def _from_exp_fwd(code):
    """The entry point ``(x, out)`` of an op finished from ``exp(-|x|)``: the exp pass into
    ``out``, then ``code``'s value pass in place."""
    finish = _value_pass(code)

    def fwd(x, out):
        finish(x, _exp_neg_abs(x, out))
    return fwd


def _from_exp_bwd(code):
    """The entry point ``(g, x, out)`` of a backward finished from ``exp(-|x|)``."""
    finish = _grad_pass(code)

    def bwd(g, x, out):
        finish(g, x, _exp_neg_abs(x, out))
    return bwd


# ---- relu / leaky_relu / hardtanh (relu6) ------------------------------------------------------
_relu_fwd_cpu = _value_pass(_RELU)
_relu_bwd = _grad_pass(_RELU)


def _relu_bwd_cpu(g, y, out):
    _relu_bwd(g, y, out)


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


# ---- hardsigmoid / hardswish / softsign: one pass each way -------------------------------------
_hardsigmoid_fwd_cpu = _value_pass(_HARDSIGMOID)
_hardswish_fwd_cpu = _value_pass(_HARDSWISH)
_softsign_fwd_cpu = _value_pass(_SOFTSIGN)
_hardsigmoid_bwd_cpu = _grad_pass(_HARDSIGMOID)
_hardswish_bwd_cpu = _grad_pass(_HARDSWISH)
_softsign_bwd_cpu = _grad_pass(_SOFTSIGN)


# ---- sigmoid / tanh / silu / logsigmoid -----------------------------------------------------------
_sigmoid_fwd_cpu = _from_exp_fwd(_SIGMOID)
_sigmoid_bwd = _grad_pass(_SIGMOID)
_tanh_bwd = _grad_pass(_TANH)


def _sigmoid_bwd_cpu(g, y, out):
    _sigmoid_bwd(g, y, out)


def _tanh_fwd_cpu(x, out):
    np.tanh(x, out=out)


def _tanh_bwd_cpu(g, y, out):
    _tanh_bwd(g, y, out)


_silu_fwd_cpu = _from_exp_fwd(_SILU)
_silu_bwd_cpu = _from_exp_bwd(_SILU)


_logsigmoid_from_log1p = _value_pass(_LOGSIGMOID)


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
_mish_fwd_cpu = _from_exp_fwd(_MISH)
_mish_bwd_cpu = _from_exp_bwd(_MISH)


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
_gelu_fwd_f32 = _value_pass(_GELU_F32)
_gelu_fwd_f64 = _value_pass(_GELU_F64)


def _gelu_fwd_cpu(x, out):
    (_gelu_fwd_f32 if x.dtype == np.float32 else _gelu_fwd_f64)(x, out)


_gelu_grad_f32 = _grad_pass(_GELU_F32)   # pdf_e = gelu'(x) g in place, from pdf_e = exp(-x^2/2)
_gelu_grad_f64 = _grad_pass(_GELU_F64)


def _gelu_bwd_cpu(g, x, out):
    _neg_half_sq(x, out)
    np.exp(out, out=out)
    (_gelu_grad_f32 if x.dtype == np.float32 else _gelu_grad_f64)(g, x, out)


_gelu_tanh_from_tanh = _value_pass(_GELU_TANH)
_gelu_tanh_grad_from_tanh = _grad_pass(_GELU_TANH)


def _gelu_tanh_fwd_cpu(x, out):
    _gelu_tanh_inner(x, out)
    np.tanh(out, out=out)
    _gelu_tanh_from_tanh(x, out)


def _gelu_tanh_bwd_cpu(g, x, out):
    _gelu_tanh_inner(x, out)
    np.tanh(out, out=out)
    _gelu_tanh_grad_from_tanh(g, x, out)
