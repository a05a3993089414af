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


# ---- the passes, by code ----------------------------------------------------------------------------
# NOTE: each pass below is built per code by a factory whose closure holds the code, an int:
# numba prunes the other branches of the pass's table before typing (the code is a constant),
# so a pass compiles and runs as one written out. Numba's disk cache names its files by the
# qualified name, so each factory appends the code to it: passes of one factory sharing an index
# file could, filled by two processes at once, be saved under one data file name and load each
# other's code (the entry's key, which includes the closure's cells, would not catch it). A code
# passed as an argument kept
# the whole switch in the loop (relu's backward: 4.1 ms against 0.17 ms on 1024x1024 float32);
# the table in a helper taking the code was as fast but typed every branch (2-3x the compile
# time); a closure over the scalar function itself would not cache (a dispatcher pickles with a
# per-process id).
(_NONE, _RELU, _TANH, _SIGMOID, _SILU, _GELU_F32, _GELU_F64, _GELU_TANH, _NEG, _NEG_HALF_SQ,
 _GELU_TANH_INNER, _RECIP_ONE_PLUS) = range(12)


def _bias_pass(code):
    """The pass ``y = op(y + b)`` in place (row broadcast of ``b``): ``_NONE``, ``_RELU``,
    ``_NEG``."""
    def bias_pass(y, b):
        m, n = y.shape
        for r in prange(m):
            for j in range(n):
                v = y[r, j] + b[j]
                if code == _RELU:
                    y[r, j] = S.relu(v)
                elif code == _NEG:
                    y[r, j] = -v
                else:
                    y[r, j] = v
    bias_pass.__qualname__ += f"_{code}"   # its own cache files (the NOTE above)
    return flat_kernel(bias_pass)


def _bias_keep_pass(code):
    """The pass ``y += b; out = op(y)`` (``y`` keeps the pre-activation): ``_NEG``,
    ``_GELU_F32``, ``_GELU_F64``, ``_GELU_TANH_INNER`` (the tanh argument)."""
    def bias_keep_pass(y, b, out):
        m, n = y.shape
        for r in prange(m):
            for j in range(n):
                v = y[r, j] + b[j]
                y[r, j] = v
                if code == _NEG:
                    out[r, j] = -v
                elif code == _GELU_F32:
                    out[r, j] = S.gelu_from_erf(v, S.erf_f32(v * np.float32(S.SQRT1_2)))
                elif code == _GELU_F64:
                    out[r, j] = S.gelu_from_erf(v, math.erf(v * S.SQRT1_2))
                else:
                    out[r, j] = S.gelu_tanh_inner(v)
    bias_keep_pass.__qualname__ += f"_{code}"   # its own cache files (the NOTE above)
    return flat_kernel(bias_keep_pass)


def _map_pass(code):
    """The pass ``out = op(z, out)``: ``_RECIP_ONE_PLUS`` (``1 / (1 + out)``, in place: call
    it as ``(e, e)``), ``_GELU_TANH`` (gelu_tanh of ``z`` from ``out = tanh(inner(z))``),
    ``_NEG_HALF_SQ`` (``-z^2 / 2``), ``_GELU_TANH_INNER``."""
    def map_pass(z, out):
        m, n = z.shape
        for r in prange(m):
            for j in range(n):
                if code == _RECIP_ONE_PLUS:
                    out[r, j] = out.dtype.type(1) / (out.dtype.type(1) + out[r, j])
                elif code == _GELU_TANH:
                    out[r, j] = S.gelu_tanh_from_tanh(z[r, j], out[r, j])
                elif code == _NEG_HALF_SQ:
                    out[r, j] = -(z[r, j] * z[r, j]) * z.dtype.type(0.5)
                else:
                    out[r, j] = S.gelu_tanh_inner(z[r, j])
    map_pass.__qualname__ += f"_{code}"   # its own cache files (the NOTE above)
    return flat_kernel(map_pass)


def _grad_pass(code):
    """The backward pass ``gz = g * act'(.)`` from the saved ``s`` (the output for
    relu/tanh/sigmoid, the pre-activation ``z`` for gelu/gelu_tanh, the sigmoid for silu,
    whose output is ``y``) and what ``gz`` holds (exp(-z^2/2) for gelu, tanh of the inner
    polynomial for gelu_tanh), and in the same loop the bias-gradient partial sums
    ``part[c, :] += gz[r, :]`` over the rows of chunk ``c`` (``_NONE``: of ``g``; ``gz`` is
    not written)."""
    def grad_pass(g, s, y, gz, part):
        m, n = g.shape
        p = part.shape[0]
        rows = _chunk(m, p)
        for c in prange(p):
            for r in range(c * rows, min(m, (c + 1) * rows)):
                for j in range(n):
                    sv = s[r, j]
                    if code == _RELU:
                        v = S.relu_grad(g[r, j], sv)
                    elif code == _TANH:
                        v = S.tanh_grad(g[r, j], sv)
                    elif code == _SIGMOID:
                        v = S.sigmoid_grad(g[r, j], sv)
                    elif code == _SILU:
                        v = g[r, j] * (sv + y[r, j] * (type(sv)(1) - sv))
                    elif code == _GELU_F32:
                        v = S.gelu_grad_from_erf_exp(g[r, j], sv, S.erf_f32(sv * np.float32(S.SQRT1_2)), gz[r, j])
                    elif code == _GELU_F64:
                        v = S.gelu_grad_from_erf_exp(g[r, j], sv, math.erf(sv * S.SQRT1_2), gz[r, j])
                    elif code == _GELU_TANH:
                        v = S.gelu_tanh_grad_from_tanh(g[r, j], sv, gz[r, j])
                    else:
                        v = g[r, j]
                    if code != _NONE:
                        gz[r, j] = v
                    part[c, j] += v
    grad_pass.__qualname__ += f"_{code}"   # its own cache files (the NOTE above)
    return flat_kernel(grad_pass)


