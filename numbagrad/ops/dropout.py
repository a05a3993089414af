"""Dropout (``torch.nn.functional.dropout`` and its channel-wise / alpha variants).

Inverted dropout: kept elements are scaled by ``1 / (1 - p)`` so the expected value is
unchanged and evaluation needs no rescaling. The mask is drawn by the kernel
``dropout/dropout_fwd`` (``numbagrad/kernels/cpu/dropout.py``) from a 64-bit seed taken
from ``numbagrad.random.default_generator``, so ``numbagrad.manual_seed(s)`` makes every
mask reproducible, independently of the number of threads. The mask is stored as
``uint8`` for the backward, which is ``g * mask * scale``.

A bfloat16 input gives a bfloat16 result (computed in float32 and rounded once, the mask
drawn as for float32). Semantics as PyTorch: ``training=False`` or ``p == 0`` returns ``input`` itself;
``p == 1`` returns ``input * 0``; ``p`` outside ``[0, 1]`` raises ``ValueError``;
``inplace=True`` writes into ``input``. ``dropout1d/2d/3d`` zero whole channels (a mask
over the first two dims of the batched input) and check/warn about the input rank like
PyTorch (``dropout2d`` on a 3-D input does 1-D channel dropout over ``(N, C, L)``).
``alpha_dropout`` (for SELU networks; ``training`` defaults to False as in PyTorch)
replaces dropped values by SELU's saturation value and renormalises the mean/variance.
"""
import warnings

import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ..random import default_generator
from ..tensor import Tensor
from ._util import as_tensor_arg

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
           "feature_dropout"]

# SELU's negative saturation value is -_ALPHA_PRIME (scale * alpha of selu).
_ALPHA_PRIME = 1.7580993408473766


def _thr53(p):
    """The kernels keep an element when 53 random bits >= round(p * 2**53)."""
    return np.uint64(min(int(round(p * 2.0 ** 53)), 1 << 53))


def _seed():
    return np.uint64(default_generator.next_seed())


def _alpha_coeffs(p):
    """(a, b_keep, b_drop): kept -> a*x + b_keep, dropped -> b_drop (PyTorch's formula)."""
    a = 1.0 / np.sqrt((_ALPHA_PRIME * _ALPHA_PRIME * p + 1) * (1 - p))
    return a, _ALPHA_PRIME * a * p, _ALPHA_PRIME * a * (p - 1)


class Dropout(Function):
    """Elementwise (alpha) dropout; ``alpha=False``: out = x * mask / (1 - p)."""

    @staticmethod
    def forward(ctx, x, p, alpha):
        be = backend_of(x)
        dt = x.dtype.type
        out = be.empty(x.shape, x.dtype)
        mask = be.empty(x.shape, np.uint8)
        if alpha:
            a, bk, bd = _alpha_coeffs(p)
            scale = dt(a)
            be.kernel("dropout", "alpha_dropout_fwd")(be.flat(x), _seed(), _thr53(p), scale, dt(bk), dt(bd),
                                                      out.reshape(-1), mask.reshape(-1))
        else:
            scale = dt(1.0 / (1.0 - p))
            be.kernel("dropout", "dropout_fwd")(be.flat(x), _seed(), _thr53(p), scale, out.reshape(-1),
                                                mask.reshape(-1))
        ctx.scale = scale
        ctx.save_for_backward(mask)
        return out

    @staticmethod
    def backward(ctx, g):
        be = backend_of(g)
        (mask,) = ctx.saved_tensors
        gx = be.empty(g.shape, g.dtype)
        be.kernel("dropout", "dropout_bwd")(be.flat(g), mask.reshape(-1), ctx.scale, gx.reshape(-1))
        return gx, None, None


class FeatureDropout(Function):
    """Channel-wise (alpha) dropout: one draw per (n, c), broadcast over the other dims."""

    @staticmethod
    def forward(ctx, x, p, alpha):
        be = backend_of(x)
        dt = x.dtype
        nc = x.shape[:2]
        mask = be.empty(nc, np.uint8)
        if mask.size:
            be.kernel("dropout", "bernoulli_mask")(mask.reshape(-1), _seed(), _thr53(p))
        m = mask.reshape(nc + (1,) * (x.ndim - 2)).astype(dt)
        if alpha:
            a, bk, bd = _alpha_coeffs(p)
            noise = be.mul(m, dt.type(a))
            b = be.add(be.mul(m, dt.type(bk - bd)), dt.type(bd))  # bk where kept, bd where dropped
            out = be.add(be.mul(x, noise), b)
        else:
            noise = be.mul(m, dt.type(1.0 / (1.0 - p)))
            out = be.mul(x, noise)
        ctx.save_for_backward(noise)
        return out.astype(dt, copy=False)

    @staticmethod
    def backward(ctx, g):
        (noise,) = ctx.saved_tensors
        return backend_of(g).mul(g, noise).astype(g.dtype, copy=False), None, None


