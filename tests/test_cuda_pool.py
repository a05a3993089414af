"""The CUDA caching allocator's bookkeeping (``backend/cuda_memory.py``), on the CPU with a
stand-in for numba's allocator: a freed block's device allocation must still be alive
when it goes back on the free list, also when the block dies in a reference cycle."""
import gc
import weakref

import numpy as np

from numbagrad.backend.cuda_memory import Pool


class _Allocation:
    """What numba's ``device_array`` hands out, reduced to the part that matters: its memory
    is freed by a weakref finalizer of the pointer it holds (numba's ``OwnedPointer``)."""

    def __init__(self, freed):
        self.gpu_data = type("OwnedPointer", (), {})()
        self.state = {"freed": False}
        state = self.state
        weakref.finalize(self.gpu_data, lambda: (state.__setitem__("freed", True), freed.append(state)))


class _FakeCuda:
    def __init__(self):
        self.freed = []

    def device_array(self, size, dtype):
        return _Allocation(self.freed)


class _Holder:
    """A tensor-like owner of a block, put in a reference cycle with itself."""

    def __init__(self, block):
        self.block = block
        self.me = self


def test_a_block_dying_in_a_cycle_goes_back_with_its_memory_alive():
    cuda = _FakeCuda()
    pool = Pool.__new__(Pool)
    Pool.__init__(pool, cuda, sim=True)   # sim=True: no numba import; view() is not used here
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(5):
            _Holder(pool.alloc(1000))     # garbage only the cyclic collector can free
        gc.collect()
    finally:
        if was:
            gc.enable()
    free = [m for mems in pool._free.values() for m in mems]
    assert len(free) >= 1 and pool.allocated == 0
    # before the fix, the collector ran the allocation's finalizer (freeing its memory) and
    # then _Block.__del__ put the freed allocation on the free list
    assert not cuda.freed and all(not m.state["freed"] for m in free)
    # a later request of the same size class gets a live allocation
    again = pool.alloc(1000)
    assert not again.mem.state["freed"] and pool.n_driver_allocs == 5


def test_empty_cache_hands_the_allocations_back():
    cuda = _FakeCuda()
    pool = Pool.__new__(Pool)
    Pool.__init__(pool, cuda, sim=True)
    kept = pool.alloc(4096)
    pool.alloc(4096)                      # freed at once: its block has no other owner
    assert pool.cached_bytes() == 4096 and len(pool._owned) == 2
    pool.empty_cache()
    gc.collect()
    assert pool.cached_bytes() == 0 and len(pool._owned) == 1 and len(cuda.freed) == 1
    assert not kept.mem.state["freed"]
    np.testing.assert_equal(pool.reserved, 4096)
