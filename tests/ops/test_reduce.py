import numpy as np
import pytest

import numbagrad as ng
from optest import check_op, randn, torch
from reference import reduce as RR

DIMS = [None, 0, 1, -1, (0, 2)]


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean(dim, keepdim):
    x = randn(2, 3, 4, seed=1)
    ax = dim
    check_op(lambda t: ng.sum(t, dim, keepdim), lambda a: np.sum(a, axis=ax, keepdims=keepdim), [x],
             torch_fn=(lambda t: t.sum(dim if dim is not None else tuple(range(t.ndim)), keepdim)) if torch else None)
    check_op(lambda t: ng.mean(t, dim, keepdim), lambda a: np.mean(a, axis=ax, keepdims=keepdim), [x])


@pytest.mark.parametrize("dim", [None, 1, (0, 1)])
@pytest.mark.parametrize("correction", [0, 1])
def test_var_std(dim, correction):
    x = randn(3, 4, seed=2)
    check_op(lambda t: ng.var(t, dim, correction=correction), lambda a: np.var(a, axis=dim, ddof=correction), [x],
             torch_fn=(lambda t: torch.var(t, dim, correction=correction)) if torch else None)
    check_op(lambda t: ng.std(t, dim, correction=correction), lambda a: np.std(a, axis=dim, ddof=correction), [x])


def test_var_default_is_unbiased():
    x = ng.tensor([1.0, 2.0, 3.0, 4.0])
    assert abs(x.var().item() - np.var([1, 2, 3, 4], ddof=1)) < 1e-6


@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)])
def test_prod(dim):
    x = randn(3, 4, seed=3)
    check_op(lambda t: ng.prod(t, dim), lambda a: np.prod(a, axis=dim), [x])


def test_prod_gradient_with_a_zero():
    x = ng.tensor([2.0, 0.0, 3.0], requires_grad=True)
    ng.prod(x).backward()
    assert x.grad.tolist() == [0.0, 6.0, 0.0]


def test_max_min_full_and_ties():
    x = randn(3, 5, seed=4)
    check_op(lambda t: ng.max(t), np.max, [x], torch_fn=(lambda t: torch.max(t)) if torch else None)
    check_op(lambda t: ng.amin(t, 1), lambda a: np.min(a, axis=1), [x])
    t = ng.tensor([1.0, 3.0, 3.0], requires_grad=True)
    ng.max(t).backward()
    assert t.grad.tolist() == [0.0, 0.5, 0.5]  # ties share the gradient (torch.amax rule)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_dim_returns_values_and_indices(dim, keepdim):
    x = randn(4, 6, seed=5)
    v, i = ng.max(ng.tensor(x), dim, keepdim)
    np.testing.assert_allclose(v.numpy(), np.max(x, axis=dim, keepdims=keepdim).astype(np.float32))
    np.testing.assert_array_equal(i.numpy(), np.argmax(x, axis=dim, **({"keepdims": True} if keepdim else {})))
    check_op(lambda t: ng.max(t, dim, keepdim)[0], lambda a: np.max(a, axis=dim, keepdims=keepdim), [x],
             torch_fn=(lambda t: torch.max(t, dim, keepdim)[0]) if torch else None)
    check_op(lambda t: ng.min(t, dim, keepdim).values, lambda a: np.min(a, axis=dim, keepdims=keepdim), [x])


def test_argmax_argmin():
    x = randn(3, 7, seed=6)
    assert ng.argmax(ng.tensor(x)).item() == np.argmax(x)
    np.testing.assert_array_equal(ng.argmax(ng.tensor(x), 1).numpy(), np.argmax(x, 1))
    np.testing.assert_array_equal(ng.argmin(ng.tensor(x), 0, keepdim=True).numpy(), np.argmin(x, 0)[None])
    assert ng.argmax(ng.tensor(x), 1).dtype == ng.int64


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_logsumexp(dim):
    x = randn(4, 5, seed=7)

    check_op(lambda t: ng.logsumexp(t, dim), lambda a: RR.logsumexp(a, dim), [x],
             torch_fn=(lambda t: torch.logsumexp(t, dim if dim is not None else (0, 1))) if torch else None)


def test_logsumexp_is_stable():
    x = ng.tensor([[1e4, 1e4 - 1.0], [-1e4, -1e4]], requires_grad=True)
    y = ng.logsumexp(x, 1)
    assert np.isfinite(y.detach().numpy()).all()
    y.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.grad.numpy().sum(1), [1.0, 1.0], rtol=1e-6)


@pytest.mark.parametrize("p", [1, 2, float("inf"), 3])
def test_norm(p):
    x = randn(3, 4, seed=8, low=0.1)
    check_op(lambda t: ng.norm(t, p), lambda a: np.linalg.norm(a.reshape(-1), ord=p), [x])
    check_op(lambda t: ng.norm(t, p, dim=1), lambda a: np.linalg.norm(a, ord=p, axis=1), [x])


def test_integer_sum_is_int64_and_mean_rejects_ints():
    assert ng.arange(5).sum().item() == 10
    assert ng.tensor([1, 2], dtype=ng.int32).sum().dtype == ng.int64
    with pytest.raises(RuntimeError, match="mean.*floating"):
        ng.arange(5).mean()


def test_bad_dim_names_op():
    with pytest.raises(IndexError, match=r"sum: Dimension out of range \(expected to be in range of \[-2, 1\], but got 3\)"):
        ng.ones(2, 2).sum(3)


def test_cumsum_all_any():
    x = randn(3, 4, seed=9)
    check_op(lambda t: ng.cumsum(t, 1), lambda a: np.cumsum(a, 1), [x])
    t = ng.tensor([[True, False], [True, True]])
    assert ng.all(t, 1).tolist() == [False, True] and ng.any(t).item() is True
