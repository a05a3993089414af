"""``numbagrad.optim.swa_utils`` against ``torch.optim.swa_utils``: AveragedModel (SWA and EMA,
per-tensor and multi-tensor averaging functions, with and without buffers), update_bn with
a BatchNorm model and a list-of-batches loader, and the SWALR schedule."""
import math

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn, optim
from numbagrad.optim.swa_utils import (SWALR, AveragedModel, get_ema_avg_fn, get_ema_multi_avg_fn,
                                       get_swa_avg_fn, get_swa_multi_avg_fn, update_bn)

torch = pytest.importorskip("torch")


def _pair(seed=0):
    """The same small model (Linear, BatchNorm1d, Linear) in numbagrad and torch."""
    m = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    t = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    r = np.random.default_rng(seed)
    st = {}
    for k, v in t.state_dict().items():
        st[k] = (r.standard_normal(tuple(v.shape)).astype(np.float32) if v.dtype == torch.float32
                 else np.asarray(int(r.integers(0, 5)), np.int64))
    st["1.running_var"] = np.abs(st["1.running_var"]) + 0.5
    m.load_state_dict(st)
    t.load_state_dict({k: torch.tensor(v) for k, v in st.items()})
    return m, t


def _perturb(m, t, seed):
    """Move both models' parameters and buffers the same way (a fake training step)."""
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for (k, a), (_, b) in zip(m.state_dict(keep_vars=True).items(), t.state_dict(keep_vars=True).items()):
            d = r.standard_normal(tuple(a.shape))
            if k.endswith("running_var"):
                d = np.abs(d)   # stays a variance
            if a.dtype.kind == "f":
                a.array[...] += d.astype(a.dtype)
                b.add_(torch.tensor(d.astype(a.dtype)))
            else:
                a.array[...] += 3
                b.add_(3)


def _assert_models_equal(am, at, rtol=1e-6):
    sa, st = am.state_dict(), at.state_dict()
    assert list(sa) == list(st)
    for k in sa:
        a = sa[k].numpy() if hasattr(sa[k], "numpy") else np.asarray(sa[k])
        np.testing.assert_allclose(a, st[k].numpy(), rtol=rtol, atol=1e-6, err_msg=k)
        assert a.dtype == st[k].numpy().dtype, k


CASES = {
    "swa_default": ({}, {}),
    "ema_multi": (dict(multi_avg_fn=get_ema_multi_avg_fn(0.9)),
                  dict(multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))),
    "swa_multi": (dict(multi_avg_fn=get_swa_multi_avg_fn()),
                  dict(multi_avg_fn=torch.optim.swa_utils.get_swa_multi_avg_fn())),
    "ema_fn": (dict(avg_fn=get_ema_avg_fn(0.8)), dict(avg_fn=torch.optim.swa_utils.get_ema_avg_fn(0.8))),
    "swa_fn": (dict(avg_fn=get_swa_avg_fn()), dict(avg_fn=torch.optim.swa_utils.get_swa_avg_fn())),
}


