"""Activation/softmax/dropout Module wrappers: same values as the functional ops, NumPy
references and PyTorch's modules, PyTorch's reprs, train/eval behaviour of the random
ones (RReLU, the dropout family), PReLU's parameter."""
import numpy as np
import pytest
from scipy.special import erf

import numbagrad as ng
from numbagrad import nn
from numbagrad.nn import activation as A
from optest import check_grad

torch = pytest.importorskip("torch")

CASES = [
    ("ReLU", (), {}), ("ReLU6", (), {}), ("LeakyReLU", (0.2,), {}), ("ELU", (), {"alpha": 0.7}),
    ("SELU", (), {}), ("GELU", (), {}), ("GELU", (), {"approximate": "tanh"}), ("SiLU", (), {}),
    ("Mish", (), {}), ("Sigmoid", (), {}), ("Tanh", (), {}), ("Softplus", (), {"beta": 2.0}),
    ("Hardtanh", (-0.5, 0.5), {}), ("Softmax", (), {"dim": 1}), ("LogSoftmax", (), {"dim": -1}),
    ("Hardsigmoid", (), {}), ("Hardswish", (), {}), ("Softsign", (), {}), ("LogSigmoid", (), {}),
    ("CELU", (), {"alpha": 0.5}), ("Threshold", (0.1, 2.0), {}), ("GLU", (), {}), ("GLU", (0,), {}),
    ("Tanhshrink", (), {}), ("Softshrink", (0.3,), {}), ("Hardshrink", (0.4,), {}),
    ("Softmin", (), {"dim": 1}),
    ("RReLU", (0.1, 0.3), {}), ("ReLU6", (), {}), ("PReLU", (), {}), ("Softmax2d", (), {}),
]


def _sig(x):
    return 1 / (1 + np.exp(-x))


# NumPy float64 references (an oracle independent of both implementations)
NP_REF = {
    "ReLU": lambda x: np.maximum(x, 0), "ReLU6": lambda x: np.clip(x, 0, 6),
    "LeakyReLU": lambda x: np.where(x > 0, x, 0.2 * x),
    "ELU": lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)),
    "SELU": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
    "GELU": lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2))), "SiLU": lambda x: x * _sig(x),
    "Mish": lambda x: x * np.tanh(np.log1p(np.exp(x))), "Sigmoid": _sig, "Tanh": np.tanh,
    "Softplus": lambda x: np.log1p(np.exp(2 * x)) / 2, "Hardtanh": lambda x: np.clip(x, -0.5, 0.5),
    "Softmax": lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True),
    "LogSoftmax": lambda x: x - np.log(np.exp(x).sum(-1, keepdims=True)),
    "Hardsigmoid": lambda x: np.clip(x / 6 + 0.5, 0, 1),
    "Hardswish": lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
    "Softsign": lambda x: x / (1 + np.abs(x)), "LogSigmoid": lambda x: -np.log1p(np.exp(-x)),
    "CELU": lambda x: np.where(x > 0, x, 0.5 * np.expm1(x / 0.5)),
    "Threshold": lambda x: np.where(x > 0.1, x, 2.0),
    "Tanhshrink": lambda x: x - np.tanh(x),
    "Softshrink": lambda x: np.where(x > 0.3, x - 0.3, np.where(x < -0.3, x + 0.3, 0)),
    "Hardshrink": lambda x: np.where(np.abs(x) > 0.4, x, 0), "Softmin": lambda x: NP_REF["Softmax"](-x),
    "RReLU": lambda x: np.where(x >= 0, x, 0.2 * x), "PReLU": lambda x: np.where(x > 0, x, 0.25 * x),
}


@pytest.mark.parametrize("name", sorted(NP_REF))
def test_matches_numpy_reference(name):
    args = next((c[1], c[2]) for c in CASES if c[0] == name)
    m = getattr(A, name)(*args[0], **args[1])
    if name == "PReLU":
        m = m.double()
    m.eval()
    x = np.random.default_rng(2).standard_normal((3, 4)) * 2
    np.testing.assert_allclose(m(ng.tensor(x)).detach().numpy(), NP_REF[name](x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,args", [("GLU", ()), ("CELU", (0.5,)), ("Softmin", (1,)), ("PReLU", (4,)),
                                       ("Hardswish", ()), ("Threshold", (0.1, 2.0)), ("Softshrink", ())])
def test_finite_differences(name, args):
    m = getattr(A, name)(*args)
    if name == "PReLU":
        m = m.double()
        check_grad(lambda x, w: _prelu_fn(x, w), [np.random.default_rng(3).standard_normal((2, 4, 3)),
                                                   np.array([0.1, -0.2, 0.3, 0.4])])
        return
    x = np.random.default_rng(3).standard_normal((2, 4))
    x = np.where(np.abs(np.abs(x) - 0.5) < 0.05, x + 0.1, x)   # away from the shrink kinks
    x = np.where(np.abs(x - 0.1) < 0.05, x + 0.1, x)
    x = np.where(np.abs(x + 3) < 0.05, x + 0.1, x)
    check_grad(m, [x])


def _prelu_fn(x, w):
    from numbagrad.ops.activation import prelu
    return prelu(x, w)


