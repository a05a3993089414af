"""CUDA kernels of the fused bias + activation (twins of ``kernels/cpu/fused.py``).

Contract: the CPU module's, name for name. ``y``/``g``/``s``/``gz``/``out`` are
C-contiguous ``(M, N)`` device arrays and ``b`` ``(N,)``, one floating dtype (float16,
float32 or float64); ``part`` is ``(P, N)``, zeroed by the caller:

* ``_bias_fwd_cuda(y, b)``; ``_bias_{relu,tanh,sigmoid}_fwd_cuda(y, b)`` (in place);
  ``_bias_{gelu,gelu_tanh}_fwd_cuda(y, b, out)`` (``y += b``, ``out = act(y)``);
  ``_bias_silu_fwd_cuda(y, b, out)`` (``out = silu(y + b)``, ``y = sigmoid(y + b)``);
* ``_bias_bwd_cuda(g, part)``; ``_bias_<act>_bwd_cuda(g, s, gz, part)`` (silu:
  ``(g, s, out, gz, part)``): ``gz = g * act'``
  and ``part[c, :] += gz[r, :]`` over the rows of chunk ``c`` (chunk ``c`` is the rows
  ``[c*ceil(M/P), (c+1)*ceil(M/P))``, as on the CPU).

Forward kernels are flat grid-stride loops: a thread computes elements ``i, i +
gridsize, ...`` of the flattened ``(M, N)`` array (``r = i // N``, ``j = i % N``); the
transcendental is computed in the kernel (libdevice ``exp``/``tanh``/``erf``), so every
activation is one pass (the CPU's ufunc + loop split exists only for the missing SVML).
Backward kernels give one thread a ``(chunk c, column j)`` pair: it walks the chunk's
rows down column ``j`` writing ``gz`` and keeps the column partial in a register
(float32 for half and float32, float64 for float64), then adds it to ``part[c, j]``.
Neighbouring threads take neighbouring columns, so every row access is coalesced.
float16 elements are widened to float32 (:func:`~._launch.widen`) and narrowed at the
store.
"""
import math

from numba import cuda

from .. import scalar as S
from ._launch import cuda_kernel, dev, launch, widen


def _sig(*kinds):
    """PTX example signature: ``"m"`` a C-contiguous 2-D array, ``"v"`` a 1-D one."""
    return lambda T: tuple(T[:, ::1] if k == "m" else T[::1] for k in kinds)


# ---- forward -----------------------------------------------------------------------------------------
@cuda_kernel(_sig("m", "v"))
def _bias_fwd_kernel(y, b):
    n = y.shape[1]
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        r = i // n
        j = i - r * n
        y[r, j] = widen(y[r, j]) + widen(b[j])


@cuda_kernel(_sig("m", "v"))
def _bias_relu_fwd_kernel(y, b):
    n = y.shape[1]
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        r = i // n
        j = i - r * n
        y[r, j] = S.relu(widen(y[r, j]) + widen(b[j]))


@cuda_kernel(_sig("m", "v"))
def _bias_tanh_fwd_kernel(y, b):
    n = y.shape[1]
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        r = i // n
        j = i - r * n
        y[r, j] = math.tanh(widen(y[r, j]) + widen(b[j]))


@cuda_kernel(_sig("m", "v"))
def _bias_sigmoid_fwd_kernel(y, b):
    n = y.shape[1]
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        r = i // n
        j = i - r * n
        v = widen(y[r, j]) + widen(b[j])
        y[r, j] = S.sigmoid_from_exp(v, math.exp(-abs(v)))


@cuda_kernel(_sig("m", "v", "m"))
def _bias_silu_fwd_kernel(y, b, out):
    n = y.shape[1]
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        r = i // n
        j = i - r * n
        v = widen(y[r, j]) + widen(b[j])
        s = S.sigmoid_from_exp(v, math.exp(-abs(v)))
        y[r, j] = s
        out[r, j] = v * s


@cuda_kernel(_sig("m", "v", "m"))
def _bias_gelu_fwd_kernel(y, b, out):
    n = y.shape[1]
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        r = i // n
        j = i - r * n
        v = widen(y[r, j]) + widen(b[j])
        y[r, j] = v
        out[r, j] = S.gelu_from_erf(v, math.erf(v * type(v)(S.SQRT1_2)))


@cuda_kernel(_sig("m", "v", "m"))
def _bias_gelu_tanh_fwd_kernel(y, b, out):
    n = y.shape[1]
    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):
        r = i // n
        j = i - r * n
        v = widen(y[r, j]) + widen(b[j])
        y[r, j] = v
        out[r, j] = S.gelu_tanh_from_tanh(v, math.tanh(S.gelu_tanh_inner(v)))


# ---- backward: one thread per (row chunk, column) ----------------------------------------------------
@cuda_kernel(_sig("m", "m"))
def _bias_bwd_kernel(g, part):
    m, n = g.shape
    p = part.shape[0]
    rows = (m + p - 1) // p
    for t in range(cuda.grid(1), p * n, cuda.gridsize(1)):
        c = t // n
        j = t - c * n
        acc = widen(part[c, j])
        for r in range(c * rows, min(m, (c + 1) * rows)):
            acc += widen(g[r, j])
        part[c, j] = acc


@cuda_kernel(_sig("m", "m", "m", "m"))
def _bias_relu_bwd_kernel(g, y, gz, part):
    m, n = g.shape
    p = part.shape[0]
    rows = (m + p - 1) // p
    for t in range(cuda.grid(1), p * n, cuda.gridsize(1)):
        c = t // n
        j = t - c * n
        acc = widen(part[c, j])
        for r in range(c * rows, min(m, (c + 1) * rows)):
            v = S.relu_grad(widen(g[r, j]), widen(y[r, j]))
            gz[r, j] = v
            acc += v
        part[c, j] = acc