# ---- forward ------------------------------------------------------------------------------------------
_bias_fwd_cpu = _bias_pass(_NONE)           # y += b
_bias_relu_fwd_cpu = _bias_pass(_RELU)      # y = relu(y + b)
_bias_neg = _bias_pass(_NEG)                # y = -(y + b), the argument of the exp pass
_recip_one_plus = _map_pass(_RECIP_ONE_PLUS)    # e = 1 / (1 + e), called as (e, e)


def _bias_tanh_fwd_cpu(y, b):
    """y = tanh(y + b): the bias pass, then NumPy's SIMD tanh in place."""
    _bias_fwd_cpu(y, b)
    np.tanh(y, out=y)


def _bias_sigmoid_fwd_cpu(y, b):
    """y = 1 / (1 + exp(-(y + b))) (exp may overflow to inf: the limit 0 is right)."""
    _bias_neg(y, b)
    with np.errstate(over="ignore"):
        np.exp(y, out=y)
    _recip_one_plus(y, y)


_bias_neg_into = _bias_keep_pass(_NEG)      # y += b; out = -y


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


_bias_gelu_f32_fwd = _bias_keep_pass(_GELU_F32)
_bias_gelu_f64_fwd = _bias_keep_pass(_GELU_F64)


def _bias_gelu_fwd_cpu(y, b, out):
    """y += b; out = gelu(y) (erf form)."""
    (_bias_gelu_f32_fwd if y.dtype == np.float32 else _bias_gelu_f64_fwd)(y, b, out)


_bias_gelu_inner = _bias_keep_pass(_GELU_TANH_INNER)   # y += b; out = sqrt(2/pi) (y + 0.044715 y^3)
_gelu_tanh_from_tanh2 = _map_pass(_GELU_TANH)          # th = gelu_tanh(z) from th = tanh(inner(z))


def _bias_gelu_tanh_fwd_cpu(y, b, out):
    """y += b; out = gelu_tanh(y)."""
    _bias_gelu_inner(y, b, out)
    np.tanh(out, out=out)
    _gelu_tanh_from_tanh2(y, out)


# ---- backward: g * act' and the bias-gradient partial sums in one pass ----------------------------------
_bias_only_bwd = _grad_pass(_NONE)
_relu_bwd = _grad_pass(_RELU)
_tanh_bwd = _grad_pass(_TANH)
_sigmoid_bwd = _grad_pass(_SIGMOID)
_silu_bwd = _grad_pass(_SILU)


def _bias_bwd_cpu(g, part):
    """part[c, :] = sum of g over the rows of chunk c."""
    _bias_only_bwd(g, g, g, g, part)


def _bias_relu_bwd_cpu(g, y, gz, part):
    _relu_bwd(g, y, y, gz, part)


def _bias_tanh_bwd_cpu(g, y, gz, part):
    _tanh_bwd(g, y, y, gz, part)


def _bias_sigmoid_bwd_cpu(g, y, gz, part):
    _sigmoid_bwd(g, y, y, gz, part)


def _bias_silu_bwd_cpu(g, s, y, gz, part):
    """gz = g * (s + y (1 - s)) from s = sigmoid(z) and y = silu(z) = z s (no exp);
    partial sums."""
    _silu_bwd(g, s, y, gz, part)


_neg_half_sq2 = _map_pass(_NEG_HALF_SQ)     # out = -z^2 / 2
_gelu_grad_f32_part = _grad_pass(_GELU_F32)
_gelu_grad_f64_part = _grad_pass(_GELU_F64)


def _bias_gelu_bwd_cpu(g, z, gz, part):
    _neg_half_sq2(z, gz)
    np.exp(gz, out=gz)
    (_gelu_grad_f32_part if z.dtype == np.float32 else _gelu_grad_f64_part)(g, z, z, gz, part)


_gelu_inner2 = _map_pass(_GELU_TANH_INNER)  # out = sqrt(2/pi) (z + 0.044715 z^3)
_gelu_tanh_grad_part = _grad_pass(_GELU_TANH)


def _bias_gelu_tanh_bwd_cpu(g, z, gz, part):
    _gelu_inner2(z, gz)
    np.tanh(gz, out=gz)
    _gelu_tanh_grad_part(g, z, z, gz, part)