@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[c[0] + str(c[2]) for c in CASES])
def test_matches_torch_module(name, args, kwargs):
    x = np.random.default_rng(0).standard_normal((4, 6) if name != "Softmax2d" else (2, 3, 2, 2))
    m = getattr(A, name)(*args, **kwargs)
    tm = getattr(torch.nn, name)(*args, **kwargs)
    if name in ("RReLU", "PReLU"):  # RReLU: the fixed eval slope; PReLU: float64 parameters
        m.eval(), tm.eval()
        m, tm = m.double(), tm.double()
        assert list(m.state_dict()) == list(tm.state_dict())
    xn = ng.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    out, tout = m(xn), tm(xt)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = np.random.default_rng(1).standard_normal(tuple(tout.shape))
    out.backward(ng.tensor(g))
    tout.backward(torch.tensor(g))
    # torch's hardsigmoid backward multiplies by a float32 1/6 (relative error 3e-8)
    rtol = 1e-7 if name == "Hardsigmoid" else 1e-9
    np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=rtol, atol=1e-12)
    assert repr(m) == repr(tm)
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k].numpy(), v.numpy())
        if tm.weight.grad is not None:
            np.testing.assert_allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-9)


REPR_CASES = [("Hardswish", (True,)), ("Hardsigmoid", (True,)), ("CELU", (0.5, True)),
              ("Threshold", (0.1, 2.0, True)),
              ("PReLU", (3,)), ("RReLU", (0.1, 0.2, True)), ("ReLU6", (True,)), ("SiLU", (True,)),
              ("Dropout1d", ()), ("Dropout2d", (0.3,)), ("Dropout3d", (0.2, True)), ("AlphaDropout", (0.2,)),
              ("FeatureAlphaDropout", ()), ("Softmin", ()), ("Softmax2d", ()), ("GLU", (1,)),
              ("Hardshrink", ())]


@pytest.mark.parametrize("name,args", REPR_CASES, ids=[c[0] for c in REPR_CASES])
def test_reprs_and_attributes(name, args):
    m, tm = getattr(A, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(m) == repr(tm)
    for attr in ("inplace", "p", "lower", "upper", "alpha", "threshold", "value", "dim", "lambd",
                 "num_parameters", "min_val", "max_val"):
        if hasattr(tm, attr):
            assert getattr(m, attr) == getattr(tm, attr), attr


def test_prelu_per_channel_torch_parity_and_state_dict():
    tm = torch.nn.PReLU(3).double()
    with torch.no_grad():
        tm.weight.copy_(torch.tensor([0.1, -0.5, 2.0]))
    m = A.PReLU(3, dtype=ng.float64)
    m.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    x = np.random.default_rng(4).standard_normal((2, 3, 4))
    xn, xt = ng.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, tout = m(xn), tm(xt)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    tout.sum().backward()
    np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(m.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-12)
    assert [(k, tuple(v.shape)) for k, v in m.state_dict().items()] == [("weight", (3,))]
    np.testing.assert_array_equal(A.PReLU(5, init=0.1).weight.detach().numpy(), np.full(5, 0.1, np.float32))


def test_rrelu_training_draws_slopes_and_is_seeded():
    m = A.RReLU(0.1, 0.3)
    x = ng.tensor(-np.abs(np.random.default_rng(5).standard_normal(2000)) - 0.1, requires_grad=True)
    ng.manual_seed(7)
    y = m(x)
    slopes = y.detach().numpy() / x.detach().numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.04
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes, rtol=1e-12)   # d(a x)/dx = a, the drawn slope
    ng.manual_seed(7)
    np.testing.assert_array_equal(m(x).detach().numpy(), y.detach().numpy())
    pos = ng.tensor([0.0, 1.5, 3.0])
    np.testing.assert_array_equal(m(pos).numpy(), pos.numpy())
    m.eval()
    np.testing.assert_allclose(m(x).detach().numpy(), 0.2 * x.detach().numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="lower bound"):
        A.RReLU(0.5, 0.1).train()(x)


@pytest.mark.parametrize("name,shape", [("Dropout1d", (4, 50, 3)), ("Dropout2d", (4, 50, 2, 2)),
                                        ("Dropout3d", (4, 50, 1, 2, 2)), ("FeatureAlphaDropout", (4, 50, 3))])
def test_channel_dropout_modules(name, shape):
    m = getattr(A, name)(0.5)
    x = ng.ones(*shape)
    ng.manual_seed(0)
    y = m(x).numpy()
    per_channel = y.reshape(shape[0], shape[1], -1)
    assert (per_channel == per_channel[:, :, :1]).all()          # one draw per (n, c)
    kept = per_channel[:, :, 0] == per_channel.max()
    assert 0.3 < kept.mean() < 0.7
    m.eval()
    assert m(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        getattr(A, name)(-0.1)


def test_alpha_dropout_module_keeps_mean_and_variance():
    m = A.AlphaDropout(0.3)
    ng.manual_seed(1)
    x = ng.tensor(np.random.default_rng(6).standard_normal(20000).astype(np.float32))
    y = m(x).numpy()
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05
    m.eval()
    assert m(x) is x


def test_softmax2d_rank_check():
    with pytest.raises(ValueError, match="3D or 4D"):
        A.Softmax2d()(ng.randn(2, 3))


def test_inplace_relu_repr_and_effect():
    m = A.ReLU(inplace=True)
    assert repr(m) == repr(torch.nn.ReLU(inplace=True))
    x = ng.tensor([-1.0, 2.0])
    out = m(x)
    assert out.tolist() == [0.0, 2.0] and x.tolist() == [0.0, 2.0]


def test_dropout_module():
    d = A.Dropout(0.5)
    assert repr(d) == repr(torch.nn.Dropout(0.5))
    x = ng.ones(1000)
    y = d(x).numpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 350 < (y == 0).sum() < 650
    d.eval()
    assert d(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        A.Dropout(1.5)


def test_functional_forwards_unknown_names_to_ops():
    F = nn.functional
    x = ng.randn(3, 4)
    np.testing.assert_array_equal(F.relu(x).numpy(), np.maximum(x.numpy(), 0))
    assert F.log_softmax is not None and callable(F.softmax)
    with pytest.raises(AttributeError):
        F.this_does_not_exist
