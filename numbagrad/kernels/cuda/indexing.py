"""CUDA twins of ``kernels/cpu/indexing.py``: gather / scatter / index_select / index_add /
embedding / one_hot.

Contract (as the CPU twins): every kernel works on the canonical 3-D view ``(A, N, B)``
of its tensor, ``dim`` being the middle axis; callers (``numbagrad/ops/indexing.py``)
pass C-contiguous arrays reshaped that way, int64 indices already checked to lie in
``[0, N)``, and preallocated outputs. Nothing is checked and nothing is returned,
exactly as on the CPU; only ``scatter_fwd``'s claim scheme allocates a device scratch.

=====================  ===========================================  ======================
launcher               computes                                     one thread per
=====================  ===========================================  ======================
gather_fwd             ``out[a,i,b] = x[a, index[a,i,b], b]``       output element
scatter_add_fwd        ``out[a, index[a,i,b], b] += src[a,i,b]``    source element (atomic)
scatter_fwd            ``out[a, index[a,i,b], b] = src[a,i,b]``     column, or element
scatter_fill_fwd       ``out[a, index[a,i,b], b] = value``          index element
index_select_fwd       ``out[a,i,b] = x[a, index[i], b]``           output element
index_add_fwd          ``out[a, index[i], b] += alpha*src[a,i,b]``  source element (atomic)
embedding_fwd          ``out[i,:] = weight[index[i],:]``            output element
embedding_bwd          ``grad_weight[index[i],:] += grad[i,:]``     grad element (atomic)
one_hot_fwd            ``out[i, index[i]] = 1``                     index element
=====================  ===========================================  ======================

Design
------
* Flat grid-stride kernels; a flat element number ``k`` is split into ``(a, i, b)``
  with two integer divisions (the loop is generated once, :func:`_grid_kernel`; each
  kernel's work is a device function of one index).
* Accumulating scatters (scatter_add, index_add, embedding backward) use
  ``cuda.atomic.add``: duplicate indices accumulate correctly, but in an unspecified
  order, so float results may differ from the CPU's serial order in the last bits.
* ``scatter_fwd``: the CPU lets the last duplicate win, and so do both CUDA schemes
  (deterministic, equal to the CPU). With many columns ``(a, b)``, or short ones, one
  thread per column walks ``i`` in order. With few, long columns (e.g. a 1-D scatter,
  ``A = B = 1``) that would serialise the work, so instead every source element
  claims its target with ``cuda.atomic.max`` of its ``i`` in an int32 scratch shaped
  like ``out`` (filled with -1 first), and a second pass writes the winners. The
  scratch is used only when it is not much larger than ``index`` (``_CLAIM_MAX_RATIO``).
* NOTE float16: numba-cuda 0.30 has no atomic add on float16 arrays (nor a 16-bit CAS).
  For float16 (and any dtype without an atomic add, e.g. int8 or bool) the accumulating
  kernels fall back to the race-free CPU scheme: one thread per column ``(a, b)`` (per
  embedding column ``d``) walking the indices in order, reading half values, adding in
  float32 and storing back. Deterministic (the CPU's summation order), but with only
  ``A*B`` (``D``) threads of parallelism. (A faster half path would be a CAS loop on the
  containing 32-bit word, which needs a uint32 view of the array.)
"""
import numpy as np
from numba import cuda
from numba import types as nbtypes

from ._launch import scratch, FLOAT_TYPES, cuda_kernel, device_fn, grid_kernel, launch

# the names be.kernel(family, name) resolves (see numbagrad/kernels/__init__.py)
ENTRY_POINTS = (
    "gather_fwd", "scatter_add_fwd", "scatter_fwd", "scatter_fill_fwd", "index_select_fwd",
    "index_add_fwd", "embedding_fwd", "embedding_bwd", "one_hot_fwd",
)

__all__ = ["_gather_fwd_cuda", "_scatter_add_fwd_cuda", "_scatter_fwd_cuda", "_scatter_fill_fwd_cuda",
           "_index_select_fwd_cuda", "_index_add_fwd_cuda", "_embedding_fwd_cuda", "_embedding_bwd_cuda",
           "_one_hot_fwd_cuda"]

