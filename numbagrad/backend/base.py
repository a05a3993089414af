"""The backend contract: what ``ops``, ``nn``, ``optim``, ``amp``, ``io`` and the rest may
call on a backend ``be`` (from ``backend_of(array)`` or ``backend_for_device(dev)``).

Capabilities (what higher layers ask instead of testing the device):

* ``mm_into(a, b, out)``: ``out = a @ b`` into a preallocated buffer (the recurrent steps' GEMM).
* ``serial_blas()``: a context manager holding the host BLAS to one thread around a loop of
  ``mm_into`` calls (a null context where there is no host BLAS).
* ``rows(a)``: the leading-axis views of ``a`` as an indexable sequence (made in one go).
* ``per_sample_conv(n)``: whether a convolution over a batch of ``n`` takes the per-sample
  kernels (im2col per task + single-threaded BLAS) rather than the batched GEMM.
* ``addr_of(a)``: the data address of an array, for kernels that take address tables;
  ``None`` where the kernels cannot read arrays through addresses.
* ``ptr_of``: the ``@njit`` intrinsic that views such an address as a typed pointer (host
  memory only: ``io/_chunks.py``'s reader); ``None`` elsewhere.
* ``blas_provider``: the host BLAS library the GEMMs call (``"mkl"``, ``"openblas"``), or
  None (NumPy's matmul, or no host BLAS).
* ``host_memory``: True when the arrays live in host memory (a NumPy view of a host buffer
  can be one of them: DDP's buckets, the optimizer's arena).
* ``zero_copy_grads``: True when the fused optimizer kernels read gradients where they are
  (through ``addr_of`` tables) instead of from a copy in the arena.
* ``host_table(a)``: a table built on the host (NumPy) as this device's kernels take it
  (the host array itself on the CPU, a device copy on CUDA).
* ``kernel_dtypes``: the float dtypes this device's kernels compute in (the CPU's ``@njit``
  code has no float16/bfloat16; the CUDA kernels widen float16 themselves).
* ``wide_dtypes``: the 2-byte float dtypes that ``widen`` takes (empty where the kernels
  take every float dtype they support themselves).
* ``widen(a)`` / ``narrow_into(wide, a)``: an array of a ``wide_dtypes`` dtype as an exact
  float32 copy, and that copy rounded (to nearest even) back into ``a``.

``dispatch.device_available(device_type)`` says whether a device kind can be used here
(without creating its backend); ``dispatch.ARRAY_TYPES`` is the one tuple of the array types
that Tensors may hold, extended by ``register_backend``.

:class:`Backend` lists every name of the contract in :data:`CONTRACT` with one line each.
The device-specific primitives are abstract here, so a backend that lacks one cannot be
instantiated (``CUDABackend`` no longer inherits the CPU's NumPy calls); the primitives that
are NumPy functions (``exp``, ``sum``, ``reshape``, ...) live here once, because NumPy's
dispatch protocols (``__array_ufunc__``/``__array_function__``) run each device's own code
for its arrays, and a device array that lacks a function raises a ``TypeError`` naming it
(never a silent host computation). ``sum_to_shape`` and ``dot_t`` are written only in terms
of primitives. ``tests/test_backend_contract.py`` checks both backends against
:data:`CONTRACT`, and that nothing else is called as ``be.<name>`` above the backend.
"""
import abc
import contextlib
import importlib

import numpy as np

