"""Pointwise math of ``numbagrad/ops/pointwise.py``: forward against NumPy/SciPy in
float32 and float64 (contiguous and strided), gradients against float64 central
differences, and both against PyTorch when it is installed."""
import numpy as np
import pytest
from scipy import special as sp

import numbagrad as ng
from optest import check_op, randn, torch

T = (lambda name: getattr(torch, name)) if torch else (lambda name: None)


def F64(v):
    return ng.tensor(np.array(v, dtype=np.float64))


def unit(*shape, seed=0):
    """Inside (-0.9, 0.9): the domain of asin, acos, atanh, erfinv."""
    return np.tanh(randn(*shape, seed=seed)) * 0.9


def pos(*shape, seed=0, low=0.2):
    return np.abs(randn(*shape, seed=seed)) + low


# acos, atan, cosh, acosh, erfinv, deg2rad, rad2deg, logit, positive: rows of tests/opdb.py
UNARY = [
    ("tan", np.tan, unit), ("asin", np.arcsin, unit), ("sinh", np.sinh, randn), ("asinh", np.arcsinh, randn),
    ("atanh", np.arctanh, unit), ("arcsin", np.arcsin, unit), ("arctan", np.arctan, randn), ("erf", sp.erf, randn),
    ("erfc", sp.erfc, randn), ("lgamma", sp.gammaln, pos), ("sgn", np.sign, randn), ("fix", np.trunc, randn),
]


@pytest.mark.parametrize("name,ref,gen", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, ref, gen):
    fn = getattr(ng, name)
    grad = name not in ("sgn", "fix")
    check_op(fn, ref, [gen(3, 4, seed=1)], torch_fn=T(name), grad=grad,
             tol={np.float32: dict(rtol=2e-6, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)})


# logaddexp2, xlogy, float_power, multiply, subtract, divide: rows of tests/opdb.py
BINARY = [
    ("atan2", np.arctan2, randn), ("arctan2", np.arctan2, randn), ("hypot", np.hypot, randn),
    ("fmod", np.fmod, lambda *s, seed: pos(*s, seed=seed, low=0.5)),
    ("copysign", np.copysign, randn), ("logaddexp", np.logaddexp, randn),
]


@pytest.mark.parametrize("name,ref,gen", BINARY, ids=[b[0] for b in BINARY])
def test_binary_broadcasting(name, ref, gen):
    a = randn(3, 4, seed=2) * 3 if name == "fmod" else gen(3, 4, seed=2)
    b = gen(4, seed=3)
    fn = getattr(ng, name)
    check_op(fn, ref, [a, b], torch_fn=T(name),
             tol={np.float32: dict(rtol=2e-6, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-13)})


def test_fmod_takes_the_dividends_sign_and_remainder_the_divisors():
    a = np.array([-7.5, -3.0, 3.0, 7.5])
    np.testing.assert_array_equal(ng.fmod(ng.tensor(a), 2.0).numpy(), np.fmod(a, 2.0))
    np.testing.assert_array_equal(ng.remainder(ng.tensor(a), 2.0).numpy(), np.remainder(a, 2.0))
    i = np.array([-7, -3, 3, 7])
    r = ng.fmod(ng.tensor(i), 2)
    assert r.dtype == np.int64
    np.testing.assert_array_equal(r.numpy(), np.fmod(i, 2))
    with pytest.raises(ZeroDivisionError, match="fmod"):
        ng.fmod(ng.tensor(i), 0)


def test_addcmul_addcdiv_lerp():
    a, b, c = randn(3, 4, seed=4), randn(3, 4, seed=5), randn(4, seed=6, low=0.5)
    tc = torch is not None
    check_op(lambda x, y, z: ng.addcmul(x, y, z, value=-0.5), lambda x, y, z: x - 0.5 * y * z, [a, b, c],
             torch_fn=tc and (lambda x, y, z: torch.addcmul(x, y, z, value=-0.5)) or None)
    check_op(lambda x, y, z: ng.addcdiv(x, y, z, value=2.0), lambda x, y, z: x + 2.0 * y / z, [a, b, c],
             torch_fn=tc and (lambda x, y, z: torch.addcdiv(x, y, z, value=2.0)) or None)
    check_op(lambda x, y: ng.lerp(x, y, 0.3), lambda x, y: x + 0.3 * (y - x), [a, b],
             torch_fn=tc and (lambda x, y: torch.lerp(x, y, 0.3)) or None)


def test_logaddexp_is_stable_and_exact_at_ties():
    a = F64([1000.0, -1000.0, 0.0, -np.inf]).requires_grad_(True)
    b = F64([1000.0, -1000.0, 0.0, -np.inf]).requires_grad_(True)
    y = ng.logaddexp(a, b)
    np.testing.assert_allclose(y.detach().numpy()[:3], np.array([1000, -1000, 0]) + np.log(2), rtol=1e-15)
    assert y.detach().numpy()[3] == -np.inf
    y[:3].sum().backward()
    np.testing.assert_allclose(a.grad.numpy()[:3], 0.5, rtol=1e-13)


def test_xlogy_is_zero_where_x_is_zero():
    x = F64([0.0, 0.0, 2.0])
    y = F64([0.0, np.nan, 3.0])
    np.testing.assert_array_equal(ng.xlogy(x, y).numpy(), [0.0, 0.0, 2.0 * np.log(3.0)])


