"""The CUDA caching allocator: device memory is taken from the driver once and reused.

A training loop asks for the same sizes step after step; calling ``cudaMalloc``/
``cudaFree`` each time costs tens of microseconds and synchronises the device. The pool
rounds each request up to a size class and keeps freed blocks on a free list per class:

* requests up to 1 MiB round up to a multiple of 512 bytes;
* larger ones round up to a multiple of 2 MiB.

A block returns to its free list when the last array viewing it is garbage collected
(``_Block.__del__``). Kernels run in order on the default stream, so a block freed by the
host can be handed to the next kernel at once: every earlier kernel that used it is
ahead of that kernel in the stream.

The pool holds every device allocation it made (``Pool._owned``) until ``empty_cache()``
hands it back, so an allocation is never garbage itself, only the ``_Block`` that lends
it. That matters when a block dies in a reference cycle (a tensor in an autograd cycle):
the cyclic collector runs weakref callbacks before ``__del__`` methods, and numba frees a
device allocation from a weakref callback (``OwnedPointer``'s finalizer). Were the
allocation reachable only through the dying block, the collector would free its memory
first and ``_Block.__del__`` would then put the freed allocation back on the free list:
the next tensor of that size would get dead memory (``ReferenceError: weakly-referenced
object no longer exists``, or ``CUDA_ERROR_INVALID_VALUE`` in a copy), found on the first
run on a real GPU; the simulator has no such finalizer.

``memory_allocated()`` counts the bytes of blocks in use (rounded sizes, like PyTorch's
figure of the same name), ``memory_reserved()`` adds the cached free blocks, and
``empty_cache()`` hands the cached blocks back to the driver.
"""
import threading

import numpy as np

_SMALL = 1 << 20
_SMALL_ROUND = 512
_LARGE_ROUND = 2 << 20


def round_size(nbytes):
    """The size class of a request of ``nbytes`` bytes."""
    n = max(int(nbytes), 1)
    r = _SMALL_ROUND if n <= _SMALL else _LARGE_ROUND
    return -(-n // r) * r


class _Block:
    """A piece of device memory of one size class, viewed by one or more arrays."""

    __slots__ = ("mem", "nbytes", "pool", "_typed", "__weakref__")

    def __init__(self, mem, nbytes, pool):
        self.mem = mem            # a 1-D uint8 numba device array of ``nbytes``
        self.nbytes = nbytes
        self.pool = pool
        self._typed = {}

    def typed(self, dtype):
        """The whole block as a 1-D numba device array of ``dtype`` (cached with the
        allocation, so the next block that reuses it gets the same object: numba types an
        argument once per object, about a fifth of a small launch's host time)."""
        t = self._typed.get(dtype)
        if t is None:
            t = self._typed[dtype] = self.pool.typed(self.mem, self.nbytes, dtype)
        return t

    def __del__(self):
        pool = self.pool
        if pool is not None:
            pool._release(self.mem, self.nbytes)


class Pool:
    """Size-class free lists over numba device allocations.

    ``view(mem, byte_offset, shape, byte_strides, dtype)`` builds a numba device array
    over part of a block; the real-GPU and simulator versions differ only there.
    """

    def __init__(self, cuda, sim):
        self._cuda = cuda
        self._sim = sim
        self._free = {}
        self._owned = {}          # id -> every device allocation made and not yet handed back
        self._typed = {}          # (id, dtype) -> the allocation as a 1-D array of dtype (Block.typed)
        self._lock = threading.Lock()
        self.allocated = 0
        self.reserved = 0
        self.peak_allocated = 0
        self.n_driver_allocs = 0
        if sim:
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
            self._fake = FakeCUDAArray
        else:
            from numba.cuda.cudadrv.devicearray import DeviceNDArray
            self._devarray = DeviceNDArray

    def alloc(self, nbytes):
        size = round_size(nbytes)
        with self._lock:
            free = self._free.get(size)
            mem = free.pop() if free else None
            if mem is None:
                self.reserved += size
            self.allocated += size
            if self.allocated > self.peak_allocated:
                self.peak_allocated = self.allocated
        if mem is None:
            mem = self._driver_alloc(size)
        return _Block(mem, size, self)

    def _driver_alloc(self, size):
        self.n_driver_allocs += 1
        try:
            mem = self._cuda.device_array(size, np.uint8)
        except Exception as e:  # out of memory: give the cache back and try once more
            if not self.cached_bytes():
                raise
            self.empty_cache()
            try:
                mem = self._cuda.device_array(size, np.uint8)
            except Exception:
                raise RuntimeError(f"CUDA out of memory: tried to allocate {size} bytes "
                                   f"({self.allocated} bytes in use by tensors)") from e
        self._owned[id(mem)] = mem   # never garbage while lent (module docstring)
        return mem

    def _release(self, mem, size):
        with self._lock:
            self.allocated -= size
            self._free.setdefault(size, []).append(mem)

    def cached_bytes(self):
        return self.reserved - self.allocated

    def empty_cache(self):
        with self._lock:
            freed = sum(k * len(v) for k, v in self._free.items())
            for mems in self._free.values():
                for mem in mems:
                    self._owned.pop(id(mem), None)
                    for dt in [k for k in self._typed if k[0] == id(mem)]:
                        del self._typed[dt]
            self._free.clear()
            self.reserved -= freed

    def typed(self, mem, nbytes, dtype):
        """The allocation ``mem`` (of ``nbytes``) as a 1-D array of ``dtype``, made once per
        allocation and dtype while the pool holds it."""
        key = (id(mem), dtype)
        t = self._typed.get(key)
        if t is None:
            t = self._typed[key] = self.view(mem, 0, (nbytes // dtype.itemsize,), (dtype.itemsize,), dtype)
        return t

    def view(self, mem, byte_offset, shape, byte_strides, dtype):
        if self._sim:
            host = np.ndarray(shape, dtype, buffer=mem._ary, offset=byte_offset, strides=byte_strides)
            return self._fake(host)
        gpu = mem.gpu_data.view(byte_offset) if byte_offset else mem.gpu_data
        return self._devarray(shape, byte_strides, dtype, gpu_data=gpu)

