"""dtypes are NumPy dtype objects; this module names them and promotes between them.

``bfloat16`` is ``ml_dtypes``' NumPy dtype (as in JAX). NOTE: its ``kind`` is ``'V'``, not
``'f'``: test floating-ness with :func:`is_float`, never with ``dtype.kind == "f"``. On the
CPU it is a storage type: ops convert bfloat16 arrays to float32, compute, and round the
results back (``autograd/function.py``).
"""
import ml_dtypes
import numpy as np

float16 = half = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float32 = float = np.dtype(np.float32)
float64 = double = np.dtype(np.float64)
int8 = np.dtype(np.int8)
uint8 = np.dtype(np.uint8)
int16 = short = np.dtype(np.int16)
int32 = int = np.dtype(np.int32)
int64 = long = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)

_default_float = float32
_ALIASES = {
    "float16": float16, "half": float16, "bfloat16": bfloat16, "float32": float32, "float": float32,
    "float64": float64, "double": float64, "int8": int8, "uint8": uint8,
    "int16": int16, "int32": int32, "int": int32, "int64": int64, "long": int64,
    "bool": bool_,
}


def get_default_dtype():
    """The dtype of floating tensors made from Python floats (float32 unless set)."""
    return _default_float


def set_default_dtype(d):
    """Set the default floating dtype (float32 or float64), as ``torch.set_default_dtype``."""
    global _default_float
    d = as_dtype(d)
    if d.kind != "f":  # torch allows bfloat16 here; numbagrad's factories compute in the default
        raise TypeError(f"set_default_dtype: only floating dtypes are allowed, got {d}")
    _default_float = d


def as_dtype(d):
    """Normalise a dtype given as a numbagrad/NumPy dtype, a Python type or a name."""
    if d is None:
        return None
    if isinstance(d, np.dtype):
        return d
    if isinstance(d, str):
        try:
            return _ALIASES[d]
        except KeyError:
            raise TypeError(f"unknown dtype name {d!r}; expected one of {sorted(_ALIASES)}") from None
    if d is builtins_float:
        return _default_float
    if d is builtins_int:
        return int64
    if d is builtins_bool:
        return bool_
    return np.dtype(d)


import builtins as _b  # noqa: E402
builtins_float, builtins_int, builtins_bool = _b.float, _b.int, _b.bool


def is_float(d):
    """True for floating dtypes: kind ``'f'`` (float16/32/64) or bfloat16 (kind ``'V'``)."""
    return d.kind == "f" or d == bfloat16


def finfo(d):
    """``torch.finfo``: NumPy's ``finfo``, ``ml_dtypes.finfo`` for bfloat16."""
    d = as_dtype(d) if not isinstance(d, np.dtype) else d
    return ml_dtypes.finfo(d) if d == bfloat16 else np.finfo(d)


def promote(a, b):
    """Result dtype of a binary op between two tensor dtypes, PyTorch style.

    Unlike NumPy, an integer tensor meeting a float tensor takes the float's dtype
    (int32 + float32 -> float32, not float64).
    """
    if a == b:
        return a
    af, bf = is_float(a), is_float(b)
    if af and not bf:
        return a
    if bf and not af:
        return b
    if a == bfloat16 or b == bfloat16:  # bfloat16 + float16 -> float32, as torch
        return np.promote_types(float32, b if a == bfloat16 else a)
    return np.promote_types(a, b)


def scalar_result(tensor_dtype, scalar):
    """Result dtype of ``tensor <op> python_scalar``: the scalar never widens a tensor
    of its own kind (float32 + 2.0 stays float32), but an int/bool tensor meeting a
    float scalar becomes the default float dtype, and a bool tensor meeting an int
    becomes int64."""
    if isinstance(scalar, _b.bool):
        return tensor_dtype
    if isinstance(scalar, _b.float) or (isinstance(scalar, np.floating)):
        return tensor_dtype if is_float(tensor_dtype) else _default_float
    if isinstance(scalar, (_b.int, np.integer)):
        return int64 if tensor_dtype.kind == "b" else tensor_dtype
    raise TypeError(f"unsupported scalar operand of type {type(scalar).__name__}")