# Element types the PTX check compiles the copy kernels for (they also serve int tensors).
_COPY_TYPES = FLOAT_TYPES + (nbtypes.int64,)
# dtypes ``cuda.atomic.add`` supports; others use the column-serial fallback.
_ATOMIC_DTYPES = frozenset(np.dtype(d) for d in (np.float32, np.float64, np.int32, np.int64,
                                                 np.uint32, np.uint64))
_I64 = nbtypes.int64


def _acc_type(T):
    """numba type the fallback kernels add in: float32 for half, int64 for small ints."""
    if T in (nbtypes.float16, nbtypes.float32):
        return nbtypes.float32
    if T == nbtypes.float64:
        return nbtypes.float64
    return nbtypes.int64


def _acc_zero(dtype):
    """A zero of the type the fallback kernels accumulate in (see :func:`_acc_type`)."""
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return np.float64(0)
    if dtype.kind == "f":
        return np.float32(0)
    return np.int64(0)


def _value_arg(dtype, v):
    """A scalar kernel argument of the array dtype (half travels as float32; the store
    narrows it back exactly)."""
    dtype = np.dtype(dtype)
    return np.float32(v) if dtype == np.float16 else dtype.type(v)


def _scratch(shape, dtype):
    return scratch(shape, dtype)


def _a3(T):
    return T[:, :, ::1]


# ---- gather / scatter (index has the shape of the output / source) -----------------------
@device_fn
def _gather_device(a, i, b, x, index, out):
    out[a, i, b] = x[a, index[a, i, b], b]


_gather_kernel = cuda_kernel(lambda T: (_a3(T), _a3(_I64), _a3(T)), dtypes=_COPY_TYPES)(
    grid_kernel(__name__, "_gather_kernel", "x, index, out", _gather_device, "out"))


def _gather_fwd_cuda(x, index, out):
    """out[a, i, b] = x[a, index[a, i, b], b]."""
    launch(_gather_kernel, out.size, x, index, out)


@device_fn
def _scatter_add_atomic_device(a, i, b, out, index, src):
    cuda.atomic.add(out, (a, index[a, i, b], b), src[a, i, b])


_scatter_add_atomic_kernel = cuda_kernel(lambda T: (_a3(T), _a3(_I64), _a3(T)),
                                         dtypes=(nbtypes.float32, nbtypes.float64, nbtypes.int64))(
    grid_kernel(__name__, "_scatter_add_atomic_kernel", "out, index, src", _scatter_add_atomic_device, "index"))


@device_fn
def _scatter_add_cols_device(a, b, out, index, src, z):
    # One thread per column (a, b), indices in order: race-free without atomics.
    for i in range(index.shape[1]):
        r = index[a, i, b]
        out[a, r, b] = (z + out[a, r, b]) + (z + src[a, i, b])


_scatter_add_cols_kernel = cuda_kernel(lambda T: (_a3(T), _a3(_I64), _a3(T), _acc_type(T)), dtypes=_COPY_TYPES)(
    grid_kernel(__name__, "_scatter_add_cols_kernel", "out, index, src, z", _scatter_add_cols_device, "index", (0, 2)))


def _scatter_add_fwd_cuda(out, index, src):
    """out[a, index[a, i, b], b] += src[a, i, b] (duplicates accumulate)."""
    if out.dtype in _ATOMIC_DTYPES:
        launch(_scatter_add_atomic_kernel, index.size, out, index, src)
    else:
        A, M, B = index.shape
        launch(_scatter_add_cols_kernel, A * B, out, index, src, _acc_zero(out.dtype))


@device_fn
def _scatter_device(a, b, out, index, src):
    # One thread per column (a, b) walking i in order, so the last duplicate wins as on
    # the CPU (a thread per element would let duplicates race).
    for i in range(index.shape[1]):
        out[a, index[a, i, b], b] = src[a, i, b]


_scatter_kernel = cuda_kernel(lambda T: (_a3(T), _a3(_I64), _a3(T)), dtypes=_COPY_TYPES)(
    grid_kernel(__name__, "_scatter_kernel", "out, index, src", _scatter_device, "index", (0, 2)))


