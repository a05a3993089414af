import warnings

import numpy as np
import pytest

import numbagrad as ng
from optest import check_op, parallel_and_serial, randn, torch
from reference import activations as R

F = torch.nn.functional if torch else None
OPS = ["softmax", "log_softmax", "softmin"]


def _tf(name, dim):
    return (lambda t: getattr(F, name)(t, dim)) if torch else None


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2])
def test_every_dim_of_3d(name, dim):
    x = randn(3, 4, 5, seed=1) * 2
    check_op(lambda t: getattr(ng, name)(t, dim), lambda a: getattr(R, name)(a, dim), [x],
             torch_fn=_tf(name, dim))


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shape,dim", [((), 0), ((7,), 0), ((3, 5), 0), ((2, 13), -1),  # (3, 4), 1: tests/opdb.py
                                       ((4, 1), 1), ((6, 3, 9), 2)])
def test_shapes(name, shape, dim):
    x = randn(*shape, seed=2) * 3
    check_op(lambda t: getattr(ng, name)(t, dim), lambda a: getattr(R, name)(a, dim), [x],
             torch_fn=_tf(name, dim))


def test_scalar_input():
    assert ng.softmax(ng.tensor(3.0), 0).item() == 1.0
    assert ng.log_softmax(ng.tensor(3.0), -1).item() == 0.0
    with pytest.raises(IndexError):
        ng.softmax(ng.tensor([1.0, 2.0]), 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_extreme_logits(dtype):
    x64 = np.array([[1e4, -1e4, 0.0, 1e4 - 1.0], [-1e4, -1e4, -1e4, -1e4 + 2.0]])
    x = ng.tensor(x64.astype(dtype), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = ng.softmax(x, -1)
        ly = ng.log_softmax(x, -1)
        (y * ng.tensor(np.arange(8.0).reshape(2, 4).astype(dtype))).sum().backward()
        lx = ng.tensor(x64.astype(dtype), requires_grad=True)
        ng.log_softmax(lx, -1)[:, 0].sum().backward()
    for a in (y.detach().numpy(), ly.detach().numpy(), x.grad.numpy(), lx.grad.numpy()):
        assert np.all(np.isfinite(a))
    tol = dict(rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y.detach().numpy(), R.softmax(x64, -1), **tol)
    np.testing.assert_allclose(ly.detach().numpy(), R.log_softmax(x64, -1), rtol=1e-6, atol=1e-3)
    if torch is not None:
        tx = torch.tensor(x64.astype(dtype), requires_grad=True)
        (torch.softmax(tx, -1) * torch.arange(8.0, dtype=tx.dtype).reshape(2, 4)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)
        tl = torch.tensor(x64.astype(dtype), requires_grad=True)
        torch.log_softmax(tl, -1)[:, 0].sum().backward()
        np.testing.assert_allclose(lx.grad.numpy(), tl.grad.numpy(), **tol)
        np.testing.assert_allclose(ly.detach().numpy(), torch.log_softmax(tx, -1).detach().numpy(), rtol=1e-6)


def test_masked_logits_give_zero_probability():
    # attention masks: -inf entries get probability 0 and no gradient
    x = np.array([[0.5, -np.inf, 1.5], [-np.inf, 2.0, -np.inf]])
    t = ng.tensor(x, requires_grad=True)
    y = ng.softmax(t, -1)
    y.backward(ng.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]]))
    np.testing.assert_allclose(y.detach().numpy(), [[1 / (1 + np.e), 0.0, np.e / (1 + np.e)], [0.0, 1.0, 0.0]])
    assert np.all(np.isfinite(t.grad.numpy()))
    assert t.grad.numpy()[0, 1] == 0.0


def test_nan_propagates_to_its_row():
    y = ng.softmax(ng.tensor([[1.0, np.nan, 2.0], [1.0, 2.0, 3.0]]), 1).numpy()
    assert np.all(np.isnan(y[0])) and np.all(np.isfinite(y[1]))


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("shape,dim", [((600, 130), 1), ((130, 600), 0), ((3, 70000), 1)])
def test_parallel_path_equals_serial(name, shape, dim, monkeypatch):
    x64 = randn(*shape, seed=3) * 4
    g64 = randn(*shape, seed=4)
    fn = getattr(ng, name)
    (y_par, g_par), (y_ser, g_ser) = parallel_and_serial(lambda x: fn(x, dim), x64, g64, monkeypatch)
    np.testing.assert_array_equal(y_par, y_ser)
    np.testing.assert_array_equal(g_par, g_ser)
    np.testing.assert_allclose(y_par, getattr(R, name)(x64, dim), rtol=2e-5, atol=1e-6)


def test_dtype_argument_and_integer_input():
    x = ng.tensor(randn(2, 5, seed=5))  # float64
    y = ng.softmax(x, 1, dtype=ng.float32)
    assert y.dtype == ng.float32
    np.testing.assert_allclose(y.numpy(), R.softmax(randn(2, 5, seed=5), 1), rtol=1e-6)
    assert ng.log_softmax(x, 1, dtype="float32").dtype == ng.float32
    yi = ng.softmax(ng.tensor([[1, 2, 3]]), 1)
    assert yi.dtype == ng.get_default_dtype()
    np.testing.assert_allclose(yi.numpy(), R.softmax(np.array([[1.0, 2.0, 3.0]]), 1), rtol=1e-6)
    yh = ng.softmax(ng.tensor(np.array([1.0, 2.0], np.float16)), 0)
    assert yh.dtype == ng.float16


def test_dtype_argument_gradient_flows_to_lower_precision_input():
    x = ng.tensor(randn(3, 4, seed=6).astype(np.float32), requires_grad=True)
    ng.log_softmax(x, -1, dtype=ng.float64)[:, 1].sum().backward()
    assert x.grad.dtype == ng.float32
    if torch is not None:
        tx = torch.tensor(randn(3, 4, seed=6).astype(np.float32), requires_grad=True)
        torch.log_softmax(tx, -1, dtype=torch.float64)[:, 1].sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 3, 4), (2, 3, 4, 5)])
def test_implicit_dim_like_torch(shape):
    x = randn(*shape, seed=7)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = ng.softmax(ng.tensor(x))
    legacy = 0 if len(shape) in (0, 1, 3) else 1
    np.testing.assert_allclose(y.numpy(), R.softmax(x, legacy), rtol=1e-12)


def test_method_form_and_sums():
    x = ng.tensor(randn(4, 6, seed=8), requires_grad=True)
    y = x.softmax(-1)
    np.testing.assert_allclose(y.detach().numpy().sum(-1), np.ones(4), rtol=1e-12)
    y.sum().backward()  # sum of probabilities is constant: zero gradient
    np.testing.assert_allclose(x.grad.numpy(), 0, atol=1e-15)
    np.testing.assert_allclose(np.exp(x.log_softmax(0).detach().numpy()).sum(0), np.ones(6), rtol=1e-12)


def test_empty_input():
    y = ng.softmax(ng.zeros(0, 5), 1)
    assert tuple(y.shape) == (0, 5)
    y = ng.log_softmax(ng.zeros(3, 0), 1)
    assert tuple(y.shape) == (3, 0)
