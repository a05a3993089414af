"""The range check that comes before every kernel indexing memory with user data.

numba does not bounds-check: an index that reaches an ``@njit`` or ``@cuda.jit`` kernel
out of range writes outside an array (a segfault at best, silent corruption at worst).
So every op that hands user-provided integers (indices, class targets, lengths) to a
kernel calls :func:`check_index` (or :func:`out_of_range`, where the op words its own
error) right before the kernel, in forward *and* in backward: an index array kept for
backward may share memory with the user's tensor or NumPy array and be written between
the two (through ``.array``, ``.numpy()`` or the array itself, which no version counter
sees). ARCHITECTURE.md's "Index safety" table lists each kernel and its check.

Cost: two NumPy reductions (``min`` and ``max``, SIMD loops) over the index, about
0.17 ms for 1M int64 indices here (best of runs), against about 5 ms for the embedding
lookup of those 1M rows that it guards (``perf/test_bench_index_check.py``). On CUDA they
are two device reductions and one synchronisation.
"""

__all__ = ["out_of_range", "check_index"]


def out_of_range(index, low, high):
    """The first offending entry of the integer backend array ``index`` outside
    ``[low, high)`` as a Python int (its minimum if that is below ``low``, else its maximum),
    or None when every entry is in range (or ``index`` is empty)."""
    if index.size == 0:
        return None
    lo = int(index.min())
    if lo < low:
        return lo
    hi = int(index.max())
    if hi >= high:
        return hi
    return None


def check_index(opname, index, size, dim=0, shape=None, what="index", allow_negative=False):
    """Raise PyTorch's ``IndexError`` ("index 10 is out of bounds for dimension 0 with size
    5"), prefixed by ``opname`` and followed by the tensor's ``shape``, unless every entry
    of ``index`` lies in ``[0, size)`` (``[-size, size)`` with ``allow_negative``)."""
    bad = out_of_range(index, -size if allow_negative else 0, size)
    if bad is not None:
        where = "" if shape is None else f" (tensor shape {tuple(shape)})"
        raise IndexError(f"{opname}: {what} {bad} is out of bounds for dimension {dim} with size "
                         f"{size}{where}")
