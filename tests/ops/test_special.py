"""``numbagrad.special`` (PyTorch's ``torch.special``) and digamma's gradient: every public
function against ``torch.special`` in float64 and float32, gradients against float64 central
differences (``optest.check_grad``) and against PyTorch's, the forward-only functions'
gradient behaviour as PyTorch's, the CUDA refusal of the host-only (SciPy) functions, and
the coverage of ``dir(torch.special)``."""
import inspect

import numpy as np
import pytest

import numbagrad as ng
import numbagrad.special as S
from optest import check_grad, randn

torch = pytest.importorskip("torch")
TS = torch.special

# Names of dir(torch.special) that are not functions of torch.special's own (each checked
# below to be a class, a module or a docstring-template dict, so a new function is never skipped).
SKIP = {
    "Tensor",            # the tensor class, re-exported by torch/special/__init__.py
    "torch",             # the torch module itself
    "common_args",       # docstring-template dicts of torch._torch_docs
    "multi_dim_common",
}


def _torch_functions():
    return sorted(n for n in dir(TS) if not n.startswith("_") and callable(getattr(TS, n))
                  and not inspect.isclass(getattr(TS, n)) and not inspect.ismodule(getattr(TS, n)))


def test_every_torch_special_function_is_here_or_skipped():
    names = _torch_functions()
    assert len(names) > 50
    missing = sorted(set(names) - set(S.__all__) - SKIP)
    assert not missing, f"torch.special functions missing from numbagrad.special: {missing}"
    for n in SKIP:  # the skips are not functions
        v = getattr(TS, n, None)
        assert v is None or inspect.isclass(v) or inspect.ismodule(v) or isinstance(v, dict), n
    assert set(S.__all__) <= set(names), sorted(set(S.__all__) - set(names))
    assert all(callable(getattr(S, n)) for n in S.__all__)


# ---- inputs ---------------------------------------------------------------------------------------------
def spread(seed):
    return randn(2, 5, seed=seed) * 2.0


def pos(seed, low=0.3):
    return np.abs(randn(2, 5, seed=seed)) * 2.0 + low


def unit01(seed):
    return 1.0 / (1.0 + np.exp(-randn(2, 5, seed=seed) * 1.5))


def unit(seed):
    return np.tanh(randn(2, 5, seed=seed)) * 0.9


# (name, input maker, float32 rtol): differentiable unary functions
UNARY = [
    ("expit", spread, 1e-6), ("exp2", spread, 1e-6), ("expm1", spread, 1e-6), ("log1p", pos, 1e-6),
    ("erf", spread, 1e-6), ("erfc", spread, 1e-5), ("erfinv", unit, 1e-5), ("erfcx", spread, 1e-5),
    ("gammaln", pos, 1e-5), ("digamma", pos, 1e-5), ("psi", pos, 1e-5), ("i0", spread, 1e-6),
    ("i0e", spread, 1e-6), ("i1", spread, 1e-6), ("i1e", spread, 1e-6), ("ndtr", spread, 1e-6),
    ("ndtri", unit01, 1e-5), ("log_ndtr", lambda s: spread(s) * 3, 1e-5), ("logit", unit01, 1e-5),
    ("entr", pos, 1e-5), ("sinc", spread, 1e-5),
]


