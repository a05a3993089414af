"""``numbagrad.ops.fused.linear_act``: equal to the composed ``linear`` + activation ops
(every activation, float32/float64, with and without bias, 2-D and 3-D input), to float64
finite differences, to PyTorch, and the CPU kernels' chunked bias-gradient sums."""
import warnings

import numpy as np
import pytest

import numbagrad as ng
from numbagrad.kernels.cpu import fused as K
from numbagrad.nn.linear import Linear
from numbagrad.ops.fused import ACTIVATIONS, _composed, _parts, linear_act
from optest import check_grad, randn

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover
    torch = None

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def _run(fn, x, w, b, act, g):
    xt, wt = ng.tensor(x, requires_grad=True), ng.tensor(w, requires_grad=True)
    bt = None if b is None else ng.tensor(b, requires_grad=True)
    y = fn(xt, wt, bt, act)
    y.backward(ng.tensor(g))
    grads = [xt.grad.numpy(), wt.grad.numpy()] + ([] if b is None else [bt.grad.numpy()])
    return y.detach().numpy(), grads


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", ACTIVATIONS, ids=str)
def test_equals_composed(act, bias, dtype):
    x = (randn(2, 3, 5, seed=1) * 2).astype(dtype)   # 3-D input: batch dims folded into rows
    w = randn(4, 5, seed=2).astype(dtype)
    b = randn(4, seed=3).astype(dtype) if bias else None
    g = randn(2, 3, 4, seed=4).astype(dtype)
    y, grads = _run(linear_act, x, w, b, act, g)
    y_ref, grads_ref = _run(_composed, x, w, b, act, g)
    assert y.dtype == dtype and y.shape == (2, 3, 4)
    np.testing.assert_allclose(y, y_ref, **TOL[dtype])
    for a, r in zip(grads, grads_ref):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, r, **TOL[dtype])


def _np_act(act, z):
    from scipy.special import erf
    if act is None:
        return z
    return {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
            "silu": lambda v: v / (1 + np.exp(-v)), "gelu": lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))),
            "gelu_tanh": lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3))),
            }[act](z)


@pytest.mark.parametrize("act", ACTIVATIONS, ids=str)
def test_forward_numpy_and_finite_differences(act):
    x = randn(3, 4, seed=5, low=0.05)
    w = randn(2, 4, seed=6)
    b = randn(2, seed=7)
    y = linear_act(ng.tensor(x), ng.tensor(w), ng.tensor(b), act)
    np.testing.assert_allclose(y.numpy(), _np_act(act, x @ w.T + b), rtol=1e-12, atol=1e-14)
    # relu's kink: keep the pre-activations away from 0 for the finite differences
    z = x @ w.T + b
    assert np.abs(z).min() > 1e-4
    check_grad(lambda x, w, b: linear_act(x, w, b, act), [x, w, b])


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("act", ACTIVATIONS, ids=str)
def test_matches_torch(act):
    tact = {None: lambda v: v, "relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
            "silu": TF.silu,
            "gelu": TF.gelu, "gelu_tanh": lambda v: TF.gelu(v, approximate="tanh")}[act]
    x, w, b = randn(5, 6, seed=8), randn(3, 6, seed=9), randn(3, seed=10)
    g = randn(5, 3, seed=11)
    y, grads = _run(linear_act, x, w, b, act, g)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = tact(TF.linear(tx, tw, tb))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    for a, t in zip(grads, (tx, tw, tb)):
        np.testing.assert_allclose(a, t.grad.numpy(), rtol=1e-11, atol=1e-13)


def test_many_rows_use_several_chunks_and_the_parallel_twin():
    # 4096 x 160 = 655,360 elements: above PARALLEL_THRESHOLD, and P = 64 row chunks
    x = randn(4096, 8, seed=12).astype(np.float32)
    w = randn(160, 8, seed=13).astype(np.float32)
    b = randn(160, seed=14).astype(np.float32)
    g = randn(4096, 160, seed=15).astype(np.float32)
    assert _parts(4096) == 64
    for act in ("relu", "silu"):
        y, grads = _run(linear_act, x, w, b, act, g)
        y_ref, grads_ref = _run(_composed, x, w, b, act, g)
        np.testing.assert_allclose(y, y_ref, rtol=2e-5, atol=2e-6)
        for a, r in zip(grads, grads_ref):
            np.testing.assert_allclose(a, r, rtol=1e-4, atol=2e-3)


