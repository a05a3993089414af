"""Adamax / RAdam / NAdam (``numbagrad/optim/{adamax,radam,nadam}.py``, fused kernels in
``numbagrad/kernels/cpu/optim_adamx.py``): step-for-step equality with torch.optim over
100 steps for skipped parameters, a plain NumPy per-tensor reference written from the
algorithms' formulas, torch's state_dict layout, constructor checks. Parity for every
option, convergence, state_dict round trips and no recompilation: ``test_optimizers.py``
(``optimkit.OPTIMIZERS``)."""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.optim.adamax import Adamax
from numbagrad.optim.nadam import NAdam
from numbagrad.optim.radam import RAdam

torch = pytest.importorskip("torch")

import optimkit  # noqa: E402

NG = {"adamax": Adamax, "radam": RAdam, "nadam": NAdam}
TORCH = {"adamax": torch.optim.Adamax, "radam": torch.optim.RAdam, "nadam": torch.optim.NAdam}

# Parameters missing gradients: step counts diverge per parameter (RAdam's rho_t > 5
# switch and NAdam's mu products are per parameter); parameter 3 starts late.
SKIPS = {0: (1, 3), 1: (3,), 2: (0, 3), 3: (3,), 4: (3,), 5: (2, 3), 6: (3,), 9: (0, 1, 2, 3, 4),
         **{k: (1,) for k in range(20, 100, 3)}, **{k: (4,) for k in range(30, 60)}}


# ---- torch parity (the option sets: optimkit.OPTIMIZERS, test_optimizers.py) ---------
@pytest.mark.parametrize("name", list(NG))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_missing_grads_are_skipped_like_torch(name, dtype):
    kw = dict(lr=1e-2, weight_decay=0.05, betas=(0.9, 0.99))
    P, T, o1, o2 = optimkit.run_parity(NG[name], TORCH[name], kw, dtype, torch, skips=SKIPS)
    optimkit.assert_state_close(o1, o2, P, T, optimkit.TOL[dtype])
    n3 = sum(3 not in SKIPS.get(k, ()) for k in range(optimkit.STEPS))
    assert o1.state[P[3]]["step"].item() == o2.state[T[3]]["step"].item() == n3


@pytest.mark.parametrize("name", list(NG))
def test_foreach_and_capturable_are_accepted(name):
    kw = dict(lr=1e-2, weight_decay=0.05)
    ref = optimkit.run_parity(NG[name], TORCH[name], kw, np.float32, torch, steps=10)[0]
    for extra in (dict(foreach=True), dict(foreach=False), dict(capturable=True)):
        got = optimkit.run_parity(NG[name], TORCH[name], kw, np.float32, torch, steps=10,
                                  ng_kw={**kw, **extra})[0]
        for p, q in zip(got, ref):
            np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_large_parameters_use_the_parallel_kernel_and_match_torch():
    for name, kw in [("adamax", dict(lr=1e-2, weight_decay=0.1)),
                     ("radam", dict(lr=0.05, betas=(0.5, 0.9), decoupled_weight_decay=True, weight_decay=0.1)),
                     ("nadam", dict(lr=1e-2, maximize=True))]:
        optimkit.run_parity(NG[name], TORCH[name], kw, np.float32, torch, steps=5, skips={2: (1,)},
                            shapes=optimkit.LARGE_SHAPES)


def test_radam_rectification_switch_is_per_parameter():
    """A parameter's first steps are un-rectified (SGD with momentum on the bias-corrected
    average) even when its neighbours are past the switch: its first update is -lr*g."""
    P, _, grads = optimkit.setup(np.float64, shapes=[(4,), (3,)], steps=12)
    o = RAdam(P, lr=0.1)
    for k in range(11):
        P[0].grad = ng.tensor(grads[k][0])
        o.step()
    before = P[1].detach().numpy().copy()
    P[0].grad, P[1].grad = ng.tensor(grads[11][0]), ng.tensor(grads[11][1])
    o.step()
    np.testing.assert_allclose(P[1].detach().numpy(), before - 0.1 * grads[11][1], rtol=1e-15, atol=1e-15)
    assert o.state[P[0]]["step"].item() == 12 and o.state[P[1]]["step"].item() == 1


# ---- plain NumPy references, from the published update rules ----------------------------
def _numpy_adamax(params, grads_seq, lr, b1, b2, eps, wd):
    """Kingma & Ba (2014), sec. 7.1, with torch's eps inside the max and L2 decay."""
    m = [np.zeros_like(p) for p in params]
    u = [np.zeros_like(p) for p in params]
    for i, p, g, t in optimkit.ref_steps(params, grads_seq):
        g = g + wd * p
        m[i] = b1 * m[i] + (1 - b1) * g
        u[i] = np.maximum(b2 * u[i], np.abs(g) + eps)
        p -= lr / (1 - b1 ** t) * m[i] / u[i]
    return params


