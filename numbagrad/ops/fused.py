"""Fused linear + bias + activation: ``linear_act(input, weight, bias, activation)`` is
``act(input @ weight.T + bias)`` as one autograd node.

Forward: one GEMM (``be.matmul``; BLAS on the CPU) into a fresh ``(M, N)`` buffer, then
ONE kernel pass (``fused/bias_<act>_fwd``, ``numbagrad/kernels/cpu/fused.py``) adding
the bias and applying the activation in place. What the backward needs is saved: the
output for relu / tanh / sigmoid (their derivatives are functions of the output), the
pre-activation ``z`` for gelu / gelu_tanh (the output is a second buffer), and for silu
``sigmoid(z)`` in the GEMM's buffer plus the output (``silu' = s + out (1 - s)``: the
backward needs no exp).
Backward: one kernel pass computes ``gz = g * act'`` and the bias gradient's partial
column sums together (``fused/bias_<act>_bwd``), then two GEMMs give the input and weight
gradients. The composed path (``linear`` then the activation op) makes two more full
passes over the ``(M, N)`` activations forward (a separate bias add and activation,
each allocating) and one more backward (a separate column sum).

Batch dimensions are folded into ``M`` (any ``(*, in_features)`` input). float16 runs
the composed path (CPU @njit has no float16); bfloat16 on the CPU takes the fused node,
computed in float32 and rounded once, its saved arrays kept in bfloat16 (see
:class:`LinearAct`). ``activation=None`` is bias-only.

Fusion never lost on the bias + activation work, so every activation takes the fused path
(``FUSED``): relu's bias + activation over (4096, 1024) activations takes 2.9 ms fused
against 7.1 ms composed (1 thread). The three GEMMs dominate a whole step, so whole-step
differences between the two paths sit in the noise; with one ``(M, N)`` buffer fewer per
step for relu / tanh / sigmoid, fusion also saves memory. Every transcendental stays a
NumPy ufunc pass (a libm call in an @njit loop was 3-50x slower). The tables:
``perf/README.md``, "Measurement notes", ``ops/fused.py``.
"""
import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ._autocast import lower_precision
from ._util import as_tensor_arg

__all__ = ["linear_act"]

_BF16 = _dtype.bfloat16
_F32 = _dtype.float32

ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "silu")
_SAVES_OUTPUT = frozenset(("relu", "tanh", "sigmoid"))
_KERNELS = {   # activation -> (forward, backward) entry points of the ``fused`` kernel family
    "relu": ("bias_relu_fwd", "bias_relu_bwd"),
    "gelu": ("bias_gelu_fwd", "bias_gelu_bwd"),
    "gelu_tanh": ("bias_gelu_tanh_fwd", "bias_gelu_tanh_bwd"),
    "tanh": ("bias_tanh_fwd", "bias_tanh_bwd"),
    "sigmoid": ("bias_sigmoid_fwd", "bias_sigmoid_bwd"),
    "silu": ("bias_silu_fwd", "bias_silu_bwd"),
}
FUSED = frozenset(ACTIVATIONS)
"""Activations that take the fused kernels; any other runs the composed ops (the
benchmark decides: see the module docstring)."""


