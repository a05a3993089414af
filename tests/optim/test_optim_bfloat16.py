"""Optimizers on bfloat16 parameters (``numbagrad/optim/optimizer.py``, the ``_Wide`` bucket).

* Every fused optimizer's bfloat16 step is its float32 step on the widened parameters,
  gradients and state, rounded once to nearest even: bit for bit against a float32 twin
  loaded from the bfloat16 optimizer's ``state_dict`` (the same kernel decides both, so
  the bits do not depend on the CPU), step after step; the state stays bfloat16 and
  ``step`` float32, as torch's.
* Against torch's bfloat16 optimizers (which round after every op) over five steps: SGD
  with momentum (dampening, Nesterov, weight decay), Adam (amsgrad, L2), AdamW, to a few
  bfloat16 ulps of the tensors' scale.
* Mixed groups (a float32 and a bfloat16 parameter in one group) and float32 gradients
  of a bfloat16 parameter.
torch is an optional oracle: its test skips without it.
"""
import numpy as np
import pytest

import numbagrad as ng
from numbagrad import optim
from numbagrad.kernels.cpu.convert import to_bf16

SHAPES = ((7, 5), (33,), (3, 2, 4))
FUSED = {
    "SGD": dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "SGD-nesterov": dict(lr=0.1, momentum=0.9, nesterov=True),
    "Adam": dict(lr=1e-2, weight_decay=0.1, amsgrad=True),
    "AdamW": dict(lr=1e-2),
    "Adamax": dict(lr=1e-2),
    "RAdam": dict(lr=1e-2),
    "NAdam": dict(lr=1e-2),
    "RMSprop": dict(lr=1e-2, momentum=0.5, centered=True),
    "Adagrad": dict(lr=1e-1),
    "Adadelta": dict(lr=1.0),
    "Lamb": dict(lr=1e-2),
    "Lion": dict(lr=1e-3),
}


def _data(seed, steps):
    r = np.random.default_rng(seed)
    ps = [r.standard_normal(s).astype(np.float32) for s in SHAPES]
    gs = [[r.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]
    return ps, gs


def _bits(t):
    return np.ascontiguousarray(t.detach().numpy()).view(np.uint16)


@pytest.mark.parametrize("name", list(FUSED))
def test_bf16_step_is_the_float32_step_rounded_once(name):
    cls = getattr(optim, name.split("-")[0])
    ps, gs = _data(1, 3)
    params = [ng.tensor(p).bfloat16().requires_grad_() for p in ps]
    opt = cls(params, **FUSED[name])
    for step_grads in gs:
        # the float32 twin: widened parameters and the bfloat16 optimizer's state, loaded
        twins = [ng.tensor(p.detach().float().numpy()).requires_grad_() for p in params]
        twin_opt = cls(twins, **FUSED[name])
        twin_opt.load_state_dict(opt.state_dict())
        for p, t, g in zip(params, twins, step_grads):
            p.grad = ng.tensor(g).bfloat16()
            t.grad = p.grad.float()
        opt.step()
        twin_opt.step()
        for p, t in zip(params, twins):
            assert p.dtype == ng.bfloat16
            np.testing.assert_array_equal(_bits(p), to_bf16(t.detach().numpy()).view(np.uint16))
            for key, v in opt.state[p].items():
                tv = twin_opt.state[t][key]
                if key in ("step", "mu_product"):
                    assert v.dtype == ng.float32
                    np.testing.assert_array_equal(v.numpy(), tv.numpy())
                else:
                    assert v.dtype == ng.bfloat16, key
                    np.testing.assert_array_equal(_bits(v), to_bf16(tv.numpy()).view(np.uint16), err_msg=key)


# Large steps, so that five updates move the parameters by 40 to 180 bfloat16 ulps of their
# scale: the tolerance (4 such ulps) then tells the options apart (no dampening, no weight
# decay or plain momentum in place of Nesterov's each put numbagrad 11 to 56 ulps off).
TORCH_CASES = {
    "SGD": dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.1),
    "SGD-nesterov": dict(lr=0.1, momentum=0.9, nesterov=True),
    "Adam": dict(lr=0.1, weight_decay=0.1, amsgrad=True),
    "AdamW": dict(lr=0.1, weight_decay=0.5),
}


