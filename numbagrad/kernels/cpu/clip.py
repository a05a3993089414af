"""Multi-tensor gradient kernels for ``nn.utils.clip_grad_norm_`` / ``clip_grad_value_``:
one kernel call reduces (or scales, or clamps) every gradient of a list, whatever its length.

Contract (the CUDA twins in ``kernels/cuda/clip.py`` take the same arguments)
--------------------------------------------------------------------------
``grads`` is a list of C-contiguous arrays of one float dtype (float32 or float64 here; any
shapes). ``_grad_norm_cpu(grads, norm_type, out)`` writes the ``norm_type`` vector norm of
all their elements together, computed in float64, into ``out[0]`` (a 1-element float64
array): ``(sum |g|^p)^(1/p)``; ``inf`` / ``-inf``: the max / min of ``|g|``; ``0``: the
number of arrays with a non-zero element (PyTorch's norm of the per-tensor norms). NaN
propagates. ``_grad_scale_cpu(grads, total, max_norm)``
reads the total norm from ``total[0]`` (a 1-element array of the norm's dtype, float32 or
float64), computes PyTorch's clip coefficient in that dtype,
``min(max_norm * (1 / (total + 1e-6)), 1)``, and multiplies every gradient by it (rounded
to the gradients' dtype). A coefficient of exactly 1 changes nothing, so the pass is
skipped. ``_grad_clamp_cpu(grads, lo, hi)`` clamps every element into ``[lo, hi]`` (NaN
stays NaN). The launchers return nothing.

How the list reaches one kernel
-------------------------------
The launcher passes a table of the arrays' data addresses (``int64``, from
``array.ctypes.data``), their sizes and their prefix offsets; inside the kernel each entry
becomes an array again (``numba.carray`` over the address). Measured on this machine, 50
small float32 arrays, per call: address table 49 us (``ctypes.data`` costs ~1 us an
array), ``numba.typed.List(arrays)`` 72 us to build, a tuple of arrays 6 us but one
compilation per tuple length (every model would compile its own kernel, and heterogeneous
dimensions compile per combination). So: the address table, and a small cache of tables
keyed by the arrays' ids and checked through weak references, which makes repeated calls
on the same arrays (gradients living in the optimizer's arena, see
``numbagrad/optim/optimizer.py``) cost ~10 us. When the arrays tile one contiguous span of
memory (the arena of a parameter group, taken whole, in any order), the table collapses to
that single span and the kernel runs over one flat array.

The element range ``[0, total)`` (arrays back to back) is cut into ``nchunk`` equal chunks
(one ``prange`` task each, ``nchunk`` from the total only, so results are deterministic);
a chunk finds its first array by binary search over the offsets and walks the arrays it
covers. Reductions sum in float64 with ``fastmath={'reassoc', 'contract'}`` (see
``reduction_jit``: LLVM then vectorises them) and write one partial per chunk; the launcher
combines the partials. Below ``config.PARALLEL_THRESHOLD`` elements the serial twins run.
"""
import math
import weakref

import numpy as np
from numba import carray, prange

from .._clip_common import _empty_norm, _norm_mode, clip_coef
from .._jit import FlatKernel, cpu_jit, reduction_jit
from ._ptr import _ptr_of

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = ("grad_norm", "grad_scale", "grad_clamp")

__all__ = ["_grad_norm_cpu", "_grad_scale_cpu", "_grad_clamp_cpu"]

# Elements per prange task (a chunk): the total is split into ceil(total / _CHUNK) chunks, at
# most _MAX_CHUNKS (then chunks grow).
_CHUNK = 1 << 16
_MAX_CHUNKS = 256


# ---- per-span reductions -------------------------------------------------------------------------
@reduction_jit
def sumsq(a):
    s = 0.0
    for j in range(a.size):
        x = np.float64(a[j])
        s += x * x
    return s


@reduction_jit
def _sumabs(a):
    s = 0.0
    for j in range(a.size):
        s += abs(np.float64(a[j]))
    return s


@cpu_jit
def _sumpow(a, p):
    s = 0.0
    for j in range(a.size):
        s += abs(np.float64(a[j])) ** p
    return s


@cpu_jit
def _maxabs(a, m, want_max):
    """max (or min) of ``m`` and ``|a|``; NaN wins."""
    if m != m:
        return m
    for j in range(a.size):
        v = abs(np.float64(a[j]))
        if v != v:
            return v
        if want_max:
            if v > m:
                m = v
        elif v < m:
            m = v
    return m


@cpu_jit
def _scale_span(s, coef):
    for i in range(s.size):
        s[i] = s[i] * coef


@cpu_jit
def _clamp_span(s, lo_v, hi_v):
    for i in range(s.size):
        v = s[i]
        if v < lo_v:   # max first, then min: lo > hi gives hi, as torch.clamp
            v = lo_v
        if v > hi_v:
            v = hi_v
        s[i] = v


# ---- walking the arrays of a chunk --------------------------------------------------------------
@cpu_jit
def _chunk(offs, c, nchunk):
    """Chunk ``c`` of ``nchunk`` of the element range: ``(lo, hi, k)``, ``k`` the array
    holding element ``lo``."""
    total = offs[offs.size - 1]
    lo = total * c // nchunk
    hi = total * (c + 1) // nchunk
    return lo, hi, np.searchsorted(offs, lo, side="right") - 1


