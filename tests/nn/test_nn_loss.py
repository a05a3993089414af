"""Losses: the fused cross_entropy against PyTorch, against the composed
log_softmax + nll_loss, and against float64 finite differences; nll/mse/l1; errors."""
import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.nn import functional as F
from numbagrad.backend import config
from optest import check_grad

torch = pytest.importorskip("torch")
TF = torch.nn.functional

rng = np.random.default_rng(0)


def _case(n=12, c=5, extra=(), ignore=-100):
    """Logits and targets; two targets are ``ignore`` (None: no ignored rows)."""
    x = rng.standard_normal((n, c) + extra) * 2
    t = rng.integers(0, c, (n,) + extra)
    if ignore is not None:
        t.reshape(-1)[1] = ignore
        t.reshape(-1)[4] = ignore
    return x, t


def _both(fn_ng, fn_t, x, t, kw, dtype=np.float64, weight=None, rtol=1e-10, atol=1e-12):
    xn = ng.tensor(x.astype(dtype), requires_grad=True)
    xt = torch.tensor(x.astype(dtype), requires_grad=True)
    kn, kt = dict(kw), dict(kw)
    if weight is not None:
        kn["weight"] = ng.tensor(weight.astype(dtype))
        kt["weight"] = torch.tensor(weight.astype(dtype))
    tn = ng.tensor(t)
    tt = torch.tensor(t)
    out, tout = fn_ng(xn, tn, **kn), fn_t(xt, tt, **kt)
    assert out.shape == tuple(tout.shape)
    assert out.dtype == dtype
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=rtol, atol=atol)
    g = rng.standard_normal(out.shape)
    out.backward(ng.tensor(g.astype(dtype)))
    tout.backward(torch.tensor(g.astype(dtype)))
    np.testing.assert_allclose(xn.grad.numpy(), xt.grad.numpy(), rtol=rtol, atol=atol)


KWS = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(label_smoothing=0.1),
       dict(label_smoothing=0.25, reduction="none"), dict(ignore_index=2), dict(ignore_index=2, reduction="sum"),
       dict(label_smoothing=0.3, ignore_index=0)]


