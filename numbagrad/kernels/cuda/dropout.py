"""CUDA dropout kernels (twins of ``kernels/cpu/dropout.py``): the same counter-based mask.

Element ``i`` is kept when ``scalar.keep_bit(seed, i, thr53)`` (53 bits of SplitMix64 of
``(seed, i)`` >= ``thr53``), the very helper the CPU kernels inline. The mask therefore
depends only on the seed and the element index: for the same seed, a CUDA grid of any
shape draws exactly the CPU's mask, so a model trained with a fixed
``numbagrad.manual_seed`` drops the same units on either device (``tests/cuda`` holds the
masks equal bit for bit). ``numba.cuda.random`` (xoroshiro128+ with one state per
thread) was deliberately not used: its stream depends on the launch configuration and
matches no CPU generator, and it needs a state array allocated and seeded per launch.

Contract (the CPU module's), flat C-contiguous device arrays, one flat grid-stride kernel
each; ``seed`` and ``thr53`` are ``np.uint64``, the other scalars of ``x``'s dtype:

* ``_dropout_fwd_cuda(x, seed, thr53, scale, out, mask)``: mask[i] = keep (uint8),
  out[i] = x[i] * (scale if keep else 0) (a product: NaN stays NaN, as in PyTorch);
* ``_dropout_bwd_cuda(g, mask, scale, out)``: out = g * mask * scale;
* ``_bernoulli_mask_cuda(mask, seed, thr53)``: the mask alone (feature dropout);
* ``_alpha_dropout_fwd_cuda(x, seed, thr53, a, b_keep, b_drop, out, mask)``:
  out = a * x + b_keep where kept, else x * 0 + b_drop.

float16 elements and scalars are widened to float32 (``activation._wide_device``: ``v * 1.0f``,
exact), computed and narrowed by the store.
"""
from numba import cuda, types as nbtypes

from .. import scalar as S
from ._launch import widen as _wide_device
from ._launch import cuda_kernel, dev, launch

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("dropout_fwd", "dropout_bwd", "bernoulli_mask", "alpha_dropout_fwd")

_U64 = nbtypes.uint64
_U8 = nbtypes.uint8[::1]


@cuda_kernel(lambda T: (T[::1], _U64, _U64, T, T[::1], _U8))
def _dropout_fwd_kernel(x, seed, thr53, scale, out, mask):
    s = _wide_device(scale)
    zero = type(s)(0)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        keep = S.keep_bit(seed, i, thr53)
        mask[i] = keep
        out[i] = _wide_device(x[i]) * (s if keep else zero)


@cuda_kernel(lambda T: (T[::1], _U8, T, T[::1]))
def _dropout_bwd_kernel(g, mask, scale, out):
    s = _wide_device(scale)
    zero = type(s)(0)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = _wide_device(g[i]) * (s if mask[i] else zero)


@cuda_kernel([(_U8, _U64, _U64)], dtypes=())
def _bernoulli_mask_kernel(mask, seed, thr53):
    for i in range(cuda.grid(1), mask.size, cuda.gridsize(1)):
        mask[i] = S.keep_bit(seed, i, thr53)


@cuda_kernel(lambda T: (T[::1], _U64, _U64, T, T, T, T[::1], _U8))
def _alpha_dropout_fwd_kernel(x, seed, thr53, a, b_keep, b_drop, out, mask):
    """out = a * x + b_keep where kept, else b_drop (PyTorch's alpha dropout; see the CPU
    kernel)."""
    a_ = _wide_device(a)
    bk = _wide_device(b_keep)
    bd = _wide_device(b_drop)
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        keep = S.keep_bit(seed, i, thr53)
        mask[i] = keep
        v = _wide_device(x[i])
        out[i] = a_ * v + bk if keep else v * type(v)(0) + bd


# ---- host launchers: the names ``backend.kernel("dropout", name)`` resolves -------------------------
def _dropout_fwd_cuda(x, seed, thr53, scale, out, mask):
    launch(_dropout_fwd_kernel, dev(out).size, x, seed, thr53, scale, out, mask)


def _dropout_bwd_cuda(g, mask, scale, out):
    launch(_dropout_bwd_kernel, dev(out).size, g, mask, scale, out)


def _bernoulli_mask_cuda(mask, seed, thr53):
    launch(_bernoulli_mask_kernel, dev(mask).size, mask, seed, thr53)


def _alpha_dropout_fwd_cuda(x, seed, thr53, a, b_keep, b_drop, out, mask):
    launch(_alpha_dropout_fwd_kernel, dev(out).size, x, seed, thr53, a, b_keep, b_drop, out, mask)
