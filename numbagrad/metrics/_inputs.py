"""Input handling shared by the functional and the stateful metrics: arrays out of Tensors,
NumPy arrays, CUDA arrays or lists; shape and label checks; the ``zero_division`` rule.

Every label is checked against ``[0, C)`` here, before a counting kernel runs (numba does
not bounds-check: a bad label in a kernel is a write outside the matrix).
"""
import math
import numbers
import warnings

import numpy as np

from ..backend import backend_of


class UndefinedMetricWarning(UserWarning):
    """A metric was undefined for these inputs (a 0/0) and was set by ``zero_division``
    (scikit-learn's ``UndefinedMetricWarning``, numbagrad's own class)."""


# ---- arrays ---------------------------------------------------------------------------------
def as_array(x, fn, arg):
    """The backend array behind ``x``: a Tensor's array, a NumPy or CUDA array as it is, a
    list or scalar through ``np.asarray``. Never copies."""
    from ..tensor import Tensor
    if isinstance(x, Tensor):
        return x.array
    if isinstance(x, np.ndarray):
        return x
    if not isinstance(x, (list, tuple, numbers.Number, np.generic)) and x is not None:
        try:
            backend_of(x)
            return x
        except TypeError:
            pass
    a = np.asarray(x)
    if a.dtype == object or a.dtype.kind not in "biuf":
        raise TypeError(f"{fn}(): {arg} must be a Tensor, an array or a list of numbers, got "
                        f"{type(x).__name__}" + (f" of dtype {a.dtype}" if a.dtype != object else ""))
    return a


def on_cpu(a):
    return isinstance(a, np.ndarray)


def host(a):
    """A NumPy array of the backend array ``a`` (``a`` itself on the CPU)."""
    return a if isinstance(a, np.ndarray) else backend_of(a).to_numpy(a)


def item(x):
    """A Python number out of a NumPy scalar, a 0-d or 1-element backend array."""
    if isinstance(x, (numbers.Number, np.generic)):
        return x.item() if isinstance(x, np.generic) else x
    return host(x).reshape(()).item()


def same_device(fn, a, b, names=("pred", "target")):
    if on_cpu(a) != on_cpu(b) or (not on_cpu(a) and backend_of(a) is not backend_of(b)):
        raise ValueError(f"{fn}(): {names[0]} and {names[1]} must be on one device, got "
                         f"{type(a).__name__} and {type(b).__name__}")


def contiguous(a):
    """``a`` C-contiguous (itself when it is), on its backend."""
    return backend_of(a).contiguous(a)


def _shape(a):
    return tuple(int(s) for s in a.shape)


# ---- labels -----------------------------------------------------------------------------------
def check_label_dtype(fn, arg, a):
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{fn}(): {arg} must hold class indices (integers), got dtype {a.dtype}")


def label_range(a):
    """``(min, max)`` of a non-empty backend array, as Python numbers."""
    return item(np.min(a)), item(np.max(a))


def fail_labels(fn, arg, a, num_classes):
    """Raise the ``ValueError`` naming the first entry of ``a`` that is no class index in
    ``[0, num_classes)`` (its value and position)."""
    h = host(a)
    bad = (h < 0) | (h >= num_classes)
    if h.dtype.kind == "f":
        bad |= ~np.isfinite(h) | (h != np.floor(h))
    pos = np.flatnonzero(bad.reshape(-1))
    if pos.size == 0:  # pragma: no cover - only called when the range check failed
        return
    where = np.unravel_index(int(pos[0]), h.shape)
    where = int(where[0]) if len(where) == 1 else tuple(int(w) for w in where)
    v = h.reshape(-1)[pos[0]].item()
    raise ValueError(f"{fn}(): {arg} holds {v!r} at position {where}, which is not a class index in "
                     f"[0, {num_classes})")


def check_labels(fn, arg, a, num_classes):
    """Every entry of ``a`` is an integer in ``[0, num_classes)``; else ``ValueError``."""
    check_label_dtype(fn, arg, a)
    if a.size == 0:
        return
    lo, hi = label_range(a)
    ok = lo >= 0 and hi < num_classes
    if ok and a.dtype.kind == "f":
        ok = item(np.all(a == np.floor(a)))
    if not ok:
        fail_labels(fn, arg, a, num_classes)


def labels_int64(a):
    """Checked labels as a 1-D C-contiguous ``int64`` array (no copy when ``a`` is one)."""
    if a.dtype != np.int64:
        a = a.astype(np.int64)
    return backend_of(a).flat(a)


# ---- zero_division -------------------------------------------------------------------------
def check_zero_division(fn, zero_division):
    """The value a 0/0 takes: 0.0 for ``'warn'``, else ``zero_division`` (0, 1 or NaN)."""
    if isinstance(zero_division, str):
        if zero_division == "warn":
            return 0.0
    elif isinstance(zero_division, numbers.Real) and not isinstance(zero_division, bool):
        z = float(zero_division)
        if z in (0.0, 1.0) or math.isnan(z):
            return z
    raise ValueError(f"{fn}(): zero_division must be 'warn', 0, 1 or np.nan, got {zero_division!r}")


def warn_undefined(message):
    warnings.warn(message, UndefinedMetricWarning, stacklevel=4)


# ---- class-count and shape checks --------------------------------------------------------------
def check_num_classes(fn, num_classes, allow_none=True):
    if num_classes is None and allow_none:
        return None
    if (isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral)
            or int(num_classes) < 1):
        raise ValueError(f"{fn}(): num_classes must be a positive integer, got {num_classes!r}")
    return int(num_classes)


def shape_error(fn, pred, target, why):
    return ValueError(f"{fn}(): pred of shape {_shape(pred)} and target of shape {_shape(target)} {why}")