@pytest.mark.parametrize("kw", KWS, ids=[str(k) for k in KWS])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_matches_torch(kw, weighted):
    x, t = _case(ignore=kw.get("ignore_index", -100))
    w = rng.random(5) + 0.1 if weighted else None
    _both(F.cross_entropy, TF.cross_entropy, x, t, kw, weight=w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_float32_and_large_logits(dtype):
    x, t = _case(n=30, c=11)
    x[0] *= 500  # a max-shifted logsumexp keeps this finite
    _both(F.cross_entropy, TF.cross_entropy, x, t, dict(label_smoothing=0.05), dtype=dtype,
          rtol=2e-5 if dtype == np.float32 else 1e-10, atol=1e-6 if dtype == np.float32 else 1e-12)


def test_cross_entropy_parallel_path_matches_torch():
    n, c = 256, 512
    assert n * c >= config.PARALLEL_THRESHOLD  # exercises the prange twin
    x, t = _case(n=n, c=c)
    _both(F.cross_entropy, TF.cross_entropy, x, t, dict(label_smoothing=0.1), weight=rng.random(c),
          dtype=np.float32, rtol=1e-4, atol=1e-6)
    _both(F.cross_entropy, TF.cross_entropy, x, t, dict(reduction="none"), rtol=1e-10)


def test_cross_entropy_kdim_and_unbatched():
    x, t = _case(n=3, c=4, extra=(2, 5))
    for kw in (dict(), dict(reduction="none"), dict(label_smoothing=0.2)):
        _both(F.cross_entropy, TF.cross_entropy, x, t, kw, weight=rng.random(4))
    xu = rng.standard_normal(6)
    for kw in (dict(), dict(reduction="none")):
        _both(F.cross_entropy, TF.cross_entropy, xu, np.array(2), kw)


@pytest.mark.parametrize("kw", [dict(), dict(label_smoothing=0.2, reduction="sum"), dict(reduction="none")])
def test_cross_entropy_probability_targets(kw):
    x = rng.standard_normal((7, 4))
    p = rng.random((7, 4))
    p /= p.sum(1, keepdims=True)
    _both(F.cross_entropy, TF.cross_entropy, x, p, kw, weight=rng.random(4) + 0.5)
    _both(F.cross_entropy, TF.cross_entropy, x, p, kw)


def test_cross_entropy_equals_composed_log_softmax_nll():
    w = rng.random(6) + 0.2
    for kw in (dict(), dict(reduction="sum"), dict(reduction="none"), dict(ignore_index=3)):
        x, t = _case(n=20, c=6, ignore=kw.get("ignore_index", -100))
        xa = ng.tensor(x, requires_grad=True)
        xb = ng.tensor(x, requires_grad=True)
        fused = F.cross_entropy(xa, ng.tensor(t), weight=ng.tensor(w), **kw)
        composed = F.nll_loss(ng.log_softmax(xb, dim=1), ng.tensor(t), weight=ng.tensor(w), **kw)
        np.testing.assert_allclose(fused.detach().numpy(), composed.detach().numpy(), rtol=1e-12, atol=1e-14)
        g = ng.tensor(rng.standard_normal(fused.shape))
        fused.backward(g)
        composed.backward(g)
        np.testing.assert_allclose(xa.grad.numpy(), xb.grad.numpy(), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("kw", [dict(), dict(reduction="none", label_smoothing=0.2), dict(ignore_index=1)])
def test_cross_entropy_gradient_finite_differences(kw):
    x, t = _case(n=6, c=4, ignore=kw.get("ignore_index", -100))
    check_grad(lambda a: F.cross_entropy(a, ng.tensor(t), weight=ng.tensor(np.array([1.0, 2.0, 0.5, 1.5])), **kw),
               [x])
    p = rng.random((6, 4))
    check_grad(lambda a: F.cross_entropy(a, ng.tensor(p / p.sum(1, keepdims=True)), label_smoothing=0.1), [x])


def test_cross_entropy_all_ignored_is_nan_like_torch():
    x = rng.standard_normal((3, 4))
    t = np.full(3, -100)
    out = F.cross_entropy(ng.tensor(x, requires_grad=True), ng.tensor(t))
    assert math.isnan(out.item()) and math.isnan(TF.cross_entropy(torch.tensor(x), torch.tensor(t)).item())
    assert F.cross_entropy(ng.tensor(x), ng.tensor(t), reduction="sum").item() == 0.0


def test_cross_entropy_errors():
    x = ng.randn(4, 3)
    with pytest.raises(IndexError, match=r"cross_entropy: target 3 is out of bounds for 3 classes"):
        F.cross_entropy(x, ng.tensor([0, 1, 3, 2]))
    with pytest.raises(IndexError, match=r"target -1 is out of bounds"):
        F.cross_entropy(x, ng.tensor([0, 1, -1, 2]))
    with pytest.raises(ValueError, match=r"expected target of shape \(4,\) for input of shape \(4, 3\), "
                                         r"got target of shape \(5,\)"):
        F.cross_entropy(x, ng.tensor([0, 1, 1, 2, 0]))
    with pytest.raises(ValueError, match="weight tensor should be defined"):
        F.cross_entropy(x, ng.tensor([0, 1, 1, 2]), weight=ng.ones(4))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, ng.tensor([0, 1, 1, 2]), reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, ng.tensor([0, 1, 1, 2]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="probability targets must have"):
        F.cross_entropy(x, ng.randn(4, 2))
    with pytest.raises(IndexError, match="nll_loss: target 7"):
        F.nll_loss(x, ng.tensor([0, 7, 1, 2]))


def test_cross_entropy_int32_targets_and_lists():
    x, t = _case(n=5, c=3, ignore=None)
    a = F.cross_entropy(ng.tensor(x), ng.tensor(t.astype(np.int32)))
    b = F.cross_entropy(ng.tensor(x), t.tolist())
    assert a.item() == pytest.approx(TF.cross_entropy(torch.tensor(x), torch.tensor(t)).item(), rel=1e-12)
    assert a.item() == b.item()


@pytest.mark.parametrize("kw", [dict(), dict(reduction="sum"), dict(reduction="none"), dict(ignore_index=0)])
def test_nll_loss_matches_torch(kw):
    x, t = _case(n=9, c=4, ignore=kw.get("ignore_index", -100))
    _both(F.nll_loss, TF.nll_loss, x, t, kw, weight=rng.random(4))
    _both(F.nll_loss, TF.nll_loss, x, t, kw)
    xk, tk = _case(n=2, c=3, extra=(4,), ignore=kw.get("ignore_index", -100))
    _both(F.nll_loss, TF.nll_loss, xk, tk, kw)


@pytest.mark.parametrize("fn,tfn", [(F.mse_loss, TF.mse_loss), (F.l1_loss, TF.l1_loss)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_losses_match_torch(fn, tfn, reduction):
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((3, 4))
    an, bn = ng.tensor(a, requires_grad=True), ng.tensor(b, requires_grad=True)
    at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, tout = fn(an, bn, reduction=reduction), tfn(at, bt, reduction=reduction)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-12)
    g = rng.standard_normal(out.shape)
    out.backward(ng.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(an.grad.numpy(), at.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(bn.grad.numpy(), bt.grad.numpy(), rtol=1e-12)
    check_grad(lambda u, v: fn(u, v, reduction=reduction), [a, b + 0.3])


def test_mse_broadcast_warns():
    with pytest.warns(UserWarning, match="target size"):
        out = F.mse_loss(ng.randn(3, 4), ng.randn(4))
    assert out.shape == ()
    with pytest.raises(ValueError, match="not broadcastable"):
        F.mse_loss(ng.randn(3, 4), ng.randn(5))


def test_loss_modules():
    w = ng.tensor([1.0, 2.0, 0.5])
    crit = nn.CrossEntropyLoss(weight=w, label_smoothing=0.1)
    assert [n for n, _ in crit.named_buffers()] == ["weight"]
    assert repr(crit) == "CrossEntropyLoss()"
    assert repr(nn.MSELoss(reduction="sum")) == repr(torch.nn.MSELoss(reduction="sum"))
    x, t = _case(n=6, c=3, ignore=None)
    a = crit(ng.tensor(x), ng.tensor(t)).item()
    b = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64),
                                  label_smoothing=0.1)(torch.tensor(x), torch.tensor(t)).item()
    assert a == pytest.approx(b, rel=1e-6)
    lp = np.log(np.full((2, 3), 1 / 3))
    assert nn.NLLLoss()(ng.tensor(lp), ng.tensor([0, 2])).item() == pytest.approx(math.log(3))
    assert nn.MSELoss()(ng.ones(3), ng.zeros(3)).item() == 1.0
    assert nn.L1Loss(reduction="sum")(ng.ones(3), ng.zeros(3)).item() == 3.0
    assert nn.CrossEntropyLoss(reduction="none")(ng.randn(4, 3), ng.tensor([0, 1, 2, 0])).shape == (4,)


def test_cross_entropy_float16_computes_in_float32():
    x, t = _case(n=6, c=4, ignore=None)
    xn = ng.tensor(x.astype(np.float16), requires_grad=True)
    out = F.cross_entropy(xn, ng.tensor(t))
    out.backward()
    assert out.dtype == np.float16 and xn.grad.dtype == np.float16
    xt = torch.tensor(x.astype(np.float16).astype(np.float32), requires_grad=True)
    ref = TF.cross_entropy(xt, torch.tensor(t))
    ref.backward()
    assert out.item() == pytest.approx(ref.item(), rel=1e-3)
    np.testing.assert_allclose(xn.grad.numpy().astype(np.float32), xt.grad.numpy(), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vectorisable_exp_of_the_loss_kernels(dtype):
    from numba import njit
    from numbagrad.kernels.cpu.loss import vexp

    @njit
    def run(x, out):
        for i in range(x.size):
            out[i] = vexp(x[i])

    x = np.concatenate([-rng.random(20000) * 90, -rng.random(20000) * 800, rng.random(1000) * 5,
                        [0.0, -0.0, np.nan, -np.inf, -1e-40]]).astype(dtype)
    out = np.empty_like(x)
    run(x, out)
    ref = np.exp(x.astype(np.float64))
    normal = ref > np.finfo(dtype).tiny
    rel = np.abs(out[normal] - ref[normal]) / ref[normal]
    assert np.nanmax(rel) <= np.finfo(dtype).eps
    assert (out[~normal & ~np.isnan(x)] == 0).all()  # subnormal results flush to zero
    assert np.isnan(out[-3]) and out[-2] == 0 and out[-5] == 1 and out[-1] == 1
    assert vexp(0.5) == pytest.approx(math.exp(0.5))
