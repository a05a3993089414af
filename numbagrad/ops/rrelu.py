"""Randomized leaky relu (``torch.nn.functional.rrelu``).

Training mode: every negative element is multiplied by its own slope drawn from
U(lower, upper); non-negative elements pass unchanged. The slopes come from numbagrad's
default generator (``numbagrad.manual_seed`` makes them reproducible), drawn on the host
in float64 and moved to the input's device once; the per-element factor (1 or the slope)
is saved, so the backward is one multiply ``g * noise`` (PyTorch keeps the same "noise"
buffer). Evaluation mode (``training=False``, PyTorch's default for the functional form)
is ``leaky_relu`` with the fixed slope ``(lower + upper) / 2``.

The draw is a NumPy ``uniform`` over the whole input (about 4 ns/element), cheaper than
writing a counter-based kernel pair for a layer that is rarely on a hot path.
"""
import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ..random import default_generator
from ..tensor import Tensor
from ._util import as_tensor_arg

__all__ = ["rrelu", "rrelu_"]


class RReLU(Function):
    """out = x * noise, noise = 1 where x >= 0, U(lower, upper) elsewhere."""

    @staticmethod
    def forward(ctx, x, lower, upper):
        be = backend_of(x)
        slopes = default_generator.numpy_rng.uniform(lower, upper, x.shape).astype(x.dtype)
        noise = be.where(be.greater_equal(x, 0), x.dtype.type(1), be.asarray(slopes))
        noise = noise.astype(x.dtype, copy=False)
        ctx.save_for_backward(noise)
        return be.mul(x, noise)

    @staticmethod
    def backward(ctx, g):
        (noise,) = ctx.saved_tensors
        return backend_of(g).mul(g, noise), None, None


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Randomized leaky relu: random negative slopes in U(lower, upper) when ``training``,
    the fixed slope ``(lower + upper) / 2`` otherwise."""
    from .activation import leaky_relu
    x = as_tensor_arg(input, "rrelu")
    if not lower <= upper:
        raise ValueError(f"rrelu: lower bound ({lower}) must not exceed upper bound ({upper})")
    if not training:
        return leaky_relu(x, (lower + upper) / 2.0, inplace=inplace)
    from .shape import cast
    back = None
    xw = x
    if x.dtype.kind != "f":
        xw = cast(x, _dtype.get_default_dtype())
    elif x.dtype == np.float16:
        back = x.dtype
        xw = cast(x, _dtype.float32)
    y = RReLU.apply(xw, float(lower), float(upper))
    if back is not None:
        y = cast(y, back)
    if inplace:
        if not isinstance(input, Tensor):
            raise TypeError("rrelu: inplace=True needs a Tensor input")
        return input._inplace_result("rrelu_", y)
    return y


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, inplace=True)
