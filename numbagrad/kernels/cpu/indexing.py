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

Each kernel is a :class:`~numbagrad.kernels._jit.TwinKernel`: a serial build for small work and a ``prange`` build
above ``config.PARALLEL_THRESHOLD`` elements of work. Gather-like kernels (each output
element written once) parallelise over ``a`` or over the indices, whichever is longer.

Every op of the family runs its kernel: against NumPy's calls (``np.add.at``,
``np.take_along_axis``, ``np.take``) it won every case measured but one, ``index_select``
along the last axis, where NumPy is within 20%; ``index_add`` (1, 10000, 256) with 4096
indices takes 600 us against 7100 us for ``np.add.at`` (the table: ``perf/README.md``,
"Measurement notes", ``kernels/cpu/indexing.py``). ``np.add.at`` remains only as the
general fallback of advanced-indexing backward (several index arrays).
"""
from numba import prange

from .._jit import cpu_jit, scalar_helper, twin_kernel

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "gather_fwd", "scatter_add_fwd", "scatter_fwd", "scatter_fill_fwd", "index_select_fwd",
    "index_add_fwd", "embedding_fwd", "embedding_bwd", "one_hot_fwd",
)

# Width of the b-blocks the scatter kernels split their rows into across threads.
_BLK = 128




# ---- gather / scatter (index has the shape of the output / source) -----------------------
# gather and index_select are one loop over the (a, i) rows of the output, parallel over a or
# over the indices, whichever is longer; ``_take_row`` copies one row (the code, a closure
# constant of ``_gather_pass``, picks the index form: numba compiles only its branch).
# NOTE: the factories here append the code to the pass's qualified name, so each pass has its
# own numba cache files (why: ``fused.py``'s note).
_PER_ELEMENT, _PER_ROW = range(2)


@scalar_helper
def _take_row(code, x, index, out, a, i):
    """out[a, i, :] = x[a, index[a, i, :], :] (``_PER_ELEMENT``, gather) or
    x[a, index[i], :] (``_PER_ROW``, index_select)."""
    if code == _PER_ELEMENT:
        for b in range(out.shape[2]):
            out[a, i, b] = x[a, index[a, i, b], b]
    else:
        r = index[i]
        for b in range(out.shape[2]):
            out[a, i, b] = x[a, r, b]


def _gather_pass(code):
    """The gather-like kernel ``(x, index, out)`` of ``code`` (see :func:`_take_row`)."""
    def gather_pass(x, index, out):
        A, M = out.shape[0], out.shape[1]
        if A >= M:
            for a in prange(A):
                for i in range(M):
                    _take_row(code, x, index, out, a, i)
        else:
            for i in prange(M):
                for a in range(A):
                    _take_row(code, x, index, out, a, i)
    gather_pass.__qualname__ += f"_{code}"   # its own cache files (the NOTE above)
    return twin_kernel(work=2)(gather_pass)


_gather_fwd_cpu = _gather_pass(_PER_ELEMENT)     # out[a, i, b] = x[a, index[a, i, b], b]


@scalar_helper
def _nblocks(B):
    """The number of ``_BLK``-wide blocks a row of ``B`` columns is split into."""
    return (B + _BLK - 1) // _BLK


@scalar_helper
def _task_block(t, nb, B):
    """``(a, b0, b1)``: task ``t`` of a ``prange`` over ``A * nb`` tasks is row ``a``'s column
    block ``[b0, b1)``."""
    a = t // nb
    b0 = (t - a * nb) * _BLK
    return a, b0, min(b0 + _BLK, B)


_ADD, _SET, _FILL = range(3)


def _scatter_pass(code):
    """The scatter kernel ``(out, index, src)`` of ``code`` (a closure constant: numba
    compiles only its branch; its own cache files, see ``fused.py``'s note):
    ``out[a, index[a, i, b], b]`` ``+= src[a, i, b]`` (``_ADD``: duplicates accumulate),
    ``= src[a, i, b]`` (``_SET``: the last duplicate wins) or ``= src`` (``_FILL``, a scalar)."""
    def scatter_pass(out, index, src):
        A, M, B = index.shape
        nb = _nblocks(B)
        for t in prange(A * nb):
            a, b0, b1 = _task_block(t, nb, B)
            for i in range(M):
                for b in range(b0, b1):
                    if code == _ADD:
                        out[a, index[a, i, b], b] += src[a, i, b]
                    elif code == _SET:
                        out[a, index[a, i, b], b] = src[a, i, b]
                    else:
                        out[a, index[a, i, b], b] = src
    scatter_pass.__qualname__ += f"_{code}"   # its own cache files (the NOTE above)
    return twin_kernel(work=1)(scatter_pass)


_scatter_add_fwd_cpu = _scatter_pass(_ADD)     # out[a, index[a, i, b], b] += src[a, i, b]
_scatter_fwd_cpu = _scatter_pass(_SET)         # out[a, index[a, i, b], b] = src[a, i, b]
_scatter_fill = _scatter_pass(_FILL)


def _scatter_fill_fwd_cpu(out, index, value):
    """out[a, index[a, i, b], b] = value (also zeroes the scattered positions of a gradient)."""
    _scatter_fill(out, index, value)


# ---- index_select / index_add (one 1-D index along the middle axis) ------------------------
_index_select_fwd_cpu = _gather_pass(_PER_ROW)     # out[a, i, b] = x[a, index[i], b]


@twin_kernel(work=2)
def _index_add_fwd_cpu(out, index, src, alpha):
    """out[a, index[i], b] += alpha * src[a, i, b] (duplicates accumulate).

    Also the backward of index_select, of advanced getitem with one integer index, and
    (with A == 1) the row scatter-add ``out[index[i], :] += src[i, :]``.
    """
    A, M, B = src.shape
    nb = _nblocks(B)
    for t in prange(A * nb):
        a, b0, b1 = _task_block(t, nb, B)
        for i in range(M):
            r = index[i]
            for b in range(b0, b1):
                out[a, r, b] += alpha * src[a, i, b]


# ---- embedding and one_hot ----------------------------------------------------------------
@twin_kernel(work=2)
def _embedding_fwd_cpu(weight, index, out):
    """out[i, :] = weight[index[i], :] for a flat index and a 2-D output."""
    M, D = out.shape
    for i in prange(M):
        r = index[i]
        for d in range(D):
            out[i, d] = weight[r, d]


@twin_kernel(work=2)
def _embedding_bwd_cpu(grad_weight, index, grad, padding_idx):
    """grad_weight[index[i], :] += grad[i, :], skipping rows equal to padding_idx
    (pass -1 for none). Parallel over column blocks, serial over the indices."""
    M, D = grad.shape
    nb = _nblocks(D)
    for t in prange(nb):
        _, d0, d1 = _task_block(t, nb, D)
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
