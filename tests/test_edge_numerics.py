"""Numerics on edge inputs equal to PyTorch's (issue 20): NaN through ``threshold``, the
gradient of norms (and ``normalize``, ``std``) where the norm is 0, BatchNorm on an empty
batch, optimizers after an inf gradient (state inf where torch has inf, never NaN from a
zero weight decay times a NaN/inf parameter), NaN hyperparameters refused, and a rebound
state tensor honoured by the next step.

Each case checks torch when it is installed and, besides, a NumPy or analytic reference,
so it has teeth without torch."""
import math
import warnings

import numpy as np
import pytest

import numbagrad as ng
import numbagrad.nn.functional as F
from numbagrad import nn, optim

NAN, INF = float("nan"), float("inf")


def _torch():
    return pytest.importorskip("torch")


def _np(t):
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t)


def assert_same_special(got, ref, rtol=1e-5, atol=1e-6, what=""):
    """NaN where ``ref`` is NaN, the same signed infinities, finite values close."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape, what
    assert np.array_equal(np.isnan(got), np.isnan(ref)), f"{what}: NaN at {got} vs {ref}"
    assert np.array_equal(np.isposinf(got), np.isposinf(ref)), f"{what}: +inf at {got} vs {ref}"
    assert np.array_equal(np.isneginf(got), np.isneginf(ref)), f"{what}: -inf at {got} vs {ref}"
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=rtol, atol=atol, err_msg=what)


# ---- threshold --------------------------------------------------------------------------------
X_THR = np.array([NAN, -1.0, 0.5, 0.6, 2.0, -INF, INF], np.float32)


def test_threshold_keeps_nan_and_passes_its_gradient():
    x = ng.tensor(X_THR, requires_grad=True)
    y = F.threshold(x, 0.6, -5.0)
    y.backward(ng.ones(len(X_THR)))
    drop = X_THR <= 0.6                                   # NaN compares false: kept
    assert_same_special(_np(y), np.where(drop, np.float32(-5.0), X_THR))
    assert_same_special(_np(x.grad), np.where(drop, 0.0, 1.0))
    assert math.isnan(float(_np(y)[0]))


def test_threshold_like_torch():
    torch = _torch()
    for inplace in (False, True):
        y = F.threshold(ng.tensor(X_THR.copy()), 0.6, -5.0, inplace=inplace)
        ty = torch.nn.functional.threshold(torch.tensor(X_THR.copy()), 0.6, -5.0, inplace=inplace)
        assert_same_special(_np(y), ty.numpy())
    x, tx = ng.tensor(X_THR, requires_grad=True), torch.tensor(X_THR, requires_grad=True)
    F.threshold(x, 0.6, -5.0).sum().backward()
    torch.nn.functional.threshold(tx, 0.6, -5.0).sum().backward()
    assert_same_special(_np(x.grad), tx.grad.numpy())


# ---- norms at zero ----------------------------------------------------------------------------
PS = (2, "fro", 3, 1.5, 0.5, 1, INF)
X_NORM = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.0]], np.float32)


def _pnorm_grad(x, p):
    """d ||x||_p / dx in float64 for one vector: 0 when the norm is 0 (torch's convention)."""
    x = x.astype(np.float64)
    if p == INF:
        n = np.abs(x).max()
        m = np.abs(x) == n
        return np.zeros_like(x) if n == 0 else np.sign(x) * m / m.sum()
    p = 2.0 if p == "fro" else float(p)
    n = (np.abs(x) ** p).sum() ** (1 / p)
    if n == 0:
        return np.zeros_like(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.sign(x) * np.abs(x) ** (p - 1) / n ** (p - 1)
    return np.where(x == 0, 0.0, g)


@pytest.mark.parametrize("p", PS)
def test_norm_gradient_at_zero_is_zero(p):
    x = ng.zeros(3, requires_grad=True)
    x.norm(p=p).backward()
    np.testing.assert_array_equal(_np(x.grad), np.zeros(3, np.float32))
    # per row, a zero row beside a non-zero one
    x = ng.tensor(X_NORM, requires_grad=True)
    n = x.norm(p=p, dim=1)
    n.sum().backward()
    ref = np.stack([_pnorm_grad(r, p) for r in X_NORM])
    np.testing.assert_allclose(_np(x.grad), ref, rtol=1e-5, atol=1e-7)
    pp = 2.0 if p == "fro" else p
    np.testing.assert_allclose(_np(n), [np.linalg.norm(r.astype(np.float64), ord=pp) for r in X_NORM], rtol=1e-6)


@pytest.mark.parametrize("p", PS)
def test_norm_gradients_like_torch(p):
    torch = _torch()
    for dim, keepdim in ((None, False), (1, False), (1, True), (0, False)):
        x, tx = ng.tensor(X_NORM, requires_grad=True), torch.tensor(X_NORM, requires_grad=True)
        x.norm(p=p, dim=dim, keepdim=keepdim).sum().backward()
        tx.norm(p=p, dim=dim, keepdim=keepdim).sum().backward()
        np.testing.assert_allclose(_np(x.grad), tx.grad.numpy(), rtol=1e-5, atol=1e-7, err_msg=f"dim={dim}")


def test_normalize_at_zero_vector():
    eps = 1e-12
    x = ng.tensor(X_NORM, requires_grad=True)
    F.normalize(x, dim=1, eps=eps).sum().backward()
    g = _np(x.grad)
    # the zero row: x / max(||x||, eps) = x / eps there, so the gradient is 1 / eps
    np.testing.assert_allclose(g[0], np.full(3, 1.0 / eps), rtol=1e-6)
    r = X_NORM[1].astype(np.float64)
    n = np.linalg.norm(r)
    np.testing.assert_allclose(g[1], 1.0 / n - r * r.sum() / n ** 3, rtol=1e-5, atol=1e-6)
    torch = pytest.importorskip("torch")
    tx = torch.tensor(X_NORM, requires_grad=True)
    torch.nn.functional.normalize(tx, dim=1, eps=eps).sum().backward()
    np.testing.assert_allclose(g, tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_std_of_a_constant_has_zero_gradient():
    x = ng.tensor(np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]], np.float32), requires_grad=True)
    x.std(dim=1).sum().backward()
    g = _np(x.grad)
    np.testing.assert_array_equal(g[0], np.zeros(3, np.float32))
    r = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(g[1], (r - r.mean()) / ((r.size - 1) * np.std(r, ddof=1)), rtol=1e-5)
    torch = pytest.importorskip("torch")
    tx = torch.tensor(_np(x), requires_grad=True)
    tx.std(dim=1).sum().backward()
    np.testing.assert_allclose(g, tx.grad.numpy(), rtol=1e-5, atol=1e-7)


