"""The one place that maps an array type, or a device, to its backend."""
from ..device import device as _device

_BY_ARRAY_TYPE = {}
_BY_DEVICE_TYPE = {}


def register_backend(array_type, device_type, backend):
    _BY_ARRAY_TYPE[array_type] = backend
    _BY_DEVICE_TYPE[device_type] = backend


def backend_of(array):
    """The backend that owns ``array`` (a NumPy array is the CPU backend's)."""
    try:
        return _BY_ARRAY_TYPE[type(array)]
    except KeyError:
        raise TypeError(f"no numbagrad backend holds arrays of type {type(array).__name__}") from None


def backend_for_device(dev):
    """The backend of a device spec (``"cpu"``, ``"cuda:0"``, a :class:`device`)."""
    dev = _device(dev)
    try:
        return _BY_DEVICE_TYPE[dev.type]
    except KeyError:
        if dev.type == "cuda":
            raise RuntimeError(
                f"device {str(dev)!r} was asked for, but numbagrad has no CUDA backend available "
                "on this machine (no CUDA driver/GPU was found, or the CUDA backend is not built)"
            ) from None
        raise