@pytest.mark.parametrize("use_buffers", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_averaged_model_matches_torch(case, use_buffers):
    kn, kt = CASES[case]
    if use_buffers and case == "swa_multi":
        return _swa_multi_with_buffers_against_numpy()
    m, t = _pair()
    am = AveragedModel(m, use_buffers=use_buffers, **kn)
    at = torch.optim.swa_utils.AveragedModel(t, use_buffers=use_buffers, **kt)
    _assert_models_equal(am, at)
    for k in range(5):
        _perturb(m, t, k)
        am.update_parameters(m)
        at.update_parameters(t)
        _assert_models_equal(am, at)
    assert am.n_averaged.item() == 5 and am.n_averaged.dtype == np.int64
    x = np.random.default_rng(9).standard_normal((3, 4)).astype(np.float32)
    am.eval()
    at.eval()
    np.testing.assert_allclose(am(ng.tensor(x)).detach().numpy(), at(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    # the source model is untouched by the averaging and not aliased
    assert am.module[0].weight is not m[0].weight


def _swa_multi_with_buffers_against_numpy():
    """torch's swa multi_avg_fn raises on the int64 num_batches_tracked buffer (addcdiv), so
    this case is checked against NumPy: float parameters and buffers are the mean of the
    snapshots taken at each update (the first update copies, as in torch); the int buffer is
    the running mean ``a + (b - a) / (n + 1)`` truncated to an integer after each update
    (numbagrad's documented choice)."""
    m, t = _pair()
    am = AveragedModel(m, use_buffers=True, multi_avg_fn=get_swa_multi_avg_fn())
    snaps = []
    ints = {}
    for k in range(5):
        _perturb(m, t, k)
        am.update_parameters(m)
        snaps.append({k2: np.array(v.numpy()) for k2, v in m.state_dict().items()})
        for name, v in snaps[-1].items():
            if v.dtype.kind != "f":
                ints[name] = float(v) if k == 0 else float(np.trunc(ints[name] + (float(v) - ints[name]) / (k + 1)))
    got = am.module.state_dict()
    for name, v in got.items():
        v = v.numpy()
        if name in ints:
            assert v.dtype == np.int64 and int(v) == int(ints[name]), name
        else:
            np.testing.assert_allclose(v, np.mean([sn[name] for sn in snaps], axis=0), rtol=1e-5, atol=1e-5,
                                       err_msg=name)
    assert am.n_averaged.item() == 5


def test_swa_is_the_mean_and_ema_the_closed_form():
    """Independent of torch: SWA = mean of the snapshots; EMA = decay-weighted closed form."""
    m = nn.Linear(3, 2)
    snaps = []
    am = AveragedModel(m)
    em = AveragedModel(m, multi_avg_fn=get_ema_multi_avg_fn(0.7))
    for k in range(4):
        with ng.no_grad():
            m.weight.array[...] = np.full((2, 3), float(k * k), np.float32)
        snaps.append(m.weight.detach().numpy().copy())
        am.update_parameters(m)
        em.update_parameters(m)
    np.testing.assert_allclose(am.module.weight.detach().numpy(), np.mean(snaps, axis=0), rtol=1e-6)
    e = snaps[0]
    for s in snaps[1:]:
        e = 0.7 * e + 0.3 * s
    np.testing.assert_allclose(em.module.weight.detach().numpy(), e, rtol=1e-6)
    with pytest.raises(ValueError):
        AveragedModel(m, avg_fn=get_swa_avg_fn(), multi_avg_fn=get_swa_multi_avg_fn())


def test_update_bn_matches_torch():
    m, t = _pair(seed=3)
    r = np.random.default_rng(4)
    batches = [r.standard_normal((5, 4)).astype(np.float32) * (k + 1) + k for k in range(4)]
    m[1].momentum = 0.3
    t[1].momentum = 0.3
    m.eval()
    t.eval()
    update_bn([(ng.tensor(b), 0) for b in batches], m)
    torch.optim.swa_utils.update_bn([(torch.tensor(b), 0) for b in batches], t)
    for k in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        np.testing.assert_allclose(m.state_dict()[k].numpy(), t.state_dict()[k].numpy(), rtol=1e-5, atol=1e-6)
    assert m[1].momentum == 0.3 and not m.training and not m[1].training
    # the cumulative average: running mean = mean of the batch means
    np.testing.assert_allclose(m[1].running_mean.numpy(), np.mean([b @ m[0].weight.detach().numpy().T
                                                                   + m[0].bias.detach().numpy()
                                                                   for b in batches], axis=(0, 1)),
                               rtol=1e-4, atol=1e-5)
    # plain tensors as batches, a model in training mode stays in it; no BatchNorm: a no-op
    m.train()
    update_bn([ng.tensor(b) for b in batches], m)
    assert m.training
    lin = nn.Linear(2, 2)
    update_bn([ng.tensor(np.zeros((1, 2), np.float32))], lin)


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 3])
def test_swalr_matches_torch(strategy, anneal_epochs):
    m, t = _pair()
    o = optim.SGD([{"params": list(m.parameters())[:2], "lr": 0.5}, {"params": list(m.parameters())[2:]}], lr=0.2)
    ot = torch.optim.SGD([{"params": list(t.parameters())[:2], "lr": 0.5}, {"params": list(t.parameters())[2:]}],
                         lr=0.2)
    s = SWALR(o, swa_lr=[0.05, 0.01], anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    st = torch.optim.swa_utils.SWALR(ot, swa_lr=[0.05, 0.01], anneal_epochs=anneal_epochs,
                                     anneal_strategy=strategy)
    for _ in range(6):
        np.testing.assert_allclose(s.get_last_lr(), st.get_last_lr(), rtol=1e-12)
        assert [g["lr"] for g in o.param_groups] == pytest.approx([g["lr"] for g in ot.param_groups], rel=1e-12)
        o.step()
        ot.step()
        s.step()
        st.step()
    sd, sdt = s.state_dict(), st.state_dict()
    for k in ("anneal_epochs", "base_lrs", "last_epoch", "_step_count", "_last_lr", "_anneal_strategy"):
        assert sd[k] == pytest.approx(sdt[k]) if isinstance(sdt[k], (list, float)) else sd[k] == sdt[k], k
    s2 = SWALR(o, swa_lr=0.05)
    s2.load_state_dict(sd)
    assert s2.last_epoch == s.last_epoch and s2.get_last_lr() == s.get_last_lr()


def test_swalr_errors():
    o = optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        SWALR(o, 0.1, anneal_strategy="step")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
        SWALR(o, 0.1, anneal_epochs=-1)
    with pytest.raises(ValueError, match="swa_lr must have the same length"):
        SWALR(o, [0.1, 0.2])
    assert math.isclose(SWALR(o, 0.1, anneal_epochs=2, anneal_strategy="linear").get_last_lr()[0], 0.1)


@pytest.mark.parametrize("strategy", ["cos", "linear"])
def test_swalr_long_run_after_another_scheduler_matches_torch(strategy):
    """30 steps, 2 groups, default ``anneal_epochs=10``: SWALR takes over from a
    MultiplicativeLR after 5 steps (annealing from whatever lr it finds), then a jump with
    ``step(epoch)`` and a state_dict round trip; it is an ``LRScheduler``."""
    from numbagrad.optim.lr_scheduler import LRScheduler, MultiplicativeLR
    p = [ng.tensor(np.zeros(2, np.float32), requires_grad=True) for _ in range(2)]
    pt = [torch.zeros(2, requires_grad=True) for _ in range(2)]
    o = optim.SGD([{"params": [p[0]], "lr": 0.5}, {"params": [p[1]]}], lr=0.2, momentum=0.9)
    ot = torch.optim.SGD([{"params": [pt[0]], "lr": 0.5}, {"params": [pt[1]]}], lr=0.2, momentum=0.9)
    pre, pre_t = MultiplicativeLR(o, lambda e: 0.9), torch.optim.lr_scheduler.MultiplicativeLR(ot, lambda e: 0.9)
    for _ in range(5):
        o.step()
        ot.step()
        pre.step()
        pre_t.step()
    s = SWALR(o, swa_lr=[0.05, 0.01], anneal_strategy=strategy)
    st = torch.optim.swa_utils.SWALR(ot, swa_lr=[0.05, 0.01], anneal_strategy=strategy)
    assert isinstance(s, LRScheduler)
    for _ in range(30):
        assert s.get_last_lr() == pytest.approx(st.get_last_lr(), rel=1e-12)
        assert [g["lr"] for g in o.param_groups] == pytest.approx([g["lr"] for g in ot.param_groups], rel=1e-12)
        o.step()
        ot.step()
        s.step()
        st.step()
    assert s.last_epoch == st.last_epoch == 30 and s._step_count == st._step_count
    with pytest.warns(UserWarning):
        s.step(3)
    with pytest.warns(UserWarning):
        st.step(3)
    assert s.last_epoch == st.last_epoch == 3
    assert s.get_last_lr() == pytest.approx(st.get_last_lr(), rel=1e-12)
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["_anneal_strategy"] == strategy
    s2 = SWALR(o, swa_lr=0.3, anneal_strategy="linear" if strategy == "cos" else "cos")
    s2.load_state_dict(sd)
    assert s2.anneal_func is s._cosine_anneal if strategy == "cos" else s2.anneal_func is s._linear_anneal
    assert (s2.last_epoch, s2._step_count, s2.get_last_lr()) == (s.last_epoch, s._step_count, s.get_last_lr())
