"""Helpers shared by the op modules: operand normalisation and error messages."""
import numpy as np

from .. import _dtype
from ..backend import backend_of
from ..backend.dispatch import _BY_ARRAY_TYPE
from ..tensor import Tensor


def be_of(*arrays):
    """The backend of the first argument that is a backend array (others may be scalars)."""
    for a in arrays:
        b = _BY_ARRAY_TYPE.get(type(a))
        if b is not None:
            return b
    raise TypeError("no backend array among the arguments")


def as_tensor_arg(x, opname, dtype=None):
    """``x`` as a Tensor (lists/arrays/scalars are wrapped, never tracked)."""
    if isinstance(x, Tensor):
        return x
    return Tensor(x, dtype=dtype)


def binary_operands(a, b, opname):
    """Normalise the operands of a binary op.

    Returns ``(a, b)`` where each is a Tensor or a NumPy scalar of the result dtype,
    with PyTorch's promotion: a Python scalar never widens a tensor of its own kind,
    int + float tensors take the float dtype, and tensors on different devices raise.
    """
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if ta and tb:
        da, db = a.array.dtype, b.array.dtype
        if type(a.array) is not type(b.array):
            raise RuntimeError(f"{opname}: expected all tensors to be on the same device, got "
                               f"{a.device} and {b.device} (shapes {tuple(a.shape)} and {tuple(b.shape)})")
        if da != db:
            d = _dtype.promote(da, db)
            from .shape import cast
            if da != d:
                a = cast(a, d)
            if db != d:
                b = cast(b, d)
        return a, b
    if ta:
        return _with_scalar(a, b, opname), _scalar(b, a, opname)
    if tb:
        return _scalar(a, b, opname), _with_scalar(b, a, opname)
    raise TypeError(f"{opname}: expected at least one Tensor operand, got "
                    f"{type(a).__name__} and {type(b).__name__}")


def _result_dtype(t, s, opname):
    if isinstance(s, (np.ndarray, list, tuple)):
        raise TypeError(f"{opname}: mix of Tensor (shape {tuple(t.shape)}) and "
                        f"{type(s).__name__}; wrap the other operand with numbagrad.tensor()")
    try:
        return _dtype.scalar_result(t.array.dtype, s)
    except TypeError:
        raise TypeError(f"{opname}: unsupported operand of type {type(s).__name__} with a Tensor "
                        f"of dtype {t.array.dtype}") from None


def _with_scalar(t, s, opname):
    d = _result_dtype(t, s, opname)
    if d != t.array.dtype:
        from .shape import cast
        return cast(t, d)
    return t


def _scalar(s, t, opname):
    return _result_dtype(t, s, opname).type(s)


def norm_axis(dim, ndim, opname):
    """``dim`` (int, tuple or None) as a sorted tuple of non-negative axes."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)):
        dim = (int(dim),)
    out = []
    for d in dim:
        d = int(d)
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise IndexError(f"{opname}: dimension {d} out of range for a tensor of {ndim} dimensions")
        out.append(d % ndim if ndim else 0)
    return tuple(sorted(set(out)))


def shape_str(*ts):
    return " and ".join(str(tuple(t.shape)) for t in ts)