def _numpy_radam(params, grads_seq, lr, b1, b2, eps, wd, decoupled):
    """Liu et al. (2019), Algorithm 2, as documented for torch.optim.RAdam."""
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    rho_inf = 2 / (1 - b2) - 1
    for i, p, g, t in optimkit.ref_steps(params, grads_seq):
        g, m[i], v[i] = optimkit.ref_moments(p, g, m[i], v[i], lr, b1, b2, wd, decoupled)
        m_hat = m[i] / (1 - b1 ** t)
        rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
        if rho_t > 5:
            l_t = np.sqrt(1 - b2 ** t) / (np.sqrt(v[i]) + eps)
            r_t = np.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            p -= lr * m_hat * l_t * r_t
        else:
            p -= lr * m_hat
    return params


def _numpy_nadam(params, grads_seq, lr, b1, b2, eps, wd, psi, decoupled):
    """Dozat (2016) with torch's momentum schedule mu_t = b1 (1 - 0.96^(t psi) / 2), as
    documented for torch.optim.NAdam. The running product of the mu_t is stored in
    float32, as torch's ``state['mu_product']`` (a float32 scalar tensor) is."""
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    prod = [np.float32(1.0)] * len(params)

    def mu(k):
        return b1 * (1 - 0.5 * 0.96 ** (k * psi))

    for i, p, g, t in optimkit.ref_steps(params, grads_seq):
        g, m[i], v[i] = optimkit.ref_moments(p, g, m[i], v[i], lr, b1, b2, wd, decoupled)
        mu_t, mu_n = mu(t), mu(t + 1)
        prod[i] = np.float32(prod[i] * np.float32(mu_t))
        m_hat = mu_n * m[i] / (1 - float(prod[i]) * mu_n) + (1 - mu_t) * g / (1 - float(prod[i]))
        v_hat = v[i] / (1 - b2 ** t)
        p -= lr * m_hat / (np.sqrt(v_hat) + eps)
    return params


def _reference_run(name, kw, steps=30):
    P, _, grads = optimkit.setup(np.float64, steps=steps)
    seq = [[None if i in SKIPS.get(k, ()) else g for i, g in enumerate(gk)] for k, gk in enumerate(grads)]
    start = [p.detach().numpy().copy() for p in P]
    b1, b2 = kw.get("betas", (0.9, 0.999))
    lr, eps, wd = kw["lr"], kw.get("eps", 1e-8), kw.get("weight_decay", 0.0)
    if name == "adamax":
        ref = _numpy_adamax(start, seq, lr, b1, b2, eps, wd)
    elif name == "radam":
        ref = _numpy_radam(start, seq, lr, b1, b2, eps, wd, kw.get("decoupled_weight_decay", False))
    else:
        ref = _numpy_nadam(start, seq, lr, b1, b2, eps, wd, kw.get("momentum_decay", 4e-3),
                           kw.get("decoupled_weight_decay", False))
    o = NG[name](P, **kw)
    for gk in seq:
        for p, g in zip(P, gk):
            p.grad = None if g is None else ng.tensor(g)
        o.step()
    return P, ref


REF_CASES = [("adamax", dict(lr=1e-2, weight_decay=0.05)), ("adamax", dict(lr=0.05, betas=(0.3, 0.5))),
             ("radam", dict(lr=1e-2, weight_decay=0.05)),
             ("radam", dict(lr=1e-2, betas=(0.6, 0.9), weight_decay=0.05, decoupled_weight_decay=True)),
             ("radam", dict(lr=0.05, betas=(0.3, 0.5))),
             ("nadam", dict(lr=1e-2, weight_decay=0.05)),
             ("nadam", dict(lr=1e-2, betas=(0.3, 0.9), weight_decay=0.05, decoupled_weight_decay=True,
                            momentum_decay=0.05))]


@pytest.mark.parametrize("name,kw", REF_CASES, ids=[f"{n}-{k}" for n, k in REF_CASES])
def test_fused_equals_numpy_per_tensor_reference(name, kw):
    P, ref = _reference_run(name, kw)
    for p, r in zip(P, ref):
        np.testing.assert_allclose(p.detach().numpy(), r, rtol=1e-12, atol=1e-14)


# ---- state dict -------------------------------------------------------------------------
MAKE = {"adamax": lambda P: Adamax(P, lr=1e-2, weight_decay=0.01),
        "radam": lambda P: RAdam(P, lr=1e-2, weight_decay=0.01, decoupled_weight_decay=True),
        "nadam": lambda P: NAdam(P, lr=1e-2, weight_decay=0.01)}