@pytest.mark.parametrize("name,make,rtol32", UNARY, ids=[u[0] for u in UNARY])
def test_unary_matches_torch_special(name, make, rtol32):
    x = make(1)
    ours, theirs = getattr(S, name), getattr(TS, name)
    np.testing.assert_allclose(ours(ng.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-10, atol=1e-12)
    x32 = x.astype(np.float32)
    y32 = ours(ng.tensor(x32))
    assert y32.dtype == ng.float32
    np.testing.assert_allclose(y32.numpy(), theirs(torch.tensor(x32)).numpy(), rtol=rtol32, atol=1e-6)
    # gradients: central differences and PyTorch's
    check_grad(ours, [x])
    xt, xn = torch.tensor(x, requires_grad=True), ng.tensor(x, requires_grad=True)
    g = randn(*x.shape, seed=2)
    theirs(xt).backward(torch.tensor(g))
    ours(xn).backward(ng.tensor(g))
    np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_integer_and_half_inputs_give_torch_dtypes():
    for name in ("i0e", "ndtr", "entr", "sinc", "bessel_j0"):
        assert getattr(S, name)(ng.tensor([1, 2])).dtype == ng.float32, name
        assert str(getattr(TS, name)(torch.tensor([1, 2])).dtype) == "torch.float32", name
    h = np.array([0.5, 1.5], dtype=np.float16)
    for name in ("erfcx", "i1", "log_ndtr", "bessel_y0"):
        y = getattr(S, name)(ng.tensor(h))
        assert y.dtype == ng.float16, name
        np.testing.assert_allclose(y.numpy().astype(np.float64),
                                   getattr(TS, name)(torch.tensor(h).float()).numpy(), rtol=2e-3)


def test_edge_values_and_gradients_match_torch():
    cases = [("i1", [0.0, -0.0, 1e-300]), ("i1e", [0.0, 1e-300, -2.0]), ("i0e", [0.0, -3.0]),
             ("sinc", [0.0, 1.0, -2.0]), ("entr", [0.0, -1.0, np.nan, 1.0]), ("erfcx", [-30.0, 30.0, 0.0]),
             ("ndtri", [0.0, 1.0, 0.5]), ("log_ndtr", [-40.0, 0.0, 10.0])]
    for name, v in cases:
        x = np.array(v)
        xt, xn = torch.tensor(x, requires_grad=True), ng.tensor(x, requires_grad=True)
        yt, yn = getattr(TS, name)(xt), getattr(S, name)(xn)
        np.testing.assert_allclose(yn.detach().numpy(), yt.detach().numpy(), rtol=1e-12, err_msg=name)
        yt.backward(torch.ones_like(yt))
        yn.backward(ng.ones_like(yn))
        np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=1e-12, err_msg=name)


# ---- binary --------------------------------------------------------------------------------------------
BINARY = [("xlogy", pos(3), pos(4), (0, 1)), ("xlog1py", spread(3), pos(4), (0, 1)),
          ("zeta", pos(3) + 1.2, pos(4), (1,)), ("gammainc", pos(3), pos(4), (1,)),
          ("gammaincc", pos(3), pos(4), (1,))]


