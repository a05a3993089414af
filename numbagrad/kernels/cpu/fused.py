"""CPU kernels of the fused bias + activation that follows a linear layer's GEMM.

Contract (the same for every backend). ``y`` is the GEMM's C-contiguous ``(M, N)``
output, ``b`` the ``(N,)`` bias (zeros when the layer has none), all one floating
dtype (float32 or float64; the op computes float16 in float32):

* ``_bias_fwd_cpu(y, b)``: ``y += b`` (no activation);
* ``_bias_{relu,tanh,sigmoid}_fwd_cpu(y, b)``: ``y = act(y + b)`` in place; the backward
  reads the output;
* ``_bias_{gelu,gelu_tanh}_fwd_cpu(y, b, out)``: ``y += b`` (the pre-activation ``z``,
  kept for the backward) and ``out = act(z)``;
* ``_bias_silu_fwd_cpu(y, b, out)``: ``out = silu(z)`` and ``y = sigmoid(z)``: the
  derivative is ``s + out (1 - s)``, so the backward needs no exp;
* ``_bias_bwd_cpu(g, part)``: bias-gradient partial sums of ``g`` only;
* ``_bias_<act>_bwd_cpu(g, s, gz, part)`` (silu: ``(g, s, out, gz, part)``):
  ``gz = g * act'(.)`` from the saved ``s`` (the output for relu/tanh/sigmoid, the
  pre-activation ``z`` for gelu/gelu_tanh, the sigmoid for silu), and in the same pass the bias-gradient partial column sums ``part[c, :] += gz[r, :]`` over
  the rows ``r`` of chunk ``c`` (``part`` is ``(P, N)``, zeroed by the caller, chunk
  ``c`` the rows ``[c*ceil(M/P), (c+1)*ceil(M/P))``); the caller sums ``part`` over P.

Chunked partial sums let the backward loop run in parallel over chunks (a prange over
rows cannot reduce into one shared ``(N,)`` row) while the inner loop over ``N`` stays
unit-stride and vectorised. Every loop is a :func:`flat_kernel` (serial twin below
``config.PARALLEL_THRESHOLD`` elements).

Transcendentals follow ``kernels/cpu/activation.py``: pip's llvmlite has no SVML, so
``math.exp``/``math.tanh`` inside a loop is a scalar libm call, and the fused forms
that need one are hybrids: an @njit pass writes the transcendental's argument into a
buffer, one in-place NumPy ufunc pass (SIMD) evaluates it, and a second @njit pass
finishes. sigmoid and silu use ``1 / (1 + exp(-z))``: ``exp(-z)`` may overflow to inf
for z < -88 (float32), which gives the correct limit 0 (-0 for silu) without needing
the sign of z after the exp pass, so no scratch buffer is needed. gelu (erf) stays one
loop: float32 uses the vectorisable ``scalar.erf_f32``, float64 ``math.erf``.
The measured figures are in ``numbagrad/ops/fused.py``.
"""
import math

import numpy as np
from numba import prange

from .._jit import flat_kernel, scalar_helper
from .. import scalar as S

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "bias_fwd", "bias_relu_fwd", "bias_tanh_fwd", "bias_sigmoid_fwd", "bias_silu_fwd",
    "bias_gelu_fwd", "bias_gelu_tanh_fwd", "bias_bwd", "bias_relu_bwd", "bias_tanh_bwd",
    "bias_sigmoid_bwd", "bias_silu_bwd", "bias_gelu_bwd", "bias_gelu_tanh_bwd",
)


@scalar_helper
def _chunk(m, p):
    """Rows per chunk when m rows are split into p chunks."""
    return (m + p - 1) // p


# ---- forward ------------------------------------------------------------------------------------------
@flat_kernel
def _bias_fwd_cpu(y, b):
    """y += b (row broadcast)."""
    m, n = y.shape
    for r in prange(m):
        for j in range(n):
            y[r, j] += b[j]


@flat_kernel
def _bias_relu_fwd_cpu(y, b):
    """y = relu(y + b)."""
    m, n = y.shape
    for r in prange(m):
        for j in range(n):
            y[r, j] = S.relu(y[r, j] + b[j])


