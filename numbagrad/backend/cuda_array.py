"""``CudaArray``: numbagrad's device array, a strided view over a pooled CUDA block.

A CudaArray is *metadata* (shape, element strides, element offset, dtype) over a
:class:`~numbagrad.backend.cuda_memory._Block`. Views (basic indexing, transpose,
broadcast with stride 0, flips with negative strides, reshape of contiguous arrays)
never touch the device. Kernels receive either the whole block as a 1-D typed array
plus offset/strides (the elementwise and copy kernels), or :attr:`CudaArray.dev`, a
numba device array with this array's shape and strides.

The array speaks NumPy's dispatch protocols (``__array_ufunc__``,
``__array_function__`` and the operator mixin), so a NumPy call such as
``np.exp(a)``, ``np.sum(a, axis=1)`` or ``np.pad(a, ...)`` in an op's code runs CUDA
kernels when ``a`` lives on the GPU (:mod:`numbagrad.backend.cuda` holds the table).
A NumPy function with no CUDA implementation raises a ``TypeError`` naming it, and
so does an implicit conversion to a host array (``np.asarray(a)``): data leaves the
device only through :meth:`get` / ``Tensor.cpu()``.
"""
import numbers
import operator

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin


def _contig_strides(shape):
    st = []
    acc = 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(st))


def _prod(shape):
    p = 1
    for n in shape:
        p *= n
    return p


class _Flags:
    __slots__ = ("c_contiguous", "f_contiguous", "writeable")

    def __init__(self, c, f):
        self.c_contiguous = c
        self.f_contiguous = f
        self.writeable = True

    def __getitem__(self, key):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous,
                "WRITEABLE": True}[key.upper()]


def _axis_method(fn):
    """``CudaArray``'s method form of NumPy's ``fn(a, axis=None, keepdims=False)``, which
    NumPy's dispatch hands to the CUDA backend's implementation."""
    def method(self, axis=None, keepdims=False):
        return fn(self, axis=axis, keepdims=keepdims)
    method.__name__ = fn.__name__
    method.__qualname__ = f"CudaArray.{fn.__name__}"
    return method


