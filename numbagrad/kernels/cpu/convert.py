"""float32 <-> bfloat16 and float16 conversion kernels over integer views (Numba's CPU
target has neither 2-byte float type).

bfloat16 is the upper half of a float32: 1 sign, 8 exponent and 7 mantissa bits. The
kernels never see a bfloat16 type; callers pass ``uint32`` views of float32 arrays and
``uint16`` views of bfloat16 arrays (1-D, C-contiguous, same length).

``_f32_to_bf16_cpu(src_u32, out_u16)``
    round to nearest, ties to even, on the bit pattern: add ``0x7fff`` plus the lowest
    kept bit, keep the upper 16 bits. A carry out of the mantissa bumps the exponent, so
    values past bfloat16's largest finite number become inf exactly as RNE requires;
    infs stay infs; subnormals round like normals (no flush). A NaN becomes the quiet
    NaN ``sign | 0x7fc0`` (adding to a NaN's low bits could carry into inf), which is
    what ``ml_dtypes`` gives bit for bit.
``_bf16_to_f32_cpu(src_u16, out_u32)``
    exact: the 16 bits become the upper half of the float32 (NaN payloads kept).

``_f32_to_f16_cpu(src_u32, out_u16)``
    float32 -> float16, NumPy's own algorithm (``npy_floatbits_to_halfbits``) bit for bit:
    round to nearest even, subnormal halves rounded from the full float32 significand,
    overflow to inf, NaN payloads truncated (kept a NaN). NumPy's cast is correct but runs
    a scalar loop here (no F16C path in the wheel): ~2.5 ns per element, against ~0.8 ns
    serial / ~0.45 ns on 2 threads for this kernel (1M elements).
``_f16_to_f32_cpu(src_u16, table_u32, out_u32)``
    float16 -> float32 by a 65536-entry table of float32 bit patterns (256 KiB, built once
    from NumPy's cast, so exact by construction): a gather, ~5x NumPy's loop.

The CUDA twin is ``kernels/cuda/convert.py`` (bfloat16 only: CUDA has float16 arithmetic, and
the CUDA copy kernel casts it). The entry points are
:func:`numbagrad.backend.cpu.CPUBackend.astype` and :func:`to_bf16` / :func:`from_bf16` /
:func:`to_f16` / :func:`from_f16` below.
"""
import numpy as np
from numba import prange

from ..._dtype import bfloat16 as _BF16
from .._jit import flat_kernel, scalar_helper

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("f32_to_bf16", "bf16_to_f32", "f32_to_f16", "f16_to_f32")

__all__ = ["_f32_to_bf16_cpu", "_bf16_to_f32_cpu", "_f32_bits_to_bf16", "to_bf16", "from_bf16",
           "_f32_to_f16_cpu", "_f16_to_f32_cpu", "_f32_bits_to_f16", "to_f16", "from_f16"]


@scalar_helper
def _f32_bits_to_bf16(u):
    """The bfloat16 bit pattern (uint16) nearest to the float32 with bit pattern ``u`` (uint32)."""
    if (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):  # NaN: quiet, sign kept
        return np.uint16((u >> np.uint32(16)) & np.uint32(0x8000) | np.uint32(0x7FC0))
    return np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


@flat_kernel
def _f32_to_bf16_cpu(src, out):
    """out[i] = bfloat16 bits of float32 bits src[i] (uint32 -> uint16, RNE)."""
    for i in prange(out.size):
        out[i] = _f32_bits_to_bf16(src[i])


@flat_kernel
def _bf16_to_f32_cpu(src, out):
    """out[i] = float32 bits of bfloat16 bits src[i] (uint16 -> uint32, exact)."""
    for i in prange(out.size):
        out[i] = np.uint32(src[i]) << np.uint32(16)


_F32 = np.dtype(np.float32)


def to_bf16(a):
    """A new bfloat16 NumPy array of ``a``'s values, rounded to nearest even (float64 and
    float16 go through float32, as torch's CPU cast does; integer/bool arrays too)."""
    if type(a) is not np.ndarray or a.dtype is not _F32 or not a.flags.c_contiguous:
        a = np.asarray(a, dtype=_F32, order="C")  # (ascontiguousarray would make 0-d 1-d)
    out = np.empty(a.shape, _BF16)
    _f32_to_bf16_cpu(a.reshape(-1).view(np.uint32), out.reshape(-1).view(np.uint16))
    return out