def _check_p(p):
    if not 0.0 <= p <= 1.0:  # written so that NaN fails too
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _apply(fn_cls, input, p, training, inplace, alpha, name):
    _check_p(p)
    x = as_tensor_arg(input, name)
    if p == 0 or not training or x.numel() == 0:
        return x
    from .shape import cast
    if p == 1:
        y = x * 0
    else:
        d = x.dtype
        back = None
        if not _dtype.is_float(d):
            xw = cast(x, _dtype.get_default_dtype())
        elif d == np.float16:  # CPU @njit has no float16: compute in float32
            back = d
            xw = cast(x, _dtype.float32)
        else:
            xw = x
        y = fn_cls.apply(xw, float(p), alpha)
        if back is not None:
            y = cast(y, back)
    if inplace:
        if not isinstance(input, Tensor):
            raise TypeError(f"{name}: inplace=True needs a Tensor input")
        return input._inplace_result(name + "_", y)
    return y


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``."""
    return _apply(Dropout, input, p, training, inplace, False, "dropout")


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: dropped values become SELU's saturation value and an
    affine map keeps zero mean / unit variance."""
    return _apply(Dropout, input, p, training, inplace, True, "alpha_dropout")


def _feature(input, p, training, inplace, alpha, name):
    x = as_tensor_arg(input, name)
    if x.ndim < 2:
        raise RuntimeError(f"{name}: feature dropout requires at least 2 dimensions in the input")
    return _apply(FeatureDropout, x, p, training, inplace, alpha, name)


def feature_dropout(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout over dims (N, C) of an input of at least 2 dims."""
    return _feature(input, p, training, inplace, False, "feature_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Channel-wise alpha dropout (``torch.nn.functional.feature_alpha_dropout``)."""
    return _feature(input, p, training, inplace, True, "feature_alpha_dropout")


def _unbatched(input, batched_ndim, p, training, inplace, name):
    """Channel dropout of an input that may lack its batch dim (``(C, *spatial)``)."""
    x = as_tensor_arg(input, name)
    if x.ndim == batched_ndim:
        return _feature(x, p, training, inplace, False, name)
    _check_p(p)
    if p == 0 or not training or x.numel() == 0:
        return x
    from .shape import unsqueeze, squeeze
    y = squeeze(_feature(unsqueeze(x, 0), p, training, False, False, name), 0)
    if inplace and y is not x:
        return x._inplace_result(name + "_", y)
    return y


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, L) or (C, L) input."""
    _check_p(p)
    x = as_tensor_arg(input, "dropout1d")
    if x.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {x.ndim}D input. Note that dropout1d "
            "exists to provide channel-wise dropout on inputs with 1 spatial dimension, a channel "
            "dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _unbatched(x, 3, p, training, inplace, "dropout1d")


def _channel_input(input, p, name, ndims):
    """``p`` checked and ``input`` as a Tensor, with PyTorch's deprecation warning (at the
    caller of ``name``) when its rank is not one of ``ndims``."""
    _check_p(p)
    x = as_tensor_arg(input, name)
    if x.ndim not in ndims:
        warnings.warn(f"{name}: Received a {x.ndim}-D input to {name}, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this "
                      "warning, please use dropout instead.", stacklevel=3)
    return x


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, H, W) input (a 3-D input is taken as (N, C, L),
    with PyTorch's warning)."""
    x = _channel_input(input, p, "dropout2d", (3, 4))
    if x.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel "
                      "dim. To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", stacklevel=2)
    return _feature(x, p, training, inplace, False, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a (N, C, D, H, W) or (C, D, H, W) input."""
    x = _channel_input(input, p, "dropout3d", (4, 5))
    return _unbatched(x, 5, p, training, inplace, "dropout3d")
