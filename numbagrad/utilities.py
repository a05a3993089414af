"""Small torch-level utilities: numeric constants, dtype queries and promotion, the
CPU thread count, and ``meshgrid``/``broadcast_shapes``/``atleast_*d``."""
import math

import numpy as np

from . import _dtype
from .tensor import Tensor

pi, e, inf, nan = math.pi, math.e, math.inf, math.nan
newaxis = None
finfo = _dtype.finfo
"""``finfo(dtype)``: ``eps``, ``tiny``, ``max``, ``min``, ``bits`` of a float dtype (NumPy's
object; numbagrad's dtypes are NumPy dtypes; ``ml_dtypes.finfo`` for bfloat16)."""
iinfo = np.iinfo


def is_floating_point(input):
    """Whether ``input``'s dtype is a floating-point type (float16, bfloat16, float32, float64)."""
    return _dtype.is_float(input.dtype)


def is_signed(input):
    """Whether ``input``'s dtype is signed (the floats and the signed integers)."""
    return input.dtype.kind in "fi" or input.dtype == _dtype.bfloat16


def promote_types(type1, type2):
    """The dtype a binary op between tensors of these dtypes produces (PyTorch's rule:
    an integer meeting a float takes the float's dtype)."""
    return _dtype.promote(np.dtype(type1), np.dtype(type2))


def result_type(tensor1, tensor2):
    """The dtype of ``tensor1 op tensor2`` (either may be a Python scalar)."""
    from .ops._util import binary_operands
    a = tensor1 if isinstance(tensor1, Tensor) else tensor1
    b = tensor2 if isinstance(tensor2, Tensor) else tensor2
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return np.dtype(_dtype.get_default_dtype()) if isinstance(a, float) or isinstance(b, float) \
            else np.dtype(np.int64)
    x, y = binary_operands(a, b, "result_type")
    return (x if isinstance(x, Tensor) else y).dtype


def can_cast(from_, to):
    """Whether PyTorch's casting rules allow ``from_`` -> ``to`` in an in-place op: never
    float to integer or anything to bool (from a wider kind)."""
    f, t = np.dtype(from_), np.dtype(to)
    order = {"b": 0, "u": 1, "i": 1, "f": 2}
    return order[f.kind] <= order[t.kind]


def broadcast_shapes(*shapes):
    """The shape the given shapes broadcast to (``torch.broadcast_shapes``), as a :class:`Size`."""
    from .tensor import Size
    return Size(np.broadcast_shapes(*[(s,) if isinstance(s, int) else tuple(s) for s in shapes]))


def get_num_threads():
    """Threads of numbagrad's parallel CPU kernels (numba's pool)."""
    import numba
    return numba.get_num_threads()


def set_num_threads(n):
    """Use ``n`` threads in numbagrad's parallel CPU kernels (at most the pool's size,
    ``NUMBA_NUM_THREADS``, fixed when numba starts)."""
    import numba
    n = int(n)
    if not 1 <= n <= numba.config.NUMBA_NUM_THREADS:
        raise ValueError(f"set_num_threads: n={n} is outside [1, {numba.config.NUMBA_NUM_THREADS}] "
                         "(the pool's size is NUMBA_NUM_THREADS, set before numba starts)")
    numba.set_num_threads(n)


def memory_stats():
    """Memory held for backward: ``saved_bytes`` (arrays that live graph nodes keep for
    their backward, each buffer counted once, parameters not counted) and
    ``saved_bytes_peak`` (their peak since :func:`reset_peak_memory_stats`); with a CUDA
    device in use, also the caching allocator's ``cuda_allocated_bytes``,
    ``cuda_reserved_bytes`` and ``cuda_max_allocated_bytes``."""
    from .autograd import saved
    out = {"saved_bytes": saved.current(), "saved_bytes_peak": saved.peak()}
    from . import cuda
    from .backend import cuda as _cb
    if _cb.CUDA_BACKEND is not None:
        out.update(cuda_allocated_bytes=cuda.memory_allocated(), cuda_reserved_bytes=cuda.memory_reserved(),
                   cuda_max_allocated_bytes=cuda.max_memory_allocated())
    return out


def reset_peak_memory_stats():
    """Start ``saved_bytes_peak`` (and CUDA's peak, where in use) from the current value."""
    from .autograd import saved
    saved.reset_peak()
    from . import cuda
    cuda.reset_peak_memory_stats()


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D tensors (differentiable: each is an expanded view).
    ``indexing='ij'`` (matrix, PyTorch's default here; torch warns if it is not given) or
    ``'xy'`` (Cartesian: the first two dimensions swapped)."""
    from .ops import reshape, expand
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    for i, t in enumerate(tensors):
        if t.ndim > 1:
            raise ValueError(f"meshgrid: expects 0- or 1-D tensors, argument {i} has shape {tuple(t.shape)}")
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(int(t.numel()) for t in ts)
    out = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = shape[i]
        out.append(expand(reshape(t, tuple(view)), shape))
    if swap:
        out[0], out[1] = out[1], out[0]
    return tuple(out)


def atleast_1d(*tensors):
    """Each tensor with at least one dimension (0-d ones become shape ``(1,)``); one tensor or a tuple."""
    r = tuple(t.reshape(1) if t.ndim == 0 else t for t in _flat_args(tensors))
    return r[0] if len(r) == 1 else r


def atleast_2d(*tensors):
    """Each tensor with at least two dimensions (0-d ones become ``(1, 1)``, 1-d ones ``(1, n)``)."""
    r = tuple(t.reshape(1, 1) if t.ndim == 0 else (t.unsqueeze(0) if t.ndim == 1 else t)
              for t in _flat_args(tensors))
    return r[0] if len(r) == 1 else r


def _flat_args(tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(tensors[0])
    return tensors


__all__ = ["pi", "e", "inf", "nan", "newaxis", "finfo", "iinfo", "is_floating_point", "is_signed",
           "promote_types", "result_type", "can_cast", "broadcast_shapes", "get_num_threads",
           "set_num_threads", "memory_stats", "reset_peak_memory_stats", "meshgrid", "atleast_1d", "atleast_2d"]
