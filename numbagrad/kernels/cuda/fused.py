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
store. The kernels that differ only in the activation are made by two factories
(:func:`_fwd_kernel`, :func:`_bwd_kernel`) from the scalar functions (the activation
module's device functions), their launchers by :func:`~._launch.flat_launcher`; silu's
forward (two outputs) and the bias-only backward (no ``gz``) are written out.
"""
import math

from numba import cuda

from .. import scalar as S
from .activation import _gelu, _gelu_grad, _gelu_tanh, _gelu_tanh_grad, _sigmoid, _tanh
from ._launch import cuda_kernel, dev, device_fn, flat_launcher, from_template, launch, widen

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "bias_fwd", "bias_relu_fwd", "bias_tanh_fwd", "bias_sigmoid_fwd", "bias_silu_fwd",
    "bias_gelu_fwd", "bias_gelu_tanh_fwd", "bias_bwd", "bias_relu_bwd", "bias_tanh_bwd",
    "bias_sigmoid_bwd", "bias_silu_bwd", "bias_gelu_bwd", "bias_gelu_tanh_bwd",
)


def _sig(*kinds):
    """PTX example signature: ``"m"`` a C-contiguous 2-D array, ``"v"`` a 1-D one."""
    return lambda T: tuple(T[:, ::1] if k == "m" else T[::1] for k in kinds)


# ---- forward -----------------------------------------------------------------------------------------
def _fwd_kernel(name, f, to_out):
    """The forward kernel ``_<name>_kernel(y, b)``: ``y = f(y + b)`` in place; with
    ``to_out``, ``_<name>_kernel(y, b, out)``: ``y += b``, ``out = f(y)``."""
    store = ("        y[r, j] = v\n        out[r, j] = f(v)\n" if to_out else "        y[r, j] = f(v)\n")
    src = (f"def _{name}_kernel(y, b{', out' if to_out else ''}):\n"
           "    n = y.shape[1]\n"
           "    for i in range(cuda.grid(1), y.size, cuda.gridsize(1)):\n"
           "        r = i // n\n"
           "        j = i - r * n\n"
           "        v = w(y[r, j]) + w(b[j])\n" + store)
    k = from_template(__name__, f"_{name}_kernel", src, {"cuda": cuda, "w": widen, "f": f})
    return cuda_kernel(_sig("m", "v", "m") if to_out else _sig("m", "v"))(k)


def _fwd(name, params, f):
    """Kernel and launcher of one forward entry point (``params``: ``y, b`` or ``y, b, out``)."""
    kernel = _fwd_kernel(name, f, params.endswith("out"))
    return flat_launcher(__name__, f"_{name}_cuda", params, kernel, size="y")


@device_fn
def _same(v):
    return v


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


def _bwd_kernel(name, f, n_saved):
    """The backward kernel ``_<name>_kernel(g, s0, .., gz, part)``: ``gz = f(g, s0, ..)``
    (each element widened) and its column sums per row chunk added into ``part``."""
    saved = [f"s{k}" for k in range(n_saved)]
    src = (f"def _{name}_kernel(g, {', '.join(saved)}, gz, part):\n"
           "    m, n = g.shape\n"
           "    p = part.shape[0]\n"
           "    rows = (m + p - 1) // p\n"
           "    for t in range(cuda.grid(1), p * n, cuda.gridsize(1)):\n"
           "        c = t // n\n"
           "        j = t - c * n\n"
           "        acc = w(part[c, j])\n"
           "        for r in range(c * rows, min(m, (c + 1) * rows)):\n"
           f"            v = f(w(g[r, j]), {', '.join(f'w({a}[r, j])' for a in saved)})\n"
           "            gz[r, j] = v\n"
           "            acc += v\n"
           "        part[c, j] = acc\n")
    k = from_template(__name__, f"_{name}_kernel", src, {"cuda": cuda, "w": widen, "f": f})
    return cuda_kernel(_sig(*("m",) * (n_saved + 3)))(k)


@device_fn
def _silu_grad_from_sigmoid(g, s, y):
    """silu'(z) from ``s = sigmoid(z)`` and ``y = silu(z)``: ``s + y (1 - s)``."""
    return g * (s + y * (type(s)(1) - s))


def _bwd(name, params, f):
    """Kernel and launcher of one backward entry point; ``params``: ``g``, the saved
    arrays, ``gz``, ``part`` (the CPU kernel's names)."""
    kernel = _bwd_kernel(name, f, len(params.split(",")) - 3)
    return flat_launcher(__name__, f"_{name}_cuda", params, kernel, size="part", guard="g")


# ---- host launchers: the names ``backend.kernel("fused", name)`` resolves ----------------------------
def _n(a):
    return dev(a).size


_bias_fwd_cuda = _fwd("bias_fwd", "y, b", _same)
_bias_relu_fwd_cuda = _fwd("bias_relu_fwd", "y, b", S.relu)
_bias_tanh_fwd_cuda = _fwd("bias_tanh_fwd", "y, b", _tanh)
_bias_sigmoid_fwd_cuda = _fwd("bias_sigmoid_fwd", "y, b", _sigmoid)
_bias_gelu_fwd_cuda = _fwd("bias_gelu_fwd", "y, b, out", _gelu)
_bias_gelu_tanh_fwd_cuda = _fwd("bias_gelu_tanh_fwd", "y, b, out", _gelu_tanh)


def _bias_silu_fwd_cuda(y, b, out):
    launch(_bias_silu_fwd_kernel, _n(y), y, b, out)


def _bias_bwd_cuda(g, part):
    if _n(g):
        launch(_bias_bwd_kernel, _n(part), g, part)


_bias_relu_bwd_cuda = _bwd("bias_relu_bwd", "g, y, gz, part", S.relu_grad)
_bias_tanh_bwd_cuda = _bwd("bias_tanh_bwd", "g, y, gz, part", S.tanh_grad)
_bias_sigmoid_bwd_cuda = _bwd("bias_sigmoid_bwd", "g, y, gz, part", S.sigmoid_grad)
_bias_silu_bwd_cuda = _bwd("bias_silu_bwd", "g, s, y, gz, part", _silu_grad_from_sigmoid)
_bias_gelu_bwd_cuda = _bwd("bias_gelu_bwd", "g, z, gz, part", _gelu_grad)
_bias_gelu_tanh_bwd_cuda = _bwd("bias_gelu_tanh_bwd", "g, z, gz, part", _gelu_tanh_grad)
