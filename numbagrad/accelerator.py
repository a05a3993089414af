"""``torch.accelerator`` (PyTorch 2.6+): the device-agnostic view of the accelerator.

numbagrad's one accelerator kind is CUDA (:mod:`numbagrad.cuda`, which drives one GPU,
``cuda:0``); every function here answers from :mod:`numbagrad.cuda`. As in PyTorch, the
functions that touch the device raise ``RuntimeError`` when no accelerator is available.
:func:`current_accelerator` answers ``device('cuda')`` only when a GPU (or the simulator)
is usable: numba-cuda is installed with the test extras on machines without a GPU, and
an accelerator that cannot run would send ``x.to(torch.accelerator.current_accelerator())``
to a device that fails (PyTorch's CPU build answers None there too).
"""
import contextlib

from . import cuda as _cuda
from .device import device as _device

_NONE = "Cannot access accelerator device when none is available."


def is_available():
    """True when the accelerator (a CUDA GPU, or numba's CUDA simulator) can be used."""
    return _cuda.is_available()


def current_accelerator(check_available=False):
    """``device('cuda')`` when a GPU is usable, else None (``check_available`` is accepted
    for PyTorch's signature; the answer already checks)."""
    return _device("cuda") if is_available() else None


def device_count():
    """The number of accelerators numbagrad drives: 1 with a usable GPU, else 0."""
    return _cuda.device_count()


def _require():
    if not is_available():
        raise RuntimeError(_NONE)


def current_device_index():
    """The index of the current accelerator (always 0: numbagrad drives ``cuda:0``)."""
    _require()
    return _cuda.current_device()


current_device_idx = current_device_index


def set_device_index(device, /):
    """Make ``device`` (an index, ``"cuda:N"`` or a device) current. Only 0 is valid."""
    _require()
    _cuda.set_device(device)


set_device_idx = set_device_index


@contextlib.contextmanager
def device_index(device, /):
    """Context manager that makes ``device`` current inside it (``None`` does nothing)."""
    if device is not None:
        set_device_index(device)
    yield


def synchronize(device=None, /):
    """Wait for every kernel queued on the accelerator."""
    _require()
    if device is not None:
        _cuda.set_device(device)   # checks the index; cuda:0, the only device, stays current
    _cuda.synchronize()


def empty_cache():
    """Return the allocator's cached blocks to the driver (:func:`numbagrad.cuda.empty_cache`)."""
    _cuda.empty_cache()


def memory_allocated(device_index=None, /):
    """Bytes the current accelerator's tensors occupy now (``torch.accelerator.memory_allocated``); 0 without a GPU."""
    return _cuda.memory_allocated(device_index)


def max_memory_allocated(device_index=None, /):
    """Peak of :func:`memory_allocated` since the start or the last :func:`reset_peak_memory_stats`."""
    return _cuda.max_memory_allocated(device_index)


def memory_reserved(device_index=None, /):
    """Bytes the current accelerator's caching allocator holds, in use or cached."""
    return _cuda.memory_reserved(device_index)


def reset_peak_memory_stats(device_index=None, /):
    """Restart the peak that :func:`max_memory_allocated` reports from the current allocation."""
    _cuda.reset_peak_memory_stats(device_index)


__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "current_device_idx",
           "set_device_index", "set_device_idx", "device_index", "synchronize", "empty_cache",
           "memory_allocated", "max_memory_allocated", "memory_reserved", "reset_peak_memory_stats"]
