"""The CPU backend: NumPy arrays, @njit kernels, NumPy/BLAS where they already win.

Rule for what runs where (see ARCHITECTURE.md, "What runs where"):

* same-shape contiguous elementwise arithmetic -> numbagrad's FlatKernels (a parallel
  twin doubles bandwidth on large arrays over NumPy's single-threaded loop);
* broadcasting or strided elementwise arithmetic, and transcendentals (exp, log,
  tanh: pip's llvmlite has no SVML, NumPy's SIMD loops are ~7x faster) -> NumPy ufuncs;
* matmul -> BLAS on numba's threads (``kernels/cpu/_blas.py``: one thread pool, none
  left spinning between kernels), NumPy's matmul where SciPy has no BLAS of its own;
* everything NumPy has no single call for (activation backward passes, softmax,
  scatter-add, gather, dropout, fused optimizer updates, ...) -> @njit kernels, found by
  :meth:`CPUBackend.kernel` under ``numbagrad/kernels/cpu/<family>.py``.
"""

import numpy as np

from ..device import CPU
from . import config
from .base import Backend
from .dispatch import register_backend
from ..kernels.cpu import _blas
from ..kernels.cpu import _ptr
from ..kernels.cpu import elementwise as _ew
from ..kernels.cpu import convert as _cv
from .._dtype import bfloat16 as _BF16

_HALF, _F32 = np.dtype(np.float16), np.dtype(np.float32)
_BLAS_DT = (np.float32, np.float64)
_NO_NJIT = (_HALF, _BF16)  # 2-byte floats: no CPU @njit type (NumPy's/ml_dtypes' loops)


