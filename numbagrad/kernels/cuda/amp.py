"""CUDA twin of ``kernels/cpu/amp.py``: unscale an optimizer arena bucket's gradients and
flag inf/NaN, in one launch.

Same contract as the CPU kernel, argument for argument:
``_unscale_check_cuda(grad, blk_start, blk_end, blk_seg, active, gsrc, inv_scale, found)``
multiplies every element of the active parameters' blocks of ``grad`` by ``inv_scale`` (a
float32) in place and sets ``found[0]`` (a 1-element float32 device array) to 1.0 when
an element was inf or NaN before the multiply (torch's
``_amp_foreach_non_finite_check_and_unscale_``). ``gsrc`` is ignored: CUDA buckets always
hold their gradients in the arena's ``grad`` (see ``kernels/cuda/optim.py``). With
``inv_scale == 1`` nothing is stored.

Design: a grid-stride loop over the arena's *blocks* (one CUDA block per arena block at a
time, its threads striding over the block's elements, so loads are coalesced and no thread
searches for its block), skipping inactive parameters. Threads that meet an inf or NaN all
store the same 1.0 into ``found[0]``: a benign race, no atomics needed; ``found`` is never
cleared here (the caller zeroes it once per ``unscale_``). float16 elements are widened to
float32, multiplied in float32 and narrowed at the store (torch's ``opmath`` rounding);
float64 elements multiply in float64.
"""
import math

import numpy as np
from numba import cuda
from numba import types as nbtypes

from ._launch import MAX_BLOCKS, TPB, cuda_kernel, dev, widen

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("unscale_check",)

__all__ = ["_unscale_check_cuda"]

_I64 = nbtypes.int64
_U8 = nbtypes.uint8
_F32 = nbtypes.float32


@cuda_kernel(lambda T: (T[::1], _I64[::1], _I64[::1], _I64[::1], _U8[::1], _F32, _F32[::1]))
def _unscale_check_kernel(grad, blk_start, blk_end, blk_seg, active, inv_scale, found):
    store = inv_scale != _F32(1)
    for b in range(cuda.blockIdx.x, blk_start.size, cuda.gridDim.x):
        if active[blk_seg[b]] == 0:
            continue
        for i in range(blk_start[b] + cuda.threadIdx.x, blk_end[b], cuda.blockDim.x):
            x = widen(grad[i])
            if not math.isfinite(x):
                found[0] = _F32(1)
            if store:
                grad[i] = x * inv_scale


def _unscale_check_cuda(grad, blk_start, blk_end, blk_seg, active, gsrc, inv_scale, found):
    """Unscale one arena bucket's gradients and flag non-finite ones (module docstring)."""
    nblk = blk_start.size
    if nblk == 0:
        return
    _unscale_check_kernel[max(1, min(MAX_BLOCKS, nblk)), TPB](
        dev(grad), dev(blk_start), dev(blk_end), dev(blk_seg), dev(active), np.float32(inv_scale), dev(found))
