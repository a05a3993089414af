"""Padding layers (``torch.nn.ZeroPad2d``, ``ReflectionPad1d``, ...): thin Module wrappers of
:func:`numbagrad.nn.functional.pad` with PyTorch's constructor arguments, attributes,
``repr`` and input checks.

``padding`` is an int (the same width on every side of each padded dimension) or a tuple
``(left, right[, top, bottom[, front, back]])``, kept as given (PyTorch does not check its
length either). The input checks are PyTorch's: the constant pads take any input with at
least as many dimensions as they pad; reflection and replication pad ``n`` dimensions of an
``n+1``-d (unbatched) or ``n+2``-d (batched) input and raise ``NotImplementedError``
otherwise; the circular pads raise ``ValueError`` for other ranks. They hold no parameters
or buffers, so their ``state_dict()`` is empty.
"""
from ..ops.shape import pad as _pad
from .module import Module

__all__ = ["ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "CircularPad1d", "CircularPad2d", "CircularPad3d"]


def _ntuple(padding, n):
    """``padding`` as a tuple: an int repeated ``2n`` times, any sequence as a tuple."""
    if isinstance(padding, (tuple, list)):
        return tuple(padding)
    return (padding,) * (2 * n)


_SUPPORTED = ("Supported combinations for non-constant padding:\n"
              "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
              "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
              "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


class _PadNd(Module):
    mode = "constant"
    _dims = 1

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, self._dims)

    def _check_input(self, input):
        n = len(self.padding)
        if n // 2 > input.ndim:
            raise RuntimeError(f"{type(self).__name__}: Padding length should be less than or equal to two times the "
                               f"input dimension but got padding length {n} and input of dimension {input.ndim}")
        if input.ndim not in (n // 2 + 1, n // 2 + 2):
            raise NotImplementedError(f"{type(self).__name__}: Padding size {n} is not supported for {input.ndim}D "
                                      f"input tensor.\n{_SUPPORTED}")

    def forward(self, input):
        self._check_input(input)
        return _pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


# ---- constant -------------------------------------------------------------------------------------
class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def _check_input(self, input):
        n = len(self.padding)
        if n // 2 > input.ndim:
            raise RuntimeError(f"{type(self).__name__}: Padding length should be less than or equal to two times the "
                               f"input dimension but got padding length {n} and input of dimension {input.ndim}")

    def forward(self, input):
        self._check_input(input)
        return _pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dimension with the constant ``value`` (``torch.nn.ConstantPad1d``);
    ``padding`` is an int or ``(left, right)``."""
    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dimensions with the constant ``value`` (``torch.nn.ConstantPad2d``);
    ``padding`` is an int or ``(left, right, top, bottom)``."""
    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dimensions with the constant ``value`` (``torch.nn.ConstantPad3d``);
    ``padding`` is an int or ``(left, right, top, bottom, front, back)``."""
    _dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dimension with zeros (``torch.nn.ZeroPad1d``): ``ConstantPad1d(padding, 0.0)``."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last two dimensions with zeros (``torch.nn.ZeroPad2d``): ``ConstantPad2d(padding, 0.0)``."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last three dimensions with zeros (``torch.nn.ZeroPad3d``): ``ConstantPad3d(padding, 0.0)``."""

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


# ---- reflection and replication --------------------------------------------------------------------
class _ReflectionPadNd(_PadNd):
    mode = "reflect"


class ReflectionPad1d(_ReflectionPadNd):
    """Pad the last dimension of ``(C, W)`` / ``(N, C, W)`` with its mirror image, the edge
    not repeated (``torch.nn.ReflectionPad1d``); each width must be below the size."""
    _dims = 1


class ReflectionPad2d(_ReflectionPadNd):
    """Reflection padding of the last two dimensions of ``(C, H, W)`` / ``(N, C, H, W)``
    (``torch.nn.ReflectionPad2d``)."""
    _dims = 2


class ReflectionPad3d(_ReflectionPadNd):
    """Reflection padding of the last three dimensions of ``(C, D, H, W)`` / ``(N, C, D, H, W)``
    (``torch.nn.ReflectionPad3d``)."""
    _dims = 3


class _ReplicationPadNd(_PadNd):
    mode = "replicate"


class ReplicationPad1d(_ReplicationPadNd):
    """Pad the last dimension of ``(C, W)`` / ``(N, C, W)`` by repeating its edge values
    (``torch.nn.ReplicationPad1d``)."""
    _dims = 1


class ReplicationPad2d(_ReplicationPadNd):
    """Replication padding of the last two dimensions of ``(C, H, W)`` / ``(N, C, H, W)``
    (``torch.nn.ReplicationPad2d``)."""
    _dims = 2


class ReplicationPad3d(_ReplicationPadNd):
    """Replication padding of the last three dimensions of ``(C, D, H, W)`` / ``(N, C, D, H, W)``
    (``torch.nn.ReplicationPad3d``)."""
    _dims = 3


# ---- circular ---------------------------------------------------------------------------------------
class _CircularPadNd(_PadNd):
    mode = "circular"

    def _check_input(self, input):
        d = self._dims
        if input.ndim not in (d + 1, d + 2):
            raise ValueError(f"{type(self).__name__}: expected {d + 1}D or {d + 2}D input (got {input.ndim}D input)")


class CircularPad1d(_CircularPadNd):
    """Pad the last dimension of ``(C, W)`` / ``(N, C, W)`` by wrapping around
    (``torch.nn.CircularPad1d``); each width at most the size."""
    _dims = 1


class CircularPad2d(_CircularPadNd):
    """Circular padding of the last two dimensions of ``(C, H, W)`` / ``(N, C, H, W)``
    (``torch.nn.CircularPad2d``)."""
    _dims = 2


class CircularPad3d(_CircularPadNd):
    """Circular padding of the last three dimensions of ``(C, D, H, W)`` / ``(N, C, D, H, W)``
    (``torch.nn.CircularPad3d``)."""
    _dims = 3
