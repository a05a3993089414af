"""Dropout kernels: a counter-based Bernoulli mask fused with the scaling.

Element ``i`` is kept when ``scalar.keep_bit(seed, i, thr53)``: 53 bits of SplitMix64 of
``(seed, i)`` compared with ``thr53 = round(p * 2**53)``. The mask depends only on the
64-bit ``seed`` (drawn from numbagrad's generator) and the element index, so the serial
twin, the ``prange`` twin with any thread count and a CUDA grid give the same mask.

Contract (the same for every backend), flat C-contiguous arrays:

* ``_dropout_fwd_cpu(x, seed, thr53, scale, out, mask)``: mask[i] = keep (uint8),
  out[i] = x[i] * (scale if keep else 0) (a product, so NaN stays NaN as in PyTorch);
* ``_dropout_bwd_cpu(g, mask, scale, out)``: out = g * mask * scale;
* ``_bernoulli_mask_cpu(mask, seed, thr53)``: the mask alone (feature dropout);
* ``_alpha_dropout_fwd_cpu(x, seed, thr53, a, b, out, mask)``:
  out = a * x + b on kept elements... see the docstring of the kernel.
"""
from numba import prange

from .._jit import flat_kernel
from .. import scalar as S

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("dropout_fwd", "dropout_bwd", "bernoulli_mask", "alpha_dropout_fwd")


@flat_kernel
def _dropout_fwd_cpu(x, seed, thr53, scale, out, mask):
    zero = type(scale)(0)
    for i in prange(out.size):
        keep = S.keep_bit(seed, i, thr53)
        mask[i] = keep
        out[i] = x[i] * (scale if keep else zero)


@flat_kernel
def _dropout_bwd_cpu(g, mask, scale, out):
    zero = type(scale)(0)
    for i in prange(out.size):
        out[i] = g[i] * (scale if mask[i] else zero)


@flat_kernel
def _bernoulli_mask_cpu(mask, seed, thr53):
    for i in prange(mask.size):
        mask[i] = S.keep_bit(seed, i, thr53)


@flat_kernel
def _alpha_dropout_fwd_cpu(x, seed, thr53, a, b_keep, b_drop, out, mask):
    """out = a * x + b_keep where kept, else b_drop (PyTorch's alpha dropout:
    a * (x * m + alpha' * (1 - m)) + b with alpha' the SELU saturation value)."""
    for i in prange(out.size):
        keep = S.keep_bit(seed, i, thr53)
        mask[i] = keep
        out[i] = a * x[i] + b_keep if keep else x[i] * 0 + b_drop

