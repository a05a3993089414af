import warnings

import numpy as np
import pytest

import numbagrad as ng
from optest import check_op, check_torch, parallel_and_serial, randn, torch
from reference import activations as R

F = torch.nn.functional if torch else None


def _tf(name, **fixed):
    """The torch oracle for an op (None without torch)."""
    if torch is None:
        return None
    fn = {"sigmoid": torch.sigmoid, "tanh": torch.tanh}.get(name) or getattr(F, name)
    return (lambda *a, **k: fn(*a, **fixed, **k)) if fixed else fn


# (name, kwargs, kinks to keep the inputs away from, scale of the inputs)
OPS = [
    ("relu", {}, [0.0], 2.0),
    ("relu6", {}, [0.0, 6.0], 4.0),
    ("leaky_relu", {}, [0.0], 2.0),
    ("leaky_relu", {"negative_slope": 0.2}, [0.0], 2.0),
    ("elu", {}, [0.0], 2.0),
    ("elu", {"alpha": 0.5}, [0.0], 2.0),
    ("selu", {}, [0.0], 2.0),
    ("celu", {"alpha": 2.0}, [0.0], 2.0),
    ("gelu", {}, [], 2.0),
    ("gelu", {"approximate": "tanh"}, [], 2.0),
    ("silu", {}, [], 3.0),
    ("sigmoid", {}, [], 3.0),
    ("tanh", {}, [], 2.0),
    ("softplus", {}, [], 3.0),
    ("softplus", {"beta": 2.0, "threshold": 1.0}, [0.5], 2.0),
    ("hardtanh", {}, [-1.0, 1.0], 2.0),
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}, [-0.5, 2.0], 2.0),
    ("hardsigmoid", {}, [-3.0, 3.0], 4.0),
    ("hardswish", {}, [-3.0, 3.0], 4.0),
    ("mish", {}, [], 3.0),
    ("logsigmoid", {}, [], 3.0),
    ("softsign", {}, [0.0], 2.0),
    ("tanhshrink", {}, [], 2.0),
    ("softshrink", {}, [-0.5, 0.5], 2.0),
    ("softshrink", {"lambd": 1.0}, [-1.0, 1.0], 2.0),
    ("hardshrink", {}, [-0.5, 0.5], 2.0),
]
IDS = [n + "".join(f"-{k}={v}" for k, v in kw.items()) for n, kw, _, _ in OPS]

SMOOTH = ["gelu", "silu", "sigmoid", "tanh", "softplus", "mish", "logsigmoid", "elu", "selu", "celu"]


def _input(shape, kinks=(), scale=2.0, seed=0, margin=0.05):
    x = randn(*shape, seed=seed) * scale
    for k in kinks:  # push values within `margin` of a kink to k +- margin
        near = np.abs(x - k) < margin
        x = np.where(near, k + np.where(x >= k, margin, -margin), x)
    return x


# the 2-d case of these is a row of tests/opdb.py (same arguments, inputs off the kinks, torch parity)
IN_OPDB = {"relu", "relu6", "leaky_relu-negative_slope=0.2", "elu", "selu", "celu-alpha=2.0", "gelu",
           "gelu-approximate=tanh", "silu", "sigmoid", "tanh", "softplus", "softplus-beta=2.0-threshold=1.0",
           "hardsigmoid", "hardswish", "mish", "logsigmoid", "softsign", "tanhshrink", "softshrink", "hardshrink"}
CASES = [pytest.param(*op, shape, id=f"{shape}-{i}") for op, i in zip(OPS, IDS)
         for shape in [(), (7,), (3, 5)] if shape != (3, 5) or i not in IN_OPDB]


@pytest.mark.parametrize("name,kwargs,kinks,scale,shape", CASES)
def test_activation(name, kwargs, kinks, scale, shape):
    x = _input(shape, kinks, scale, seed=len(shape) + 1)
    check_op(getattr(ng, name), getattr(R, name), [x], kwargs=kwargs, torch_fn=_tf(name))


