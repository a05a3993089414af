"""``Tensor``: a backend array plus the autograd bookkeeping.

A Tensor never branches on its device: arithmetic goes through the op functions in
``numbagrad.ops``, which ask the backend of the array for kernels.
"""
import numpy as np

from . import _dtype
from .backend import dispatch as _dispatch
from .backend.dispatch import _BY_ARRAY_TYPE
from .device import device as _device


def native_array(a):
    """NumPy array ``a`` as the kernels take it: a plain ``ndarray`` (a subclass such as
    ``np.memmap`` is viewed, sharing its memory) in the machine's byte order (a big-endian
    array is converted, which copies it: numba compiles for native byte order only)."""
    if type(a) is not np.ndarray:
        a = a.view(np.ndarray)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return a


def _as_array(x, dtype=None):
    a = native_array(np.asarray(x, dtype=dtype))
    if dtype is None:
        if a.dtype == np.float64 and not isinstance(x, (np.ndarray, np.generic)):
            a = a.astype(_dtype.get_default_dtype())
        elif a.dtype.kind not in "fiub" and a.dtype != _dtype.bfloat16:
            raise TypeError(f"tensor: unsupported data of dtype {a.dtype}")
    return a


class Size(tuple):
    """PyTorch's ``torch.Size``: a tuple of dimension sizes (``Tensor.shape`` itself is a
    plain tuple, which compares equal)."""

    def __new__(cls, sizes=()):
        return super().__new__(cls, (int(s) for s in sizes))

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"numbagrad.Size({list(self)})"


def is_tensor(obj):
    """True when ``obj`` is a numbagrad Tensor (``torch.is_tensor``)."""
    return isinstance(obj, Tensor)


def numel(input):
    """The number of elements of ``input`` (``torch.numel``)."""
    return input.numel()


class _Version:
    """A version counter shared by a tensor and its views; in-place ops bump it."""
    __slots__ = ("value",)

    def __init__(self):
        self.value = 0


