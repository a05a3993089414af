"""``Module``: the base class of layers and models (``torch.nn.Module``).

Assigning a :class:`~numbagrad.nn.Parameter` or a Module to an attribute registers it;
``register_buffer`` registers non-learnable state (running statistics, masks) that is
saved in ``state_dict`` and converted by ``to()``. Registered objects live in the
``_parameters``, ``_buffers`` and ``_modules`` dicts (in assignment order), exactly as
in PyTorch, so attribute access falls back to ``__getattr__`` for them.
"""
import inspect
import operator
import itertools
from collections import OrderedDict, namedtuple

import numpy as np

from .. import _dtype
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor, _install_to_shorthands, _zero_grad
from .parameter import Parameter

__all__ = ["Module", "RemovableHandle"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    """Returned by the ``register_*_hook`` methods; ``remove()`` unregisters the hook.
    Also a context manager that removes the hook on exit."""

    _next_id = itertools.count()
    __slots__ = ("_dicts", "id")

    def __init__(self, *dicts):
        self._dicts = dicts
        self.id = next(RemovableHandle._next_id)

    def remove(self):
        for d in self._dicts:
            if isinstance(d, set):
                d.discard(self.id)
            else:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    pad = " " * n
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


def _array_of(value):
    """The NumPy array behind a state_dict value (a Tensor, a NumPy array, or anything
    ``np.asarray`` understands, e.g. a CPU ``torch.Tensor``)."""
    if isinstance(value, Tensor):
        return value.array
    return np.asarray(value)


class Module:
    """Base class of every layer and model.

    Subclasses call ``super().__init__()`` first, assign their Parameters and
    sub-Modules as attributes, and implement :meth:`forward`; calling the module runs
    the forward pre-hooks, ``forward`` and the forward hooks.

    Example
    -------
    >>> import numbagrad as ng
    >>> class MLP(ng.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc1 = ng.nn.Linear(4, 8)
    ...         self.fc2 = ng.nn.Linear(8, 2)
    ...     def forward(self, x):
    ...         return self.fc2(ng.nn.functional.relu(self.fc1(x)))
    >>> [n for n, _ in MLP().named_parameters()]
    ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias']
    """

    training: bool
    _version = 1

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments; "
                            "Module.__init__ takes none")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = {}
        d["_forward_pre_hooks_with_kwargs"] = set()
        d["_forward_hooks"] = {}
        d["_forward_hooks_with_kwargs"] = set()
        d["_forward_hooks_always_called"] = set()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ---- calling --------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                r = hook(self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError("forward pre-hook registered with with_kwargs=True must return "
                                           f"None or a tuple of (new_args, new_kwargs), got {r!r}")
                    args, kwargs = r
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        called = False
        try:
            out = self.forward(*args, **kwargs)
            for hid, hook in list(self._forward_hooks.items()):
                if hid in self._forward_hooks_with_kwargs:
                    r = hook(self, args, kwargs, out)
                else:
                    r = hook(self, args, out)
                if r is not None:
                    out = r
            called = True
            return out
        finally:
            if not called:
                for hid, hook in list(self._forward_hooks.items()):
                    if hid in self._forward_hooks_always_called:
                        try:
                            if hid in self._forward_hooks_with_kwargs:
                                hook(self, args, kwargs, None)
                            else:
                                hook(self, args, None)
                        except Exception:  # the original exception is the one to see
                            pass

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args) -> None or new args`` (with ``with_kwargs``:
        ``hook(module, args, kwargs) -> None or (args, kwargs)``), run before forward."""
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        _insert(self._forward_pre_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output) -> None or new output`` (with ``with_kwargs``:
        ``hook(module, args, kwargs, output)``), run after forward. ``always_call``
        also runs it (with output None) when forward raised."""
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs,
                                 self._forward_hooks_always_called)
        _insert(self._forward_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        return handle

    # ---- registration ---------------------------------------------------------------
    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _remove_from(name, d, d["_buffers"], d["_modules"], d["_non_persistent_buffers_set"])
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            _assign_member(params, name, value, "parameter", Parameter, "numbagrad.nn.Parameter")
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _remove_from(name, d, d["_parameters"], d["_buffers"], d["_non_persistent_buffers_set"])
            modules[name] = value
            return
        if modules is not None and name in modules:
            _assign_member(modules, name, value, "child module", Module, "numbagrad.nn.Module")
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            _assign_member(buffers, name, value, "buffer", Tensor, "numbagrad.Tensor")
            return
        object.__setattr__(self, name, value)

    def _store_of(self, name):
        """The dict of parameters, buffers or submodules holding ``name``, or None."""
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            sub = d.get(key)
            if sub is not None and name in sub:
                return sub
        return None

    def __getattr__(self, name):
        # NOTE: written out, not through _store_of: every parameter read in a forward comes
        # here, and the extra call cost a small MLP's training step 1-3%
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            sub = d.get(key)
            if sub is not None and name in sub:
                return sub[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        sub = self._store_of(name)
        if sub is None:
            object.__delattr__(self, name)
        else:
            del sub[name]
            self.__dict__["_non_persistent_buffers_set"].discard(name)

    def __dir__(self):
        keys = list(object.__dir__(self))
        keys += list(self._parameters) + list(self._buffers) + list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def _check_name(self, name, what):
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{what} name can\'t contain ".", got: {name}')

    def _checked_store(self, key, name, value, what, cls, expected):
        """``register_parameter``/``register_buffer``'s checks: the store ``key`` exists,
        ``name`` is a new valid name, ``value`` a ``cls`` or None. Returns the store."""
        d = self.__dict__
        if key not in d:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")
        self._check_name(name, what)
        if name in d and name not in d[key]:
            raise KeyError(f"attribute '{name}' already exists")
        if value is not None and not isinstance(value, cls):
            raise TypeError(f"cannot assign '{type(value).__name__}' object to {what} '{name}' "
                            f"({expected} or None required)")
        return d[key]

    def register_parameter(self, name, param):
        """Add a Parameter (or ``None``, a declared-but-absent parameter) under ``name``."""
        store = self._checked_store("_parameters", name, param, "parameter", Parameter, "numbagrad.nn.Parameter")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters "
                             "must be created explicitly: wrap the value in nn.Parameter(t.detach())")
        store[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a non-learnable tensor (saved in ``state_dict`` unless ``persistent=False``)."""
        self._checked_store("_buffers", name, tensor, "buffer", Tensor, "numbagrad.Tensor")[name] = tensor
        if persistent:
            self.__dict__["_non_persistent_buffers_set"].discard(name)
        else:
            self.__dict__["_non_persistent_buffers_set"].add(name)

    def add_module(self, name, module):
        """Add a child module under ``name`` (``None`` declares an absent child)."""
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if name in self.__dict__ and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            sub = mod._modules.get(item) if isinstance(mod, Module) else None
            if sub is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule `{item}` (looking up '{target}')")
            mod = sub
        return mod

    def _get_member(self, target, key, what):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        store = mod.__dict__[key]
        if name not in store:
            raise AttributeError(f"{type(mod).__name__} has no {what} `{name}`")
        return store[name]

    def get_parameter(self, target):
        return self._get_member(target, "_parameters", "parameter")

    def get_buffer(self, target):
        return self._get_member(target, "_buffers", "buffer")

    # ---- iteration ------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """``(name, module)`` for this module and every descendant, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, attr, prefix, recurse, remove_duplicate):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mprefix, m in mods:
            for name, v in getattr(m, attr).items():
                if v is None:
                    continue
                if remove_duplicate:
                    if id(v) in seen:
                        continue
                    seen.add(id(v))
                yield mprefix + ("." if mprefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """``(qualified name, Parameter)`` pairs; a shared Parameter is listed once."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- modes ----------------------------------------------------------------------
    def train(self, mode=True):
        """Set training mode on this module and every descendant (dropout, batch norm)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of every parameter (to None, or to zero in place)."""
        for p in self.parameters():
            _zero_grad(p, set_to_none)

    def apply(self, fn):
        """Call ``fn(module)`` on every child (recursively) and then on self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- conversion -----------------------------------------------------------------
    def _apply(self, fn):
        """Replace the array of every parameter, gradient and buffer by ``fn(array)``.

        The Parameter objects stay the same (optimizers holding them keep working; an
        optimizer's flat arena notices the new arrays and rebuilds itself)."""
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                new = fn(p.array)
                if new is not p.array:
                    p.array = new
                if p.grad is not None:
                    g = fn(p.grad.array)
                    if g is not p.grad.array:
                        p.grad.array = g
            for name, b in m._buffers.items():
                if b is not None:
                    new = fn(b.array)
                    if new is not b.array:
                        b.array = new
        return self

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(tensor)``: convert
        floating parameters and buffers (integer buffers keep their dtype)."""
        dtype = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to(): unexpected keyword arguments {sorted(kwargs)}")
        from ..device import device as _device
        for a in args:
            if isinstance(a, Tensor):
                dtype, dev = a.dtype, a.device
            elif isinstance(a, _device) or (isinstance(a, str) and a not in _dtype._ALIASES):
                dev = a
            else:
                dtype = a
        dtype = _dtype.as_dtype(dtype)
        if dtype is not None and not _dtype.is_float(dtype):
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def convert(arr):
            t = Tensor._from_array(arr)
            out = t
            if dev is not None:
                out = out.to(device=dev)
            if dtype is not None and _dtype.is_float(arr.dtype) and arr.dtype != dtype:
                out = out.to(dtype)
            return out.array

        return self._apply(convert)

    # float, double, half, bfloat16, cpu: Tensor's shorthands, installed below the class

    def type(self, dst_type):
        return self.to(dst_type)

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    # ---- state dict -----------------------------------------------------------------
    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict of every parameter and persistent buffer by qualified name.

        Values are detached tensors sharing memory with the module (as in PyTorch);
        ``keep_vars=True`` returns the Parameter objects themselves.
        """
        if args:  # PyTorch's deprecated positional form (destination, prefix, keep_vars)
            destination = args[0]
            if len(args) > 1:
                prefix = args[1]
            if len(args) > 2:
                keep_vars = args[2]
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, missing, unexpected, errors, assign):
        local = {k: v for k, v in self._parameters.items() if v is not None}
        local.update((k, v) for k, v in self._buffers.items()
                     if v is not None and k not in self._non_persistent_buffers_set)
        for name, target in local.items():
            key = prefix + name
            if key not in state_dict:
                missing.append(key)
                continue
            value = state_dict[key]
            try:
                arr = _array_of(value)
            except Exception as ex:  # pragma: no cover - exotic values
                errors.append(f'While copying the parameter named "{key}", could not read the value: {ex}')
                continue
            if arr.shape != target.array.shape:
                errors.append(f"size mismatch for {key}: copying a param with shape {tuple(arr.shape)} "
                              f"from checkpoint, the shape in current model is {tuple(target.array.shape)}.")
                continue
            if assign:
                new = np.array(arr, dtype=target.array.dtype if arr.dtype.kind != target.array.dtype.kind
                               else arr.dtype, copy=True)
                target.array = new
            else:
                np.copyto(target.array, arr, casting="unsafe")
                target._version.value += 1
        for key in state_dict:
            if key.startswith(prefix):
                head = key[len(prefix):].split(".", 1)
                if len(head) > 1:
                    if head[0] not in self._modules:
                        unexpected.append(key)
                elif head[0] not in local:
                    unexpected.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from ``state_dict`` into this module, in place.

        Values may be numbagrad Tensors, NumPy arrays or anything ``np.asarray`` reads
        (CPU ``torch.Tensor`` s included). With ``strict`` (default) missing or
        unexpected keys raise; either way a ``(missing_keys, unexpected_keys)``
        namedtuple is returned. ``assign=True`` rebinds the arrays instead of copying.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        missing, unexpected, errors = [], [], []

        def load(module, prefix):
            module._load_from_state_dict(state_dict, prefix, missing, unexpected, errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")

        with no_grad():
            load(self, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ---- representation -------------------------------------------------------------
    def extra_repr(self):
        """The module-specific part of ``repr`` (override it, one line per setting)."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({k}): " + _addindent(repr(m), 2) for k, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"

    def __setstate__(self, state):
        self.__dict__.update(state)
        for key, default in (("_forward_pre_hooks_with_kwargs", set), ("_forward_hooks_with_kwargs", set),
                             ("_forward_hooks_always_called", set)):
            if key not in self.__dict__:
                self.__dict__[key] = default()


_install_to_shorthands(Module, ("float", "double", "half", "bfloat16", "cpu"))


_REQUIRED = inspect.Parameter.empty  # an argument with no default (``Threshold``)
_SELF = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)


class _FunctionalModule(Module):
    """Base of the modules that wrap one functional op (the activations, the reshaping modules).

    A subclass declares the op and its constructor's arguments in its class statement:
    ``class ELU(_FunctionalModule, fn=F.elu, alpha=1.0, inplace=False)`` gets the constructor
    ``ELU(alpha=1.0, inplace=False)`` (``_REQUIRED``: no default), which stores each argument
    as an attribute of its name and then calls ``_validate()``; ``forward(input)`` is
    ``fn(input, *those attributes in that order)``; ``extra_repr`` is PyTorch's
    ``name=value, ...`` (strings quoted, ``inplace`` shown only when true). A subclass that
    names no arguments keeps its parent's constructor (no arguments at all: Module's).
    """

    _fn = None
    _args = ()

    def __init_subclass__(cls, fn=None, **args):
        super().__init_subclass__()
        if fn is not None:
            cls._fn = staticmethod(fn)
        if args:
            cls._args = tuple(args)
            cls.__init__ = _functional_init(cls, args)
        if (fn is not None or args) and "forward" not in cls.__dict__ and cls._fn is not None:
            cls.forward = _functional_forward(cls.__dict__.get("_fn", cls._fn), cls._args)

    def _validate(self):
        """Raise on bad constructor arguments (the attributes are set when it runs)."""

    def forward(self, input):
        return self._fn(input, *[getattr(self, name) for name in self._args])

    def extra_repr(self):
        parts = [f"{name}={getattr(self, name)!r}" if isinstance(getattr(self, name), str)
                 else f"{name}={getattr(self, name)}" for name in self._args if name != "inplace"]
        if getattr(self, "inplace", False):
            parts.append("inplace=True")
        return ", ".join(parts)


def _functional_forward(fn, names):
    """``forward(input)`` = ``fn(input, *attributes named names)``, made per class: a module
    call is on the per-op path (the generic loop over ``_args`` cost ReLU 0.3 us a call)."""
    fn = fn.__func__ if isinstance(fn, staticmethod) else fn
    if not names:
        def forward(self, input):
            return fn(input)
    elif len(names) == 1:
        name = names[0]

        def forward(self, input):
            return fn(input, getattr(self, name))
    else:
        get = operator.attrgetter(*names)

        def forward(self, input):
            return fn(input, *get(self))
    return forward


def _functional_init(cls, args):
    """The constructor of ``_FunctionalModule`` subclass ``cls`` taking ``args`` (name -> default)."""
    sig = inspect.Signature([_SELF] + [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                         default=default) for name, default in args.items()])

    def __init__(self, *values, **kwargs):
        try:
            bound = sig.bind(self, *values, **kwargs)
        except TypeError as e:  # Python's own wording, naming the class as a def would
            raise TypeError(f"{type(self).__name__}.__init__() {e}") from None
        bound.apply_defaults()
        Module.__init__(self)
        for name in args:
            setattr(self, name, bound.arguments[name])
        self._validate()

    __init__.__signature__ = sig
    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _insert(hooks, key, value, prepend):
    if prepend:
        rest = list(hooks.items())
        hooks.clear()
        hooks[key] = value
        hooks.update(rest)
    else:
        hooks[key] = value


def _changed_options(module, defaults):
    """``", name=value"`` for each ``(name, default)`` of ``defaults`` whose value on ``module``
    differs from the default, as PyTorch's ``extra_repr``s show options (compared with ``is not``
    for None and bool defaults, ``!=`` for numbers)."""
    s = ""
    for name, default in defaults:
        value = getattr(module, name)
        if (value is not default) if default is None or isinstance(default, bool) else value != default:
            s += f", {name}={value}"
    return s


def _assign_member(store, name, value, what, cls, expected):
    """``module.name = value`` where ``name`` is already in ``store``: ``value`` must be a
    ``cls`` or None."""
    if value is not None and not isinstance(value, cls):
        raise TypeError(f"cannot assign '{type(value).__name__}' as {what} '{name}' ({expected} or None expected)")
    store[name] = value


def _remove_from(name, *containers):
    for c in containers:
        if name in c:
            if isinstance(c, set):
                c.discard(name)
            else:
                del c[name]
