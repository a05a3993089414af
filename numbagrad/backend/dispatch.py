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
        for t in type(array).__mro__[1:]:  # a subclass (``np.memmap``) is its base's
            if t in _BY_ARRAY_TYPE:
                return _BY_ARRAY_TYPE[t]
        raise TypeError(f"no numbagrad backend holds arrays of type {type(array).__name__}") from None


def backend_for_device(dev):
    """The backend of a device spec (``"cpu"``, ``"cuda:0"``, a :class:`device`)."""
    dev = _device(dev)
    be = _BY_DEVICE_TYPE.get(dev.type)
    if be is not None and (dev.type != "cuda" or dev.index in (None, 0)):
        return be
    if dev.type == "cuda":
        from . import cuda
        try:
            be = cuda.get_backend()
        except RuntimeError as e:
            raise RuntimeError(f"device {str(dev)!r} was asked for, but numbagrad has no CUDA backend "
                               f"on this machine: {e}") from None
        if dev.index not in (None, 0):
            raise RuntimeError(f"device {str(dev)!r}: numbagrad's CUDA backend drives one GPU, cuda:0")
        return be
    raise KeyError(dev.type)