@pytest.mark.parametrize("name,a,b,diff", BINARY, ids=[b[0] for b in BINARY])
def test_binary_matches_torch_special(name, a, b, diff):
    ours, theirs = getattr(S, name), getattr(TS, name)
    np.testing.assert_allclose(ours(ng.tensor(a), ng.tensor(b)).numpy(), theirs(torch.tensor(a), torch.tensor(b)),
                               rtol=1e-10, atol=1e-12)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    np.testing.assert_allclose(ours(ng.tensor(a32), ng.tensor(b32)).numpy(),
                               theirs(torch.tensor(a32), torch.tensor(b32)).numpy(), rtol=2e-5, atol=1e-6)
    # Python numbers on either side (torch's gammainc/gammaincc refuse them: a TypeError), broadcasting
    for args in ((2.5, b), (a, 1.5)):
        try:
            expected = theirs(*[torch.tensor(v) if isinstance(v, np.ndarray) else v for v in args]).numpy()
        except TypeError:
            with pytest.raises(TypeError, match="must be Tensor, not float"):
                ours(*[ng.tensor(v) if isinstance(v, np.ndarray) else v for v in args])
        else:
            np.testing.assert_allclose(ours(*[ng.tensor(v) if isinstance(v, np.ndarray) else v for v in args]).numpy(),
                                       expected, rtol=1e-10)
    np.testing.assert_allclose(ours(ng.tensor(a[:, :1]), ng.tensor(b)).numpy(),
                               theirs(torch.tensor(a[:, :1]), torch.tensor(b)).numpy(), rtol=1e-10)
    # gradients of the differentiable operands: central differences and PyTorch's
    const = [i for i in (0, 1) if i not in diff]

    def f(*ts):
        args = list(ts)
        for i in const:
            args.insert(i, ng.tensor((a, b)[i]))
        return ours(*args)

    check_grad(f, [(a, b)[i] for i in diff])
    tn = [ng.tensor(v, requires_grad=i in diff) for i, v in enumerate((a, b))]
    tt = [torch.tensor(v, requires_grad=i in diff) for i, v in enumerate((a, b))]
    g = randn(*a.shape, seed=5)
    ours(*tn).backward(ng.tensor(g))
    theirs(*tt).backward(torch.tensor(g))
    for i in diff:
        np.testing.assert_allclose(tn[i].grad.numpy(), tt[i].grad.numpy(), rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("name", ["zeta", "gammainc", "gammaincc"])
def test_no_gradient_for_input_as_torch(name):
    """torch records the op, then its backward raises NotImplementedError when ``input`` needs a gradient."""
    a, b = pos(6) + 1.2, pos(7)
    errors = []
    for lib, fn in ((torch, getattr(TS, name)), (ng, getattr(S, name))):
        x, y = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        out = fn(x, y)
        assert out.requires_grad
        with pytest.raises(NotImplementedError, match="the derivative for") as e:
            out.sum().backward()
        errors.append(str(e.value))
    assert "is not implemented" in errors[1] and "is not implemented" in errors[0]


def test_xlog1py_zero_and_nan_as_torch():
    a, b = np.array([0.0, 0.0, 0.0, 2.0]), np.array([np.nan, -1.0, 3.0, -1.0])
    xt, yt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    xn, yn = ng.tensor(a, requires_grad=True), ng.tensor(b, requires_grad=True)
    ot, on = TS.xlog1py(xt, yt), S.xlog1py(xn, yn)
    np.testing.assert_array_equal(on.detach().numpy(), ot.detach().numpy())
    ot.sum().backward()
    on.sum().backward()
    np.testing.assert_array_equal(xn.grad.numpy(), xt.grad.numpy())
    np.testing.assert_array_equal(yn.grad.numpy(), yt.grad.numpy())


def test_zeta_and_gammainc_edges_as_torch():
    s, q = np.array([0.5, 1.0, 2.0, 2.0, 2.0, 3.0]), np.array([1.0, 1.0, 0.0, -1.0, -1.5, -1.5])
    np.testing.assert_allclose(S.zeta(ng.tensor(s), ng.tensor(q)).numpy(), TS.zeta(torch.tensor(s), torch.tensor(q)),
                               rtol=1e-12)
    a, x = np.array([0.5, 1.0, 3.0, 1.0]), np.array([0.0, np.inf, 2.0, -1.0])
    for name in ("gammainc", "gammaincc"):
        np.testing.assert_allclose(getattr(S, name)(ng.tensor(a), ng.tensor(x)).numpy(),
                                   getattr(TS, name)(torch.tensor(a), torch.tensor(x)), rtol=1e-12)


# ---- the aliases with more arguments ----------------------------------------------------------------------
def test_polygamma_and_multigammaln_match_torch():
    x = pos(8, low=1.1)
    for n in range(4):
        xn, xt = ng.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        yn, yt = S.polygamma(n, xn), TS.polygamma(n, xt)
        np.testing.assert_allclose(yn.detach().numpy(), yt.detach().numpy(), rtol=1e-9)  # torch's trigamma: ~1e-10
        yn.sum().backward()
        yt.sum().backward()
        np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=1e-9)
        check_grad(lambda t, n=n: S.polygamma(n, t), [x])
    for p in (1, 2, 4):
        xn, xt = ng.tensor(x + 1.5, requires_grad=True), torch.tensor(x + 1.5, requires_grad=True)
        yn, yt = S.multigammaln(xn, p), TS.multigammaln(xt, p)
        np.testing.assert_allclose(yn.detach().numpy(), yt.detach().numpy(), rtol=1e-12)
        yn.sum().backward()
        yt.sum().backward()
        np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=1e-10)
        check_grad(lambda t, p=p: S.multigammaln(t, p), [x + 1.5])


