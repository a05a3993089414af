"""Activation/softmax/dropout Module wrappers: same values as the functional ops and
PyTorch's modules, PyTorch's reprs, train/eval behaviour of Dropout."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn

torch = pytest.importorskip("torch")

CASES = [
    ("ReLU", (), {}), ("ReLU6", (), {}), ("LeakyReLU", (0.2,), {}), ("ELU", (), {"alpha": 0.7}),
    ("SELU", (), {}), ("GELU", (), {}), ("GELU", (), {"approximate": "tanh"}), ("SiLU", (), {}),
    ("Mish", (), {}), ("Sigmoid", (), {}), ("Tanh", (), {}), ("Softplus", (), {"beta": 2.0}),
    ("Hardtanh", (-0.5, 0.5), {}), ("Softmax", (), {"dim": 1}), ("LogSoftmax", (), {"dim": -1}),
]


@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[c[0] + str(c[2]) for c in CASES])
def test_matches_torch_module(name, args, kwargs):
    x = np.random.default_rng(0).standard_normal((4, 6))
    m = getattr(nn, name)(*args, **kwargs)
    tm = getattr(torch.nn, name)(*args, **kwargs)
    xn = ng.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    out, tout = m(xn), tm(xt)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = np.random.default_rng(1).standard_normal((4, 6))
    out.backward(ng.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    assert repr(m) == repr(tm)


def test_inplace_relu_repr_and_effect():
    m = nn.ReLU(inplace=True)
    assert repr(m) == repr(torch.nn.ReLU(inplace=True))
    x = ng.tensor([-1.0, 2.0])
    out = m(x)
    assert out.tolist() == [0.0, 2.0] and x.tolist() == [0.0, 2.0]


def test_dropout_module():
    d = nn.Dropout(0.5)
    assert repr(d) == repr(torch.nn.Dropout(0.5))
    x = ng.ones(1000)
    y = d(x).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 350 < (y == 0).sum() < 650
    d.eval()
    assert d(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_functional_forwards_unknown_names_to_ops():
    F = nn.functional
    x = ng.randn(3, 4)
    np.testing.assert_array_equal(F.relu(x).numpy(), np.maximum(x.numpy(), 0))
    assert F.log_softmax is not None and callable(F.softmax)
    with pytest.raises(AttributeError):
        F.this_does_not_exist