@pytest.mark.parametrize("name", list(NG))
def test_state_dict_round_trip_continues_identically(name):
    optimkit.check_state_dict_round_trip(MAKE[name], skips={k: (2,) for k in range(3)})


@pytest.mark.parametrize("name", list(NG))
def test_state_dict_layout_matches_torch(name):
    P, T, grads = optimkit.setup(np.float32, steps=3, torch=torch)
    o1, o2 = MAKE[name](P), TORCH[name](T, lr=1e-2, weight_decay=0.01,
                                           **({"decoupled_weight_decay": True} if name == "radam" else {}))
    # step and mu_product are float32 scalars, as torch's
    optimkit.check_state_dict_like_torch(o1, o2, P, T, grads, torch, tol=dict(rtol=1e-6, atol=1e-7))


@pytest.mark.parametrize("name", list(NG))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_load_torch_optimizer_state_then_continue_like_torch(name, dtype):
    P, T, o1, o2 = optimkit.check_load_torch_state(NG[name], TORCH[name], dict(lr=1e-2, betas=(0.8, 0.95)), dtype,
                                                   torch, steps=16, skips={k: (1,) for k in range(3)})
    if name == "nadam":
        for p, t in zip(P, T):
            assert o1.state[p]["mu_product"].item() == o2.state[t]["mu_product"].item()
            assert list(o1.state[p]) == list(o2.state[t])


def test_nadam_mu_product_survives_an_arena_rebuild():
    """Rebinding ``p.array`` rebuilds the arena; the per-parameter mu products, kept
    outside it, carry over (and stay shared with ``state[p]``)."""
    P, _, grads = optimkit.setup(np.float64, steps=10)
    Q = [nn.Parameter(ng.tensor(p.detach().numpy().copy())) for p in P]
    a, b = NAdam(P, lr=1e-2), NAdam(Q, lr=1e-2)
    optimkit.train(a, P, grads, range(4), skip=(1,))
    optimkit.train(b, Q, grads, range(4), skip=(1,))
    for q in Q:
        q.array = q.array.copy()
    optimkit.train(a, P, grads, range(4, 10))
    optimkit.train(b, Q, grads, range(4, 10))
    for p, q in zip(P, Q):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
        assert a.state[p]["mu_product"].item() == b.state[q]["mu_product"].item()
    assert b.state[Q[0]]["mu_product"].item() != b.state[Q[1]]["mu_product"].item()
    assert list(b.state[Q[0]]) == ["step", "mu_product", "exp_avg", "exp_avg_sq"]


# ---- the fused kernels ------------------------------------------------------------------
@pytest.mark.parametrize("name", list(NG))
def test_parameters_live_in_one_flat_arena(name):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    o = NG[name](model.parameters(), lr=1e-2)
    model(ng.randn(5, 4)).sum().backward()
    o.step()
    assert len({id(p.array.base) for p in model.parameters()}) == 1
    st = o.state[model[0].weight]
    keys = {"adamax": ["step", "exp_avg", "exp_inf"], "radam": ["step", "exp_avg", "exp_avg_sq"],
            "nadam": ["step", "mu_product", "exp_avg", "exp_avg_sq"]}[name]
    assert list(st) == keys
    assert st[keys[-1]].shape == (8, 4) and st["step"].item() == 1.0


# ---- constructor ------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(NG))
def test_constructor_validation(name):
    cls = NG[name]
    optimkit.check_constructor_rejects(cls, [(dict(lr=-1), "Invalid learning rate: -1"),
                                             (dict(eps=-0.1), "Invalid epsilon value: -0.1"), *optimkit.BETAS_BAD,
                                             (dict(weight_decay=-1), "Invalid weight_decay value: -1")],
                                       TORCH[name], torch)
    p = nn.Parameter(ng.ones(2))
    o = cls([p], foreach=True, capturable=True)
    tp = torch.nn.Parameter(torch.ones(2))
    assert o.defaults == TORCH[name]([tp], foreach=True, capturable=True).defaults
    assert cls([p]).defaults == TORCH[name]([tp]).defaults
    assert repr(cls([p])).startswith(f"{cls.__name__} (\nParameter Group 0\n")


def test_nadam_momentum_decay_validation():
    p = nn.Parameter(ng.ones(2))
    with pytest.raises(ValueError, match="Invalid momentum_decay value: -0.001"):
        NAdam([p], momentum_decay=-1e-3)
    assert NAdam([p]).defaults["momentum_decay"] == 4e-3 and NAdam([p]).defaults["lr"] == 2e-3
    assert Adamax([p]).defaults["lr"] == 2e-3 and RAdam([p]).defaults["lr"] == 1e-3