def from_bf16(a, dtype=_F32):
    """A new array of ``dtype`` (a NumPy dtype object) holding the bfloat16 array ``a``'s
    values (exact into float32/float64; other dtypes are cast from the float32 values)."""
    if type(a) is not np.ndarray or not a.flags.c_contiguous:
        a = np.asarray(a, order="C")
    out = np.empty(a.shape, _F32)
    _bf16_to_f32_cpu(a.reshape(-1).view(np.uint16), out.reshape(-1).view(np.uint32))
    if dtype is _F32:
        return out
    return to_f16(out) if dtype is _F16 else out.astype(dtype)


# ---- float16 ---------------------------------------------------------------------------------
@scalar_helper
def _f32_bits_to_f16(f):
    """The float16 bit pattern (uint16) of the float32 with bits ``f`` (uint32), as NumPy casts."""
    sgn = np.uint16((f >> np.uint32(16)) & np.uint32(0x8000))
    e = f & np.uint32(0x7F800000)
    if e >= np.uint32(0x47800000):  # |f| >= 65536: inf, or NaN (payload truncated, kept a NaN)
        sig = f & np.uint32(0x007FFFFF)
        if e == np.uint32(0x7F800000) and sig != np.uint32(0):
            r = np.uint32(0x7C00) + (sig >> np.uint32(13))
            if r == np.uint32(0x7C00):
                r = np.uint32(0x7C01)
            return sgn | np.uint16(r)
        return sgn | np.uint16(0x7C00)
    if e <= np.uint32(0x38000000):  # a float16 subnormal or zero
        if e < np.uint32(0x33000000):
            return sgn
        sig = (np.uint32(0x00800000) + (f & np.uint32(0x007FFFFF))) >> (np.uint32(113) - (e >> np.uint32(23)))
        # a tie only if the bits the shift dropped (f's low 11 at most) were zero too
        if (sig & np.uint32(0x3FFF)) != np.uint32(0x1000) or (f & np.uint32(0x07FF)) != np.uint32(0):
            sig += np.uint32(0x1000)
        return sgn | np.uint16(sig >> np.uint32(13))  # a carry makes the smallest normal: correct
    hexp = (e - np.uint32(0x38000000)) >> np.uint32(13)
    sig = f & np.uint32(0x007FFFFF)
    if (sig & np.uint32(0x3FFF)) != np.uint32(0x1000):  # RNE: add half unless a tie to even
        sig += np.uint32(0x1000)
    return sgn | np.uint16((sig >> np.uint32(13)) + hexp)  # a carry bumps the exponent (to inf)


@flat_kernel
def _f32_to_f16_cpu(src, out):
    """out[i] = float16 bits of float32 bits src[i] (uint32 -> uint16, RNE)."""
    for i in prange(out.size):
        out[i] = _f32_bits_to_f16(src[i])


@flat_kernel
def _f16_to_f32_cpu(src, table, out):
    """out[i] = table[src[i]]: float16 bits -> float32 bits through :data:`F16_TO_F32`."""
    for i in prange(out.size):
        out[i] = table[src[i]]


_F16 = np.dtype(np.float16)
F16_TO_F32 = np.arange(1 << 16, dtype=np.uint16).view(_F16).astype(_F32).view(np.uint32)
"""float32 bit pattern of every float16 bit pattern (NumPy's exact widening)."""


def to_f16(a):
    """A new float16 array of the float32 array ``a`` (NumPy's rounding, bit for bit)."""
    if type(a) is not np.ndarray or a.dtype is not _F32 or not a.flags.c_contiguous:
        a = np.asarray(a, dtype=_F32, order="C")
    out = np.empty(a.shape, _F16)
    _f32_to_f16_cpu(a.reshape(-1).view(np.uint32), out.reshape(-1).view(np.uint16))
    return out


def from_f16(a):
    """A new float32 array of the float16 array ``a`` (exact)."""
    if type(a) is not np.ndarray or not a.flags.c_contiguous:
        a = np.asarray(a, order="C")
    out = np.empty(a.shape, _F32)
    _f16_to_f32_cpu(a.reshape(-1).view(np.uint16), F16_TO_F32, out.reshape(-1).view(np.uint32))
    return out
