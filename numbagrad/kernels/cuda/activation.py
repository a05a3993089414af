"""CUDA kernels of the activation functions (twins of ``kernels/cpu/activation.py``).

Contract: the CPU module's, name for name. ``_<op>_fwd_cuda(x, *params, out)`` and
``_<op>_bwd_cuda(g, *saved, *params, out)`` take 1-D C-contiguous device arrays of one
floating dtype (float16, float32 or float64; numba device arrays or numbagrad CUDA
arrays), ``params`` NumPy scalars of that dtype, ``out`` preallocated; they launch one
kernel on the default stream and return nothing. ``_logsigmoid_fwd_cuda(x, out, buf)``
also writes ``buf = exp(-|x|)`` for ``_logsigmoid_bwd_cuda(g, x, buf, out)``, as the
CPU pair does.

Every op is one flat grid-stride kernel (``_<op>_<fwd|bwd>_kernel``): thread ``t``
computes elements ``t, t + gridsize, ...``, so any launch size is correct. The scalar
math is the CPU kernels' own (:mod:`numbagrad.kernels.scalar`, inlined); the
transcendental that the CPU path takes from a NumPy ufunc pass (``exp(-|x|)``,
``log1p``, ``expm1``, ``tanh``) is computed in the kernel with ``math.*`` (libdevice).
The CPU's hybrid ufunc-pass-plus-loop split exists only because pip's llvmlite has no
SVML; on the GPU a transcendental is a handful of instructions per thread, so one fused
kernel per op, reading each input once, is the natural form. gelu calls ``math.erf``
directly (libdevice ``erff``/``erf``) instead of the CPU's float32 ``erf_f32`` fit.

float16: every element and parameter is widened with :func:`_wide_device` (``v * 1.0f``:
half -> float32, float32/float64 unchanged, exact, keeps -0.0 and NaN), computed in
float32 and narrowed by the store, so the CPU-only scalar helpers never see a half.
"""
import math

import numpy as np
from numba import cuda

from .. import scalar as S
from ._launch import cuda_kernel, dev, device_fn, launch, widen


def _sig(*kinds):
    """Example signature for the PTX check: ``"a"`` a 1-D contiguous array of ``T``,
    ``"s"`` a scalar ``T``."""
    return lambda T: tuple(T[::1] if k == "a" else T for k in kinds)


def _size(a):
    return dev(a).size


_wide_device = widen  # shared with softmax.py and dropout.py


# ---- relu / leaky_relu / hardtanh (relu6) ------------------------------------------------------
@cuda_kernel(_sig("a", "a"))
def _relu_fwd_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.relu(_wide_device(x[i]))


