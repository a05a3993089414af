"""SGD / Adam / AdamW: parameters missing gradients, param groups, a plain NumPy per-tensor
reference, torch's state_dict layout and loading, and the fused arena. Step-for-step parity
for every option, convergence, state_dict round trips and no recompilation are in
``test_optimizers.py`` (driven by ``optimkit.OPTIMIZERS``)."""
import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn, optim

torch = pytest.importorskip("torch")

from optimkit import SHAPES, STEPS, assert_close, setup, train  # noqa: F401
import optimkit


def _setup(dtype, seed=0, shapes=SHAPES, steps=25):
    return setup(dtype, seed, shapes, steps, torch=torch)


def _set_grads(P, T, grads_k, skip=()):
    optimkit.set_grads(P, T, grads_k, skip, torch=torch)


def _assert_close(P, T, dtype):
    assert_close(P, T, dtype)


def _run_parity(ng_cls, t_cls, kw, dtype, steps=STEPS, skips=None, shapes=SHAPES):
    return optimkit.run_parity(ng_cls, t_cls, kw, dtype, torch, steps=steps, skips=skips, shapes=shapes)


def test_missing_grads_are_skipped_like_torch():
    skips = {0: (1,), 3: (1, 2), 4: (0,), 9: (0, 1, 2, 3, 4)}
    for ng_cls, t_cls, kw in [(optim.Adam, torch.optim.Adam, dict(lr=1e-2, amsgrad=True)),
                              (optim.AdamW, torch.optim.AdamW, dict(lr=1e-2)),
                              (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True))]:
        P, T, o1, o2 = _run_parity(ng_cls, t_cls, kw, np.float64, steps=12, skips=skips)
        optimkit.assert_state_close(o1, o2, P, T, dict(rtol=1e-10, atol=1e-14))


def test_param_groups_match_torch():
    o1 = optimkit.check_param_groups_like_torch(optim.Adam, torch.optim.Adam, dict(lr=1e-2), torch)
    assert o1.param_groups[1]["lr"] == 0.05 and o1.param_groups[0]["betas"] == (0.9, 0.999)


def test_add_param_group_later():
    P, T, grads = _setup(np.float64)
    o1, o2 = optim.SGD(P[:3], lr=0.1, momentum=0.9), torch.optim.SGD(T[:3], lr=0.1, momentum=0.9)
    for k in range(6):
        if k == 3:
            o1.add_param_group({"params": P[3:], "lr": 0.2})
            o2.add_param_group({"params": T[3:], "lr": 0.2})
        _set_grads(P, T, grads[k])
        o1.step()
        o2.step()
    _assert_close(P, T, np.float64)


def test_large_parameters_use_the_parallel_kernel_and_match_torch():
    for ng_cls, t_cls, kw in [(optim.Adam, torch.optim.Adam, dict(lr=1e-3, amsgrad=True)),
                              (optim.SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9))]:
        _run_parity(ng_cls, t_cls, kw, np.float32, steps=5, shapes=optimkit.LARGE_SHAPES)


# ---- state dict ---------------------------------------------------------------------------
def test_state_dict_layout_matches_torch():
    P, T, grads = _setup(np.float32, steps=3)
    o1, o2 = optim.Adam(P, lr=1e-2, amsgrad=True), torch.optim.Adam(T, lr=1e-2, amsgrad=True)
    s1, _ = optimkit.check_state_dict_like_torch(o1, o2, P, T, grads, torch, group_keys=(
        "params", "lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"))
    assert s1["param_groups"][0]["params"] == [0, 1, 2, 3, 4]


def test_load_torch_optimizer_state_then_continue_like_torch():
    optimkit.check_load_torch_state(optim.Adam, torch.optim.Adam, dict(lr=1e-2), np.float64, torch)


def test_load_state_dict_errors():
    P, _, _ = _setup(np.float32)
    o = optim.SGD(P, lr=0.1)
    sd = o.state_dict()
    with pytest.raises(ValueError, match="different number of parameter groups"):
        optim.SGD([{"params": P[:2]}, {"params": P[2:]}], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="doesn't match the size"):
        optim.SGD(P[:3], lr=0.1).load_state_dict(sd)


