"""nn.init: statistics, gains, fans, seeding, in-place semantics (vs torch.nn.init)."""
import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.nn import init

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("nl,param", [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                                      ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2),
                                      ("leaky_relu", math.sqrt(5)), ("selu", None)])
def test_calculate_gain_matches_torch(nl, param):
    assert init.calculate_gain(nl, param) == pytest.approx(torch.nn.init.calculate_gain(nl, param))


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("bogus")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", "x")


@pytest.mark.parametrize("shape", [(3, 5), (4, 3, 2, 2), (6, 2, 7)])
def test_fans_match_torch(shape):
    assert init._calculate_fan_in_and_fan_out(ng.empty(*shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(ng.empty(3))


def _p(*shape):
    return nn.Parameter(ng.zeros(*shape))


def test_inplace_and_returns_tensor():
    p = _p(50, 40)
    arr = p.array
    v = p._version_value
    assert init.uniform_(p, -1, 1) is p
    assert p.array is arr and p._version_value == v + 1  # written in place
    assert p.requires_grad


def test_distributions():
    p = _p(300, 400)
    init.uniform_(p, -2.0, 3.0)
    a = p.detach().numpy()
    assert a.min() >= -2.0 and a.max() <= 3.0 and abs(a.mean() - 0.5) < 0.02
    init.normal_(p, 1.0, 2.0)
    a = p.detach().numpy()
    assert abs(a.mean() - 1.0) < 0.02 and abs(a.std() - 2.0) < 0.02
    init.xavier_uniform_(p, gain=2.0)
    bound = 2.0 * math.sqrt(6.0 / 700)
    a = p.detach().numpy()
    assert np.abs(a).max() <= bound and abs(a.std() - bound / math.sqrt(3)) < 0.02 * bound
    init.xavier_normal_(p)
    assert abs(p.detach().numpy().std() - math.sqrt(2.0 / 700)) < 0.02 * math.sqrt(2.0 / 700)
    init.kaiming_uniform_(p, a=0, mode="fan_out", nonlinearity="relu")
    bound = math.sqrt(2.0) * math.sqrt(3.0 / 300)
    a = p.detach().numpy()
    assert np.abs(a).max() <= bound and np.abs(a).max() > 0.99 * bound
    init.kaiming_normal_(p, nonlinearity="relu")
    assert abs(p.detach().numpy().std() - math.sqrt(2.0 / 400)) < 0.02 * math.sqrt(2.0 / 400)
    init.trunc_normal_(p, std=1.0, a=-1.5, b=1.5)
    a = p.detach().numpy()
    assert a.min() >= -1.5 and a.max() <= 1.5 and abs(a.mean()) < 0.02
    with pytest.raises(ValueError, match="Mode"):
        init.kaiming_uniform_(p, mode="fan_middle")


def test_constants_eye_dirac():
    p = _p(3, 4)
    init.constant_(p, 2.5)
    assert (p.detach().numpy() == 2.5).all()
    init.ones_(p)
    assert (p.detach().numpy() == 1).all()
    init.zeros_(p)
    assert not p.detach().numpy().any()
    init.eye_(p)
    np.testing.assert_array_equal(p.detach().numpy(), np.eye(3, 4))
    w = _p(4, 2, 3, 3)
    init.dirac_(w, groups=2)
    tw = torch.zeros(4, 2, 3, 3)
    torch.nn.init.dirac_(tw, groups=2)
    np.testing.assert_array_equal(w.detach().numpy(), tw.numpy())


@pytest.mark.parametrize("shape", [(5, 8), (8, 5), (6, 2, 3)])
def test_orthogonal(shape):
    p = _p(*shape)
    init.orthogonal_(p, gain=2.0)
    m = p.detach().numpy().reshape(shape[0], -1).astype(np.float64)
    r, c = m.shape
    gram = m @ m.T if r <= c else m.T @ m
    np.testing.assert_allclose(gram, 4.0 * np.eye(min(r, c)), atol=1e-5)


def test_seeded_and_generator():
    ng.manual_seed(123)
    a = init.normal_(_p(10)).detach().numpy().copy()
    ng.manual_seed(123)
    b = init.normal_(_p(10)).detach().numpy().copy()
    np.testing.assert_array_equal(a, b)
    g1 = ng.Generator().manual_seed(7)
    g2 = ng.Generator().manual_seed(7)
    np.testing.assert_array_equal(init.uniform_(_p(10), generator=g1).detach().numpy(),
                                  init.uniform_(_p(10), generator=g2).detach().numpy())


def test_sparse():
    p = _p(10, 6)
    init.sparse_(p, 0.3)
    a = p.detach().numpy()
    assert ((a == 0).sum(0) >= 3).all()
