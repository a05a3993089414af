"""Activation functions with PyTorch's names, arguments and semantics
(``torch.nn.functional.relu``, ``gelu(approximate='tanh')``, ``softplus(beta, threshold)``...).

Each op is a :class:`Function` whose forward and backward launch the backend kernels
``activation/<op>_fwd`` and ``activation/<op>_bwd`` (``numbagrad/kernels/cpu/activation.py``
on the CPU; its docstring has the NumPy-vs-@njit measurements behind each formulation).
The kernels see flat contiguous arrays; a strided input is copied once.

dtypes: float32/float64 run natively; float16 is computed in float32 and cast back
(CPU @njit has no float16); integer and bool inputs are cast to the default float dtype.
``inplace=True`` (where PyTorch's functional form has it) writes the result into
``input``'s storage and moves ``input`` onto the graph, as PyTorch does.

Numerics: sigmoid, silu, softplus, logsigmoid and mish only ever exponentiate ``-|x|``,
so inputs of +-1e4 give finite values and gradients. Gradients at kinks follow PyTorch
(relu'(0) = 0, leaky_relu'(0) = slope, hardtanh passes the gradient only strictly
inside ``(min_val, max_val)``, elu uses its negative branch at 0).
"""
from ..autograd.function import Function
from ..backend import backend_of
from ..tensor import Tensor
from ._util import as_tensor_arg, cast_back, float_operands, wrap_dim