# ---- convergence and references --------------------------------------------------------
def _numpy_adam(params, grads_seq, lr, b1, b2, eps, wd, amsgrad, decoupled):
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    vmax = [np.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_seq, 1):
        for i, (p, g) in enumerate(zip(params, grads)):
            g, m[i], v[i] = optimkit.ref_moments(p, g, m[i], v[i], lr, b1, b2, wd, decoupled)
            vmax[i] = np.maximum(vmax[i], v[i])
            vh = (vmax[i] if amsgrad else v[i]) / (1 - b2 ** t)
            p -= lr * (m[i] / (1 - b1 ** t)) / (np.sqrt(vh) + eps)
    return params


@pytest.mark.parametrize("amsgrad,decoupled", [(False, False), (True, False), (False, True)])
def test_fused_equals_numpy_per_tensor_reference(amsgrad, decoupled):
    P, _, grads = _setup(np.float64, steps=15)
    ref = _numpy_adam([p.detach().numpy().copy() for p in P], grads, 1e-2, 0.9, 0.99, 1e-8, 0.05, amsgrad,
                      decoupled)
    o = (optim.AdamW if decoupled else optim.Adam)(P, lr=1e-2, betas=(0.9, 0.99), weight_decay=0.05,
                                                   amsgrad=amsgrad)
    train(o, P, grads, range(15))
    for p, r in zip(P, ref):
        np.testing.assert_allclose(p.detach().numpy(), r, rtol=1e-12, atol=1e-14)


# ---- the fused arena -------------------------------------------------------------------
def test_parameters_live_in_one_flat_arena():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    o = optim.Adam(model.parameters(), lr=1e-2)
    model(ng.randn(5, 4)).sum().backward()
    fresh = [p.grad for p in model.parameters()]
    o.step()
    bases = {id(p.array.base) for p in model.parameters()}
    assert len(bases) == 1  # every parameter is a view of the same buffer
    (bucket,) = o._arenas[id(o.param_groups[0])].buckets
    assert all(p.array.base is bucket.param for p in model.parameters())
    # fresh gradients are read where backward left them: not copied into the arena
    assert all(p.grad is g for p, g in zip(model.parameters(), fresh))
    assert not any(np.shares_memory(p.grad.array, bucket.grad) for p in model.parameters())
    assert all(bucket.gsrc[2 * i] == p.grad.array.ctypes.data for i, p in enumerate(model.parameters()))
    st = o.state[model[0].weight]
    assert st["exp_avg"].shape == (8, 4) and st["step"].item() == 1.0
    # set_to_none=False zeroes those arrays in place and the engine accumulates into them
    o.zero_grad(set_to_none=False)
    assert all(p.grad is g and not p.grad.array.any() for p, g in zip(model.parameters(), fresh))
    model(ng.randn(5, 4)).sum().backward()
    assert all(p.grad is g for p, g in zip(model.parameters(), fresh))
    o.step()
    assert all(p.grad is g for p, g in zip(model.parameters(), fresh))
    assert st["step"].item() == 2.0
    # a gradient that must be copied (another dtype) lands in the arena: p.grad becomes its slot
    w = model[0].weight
    w.grad = ng.tensor(np.ones((8, 4)))  # float64 for a float32 parameter
    o.step()
    assert w.grad.array.base is bucket.grad and w.grad.dtype == np.float32 and bucket.gsrc[0] == 0
    assert (w.grad.array == 1).all()
    o.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_arena_survives_dtype_change_and_rebinding():
    torch.manual_seed(0)
    tmodel = torch.nn.Linear(3, 2).double()
    model = nn.Linear(3, 2)
    model.load_state_dict(tmodel.state_dict())
    o1, o2 = optim.Adam(model.parameters(), lr=1e-2), torch.optim.Adam(tmodel.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    for k in range(8):
        if k == 3:
            model.double()  # rebinding p.array: the optimizer rebuilds its arena, carrying state over
        x = rng.standard_normal((4, 3))
        dt = model.weight.dtype
        model.zero_grad()
        tmodel.zero_grad()
        model(ng.tensor(x.astype(dt))).sum().backward()
        tmodel(torch.tensor(x)).sum().backward()
        o1.step()
        o2.step()
    assert model.weight.dtype == np.float64
    assert o1.state[model.weight]["exp_avg"].dtype == np.float64
    np.testing.assert_allclose(model.weight.detach().numpy(), tmodel.weight.detach().numpy(), rtol=1e-5)


def test_step_bumps_version_so_stale_graphs_raise():
    lin = nn.Linear(2, 2)
    o = optim.SGD(lin.parameters(), lr=0.1)
    lin(ng.randn(1, 2)).sum().backward()
    o.step()
    out = lin(ng.randn(1, 2)).sum()
    lin(ng.randn(1, 2)).sum().backward()
    o.step()  # modifies the weight saved by `out`'s graph
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        out.backward()


def test_closure_and_zero_grad():
    x = nn.Parameter(ng.tensor([1.0, -2.0]))
    o = optim.SGD([x], lr=0.5)
    calls = []

    def closure():
        o.zero_grad()
        loss = (x * x).sum()
        loss.backward()
        calls.append(1)
        return loss

    loss = o.step(closure)
    assert calls == [1] and loss.item() == 5.0
    assert x.tolist() == [0.0, 0.0]


def test_constructor_validation():
    p = nn.Parameter(ng.ones(2))
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        optim.SGD({p}, lr=0.1)
    with pytest.raises(TypeError, match="iterable"):
        optim.Adam(p)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.Adam([p], lr=-1)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.warns(UserWarning, match="duplicate"):
        o = optim.SGD([p, p], lr=0.1)
    assert len(o.param_groups[0]["params"]) == 1
    assert repr(optim.SGD([p], lr=0.1)).startswith("SGD (\nParameter Group 0\n    dampening: 0\n    lr: 0.1")
    assert optim.AdamW([p]).defaults["weight_decay"] == 1e-2 and optim.SGD([p]).defaults["lr"] == 1e-3


def test_mlp_training_matches_torch_for_a_few_steps():
    """End to end: model, fused cross_entropy, backward and Adam against PyTorch."""
    tm = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).double()
    m = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4)).double()
    m.load_state_dict(tm.state_dict())
    o1, o2 = optim.Adam(m.parameters(), lr=1e-2), torch.optim.Adam(tm.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    for _ in range(10):
        x = rng.standard_normal((8, 6))
        y = rng.integers(0, 4, 8)
        l1 = nn.functional.cross_entropy(m(ng.tensor(x)), ng.tensor(y))
        l2 = torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y))
        assert math.isclose(l1.item(), l2.item(), rel_tol=1e-10)
        o1.zero_grad()
        o2.zero_grad()
        l1.backward()
        l2.backward()
        o1.step()
        o2.step()
    for (n, p), (tn, tp) in zip(m.named_parameters(), tm.named_parameters()):
        assert n == tn
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_float16_parameters_are_refused_clearly():
    p = nn.Parameter(ng.ones(3, dtype=ng.float16))
    p.grad = ng.ones(3, dtype=ng.float16)
    with pytest.raises(TypeError, match="float16"):
        optim.Adam([p]).step()