@flat_kernel
def _bias_add_neg(y, b, scale):
    """y = (y + b) * scale (the argument of the following ufunc pass)."""
    m, n = y.shape
    for r in prange(m):
        for j in range(n):
            y[r, j] = (y[r, j] + b[j]) * scale


@flat_kernel
def _recip_one_plus(e):
    """e = 1 / (1 + e)."""
    m, n = e.shape
    one = e.dtype.type(1)
    for r in prange(m):
        for j in range(n):
            e[r, j] = one / (one + e[r, j])


def _bias_tanh_fwd_cpu(y, b):
    """y = tanh(y + b): the bias pass, then NumPy's SIMD tanh in place."""
    _bias_fwd_cpu(y, b)
    np.tanh(y, out=y)


def _bias_sigmoid_fwd_cpu(y, b):
    """y = 1 / (1 + exp(-(y + b))) (exp may overflow to inf: the limit 0 is right)."""
    _bias_add_neg(y, b, y.dtype.type(-1))
    with np.errstate(over="ignore"):
        np.exp(y, out=y)
    _recip_one_plus(y)


@flat_kernel
def _bias_neg_into(y, b, out):
    """y += b; out = -y."""
    m, n = y.shape
    for r in prange(m):
        for j in range(n):
            v = y[r, j] + b[j]
            y[r, j] = v
            out[r, j] = -v


@flat_kernel
def _silu_from_expneg(z, e):
    """s = 1 / (1 + e) with e = exp(-z); e = z * s (silu) and z = s (sigmoid), in place."""
    m, n = z.shape
    one = z.dtype.type(1)
    for r in prange(m):
        for j in range(n):
            s = one / (one + e[r, j])
            e[r, j] = z[r, j] * s
            z[r, j] = s


def _bias_silu_fwd_cpu(y, b, out):
    """out = silu(y + b); y = sigmoid(y + b) (kept: with the output it gives the
    derivative s + out (1 - s) without another exp)."""
    _bias_neg_into(y, b, out)
    with np.errstate(over="ignore"):
        np.exp(out, out=out)
    _silu_from_expneg(y, out)


@flat_kernel
def _bias_gelu_f32_fwd(y, b, out):
    m, n = y.shape
    for r in prange(m):
        for j in range(n):
            v = y[r, j] + b[j]
            y[r, j] = v
            out[r, j] = S.gelu_from_erf(v, S.erf_f32(v * np.float32(S.SQRT1_2)))


@flat_kernel
def _bias_gelu_f64_fwd(y, b, out):
    m, n = y.shape
    for r in prange(m):
        for j in range(n):
            v = y[r, j] + b[j]
            y[r, j] = v
            out[r, j] = S.gelu_from_erf(v, math.erf(v * S.SQRT1_2))


def _bias_gelu_fwd_cpu(y, b, out):
    """y += b; out = gelu(y) (erf form)."""
    (_bias_gelu_f32_fwd if y.dtype == np.float32 else _bias_gelu_f64_fwd)(y, b, out)


@flat_kernel
def _bias_gelu_inner(y, b, out):
    """y += b; out = sqrt(2/pi) * (y + 0.044715 y^3)."""
    m, n = y.shape
    for r in prange(m):
        for j in range(n):
            v = y[r, j] + b[j]
            y[r, j] = v
            out[r, j] = S.gelu_tanh_inner(v)


@flat_kernel
def _gelu_tanh_from_tanh2(z, th):
    m, n = z.shape
    for r in prange(m):
        for j in range(n):
            th[r, j] = S.gelu_tanh_from_tanh(z[r, j], th[r, j])


def _bias_gelu_tanh_fwd_cpu(y, b, out):
    """y += b; out = gelu_tanh(y)."""
    _bias_gelu_inner(y, b, out)
    np.tanh(out, out=out)
    _gelu_tanh_from_tanh2(y, out)


# ---- backward: g * act' and the bias-gradient partial sums in one pass ----------------------------------
@flat_kernel
def _bias_bwd_cpu(g, part):
    """part[c, :] = sum of g over the rows of chunk c."""
    m, n = g.shape
    p = part.shape[0]
    rows = _chunk(m, p)
    for c in prange(p):
        for r in range(c * rows, min(m, (c + 1) * rows)):
            for j in range(n):
                part[c, j] += g[r, j]