__all__ = ["relu", "relu_", "relu6", "leaky_relu", "leaky_relu_", "elu", "elu_", "selu", "selu_",
           "celu", "celu_", "gelu", "silu", "sigmoid", "sigmoid_", "tanh", "tanh_", "softplus",
           "hardtanh", "hardtanh_", "hardsigmoid", "hardswish", "mish", "logsigmoid", "softsign",
           "threshold", "threshold_", "prelu", "glu", "tanhshrink", "softshrink", "hardshrink"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


class _Activation(Function):
    """A unary activation ``y = f(x; *params)`` run by the ``activation`` kernels.

    Subclasses set ``fwd_kernel`` / ``bwd_kernel`` (entry points of the ``activation``
    kernel family, e.g. ``"relu_fwd"`` / ``"relu_bwd"``) and ``saves``: which of ``x`` and
    ``y`` the backward kernel reads, in its argument order.
    Extra arguments of ``apply`` are scalar parameters, cast to the input's dtype and
    passed to both kernels after the arrays.
    """

    fwd_kernel = bwd_kernel = None
    saves = "x"

    @staticmethod
    def forward(ctx, x, *params):
        be = backend_of(x)
        p = tuple([x.dtype.type(v) for v in params]) if params else ()
        out = be.empty(x.shape, x.dtype)
        be.kernel("activation", ctx.fwd_kernel)(be.flat(x), *p, out.reshape(-1))
        ctx.params = p
        s = ctx.saves
        ctx.save_for_backward(*((x,) if s == "x" else (out,) if s == "y" else (x, out)))
        return out

    @staticmethod
    def backward(ctx, g):
        be = backend_of(g)
        saved = ctx.saved_tensors
        gx = be.empty(g.shape, g.dtype)
        be.kernel("activation", ctx.bwd_kernel)(
            be.flat(g), *(be.flat(s) for s in saved), *ctx.params, gx.reshape(-1))
        return (gx,) + (None,) * len(ctx.params)


def _fn(name, fwd_kernel, bwd_kernel, saves):
    cls = type(name, (_Activation,), {"fwd_kernel": fwd_kernel, "bwd_kernel": bwd_kernel, "saves": saves,
                                      "__slots__": ()})
    cls.__qualname__ = name
    return cls


Relu = _fn("Relu", "relu_fwd", "relu_bwd", "y")
LeakyRelu = _fn("LeakyRelu", "leaky_relu_fwd", "leaky_relu_bwd", "x")
Hardtanh = _fn("Hardtanh", "hardtanh_fwd", "hardtanh_bwd", "x")
Hardsigmoid = _fn("Hardsigmoid", "hardsigmoid_fwd", "hardsigmoid_bwd", "x")
Hardswish = _fn("Hardswish", "hardswish_fwd", "hardswish_bwd", "x")
Softsign = _fn("Softsign", "softsign_fwd", "softsign_bwd", "x")
Sigmoid = _fn("Sigmoid", "sigmoid_fwd", "sigmoid_bwd", "y")
Tanh = _fn("Tanh", "tanh_fwd", "tanh_bwd", "y")
Silu = _fn("Silu", "silu_fwd", "silu_bwd", "x")
Softplus = _fn("Softplus", "softplus_fwd", "softplus_bwd", "x")
Mish = _fn("Mish", "mish_fwd", "mish_bwd", "x")
Elu = _fn("Elu", "elu_fwd", "elu_bwd", "xy")
Gelu = _fn("Gelu", "gelu_fwd", "gelu_bwd", "x")
GeluTanh = _fn("GeluTanh", "gelu_tanh_fwd", "gelu_tanh_bwd", "x")


class Logsigmoid(Function):
    """log(sigmoid(x)); keeps exp(-|x|) from the forward for the backward (as PyTorch)."""

    @staticmethod
    def forward(ctx, x):
        be = backend_of(x)
        out = be.empty(x.shape, x.dtype)
        buf = be.empty(x.shape, x.dtype)
        be.kernel("activation", "logsigmoid_fwd")(be.flat(x), out.reshape(-1), buf.reshape(-1))
        ctx.save_for_backward(x, buf)
        return out

    @staticmethod
    def backward(ctx, g):
        be = backend_of(g)
        x, buf = ctx.saved_tensors
        gx = be.empty(g.shape, g.dtype)
        be.kernel("activation", "logsigmoid_bwd")(be.flat(g), be.flat(x), buf.reshape(-1), gx.reshape(-1))
        return gx


# ---- dtype handling and the public functions ----------------------------------------------------
def _run(cls, input, name, *params, inplace=False):
    (x,), back = float_operands(name, as_tensor_arg(input, name))
    y = cast_back(cls.apply(x, *params), back)
    if inplace:
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: inplace=True needs a Tensor input")
        return input._inplace_result(name + "_", y)
    return y


def relu(input, inplace=False):
    """max(x, 0); the gradient at 0 is 0."""
    return _run(Relu, input, "relu", inplace=inplace)


def relu_(input):
    """In-place :func:`relu`: ``max(input, 0)`` written into ``input``, which is returned."""
    return relu(input, inplace=True)


def relu6(input, inplace=False):
    """min(max(x, 0), 6) (``hardtanh(x, 0, 6)``)."""
    return _run(Hardtanh, input, "relu6", 0.0, 6.0, inplace=inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x if x > 0 else negative_slope * x."""
    return _run(LeakyRelu, input, "leaky_relu", negative_slope, inplace=inplace)


def leaky_relu_(input, negative_slope=0.01):
    """In-place :func:`leaky_relu`."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """clamp(x, min_val, max_val); the gradient passes only strictly inside the interval."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    return _run(Hardtanh, input, "hardtanh", min_val, max_val, inplace=inplace)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place :func:`hardtanh`."""
    return hardtanh(input, min_val, max_val, inplace=True)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6."""
    return _run(Hardsigmoid, input, "hardsigmoid", inplace=inplace)


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6."""
    return _run(Hardswish, input, "hardswish", inplace=inplace)


def softsign(input):
    """x / (1 + |x|)."""
    return _run(Softsign, input, "softsign")


def sigmoid(input):
    """1 / (1 + exp(-x)), computed from exp(-|x|) (no overflow)."""
    return _run(Sigmoid, input, "sigmoid")


def sigmoid_(input):
    """In-place :func:`sigmoid`: ``1 / (1 + exp(-input))`` written into ``input``."""
    return _run(Sigmoid, input, "sigmoid", inplace=True)


def tanh(input):
    """Hyperbolic tangent."""
    return _run(Tanh, input, "tanh")


def tanh_(input):
    """In-place :func:`tanh`."""
    return _run(Tanh, input, "tanh", inplace=True)


def silu(input, inplace=False):
    """x * sigmoid(x) (swish)."""
    return _run(Silu, input, "silu", inplace=inplace)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, or x where beta * x > threshold."""
    if beta == 0:
        raise ValueError("softplus: beta must be nonzero")
    return _run(Softplus, input, "softplus", beta, threshold)


def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    return _run(Mish, input, "mish", inplace=inplace)


def logsigmoid(input):
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))."""
    return _run(Logsigmoid, input, "logsigmoid")


def elu(input, alpha=1.0, inplace=False):
    """x if x > 0 else alpha * (exp(x) - 1)."""
    return _run(Elu, input, "elu", alpha, 1.0, 1.0, inplace=inplace)


def elu_(input, alpha=1.0):
    """In-place :func:`elu`."""
    return elu(input, alpha, inplace=True)


def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalising constants of Klambauer et al."""
    return _run(Elu, input, "selu", _SELU_ALPHA, _SELU_SCALE, 1.0, inplace=inplace)


def selu_(input):
    """In-place :func:`selu`."""
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise ValueError("celu: alpha must be nonzero (ZeroDivisionError)")
    return _run(Elu, input, "celu", alpha, 1.0, 1.0 / alpha, inplace=inplace)


def celu_(input, alpha=1.0):
    """In-place :func:`celu`."""
    return celu(input, alpha, inplace=True)


def gelu(input, approximate="none"):
    """x * Phi(x) (``approximate='none'``) or its tanh approximation (``'tanh'``)."""
    if approximate == "none":
        return _run(Gelu, input, "gelu")
    if approximate == "tanh":
        return _run(GeluTanh, input, "gelu")
    raise ValueError(f"gelu: approximate argument must be either 'none' or 'tanh', got {approximate!r}")


# ---- composite activations (PyTorch's less common ones) ---------------------------------------------
class Threshold(Function):
    """``value`` where ``x <= threshold``, else ``x``: written as torch's test, so a NaN (which
    compares false) stays NaN and passes its gradient, as in torch."""

    @staticmethod
    def forward(ctx, x, thr, value):
        be = backend_of(x)
        drop = be.less_equal(x, thr)
        ctx.save_for_backward(drop)
        return be.where(drop, x.dtype.type(value), x).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (drop,) = ctx.saved_tensors
        return backend_of(g).where(drop, g.dtype.type(0), g), None, None


def threshold(input, threshold, value, inplace=False):
    """x if x > threshold else value (the gradient passes where x > threshold, and NaN stays NaN)."""
    return _run(Threshold, input, "threshold", threshold, value, inplace=inplace)


def threshold_(input, threshold, value):
    """In-place :func:`threshold`: elements ``<= threshold`` become ``value``."""
    return _run(Threshold, input, "threshold", threshold, value, inplace=True)


class PReLU(Function):
    """x if x > 0 else weight * x, ``weight`` broadcast along dim 1 (or a single value)."""

    @staticmethod
    def forward(ctx, x, w):
        be = backend_of(x)
        if w.size == 1:
            wb = w.reshape(())
        else:
            wb = w.reshape((1, w.size) + (1,) * (x.ndim - 2))
        pos = be.greater(x, 0)
        ctx.save_for_backward(x, w)
        ctx.wb_shape = wb.shape
        return be.where(pos, x, be.mul(wb, x)).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        be = backend_of(g)
        wb = w.reshape(ctx.wb_shape)
        pos = be.greater(x, 0)
        zero = g.dtype.type(0)
        gx = be.where(pos, g, be.mul(g, wb)).astype(g.dtype, copy=False) if ctx.needs_input_grad[0] else None
        gw = None
        if ctx.needs_input_grad[1]:
            gw = be.sum_to_shape(be.where(pos, zero, be.mul(g, x)), wb.shape if wb.ndim else ())
            gw = gw.reshape(w.shape)
        return gx, gw


def prelu(input, weight):
    """Parametric relu (``torch.nn.functional.prelu``)."""
    x = as_tensor_arg(input, "prelu")
    w = as_tensor_arg(weight, "prelu")
    if w.numel() != 1:
        if x.ndim < 2 or x.shape[1] != w.numel():  # below 2 dims there is no channel dim
            raise RuntimeError(f"prelu: mismatch of parameter numbers ({w.numel()}) and input channel size "
                               f"(input shape {tuple(x.shape)})")
    if w.dtype != x.dtype:
        from .shape import cast
        w = cast(w, x.dtype)
    return PReLU.apply(x, w)


def glu(input, dim=-1):
    """a * sigmoid(b) where (a, b) are the halves of ``input`` along ``dim``."""
    from .shape import chunk
    x = as_tensor_arg(input, "glu")
    if x.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = wrap_dim(dim, x.ndim, "glu")
    n = x.shape[d]
    if n % 2:
        raise RuntimeError(f"glu: halving dimension must be even, but dimension {d} is size {n}")
    a, b = chunk(x, 2, dim)
    return a * sigmoid(b)


def tanhshrink(input):
    """x - tanh(x)."""
    return input - tanh(input)


def softshrink(input, lambd=0.5):
    """x - lambd if x > lambd, x + lambd if x < -lambd, else 0."""
    from .elementwise import where, sub, add
    x = as_tensor_arg(input, "softshrink")
    return where(x > lambd, sub(x, lambd), where(x < -lambd, add(x, lambd), x * 0))


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd else 0."""
    from .elementwise import where, abs as _abs
    x = as_tensor_arg(input, "hardshrink")
    return where(_abs(x) > lambd, x, x * 0)