def test_nan_to_num_and_its_gradient():
    x = F64([np.nan, np.inf, -np.inf, 1.5]).requires_grad_(True)
    y = ng.nan_to_num(x, nan=0.5, posinf=9.0)
    np.testing.assert_array_equal(y.detach().numpy(), [0.5, 9.0, np.finfo(np.float64).min, 1.5])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 0, 1])
    if torch is not None:
        tx = torch.tensor([np.nan, np.inf, -np.inf, 1.5], dtype=torch.float64, requires_grad=True)
        torch.nan_to_num(tx, nan=0.5, posinf=9.0).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_heaviside_and_signbit():
    x = np.array([-2.0, -0.0, 0.0, 3.0])
    np.testing.assert_array_equal(ng.heaviside(ng.tensor(x), ng.tensor(0.5)).numpy(), np.heaviside(x, 0.5))
    np.testing.assert_array_equal(ng.signbit(ng.tensor(x)).numpy(), np.signbit(x))


INPLACE = ["tan", "asin", "atan", "sinh", "erf", "exp", "log1p", "abs", "neg", "sqrt", "sin", "cos",
           "floor", "trunc", "frac", "square", "reciprocal", "sigmoid", "deg2rad"]


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_method_writes_the_out_of_place_result(name):
    x = unit(3, 4, seed=7) + 1.05  # in (0.15, 1.95): every op's domain
    if name in ("asin",):
        x = unit(3, 4, seed=7)
    t = ng.tensor(x.astype(np.float32))
    expected = getattr(ng, name)(t).numpy().copy()
    storage = t.array
    v = t._version.value
    r = getattr(t, name + "_")()
    assert r is t and t.array is storage and t._version.value == v + 1
    np.testing.assert_array_equal(t.numpy(), expected)


def test_inplace_comparison_and_binary_methods():
    t = F64([1.0, 2.0, 3.0])
    t.lt_(2.5)
    np.testing.assert_array_equal(t.numpy(), [1.0, 1.0, 0.0])
    assert t.dtype == np.float64
    u = F64([1.0, -2.0])
    u.atan2_(F64([1.0, 1.0]))
    np.testing.assert_allclose(u.numpy(), np.arctan2([1.0, -2.0], 1.0), rtol=1e-15)
    w = F64([1.0, 2.0])
    w.addcmul_(F64([2.0, 2.0]), F64([3.0, 0.5]), value=0.5)
    np.testing.assert_array_equal(w.numpy(), [4.0, 2.5])
    z = F64([0.0, 1.0])
    z.lerp_(F64([2.0, 3.0]), 0.5)
    np.testing.assert_array_equal(z.numpy(), [1.0, 2.0])


def test_inplace_in_a_graph_matches_out_of_place():
    x = ng.tensor(randn(5, seed=8), requires_grad=True)
    y = x * 1.0
    y.tan_()
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 + np.tan(x.detach().numpy()) ** 2, rtol=1e-12)


def test_erfinv_and_digamma_refuse_a_cuda_tensor_by_name():
    from numbagrad.ops import pointwise
    from numbagrad.backend.dispatch import _BY_ARRAY_TYPE
    fake = type("FakeDeviceArray", (), {"shape": (2,)})
    _BY_ARRAY_TYPE[fake] = type("FakeBackend", (), {"name": "fake"})()
    try:
        with pytest.raises(NotImplementedError, match=r"erfinv: runs on the CPU only.*shape \(2,\) on fake"):
            pointwise._host_ufunc(sp.erfinv, fake(), "erfinv")
    finally:
        del _BY_ARRAY_TYPE[fake]


def test_digamma_matches_scipy():
    x = pos(6, seed=9)
    np.testing.assert_allclose(ng.digamma(ng.tensor(x)).numpy(), sp.psi(x), rtol=1e-12, atol=1e-12)
    y = np.array([-2.5, -0.3, 0.25, 3.0, 40.0])  # the reflection branch and the large-argument series
    np.testing.assert_allclose(ng.digamma(ng.tensor(y)).numpy(), sp.psi(y), rtol=1e-12, atol=1e-12)
    poles = np.array([0.0, -0.0, -1.0, -4.0])
    np.testing.assert_array_equal(ng.digamma(ng.tensor(poles)).numpy(), sp.psi(poles))


def test_trigamma_matches_scipy():
    """digamma's gradient: the ufunc-only trigamma series against SciPy's polygamma(1, x)."""
    from numbagrad.ops.pointwise import _trigamma
    x = np.concatenate([np.linspace(-20.3, 30.7, 400), np.logspace(-6, 8, 60), -np.logspace(-6, 3, 60) + 0.37])
    x = x[np.abs(x - np.round(x)) > 1e-3]  # away from the poles
    np.testing.assert_allclose(_trigamma(x), sp.polygamma(1, x), rtol=1e-12)
    np.testing.assert_allclose(_trigamma(x.astype(np.float32)), sp.polygamma(1, x.astype(np.float32)), rtol=1e-5)
    assert _trigamma(x.astype(np.float32)).dtype == np.float32
    assert np.all(np.isinf(_trigamma(np.array([0.0, -1.0, -7.0]))))


def test_digamma_gradient_is_trigamma():
    x = np.array([0.3, 1.7, 12.5, -0.4, -2.3, -5.75])  # both branches: reflection below 1/2
    check_op(ng.digamma, sp.psi, [x], torch_fn=T("digamma"), noncontig=False, dtypes=(np.float64,))
    t = ng.tensor(x, requires_grad=True)
    ng.digamma(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), sp.polygamma(1, x), rtol=1e-12)