@pytest.mark.parametrize("name", list(TORCH_CASES))
def test_bf16_optimizers_follow_torch(name):
    torch = pytest.importorskip("torch")
    cls = name.split("-")[0]
    ps, gs = _data(2, 5)
    params = [ng.tensor(p).bfloat16().requires_grad_() for p in ps]
    tparams = [torch.from_numpy(p).bfloat16().requires_grad_() for p in ps]
    opt = getattr(optim, cls)(params, **TORCH_CASES[name])
    topt = getattr(torch.optim, cls)(tparams, foreach=False, **TORCH_CASES[name])
    for step_grads in gs:
        for p, tp, g in zip(params, tparams, step_grads):
            p.grad = ng.tensor(g).bfloat16()
            tp.grad = torch.from_numpy(g).bfloat16()
        opt.step()
        topt.step()
    for p, tp in zip(params, tparams):
        assert p.dtype == ng.bfloat16 and tp.dtype == torch.bfloat16
        a, b = p.detach().float().numpy(), tp.detach().float().numpy()
        # torch rounds each op's result to bfloat16, numbagrad each stored value once per step
        # (measured: at most 1.8 ulps of the scale apart after five steps)
        np.testing.assert_allclose(a, b, rtol=0, atol=4 * 2.0 ** -8 * np.abs(b).max())
        st, tst = opt.state[p], topt.state[tp]
        for key, v in tst.items():
            if key == "step":
                assert float(st[key]) == float(v)
                continue
            assert st[key].dtype == ng.bfloat16, key
            sv, tv = st[key].float().numpy(), v.float().numpy()
            np.testing.assert_allclose(sv, tv, rtol=0, atol=4 * 2.0 ** -8 * np.abs(tv).max(), err_msg=key)


def test_mixed_dtypes_in_one_group_and_float32_gradients():
    ps, gs = _data(3, 2)
    a = ng.tensor(ps[0]).requires_grad_()                 # float32
    b = ng.tensor(ps[1]).bfloat16().requires_grad_()      # bfloat16
    ref_a = ng.tensor(ps[0]).requires_grad_()
    ref_b = ng.tensor(b.detach().float().numpy()).requires_grad_()
    opt = optim.Adam([a, b], lr=0.1)
    ref = optim.Adam([ref_a, ref_b], lr=0.1)
    a.grad, ref_a.grad = ng.tensor(gs[0][0]), ng.tensor(gs[0][0])
    b.grad = ng.tensor(gs[0][1])                           # float32 gradient of a bfloat16 parameter
    ref_b.grad = b.grad.bfloat16().float()                 # (it is rounded into the bfloat16 slot)
    opt.step()
    ref.step()
    np.testing.assert_array_equal(a.detach().numpy(), ref_a.detach().numpy())
    assert a.dtype == ng.float32 and b.dtype == ng.bfloat16
    np.testing.assert_array_equal(_bits(b), to_bf16(ref_b.detach().numpy()).view(np.uint16))


def test_bf16_training_reduces_the_loss():
    ng.manual_seed(0)
    net = ng.nn.Sequential(ng.nn.Linear(8, 16), ng.nn.Tanh(), ng.nn.Linear(16, 1)).bfloat16()
    r = np.random.default_rng(4)
    x = ng.tensor(r.standard_normal((64, 8)).astype(np.float32)).bfloat16()
    y = ng.tensor(r.standard_normal((64, 1)).astype(np.float32)).bfloat16()
    opt = optim.AdamW(net.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = ng.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(p.dtype == ng.bfloat16 for p in net.parameters())
    assert losses[-1] < 0.8 * losses[0], losses


def test_lbfgs_refuses_bfloat16_by_name():
    p = ng.randn(5).bfloat16().requires_grad_()
    opt = optim.LBFGS([p])

    def closure():
        opt.zero_grad()
        loss = (p.float() ** 2).sum()
        loss.backward()
        return loss
    with pytest.raises(TypeError, match="LBFGS: bfloat16 parameters"):
        opt.step(closure)