def test_threshold_glu_prelu():
    x = _input((4, 6), [0.3], 2.0)
    check_op(lambda t: ng.threshold(t, 0.3, -2.0), lambda a: R.threshold(a, 0.3, -2.0), [x],
             torch_fn=(lambda t: F.threshold(t, 0.3, -2.0)) if torch else None)
    for dim in (0, 1, -1):
        check_op(lambda t: ng.glu(t, dim), lambda a: R.glu(a, dim), [x],
                 torch_fn=(lambda t: F.glu(t, dim)) if torch else None)
    w = np.array([0.1, -0.3, 0.25, 0.5])
    xi = _input((2, 4, 3), [0.0], 2.0)
    ref = lambda a, ww: np.where(a > 0, a, ww.reshape(1, -1, 1) * a)  # noqa: E731
    check_op(ng.prelu, ref, [xi, w], torch_fn=F.prelu if torch else None)
    check_op(ng.prelu, lambda a, ww: np.where(a > 0, a, ww * a), [xi, np.array([0.25])],
             torch_fn=F.prelu if torch else None)


def test_method_forms():
    x = ng.tensor([-1.0, 0.5, 2.0])
    for name in ["relu", "sigmoid", "tanh", "gelu", "silu", "elu", "softplus", "mish", "hardtanh"]:
        np.testing.assert_allclose(getattr(x, name)().numpy(), getattr(ng, name)(x).numpy())


def test_integer_and_half_inputs():
    xi = ng.tensor([-2, 0, 3])
    for name in ["relu", "sigmoid", "gelu", "elu", "softplus", "hardswish"]:
        y = getattr(ng, name)(xi)
        assert y.dtype == ng.float32, name
        np.testing.assert_allclose(y.numpy(), getattr(R, name)(np.array([-2.0, 0.0, 3.0])), rtol=1e-5, atol=1e-6)
    leaf = ng.tensor(np.array([-1.5, 0.25, 2.0], np.float32), requires_grad=True)
    xh = leaf.half()
    y = ng.silu(xh)  # computed in float32, returned as float16
    assert y.dtype == ng.float16
    np.testing.assert_allclose(y.detach().numpy().astype(np.float64), R.silu(np.array([-1.5, 0.25, 2.0])), rtol=2e-3)
    y.sum().backward()
    s = 1 / (1 + np.exp(-leaf.detach().numpy()))
    np.testing.assert_allclose(leaf.grad.numpy(), s * (1 + leaf.detach().numpy() * (1 - s)), rtol=2e-3)


@pytest.mark.parametrize("name,kwargs", [(n, kw) for n, kw, _, _ in OPS if n in SMOOTH + ["softsign", "hardtanh"]])
def test_extreme_inputs_are_finite(name, kwargs):
    # +-1e4 must not overflow anywhere: no inf/NaN in values or gradients, and the
    # values are the asymptotes.
    x64 = np.array([-1e4, -100.0, -30.0, -20.0, 0.0, 20.0, 30.0, 100.0, 1e4])
    for dt in (np.float32, np.float64):
        x = ng.tensor(x64.astype(dt), requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no overflow RuntimeWarning from NumPy either
            y = getattr(ng, name)(x, **kwargs)
            y.backward(ng.ones_like(y))
        assert np.all(np.isfinite(y.detach().numpy())), (name, dt, y.detach().numpy())
        assert np.all(np.isfinite(x.grad.numpy())), (name, dt, x.grad.numpy())
        if torch is not None:
            tx = torch.tensor(x64.astype(dt), requires_grad=True)
            ty = _tf(name)(tx, **kwargs)
            ty.backward(torch.ones_like(ty))
            tol = dict(rtol=1e-5, atol=1e-6) if dt == np.float32 else dict(rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), err_msg=f"{name} {dt}", **tol)
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), err_msg=f"{name} grad {dt}", **tol)


def test_sigmoid_tails_are_accurate():
    # exp(-|x|) formulation: tiny sigmoid values keep full relative precision.
    x = np.array([-80.0, -40.0, -20.0, 20.0, 40.0])
    for dt in (np.float32, np.float64):
        y = ng.sigmoid(ng.tensor(x.astype(dt))).numpy()
        np.testing.assert_allclose(y, 1 / (1 + np.exp(-x)), rtol=1e-6)
        ls = ng.logsigmoid(ng.tensor(x.astype(dt))).numpy()
        np.testing.assert_allclose(ls, -np.log1p(np.exp(-x)), rtol=1e-6)
        sp = ng.softplus(ng.tensor(-x.astype(dt))).numpy()
        np.testing.assert_allclose(sp, np.log1p(np.exp(-x)), rtol=1e-6)


