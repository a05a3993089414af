"""Tensor factories: ``tensor``, ``zeros``, ``ones``, ``full``, ``arange``, ``linspace``,
``eye``, ``rand``, ``randn``, ``randint`` and the ``*_like`` forms."""
import numpy as np

from . import _dtype
from .backend import backend_for_device
from .tensor import Tensor, native_array
from . import random as _random

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange", "linspace",
           "logspace", "eye", "rand", "randn", "randint", "randperm", "zeros_like", "ones_like",
           "empty_like", "rand_like", "randn_like", "full_like", "randint_like"]


def _finish(arr, dtype, device, requires_grad):
    if device is not None:
        arr = backend_for_device(device).from_numpy(arr)   # the CPU's is the array itself
    t = Tensor._from_array(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, (int, np.integer)) or s < 0:
            raise ValueError(f"invalid size {tuple(size)}: every dimension must be a non-negative int")
    return tuple(int(s) for s in size)


def _float(dtype):
    d = _dtype.as_dtype(dtype)
    return _dtype.get_default_dtype() if d is None else d


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (nested lists, scalars, NumPy arrays or a Tensor).

    Python floats become the default float dtype (float32), Python ints int64, bools bool.

    >>> import numbagrad as ng
    >>> ng.tensor([[1, 2], [3, 4]]).dtype == ng.int64
    True
    >>> x = ng.tensor([1.5, -2.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad.tolist()
    [3.0, -4.0]
    """
    if isinstance(data, Tensor):
        if device is None:
            device = data.device  # as torch.tensor(t): the copy stays on t's device
        data = data.detach().cpu().numpy()
    d = _dtype.as_dtype(dtype)
    if d is None:
        arr = _array("tensor", data)
        if arr.dtype == np.float64 and not (isinstance(data, np.ndarray) or isinstance(data, np.floating)):
            arr = arr.astype(_dtype.get_default_dtype())
        elif arr.dtype.kind not in "fiub" and arr.dtype != _dtype.bfloat16:
            raise TypeError(f"tensor: can't convert data of dtype {arr.dtype} (from {type(data).__name__})")
    else:
        arr = _array("tensor", data, d)
    return _finish(native_array(arr), dtype, device, requires_grad)


def _array(opname, data, dtype=None):
    """``np.array(data, dtype)``, with a ragged nested sequence named as such."""
    try:
        return np.array(data, dtype=dtype)
    except ValueError as e:
        if "inhomogeneous" not in str(e) and "sequence" not in str(e):
            raise
        raise ValueError(f"{opname}: expected a rectangular nested sequence (every row of one length), got "
                         f"a ragged one: {str(data)[:80]}") from None


def as_tensor(data, dtype=None, device=None):
    """Like :func:`tensor` but shares memory with a NumPy array when it can."""
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, np.ndarray) and (dtype is None or np.dtype(dtype) == data.dtype) and device in (None, "cpu"):
        return Tensor._from_array(native_array(data))
    return tensor(data, dtype, device)


def from_numpy(arr):
    """A tensor sharing memory with the NumPy array ``arr``. A subclass (``np.memmap``,
    ``np.matrix``...) is held as a plain ``ndarray`` view of the same memory, so ops see the
    arrays they expect, as PyTorch sees only the buffer. A non-native byte order (``'>f4'``
    on x86) is converted to native, a copy: there the memory is not shared (PyTorch raises)."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray, got {type(arr).__name__}")
    return Tensor._from_array(native_array(arr))


def zeros(*size, dtype=None, device=None, requires_grad=False):
    """A tensor filled with 0 of the given size (``torch.zeros``), float32 unless ``dtype`` says.

    >>> import numbagrad as ng
    >>> ng.zeros(2, 3).shape
    (2, 3)
    >>> ng.zeros((2,), dtype=ng.int64).tolist()
    [0, 0]
    """
    return _finish(np.zeros(_size(size), _float(dtype)), dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    """A tensor filled with 1 of the given size (``torch.ones``), float32 unless ``dtype`` says."""
    return _finish(np.ones(_size(size), _float(dtype)), dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    """An uninitialised tensor of the given size (``torch.empty``): its values are arbitrary."""
    return _finish(np.empty(_size(size), _float(dtype)), dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of ``size`` filled with ``fill_value`` (``torch.full``); the dtype follows the value
    (bool, int64, or the default float dtype) unless ``dtype`` says.
    """
    if dtype is None:
        d = _dtype.scalar_result(_dtype.bool_, fill_value) if not isinstance(fill_value, bool) else _dtype.bool_
        if isinstance(fill_value, float):
            d = _dtype.get_default_dtype()
    else:
        d = _dtype.as_dtype(dtype)
    return _finish(np.full(_size((size,) if isinstance(size, int) else (tuple(size),)), fill_value, d),
                   dtype, device, requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from ``start`` to ``end`` (exclusive); int64 for integer arguments, else float32."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError(f"arange: step must be nonzero (start={start}, end={end})")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound and lower bound inconsistent with step sign (start={start}, "
                           f"end={end}, step={step})")
    d = _dtype.as_dtype(dtype)
    if d is None:
        d = _dtype.int64 if all(isinstance(v, (int, np.integer)) for v in (start, end, step)) \
            else _dtype.get_default_dtype()
    return _finish(np.arange(start, end, step).astype(d), dtype, device, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """``steps`` values evenly spaced from ``start`` to ``end`` inclusive (``torch.linspace``)."""
    _size((steps,))
    return _finish(np.linspace(start, end, steps).astype(_float(dtype)), dtype, device, requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    """``steps`` values ``base ** x`` for ``x`` evenly spaced from ``start`` to ``end`` (``torch.logspace``)."""
    return _finish(np.logspace(start, end, steps, base=base).astype(_float(dtype)), dtype, device, requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """A 2-D tensor with ones on the diagonal and zeros elsewhere, ``n`` x ``m`` (``m`` defaults to ``n``)."""
    _size((n,) if m is None else (n, m))
    return _finish(np.eye(n, m, dtype=_float(dtype)), dtype, device, requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Uniform samples on [0, 1), from numbagrad's seeded generator."""
    g = generator or _random.default_generator
    return _finish(g.numpy_rng.random(_size(size)).astype(_float(dtype)), dtype, device, requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Standard normal samples, from numbagrad's seeded generator."""
    g = generator or _random.default_generator
    return _finish(g.numpy_rng.standard_normal(_size(size)).astype(_float(dtype)), dtype, device, requires_grad)


def randint(low, high=None, size=None, dtype=None, device=None, generator=None):
    """Integers in ``[low, high)`` (int64 by default). As in PyTorch, ``randint(high, size)``
    (two positional arguments, the second a shape) draws from ``[0, high)``."""
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint: missing the 'size' argument")
    g = generator or _random.default_generator
    d = _dtype.as_dtype(dtype) or _dtype.int64
    return _finish(g.numpy_rng.integers(low, high, size=_size((tuple(size),))).astype(d), dtype, device, False)


def randperm(n, dtype=None, device=None, generator=None):
    """A random permutation of ``0 .. n-1`` (int64 by default), drawn from ``generator`` or the default one."""
    g = generator or _random.default_generator
    return _finish(g.numpy_rng.permutation(n).astype(_dtype.as_dtype(dtype) or _dtype.int64), dtype, device, False)


def _like(fn):
    def like(input, dtype=None, device=None, requires_grad=False, **kw):
        t = fn(*input.shape, dtype=dtype or input.dtype, device=device or input.device,
               requires_grad=requires_grad, **kw)
        return t
    like.__name__ = fn.__name__ + "_like"
    like.__doc__ = f"``{fn.__name__}`` with the shape (and by default dtype and device) of ``input``."
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)
rand_like = _like(rand)
randn_like = _like(randn)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of ``input``'s shape filled with ``fill_value``; dtype and device default to ``input``'s."""
    return full(tuple(input.shape), fill_value, dtype=dtype or input.dtype,
                device=device or input.device, requires_grad=requires_grad)


def randint_like(input, low, high=None, dtype=None, device=None):
    """Random integers in ``[low, high)`` of ``input``'s shape; dtype and device default to ``input``'s."""
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, device=device or input.device)
