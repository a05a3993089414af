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
import importlib

import numpy as np

from ..device import CPU
from . import config
from .dispatch import register_backend
from ..kernels.cpu import _blas
from ..kernels.cpu import elementwise as _ew
from ..kernels.cpu import convert as _cv
from .._dtype import bfloat16 as _BF16

_HALF, _F32 = np.dtype(np.float16), np.dtype(np.float32)
_NO_NJIT = (_HALF, _BF16)  # 2-byte floats: no CPU @njit type (NumPy's/ml_dtypes' loops)


class CPUBackend:
    """Array primitives on NumPy arrays. The CUDA backend mirrors these names."""

    name = "cpu"
    device = CPU
    array_type = np.ndarray

    def __init__(self):
        self._kernels = {}

    # ---- kernels ---------------------------------------------------------------
    def kernel(self, family, name):
        """The CPU kernel ``_<name>_cpu`` of ``numbagrad/kernels/cpu/<family>.py``.

        Every backend answers the same (family, name) with a callable taking the same
        arguments, so an op launches ``be.kernel("activation", "relu_fwd")(x, out)``
        without knowing the device.
        """
        key = (family, name)
        k = self._kernels.get(key)
        if k is None:
            mod = importlib.import_module(f"numbagrad.kernels.cpu.{family}")
            k = self._kernels[key] = getattr(mod, f"_{name}_cpu")
        return k

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

    # ---- elementwise -------------------------------------------------------------
    @staticmethod
    def _binary(ufunc, kern, a, b):
        if (type(a) is np.ndarray and type(b) is np.ndarray and a.shape == b.shape
                and a.dtype == b.dtype and a.size >= config.PARALLEL_THRESHOLD and a.dtype not in _NO_NJIT
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

    pow = staticmethod(np.power)
    remainder = staticmethod(np.remainder)
    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    sqrt = staticmethod(np.sqrt)
    abs = staticmethod(np.abs)
    sign = staticmethod(np.sign)
    sin = staticmethod(np.sin)
    cos = staticmethod(np.cos)
    tanh = staticmethod(np.tanh)
    log1p = staticmethod(np.log1p)
    expm1 = staticmethod(np.expm1)
    floor = staticmethod(np.floor)
    ceil = staticmethod(np.ceil)
    round = staticmethod(np.round)
    trunc = staticmethod(np.trunc)
    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    clip = staticmethod(np.clip)
    where = staticmethod(np.where)
    equal = staticmethod(np.equal)
    not_equal = staticmethod(np.not_equal)
    less = staticmethod(np.less)
    less_equal = staticmethod(np.less_equal)
    greater = staticmethod(np.greater)
    greater_equal = staticmethod(np.greater_equal)
    logical_and = staticmethod(np.logical_and)
    logical_or = staticmethod(np.logical_or)
    logical_not = staticmethod(np.logical_not)
    logical_xor = staticmethod(np.logical_xor)
    isnan = staticmethod(np.isnan)
    isinf = staticmethod(np.isinf)
    isfinite = staticmethod(np.isfinite)

    @staticmethod
    def all_finite(a):
        return bool(np.isfinite(a).all())

    # ---- reductions --------------------------------------------------------------
    @staticmethod
    def sum(a, axis=None, keepdims=False, dtype=None):
        return np.sum(a, axis=axis, keepdims=keepdims, dtype=dtype)

    prod = staticmethod(np.prod)
    amax = staticmethod(np.max)
    amin = staticmethod(np.min)
    argmax = staticmethod(np.argmax)
    argmin = staticmethod(np.argmin)
    any = staticmethod(np.any)
    all = staticmethod(np.all)

    @staticmethod
    def sum_to_shape(g, shape):
        """Sum a broadcast gradient ``g`` back down to ``shape`` (the backward of broadcasting)."""
        if g.shape == shape:
            return g
        lead = g.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
        r = np.sum(g, axis=axes, keepdims=True) if axes else g
        if lead:
            r = r.reshape(r.shape[lead:])
        return r.reshape(shape)

    # ---- linear algebra ----------------------------------------------------------
    matmul = staticmethod(_blas.matmul)

    @staticmethod
    def dot_t(a, b, trans_a=False, trans_b=False):
        """``op(a) @ op(b)`` for 2-D arrays through BLAS, transposes as views."""
        return _blas.matmul(a.T if trans_a else a, b.T if trans_b else b)

    # ---- shape -------------------------------------------------------------------
    reshape = staticmethod(np.reshape)
    transpose = staticmethod(np.transpose)
    concatenate = staticmethod(np.concatenate)
    stack = staticmethod(np.stack)
    pad = staticmethod(np.pad)
    expand_dims = staticmethod(np.expand_dims)
    squeeze = staticmethod(np.squeeze)
    moveaxis = staticmethod(np.moveaxis)
    take = staticmethod(np.take)
    take_along_axis = staticmethod(np.take_along_axis)


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
    register_backend(_t, "cpu", CPU_BACKEND)  # NumPy scalars (0-d ufunc results)