KINKS = [
    ("relu", {}, [0.0]),
    ("relu6", {}, [0.0, 6.0]),
    ("leaky_relu", {"negative_slope": 0.1}, [0.0]),
    ("hardtanh", {}, [-1.0, 1.0]),
    ("hardtanh", {"min_val": 0.0, "max_val": 2.0}, [0.0, 2.0]),
    ("hardsigmoid", {}, [-3.0, 3.0]),
    ("hardswish", {}, [-3.0, 3.0]),
    ("elu", {"alpha": 0.5}, [0.0]),
    ("celu", {"alpha": 2.0}, [0.0]),
    ("selu", {}, [0.0]),
    ("softplus", {"beta": 2.0, "threshold": 4.0}, [2.0]),
    ("softsign", {}, [0.0]),
]


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name,kwargs,kinks", KINKS)
def test_kink_gradients_match_torch(name, kwargs, kinks):
    pts = np.array(sorted(set(kinks + [k + d for k in kinks for d in (-1e-3, 1e-3)])))
    # rtol 1e-7, not 1e-12: PyTorch's float64 hardsigmoid multiplies by a float32 1/6.
    check_torch(getattr(ng, name), _tf(name), [pts], kwargs=kwargs, rtol=1e-7, atol=0)


def test_relu_kink_convention():
    x = ng.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    ng.relu(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0]
    x = ng.tensor([-1.0, -0.5, 0.5, 1.0], requires_grad=True)
    ng.hardtanh(x, -1.0, 1.0).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 0.0]


def test_gelu_f32_erf_is_accurate():
    # float32 gelu uses a rational erf; compare with float64 math.erf on a fine grid.
    x = np.linspace(-6, 6, 20001)
    y = ng.gelu(ng.tensor(x.astype(np.float32))).numpy().astype(np.float64)
    ref = R.gelu(x.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(y, ref, rtol=2e-6, atol=2e-7)
    t = ng.tensor(x.astype(np.float32), requires_grad=True)
    ng.gelu(t).sum().backward()
    xd = x.astype(np.float32).astype(np.float64)
    dref = 0.5 * (1 + R._erf(xd / np.sqrt(2))) + xd * np.exp(-xd * xd / 2) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(t.grad.numpy(), dref, rtol=2e-6, atol=2e-7)


PAR = [(n, kw) for n, kw, _, _ in OPS if n not in ("tanhshrink", "softshrink", "hardshrink")]


@pytest.mark.parametrize("name,kwargs", PAR, ids=[IDS[i] for i, o in enumerate(OPS) if o[0] not in
                                                   ("tanhshrink", "softshrink", "hardshrink")])
def test_parallel_path_equals_serial(name, kwargs, monkeypatch):
    # Above config.PARALLEL_THRESHOLD the prange twins run; they must give the serial result.
    n = (1 << 17) + 3
    x64 = randn(n, seed=11) * 3
    g64 = randn(n, seed=12)
    fn = getattr(ng, name)
    (y_par, g_par), (y_ser, g_ser) = parallel_and_serial(lambda x: fn(x, **kwargs), x64, g64, monkeypatch)
    np.testing.assert_allclose(y_par, y_ser, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g_par, g_ser, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(y_par, getattr(R, name)(x64.astype(np.float32).astype(np.float64), **kwargs),
                               rtol=1e-4, atol=1e-5)


def test_inplace_forms():
    base = ng.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    h = base * 1.0
    out = ng.relu_(h)
    assert out is h
    np.testing.assert_array_equal(h.detach().numpy(), [0.0, 0.5, 2.0])
    h.sum().backward()
    assert base.grad.tolist() == [0.0, 1.0, 1.0]
    t = ng.tensor([-1.0, 3.0])
    r = ng.elu(t, inplace=True)
    assert r is t
    np.testing.assert_allclose(t.numpy(), R.elu(np.array([-1.0, 3.0])), rtol=1e-6)
    with pytest.raises(RuntimeError):
        ng.relu_(ng.tensor([1.0], requires_grad=True))  # leaf requiring grad


def test_argument_errors():
    x = ng.tensor([1.0])
    with pytest.raises(ValueError):
        ng.gelu(x, approximate="erf")
    with pytest.raises(ValueError):
        ng.hardtanh(x, 1.0, -1.0)
    with pytest.raises(RuntimeError):
        ng.glu(ng.ones(3))


def test_non_contiguous_and_broadcast_grad():
    # A strided input and a stride-0 gradient (from sum's backward) go through the flat kernels.
    a = randn(4, 6, seed=5)
    x = ng.tensor(a, requires_grad=True)
    y = ng.mish(x.T)
    y.sum().backward()
    d = np.tanh(np.log1p(np.exp(a)))
    ref = d + a * (1 - d * d) * (1 / (1 + np.exp(-a)))
    np.testing.assert_allclose(x.grad.numpy(), ref, rtol=1e-10)
