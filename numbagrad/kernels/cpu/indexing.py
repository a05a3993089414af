"""Indexing kernels: gather / scatter / index_select / index_add / embedding / one_hot.

Every kernel works on a canonical 3-D view ``(A, N, B)`` of its tensor, where the op's
dimension ``dim`` is the middle axis: ``A = prod(shape[:dim])``, ``N = shape[dim]``,
``B = prod(shape[dim+1:])``. Callers (``numbagrad/ops/indexing.py``) pass C-contiguous
arrays reshaped that way, int64 indices that are already checked to lie in ``[0, N)``,
and preallocated outputs; nothing is allocated here.

Races: a scatter writes ``out[a, index[...], b]``, so two iterations with different
``(a, b)`` never touch the same element. The parallel loops therefore run over ``a``
and over blocks of ``b`` while the loop over the (possibly duplicated) indices stays
serial inside each task: scatter-add with duplicate indices is race-free and
deterministic (same summation order as the serial twin).

Each kernel is a :class:`_Twin`: a serial build for small work and a ``prange`` build
above ``config.PARALLEL_THRESHOLD`` elements of work. Gather-like kernels (each output
element written once) parallelise over ``a`` or over the indices, whichever is longer.

Measured choices (float32, best of 30, 2-core CPU; ``(A, N, B)`` and M indices):

==================================  =========  ========  ======================
case: (A, N, B), M indices          kernel     NumPy     NumPy call
==================================  =========  ========  ======================
index_add (1, 10000, 256), 4096     600 us     7100 us   ``np.add.at``
index_add (512, 1000, 1), 500       233 us     2340 us   ``np.add.at``
gather (1, 10000, 256), 4096        1080 us    9830 us   ``np.take_along_axis``
gather (64, 1000, 16), 500          432 us     1560 us   ``np.take_along_axis``
index_select (1, 10000, 256), 4096  172 us     330 us    ``np.take``
index_select (512, 1000, 1), 500    237 us     198 us    ``np.take``
any of these at (1, 100, 8), 50     0.6-0.9us  0.9-5 us  (call overhead)
==================================  =========  ========  ======================

So every op of the family runs its kernel; the only case where NumPy is slightly ahead
(``index_select`` along the last axis) is within 20%. ``np.add.at`` remains only as the
general fallback of advanced-indexing backward (several index arrays).
"""
from numba import prange

from ...backend import config
from .._jit import FlatKernel, cpu_jit

# Width of the b-blocks the scatter kernels split their rows into across threads.
_BLK = 128


class _Twin(FlatKernel):
    """:class:`~numbagrad.kernels._jit.FlatKernel`'s twins for N-d arrays: the work size is
    ``args[work].size``."""

    __slots__ = ("work",)

    def __init__(self, fn, work):
        super().__init__(fn)
        self.work = work

    def __call__(self, *args):
        if args[self.work].size >= config.PARALLEL_THRESHOLD:
            return self.parallel(*args)
        return self.serial(*args)


def _twin(work):
    return lambda fn: _Twin(fn, work)


# ---- gather / scatter (index has the shape of the output / source) -----------------------
@_twin(work=2)
def _gather_fwd_cpu(x, index, out):
    """out[a, i, b] = x[a, index[a, i, b], b]."""
    A, M, B = out.shape
    if A >= M:
        for a in prange(A):
            for i in range(M):
                for b in range(B):
                    out[a, i, b] = x[a, index[a, i, b], b]
    else:
        for i in prange(M):
            for a in range(A):
                for b in range(B):
                    out[a, i, b] = x[a, index[a, i, b], b]


@_twin(work=1)
def _scatter_add_fwd_cpu(out, index, src):
    """out[a, index[a, i, b], b] += src[a, i, b] (duplicates accumulate)."""
    A, M, B = index.shape
    nb = (B + _BLK - 1) // _BLK
    for t in prange(A * nb):
        a = t // nb
        b0 = (t - a * nb) * _BLK
        b1 = min(b0 + _BLK, B)
        for i in range(M):
            for b in range(b0, b1):
                out[a, index[a, i, b], b] += src[a, i, b]


@_twin(work=1)
def _scatter_fwd_cpu(out, index, src):
    """out[a, index[a, i, b], b] = src[a, i, b] (the last duplicate wins)."""
    A, M, B = index.shape
    nb = (B + _BLK - 1) // _BLK
    for t in prange(A * nb):
        a = t // nb
        b0 = (t - a * nb) * _BLK
        b1 = min(b0 + _BLK, B)
        for i in range(M):
            for b in range(b0, b1):
                out[a, index[a, i, b], b] = src[a, i, b]


@_twin(work=1)
def _scatter_fill_fwd_cpu(out, index, value):
    """out[a, index[a, i, b], b] = value (also zeroes the scattered positions of a gradient)."""
    A, M, B = index.shape
    nb = (B + _BLK - 1) // _BLK
    for t in prange(A * nb):
        a = t // nb
        b0 = (t - a * nb) * _BLK
        b1 = min(b0 + _BLK, B)
        for i in range(M):
            for b in range(b0, b1):
                out[a, index[a, i, b], b] = value


# ---- index_select / index_add (one 1-D index along the middle axis) ------------------------
@_twin(work=2)
def _index_select_fwd_cpu(x, index, out):
    """out[a, i, b] = x[a, index[i], b]."""
    A, M, B = out.shape
    if A >= M:
        for a in prange(A):
            for i in range(M):
                r = index[i]
                for b in range(B):
                    out[a, i, b] = x[a, r, b]
    else:
        for i in prange(M):
            r = index[i]
            for a in range(A):
                for b in range(B):
                    out[a, i, b] = x[a, r, b]


@_twin(work=2)
def _index_add_fwd_cpu(out, index, src, alpha):
    """out[a, index[i], b] += alpha * src[a, i, b] (duplicates accumulate).

    Also the backward of index_select, of advanced getitem with one integer index, and
    (with A == 1) the row scatter-add ``out[index[i], :] += src[i, :]``.
    """
    A, M, B = src.shape
    nb = (B + _BLK - 1) // _BLK
    for t in prange(A * nb):
        a = t // nb
        b0 = (t - a * nb) * _BLK
        b1 = min(b0 + _BLK, B)
        for i in range(M):
            r = index[i]
            for b in range(b0, b1):
                out[a, r, b] += alpha * src[a, i, b]


# ---- embedding and one_hot ----------------------------------------------------------------
@_twin(work=2)
def _embedding_fwd_cpu(weight, index, out):
    """out[i, :] = weight[index[i], :] for a flat index and a 2-D output."""
    M, D = out.shape
    for i in prange(M):
        r = index[i]
        for d in range(D):
            out[i, d] = weight[r, d]


@_twin(work=2)
def _embedding_bwd_cpu(grad_weight, index, grad, padding_idx):
    """grad_weight[index[i], :] += grad[i, :], skipping rows equal to padding_idx
    (pass -1 for none). Parallel over column blocks, serial over the indices."""
    M, D = grad.shape
    nb = (D + _BLK - 1) // _BLK
    for t in prange(nb):
        d0 = t * _BLK
        d1 = min(d0 + _BLK, D)
        for i in range(M):
            r = index[i]
            if r == padding_idx:
                continue
            for d in range(d0, d1):
                grad_weight[r, d] += grad[i, d]


@cpu_jit
def _one_hot_fwd_cpu(index, out):
    """out[i, index[i]] = 1 for a zero-filled 2-D output."""
    for i in range(index.shape[0]):
        out[i, index[i]] = 1