class CPUBackend(Backend):
    """Array primitives on NumPy arrays (the contract: ``backend/base.py``)."""

    name = "cpu"
    device = CPU
    array_type = np.ndarray
    kernel_dtypes = frozenset((_F32, np.dtype(np.float64)))   # numba has no float16/bfloat16
    wide_dtypes = frozenset((_HALF, _BF16))
    zero_copy_grads = True   # the optimizer kernels read gradients through address tables
    host_memory = True
    ptr_of = _ptr._ptr_of

    # ---- kernels ---------------------------------------------------------------
    def kernel(self, family, name):
        """The CPU kernel ``_<name>_cpu`` of ``numbagrad/kernels/cpu/<family>.py``.

        Every backend answers the same (family, name) with a callable taking the same
        arguments, so an op launches ``be.kernel("activation", "relu_fwd")(x, out)``
        without knowing the device. ``name`` must be one of the family's
        ``ENTRY_POINTS`` (see ``numbagrad/kernels/__init__.py``).
        """
        k = self._kernels.get((family, name))
        return k if k is not None else self._load_kernel("cpu", family, name)

    # ---- capabilities (see backend/base.py) -------------------------------------
    @property
    def blas_provider(self):
        """``kernels/cpu/_blas.py``'s ``PROVIDER``, bound at its import."""
        return _blas.PROVIDER

    @staticmethod
    def mm_into(a, b, out):
        """``out = a @ b``: numbagrad's BLAS call (``kernels/cpu/_blas.py``: the GEMM split
        over numba's threads, no BLAS thread left spinning) for C-contiguous float32/float64
        operands of one dtype, NumPy's matmul otherwise."""
        if (type(a) is np.ndarray and a.dtype in _BLAS_DT and a.dtype == b.dtype
                and a.flags.c_contiguous and b.flags.c_contiguous):
            return _blas.mm_into(a, b, out)
        return np.matmul(a, b, out=out)

    @staticmethod
    def serial_blas():
        """SciPy's private BLAS on one thread around a loop of :meth:`mm_into` calls (each
        then runs in numba's threads, see ``kernels/cpu/_blas.py``)."""
        return _blas.serial_private_blas()

    @staticmethod
    def rows(a):
        """``list(a)``: the leading-axis views, sliced in C in one go."""
        return list(a)

    @staticmethod
    def per_sample_conv(n):
        """A batch of at least the thread count (and 2) with a private BLAS to call."""
        return n >= 2 and n >= _blas.num_threads() and _blas.private_blas_available()

    addr_of = staticmethod(_ptr._addr_of)   # ``a.ctypes.data``, ~0.2 us (``kernels/cpu/_ptr.py``)

    @staticmethod
    def host_table(a):
        return a

    @staticmethod
    def widen(a):
        """A float16/bfloat16 array as an exact float32 copy (``kernels/cpu/convert.py``)."""
        if a.dtype == _BF16:
            return _cv.from_bf16(a)
        if a.dtype == _HALF:
            return _cv.from_f16(a)
        return Backend.widen(CPU_BACKEND, a)

    @staticmethod
    def narrow_into(wide, a):
        """The float32 ``wide`` rounded to nearest even into the float16/bfloat16 ``a``."""
        if a.dtype == _BF16:
            _cv._f32_to_bf16_cpu(wide.view(np.uint32), a.view(np.uint16))
        elif a.dtype == _HALF:
            _cv._f32_to_f16_cpu(wide.view(np.uint32), a.view(np.uint16))
        else:
            Backend.narrow_into(CPU_BACKEND, wide, a)

    # ---- allocation and conversion ---------------------------------------------
    @staticmethod
    def asarray(data, dtype=None):
        return np.asarray(data, dtype=dtype)

    @staticmethod
    def array(data, dtype=None):
        """A fresh copy (never aliases ``data``)."""
        return np.array(data, dtype=dtype, copy=True)

    empty = staticmethod(np.empty)
    zeros = staticmethod(np.zeros)
    ones = staticmethod(np.ones)
    full = staticmethod(np.full)
    empty_like = staticmethod(np.empty_like)
    zeros_like = staticmethod(np.zeros_like)
    arange = staticmethod(np.arange)
    linspace = staticmethod(np.linspace)
    eye = staticmethod(np.eye)

    @staticmethod
    def to_numpy(a):
        return a

    @staticmethod
    def from_numpy(a):
        return a

    @staticmethod
    def astype(a, dtype):
        """``a`` as ``dtype``. bfloat16 <-> float32 and float16 <-> float32 by numbagrad's
        kernels (``kernels/cpu/convert.py``: round to nearest even, bit for bit ml_dtypes'
        and NumPy's casts, 3-8x faster than NumPy's scalar float16 loop); other dtypes reach
        bfloat16 through float32, as torch's CPU cast does; everything else by NumPy."""
        dtype = np.dtype(dtype)
        src = a.dtype
        if dtype is _BF16 and src is not _BF16:
            return _cv.to_bf16(a)
        if src is _BF16 and dtype is not _BF16:
            return _cv.from_bf16(a, dtype)
        if dtype is _HALF and src is _F32:
            return _cv.to_f16(a)
        if src is _HALF and dtype is _F32:
            return _cv.from_f16(a)
        return a.astype(dtype)

    @staticmethod
    def copy(a):
        out = np.empty(a.shape, a.dtype)
        if a.flags.c_contiguous and a.dtype not in _NO_NJIT:  # no float16/bfloat16 in CPU @njit
            _ew._copy_cpu(a.reshape(-1), out.reshape(-1))
        else:
            np.copyto(out, a)
        return out

    @staticmethod
    def flat(a):
        """A 1-D C-contiguous view of ``a`` (a copy only if ``a`` is strided)."""
        return np.ascontiguousarray(a).reshape(-1)

    @staticmethod
    def contiguous(a):
        """``a`` itself if C-contiguous, else a C-contiguous copy (0-d stays 0-d)."""
        return a if a.flags.c_contiguous else CPUBackend.copy(a)

    @staticmethod
    def broadcast_to(a, shape):
        return np.broadcast_to(a, shape)

    @staticmethod
    def copy_into(dst, src):
        np.copyto(dst, src, casting="unsafe")

    signbit = staticmethod(np.signbit)

    # ---- elementwise -------------------------------------------------------------
    @staticmethod
    def _binary(ufunc, kern, a, b):
        if (type(a) is np.ndarray and a.size >= config.PARALLEL_THRESHOLD and type(b) is np.ndarray
                and a.shape == b.shape and a.dtype == b.dtype and a.dtype not in _NO_NJIT
                and a.flags.c_contiguous and b.flags.c_contiguous):
            out = np.empty(a.shape, a.dtype)
            kern.parallel(a.reshape(-1), b.reshape(-1), out.reshape(-1))
            return out
        out = ufunc(a, b)
        # a ufunc of 0-d operands returns a NumPy scalar, which can't be accumulated into
        # (a CUDA operand makes the ufunc return a device array: left as it is)
        return np.asarray(out) if isinstance(out, np.generic) else out

    def add(self, a, b):
        return self._binary(np.add, _ew._add_fwd_cpu, a, b)

    def sub(self, a, b):
        return self._binary(np.subtract, _ew._sub_fwd_cpu, a, b)

    def mul(self, a, b):
        return self._binary(np.multiply, _ew._mul_fwd_cpu, a, b)

    def div(self, a, b):
        return self._binary(np.true_divide, _ew._div_fwd_cpu, a, b)

    @staticmethod
    def neg(a):
        if a.size >= config.PARALLEL_THRESHOLD and a.flags.c_contiguous and a.dtype not in _NO_NJIT:
            out = np.empty(a.shape, a.dtype)
            _ew._neg_fwd_cpu.parallel(a.reshape(-1), out.reshape(-1))
            return out
        return np.negative(a)

    @staticmethod
    def accumulate(dst, src):
        """``dst += src`` in place (gradient accumulation); ``src`` may broadcast."""
        if (dst.shape == src.shape and dst.dtype == src.dtype and dst.flags.c_contiguous
                and src.flags.c_contiguous and dst.size >= config.PARALLEL_THRESHOLD
                and dst.dtype not in _NO_NJIT):
            _ew._axpy_cpu.parallel(dst.reshape(-1), dst.dtype.type(1), src.reshape(-1))
        else:
            np.add(dst, src, out=dst, casting="unsafe")
        return dst

    @staticmethod
    def all_finite(a):
        return bool(np.isfinite(a).all())

    # ---- reductions --------------------------------------------------------------
    @staticmethod
    def sum(a, axis=None, keepdims=False, dtype=None):
        if type(a) is np.ndarray:  # the method: np.sum's wrapper costs ~0.5 us a call
            return a.sum(axis=axis, keepdims=keepdims, dtype=dtype)
        return np.sum(a, axis=axis, keepdims=keepdims, dtype=dtype)

    # ---- linear algebra ----------------------------------------------------------
    matmul = staticmethod(_blas.matmul)


def _tune_malloc():
    """Raise glibc's mmap and trim thresholds so large arrays reuse heap memory
    (see ``config.REUSE_LARGE_ALLOCS``). A no-op off glibc."""
    import ctypes
    import ctypes.util
    import sys
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(mallopt(M_MMAP_THRESHOLD, 1 << 30)) and bool(mallopt(M_TRIM_THRESHOLD, (1 << 31) - 1))


if config.REUSE_LARGE_ALLOCS:
    _tune_malloc()

CPU_BACKEND = CPUBackend()
register_backend(np.ndarray, "cpu", CPU_BACKEND)
for _t in (np.float16, _BF16.type, np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_):
    register_backend(_t, "cpu", CPU_BACKEND, holds=False)  # NumPy scalars (0-d ufunc results)
