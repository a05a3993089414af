"""The CUDA bfloat16 conversion kernels (``numbagrad/kernels/cuda/convert.py``) against the
CPU kernels, bit for bit, on tiny inputs (the simulator costs ~0.3 ms per thread): every
float32 class that rounds differently (zeros, subnormals, ties to even and odd, values that
round up into the next binade and past bfloat16's largest finite number into inf, infs,
quiet and signalling NaNs of both signs) and a few bfloat16 patterns back."""
import os

import numpy as np
import pytest

cuda = pytest.importorskip("numba.cuda")

from numbagrad.kernels.cpu import convert as C  # noqa: E402
from numbagrad.kernels.cuda import convert as G  # noqa: E402

SIM = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")

F32_BITS = np.array([
    0x00000000, 0x80000000,              # +-0
    0x00000001, 0x00008000, 0x00018000,  # subnormals: rounds to 0, tie to even (0), tie to odd (up)
    0x3F808000, 0x3F818000,              # 1 + tie: to even (down), from odd (up)
    0x3F808001, 0x3F807FFF,              # just above / below a tie
    0x3FFFFFFF,                          # rounds up into the next binade (2.0)
    0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF,  # largest finite: stays, tie -> inf, -> inf
    0x7F800000, 0xFF800000,              # +-inf
    0x7FC00000, 0xFFC00001, 0x7F800001, 0xFF800001, 0x7FFFFFFF,  # quiet and signalling NaNs
    0x12345678, 0x9ABCDEF0,
], dtype=np.uint32)

BF16_BITS = np.array([0x0000, 0x8000, 0x0001, 0x3F80, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFFF],
                     dtype=np.uint16)


def test_f32_to_bf16_matches_cpu():
    want = np.empty(F32_BITS.size, np.uint16)
    C._f32_to_bf16_cpu.serial(F32_BITS, want)
    d_out = cuda.device_array(F32_BITS.size, np.uint16)
    G._f32_to_bf16_cuda(cuda.to_device(F32_BITS), d_out)
    got = d_out.copy_to_host()
    assert got.tolist() == want.tolist(), [(hex(a), hex(b), hex(c)) for a, b, c in zip(F32_BITS, got, want) if b != c]


def test_bf16_to_f32_matches_cpu():
    want = np.empty(BF16_BITS.size, np.uint32)
    C._bf16_to_f32_cpu.serial(BF16_BITS, want)
    d_out = cuda.device_array(BF16_BITS.size, np.uint32)
    G._bf16_to_f32_cuda(cuda.to_device(BF16_BITS), d_out)
    assert d_out.copy_to_host().tolist() == want.tolist()
