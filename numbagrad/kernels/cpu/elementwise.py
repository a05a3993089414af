"""Flat elementwise kernels: 1-D C-contiguous arrays in, preallocated 1-D outputs.

Each is a :class:`~numbagrad.kernels._jit.FlatKernel` (serial twin below the
parallel threshold, ``prange`` twin above). Callers (the CPU backend) use them for
same-shape contiguous operands; broadcasting and strided operands go to NumPy's
ufunc loops, which already run SIMD in C.
"""
from numba import prange

from .._jit import flat_kernel

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("add_fwd", "sub_fwd", "mul_fwd", "div_fwd", "axpy", "neg_fwd", "copy")


@flat_kernel
def _add_fwd_cpu(a, b, out):
    for i in prange(out.size):
        out[i] = a[i] + b[i]


@flat_kernel
def _sub_fwd_cpu(a, b, out):
    for i in prange(out.size):
        out[i] = a[i] - b[i]


@flat_kernel
def _mul_fwd_cpu(a, b, out):
    for i in prange(out.size):
        out[i] = a[i] * b[i]


@flat_kernel
def _div_fwd_cpu(a, b, out):
    for i in prange(out.size):
        out[i] = a[i] / b[i]


@flat_kernel
def _axpy_cpu(out, alpha, x):
    """out += alpha * x, in place (gradient accumulation)."""
    for i in prange(out.size):
        out[i] += alpha * x[i]


@flat_kernel
def _neg_fwd_cpu(a, out):
    for i in prange(out.size):
        out[i] = -a[i]


@flat_kernel
def _copy_cpu(a, out):
    for i in prange(out.size):
        out[i] = a[i]


@flat_kernel
def _mul_mask(g, x, out):
    """out = g where x > 0 else 0 (the backward of relu and of abs-like kinks)."""
    for i in prange(out.size):
        out[i] = g[i] if x[i] > 0 else 0.0
