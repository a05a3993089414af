"""The one place that maps an array type, or a device, to its backend.

``ARRAY_TYPES`` is the one tuple of array types a Tensor may hold; ``register_backend``
extends it, and every module that tests "is this a backend array" reads it from here
(``dispatch.ARRAY_TYPES``, looked up at call time, since a backend registers on first use).
"""
from ..device import device as _device

_BY_ARRAY_TYPE = {}
_BY_DEVICE_TYPE = {}
ARRAY_TYPES = ()


def register_backend(array_type, device_type, backend, holds=True):
    """Make ``backend`` the owner of ``array_type`` and of ``device_type``; ``holds``: a
    Tensor may hold arrays of this type (False for NumPy scalar types, which only map)."""
    global ARRAY_TYPES
    _BY_ARRAY_TYPE[array_type] = backend
    _BY_DEVICE_TYPE[device_type] = backend
    if holds and array_type not in ARRAY_TYPES:
        ARRAY_TYPES = ARRAY_TYPES + (array_type,)


def is_array(x):
    """Whether ``x`` is an array of a registered backend (what a Tensor holds)."""
    return isinstance(x, ARRAY_TYPES)


def device_available(device_type):
    """Whether the device kind ``device_type`` ('cpu', 'cuda') can be used on this machine,
    without creating its backend."""
    if device_type in _BY_DEVICE_TYPE:
        return True
    if device_type == "cuda":
        from . import cuda
        return cuda.available()
    return False


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
