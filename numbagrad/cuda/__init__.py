"""``numbagrad.cuda``: PyTorch's ``torch.cuda`` helpers for numbagrad's CUDA backend.

Nothing here initialises CUDA at import; each function does on first call. Memory
figures come from numbagrad's caching allocator (:mod:`numbagrad.backend.cuda_memory`).
:mod:`numbagrad.cuda.amp` is ``torch.cuda.amp`` (``GradScaler``, ``autocast``).
"""
from ..backend import cuda as _cb


def is_available():
    """True when a CUDA GPU (or numba's CUDA simulator) can be used."""
    return _cb.available()


def device_count():
    """The number of GPUs numbagrad drives (it uses one, ``cuda:0``)."""
    return 1 if _cb.available() else 0


def current_device():
    """The index of the selected CUDA device: always 0 (numbagrad uses one device per process)."""
    return 0


def _index(device):
    """The GPU index of an int, ``"cuda:N"`` string or :class:`numbagrad.device`."""
    from ..device import device as _device
    if isinstance(device, int):
        return device
    d = _device(device)
    if d.type != "cuda":
        raise ValueError(f"expected a CUDA device, got {device!r}")
    return d.index


def set_device(device):
    """Select the GPU (``torch.cuda.set_device``). numbagrad drives one GPU, ``cuda:0``, so
    0 is the only valid index; as in PyTorch, a negative index does nothing."""
    idx = _index(device)
    if idx < 0:
        return
    if not is_available():
        raise RuntimeError(_cb.unavailable_reason())
    if idx != 0:
        raise ValueError(f"invalid device index {idx}: numbagrad drives one GPU, cuda:0, so 0 is the only "
                         f"valid index")


def _pool():
    return _cb.pool()


def memory_allocated(device=None):
    """Bytes of device memory held by live arrays (size-class rounded)."""
    return _pool().allocated if _cb.CUDA_BACKEND is not None else 0


def max_memory_allocated(device=None):
    """Peak bytes held by CUDA tensors since the start or the last :func:`reset_peak_memory_stats`; 0 without CUDA."""
    return _pool().peak_allocated if _cb.CUDA_BACKEND is not None else 0


def reset_peak_memory_stats(device=None):
    """Restart the peak that :func:`max_memory_allocated` reports from the current allocation."""
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
    """The GPU's name (``'numba CUDA simulator'`` under the simulator); raises ``RuntimeError`` without CUDA."""
    if not _cb.available():
        raise RuntimeError(_cb.unavailable_reason())
    if _cb._L is not None and _cb._L.SIM:
        return "numba CUDA simulator"
    return _cb._cuda.get_current_device().name.decode() if isinstance(
        _cb._cuda.get_current_device().name, bytes) else str(_cb._cuda.get_current_device().name)


# ---- random seeds ------------------------------------------------------------------------
# numbagrad draws CUDA random numbers (dropout masks) from the one default generator the
# CPU uses, so seeding "the GPU" seeds that generator. As in PyTorch, these calls are
# harmless without a GPU: they do nothing there, and scripts that call them run anywhere.
def manual_seed(seed):
    """Seed the generator CUDA ops draw from (numbagrad's default generator); nothing
    without a GPU."""
    if is_available():
        from .. import random as _random
        _random.manual_seed(seed)


def manual_seed_all(seed):
    """:func:`manual_seed` for every GPU (numbagrad drives one)."""
    manual_seed(seed)


def seed():
    """Seed the generator CUDA ops draw from with a random number; nothing without a GPU."""
    if is_available():
        from .. import random as _random
        _random.seed()


def seed_all():
    """Seed every GPU's generator with a random number: the same as :func:`seed` (one device)."""
    seed()


from . import amp  # noqa: E402  (torch.cuda.amp)

__all__ = ["is_available", "device_count", "current_device", "set_device", "memory_allocated", "max_memory_allocated",
           "reset_peak_memory_stats", "memory_reserved", "empty_cache", "synchronize", "get_device_name",
           "manual_seed", "manual_seed_all", "seed", "seed_all"]