@cpu_jit
def _piece(ptrs, offs, like, k, lo, hi):
    """Elements ``[lo, min(hi, end of array k))`` of array ``k`` (``lo`` at or past its
    start) as a view of it (empty for an empty array), and where they end."""
    base = offs[k]
    e = min(hi, offs[k + 1])
    a = carray(_ptr_of(ptrs[k], like), (offs[k + 1] - base,))
    return a[lo - base:e - base], e


def _norm_chunks(ptrs, offs, like, mode, p, part):
    """``part[c]`` = the reduction of chunk ``c`` of the concatenated arrays.

    ``mode``: 0 sum of squares, 1 sum of ``|g|``, 2 sum of ``|g|^p``, 4 max ``|g|``, 5 min
    ``|g|``."""
    nchunk = part.size
    for c in prange(nchunk):
        lo, hi, k = _chunk(offs, c, nchunk)
        acc = np.inf if mode == 5 else 0.0
        while lo < hi:
            s, lo = _piece(ptrs, offs, like, k, lo, hi)
            k += 1
            if mode == 0:
                acc += sumsq(s)
            elif mode == 1:
                acc += _sumabs(s)
            elif mode == 2:
                acc += _sumpow(s, p)
            else:
                acc = _maxabs(s, acc, mode == 4)
        part[c] = acc


def _map_chunks(ptrs, offs, like, clamp, a, b):
    """Every element in place: multiplied by ``a`` (``clamp`` false) or clamped into
    ``[a, b]``."""
    total = offs[offs.size - 1]
    nchunk = (total + 65535) // 65536
    for c in prange(nchunk):
        lo, hi, k = _chunk(offs, c, nchunk)
        while lo < hi:
            s, lo = _piece(ptrs, offs, like, k, lo, hi)
            k += 1
            if clamp:
                _clamp_span(s, a, b)
            else:
                _scale_span(s, a)


# FlatKernel's twins, chosen by the element total the launcher passes (.pick), not args[0]
_NORM = FlatKernel(_norm_chunks)
_MAP = FlatKernel(_map_chunks)


# ---- address tables -------------------------------------------------------------------------------
_TABLES = {}
_TABLES_MAX = 16


def _table(grads):
    """``(ptrs, offs, like)`` for the arrays ``grads`` (see the module docstring)."""
    key = tuple(map(id, grads))
    hit = _TABLES.get(key)
    if hit is not None:
        refs, table = hit
        if all(r() is g for r, g in zip(refs, grads)):
            return table
    addrs = [g.ctypes.data for g in grads]
    sizes = [g.size for g in grads]
    isz = grads[0].itemsize
    table = None
    if len(grads) > 1:
        # one contiguous span (an optimizer arena, whole)? then a single entry
        order = sorted(range(len(grads)), key=addrs.__getitem__)
        pos = addrs[order[0]]
        for i in order:
            if addrs[i] != pos:
                break
            pos += sizes[i] * isz
        else:
            total = (pos - addrs[order[0]]) // isz
            table = (np.array([addrs[order[0]]], np.int64), np.array([0, total], np.int64))
    if table is None:
        offs = np.zeros(len(grads) + 1, np.int64)
        np.cumsum(sizes, out=offs[1:])
        table = (np.array(addrs, np.int64), offs)
    table = table + (grads[0].reshape(-1)[:0],)
    if len(_TABLES) >= _TABLES_MAX:
        _TABLES.clear()
    _TABLES[key] = ([weakref.ref(g) for g in grads], table)
    return table


def _nchunks(total):
    return int(max(1, min(_MAX_CHUNKS, -(-total // _CHUNK))))


# ---- launchers ------------------------------------------------------------------------------------
def _grad_norm_cpu(grads, norm_type, out):
    """``out[0]`` = the ``norm_type`` norm of all elements of ``grads`` (float64)."""
    p = float(norm_type)
    mode = _norm_mode(p)
    if not grads:
        out[0] = _empty_norm(mode)
        return
    if mode == 3:
        # PyTorch takes the norm of the per-tensor norms: for p = 0, the number of
        # gradients with a non-zero element (NaN counts as non-zero)
        out[0] = float(sum(1 for g in grads if np.count_nonzero(g)))
        return
    ptrs, offs, like = _table(grads)
    total = int(offs[-1])
    part = np.empty(_nchunks(total), np.float64)
    _NORM.pick(total)(ptrs, offs, like, mode, p, part)
    if mode == 4:
        r = np.nan if np.isnan(part).any() else part.max()
    elif mode == 5:
        r = np.nan if np.isnan(part).any() else part.min()
    else:
        s = math.fsum(part) if not np.isnan(part).any() else np.nan
        if mode == 0:
            r = math.sqrt(s) if s == s else s
        elif mode == 1:
            r = s
        else:
            r = s ** (1.0 / p) if s == s else s
    out[0] = r


def _grad_scale_cpu(grads, total, max_norm):
    """Multiply every gradient by ``min(max_norm / (total[0] + 1e-6), 1)`` (see above)."""
    if not grads:
        return
    c = clip_coef(total, max_norm)
    if c == 1:
        return  # multiplying by exactly 1 changes no element (NaN and inf included)
    ptrs, offs, like = _table(grads)
    total_n = int(offs[-1])
    coef = like.dtype.type(c)
    _MAP.pick(total_n)(ptrs, offs, like, False, coef, coef)


def _grad_clamp_cpu(grads, lo, hi):
    """Clamp every element of ``grads`` into ``[lo, hi]`` in place."""
    if not grads:
        return
    ptrs, offs, like = _table(grads)
    t = like.dtype.type
    _MAP.pick(int(offs[-1]))(ptrs, offs, like, True, t(lo), t(hi))