# name -> one line: every attribute a higher layer may use on a backend.
CONTRACT = {
    # identity and kernels
    "name": "the device kind, 'cpu' or 'cuda' (for messages; never branch on it)",
    "device": "the numbagrad.device of the arrays this backend holds",
    "array_type": "the array type this backend holds",
    "kernel": "kernel(family, name): the device's kernel for an entry point of kernels/<device>/<family>.py",
    # capabilities
    "mm_into": "mm_into(a, b, out): out = a @ b into a preallocated buffer",
    "serial_blas": "serial_blas(): context manager holding the host BLAS to one thread around mm_into loops",
    "rows": "rows(a): a's leading-axis views as an indexable sequence",
    "per_sample_conv": "per_sample_conv(n): whether a convolution over n samples takes the per-sample kernels",
    "addr_of": "addr_of(a): the data address of a for address-table kernels, or None where unsupported",
    "ptr_of": "the @njit intrinsic viewing an address as a typed pointer (host memory), or None",
    "blas_provider": "the host BLAS library the GEMMs call ('mkl', 'openblas'), or None",
    "host_memory": "True when the arrays live in host memory (NumPy views of host buffers are arrays)",
    "zero_copy_grads": "True when the optimizer kernels read gradients in place through addr_of tables",
    "host_table": "host_table(a): a host-built table as this device's kernels take it",
    "kernel_dtypes": "the float dtypes this device's kernels compute in",
    "wide_dtypes": "the 2-byte float dtypes widen() takes (empty where the kernels take them all)",
    "widen": "widen(a): an array of a wide_dtypes dtype as an exact float32 copy",
    "narrow_into": "narrow_into(wide, a): the float32 array wide rounded (nearest even) into a's dtype, in place",
    # allocation and conversion
    "asarray": "asarray(data, dtype=None): data as this device's array (no copy when it already is one)",
    "array": "array(data, dtype=None): a fresh copy on this device",
    "empty": "empty(shape, dtype): an uninitialised array",
    "zeros": "zeros(shape, dtype): an array of zeros",
    "ones": "ones(shape, dtype): an array of ones",
    "full": "full(shape, fill_value, dtype=None): an array filled with one value",
    "empty_like": "empty_like(a, dtype=None): an uninitialised array shaped like a",
    "zeros_like": "zeros_like(a, dtype=None): zeros shaped like a",
    "arange": "arange(...): NumPy's arange on this device",
    "linspace": "linspace(...): NumPy's linspace on this device",
    "eye": "eye(...): NumPy's eye on this device",
    "to_numpy": "to_numpy(a): a as a host NumPy array (the only way data leaves a device)",
    "from_numpy": "from_numpy(a): a host NumPy array on this device",
    "astype": "astype(a, dtype): a converted to dtype (torch's casts)",
    "copy": "copy(a): a C-contiguous copy",
    "flat": "flat(a): a 1-D C-contiguous view of a (a copy only when a is strided)",
    "contiguous": "contiguous(a): a itself when C-contiguous, else a C-contiguous copy",
    "broadcast_to": "broadcast_to(a, shape): a read-only broadcast view",
    "copy_into": "copy_into(dst, src): dst[...] = src in place, any dtype cast (NumPy's casting='unsafe')",
    # elementwise
    "add": "add(a, b): a + b", "sub": "sub(a, b): a - b", "mul": "mul(a, b): a * b",
    "div": "div(a, b): a / b", "neg": "neg(a): -a",
    "accumulate": "accumulate(dst, src): dst += src in place (src may broadcast)",
    "all_finite": "all_finite(a): whether every element is finite (a host bool)",
    "signbit": "signbit(a): a bool array, True where the sign bit is set (negatives, -0.0)",
    # reductions and linear algebra
    "sum": "sum(a, axis=None, keepdims=False, dtype=None)",
    "matmul": "matmul(a, b): NumPy's matmul semantics on this device",
    "sum_to_shape": "sum_to_shape(g, shape): a broadcast gradient summed back down to shape",
    "dot_t": "dot_t(a, b, trans_a=False, trans_b=False): op(a) @ op(b) for 2-D arrays",
}

# The primitives that are NumPy functions, answered on every device by NumPy's dispatch
# protocols (a device array implements __array_ufunc__/__array_function__).
NUMPY_PRIMITIVES = {
    "pow": np.power, "remainder": np.remainder, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "abs": np.abs, "sign": np.sign, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "log1p": np.log1p, "expm1": np.expm1, "floor": np.floor, "ceil": np.ceil, "round": np.round,
    "trunc": np.trunc, "maximum": np.maximum, "minimum": np.minimum, "clip": np.clip,
    "where": np.where, "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_not": np.logical_not,
    "logical_xor": np.logical_xor, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "prod": np.prod, "amax": np.max, "amin": np.min, "argmax": np.argmax, "argmin": np.argmin,
    "any": np.any, "all": np.all, "reshape": np.reshape, "transpose": np.transpose,
    "concatenate": np.concatenate, "stack": np.stack, "pad": np.pad, "expand_dims": np.expand_dims,
    "squeeze": np.squeeze, "moveaxis": np.moveaxis, "take": np.take,
    "take_along_axis": np.take_along_axis,
}
CONTRACT.update({k: f"NumPy's {f.__name__}, dispatched to this device's code by NumPy's protocols"
                 for k, f in NUMPY_PRIMITIVES.items()})