# The column scheme is used when there are at least this many columns, or columns are at
# most this long; otherwise the claim scheme, if its scratch is at most this many times
# larger than ``index``.
_MANY_COLUMNS = 4096
_SHORT_COLUMN = 64
_CLAIM_MAX_RATIO = 8


@cuda_kernel([(nbtypes.int32[::1], nbtypes.int32)])
def _fill_i32_kernel(a, value):
    k = cuda.grid(1)
    while k < a.size:
        a[k] = value
        k += cuda.gridsize(1)


@device_fn
def _scatter_claim_device(a, i, b, win, index, N):
    # win[a, r, b] = max i with index[a, i, b] == r (win is out's shape, flattened).
    cuda.atomic.max(win, (a * N + index[a, i, b]) * index.shape[2] + b, nbtypes.int32(i))


_scatter_claim_kernel = cuda_kernel([(nbtypes.int32[::1], _a3(_I64), _I64)])(
    grid_kernel(__name__, "_scatter_claim_kernel", "win, index, N", _scatter_claim_device, "index"))


@device_fn
def _scatter_winners_device(a, i, b, out, win, index, src):
    t = index[a, i, b]
    if win[(a * out.shape[1] + t) * index.shape[2] + b] == i:  # exactly one i wins each target
        out[a, t, b] = src[a, i, b]


_scatter_winners_kernel = cuda_kernel(lambda T: (_a3(T), nbtypes.int32[::1], _a3(_I64), _a3(T)),
                                      dtypes=_COPY_TYPES)(
    grid_kernel(__name__, "_scatter_winners_kernel", "out, win, index, src", _scatter_winners_device, "index"))


def _scatter_fwd_cuda(out, index, src):
    """out[a, index[a, i, b], b] = src[a, i, b] (the last duplicate wins)."""
    A, M, B = index.shape
    if (A * B >= _MANY_COLUMNS or M <= _SHORT_COLUMN or M >= 2 ** 31
            or out.size > _CLAIM_MAX_RATIO * index.size):
        launch(_scatter_kernel, A * B, out, index, src)
        return
    win = _scratch(out.size, np.int32)
    launch(_fill_i32_kernel, out.size, win, np.int32(-1))
    launch(_scatter_claim_kernel, index.size, win, index, np.int64(out.shape[1]))
    launch(_scatter_winners_kernel, index.size, out, win, index, src)


def _fill_value_type(T):
    return nbtypes.float32 if T == nbtypes.float16 else T


@device_fn
def _scatter_fill_device(a, i, b, out, index, value):
    # Duplicates all write the same value: no ordering question.
    out[a, index[a, i, b], b] = value


_scatter_fill_kernel = cuda_kernel(lambda T: (_a3(T), _a3(_I64), _fill_value_type(T)), dtypes=_COPY_TYPES)(
    grid_kernel(__name__, "_scatter_fill_kernel", "out, index, value", _scatter_fill_device, "index"))


def _scatter_fill_fwd_cuda(out, index, value):
    """out[a, index[a, i, b], b] = value."""
    launch(_scatter_fill_kernel, index.size, out, index, _value_arg(out.dtype, value))


# ---- index_select / index_add (one 1-D index along the middle axis) ------------------------
@device_fn
def _index_select_device(a, i, b, x, index, out):
    out[a, i, b] = x[a, index[i], b]


_index_select_kernel = cuda_kernel(lambda T: (_a3(T), _I64[::1], _a3(T)), dtypes=_COPY_TYPES)(
    grid_kernel(__name__, "_index_select_kernel", "x, index, out", _index_select_device, "out"))


def _index_select_fwd_cuda(x, index, out):
    """out[a, i, b] = x[a, index[i], b]."""
    launch(_index_select_kernel, out.size, x, index, out)


@device_fn
def _index_add_atomic_device(a, i, b, out, index, src, alpha):
    cuda.atomic.add(out, (a, index[i], b), alpha * src[a, i, b])


_index_add_atomic_kernel = cuda_kernel(lambda T: (_a3(T), _I64[::1], _a3(T), T),
                                       dtypes=(nbtypes.float32, nbtypes.float64, nbtypes.int64))(
    grid_kernel(__name__, "_index_add_atomic_kernel", "out, index, src, alpha", _index_add_atomic_device, "src"))