def _parts(m):
    """How many row chunks the bias-gradient partial sums use: enough to spread the
    backward pass over threads (CPU) or blocks (CUDA), few enough that summing the
    ``(P, N)`` partials costs nothing next to the ``(M, N)`` pass."""
    return max(1, min(64, m // 32))


class LinearAct(Function):
    """``act(x @ w.T + b)``; ``x`` is 2-D ``(M, K)`` here (the public function folds the
    batch dims).

    bfloat16 (``takes_bfloat16``, CPU only): the node widens its arguments to float32,
    computes everything in float32 (the GEMM, the bias add and the activation in one pass)
    and rounds the output once to bfloat16 (round to nearest even), as ``Function.apply``'s
    bfloat16 rule does for other ops. What it saves is bfloat16: its inputs themselves, and
    the rounded pre-activation / output where float32 would keep them, so the node holds no
    more than the composed ops (torch's bfloat16 ``linear`` + activation save the same
    bfloat16 tensors). Backward widens them and the incoming gradient, computes in float32,
    and rounds each returned gradient once."""

    takes_bfloat16 = True

    @staticmethod
    def forward(ctx, x, w, b, act):
        be = backend_of(x)
        low = x.dtype if x.dtype == _BF16 else None
        ctx.low = low
        if low is not None:
            xs, ws, bs = x, w, b
            x, w = be.astype(x, _F32), be.astype(w, _F32)
            b = None if b is None else be.astype(b, _F32)
        m = x.shape[0]
        n = w.shape[0]
        y = be.contiguous(be.matmul(x, w.T))
        ctx.act = act
        ctx.has_bias = b is not None
        if b is not None or act is not None:
            bb = be.contiguous(b) if b is not None else be.zeros((n,), y.dtype)
            if act is None:
                be.kernel("fused", "bias_fwd")(y, bb)
            elif act in _SAVES_OUTPUT:
                be.kernel("fused", _KERNELS[act][0])(y, bb)
            else:
                out = be.empty((m, n), y.dtype)
                be.kernel("fused", _KERNELS[act][0])(y, bb, out)
                # y now holds z = x w^T + b (gelu, gelu_tanh) or sigmoid(z) (silu, whose
                # derivative s + out (1 - s) also reads the output)
                if low is not None:
                    out = be.astype(out, low)
                    x, w, y = xs, ws, be.astype(y, low)
                if act == "silu":
                    ctx.save_for_backward(x, w, y, out)
                else:
                    ctx.save_for_backward(x, w, y)
                return out
        if low is not None:
            x, w, y = xs, ws, be.astype(y, low)
        if act is None:
            ctx.save_for_backward(x, w)
        else:
            ctx.save_for_backward(x, w, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, w, *s = ctx.saved_tensors
        be = backend_of(g)
        low = ctx.low
        if low is not None:
            g, x, w = be.astype(g, _F32), be.astype(x, _F32), be.astype(w, _F32)
            s = [be.astype(a, _F32) for a in s]
        nx, nw, nb = ctx.needs_input_grad[:3]
        act = ctx.act
        g = be.contiguous(g)
        m, n = g.shape
        want_gb = nb and ctx.has_bias
        part = be.zeros((_parts(m), n), g.dtype) if (want_gb or act is not None) else None
        if act is None:
            gz = g
            if want_gb:
                be.kernel("fused", "bias_bwd")(g, part)
        else:
            gz = be.empty((m, n), g.dtype)
            be.kernel("fused", _KERNELS[act][1])(g, *s, gz, part)
        gb = be.sum(part, axis=0) if want_gb else None
        gx = be.matmul(gz, w) if nx else None
        gw = be.matmul(gz.T, x) if nw else None
        if low is not None:
            gx, gw, gb = (None if a is None else be.astype(a, low) for a in (gx, gw, gb))
        return gx, gw, gb, None


def _composed(x, w, b, act):
    """The same function from the separate ops (the float16 path, and the reference)."""
    from . import activation as A
    from .matmul import linear
    y = linear(x, w, b)
    if act is None:
        return y
    if act == "gelu":
        return A.gelu(y)
    if act == "gelu_tanh":
        return A.gelu(y, approximate="tanh")
    return getattr(A, act)(y)


@lower_precision
def linear_act(input, weight, bias=None, activation="relu"):
    """``activation(input @ weight.T + bias)`` as one fused node.

    Parameters
    ----------
    input : Tensor
        ``(*, in_features)``.
    weight : Tensor
        ``(out_features, in_features)``.
    bias : Tensor or None
        ``(out_features,)``.
    activation : {'relu', 'gelu', 'gelu_tanh', 'tanh', 'sigmoid', 'silu', None}
        ``'gelu'`` is the erf form (``F.gelu``), ``'gelu_tanh'`` its tanh approximation
        (``F.gelu(approximate='tanh')``); None applies no activation.

    Returns
    -------
    Tensor
        ``(*, out_features)``, equal to the composed ``linear`` + activation ops.
    """
    if activation not in ACTIVATIONS:
        raise ValueError(f"linear_act: activation must be one of {ACTIVATIONS}, got {activation!r}")
    x = as_tensor_arg(input, "linear_act")
    if type(x.array) is not type(weight.array) or bias is not None and type(bias.array) is not type(x.array):
        raise RuntimeError(f"linear_act: expected all tensors to be on the same device, got input on "
                           f"{x.device}, weight on {weight.device}"
                           + ("" if bias is None else f" and bias on {bias.device}"))
    if weight.ndim != 2 or x.ndim == 0 or x.shape[-1] != weight.shape[-1]:
        raise RuntimeError(f"linear_act: input of shape {tuple(x.shape)} does not match weight of shape "
                           f"{tuple(weight.shape)} (expected (*, {weight.shape[-1]}) and a 2-D weight)")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise RuntimeError(f"linear_act: bias of shape {tuple(bias.shape)} does not match weight of shape "
                           f"{tuple(weight.shape)}")
    dts = {x.dtype, weight.dtype} | ({bias.dtype} if bias is not None else set())
    if len(dts) != 1:
        raise RuntimeError(f"linear_act: expected one dtype, got input {x.dtype}, weight {weight.dtype}"
                           + ("" if bias is None else f", bias {bias.dtype}"))
    dt = x.dtype
    if (not _dtype.is_float(dt) or dt == _dtype.float16 or activation not in FUSED
            or dt == _BF16 and dt not in backend_of(x.array).wide_dtypes):   # bfloat16: through float32 copies
        return _composed(x, weight, bias, activation)
    lead = tuple(x.shape[:-1])
    x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
    y = LinearAct.apply(x2, weight, bias, activation)
    return y if x.ndim == 2 else y.reshape(lead + (weight.shape[0],))