def test_round_softmax_logsumexp_match_torch():
    x = randn(3, 4, seed=9) * 300
    for d in (0, 1, 2, -1, -2):
        np.testing.assert_array_equal(S.round(ng.tensor(x), decimals=d).numpy(),
                                      TS.round(torch.tensor(x), decimals=d).numpy())
    xn = ng.tensor(x, requires_grad=True)
    S.round(xn, decimals=1).sum().backward()
    assert not xn.grad.numpy().any()
    y = randn(3, 4, seed=10)
    for name, kw in (("softmax", dict(dim=1)), ("log_softmax", dict(dim=0)), ("logsumexp", dict(dim=1)),
                     ("logsumexp", dict(dim=0, keepdim=True))):
        np.testing.assert_allclose(getattr(S, name)(ng.tensor(y), **kw).numpy(),
                                   getattr(TS, name)(torch.tensor(y), **kw).numpy(), rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(S.logit(ng.tensor(unit01(3)), eps=0.2).numpy(),
                               TS.logit(torch.tensor(unit01(3)), eps=0.2).numpy(), rtol=1e-12)


# ---- forward-only functions ------------------------------------------------------------------------------------
BESSEL = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
          "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
          "airy_ai", "spherical_bessel_j0"]
POLY = [n for n in S.FORWARD_ONLY if "polynomial" in n]


