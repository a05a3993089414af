"""Block-wide reductions in shared memory: the device functions that row kernels and
partial-sum ("virtual block") kernels share.

Every thread of the block must call them (they synchronise), each with its own partial
``v`` and its thread index ``t``. The tree is pairwise (also more accurate than one
running sum) and its width is the shared array's length, a power of two known at compile
time (``ROW_TPB``, or an optimizer's ``BLOCK_TPB``): ``sm.shape[-1]`` folds to that
constant (the PTX is the same as with the literal).

* :func:`block_reducer` ``(combine)``: a device function ``(sm, t, v) -> r`` combining
  every thread's ``v`` with ``combine(a, b)``; every thread gets ``r``, and the closing
  barrier lets the caller reuse ``sm`` at once (:func:`block_tree`: the same without the
  read and the closing barrier). :func:`_block_sum_device` and
  :func:`_block_max_device` (NaN-free partials) are the two the kernels use.
* :func:`_block_sums_device` ``(sm, t)``: in place, the rows of a 2-D shared array
  ``(k, width)`` summed into column 0 under one set of barriers (``k`` sums for the price
  of one tree); each thread has written its partials into column ``t``. The caller reads
  ``sm[i, 0]`` and synchronises before it writes ``sm`` again.
* :func:`_array_sum_device` ``(sm, t, a)``: one block's float64 sum of a whole 1-D array
  (a strided view such as ``part[:, k]`` is fine): the one-block kernels that total the
  per-block partials.
"""
from numba import cuda, float64

from ._launch import device_fn


def block_tree(combine):
    """A device function ``(sm, t, v)``: every thread's ``v`` combined over the block with
    the device function ``combine(a, b)`` (associative) into ``sm[0]``, which every thread
    may read on return; the caller synchronises before ``sm`` is written again (or, as a
    row reduction whose thread 0 alone reads it, need not)."""
    @device_fn
    def tree(sm, t, v):
        sm[t] = v
        cuda.syncthreads()
        s = sm.shape[0] // 2
        while s > 0:
            if t < s:
                sm[t] = combine(sm[t], sm[t + s])
            cuda.syncthreads()
            s //= 2
    return tree


def block_reducer(combine):
    """A device function ``(sm, t, v) -> r``: :func:`block_tree`'s result, returned to
    every thread, with the barrier that lets the caller reuse ``sm`` at once."""
    tree = block_tree(combine)

    @device_fn
    def reduce(sm, t, v):
        tree(sm, t, v)
        r = sm[0]
        cuda.syncthreads()  # everyone has read sm[0] before sm is reused
        return r
    return reduce


@device_fn
def _add_device(a, b):
    return a + b


@device_fn
def _larger_device(a, b):
    # NOTE: a total order only without NaN: the callers skip NaN partials
    return b if b > a else a


_block_sum_device = block_reducer(_add_device)
"""Sum over the block of each thread's ``v``: ``_block_sum_device(sm, t, v)``."""
_block_max_device = block_reducer(_larger_device)
"""Max over the block of each thread's NaN-free ``v``: ``_block_max_device(sm, t, v)``."""


@device_fn
def _block_sums_device(sm, t):
    """``sm[i, 0] = sum_j sm[i, j]`` for every row ``i`` of the 2-D shared array ``sm``,
    after every thread ``t`` has written column ``t`` (see the module)."""
    cuda.syncthreads()
    s = sm.shape[1] // 2
    while s > 0:
        if t < s:
            for i in range(sm.shape[0]):
                sm[i, t] += sm[i, t + s]
        cuda.syncthreads()
        s //= 2


@device_fn
def _array_sum_device(sm, t, a):
    """float64 sum of the 1-D array ``a`` by the whole block (``sm``: a float64 shared
    array); every thread gets it."""
    acc = 0.0
    j = t
    while j < a.size:
        acc += float64(a[j])
        j += sm.shape[0]
    return _block_sum_device(sm, t, acc)
