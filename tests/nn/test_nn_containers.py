"""Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""
from collections import OrderedDict

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn

torch = pytest.importorskip("torch")


def test_sequential_forward_and_indexing():
    a, b, c = nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)
    seq = nn.Sequential(a, b, c)
    x = ng.randn(5, 3)
    np.testing.assert_array_equal(seq(x).detach().numpy(), c(b(a(x))).detach().numpy())
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c and list(seq) == [a, b, c]
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and list(sub) == [b, c] and list(sub._modules) == ["1", "2"]
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    seq[1] = nn.Tanh()
    assert isinstance(seq[1], nn.Tanh)
    del seq[0]
    assert list(seq._modules) == ["0", "1"] and seq[1] is c
    seq.append(nn.Identity())
    seq.insert(0, nn.Linear(3, 4))
    assert [type(m).__name__ for m in seq] == ["Linear", "Tanh", "Linear", "Identity"]
    assert list(seq._modules) == ["0", "1", "2", "3"]
    assert isinstance(seq.pop(1), nn.Tanh) and len(seq) == 3
    assert len(seq + nn.Sequential(nn.ReLU())) == 4
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]


def test_sequential_from_ordered_dict():
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert seq.fc is seq[0] and [n for n, _ in seq.named_parameters()] == ["fc.weight", "fc.bias"]
    t = torch.nn.Sequential(OrderedDict([("fc", torch.nn.Linear(2, 2)), ("act", torch.nn.ReLU())]))
    assert repr(seq) == repr(t)


def test_module_list():
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(ml) == 3 and len(list(ml.parameters())) == 6
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh()])
    ml.insert(0, nn.Identity())
    assert [type(m).__name__ for m in ml] == ["Identity", "Linear", "Linear", "Linear", "ReLU", "Tanh"]
    del ml[0]
    assert list(ml._modules) == [str(i) for i in range(5)]
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    ml += [nn.Identity()]
    assert len(ml) == 6
    with pytest.raises(TypeError, match="iterable"):
        ml.extend(nn.Linear(1, 1))
    tml = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)] + [torch.nn.ReLU()])
    assert repr(nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU()])) == repr(tml)
    assert repr(nn.ModuleList()) == "ModuleList()"


def test_module_dict():
    md = nn.ModuleDict({"a": nn.Linear(1, 1), "b": nn.ReLU()})
    assert list(md) == ["a", "b"] and "a" in md and len(md) == 2
    md["c"] = nn.Tanh()
    assert list(md.keys()) == ["a", "b", "c"]
    assert isinstance(md.pop("b"), nn.ReLU) and "b" not in md
    md.update([("d", nn.Identity())])
    assert [k for k, _ in md.items()] == ["a", "c", "d"]
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]


def test_parameter_list_and_dict():
    pl = nn.ParameterList([ng.randn(2), nn.Parameter(ng.randn(3))])
    assert len(pl) == 2 and all(isinstance(p, nn.Parameter) for p in pl)
    pl.append(ng.randn(1))
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
    pd = nn.ParameterDict({"w": ng.randn(2)})
    pd["b"] = ng.zeros(1)
    assert [n for n, _ in pd.named_parameters()] == ["w", "b"] and isinstance(pd["b"], nn.Parameter)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = nn.ParameterList([ng.randn(2)])

    assert [n for n, _ in M().named_parameters()] == ["ps.0"]
