"""Reductions over one 1-D view (a row), shared by the CPU kernels of several families.

Each keeps eight independent accumulators (running maxima): without ``fastmath`` LLVM may
not reorder a float sum, and one accumulator runs at the add latency. The eight are
combined pairwise, ``((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7))``, then the tail is added
in order, so a result's bits depend only on the row, not on the caller.

Every helper is a :func:`~numbagrad.kernels._jit.cpu_helper`: called, and inlined by
LLVM, not by numba (``vmax`` calls ``_larger`` 15 times: numba-level inlining made
the max of a row in ``loss.py`` take 0.47 s to compile, calls 0.26 s, the same machine
code speed). ``loss.py``'s ``prange`` bodies call them too (see its module docstring:
compile time).
"""
from .._jit import cpu_helper


@cpu_helper
def _larger(m, v):
    """``v`` if it is greater than the running maximum ``m``, else ``m`` (a NaN ``v`` never
    replaces ``m``)."""
    return v if v > m else m


@cpu_helper
def vmax(a):
    """max of a (1-D, at least one element). NaNs are skipped here (a NaN never replaces a
    running maximum); callers let them propagate through ``a - max``."""
    n = a.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = a[0]
    j = 0
    while j + 8 <= n:
        m0 = _larger(m0, a[j])
        m1 = _larger(m1, a[j + 1])
        m2 = _larger(m2, a[j + 2])
        m3 = _larger(m3, a[j + 3])
        m4 = _larger(m4, a[j + 4])
        m5 = _larger(m5, a[j + 5])
        m6 = _larger(m6, a[j + 6])
        m7 = _larger(m7, a[j + 7])
        j += 8
    m = _larger(_larger(_larger(m0, m1), _larger(m2, m3)), _larger(_larger(m4, m5), _larger(m6, m7)))
    while j < n:
        m = _larger(m, a[j])
        j += 1
    return m


@cpu_helper
def vsum(a, z):
    """sum of a (1-D), accumulated in the type of the zero ``z`` (``a.dtype.type(0)``: the
    array's dtype; ``0.0``: float64)."""
    n = a.shape[0]
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
    j = 0
    while j + 8 <= n:
        s0 += a[j]
        s1 += a[j + 1]
        s2 += a[j + 2]
        s3 += a[j + 3]
        s4 += a[j + 4]
        s5 += a[j + 5]
        s6 += a[j + 6]
        s7 += a[j + 7]
        j += 8
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        s += a[j]
        j += 1
    return s


@cpu_helper
def vdot_dev(g, a, m):
    """sum of g * (a - m) (1-D, same length), accumulated in the type of ``g * (a - m)``
    (numba widens the zero's type to it): ``m = 0.0`` gives float64 products of float32
    rows, a zero of the arrays' dtype a plain dot product (LLVM drops the ``- 0``)."""
    n = a.shape[0]
    z = a.dtype.type(0)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
    j = 0
    while j + 8 <= n:
        s0 += g[j] * (a[j] - m)
        s1 += g[j + 1] * (a[j + 1] - m)
        s2 += g[j + 2] * (a[j + 2] - m)
        s3 += g[j + 3] * (a[j + 3] - m)
        s4 += g[j + 4] * (a[j + 4] - m)
        s5 += g[j + 5] * (a[j + 5] - m)
        s6 += g[j + 6] * (a[j + 6] - m)
        s7 += g[j + 7] * (a[j + 7] - m)
        j += 8
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        s += g[j] * (a[j] - m)
        j += 1
    return s


@cpu_helper
def vsqdev(a, m):
    """sum of (a - m)**2 (1-D), accumulated in a's dtype."""
    n = a.shape[0]
    z = a.dtype.type(0)
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = z
    j = 0
    while j + 8 <= n:
        d0 = a[j] - m
        d1 = a[j + 1] - m
        d2 = a[j + 2] - m
        d3 = a[j + 3] - m
        d4 = a[j + 4] - m
        d5 = a[j + 5] - m
        d6 = a[j + 6] - m
        d7 = a[j + 7] - m
        s0 += d0 * d0
        s1 += d1 * d1
        s2 += d2 * d2
        s3 += d3 * d3
        s4 += d4 * d4
        s5 += d5 * d5
        s6 += d6 * d6
        s7 += d7 * d7
        j += 8
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while j < n:
        d = a[j] - m
        s += d * d
        j += 1
    return s