@pytest.mark.parametrize("act", ["relu", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", None], ids=str)
def test_backward_kernel_chunked_partial_sums(act):
    # 7 rows in 3 chunks (3, 3, 1 rows): the partials add up to the column sums of gz
    rng = np.random.default_rng(0)
    g = rng.standard_normal((7, 5))
    s = rng.standard_normal((7, 5))
    saved = (s,)
    if act in ("tanh", "sigmoid"):
        saved = (np.tanh(s) if act == "tanh" else 1 / (1 + np.exp(-s)),)
    elif act == "silu":                      # (sigmoid(z), silu(z))
        saved = (1 / (1 + np.exp(-s)), s / (1 + np.exp(-s)))
    part = np.zeros((3, 5))
    if act is None:
        K._bias_bwd_cpu(g, part)
        gz = g
    else:
        gz = np.empty_like(g)
        getattr(K, f"_bias_{act}_bwd_cpu")(g, *saved, gz, part)
    if act == "silu":                        # d/dz z sigmoid(z) = s (1 + z (1 - s))
        sg = saved[0]
        np.testing.assert_allclose(gz, g * sg * (1 + s * (1 - sg)), rtol=1e-12)
    np.testing.assert_allclose(part[0], gz[:3].sum(0), rtol=1e-13)
    np.testing.assert_allclose(part[1], gz[3:6].sum(0), rtol=1e-13)
    np.testing.assert_allclose(part[2], gz[6], rtol=1e-13)


@pytest.mark.parametrize("act", ["sigmoid", "silu", "tanh", "gelu", "gelu_tanh"])
def test_saturated_inputs_stay_finite(act):
    x = np.array([[1.0], [-1.0]], np.float32)
    w = np.array([[200.0]], np.float32)
    xt, wt = ng.tensor(x, requires_grad=True), ng.tensor(w, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = linear_act(xt, wt, None, act)
        y.sum().backward()
    ref = _composed(ng.tensor(x), ng.tensor(w), None, act).numpy()
    assert np.isfinite(y.detach().numpy()).all() and np.isfinite(xt.grad.numpy()).all()
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-6, atol=1e-30)


def test_float16_and_needs_input_grad():
    x = randn(3, 4, seed=16)
    w = randn(2, 4, seed=17)
    y16 = linear_act(ng.tensor(x.astype(np.float16)), ng.tensor(w.astype(np.float16)), None, "relu")
    assert y16.dtype == np.float16
    np.testing.assert_allclose(y16.numpy().astype(np.float64), np.maximum(x @ w.T, 0), rtol=1e-2, atol=1e-2)
    # only the weight needs a gradient (a frozen input, a frozen bias)
    wt = ng.tensor(w, requires_grad=True)
    linear_act(ng.tensor(x), wt, ng.tensor(np.ones(2)), "gelu").sum().backward()
    ref_w = ng.tensor(w, requires_grad=True)
    _composed(ng.tensor(x), ref_w, ng.tensor(np.ones(2)), "gelu").sum().backward()
    np.testing.assert_allclose(wt.grad.numpy(), ref_w.grad.numpy(), rtol=1e-12)


def test_noncontiguous_input_and_empty_batch():
    x = np.asfortranarray(randn(4, 3, seed=18))
    w = randn(5, 3, seed=19)
    y = linear_act(ng.tensor(x), ng.tensor(w), None, "tanh")
    np.testing.assert_allclose(y.numpy(), np.tanh(x @ w.T), rtol=1e-12)
    xt = ng.tensor(np.zeros((0, 3)), requires_grad=True)
    bt = ng.tensor(np.ones(5), requires_grad=True)
    out = linear_act(xt, ng.tensor(w), bt, "relu")
    assert out.shape == (0, 5)
    out.sum().backward()
    np.testing.assert_array_equal(bt.grad.numpy(), np.zeros(5))


def test_errors():
    x, w = ng.randn(2, 3), ng.randn(4, 3)
    with pytest.raises(ValueError, match="activation must be one of"):
        linear_act(x, w, None, "softmax")
    with pytest.raises(RuntimeError, match=r"linear_act: input of shape \(2, 4\)"):
        linear_act(ng.randn(2, 4), w, None, "relu")
    with pytest.raises(RuntimeError, match="bias of shape"):
        linear_act(x, w, ng.randn(3), "relu")
    with pytest.raises(RuntimeError, match="one dtype"):
        linear_act(x.double(), w, None, "relu")


def test_linear_forward_act_is_the_fused_path():
    ng.manual_seed(0)
    lin = Linear(6, 3)
    x = ng.randn(4, 6)
    for act in ("relu", "gelu_tanh", None):
        ref = _composed(x, lin.weight, lin.bias, act)
        np.testing.assert_allclose(lin.forward_act(x, act).detach().numpy(), ref.detach().numpy(), rtol=1e-6)