def test_mixed_dtype_group_uses_one_bucket_per_dtype():
    P32, T32, g32 = _setup(np.float32, shapes=[(3, 2), (2,)], steps=4)
    P64, T64, g64 = _setup(np.float64, shapes=[(4,)], steps=4)
    o1 = optim.Adam(P32 + P64, lr=1e-2)
    o2 = torch.optim.Adam(T32 + T64, lr=1e-2)
    for k in range(4):
        _set_grads(P32 + P64, T32 + T64, g32[k] + g64[k])
        o1.step()
        o2.step()
    _assert_close(P32, T32, np.float32)
    _assert_close(P64, T64, np.float64)
    assert len(o1._arenas[id(o1.param_groups[0])].buckets) == 2


def test_capturable_is_accepted_and_differentiable_is_refused():
    P, _, grads = _setup(np.float32, steps=4)
    Q = [nn.Parameter(ng.tensor(p.detach().numpy().copy())) for p in P]
    a, b = optim.Adam(P, lr=1e-2), optim.Adam(Q, lr=1e-2, capturable=True, foreach=True, fused=True)
    train(a, P, grads, range(4))
    train(b, Q, grads, range(4))
    for p, q in zip(P, Q):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    for make in (lambda: optim.Adam(P, differentiable=True), lambda: optim.SGD(P, lr=0.1, differentiable=True)):
        with pytest.raises(NotImplementedError, match="differentiable"):
            make()