@pytest.mark.parametrize("name", BESSEL)
def test_bessel_matches_torch(name):
    x = np.concatenate([spread(11).ravel() * 3, [0.0, -0.0, 1e-3, 25.0, -4.5]])
    # torch's J0, J1, Y0, Y1 and Ai beyond |x| ~ 5 are good to ~1e-8 absolute (SciPy's Cephes: ~1e-16)
    np.testing.assert_allclose(getattr(S, name)(ng.tensor(x)).numpy(), getattr(TS, name)(torch.tensor(x)).numpy(),
                               rtol=1e-7, atol=3e-8, err_msg=name)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(getattr(S, name)(ng.tensor(x32)).numpy(),
                               getattr(TS, name)(torch.tensor(x32)).numpy(), rtol=2e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("name", POLY)
def test_polynomial_matches_torch(name):
    x = np.array([-1.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.0, 0.7])
    n = np.array([3, -1, 0, 1, 2, 3, 9, 12])
    ours, theirs = getattr(S, name), getattr(TS, name)
    np.testing.assert_allclose(ours(ng.tensor(x), ng.tensor(n)).numpy(), theirs(torch.tensor(x), torch.tensor(n)),
                               rtol=1e-9, atol=1e-9)
    for k in (0, 2, 2.7, 5, -2):  # a Python number n, truncated
        np.testing.assert_allclose(ours(ng.tensor(x), k).numpy(), theirs(torch.tensor(x), k), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(ours(0.5, ng.tensor(n)).numpy(), theirs(0.5, torch.tensor(n)), rtol=1e-6, atol=1e-6)
    x32 = x.astype(np.float32)
    y32 = ours(ng.tensor(x32), ng.tensor(n))
    assert str(y32.dtype) == "float32"
    np.testing.assert_allclose(y32.numpy(), theirs(torch.tensor(x32), torch.tensor(n)).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours(ng.tensor(x[:, None]), ng.tensor(n[:4])).numpy(),
                               theirs(torch.tensor(x[:, None]), torch.tensor(n[:4])), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", sorted(S.FORWARD_ONLY))
def test_forward_only_gradient_behaviour_as_torch(name):
    """torch: the result does not require grad, so backward raises a RuntimeError. Same here."""
    x = np.array([0.3, 0.7])
    extra = (2,) if "polynomial" in name else ()
    outs = []
    for lib, fn in ((torch, getattr(TS, name)), (ng, getattr(S, name))):
        t = lib.tensor(x, requires_grad=True)
        y = fn(t, *extra)
        assert not y.requires_grad, lib.__name__
        with pytest.raises(RuntimeError):
            y.sum().backward()
        outs.append(y.detach().numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-9)


# ---- digamma's gradient (trigamma) ------------------------------------------------------------------------------
def test_digamma_gradient_matches_torch_and_finite_differences():
    x = np.concatenate([pos(12).ravel(), [-2.3, -1.6, -0.4, -7.75, 0.3, 35.0]])  # near negative non-integers too
    check_grad(ng.digamma, [x])
    check_grad(S.psi, [x[:6]])
    xn, xt = ng.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ng.digamma(xn).sum().backward()
    torch.digamma(xt).sum().backward()
    np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=1e-9)  # torch's trigamma: ~1e-10
    x32 = ng.tensor(x.astype(np.float32), requires_grad=True)
    ng.digamma(x32).sum().backward()
    assert x32.grad.dtype == ng.float32
    np.testing.assert_allclose(x32.grad.numpy(), xt.grad.numpy(), rtol=1e-5)


def test_digamma_poles_as_torch():
    x = np.array([0.0, -0.0, -1.0, -2.0, -3.5])
    np.testing.assert_allclose(ng.digamma(ng.tensor(x)).numpy(), torch.digamma(torch.tensor(x)).numpy(), rtol=1e-12)


# ---- CUDA: the host-only functions refuse a device tensor by name ---------------------------------------------
HOST_ONLY = (["erfcx", "i0e", "i1", "i1e", "ndtri", "log_ndtr", "i0", "zeta", "gammainc", "gammaincc"]
             + [n for n in BESSEL if n != "spherical_bessel_j0"] + POLY)


@pytest.fixture
def fake_device_tensor():
    """A tensor on a stand-in device backend (no GPU needed): host-only ops must refuse it by name."""
    from numbagrad.backend.dispatch import _BY_ARRAY_TYPE
    fake = type("FakeDeviceArray", (), {"shape": (2,), "dtype": np.dtype(np.float32), "ndim": 1, "size": 2,
                                        "strides": (4,)})
    _BY_ARRAY_TYPE[fake] = type("FakeBackend", (), {"name": "fake"})()
    try:
        yield ng.Tensor._from_array(fake())
    finally:
        del _BY_ARRAY_TYPE[fake]


@pytest.mark.parametrize("name", HOST_ONLY)
def test_host_only_functions_refuse_a_device_tensor_by_name(name, fake_device_tensor):
    fn = getattr(S, name)
    args = (fake_device_tensor, fake_device_tensor) if name in ("zeta", "gammainc", "gammaincc") else \
        (fake_device_tensor, 2) if "polynomial" in name else (fake_device_tensor,)
    with pytest.raises(NotImplementedError, match=rf"^{name}: .*CPU only.*shape \(2,\) on fake"):
        fn(*args)


def test_polygamma_refuses_a_device_tensor_from_n_2(fake_device_tensor):
    with pytest.raises(NotImplementedError, match=r"polygamma: n >= 2 runs on the CPU only.*on fake"):
        ng.polygamma(2, fake_device_tensor)


def test_tensor_methods_as_torch():
    """``x.polygamma(n)`` takes ``n`` and uses ``self`` as the input; the others take ``self`` first."""
    x = pos(13, low=1.2)
    calls = [lambda t: t.polygamma(2), lambda t: t.polygamma(0), lambda t: t.mvlgamma(2), lambda t: t.mvlgamma(p=3),
             lambda t: t.i0(), lambda t: t.sinc(), lambda t: t.clone().polygamma_(1), lambda t: t.clone().mvlgamma_(2),
             lambda t: t.clone().i0_(), lambda t: t.clone().sinc_()]
    for call in calls:
        np.testing.assert_allclose(call(ng.tensor(x)).numpy(), call(torch.tensor(x)).numpy(), rtol=1e-9)
    assert S.polygamma is ng.polygamma and ng.Tensor.polygamma.__name__ == "polygamma"
    t = ng.tensor(x)
    assert t.polygamma_(3) is t