class Tensor:
    """A multi-dimensional array that records operations for reverse-mode autograd.

    Create tensors with :func:`numbagrad.tensor`, :func:`numbagrad.zeros` and friends.
    ``Tensor(data)`` is accepted too and behaves like ``numbagrad.tensor(data)``.

    Attributes
    ----------
    array : the backend array (``numpy.ndarray`` on the CPU, a device array on CUDA):
        what numbagrad's kernels, and your own ``@njit`` kernels, take
    data : a Tensor sharing this tensor's storage, out of the graph (PyTorch's ``.data``)
    requires_grad : bool
    grad : Tensor or None, accumulated by :meth:`backward`
    grad_fn : the :class:`~numbagrad.autograd.Function` node that made this tensor
    """

    __slots__ = ("array", "requires_grad", "grad", "grad_fn", "_out_idx", "_version",
                 "_hooks", "_base", "__weakref__")

    __array_priority__ = 1000  # NumPy scalars/arrays defer to Tensor's operators

    def __init__(self, data, dtype=None, requires_grad=False):
        if isinstance(data, Tensor):
            data = data.array
        if type(data) is np.ndarray or type(data) not in _BY_ARRAY_TYPE:
            arr = _as_array(data, _dtype.as_dtype(dtype))
        else:  # a device array (``Parameter(cuda_tensor)``): shared as it is, on its device
            arr = data if dtype is None else _BY_ARRAY_TYPE[type(data)].asarray(data, _dtype.as_dtype(dtype))
        self.array = arr
        self.requires_grad = False
        self.grad = None
        self.grad_fn = None
        self._out_idx = 0
        self._version = _Version()
        self._hooks = None
        self._base = None
        if requires_grad:
            self.requires_grad_(True)

    # ---- metadata -------------------------------------------------------------------
    @property
    def dtype(self):
        return self.array.dtype

    @property
    def shape(self):
        return self.array.shape

    def size(self, dim=None):
        """The shape (PyTorch's ``size()``), or one dimension of it."""
        if dim is None:
            return self.array.shape
        from .ops._util import wrap_dim  # the one dimension check (ops sit above; bound lazily)
        return self.array.shape[wrap_dim(dim, self.array.ndim, "size", scalar_ok=False)]

    @property
    def ndim(self):
        return self.array.ndim

    def dim(self):
        return self.array.ndim

    def numel(self):
        return int(self.array.size)

    def nelement(self):
        return int(self.array.size)

    def element_size(self):
        return self.array.dtype.itemsize

    @property
    def device(self):
        from .backend import backend_of
        return backend_of(self.array).device

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def is_cpu(self):
        return self.device.type == "cpu"

    # PyTorch's other device kinds: numbagrad has no XPU, MPS or meta backend.
    is_xpu = property(lambda self: False)
    is_mps = property(lambda self: False)
    is_meta = property(lambda self: False)

    def __format__(self, spec):
        """``f"{loss:.4f}"``: a one-element 0-d tensor formats as its Python number, as in
        PyTorch; other tensors accept only the empty spec (their ``str``)."""
        if self.array.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def type_as(self, other):
        """This tensor in ``other``'s dtype (differentiable between floating dtypes)."""
        return self.to(other.dtype)

    def clamp_(self, min=None, max=None):
        """In-place :meth:`clamp`."""
        from . import ops
        return self._inplace_result("clamp_", ops.clamp(self, min, max))

    clip_ = clamp_

    def normal_(self, mean=0.0, std=1.0, generator=None):
        """Fill with normal samples in place (``nn.init.normal_``)."""
        from .nn import init
        return init.normal_(self, mean, std, generator=generator)

    def uniform_(self, a=0.0, b=1.0, generator=None):
        """Fill with uniform samples from ``[a, b)`` in place (``nn.init.uniform_``)."""
        from .nn import init
        return init.uniform_(self, a, b, generator=generator)

    def apply_(self, callable):
        """Replace every element ``x`` by ``callable(x)`` in place, in Python (slow, CPU only,
        as in PyTorch). Not tracked by autograd."""
        if self.device.type != "cpu":
            raise TypeError(f"apply_ is only implemented on CPU tensors, got a tensor on {self.device}")
        if self.requires_grad:
            raise RuntimeError("apply_: a tensor that requires grad cannot be changed in Python; use .data.apply_")
        flat = self.array.reshape(-1)  # a view: the tensor is written in place
        if not np.shares_memory(flat, self.array):
            raise RuntimeError("apply_: the tensor is not contiguous")
        for i in range(flat.size):
            flat[i] = callable(flat[i].item())
        self._bump_version()
        return self

    # ---- new tensors like this one (PyTorch's ``new_*``: same dtype and device) ------------
    def _new(self, make, size, dtype, device, requires_grad):
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
        t = make(*size, dtype=dtype or self.dtype, device=device or self.device)
        return t.requires_grad_(True) if requires_grad else t

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        from . import creation
        return self._new(creation.zeros, size, dtype, device, requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        from . import creation
        return self._new(creation.ones, size, dtype, device, requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        from . import creation
        return self._new(creation.empty, size, dtype, device, requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        from . import creation
        t = creation.full(tuple(size), fill_value, dtype=dtype or self.dtype, device=device or self.device)
        return t.requires_grad_(True) if requires_grad else t

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """A copy of ``data`` as a new leaf tensor, this tensor's dtype and device by default."""
        from . import creation
        if isinstance(data, Tensor):
            data = data.detach().cpu().numpy()
        t = creation.tensor(np.array(data), dtype=dtype or self.dtype, device=device or self.device)
        return t.requires_grad_(True) if requires_grad else t

    @property
    def _version_value(self):
        return self._version.value

    def is_floating_point(self):
        return _dtype.is_float(self.array.dtype)

    def is_contiguous(self):
        return bool(self.array.flags.c_contiguous)

    def __len__(self):
        if self.array.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.array.shape[0]

    def __repr__(self):
        from .backend import backend_of
        host = np.asarray(backend_of(self.array).to_numpy(self.array))
        if host.dtype == _dtype.bfloat16:  # NumPy formats bfloat16 without a precision
            host = host.astype(np.float32)
        body = np.array2string(host, separator=", ", precision=4,
                               prefix="tensor(")
        extras = []
        dev = backend_of(self.array).device
        if dev.type != "cpu":
            extras.append(f"device='{dev}'")
        if self.array.dtype != _dtype.get_default_dtype() and _dtype.is_float(self.array.dtype) or \
                self.array.dtype.kind not in "fi" or self.array.dtype == np.int32:
            extras.append(f"dtype={self.array.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{type(self.grad_fn).__name__}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + body + "".join(", " + e for e in extras) + ")"

    # ---- conversion -----------------------------------------------------------------
    def numpy(self):
        """The data as a NumPy array (shares memory on the CPU). Requires no grad tracking,
        as in PyTorch: call ``.detach().numpy()`` on a tensor that requires grad."""
        if self.requires_grad:
            raise RuntimeError("numpy(): can't call numpy() on a tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        from .backend import backend_of
        return backend_of(self.array).to_numpy(self.array)

    def item(self):
        if self.array.size != 1:
            raise ValueError(f"item(): only a one-element tensor can be converted to a Python "
                             f"scalar, got shape {tuple(self.array.shape)}")
        from .backend import backend_of
        return backend_of(self.array).to_numpy(self.array).reshape(()).item()

    def tolist(self):
        from .backend import backend_of
        return backend_of(self.array).to_numpy(self.array).tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.array.size != 1:
            raise RuntimeError(f"Boolean value of a tensor with {self.array.size} elements is ambiguous")
        return bool(self.item())

    def __index__(self):
        if self.array.dtype.kind not in "iu" or self.array.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __array__(self, dtype=None, copy=None):
        a = np.asarray(self.detach().numpy())
        return a if dtype is None else a.astype(dtype)

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``."""
        from .ops import shape as _shape
        dtype = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        copy = kwargs.pop("copy", False)
        if kwargs:
            raise TypeError(f"to(): unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                dtype, dev = a.dtype, a.device
            elif isinstance(a, (str, _device)) and not (isinstance(a, str) and a in _dtype._ALIASES):
                dev = a
            else:
                dtype = a
        out = self
        if dev is not None and _device(dev) != self.device:
            out = _shape.to_device(out, dev)
        if dtype is not None and _dtype.as_dtype(dtype) != out.dtype:
            out = _shape.cast(out, _dtype.as_dtype(dtype))
        if copy and out is self:
            out = self.clone()
        return out

    def type(self, dtype=None):
        return str(self.dtype) if dtype is None else self.to(dtype)

    # float, double, half, bfloat16, long, int, bool, cpu: _TO_SHORTHANDS below

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{_device(device).index if isinstance(device, (str, _device)) else device}")

    # ---- autograd -------------------------------------------------------------------
    def requires_grad_(self, requires_grad=True):
        if self.grad_fn is not None and not requires_grad:
            raise RuntimeError("requires_grad_(False): you can only change requires_grad of leaf "
                               "tensors; use .detach() for a non-leaf")
        if requires_grad and self.array.dtype.kind not in "fc" and not _dtype.is_float(self.array.dtype):
            raise RuntimeError(f"requires_grad_(): only tensors of floating point dtype can require "
                               f"gradients, got {self.array.dtype}")
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self):
        """A new leaf tensor sharing this tensor's data (and version counter), out of the graph."""
        t = Tensor._from_array(self.array)
        t._version = self._version
        t._base = self
        return t

    @property
    def data(self):
        """This tensor's values as a new tensor that shares the storage but stands outside
        the graph, as in PyTorch: no gradient, no ``grad_fn``, and a version counter of its
        own, so in-place changes through it (``p.data.add_(g, alpha=-lr)``) are not seen by
        autograd's checks. :meth:`detach` shares the version counter instead. The backend
        array itself is :attr:`array`."""
        return Tensor._from_array(self.array)

    @data.setter
    def data(self, value):
        """``t.data = other``: ``t`` now holds ``other``'s storage (its shape and dtype may
        change), as in PyTorch. ``other`` is a Tensor; a NumPy array (kept as it is) or a
        device array is accepted too."""
        if isinstance(value, Tensor):
            value = value.array
        elif not isinstance(value, _dispatch.ARRAY_TYPES):
            raise TypeError(f"Tensor.data: assigned value must be a Tensor, got {type(value).__name__}")
        self.array = value

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into the ``.grad`` of every leaf that requires grad.

        Parameters
        ----------
        gradient : Tensor, optional
            The gradient of some scalar with respect to ``self``; required unless
            ``self`` has one element.
        retain_graph : bool, optional
            Keep saved arrays so backward can run again through this graph.
        inputs : sequence of Tensor, optional
            Accumulate only into these leaves.
        """
        from .autograd.engine import backward as _backward
        _backward((self,), None if gradient is None else (gradient,), retain_graph,
                  create_graph, inputs)

    def register_hook(self, hook):
        """Register ``hook(grad) -> Tensor or None`` called with this tensor's gradient.

        Returns a handle whose ``remove()`` unregisters it.
        """
        if not self.requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't require gradient")
        from .autograd.engine import _HookHandle
        if self.grad_fn is None:
            if self._hooks is None:
                self._hooks = []
            self._hooks.append(hook)
            return _HookHandle(self._hooks, hook)
        node = self.grad_fn
        if node._out_hooks is None:
            node._out_hooks = {}
        hooks = node._out_hooks.setdefault(self._out_idx, [])
        hooks.append(hook)
        return _HookHandle(hooks, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Register ``hook(tensor)`` on a leaf, called once per backward pass after its
        ``.grad`` has received the last gradient of that pass (DDP starts a bucket's
        all-reduce from it). Returns a handle whose ``remove()`` unregisters it."""
        if not self.requires_grad:
            raise RuntimeError("register_post_accumulate_grad_hook: cannot register a hook on a tensor that "
                               "doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("register_post_accumulate_grad_hook: post accumulate grad hooks cannot be "
                               "registered on non-leaf tensors")
        from .autograd.engine import register_post_accumulate_grad_hook
        return register_post_accumulate_grad_hook(self, hook)

    def retain_grad(self):
        """Keep ``.grad`` of this non-leaf tensor after backward (a no-op on leaves)."""
        if self.grad_fn is None:
            if not self.requires_grad:
                raise RuntimeError("retain_grad: can't retain_grad on a tensor that doesn't require gradient")
            return
        import weakref
        from .autograd.engine import _RetainGrad
        node = self.grad_fn
        if node._out_hooks is None:
            node._out_hooks = {}
        hooks = node._out_hooks.setdefault(self._out_idx, [])
        if not any(isinstance(h, _RetainGrad) for h in hooks):
            hooks.append(_RetainGrad(weakref.ref(self)))

    @property
    def retains_grad(self):
        from .autograd.engine import _RetainGrad
        node = self.grad_fn
        return bool(node is not None and node._out_hooks and any(
            isinstance(h, _RetainGrad) for h in node._out_hooks.get(self._out_idx, ())))

    # ---- in-place plumbing ----------------------------------------------------------
    def _check_inplace(self, opname):
        from .autograd.grad_mode import _state
        if _state.enabled and self.requires_grad:
            if self.grad_fn is None:
                raise RuntimeError(
                    f"{opname}: a leaf tensor that requires grad is being used in an in-place "
                    "operation; wrap it in numbagrad.no_grad() (as optimizers do) or clone it first")
            if self._base is not None:
                raise RuntimeError(
                    f"{opname}: in-place operation on a view of a tensor that requires grad is not "
                    "supported; use the out-of-place form")
            return True
        return False

    def _inplace_result(self, opname, result):
        """Make ``self`` hold ``result``: rebased into the graph when recording, or
        written into self's storage (bumping the version counter) otherwise."""
        from .autograd.grad_mode import _state
        if self._check_inplace(opname) or (
                _state.enabled and result.requires_grad and self._base is None):
            # Recording: rebind to the new node. The old buffer stays intact for any node
            # that saved it, so self gets a fresh version counter one ahead of the old one.
            v = _Version()
            v.value = self._version.value + 1
            old_fn, old_idx = self.grad_fn, self._out_idx
            self.array = result.array if result.array.dtype == self.array.dtype else result.array.astype(self.array.dtype)
            self.grad_fn = result.grad_fn
            self._out_idx = result._out_idx
            self.requires_grad = result.requires_grad
            self._version = v
            if old_fn is not None:  # views taken before stay aliased, as in PyTorch
                from .autograd.function import follow_rebase
                follow_rebase(self, old_fn, old_idx)
        else:
            if result.array.shape != self.array.shape:
                raise RuntimeError(f"{opname}: output with shape {tuple(self.array.shape)} doesn't match "
                                   f"the broadcast shape {tuple(result.array.shape)}")
            _dispatch.backend_of(self.array).copy_into(self.array, result.array)
            self._version.value += 1
        return self

    def _bump_version(self):
        self._version.value += 1

    @staticmethod
    def _from_array(arr, requires_grad=False):
        """Wrap a backend array without copying (internal fast path). The slots are set
        inline here, in ``__init__`` and in ``autograd.function``'s output wrappers: one helper
        call more per op output costs 1-3% of a small op (``perf/test_bench_tiny_op.py``)."""
        t = Tensor.__new__(Tensor)
        t.array = arr
        t.requires_grad = requires_grad
        t.grad = None
        t.grad_fn = None
        t._out_idx = 0
        t._version = _Version()
        t._hooks = None
        t._base = None
        return t


# The conversion shorthands, each ``self.to(target)``: Tensor has all of them; nn.Module
# installs the floating ones and ``cpu`` with the same function.
_TO_SHORTHANDS = {"float": _dtype.float32, "double": _dtype.float64, "half": _dtype.float16,
                  "bfloat16": _dtype.bfloat16, "long": _dtype.int64, "int": _dtype.int32, "bool": _dtype.bool_,
                  "cpu": "cpu"}


def _install_to_shorthands(cls, names):
    """Give ``cls`` the methods ``names`` (keys of ``_TO_SHORTHANDS``), each ``self.to(target)``."""
    for name in names:
        setattr(cls, name, _to_shorthand(cls, name, _TO_SHORTHANDS[name]))


def _to_shorthand(cls, name, target):
    def method(self):
        return self.to(target)
    method.__name__ = name
    method.__qualname__ = f"{cls.__name__}.{name}"
    method.__doc__ = f"``self.to(...)`` with {target}."
    return method


_install_to_shorthands(Tensor, _TO_SHORTHANDS)


def _zero_grad(p, set_to_none):
    """Reset ``p.grad`` (``Module.zero_grad``, ``Optimizer.zero_grad``): to None, or to zero in
    place (detached first if it is a graph output)."""
    g = p.grad
    if g is None:
        return
    if set_to_none:
        p.grad = None
    else:
        if g.grad_fn is not None:
            g.detach_()
        g.array.fill(0)


def _install_operators():
    """Bind the Python operators and the method forms of the ops to Tensor."""
    from . import ops
    T = Tensor

    def _r(fn):
        return lambda self, other: fn(other, self)

    # the common binary operators are the op functions themselves (a frame less per call:
    # ``a + b`` is ``add(a, b)``); their extra parameters (``alpha``, ``rounding_mode``)
    # keep their defaults under an operator

    T.__add__ = ops.add
    T.__radd__ = ops.add
    T.__sub__ = ops.sub
    T.__rsub__ = _r(ops.sub)
    T.__mul__ = ops.mul
    T.__rmul__ = ops.mul
    T.__truediv__ = ops.div
    T.__rtruediv__ = _r(ops.div)
    T.__floordiv__ = lambda s, o: ops.floor_divide(s, o)
    T.__rfloordiv__ = _r(ops.floor_divide)
    T.__mod__ = lambda s, o: ops.remainder(s, o)
    T.__rmod__ = _r(ops.remainder)
    T.__pow__ = lambda s, o: ops.pow(s, o)
    T.__rpow__ = _r(ops.pow)
    T.__matmul__ = ops.matmul
    T.__rmatmul__ = _r(ops.matmul)
    T.__neg__ = lambda s: ops.neg(s)
    T.__pos__ = lambda s: s
    T.__abs__ = lambda s: ops.abs(s)
    T.__invert__ = lambda s: ops.logical_not(s)
    T.__eq__ = lambda s, o: ops.eq(s, o)
    T.__ne__ = lambda s, o: ops.ne(s, o)
    T.__lt__ = lambda s, o: ops.lt(s, o)
    T.__le__ = lambda s, o: ops.le(s, o)
    T.__gt__ = lambda s, o: ops.gt(s, o)
    T.__ge__ = lambda s, o: ops.ge(s, o)
    T.__and__ = lambda s, o: ops.logical_and(s, o)
    T.__or__ = lambda s, o: ops.logical_or(s, o)
    T.__xor__ = lambda s, o: ops.logical_xor(s, o)
    T.__hash__ = object.__hash__
    T.__getitem__ = lambda s, idx: ops.getitem(s, idx)
    T.__setitem__ = lambda s, idx, v: ops.setitem(s, idx, v)

    def _iop(name, fn):
        def inplace(self, other, **kwargs):  # the op's keywords too: add_(g, alpha=-lr)
            return self._inplace_result(name, fn(self, other, **kwargs))
        inplace.__name__ = name
        return inplace

    T.__iadd__ = T.add_ = _iop("add_", ops.add)
    T.__isub__ = T.sub_ = _iop("sub_", ops.sub)
    T.__imul__ = T.mul_ = _iop("mul_", ops.mul)
    T.__itruediv__ = T.div_ = _iop("div_", ops.div)
    T.pow_ = _iop("pow_", ops.pow)

    # Methods that forward to the op of the same name with self first.
    names = """add sub mul div neg pow exp log sqrt rsqrt abs sign square reciprocal sin cos
    log1p expm1 log2 log10 exp2 floor ceil round trunc clamp clip maximum minimum where eq ne lt le gt ge
    logical_and logical_or logical_not logical_xor isnan isinf isfinite floor_divide remainder
    sum mean var std max min amax amin argmax argmin logsumexp prod norm all any cumsum
    matmul mm bmm reshape view transpose permute expand expand_as squeeze unsqueeze flatten
    split chunk unbind contiguous clone t repeat flip roll movedim
    gather scatter_add scatter index_select masked_fill take_along_dim index_add
    relu leaky_relu elu selu gelu silu sigmoid tanh softplus hardtanh mish softmax log_softmax
    view_as reshape_as narrow nonzero masked_select take argwhere tril triu
    sort argsort topk kthvalue multinomial bernoulli unique""".split()
    for n in names:
        fn = getattr(ops, n, None)
        if fn is not None and not hasattr(T, n):
            setattr(T, n, fn)
    for n in ["clamp", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "neg",
              "masked_fill", "scatter_add", "index_add", "fill", "zero", "copy", "clamp_min",
              "clamp_max", "scatter", "uniform", "normal", "sign", "square", "floor", "ceil",
              "round", "reciprocal", "sin", "cos", "log1p", "expm1", "t", "exponential",
              "bernoulli", "unsqueeze", "squeeze", "transpose"]:
        fn = getattr(ops, n + "_", None)
        if fn is not None and not hasattr(T, n + "_"):
            setattr(T, n + "_", fn)
    # pointwise math (ops/pointwise.py) and more torch method spellings of existing ops
    from .ops import pointwise
    for n in list(pointwise.__all__) + """clamp_min clamp_max swapaxes tile broadcast_to dot outer
            allclose isclose equal unflatten lerp true_divide greater greater_equal less less_equal
            not_equal fmod""".split():
        fn = getattr(ops, n, None)
        if fn is not None and not hasattr(T, n):
            setattr(T, n, fn)
    T.lerp_ = pointwise._inplace("lerp", ops.lerp)
    from .ops import linalg_basic, linalg_ops, misc_ops, scan, special_fns
    for mod in (linalg_basic, linalg_ops, misc_ops, scan, special_fns):
        for n in mod.METHODS:
            if not hasattr(T, n):
                setattr(T, n, getattr(mod, n))
        for n, fn in getattr(mod, "METHOD_FORMS", {}).items():
            if not hasattr(T, n):
                setattr(T, n, fn)
    T.swapdims = T.swapaxes
    T.moveaxis = T.movedim
    T.ndimension = lambda s: s.ndim
    T.ravel = ops.ravel
    T.T = property(lambda s: ops.permute(s, *reversed(range(s.ndim))))
    T.mT = property(lambda s: ops.transpose(s, -2, -1))