@flat_kernel
def _bias_relu_bwd_cpu(g, y, gz, part):
    m, n = g.shape
    p = part.shape[0]
    rows = _chunk(m, p)
    for c in prange(p):
        for r in range(c * rows, min(m, (c + 1) * rows)):
            for j in range(n):
                v = S.relu_grad(g[r, j], y[r, j])
                gz[r, j] = v
                part[c, j] += v


@flat_kernel
def _bias_tanh_bwd_cpu(g, y, gz, part):
    m, n = g.shape
    p = part.shape[0]
    rows = _chunk(m, p)
    for c in prange(p):
        for r in range(c * rows, min(m, (c + 1) * rows)):
            for j in range(n):
                v = S.tanh_grad(g[r, j], y[r, j])
                gz[r, j] = v
                part[c, j] += v


@flat_kernel
def _bias_sigmoid_bwd_cpu(g, y, gz, part):
    m, n = g.shape
    p = part.shape[0]
    rows = _chunk(m, p)
    for c in prange(p):
        for r in range(c * rows, min(m, (c + 1) * rows)):
            for j in range(n):
                v = S.sigmoid_grad(g[r, j], y[r, j])
                gz[r, j] = v
                part[c, j] += v


@flat_kernel
def _bias_silu_bwd_cpu(g, s, y, gz, part):
    """gz = g * (s + y (1 - s)) from s = sigmoid(z) and y = silu(z) = z s (no exp);
    partial sums."""
    m, n = g.shape
    p = part.shape[0]
    rows = _chunk(m, p)
    one = s.dtype.type(1)
    for c in prange(p):
        for r in range(c * rows, min(m, (c + 1) * rows)):
            for j in range(n):
                sv = s[r, j]
                v = g[r, j] * (sv + y[r, j] * (one - sv))
                gz[r, j] = v
                part[c, j] += v


@flat_kernel
def _neg_half_sq2(z, out):
    m, n = z.shape
    half = z.dtype.type(0.5)
    for r in prange(m):
        for j in range(n):
            v = z[r, j]
            out[r, j] = -(v * v) * half


@flat_kernel
def _gelu_grad_f32_part(g, z, e, part):
    m, n = g.shape
    p = part.shape[0]
    rows = _chunk(m, p)
    for c in prange(p):
        for r in range(c * rows, min(m, (c + 1) * rows)):
            for j in range(n):
                v = z[r, j]
                d = S.gelu_grad_from_erf_exp(g[r, j], v, S.erf_f32(v * np.float32(S.SQRT1_2)), e[r, j])
                e[r, j] = d
                part[c, j] += d


@flat_kernel
def _gelu_grad_f64_part(g, z, e, part):
    m, n = g.shape
    p = part.shape[0]
    rows = _chunk(m, p)
    for c in prange(p):
        for r in range(c * rows, min(m, (c + 1) * rows)):
            for j in range(n):
                v = z[r, j]
                d = S.gelu_grad_from_erf_exp(g[r, j], v, math.erf(v * S.SQRT1_2), e[r, j])
                e[r, j] = d
                part[c, j] += d


def _bias_gelu_bwd_cpu(g, z, gz, part):
    _neg_half_sq2(z, gz)
    np.exp(gz, out=gz)
    (_gelu_grad_f32_part if z.dtype == np.float32 else _gelu_grad_f64_part)(g, z, gz, part)


@flat_kernel
def _gelu_inner2(z, out):
    m, n = z.shape
    for r in prange(m):
        for j in range(n):
            out[r, j] = S.gelu_tanh_inner(z[r, j])


@flat_kernel
def _gelu_tanh_grad_part(g, z, th, part):
    m, n = g.shape
    p = part.shape[0]
    rows = _chunk(m, p)
    for c in prange(p):
        for r in range(c * rows, min(m, (c + 1) * rows)):
            for j in range(n):
                d = S.gelu_tanh_grad_from_tanh(g[r, j], z[r, j], th[r, j])
                th[r, j] = d
                part[c, j] += d


def _bias_gelu_tanh_bwd_cpu(g, z, gz, part):
    _gelu_inner2(z, gz)
    np.tanh(gz, out=gz)
    _gelu_tanh_grad_part(g, z, gz, part)
