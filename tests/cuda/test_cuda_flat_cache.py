"""Flat kernels' operands (``backend/cuda.py:_flat``): an array that starts its pool block
is passed as the block's typed array, cached with the allocation (numba types an argument
once per object); other arrays as views. Both give the op's values, and the cache follows
the allocation across tensors that reuse it, never past ``empty_cache()``."""
import gc

import numpy as np

import numbagrad as ng
from numbagrad.backend import cuda as cb


def test_an_array_starting_its_block_reuses_the_cached_typed_array():
    x = ng.tensor(np.arange(10, dtype=np.float32), device="cuda")
    first = cb._flat(x.array)
    assert first is cb._flat(x.array) and first.shape[0] >= 10
    mem = x.array._blk.mem
    del x
    gc.collect()
    y = ng.tensor(np.ones(12, np.float32), device="cuda")   # the same size class: the same allocation
    assert y.array._blk.mem is mem and cb._flat(y.array) is first
    np.testing.assert_array_equal((y + y).numpy(), np.full(12, 2.0, np.float32))


def test_views_and_offsets_compute_the_same_values():
    a = np.arange(24, dtype=np.float32)
    x = ng.tensor(a, device="cuda")
    tail = x[5:]                                  # a view at an offset: not the block's array
    assert tail.array._off == 5
    np.testing.assert_array_equal((tail * 2).numpy(), a[5:] * 2)
    np.testing.assert_array_equal((x * 3).numpy(), a * 3)
    z = ng.zeros(7, device="cuda")
    z.add_(ng.tensor(np.arange(7, dtype=np.float32), device="cuda"))
    np.testing.assert_array_equal(z.numpy(), np.arange(7, dtype=np.float32))


def test_empty_cache_drops_the_typed_arrays_of_the_allocations_it_hands_back():
    x = ng.tensor(np.ones(300, np.float32), device="cuda")
    cb._flat(x.array)
    key = (id(x.array._blk.mem), np.dtype(np.float32))
    pool = x.array._blk.pool
    assert key in pool._typed
    del x
    gc.collect()
    ng.cuda.empty_cache()
    assert key not in pool._typed
