"""CUDA twin of ``kernels/cpu/convert.py``: float32 <-> bfloat16 over integer views.

Same contract, argument for argument: ``_f32_to_bf16_cuda(src_u32, out_u16)`` rounds the
float32 bit patterns ``src_u32`` to the nearest bfloat16 (ties to even; NaN -> the quiet
NaN ``sign | 0x7fc0``; overflow -> inf) into ``out_u16``; ``_bf16_to_f32_cuda(src_u16,
out_u32)`` widens exactly. Both take 1-D contiguous device arrays of one length
(``uint32``/``uint16`` views of the float32/bfloat16 buffers). One thread per element,
grid-stride; pure integer arithmetic, so the simulator runs it and it compiles to PTX on
every compute capability (no ``__float2bfloat16`` intrinsic, which needs sm_80).
"""
import numpy as np
from numba import cuda
from numba import types as nbtypes

from ._launch import cuda_kernel, device_fn, launch

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("f32_to_bf16", "bf16_to_f32")

__all__ = ["_f32_to_bf16_cuda", "_bf16_to_f32_cuda"]

_U16 = nbtypes.uint16
_U32 = nbtypes.uint32


@device_fn
def _f32_bits_to_bf16_device(u):
    """bfloat16 bits (uint16) nearest to the float32 with bits ``u`` (uint32); the CPU
    kernel's ``_f32_bits_to_bf16``, line for line."""
    if (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):  # NaN: quiet, sign kept
        return np.uint16((u >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7FC0))
    return np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


@cuda_kernel([(_U32[::1], _U16[::1])])
def _f32_to_bf16_kernel(src, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = _f32_bits_to_bf16_device(src[i])


@cuda_kernel([(_U16[::1], _U32[::1])])
def _bf16_to_f32_kernel(src, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = np.uint32(src[i]) << np.uint32(16)


def _f32_to_bf16_cuda(src, out):
    """float32 bits -> bfloat16 bits, RNE (module docstring)."""
    launch(_f32_to_bf16_kernel, out.size, src, out)


def _bf16_to_f32_cuda(src, out):
    """bfloat16 bits -> float32 bits, exact (module docstring)."""
    launch(_bf16_to_f32_kernel, out.size, src, out)
