"""Helpers shared by the op modules: operand normalisation and error messages."""
import numpy as np

from .. import _dtype
from ..backend.dispatch import _BY_ARRAY_TYPE
from ..tensor import Tensor


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)  # the dtypes of the fast paths below


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
        aa, ba = a.array, b.array
        da, db = aa.dtype, ba.dtype
        if type(aa) is not type(ba):
            raise RuntimeError(f"{opname}: expected all tensors to be on the same device, got "
                               f"{a.device} and {b.device} (shapes {tuple(a.shape)} and {tuple(b.shape)})")
        if aa.shape != ba.shape:  # a mismatch raises here, naming the op (NumPy's error names none)
            for x, y in zip(reversed(a.shape), reversed(b.shape)):
                if x != y and x != 1 and y != 1:
                    broadcast_shape(opname, a.shape, b.shape)
        if da != db:
            d = _dtype.promote(da, db)
            from .shape import cast
            if da != d:
                a = cast(a, d)
            if db != d:
                b = cast(b, d)
        return a, b
    if ta:
        if type(b) is float or type(b) is int:  # the common case: a float tensor keeps its dtype
            d = a.array.dtype
            if d is _F32 or d is _F64:
                return a, d.type(b)
        return _with_scalar(a, b, opname), _scalar(b, a, opname)
    if tb:
        if type(a) is float or type(a) is int:
            d = b.array.dtype
            if d is _F32 or d is _F64:
                return d.type(a), b
        return _scalar(a, b, opname), _with_scalar(b, a, opname)
    raise TypeError(f"{opname}: expected at least one Tensor operand, got "
                    f"{type(a).__name__} and {type(b).__name__}")


def broadcast_shape(opname, *shapes, names=None, error=RuntimeError):
    """The shape that ``shapes`` broadcast to, or PyTorch's error naming the op, the first
    mismatching sizes, the dimension (of the result) and every shape. With ``names`` (one per
    shape: ``("input", "target")``) the error names each operand and its shape instead, and is
    raised as ``error``."""
    n = max(len(s) for s in shapes)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(s, n - len(s)):
            if d != out[i] and d != 1 and out[i] != 1:
                if names is not None:
                    raise error(f"{opname}: " + " and ".join(f"{w} of shape {tuple(x)}" for w, x in zip(names, shapes))
                                + " are not broadcastable")
                raise RuntimeError(f"{opname}: The size of tensor a ({out[i]}) must match the size of "
                                   f"tensor b ({d}) at non-singleton dimension {i} (shapes "
                                   + ", ".join(str(tuple(x)) for x in shapes) + ")")
            if d != 1:
                out[i] = d
    return tuple(out)


def same_device(opname, *ts):
    """Raise PyTorch's error unless the Tensors ``ts`` (``None`` entries skipped) are on one device."""
    ts = [t for t in ts if t is not None]
    if len({type(t.array) for t in ts}) > 1:
        raise RuntimeError(f"{opname}: expected all tensors to be on the same device, got "
                           + ", ".join(f"{t.device} (shape {tuple(t.shape)})" for t in ts))


def float_operands(opname, *ts, upcast_bfloat16=False):
    """The Tensors ``ts`` in one floating dtype: the prologue of the ops whose kernels take
    float32/float64. PyTorch's promotion among them; integer/bool operands take the default
    float dtype; float16 is computed in float32 (no @njit type), and so is bfloat16 when
    ``upcast_bfloat16`` (the losses; other ops keep it). Returns ``(tensors, back)``: ``back``
    is the dtype to cast the result back to with :func:`cast_back` (float16), else None."""
    if len(ts) == 1:
        d = ts[0].array.dtype
        if d is _F32 or d is _F64:  # the common case: nothing to cast
            return [ts[0]], None
    from .shape import cast
    d = ts[0].dtype
    for t in ts[1:]:
        d = _dtype.promote(d, t.dtype)
    if not _dtype.is_float(d) or (upcast_bfloat16 and d == _dtype.bfloat16):
        d = _dtype.get_default_dtype() if d != _dtype.bfloat16 else _dtype.float32
    back = None
    if d == _dtype.float16:
        back, d = d, _dtype.float32
    return [cast(t, d) if t.dtype != d else t for t in ts], back


def cast_back(out, back):
    """``out`` cast to ``back`` (the dtype :func:`float_operands` computed away from), or itself."""
    if back is None:
        return out
    from .shape import cast
    return cast(out, back)


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


def wrap_dim(dim, ndim, opname, name="dim", scalar_ok=True):
    """``dim`` as an axis in ``[0, ndim)``, by PyTorch's rule and with its message.

    Negative values count from the end. A 0-d tensor takes ``dim`` 0 or -1, as a 1-d
    one would (PyTorch's ``wrap_scalar``), unless ``scalar_ok`` is false. ``name`` is the
    argument's name in the error (``dim``, ``start_dim``, ``source``, ...). Every op that
    takes a dimension goes through here, so the range check and its wording are in one place.
    """
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{opname}: {name} must be an int, got {type(dim).__name__} {dim!r}")
    dim = int(dim)
    if ndim == 0 and not scalar_ok:
        raise IndexError(f"{opname}: Dimension specified as {dim} but tensor has no dimensions "
                         f"(argument '{name}')")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{opname}: Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim}) (argument '{name}' of a {ndim}-d tensor)")
    return dim % n


def norm_axis(dim, ndim, opname, name="dim"):
    """``dim`` (int, sequence of ints or None for all) as a sorted tuple of axes in
    ``[0, ndim)``; each goes through :func:`wrap_dim`, and a repeated axis raises."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, (bool, np.bool_)):
        a = wrap_dim(dim, ndim, opname, name)
        return (a,) if ndim else ()  # a 0-d tensor's dim 0 (or -1) is no axis of its array
    if not isinstance(dim, (tuple, list)):
        raise TypeError(f"{opname}: argument '{name}' must be an int or a tuple of ints, "
                        f"got {type(dim).__name__} {dim!r}")
    out = []
    for d in dim:
        a = wrap_dim(d, ndim, opname, name)
        if a in out:
            raise RuntimeError(f"{opname}: dim {a} appears multiple times in the list of dims "
                               f"(argument '{name}' = {tuple(dim)})")
        out.append(a)
    return tuple(sorted(out)) if ndim else ()


def shape_str(*ts):
    return " and ".join(str(tuple(t.shape)) for t in ts)