class Backend(abc.ABC):
    """One object per device kind. Abstract methods are the device-specific primitives;
    the NumPy-named primitives and the helpers below are shared (see the module docstring)."""

    name = None
    device = None
    array_type = None
    kernel_dtypes = frozenset()
    wide_dtypes = frozenset()
    zero_copy_grads = False
    host_memory = False
    blas_provider = None
    ptr_of = None

    def __init__(self):
        self._kernels = {}

    locals().update({k: staticmethod(f) for k, f in NUMPY_PRIMITIVES.items()})

    # ---- kernels and capabilities ---------------------------------------------------
    @abc.abstractmethod
    def kernel(self, family, name):
        """The device's kernel for the entry point ``name`` of ``kernels/<device>/<family>.py``."""

    def _load_kernel(self, folder, family, name):
        """``_<name>_<folder>`` of ``numbagrad/kernels/<folder>/<family>.py``, now cached for
        ``kernel``; a ``name`` that the module's ``ENTRY_POINTS`` does not list raises
        (``_not_an_entry`` first, for a backend's more precise error)."""
        mod = importlib.import_module(f"numbagrad.kernels.{folder}.{family}")
        entry = getattr(mod, "ENTRY_POINTS", ())
        if name not in entry:
            self._not_an_entry(family, name)
            raise ValueError(f"kernel: {name!r} is not an entry point of the {folder.upper()} kernel family "
                             f"{family!r} (numbagrad/kernels/{folder}/{family}.py: ENTRY_POINTS = {entry})")
        k = self._kernels[(family, name)] = getattr(mod, f"_{name}_{folder}")
        return k

    def _not_an_entry(self, family, name):
        """Called before ``_load_kernel`` refuses ``name``; nothing to add here."""

    @abc.abstractmethod
    def mm_into(self, a, b, out):
        """``out = a @ b`` into the preallocated ``out``; returns ``out``."""

    def serial_blas(self):
        """A null context: a device without a host BLAS has nothing to hold."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    def rows(self, a):
        """``a``'s leading-axis views as an indexable sequence."""

    def per_sample_conv(self, n):
        """False: the batched convolution path (one im2col, one batched GEMM)."""
        return False

    def addr_of(self, a):
        """None: this device's kernels take no address tables."""
        return None

    def host_table(self, a):
        """``a`` (built on the host) as this device's kernels take it."""
        return self.asarray(a)

    def widen(self, a):
        """Refused: this device widens nothing (``wide_dtypes`` is empty)."""
        raise TypeError(f"{self.name} backend: arrays of dtype {a.dtype} are not widened on this device "
                        f"(its kernels take {sorted(str(np.dtype(d)) for d in self.kernel_dtypes)})")

    def narrow_into(self, wide, a):
        """Refused: this device narrows nothing (``wide_dtypes`` is empty)."""
        raise TypeError(f"{self.name} backend: arrays of dtype {a.dtype} are not narrowed on this device")

    # ---- allocation and conversion ----------------------------------------------------
    for _n in ("asarray", "array", "empty", "zeros", "ones", "full", "empty_like", "zeros_like", "arange",
               "linspace", "eye", "to_numpy", "from_numpy", "astype", "copy", "flat", "contiguous",
               "broadcast_to", "copy_into", "add", "sub", "mul", "div", "neg", "accumulate", "all_finite",
               "signbit", "sum",
               "matmul"):
        locals()[_n] = abc.abstractmethod(lambda *args, **kw: None)
    del _n

    # ---- helpers written in primitives ---------------------------------------------------
    def sum_to_shape(self, g, shape):
        """Sum a broadcast gradient ``g`` back down to ``shape`` (the backward of broadcasting)."""
        if g.shape == shape:
            return g
        lead = g.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(
            i + lead for i, s in enumerate(shape) if s == 1 and g.shape[i + lead] != 1)
        r = self.sum(g, axis=axes, keepdims=True) if axes else g
        if lead:
            r = r.reshape(r.shape[lead:])
        return r.reshape(shape)

    def dot_t(self, a, b, trans_a=False, trans_b=False):
        """``op(a) @ op(b)`` for 2-D arrays, transposes as views."""
        return self.matmul(a.T if trans_a else a, b.T if trans_b else b)