@cuda_kernel(_sig("a", "a", "a"))
def _relu_bwd_kernel(g, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.relu_grad(_wide_device(g[i]), _wide_device(y[i]))


@cuda_kernel(_sig("a", "s", "a"))
def _leaky_relu_fwd_kernel(x, slope, out):
    s = _wide_device(slope)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.leaky_relu(_wide_device(x[i]), s)


@cuda_kernel(_sig("a", "a", "s", "a"))
def _leaky_relu_bwd_kernel(g, x, slope, out):
    s = _wide_device(slope)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.leaky_relu_grad(_wide_device(g[i]), _wide_device(x[i]), s)


@cuda_kernel(_sig("a", "s", "s", "a"))
def _hardtanh_fwd_kernel(x, lo, hi, out):
    lo_ = _wide_device(lo)
    hi_ = _wide_device(hi)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.hardtanh(_wide_device(x[i]), lo_, hi_)


@cuda_kernel(_sig("a", "a", "s", "s", "a"))
def _hardtanh_bwd_kernel(g, x, lo, hi, out):
    lo_ = _wide_device(lo)
    hi_ = _wide_device(hi)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.hardtanh_grad(_wide_device(g[i]), _wide_device(x[i]), lo_, hi_)


# ---- hardsigmoid / hardswish / softsign ------------------------------------------------------------
@cuda_kernel(_sig("a", "a"))
def _hardsigmoid_fwd_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.hardsigmoid(_wide_device(x[i]))


@cuda_kernel(_sig("a", "a", "a"))
def _hardsigmoid_bwd_kernel(g, x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.hardsigmoid_grad(_wide_device(g[i]), _wide_device(x[i]))


@cuda_kernel(_sig("a", "a"))
def _hardswish_fwd_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.hardswish(_wide_device(x[i]))


@cuda_kernel(_sig("a", "a", "a"))
def _hardswish_bwd_kernel(g, x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.hardswish_grad(_wide_device(g[i]), _wide_device(x[i]))


@cuda_kernel(_sig("a", "a"))
def _softsign_fwd_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.softsign(_wide_device(x[i]))


@cuda_kernel(_sig("a", "a", "a"))
def _softsign_bwd_kernel(g, x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.softsign_grad(_wide_device(g[i]), _wide_device(x[i]))


# ---- sigmoid / tanh / silu / logsigmoid --------------------------------------------------------
@cuda_kernel(_sig("a", "a"))
def _sigmoid_fwd_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        out[i] = S.sigmoid_from_exp(v, math.exp(-abs(v)))


@cuda_kernel(_sig("a", "a", "a"))
def _sigmoid_bwd_kernel(g, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.sigmoid_grad(_wide_device(g[i]), _wide_device(y[i]))


@cuda_kernel(_sig("a", "a"))
def _tanh_fwd_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = math.tanh(_wide_device(x[i]))


@cuda_kernel(_sig("a", "a", "a"))
def _tanh_bwd_kernel(g, y, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.tanh_grad(_wide_device(g[i]), _wide_device(y[i]))


@cuda_kernel(_sig("a", "a"))
def _silu_fwd_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        out[i] = S.silu_from_exp(v, math.exp(-abs(v)))


@cuda_kernel(_sig("a", "a", "a"))
def _silu_bwd_kernel(g, x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        out[i] = S.silu_grad_from_exp(_wide_device(g[i]), v, math.exp(-abs(v)))


@cuda_kernel(_sig("a", "a", "a"))
def _logsigmoid_fwd_kernel(x, out, buf):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        e = math.exp(-abs(v))
        buf[i] = e
        out[i] = S.logsigmoid_from_log1p(v, math.log1p(e))


@cuda_kernel(_sig("a", "a", "a", "a"))
def _logsigmoid_bwd_kernel(g, x, buf, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.logsigmoid_grad_from_exp(_wide_device(g[i]), _wide_device(x[i]), _wide_device(buf[i]))


# ---- softplus ---------------------------------------------------------------------------------
@cuda_kernel(_sig("a", "s", "s", "a"))
def _softplus_fwd_kernel(x, beta, threshold, out):
    b = _wide_device(beta)
    th = _wide_device(threshold)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        z = b * v
        out[i] = S.softplus_from_log1p(v, z, math.log1p(math.exp(-abs(z))), b, th)


@cuda_kernel(_sig("a", "a", "s", "s", "a"))
def _softplus_bwd_kernel(g, x, beta, threshold, out):
    b = _wide_device(beta)
    th = _wide_device(threshold)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        z = b * _wide_device(x[i])
        out[i] = S.softplus_grad_from_exp(_wide_device(g[i]), z, math.exp(-abs(z)), th)


# ---- mish -------------------------------------------------------------------------------------
@cuda_kernel(_sig("a", "a"))
def _mish_fwd_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        out[i] = S.mish_from_exp(v, math.exp(-abs(v)))


@cuda_kernel(_sig("a", "a", "a"))
def _mish_bwd_kernel(g, x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        out[i] = S.mish_grad_from_exp(_wide_device(g[i]), v, math.exp(-abs(v)))


# ---- elu / selu / celu ------------------------------------------------------------------------
@cuda_kernel(_sig("a", "s", "s", "s", "a"))
def _elu_fwd_kernel(x, alpha, scale, input_scale, out):
    """out = scale * (x if x > 0 else alpha * expm1(x * input_scale))"""
    a = _wide_device(alpha)
    s = _wide_device(scale)
    si = _wide_device(input_scale)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        m = v if v < 0 else type(v)(0)  # min(x, 0) as on the CPU (NaN -> 0; y is NaN anyway)
        out[i] = S.elu_from_expm1(v, math.expm1(m * si), a, s)


@cuda_kernel(_sig("a", "a", "a", "s", "s", "s", "a"))
def _elu_bwd_kernel(g, x, y, alpha, scale, input_scale, out):
    a = _wide_device(alpha)
    s = _wide_device(scale)
    si = _wide_device(input_scale)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = S.elu_grad(_wide_device(g[i]), _wide_device(x[i]), _wide_device(y[i]), a, s, si)


# ---- gelu -------------------------------------------------------------------------------------
@cuda_kernel(_sig("a", "a"))
def _gelu_fwd_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        out[i] = S.gelu_from_erf(v, math.erf(v * type(v)(S.SQRT1_2)))


@cuda_kernel(_sig("a", "a", "a"))
def _gelu_bwd_kernel(g, x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        t = type(v)
        out[i] = S.gelu_grad_from_erf_exp(_wide_device(g[i]), v, math.erf(v * t(S.SQRT1_2)),
                                          math.exp(-(v * v) * t(0.5)))


@cuda_kernel(_sig("a", "a"))
def _gelu_tanh_fwd_kernel(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        out[i] = S.gelu_tanh_from_tanh(v, math.tanh(S.gelu_tanh_inner(v)))


@cuda_kernel(_sig("a", "a", "a"))
def _gelu_tanh_bwd_kernel(g, x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        v = _wide_device(x[i])
        out[i] = S.gelu_tanh_grad_from_tanh(_wide_device(g[i]), v, math.tanh(S.gelu_tanh_inner(v)))


# ---- host launchers: the names ``backend.kernel("activation", name)`` resolves --------------------
def _relu_fwd_cuda(x, out):
    launch(_relu_fwd_kernel, _size(out), x, out)


def _relu_bwd_cuda(g, y, out):
    launch(_relu_bwd_kernel, _size(out), g, y, out)


def _leaky_relu_fwd_cuda(x, slope, out):
    launch(_leaky_relu_fwd_kernel, _size(out), x, slope, out)


def _leaky_relu_bwd_cuda(g, x, slope, out):
    launch(_leaky_relu_bwd_kernel, _size(out), g, x, slope, out)


def _hardtanh_fwd_cuda(x, lo, hi, out):
    launch(_hardtanh_fwd_kernel, _size(out), x, lo, hi, out)


def _hardtanh_bwd_cuda(g, x, lo, hi, out):
    launch(_hardtanh_bwd_kernel, _size(out), g, x, lo, hi, out)


def _hardsigmoid_fwd_cuda(x, out):
    launch(_hardsigmoid_fwd_kernel, _size(out), x, out)


def _hardsigmoid_bwd_cuda(g, x, out):
    launch(_hardsigmoid_bwd_kernel, _size(out), g, x, out)


def _hardswish_fwd_cuda(x, out):
    launch(_hardswish_fwd_kernel, _size(out), x, out)


def _hardswish_bwd_cuda(g, x, out):
    launch(_hardswish_bwd_kernel, _size(out), g, x, out)


def _softsign_fwd_cuda(x, out):
    launch(_softsign_fwd_kernel, _size(out), x, out)


def _softsign_bwd_cuda(g, x, out):
    launch(_softsign_bwd_kernel, _size(out), g, x, out)


def _sigmoid_fwd_cuda(x, out):
    launch(_sigmoid_fwd_kernel, _size(out), x, out)


def _sigmoid_bwd_cuda(g, y, out):
    launch(_sigmoid_bwd_kernel, _size(out), g, y, out)


def _tanh_fwd_cuda(x, out):
    launch(_tanh_fwd_kernel, _size(out), x, out)


def _tanh_bwd_cuda(g, y, out):
    launch(_tanh_bwd_kernel, _size(out), g, y, out)


def _silu_fwd_cuda(x, out):
    launch(_silu_fwd_kernel, _size(out), x, out)


def _silu_bwd_cuda(g, x, out):
    launch(_silu_bwd_kernel, _size(out), g, x, out)


def _logsigmoid_fwd_cuda(x, out, buf):
    """out = logsigmoid(x); buf = exp(-|x|), kept for the backward."""
    launch(_logsigmoid_fwd_kernel, _size(out), x, out, buf)


def _logsigmoid_bwd_cuda(g, x, buf, out):
    launch(_logsigmoid_bwd_kernel, _size(out), g, x, buf, out)


def _softplus_fwd_cuda(x, beta, threshold, out):
    launch(_softplus_fwd_kernel, _size(out), x, beta, threshold, out)


def _softplus_bwd_cuda(g, x, beta, threshold, out):
    launch(_softplus_bwd_kernel, _size(out), g, x, beta, threshold, out)


def _mish_fwd_cuda(x, out):
    launch(_mish_fwd_kernel, _size(out), x, out)


def _mish_bwd_cuda(g, x, out):
    launch(_mish_bwd_kernel, _size(out), g, x, out)


def _elu_fwd_cuda(x, alpha, scale, input_scale, out):
    launch(_elu_fwd_kernel, _size(out), x, alpha, scale, input_scale, out)


def _elu_bwd_cuda(g, x, y, alpha, scale, input_scale, out):
    launch(_elu_bwd_kernel, _size(out), g, x, y, alpha, scale, input_scale, out)


def _gelu_fwd_cuda(x, out):
    launch(_gelu_fwd_kernel, _size(out), x, out)


def _gelu_bwd_cuda(g, x, out):
    launch(_gelu_bwd_kernel, _size(out), g, x, out)


def _gelu_tanh_fwd_cuda(x, out):
    launch(_gelu_tanh_fwd_kernel, _size(out), x, out)


def _gelu_tanh_bwd_cuda(g, x, out):
    launch(_gelu_tanh_bwd_kernel, _size(out), g, x, out)
