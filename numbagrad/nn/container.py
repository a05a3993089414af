"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``,
``ParameterDict``."""
import operator
from collections import OrderedDict

from ..tensor import Tensor
from .module import Module, _addindent
from .parameter import Parameter

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _fused_activation(m):
    """The ``linear_act`` activation a hook-free ``m`` computes, or None. Only those whose
    fused kernel gives the composed ops' bits forward (tests/nn/test_sequential_fusion.py)."""
    t = type(m)
    if m._forward_pre_hooks or m._forward_hooks:
        return None
    return _FUSABLE.get(t)


def _index(idx, n, what):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for {what} of length {n}")
    return idx % n


def fused_pair(a, b):
    """Whether :func:`run_sequence` runs modules ``a`` then ``b`` as one fused node."""
    return type(a) is _Linear and not (a._forward_pre_hooks or a._forward_hooks) and \
        _fused_activation(b) is not None


def run_sequence(modules, input):
    """``input`` through ``modules`` (callables) in order, as :class:`Sequential` runs them:
    a hook-free ``Linear`` followed by an activation with a fused kernel runs as one fused
    node (``ops.fused.linear_act``). Gradient checkpointing runs its segments through this
    too, so that a checkpointed Sequential computes exactly what the plain one does."""
    mods = list(modules)
    if len(mods) < 2:
        for m in mods:
            input = m(input)
        return input
    prev = None           # a hook-free Linear whose call waits for its successor
    for m in mods:
        if prev is not None:
            act = _fused_activation(m)
            if act is not None:
                # Linear + activation as one fused node (ops/fused.py): one pass over
                # the activations less forward and backward, and one graph node less
                input = _linear_act(input, prev.weight, prev.bias, act)
                prev = None
                continue
            input = prev(input)
            prev = None
        if type(m) is _Linear and not (m._forward_pre_hooks or m._forward_hooks):
            prev = m
        else:
            input = m(input)
    if prev is not None:
        input = prev(input)
    return input


class _ModuleSeq(Module):
    """What Sequential and ModuleList share: submodules registered under ``"0"``, ``"1"``, ...
    in order."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def _renumber(self, items):
        """Register ``items`` as the submodules ``"0"``, ``"1"``, ... (no checks)."""
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key=-1):
        v = self[key]
        del self[key]
        return v


class Sequential(_ModuleSeq):
    """Modules applied one after another: ``Sequential(a, b, c)(x) == c(b(a(x)))``.

    Built from modules (named ``"0"``, ``"1"``, ...) or from one ``OrderedDict`` of
    named modules.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (OrderedDict, dict)):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, input):
        return run_sequence(self._modules.values(), input)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        return self._modules[keys[_index(idx, len(keys), "Sequential")]]

    def __setitem__(self, idx, module):
        keys = list(self._modules)
        self.add_module(keys[_index(idx, len(keys), "Sequential")], module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        if isinstance(idx, slice):
            for k in keys[idx]:
                del self._modules[k]
        else:
            del self._modules[keys[_index(idx, len(keys), "Sequential")]]
        self._renumber(list(self._modules.values()))

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: Module, got {type(module).__name__}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)
        return self

    def extend(self, sequential):
        for m in sequential:
            self.append(m)
        return self

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class")
        out = Sequential()
        for m in self:
            out.append(m)
        for m in other:
            out.append(m)
        return out


class ModuleList(_ModuleSeq):
    """A list of modules, registered so that their parameters are found. Has no forward."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        self.add_module(str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index(idx, len(items), "ModuleList")]
        self._renumber(items)

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def extend(self, modules):
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend should be called with an iterable of modules, but got "
                            f"{type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def __repr__(self):
        # Runs of identical-looking modules are folded, as PyTorch does: (0-2): 3 x Linear(...)
        reprs = [repr(m) for m in self._modules.values()]
        if not reprs:
            return self._get_name() + "()"
        lines = []
        start = 0
        for i in range(1, len(reprs) + 1):
            if i == len(reprs) or reprs[i] != reprs[start]:
                body = _addindent(reprs[start], 2)
                if i - start == 1:
                    lines.append(f"({start}): {body}")
                else:
                    lines.append(f"({start}-{i - 1}): {i - start} x {body}")
                start = i
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class _DictContainer(Module):
    """The dict protocol shared by ModuleDict and ParameterDict, over the registry
    named by ``_store`` (``"_modules"`` or ``"_parameters"``)."""

    _store = "_modules"

    def __init__(self, entries=None):
        super().__init__()
        if entries is not None:
            self.update(entries)

    def _dict(self):
        return self.__dict__[self._store]

    def __getitem__(self, key):
        return self._dict()[key]

    def __delitem__(self, key):
        del self._dict()[key]

    def __len__(self):
        return len(self._dict())

    def __iter__(self):
        return iter(self._dict())

    def __contains__(self, key):
        return key in self._dict()

    def clear(self):
        self._dict().clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._dict().keys()

    def items(self):
        return self._dict().items()

    def values(self):
        return self._dict().values()

    def update(self, entries):
        items = entries.items() if hasattr(entries, "items") else entries
        for k, v in items:
            self[k] = v


class ModuleDict(_DictContainer):
    """An ordered dict of modules (string keys), registered so their parameters are found."""

    _store = "_modules"

    def __init__(self, modules=None):
        super().__init__(modules)

    def __setitem__(self, key, module):
        self.add_module(key, module)


class ParameterList(Module):
    """A list of Parameters (plain tensors are wrapped in ``Parameter``)."""

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self._parameters[str(i)] for i in range(self._size))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self)[idx])
        return self._parameters[str(_index(idx, self._size, "ParameterList"))]

    def __setitem__(self, idx, value):
        idx = _index(idx, self._size, "ParameterList")
        self.register_parameter(str(idx), _as_param(value))

    def append(self, value):
        self.register_parameter(str(self._size), _as_param(value))
        self._size += 1
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(f"({i}): Parameter containing: [{type(p).__name__} of size {tuple(p.shape)}]"
                         for i, p in enumerate(self))


class ParameterDict(_DictContainer):
    """An ordered dict of Parameters (plain tensors are wrapped in ``Parameter``)."""

    _store = "_parameters"

    def __init__(self, parameters=None):
        super().__init__(parameters)

    def __setitem__(self, key, value):
        self.register_parameter(key, _as_param(value))

    def extra_repr(self):
        return "\n".join(f"({k}): Parameter containing: [{type(p).__name__} of size {tuple(p.shape)}]"
                         for k, p in self.items())


def _as_param(value):
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value.detach(), requires_grad=value.requires_grad or value.is_floating_point())
    return Parameter(value)


from .activation import ReLU as _ReLU, Tanh as _Tanh  # noqa: E402
from .linear import Linear as _Linear  # noqa: E402
from ..ops.fused import linear_act as _linear_act  # noqa: E402

# Sigmoid's fused kernel rounds differently from the Sigmoid module (a few ulps), so it
# stays unfused: a Sequential gives what its modules called one by one give.
_FUSABLE = {_ReLU: "relu", _Tanh: "tanh"}