@cuda_kernel(_sig("m", "m", "m", "m"))
def _bias_tanh_bwd_kernel(g, y, gz, part):
    m, n = g.shape
    p = part.shape[0]
    rows = (m + p - 1) // p
    for t in range(cuda.grid(1), p * n, cuda.gridsize(1)):
        c = t // n
        j = t - c * n
        acc = widen(part[c, j])
        for r in range(c * rows, min(m, (c + 1) * rows)):
            v = S.tanh_grad(widen(g[r, j]), widen(y[r, j]))
            gz[r, j] = v
            acc += v
        part[c, j] = acc


@cuda_kernel(_sig("m", "m", "m", "m"))
def _bias_sigmoid_bwd_kernel(g, y, gz, part):
    m, n = g.shape
    p = part.shape[0]
    rows = (m + p - 1) // p
    for t in range(cuda.grid(1), p * n, cuda.gridsize(1)):
        c = t // n
        j = t - c * n
        acc = widen(part[c, j])
        for r in range(c * rows, min(m, (c + 1) * rows)):
            v = S.sigmoid_grad(widen(g[r, j]), widen(y[r, j]))
            gz[r, j] = v
            acc += v
        part[c, j] = acc


@cuda_kernel(_sig("m", "m", "m", "m", "m"))
def _bias_silu_bwd_kernel(g, s, y, gz, part):
    m, n = g.shape
    p = part.shape[0]
    rows = (m + p - 1) // p
    for t in range(cuda.grid(1), p * n, cuda.gridsize(1)):
        c = t // n
        j = t - c * n
        acc = widen(part[c, j])
        for r in range(c * rows, min(m, (c + 1) * rows)):
            sv = widen(s[r, j])
            v = widen(g[r, j]) * (sv + widen(y[r, j]) * (type(sv)(1) - sv))
            gz[r, j] = v
            acc += v
        part[c, j] = acc


@cuda_kernel(_sig("m", "m", "m", "m"))
def _bias_gelu_bwd_kernel(g, z, gz, part):
    m, n = g.shape
    p = part.shape[0]
    rows = (m + p - 1) // p
    for t in range(cuda.grid(1), p * n, cuda.gridsize(1)):
        c = t // n
        j = t - c * n
        acc = widen(part[c, j])
        for r in range(c * rows, min(m, (c + 1) * rows)):
            zv = widen(z[r, j])
            tp = type(zv)
            v = S.gelu_grad_from_erf_exp(widen(g[r, j]), zv, math.erf(zv * tp(S.SQRT1_2)),
                                         math.exp(-(zv * zv) * tp(0.5)))
            gz[r, j] = v
            acc += v
        part[c, j] = acc


@cuda_kernel(_sig("m", "m", "m", "m"))
def _bias_gelu_tanh_bwd_kernel(g, z, gz, part):
    m, n = g.shape
    p = part.shape[0]
    rows = (m + p - 1) // p
    for t in range(cuda.grid(1), p * n, cuda.gridsize(1)):
        c = t // n
        j = t - c * n
        acc = widen(part[c, j])
        for r in range(c * rows, min(m, (c + 1) * rows)):
            zv = widen(z[r, j])
            v = S.gelu_tanh_grad_from_tanh(widen(g[r, j]), zv, math.tanh(S.gelu_tanh_inner(zv)))
            gz[r, j] = v
            acc += v
        part[c, j] = acc


# ---- host launchers: the names ``backend.kernel("fused", name)`` resolves ----------------------------
def _n(a):
    return dev(a).size


def _bias_fwd_cuda(y, b):
    launch(_bias_fwd_kernel, _n(y), y, b)


def _bias_relu_fwd_cuda(y, b):
    launch(_bias_relu_fwd_kernel, _n(y), y, b)


def _bias_tanh_fwd_cuda(y, b):
    launch(_bias_tanh_fwd_kernel, _n(y), y, b)


def _bias_sigmoid_fwd_cuda(y, b):
    launch(_bias_sigmoid_fwd_kernel, _n(y), y, b)


def _bias_silu_fwd_cuda(y, b, out):
    launch(_bias_silu_fwd_kernel, _n(y), y, b, out)


def _bias_gelu_fwd_cuda(y, b, out):
    launch(_bias_gelu_fwd_kernel, _n(y), y, b, out)


def _bias_gelu_tanh_fwd_cuda(y, b, out):
    launch(_bias_gelu_tanh_fwd_kernel, _n(y), y, b, out)


def _bias_bwd_cuda(g, part):
    if _n(g):
        launch(_bias_bwd_kernel, _n(part), g, part)


def _bias_relu_bwd_cuda(g, y, gz, part):
    if _n(g):
        launch(_bias_relu_bwd_kernel, _n(part), g, y, gz, part)


def _bias_tanh_bwd_cuda(g, y, gz, part):
    if _n(g):
        launch(_bias_tanh_bwd_kernel, _n(part), g, y, gz, part)


def _bias_sigmoid_bwd_cuda(g, y, gz, part):
    if _n(g):
        launch(_bias_sigmoid_bwd_kernel, _n(part), g, y, gz, part)


def _bias_silu_bwd_cuda(g, s, y, gz, part):
    if _n(g):
        launch(_bias_silu_bwd_kernel, _n(part), g, s, y, gz, part)


def _bias_gelu_bwd_cuda(g, z, gz, part):
    if _n(g):
        launch(_bias_gelu_bwd_kernel, _n(part), g, z, gz, part)


def _bias_gelu_tanh_bwd_cuda(g, z, gz, part):
    if _n(g):
        launch(_bias_gelu_tanh_bwd_kernel, _n(part), g, z, gz, part)