class CudaArray(NDArrayOperatorsMixin):
    """A strided array in CUDA device memory (see the module docstring)."""

    __slots__ = ("_blk", "_off", "shape", "_st", "dtype", "_dev", "__weakref__")

    __array_priority__ = 100

    # set by numbagrad.backend.cuda at import
    _be = None

    def __init__(self, blk, off, shape, st, dtype):
        self._blk = blk
        self._off = off
        self.shape = shape
        self._st = st
        self.dtype = dtype
        self._dev = None

    # ---- metadata ------------------------------------------------------------------
    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return _prod(self.shape)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def strides(self):
        """Byte strides, as NumPy reports them."""
        i = self.dtype.itemsize
        return tuple(s * i for s in self._st)

    def is_c_contiguous(self):
        st = self._st
        acc = 1
        for k in range(len(self.shape) - 1, -1, -1):
            n = self.shape[k]
            if n == 0:
                return True
            if n != 1 and st[k] != acc:
                return False
            acc *= n
        return True

    def is_f_contiguous(self):
        acc = 1
        for k in range(len(self.shape)):
            n = self.shape[k]
            if n == 0:
                return True
            if n != 1 and self._st[k] != acc:
                return False
            acc *= n
        return True

    @property
    def flags(self):
        return _Flags(self.is_c_contiguous(), self.is_f_contiguous())

    @property
    def device(self):
        return self._be.device

    @property
    def base_array(self):
        """The whole block as a 1-D numba array of this dtype (for offset/stride kernels)."""
        return self._blk.typed(self.dtype)

    @property
    def dev(self):
        """A numba device array with this array's shape and strides (cached).

        Negative strides (flipped views) are not representable there: such an array
        is copied to a contiguous one first by the backend before a kernel sees it.
        """
        d = self._dev
        if d is None:
            if any(s < 0 for s in self._st):
                raise ValueError("CudaArray.dev: negative strides; make the array contiguous first")
            i = self.dtype.itemsize
            shape = self.shape
            if self.size == 0:
                shape, st = (0,), (i,)
                d = self._blk.pool.view(self._blk.mem, 0, shape, st, self.dtype)
            else:
                d = self._blk.pool.view(self._blk.mem, self._off * i, shape,
                                        tuple(s * i for s in self._st), self.dtype)
            self._dev = d
        return d

    def _view(self, shape, st, off):
        return CudaArray(self._blk, off, tuple(shape), tuple(st), self.dtype)

    # ---- views -----------------------------------------------------------------------
    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        n = self.size
        if shape.count(-1) > 1:
            raise ValueError("can only specify one unknown dimension")
        if -1 in shape:
            known = _prod(s for s in shape if s != -1)
            if known == 0 or n % known:
                raise ValueError(f"cannot reshape array of size {n} into shape {shape}")
            shape = tuple(n // known if s == -1 else s for s in shape)
        if _prod(shape) != n:
            raise ValueError(f"cannot reshape array of size {n} into shape {shape}")
        src = self if self.is_c_contiguous() else self._be.copy(self)
        return src._view(shape, _contig_strides(shape), src._off)

    def ravel(self):
        return self.reshape(-1)

    def flatten(self):
        return self._be.copy(self).reshape(-1)

    def transpose(self, *axes):
        if not axes or axes == (None,):
            axes = tuple(range(self.ndim - 1, -1, -1))
        elif len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        axes = tuple(int(a) % max(self.ndim, 1) for a in axes)
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError(f"axes {axes} don't match array of {self.ndim} dimensions")
        return self._view([self.shape[a] for a in axes], [self._st[a] for a in axes], self._off)

    @property
    def T(self):
        return self.transpose()

    def swapaxes(self, a, b):
        axes = list(range(self.ndim))
        a, b = a % self.ndim, b % self.ndim
        axes[a], axes[b] = axes[b], axes[a]
        return self.transpose(axes)

    def squeeze(self, axis=None):
        if axis is None:
            keep = [k for k, n in enumerate(self.shape) if n != 1]
        else:
            axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
            axes = {a % self.ndim for a in axes}
            for a in axes:
                if self.shape[a] != 1:
                    raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
            keep = [k for k in range(self.ndim) if k not in axes]
        return self._view([self.shape[k] for k in keep], [self._st[k] for k in keep], self._off)

    def broadcast_to(self, shape):
        shape = tuple(int(s) for s in shape)
        lead = len(shape) - self.ndim
        if lead < 0:
            raise ValueError(f"cannot broadcast shape {self.shape} to {shape}")
        st = [0] * lead
        for k, n in enumerate(self.shape):
            if n == shape[lead + k]:
                st.append(self._st[k])
            elif n == 1:
                st.append(0)
            else:
                raise ValueError(f"operands could not be broadcast together: {self.shape} to {shape}")
        return self._view(shape, st, self._off)

    def __getitem__(self, idx):
        v = self._basic_index(idx)
        if v is None:
            return self._be.advanced_getitem(self, idx)
        return v

    def __setitem__(self, idx, value):
        v = self._basic_index(idx)
        if v is None:
            return self._be.advanced_setitem(self, idx, value)
        self._be.assign(v, value)

    def _basic_index(self, idx):
        """The view for a basic index (ints, slices, None, Ellipsis), or None if advanced."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        for it in idx:
            if not (it is None or it is Ellipsis or isinstance(it, slice)
                    or (isinstance(it, numbers.Integral) and not isinstance(it, (bool, np.bool_)))):
                return None
        n_real = sum(1 for it in idx if it is not None and it is not Ellipsis)
        if n_real > self.ndim:
            raise IndexError(f"too many indices for array: array is {self.ndim}-dimensional, "
                             f"but {n_real} were indexed")
        if any(it is Ellipsis for it in idx):
            k = next(i for i, it in enumerate(idx) if it is Ellipsis)
            idx = idx[:k] + (slice(None),) * (self.ndim - n_real) + tuple(
                it for it in idx[k + 1:] if it is not Ellipsis)
        else:
            idx = idx + (slice(None),) * (self.ndim - n_real)
        off = self._off
        shape, st = [], []
        d = 0
        for it in idx:
            if it is None:
                shape.append(1)
                st.append(0)
                continue
            n = self.shape[d]
            if isinstance(it, slice):
                start, stop, step = it.indices(n)
                m = len(range(start, stop, step))
                if m:
                    off += start * self._st[d]
                shape.append(m)
                st.append(self._st[d] * step)
            else:
                i = int(it)
                if not -n <= i < n:
                    raise IndexError(f"index {i} is out of bounds for axis {d} with size {n}")
                off += (i % n) * self._st[d]
            d += 1
        return self._view(shape, st, off)

    # ---- copies and conversions -------------------------------------------------------
    def copy(self, order="C"):
        return self._be.copy(self)

    def astype(self, dtype, copy=True, casting=None):
        dtype = np.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        return self._be.astype(self, dtype)

    def fill(self, value):
        self._be.assign(self, value)

    def get(self):
        """A NumPy copy on the host."""
        return self._be.to_numpy(self)

    copy_to_host = get

    def copy_from(self, src):
        self._be.assign(self, src)

    def item(self, *args):
        if args:
            return self[args if len(args) > 1 else args[0]].item()
        if self.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return self.get().reshape(()).item()

    def tolist(self):
        return self.get().tolist()

    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"implicit conversion of a CUDA array (shape {self.shape}, dtype {self.dtype}) "
                        "to a NumPy array; move it to the host explicitly with .cpu() / .numpy()")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __bool__(self):
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous.")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu":
            raise TypeError("only integer arrays can be used as an index")
        return operator.index(self.item())

    def __repr__(self):
        return f"CudaArray({np.array2string(self.get(), separator=', ')}, dtype={self.dtype})"

    # ---- reductions as methods -----------------------------------------------------------
    def sum(self, axis=None, dtype=None, keepdims=False, out=None):
        return np.sum(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis=None, dtype=None, keepdims=False):
        return np.mean(self, axis=axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, keepdims=False):
        return np.prod(self, axis=axis, dtype=dtype, keepdims=keepdims)

    max, min, argmax, argmin, any, all = (_axis_method(f) for f in (np.max, np.min, np.argmax, np.argmin,
                                                                    np.any, np.all))

    def cumsum(self, axis=None, dtype=None):
        return np.cumsum(self, axis=axis, dtype=dtype)

    def var(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return np.var(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def std(self, axis=None, dtype=None, ddof=0, keepdims=False):
        return np.std(self, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims)

    def nonzero(self):
        return np.nonzero(self)

    # ---- NumPy protocols ---------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return self._be.array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        impl = self._be.FUNCTIONS.get(func)
        if impl is None:
            raise TypeError(f"numpy.{func.__name__} is not implemented for CUDA arrays "
                            f"(numbagrad's CUDA backend); move the data to the CPU or add it to "
                            "numbagrad.backend.cuda.FUNCTIONS")
        return impl(*args, **kwargs)


__all__ = ["CudaArray"]