@device_fn
def _index_add_cols_device(a, b, out, index, src, alpha):
    # ``alpha`` arrives in the accumulation type (float32 for half).
    for i in range(src.shape[1]):
        r = index[i]
        out[a, r, b] = (alpha * src[a, i, b]) + out[a, r, b]


_index_add_cols_kernel = cuda_kernel(lambda T: (_a3(T), _I64[::1], _a3(T), _acc_type(T)), dtypes=_COPY_TYPES)(
    grid_kernel(__name__, "_index_add_cols_kernel", "out, index, src, alpha", _index_add_cols_device, "src", (0, 2)))


def _index_add_fwd_cuda(out, index, src, alpha):
    """out[a, index[i], b] += alpha * src[a, i, b] (duplicates accumulate)."""
    if out.dtype in _ATOMIC_DTYPES:
        launch(_index_add_atomic_kernel, src.size, out, index, src, out.dtype.type(alpha))
    else:
        A, M, B = src.shape
        z = _acc_zero(out.dtype)
        launch(_index_add_cols_kernel, A * B, out, index, src, type(z)(alpha))


# ---- embedding and one_hot ----------------------------------------------------------------
@device_fn
def _embedding_device(i, d, weight, index, out):
    out[i, d] = weight[index[i], d]


_embedding_kernel = cuda_kernel(lambda T: (T[:, ::1], _I64[::1], T[:, ::1]), dtypes=_COPY_TYPES)(
    grid_kernel(__name__, "_embedding_kernel", "weight, index, out", _embedding_device, "out", (0, 1), 2))


def _embedding_fwd_cuda(weight, index, out):
    """out[i, :] = weight[index[i], :] for a flat index and a 2-D output."""
    launch(_embedding_kernel, out.size, weight, index, out)


@device_fn
def _embedding_bwd_atomic_device(i, d, grad_weight, index, grad, padding_idx):
    r = index[i]
    if r != padding_idx:
        cuda.atomic.add(grad_weight, (r, d), grad[i, d])


_embedding_bwd_atomic_kernel = cuda_kernel(lambda T: (T[:, ::1], _I64[::1], T[:, ::1], _I64),
                                           dtypes=(nbtypes.float32, nbtypes.float64))(
    grid_kernel(__name__, "_embedding_bwd_atomic_kernel", "grad_weight, index, grad, padding_idx",
                 _embedding_bwd_atomic_device, "grad", (0, 1), 2))


@device_fn
def _embedding_bwd_cols_device(d, grad_weight, index, grad, padding_idx, z):
    # One thread per column d, indices in order: race-free without atomics.
    for i in range(grad.shape[0]):
        r = index[i]
        if r != padding_idx:
            grad_weight[r, d] = (z + grad_weight[r, d]) + (z + grad[i, d])


_embedding_bwd_cols_kernel = cuda_kernel(lambda T: (T[:, ::1], _I64[::1], T[:, ::1], _I64, _acc_type(T)),
                                         dtypes=FLOAT_TYPES)(
    grid_kernel(__name__, "_embedding_bwd_cols_kernel", "grad_weight, index, grad, padding_idx, z",
                 _embedding_bwd_cols_device, "grad", (1,), 2))


def _embedding_bwd_cuda(grad_weight, index, grad, padding_idx):
    """grad_weight[index[i], :] += grad[i, :], skipping rows equal to padding_idx (-1: none)."""
    padding_idx = int(padding_idx)
    if grad_weight.dtype in _ATOMIC_DTYPES:
        launch(_embedding_bwd_atomic_kernel, grad.size, grad_weight, index, grad, padding_idx)
    else:
        launch(_embedding_bwd_cols_kernel, grad.shape[1], grad_weight, index, grad, padding_idx,
               _acc_zero(grad_weight.dtype))


@device_fn
def _one_hot_device(i, index, out):
    out[i, index[i]] = 1


_one_hot_kernel = cuda_kernel([(_I64[::1], _I64[:, ::1])])(
    grid_kernel(__name__, "_one_hot_kernel", "index, out", _one_hot_device, "index", (0,), 1))


def _one_hot_fwd_cuda(index, out):
    """out[i, index[i]] = 1 for a zero-filled 2-D output."""
    launch(_one_hot_kernel, index.shape[0], index, out)
