"""``numbagrad.cuda``: PyTorch's ``torch.cuda`` helpers for numbagrad's CUDA backend.

Nothing here initialises CUDA at import; each function does on first call. Memory
figures come from numbagrad's caching allocator (:mod:`numbagrad.backend.cuda_memory`).
"""
from .backend import cuda as _cb


def is_available():
    """True when a CUDA GPU (or numba's CUDA simulator) can be used."""
    return _cb.available()


def device_count():
    """The number of GPUs numbagrad drives (it uses one, ``cuda:0``)."""
    return 1 if _cb.available() else 0


def current_device():
    return 0


def _pool():
    return _cb.pool()


def memory_allocated(device=None):
    """Bytes of device memory held by live arrays (size-class rounded)."""
    return _pool().allocated if _cb.CUDA_BACKEND is not None else 0


def max_memory_allocated(device=None):
    return _pool().peak_allocated if _cb.CUDA_BACKEND is not None else 0


def reset_peak_memory_stats(device=None):
    if _cb.CUDA_BACKEND is not None:
        p = _pool()
        p.peak_allocated = p.allocated


def memory_reserved(device=None):
    """Bytes taken from the driver: live arrays plus the allocator's cache."""
    return _pool().reserved if _cb.CUDA_BACKEND is not None else 0


def empty_cache():
    """Hand the allocator's cached (free) blocks back to the driver."""
    if _cb.CUDA_BACKEND is not None:
        _pool().empty_cache()


def synchronize(device=None):
    """Wait for every queued kernel to finish."""
    if _cb.CUDA_BACKEND is not None and _cb._cuda is not None:
        _cb._cuda.synchronize()


def get_device_name(device=None):
    if not _cb.available():
        raise RuntimeError(_cb.unavailable_reason())
    if _cb._L is not None and _cb._L.SIM:
        return "numba CUDA simulator"
    return _cb._cuda.get_current_device().name.decode() if isinstance(
        _cb._cuda.get_current_device().name, bytes) else str(_cb._cuda.get_current_device().name)


__all__ = ["is_available", "device_count", "current_device", "memory_allocated", "max_memory_allocated",
           "reset_peak_memory_stats", "memory_reserved", "empty_cache", "synchronize", "get_device_name"]