# ---- BatchNorm on an empty batch --------------------------------------------------------------
@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (0, 3)), ("BatchNorm1d", (0, 3, 4)),
                                       ("BatchNorm1d", (2, 3, 0)), ("BatchNorm2d", (0, 3, 2, 2))])
def test_batchnorm_training_on_an_empty_batch_leaves_running_stats(cls, shape):
    m = getattr(nn, cls)(3)
    m.running_mean.array[...] = [0.5, -1.0, 2.0]
    m.running_var.array[...] = [1.5, 0.25, 3.0]
    before = _np(m.running_mean).copy(), _np(m.running_var).copy()
    x = ng.zeros(*shape, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # no 0/0 RuntimeWarning either
        y = m(x)
        y.sum().backward()
    assert tuple(y.shape) == shape and tuple(x.grad.shape) == shape
    np.testing.assert_array_equal(_np(m.running_mean), before[0])
    np.testing.assert_array_equal(_np(m.running_var), before[1])
    assert int(m.num_batches_tracked) == 1
    np.testing.assert_array_equal(_np(m.weight.grad), np.zeros(3, np.float32))
    np.testing.assert_array_equal(_np(m.bias.grad), np.zeros(3, np.float32))
    torch = pytest.importorskip("torch")
    tm = getattr(torch.nn, cls)(3)
    with torch.no_grad():
        tm.running_mean.copy_(torch.tensor(before[0]))
        tm.running_var.copy_(torch.tensor(before[1]))
    tx = torch.zeros(*shape, requires_grad=True)
    tm(tx).sum().backward()
    np.testing.assert_array_equal(_np(m.running_mean), tm.running_mean.numpy())
    np.testing.assert_array_equal(_np(m.running_var), tm.running_var.numpy())
    assert int(tm.num_batches_tracked) == int(m.num_batches_tracked)
    np.testing.assert_array_equal(_np(m.weight.grad), tm.weight.grad.numpy())


def test_batchnorm_after_an_empty_batch_still_tracks():
    m = nn.BatchNorm1d(2)
    m(ng.zeros(0, 2))
    x = np.array([[1.0, 2.0], [3.0, 6.0]], np.float32)
    m(ng.tensor(x))
    np.testing.assert_allclose(_np(m.running_mean), 0.1 * x.mean(0), rtol=1e-6)
    np.testing.assert_allclose(_np(m.running_var), 0.9 + 0.1 * x.var(0, ddof=1), rtol=1e-6)


# ---- optimizers after an inf gradient ---------------------------------------------------------
# (name, kwargs): every fused optimizer torch has, with and without weight decay, amsgrad,
# maximize, momentum and centered forms
OPT_CASES = [
    ("Adam", {}), ("Adam", dict(amsgrad=True)), ("Adam", dict(amsgrad=True, maximize=True)),
    ("Adam", dict(weight_decay=0.1)), ("AdamW", {}), ("AdamW", dict(amsgrad=True)),
    ("AdamW", dict(weight_decay=0.0, amsgrad=True)), ("Adamax", {}), ("Adamax", dict(weight_decay=0.1)),
    ("RAdam", {}), ("RAdam", dict(decoupled_weight_decay=True, weight_decay=0.1)), ("NAdam", {}),
    ("RMSprop", {}), ("RMSprop", dict(centered=True, momentum=0.9)), ("Adagrad", {}),
    ("Adadelta", {}), ("SGD", dict(momentum=0.9)), ("SGD", dict(momentum=0.9, nesterov=True)), ("SGD", {}),
]
# state buffers that are running sums/averages/maxima of squares or magnitudes: +inf where
# the gradient was +-inf (with no weight decay, which mixes in the parameter)
SQUARES = ("exp_avg_sq", "max_exp_avg_sq", "exp_inf", "square_avg", "sum")
GRADS = (np.array([1.0, 2.0, 3.0, -0.5], np.float32), np.array([INF, -INF, 1.0, 0.25], np.float32),
         np.array([1.0, 1.0, 1.0, 1.0], np.float32))


def _run_opt(lib, name, kw, grads=GRADS):
    p = lib.nn.Parameter(lib.tensor(np.array([1.0, 1.0, 1.0, 1.0], np.float32)))
    opt = getattr(lib.optim, name)([p], lr=0.1, **kw)
    for g in grads:
        p.grad = lib.tensor(g.copy())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt.step()
    st = {k: _np(v) for k, v in opt.state[p].items() if k != "step" and hasattr(v, "shape") and v.ndim}
    return _np(p).copy(), st


@pytest.mark.parametrize("name,kw", OPT_CASES, ids=[f"{n}-{'-'.join(kw) or 'plain'}" for n, kw in OPT_CASES])
def test_optimizer_state_after_an_inf_gradient(name, kw):
    p, st = _run_opt(ng, name, kw)
    if not kw.get("weight_decay"):
        for k in SQUARES:
            if k in st:   # a running sum of squares of +-inf is +inf, never NaN
                assert np.isposinf(st[k][:2]).all(), (k, st[k])
                assert np.isfinite(st[k][2:]).all(), (k, st[k])
    if name == "SGD" and kw.get("momentum") and not kw.get("nesterov"):
        # buf = g, then 0.9 buf + g: +inf / -inf, and p - lr*buf: -inf / +inf (never NaN)
        assert_same_special(st["momentum_buffer"][:2], [INF, -INF])
        assert_same_special(p[:2], [-INF, INF])
    torch = pytest.importorskip("torch")
    tp, tst = _run_opt(torch, name, kw)
    assert_same_special(p, tp, what=f"{name} {kw} param")
    assert set(st) == set(tst)
    for k in st:
        assert_same_special(st[k], tst[k], what=f"{name} {kw} {k}")


def test_lamb_and_lion_after_an_inf_gradient_keep_finite_elements():
    """Not in torch: the elements whose gradients stayed finite stay finite, and LAMB's
    second moment holds +inf (not NaN) where the gradient was inf."""
    for name, kw in (("Lamb", {}), ("Lamb", dict(weight_decay=0.0)), ("Lion", {}), ("Lion", dict(weight_decay=0.0))):
        grads = (GRADS[0], np.array([INF, 1.0, 1.0, 1.0], np.float32), GRADS[2])
        p = nn.Parameter(ng.tensor(np.ones((2, 4), np.float32)))
        q = nn.Parameter(ng.tensor(np.ones(3, np.float32)))
        opt = getattr(optim, name)([p, q], lr=0.1, **kw)
        for g in grads:
            p.grad = ng.tensor(np.stack([g, g]))
            q.grad = ng.ones(3)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                opt.step()
        assert np.isfinite(_np(q)).all(), (name, _np(q))
        if "exp_avg_sq" in opt.state[p]:
            assert np.isposinf(_np(opt.state[p]["exp_avg_sq"])[:, 0]).all()


# ---- NaN hyperparameters ----------------------------------------------------------------------
ALL_OPTS = ("SGD", "Adam", "AdamW", "Adamax", "RAdam", "NAdam", "RMSprop", "Adagrad", "Adadelta", "LBFGS",
            "Lamb", "Lion")


@pytest.mark.parametrize("name", ALL_OPTS)
def test_every_optimizer_refuses_a_nan_learning_rate(name):
    p = nn.Parameter(ng.zeros(2))
    with pytest.raises(ValueError, match=r"^Invalid learning rate: nan$"):
        getattr(optim, name)([p], lr=NAN)


def _nan_cases(cls):
    import inspect
    for k, v in inspect.signature(cls.__init__).parameters.items():
        if k in ("self", "params", "lr"):
            continue
        if k == "betas":
            yield k, (NAN, 0.9)
            yield k, (0.9, NAN)
        elif isinstance(v.default, (float, int)) and not isinstance(v.default, bool):
            yield k, NAN


@pytest.mark.parametrize("name", [n for n in ALL_OPTS if n not in ("Lamb", "Lion")])
def test_nan_hyperparameters_refused_where_torch_refuses(name):
    torch = _torch()
    cls, tcls = getattr(optim, name), getattr(torch.optim, name)
    seen = 0
    for k, v in _nan_cases(tcls):
        try:
            tcls([torch.zeros(2, requires_grad=True)], **{k: v})
            terr = None
        except ValueError as e:
            terr = str(e)
        if terr is None:
            cls([nn.Parameter(ng.zeros(2))], **{k: v})
        else:
            with pytest.raises(ValueError) as info:
                cls([nn.Parameter(ng.zeros(2))], **{k: v})
            assert str(info.value) == terr, (name, k)
        seen += 1
    assert seen or name == "SGD"


# ---- a rebound state entry is honoured --------------------------------------------------------
def _rebind_run(lib, name, kw, key, steps=3):
    p = lib.nn.Parameter(lib.tensor(np.array([1.0, -2.0, 3.0, 0.5], np.float32)))
    q = lib.nn.Parameter(lib.tensor(np.array([1.0, 2.0], np.float32)))
    opt = getattr(lib.optim, name)([p, q], lr=0.1, **kw)
    new = None
    for k in range(steps):
        p.grad = lib.tensor(np.array([1.0, -2.0, 3.0, 0.5], np.float32) * (k + 1))
        q.grad = lib.tensor(np.array([0.5, -1.0], np.float32))
        opt.step()
        if k == 0:
            new = lib.full((4,), 0.7)
            opt.state[p][key] = new
            if "step" in opt.state[q]:
                opt.state[q]["step"] = lib.tensor(10.0)
    return opt, p, q, new


REBIND = [("Adam", dict(amsgrad=True), "exp_avg"), ("Adam", dict(amsgrad=True), "max_exp_avg_sq"),
          ("AdamW", {}, "exp_avg_sq"), ("SGD", dict(momentum=0.9), "momentum_buffer"),
          ("RMSprop", dict(momentum=0.5), "square_avg"), ("Adagrad", {}, "sum"), ("NAdam", {}, "exp_avg")]


@pytest.mark.parametrize("name,kw,key", REBIND)
def test_rebinding_a_state_tensor_is_honoured(name, kw, key):
    opt, p, q, new = _rebind_run(ng, name, kw, key)
    assert opt.state[p][key] is new               # the caller's tensor is the state (as torch)
    # the same run through load_state_dict (another path into the arena) gives the same bits
    p2 = nn.Parameter(ng.tensor(np.array([1.0, -2.0, 3.0, 0.5], np.float32)))
    q2 = nn.Parameter(ng.tensor(np.array([1.0, 2.0], np.float32)))
    o2 = getattr(optim, name)([p2, q2], lr=0.1, **kw)
    p2.grad = ng.tensor(np.array([1.0, -2.0, 3.0, 0.5], np.float32))
    q2.grad = ng.tensor(np.array([0.5, -1.0], np.float32))
    o2.step()
    sd = o2.state_dict()
    sd["state"][0][key] = ng.full((4,), 0.7)
    if "step" in sd["state"][1]:
        sd["state"][1]["step"] = ng.tensor(10.0)
    o2.load_state_dict(sd)
    for k in (1, 2):
        p2.grad = ng.tensor(np.array([1.0, -2.0, 3.0, 0.5], np.float32) * (k + 1))
        q2.grad = ng.tensor(np.array([0.5, -1.0], np.float32))
        o2.step()
    np.testing.assert_array_equal(_np(p), _np(p2))
    np.testing.assert_array_equal(_np(q), _np(q2))
    np.testing.assert_array_equal(_np(new), _np(o2.state[p2][key]))
    torch = pytest.importorskip("torch")
    topt, tp, tq, tnew = _rebind_run(torch, name, kw, key)
    np.testing.assert_allclose(_np(p), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(q), tq.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(new), tnew.numpy(), rtol=1e-5, atol=1e-6)   # updated in place, as torch's
    if "step" in opt.state[q]:
        assert float(opt.state[q]["step"]) == float(topt.state[tq]["step"])


def test_deleting_a_state_entry_restarts_it():
    p = nn.Parameter(ng.ones(3))
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    for k in range(3):
        p.grad = ng.full((3,), 1.0)
        opt.step()
        if k == 0:
            del opt.state[p]["momentum_buffer"]
    # step 2 starts the buffer again from the gradient (buf = g), step 3: buf = 0.9 + 1
    np.testing.assert_allclose(_np(opt.state[p]["momentum_buffer"]), np.full(3, 1.9), rtol=1e-6)
    np.testing.assert_allclose(_np(p), np.full(3, 1.0 - 0.1 - 0.1 - 0.19), rtol=1e-6)
