"""nn.Linear: forward/backward vs NumPy, float64 finite differences and PyTorch; default init."""
import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from optest import check_grad

torch = pytest.importorskip("torch")


def _linear_ref(x, w, b):
    return x @ w.T + b


@pytest.mark.parametrize("shape", [(5, 4), (2, 3, 4), (4,)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_forward_matches_numpy(shape, dtype):
    lin = nn.Linear(4, 3, dtype=dtype)
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    y = lin(ng.tensor(x))
    assert y.dtype == dtype and y.shape == shape[:-1] + (3,)
    ref = _linear_ref(x.astype(np.float64), lin.weight.detach().numpy().astype(np.float64),
                      lin.bias.detach().numpy().astype(np.float64))
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_gradients_vs_finite_differences():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 5))
    w = rng.standard_normal((3, 5))
    b = rng.standard_normal(3)

    check_grad(ng.nn.functional.linear, [x, w, b])

    # The module's own parameters, perturbed in place, against its analytic .grad.
    lin = nn.Linear(5, 3, dtype=ng.float64)
    v = rng.standard_normal((6, 3))
    xt = ng.tensor(x)
    (lin(xt) * ng.tensor(v)).sum().backward()
    eps = 1e-6
    for p in lin.parameters():
        num = np.zeros(p.shape)
        flat = p.array.reshape(-1)
        for k in range(flat.size):
            old = flat[k]
            flat[k] = old + eps
            fp = float((lin(xt).detach().numpy() * v).sum())
            flat[k] = old - eps
            fm = float((lin(xt).detach().numpy() * v).sum())
            flat[k] = old
            num.reshape(-1)[k] = (fp - fm) / (2 * eps)
        np.testing.assert_allclose(p.grad.numpy(), num, rtol=1e-6, atol=1e-8)


def test_matches_torch_forward_and_backward():
    tl = torch.nn.Linear(7, 5).double()
    lin = nn.Linear(7, 5, dtype=ng.float64)
    lin.load_state_dict(tl.state_dict())
    x = np.random.default_rng(2).standard_normal((3, 2, 7))
    xt = torch.tensor(x, requires_grad=True)
    xn = ng.tensor(x, requires_grad=True)
    g = np.random.default_rng(3).standard_normal((3, 2, 5))
    tl(xt).backward(torch.tensor(g))
    out = lin(xn)
    out.backward(ng.tensor(g))
    np.testing.assert_allclose(out.detach().numpy(), tl(xt).detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(lin.weight.grad.numpy(), tl.weight.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(lin.bias.grad.numpy(), tl.bias.grad.numpy(), rtol=1e-12)


def test_no_bias():
    lin = nn.Linear(3, 2, bias=False)
    assert lin.bias is None and [n for n, _ in lin.named_parameters()] == ["weight"]
    x = ng.randn(4, 3)
    np.testing.assert_allclose(lin(x).detach().numpy(), x.numpy() @ lin.weight.detach().numpy().T, rtol=1e-6)
    assert repr(lin) == "Linear(in_features=3, out_features=2, bias=False)"


def test_default_init_is_pytorch_uniform():
    ng.manual_seed(0)
    lin = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)
    w = lin.weight.detach().numpy()
    b = lin.bias.detach().numpy()
    assert w.dtype == np.float32 and w.shape == (300, 400)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    # U(-a, a) has std a/sqrt(3)
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert abs(w.mean()) < 0.01 * bound
    assert np.abs(b).max() > 0.9 * bound
    ng.manual_seed(0)
    np.testing.assert_array_equal(nn.Linear(400, 300).weight.detach().numpy(), w)  # seeded
    assert not np.array_equal(nn.Linear(400, 300).weight.detach().numpy(), w)


def test_shape_and_dtype_errors():
    lin = nn.Linear(3, 2)
    with pytest.raises(RuntimeError, match=r"linear: input of shape \(4, 5\)"):
        lin(ng.randn(4, 5))
    with pytest.raises(RuntimeError, match="dtype"):
        lin(ng.randn(4, 3, dtype=ng.float64))
    with pytest.raises(RuntimeError, match="cuda"):
        nn.Linear(2, 2, device="cuda")


def test_identity_and_flatten():
    x = ng.randn(2, 3, 4)
    assert nn.Identity(1, k=2)(x) is x
    assert nn.Flatten()(x).shape == (2, 12)
    assert nn.Flatten(0)(x).shape == (24,)
    assert nn.Unflatten(1, (3, 1))(ng.randn(2, 3)).shape == (2, 3, 1)
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
