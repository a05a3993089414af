"""Learning-rate schedulers: step-for-step equality of lr (and momentum/betas)
sequences with torch.optim.lr_scheduler, ReduceLROnPlateau on metric sequences,
state_dict round trips, compositions, fractional epochs of CosineAnnealingWarmRestarts,
LinearWarmup against closed forms, and optimizers actually using the scheduled lr."""
import copy
import math
import warnings

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn, optim
from numbagrad.optim import lr_scheduler as L
from numbagrad.optim import schedules

# Nested compositions step their children at construction, before any optimizer.step()
# (torch warns there too); the warning itself is tested below with pytest.warns.
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")

STEPS = 300
LRS = [0.1, 0.03, 0.25]


# ---- harness --------------------------------------------------------------------------
def _ng_opt(kind, lrs=LRS):
    groups = [{"params": [nn.Parameter(ng.tensor(np.ones(2)))], "lr": lr} for lr in lrs]
    if kind == "sgd":
        return optim.SGD(groups, lr=0.1, momentum=0.9)
    if kind == "sgd0":
        return optim.SGD(groups, lr=0.1)
    if kind == "adam":
        return optim.Adam(groups, lr=1e-3, betas=(0.9, 0.99))
    return optim.AdamW(groups, lr=1e-3)


def _torch_opt(torch, kind, lrs=LRS):
    groups = [{"params": [torch.nn.Parameter(torch.ones(2, dtype=torch.float64))], "lr": lr} for lr in lrs]
    if kind == "sgd":
        return torch.optim.SGD(groups, lr=0.1, momentum=0.9)
    if kind == "sgd0":
        return torch.optim.SGD(groups, lr=0.1)
    if kind == "adam":
        return torch.optim.Adam(groups, lr=1e-3, betas=(0.9, 0.99))
    return torch.optim.AdamW(groups, lr=1e-3)


def _snapshot(opt, sched):
    rec = [float(g["lr"]) for g in opt.param_groups]
    rec += [float(x) for x in sched.get_last_lr()]
    for g in opt.param_groups:
        if "momentum" in g:
            rec.append(float(g["momentum"]))
        if "betas" in g:
            rec += [float(b) for b in g["betas"]]
    return rec


def _run(opt, sched, steps=STEPS):
    seq = [_snapshot(opt, sched)]
    for _ in range(steps):
        opt.step()
        sched.step()
        seq.append(_snapshot(opt, sched))
    return np.array(seq, dtype=np.float64)


def _close(a, b, rtol=1e-6):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-15)


# (id, optimizer kind, factory(module, optimizer)). The factory only uses names that
# both modules share, so the same expression builds the numbagrad and the torch one.
CASES = [
    ("lambda", "sgd", lambda M, o: M.LambdaLR(o, lambda e: 0.97 ** e + 0.01 * (e % 7))),
    ("lambda_per_group", "sgd", lambda M, o: M.LambdaLR(o, [lambda e: 1 / (1 + e), lambda e: 0.99 ** e,
                                                            lambda e: math.cos(e / 40) ** 2])),
    ("multiplicative", "sgd", lambda M, o: M.MultiplicativeLR(o, lambda e: 0.995 if e % 3 else 1.01)),
    ("step", "sgd", lambda M, o: M.StepLR(o, step_size=30, gamma=0.5)),
    ("step_default", "adam", lambda M, o: M.StepLR(o, 17)),
    ("multistep", "sgd", lambda M, o: M.MultiStepLR(o, [30, 80, 80, 150], gamma=0.3)),
    ("constant", "sgd", lambda M, o: M.ConstantLR(o, factor=0.5, total_iters=40)),
    ("constant_default", "adam", lambda M, o: M.ConstantLR(o)),
    ("linear", "sgd", lambda M, o: M.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=50)),
    ("linear_down", "adam", lambda M, o: M.LinearLR(o, start_factor=1.0, end_factor=0.05, total_iters=220)),
    ("exponential", "sgd", lambda M, o: M.ExponentialLR(o, gamma=0.99)),
    ("polynomial", "sgd", lambda M, o: M.PolynomialLR(o, total_iters=120, power=2.0)),
    ("polynomial_default", "adam", lambda M, o: M.PolynomialLR(o)),
    ("cosine", "sgd", lambda M, o: M.CosineAnnealingLR(o, T_max=70, eta_min=1e-4)),
    ("cosine_long", "adam", lambda M, o: M.CosineAnnealingLR(o, T_max=500)),
    ("warm_restarts", "sgd", lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=20, T_mult=2, eta_min=1e-5)),
    ("warm_restarts_1", "adam", lambda M, o: M.CosineAnnealingWarmRestarts(o, T_0=13)),
    ("cyclic_triangular_sgd", "sgd", lambda M, o: M.CyclicLR(o, 0.01, [0.1, 0.2, 0.05], step_size_up=25,
                                                             step_size_down=15)),
    ("cyclic_triangular2_adam", "adam", lambda M, o: M.CyclicLR(o, [0.001, 0.002, 0.003], 0.05,
                                                                step_size_up=20, mode="triangular2",
                                                                base_momentum=0.85, max_momentum=0.95)),
    ("cyclic_exp_range_sgd", "sgd", lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=30, mode="exp_range",
                                                            gamma=0.995,
                                                            base_momentum=[0.7, 0.8, 0.85],
                                                            max_momentum=[0.9, 0.95, 0.99])),
    ("cyclic_scale_fn_cycle", "adamw", lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=12,
                                                               scale_fn=lambda x: 1.0 / x)),
    ("cyclic_scale_fn_iter", "sgd", lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=12, step_size_down=31,
                                                            scale_fn=lambda x: 0.999 ** x,
                                                            scale_mode="iterations")),
    ("cyclic_no_momentum", "sgd0", lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=7, cycle_momentum=False)),
    ("onecycle_cos_sgd", "sgd", lambda M, o: M.OneCycleLR(o, max_lr=0.5, total_steps=STEPS)),
    ("onecycle_linear_adam", "adam", lambda M, o: M.OneCycleLR(o, max_lr=[0.5, 0.1, 0.02], total_steps=STEPS + 20,
                                                               anneal_strategy="linear", pct_start=0.25)),
    ("onecycle_three_phase_adam", "adam", lambda M, o: M.OneCycleLR(o, max_lr=0.3, epochs=10, steps_per_epoch=31,
                                                                    three_phase=True, div_factor=10.0,
                                                                    final_div_factor=100.0)),
    ("onecycle_three_phase_sgd", "sgd", lambda M, o: M.OneCycleLR(o, max_lr=0.3, total_steps=STEPS,
                                                                  three_phase=True, anneal_strategy="linear",
                                                                  base_momentum=[0.8, 0.85, 0.7],
                                                                  max_momentum=0.97)),
    ("onecycle_no_momentum", "sgd0", lambda M, o: M.OneCycleLR(o, max_lr=0.3, total_steps=STEPS,
                                                               cycle_momentum=False)),
    ("sequential", "sgd", lambda M, o: M.SequentialLR(o, [M.LinearLR(o, 0.1, total_iters=10),
                                                          M.ExponentialLR(o, 0.98)], milestones=[10])),
    ("sequential_three", "adam", lambda M, o: M.SequentialLR(o, [M.ConstantLR(o, 0.3, total_iters=50),
                                                                 M.CosineAnnealingLR(o, T_max=40, eta_min=1e-3),
                                                                 M.StepLR(o, 25, 0.7)], milestones=[20, 100])),
    ("sequential_multistep", "sgd", lambda M, o: M.SequentialLR(o, [M.MultiStepLR(o, [5, 9], 0.5),
                                                                    M.PolynomialLR(o, 100, 1.5),
                                                                    M.LambdaLR(o, lambda e: 1 / (1 + 0.1 * e))],
                                                                milestones=[30, 160])),
    ("chained", "sgd", lambda M, o: M.ChainedScheduler([M.ConstantLR(o, 0.1, total_iters=4),
                                                        M.ExponentialLR(o, 0.99)])),
    ("chained_three", "adam", lambda M, o: M.ChainedScheduler([M.LinearLR(o, 0.25, total_iters=30),
                                                               M.CosineAnnealingLR(o, T_max=80),
                                                               M.MultiStepLR(o, [100, 200], 0.5)], optimizer=o)),
    ("chained_in_sequential", "sgd", lambda M, o: M.SequentialLR(o, [
        M.ChainedScheduler([M.ConstantLR(o, 0.5, total_iters=8), M.ExponentialLR(o, 0.97)]),
        M.StepLR(o, 20, 0.5)], milestones=[40])),
]
IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("name,kind,make", CASES, ids=IDS)
def test_sequence_matches_torch(name, kind, make):
    torch = pytest.importorskip("torch")
    o1, o2 = _ng_opt(kind), _torch_opt(torch, kind)
    s1, s2 = make(L, o1), make(torch.optim.lr_scheduler, o2)
    a, b = _run(o1, s1), _run(o2, s2)
    _close(a, b)
    assert getattr(s1, "last_epoch", None) == getattr(s2, "last_epoch", None)
    if hasattr(s2, "base_lrs"):
        _close(s1.base_lrs, s2.base_lrs)
    for g1, g2 in zip(o1.param_groups, o2.param_groups):
        for key in ("initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"):
            assert (key in g1) == (key in g2)
            if key in g2:
                _close(g1[key], g2[key])


def test_two_schedulers_on_one_optimizer_compose_like_torch():
    torch = pytest.importorskip("torch")
    seqs = []
    for M, o in ((L, _ng_opt("sgd")), (torch.optim.lr_scheduler, _torch_opt(torch, "sgd"))):
        s1 = M.LinearLR(o, 0.3, total_iters=25)
        s2 = M.StepLR(o, 40, 0.5)
        s3 = M.MultiplicativeLR(o, lambda e: 0.999)
        seq = []
        for _ in range(STEPS):
            o.step()
            s1.step()
            s2.step()
            s3.step()
            seq.append([g["lr"] for g in o.param_groups] + s1.get_last_lr() + s3.get_last_lr())
        seqs.append(seq)
    _close(*seqs)


CLOSED = ["step", "multistep", "constant", "linear", "exponential", "polynomial", "cosine", "lambda",
          "cyclic_triangular_sgd", "onecycle_cos_sgd", "warm_restarts", "warm_restarts_1"]


@pytest.mark.parametrize("name", CLOSED)
def test_step_with_epoch_uses_the_closed_form_like_torch(name):
    torch = pytest.importorskip("torch")
    _, kind, make = CASES[IDS.index(name)]
    o1, o2 = _ng_opt(kind), _torch_opt(torch, kind)
    s1, s2 = make(L, o1), make(torch.optim.lr_scheduler, o2)
    rng = np.random.default_rng(1)
    epochs = [int(e) for e in rng.integers(0, STEPS, 40)] + [0, 30, 60, 80, 140, 150, 151]
    seq1, seq2 = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, e in enumerate(epochs):
            o1.step()
            o2.step()
            if k % 3 == 2:  # mix in recursive steps
                s1.step()
                s2.step()
            else:
                s1.step(e)
                s2.step(e)
            seq1.append(_snapshot(o1, s1))
            seq2.append(_snapshot(o2, s2))
    _close(seq1, seq2)


def test_epoch_argument_warns():
    o = _ng_opt("sgd")
    s = L.StepLR(o, 3)
    o.step()
    with pytest.warns(UserWarning, match="deprecated"):
        s.step(5)
    assert s.last_epoch == 5 and s.get_last_lr() == pytest.approx([lr * 0.1 for lr in LRS])


def test_resume_with_last_epoch_matches_torch():
    torch = pytest.importorskip("torch")
    seqs = []
    for M, o in ((L, _ng_opt("sgd")), (torch.optim.lr_scheduler, _torch_opt(torch, "sgd"))):
        for g in o.param_groups:
            g["initial_lr"] = g["lr"] * 2
        seq = []
        for make in (lambda: M.StepLR(o, 7, 0.5, last_epoch=20), lambda: M.ExponentialLR(o, 0.9, last_epoch=4),
                     lambda: M.CosineAnnealingLR(o, 30, last_epoch=11), lambda: M.LinearLR(o, 0.5, last_epoch=2),
                     lambda: M.PolynomialLR(o, 40, last_epoch=5),
                     lambda: M.CosineAnnealingWarmRestarts(o, 9, 2, last_epoch=3),
                     lambda: M.LambdaLR(o, lambda e: 0.9 ** e, last_epoch=6)):
            s = make()
            for _ in range(25):
                o.step()
                s.step()
                seq.append(list(s.get_last_lr()))
        seqs.append(seq)
    _close(*seqs)


def test_resume_without_initial_lr_raises():
    with pytest.raises(KeyError, match="initial_lr"):
        L.StepLR(_ng_opt("sgd"), 3, last_epoch=4)


def test_onecycle_past_total_steps_raises():
    o = _ng_opt("sgd")
    s = L.OneCycleLR(o, 0.1, total_steps=5)
    for _ in range(5):
        o.step()
        s.step()
    with pytest.raises(ValueError, match="total steps is 5"):
        s.step()


# ---- ReduceLROnPlateau ----------------------------------------------------------------
def _metrics(seed, n=STEPS):
    rng = np.random.default_rng(seed)
    out, v = [], 10.0
    for k in range(n):
        phase = (k // 25) % 4
        if phase == 0:      # improving
            v *= 0.97
        elif phase == 1:    # plateau: exactly flat
            pass
        elif phase == 2:    # improvements smaller than a relative 1e-4 / absolute 1e-3
            v -= v * 2e-5
        else:               # noisy
            v *= float(1 + 0.05 * rng.standard_normal())
        out.append(v)
    return out


PLATEAU = [dict(), dict(patience=3), dict(mode="max", patience=4, factor=0.5),
           dict(patience=2, threshold=1e-3, threshold_mode="abs", cooldown=5),
           dict(mode="max", threshold_mode="abs", threshold=0.0, patience=0, cooldown=2),
           dict(patience=1, factor=0.3, min_lr=[0.02, 1e-3, 0.1]),
           dict(patience=1, factor=0.5, min_lr=0.01, cooldown=3, eps=1e-3),
           dict(patience=5, threshold=0.05, cooldown=1, factor=0.9)]


@pytest.mark.parametrize("kw", PLATEAU, ids=[str(k) for k in PLATEAU])
@pytest.mark.parametrize("seed", [0, 1])
def test_reduce_on_plateau_matches_torch(kw, seed):
    torch = pytest.importorskip("torch")
    o1, o2 = _ng_opt("sgd"), _torch_opt(torch, "sgd")
    s1, s2 = L.ReduceLROnPlateau(o1, **kw), torch.optim.lr_scheduler.ReduceLROnPlateau(o2, **kw)
    ms = _metrics(seed)
    if kw.get("mode") == "max":
        ms = [-m for m in ms]
    seq1, seq2 = [], []
    for m in ms:
        o1.step()
        o2.step()
        s1.step(m)
        s2.step(torch.tensor(m, dtype=torch.float64))
        seq1.append(_snapshot(o1, s1) + [s1.best, s1.num_bad_epochs, s1.cooldown_counter, s1.last_epoch])
        seq2.append(_snapshot(o2, s2) + [s2.best, s2.num_bad_epochs, s2.cooldown_counter, s2.last_epoch])
    _close(seq1, seq2)
    # the sequence really exercised reductions and (where asked) the floor
    lr1 = np.array(seq1)[:, :3]
    assert (lr1[-1] < np.array(LRS)).any()
    if "min_lr" in kw:
        floor = kw["min_lr"] if isinstance(kw["min_lr"], list) else [kw["min_lr"]] * 3
        assert np.all(lr1 >= np.array(floor) - 1e-15)
        assert np.isclose(lr1[-1], floor).any()


def test_reduce_on_plateau_validation():
    o = _ng_opt("sgd")
    with pytest.raises(ValueError, match="factor"):
        L.ReduceLROnPlateau(o, factor=1.0)
    with pytest.raises(ValueError, match="mode"):
        L.ReduceLROnPlateau(o, mode="avg")
    with pytest.raises(ValueError, match="threshold mode"):
        L.ReduceLROnPlateau(o, threshold_mode="pct")
    with pytest.raises(ValueError, match="min_lrs"):
        L.ReduceLROnPlateau(o, min_lr=[0.1, 0.2])
    with pytest.raises(TypeError, match="not an Optimizer"):
        L.ReduceLROnPlateau(object())


# ---- state dicts ----------------------------------------------------------------------
class _Decay:
    """A callable object with state (LambdaLR saves its __dict__)."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, e):
        return self.rate ** e


EXTRA = [("lambda_object", "sgd", lambda M, o: M.LambdaLR(o, _Decay(0.97))),
         ("warmup", "sgd", lambda M, o: L.LinearWarmup(o, 30, M.CosineAnnealingLR(o, 60, 1e-3), start_factor=0.1)),
         ("warmup_onecycle", "adam", lambda M, o: L.LinearWarmup(o, 20, M.OneCycleLR(o, 0.2, total_steps=400))),
         ("warmup_none", "sgd", lambda M, o: L.LinearWarmup(o, 50)),
         ("schedule", "sgd", lambda M, o: L.ScheduleLR(o, schedules.warmup_cosine(0.0, 0.1, 20, 250)))]


@pytest.mark.parametrize("name,kind,make", CASES + EXTRA, ids=IDS + [c[0] for c in EXTRA])
@pytest.mark.parametrize("at", [37, 130])
def test_state_dict_round_trip_continues_identically(name, kind, make, at):
    o1 = _ng_opt(kind)
    s1 = make(L, o1)
    for _ in range(at):
        o1.step()
        s1.step()
    osd = copy.deepcopy(o1.state_dict())
    ssd = copy.deepcopy(s1.state_dict())
    assert "optimizer" not in ssd
    o2 = _ng_opt(kind, lrs=[0.7, 0.6, 0.5])  # a fresh run with other settings...
    s2 = make(L, o2)
    o2.load_state_dict(osd)                  # ... resumes from the checkpoint
    s2.load_state_dict(ssd)
    rest = STEPS - at - (30 if name.startswith("onecycle") else 0)
    a, b = _run(o1, s1, rest), _run(o2, s2, rest)
    np.testing.assert_array_equal(a, b)


def test_lambda_state_dict_saves_object_state():
    o = _ng_opt("sgd")
    s = L.LambdaLR(o, [_Decay(0.5), lambda e: 1.0, _Decay(0.9)])
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.5}, None, {"rate": 0.9}]
    fresh = [_Decay(0.1), lambda e: 1.0, _Decay(0.1)]
    s2 = L.LambdaLR(_ng_opt("sgd"), fresh)
    s2.load_state_dict(sd)
    assert fresh[0].rate == 0.5 and fresh[2].rate == 0.9


def test_state_dict_loads_into_torch_and_back():
    torch = pytest.importorskip("torch")
    o1, o2 = _ng_opt("sgd"), _torch_opt(torch, "sgd")
    s1 = L.CosineAnnealingLR(o1, 50)
    s2 = torch.optim.lr_scheduler.CosineAnnealingLR(o2, 50)
    for _ in range(17):
        o1.step()
        s1.step()
    sd = s1.state_dict()
    s2.load_state_dict(copy.deepcopy(sd))
    for g2, g1 in zip(o2.param_groups, o1.param_groups):
        g2["lr"] = g1["lr"]
    _close(_run(o1, s1, 60), _run(o2, s2, 60))


# ---- compositions ---------------------------------------------------------------------
def test_composition_validation():
    o, other = _ng_opt("sgd"), _ng_opt("sgd")
    a, b = L.StepLR(o, 3), L.ExponentialLR(o, 0.9)
    with pytest.raises(ValueError, match="one milestone fewer"):
        L.SequentialLR(o, [a, b], milestones=[2, 4])
    with pytest.raises(ValueError, match="at least one"):
        L.SequentialLR(o, [], milestones=[])
    with pytest.raises(ValueError, match="same optimizer"):
        L.SequentialLR(other, [a, b], milestones=[3])
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        L.ChainedScheduler([a, L.ReduceLROnPlateau(o)])
    with pytest.raises(ValueError, match="at least one"):
        L.ChainedScheduler([])
    with pytest.raises(TypeError, match="not an Optimizer"):
        L.StepLR([1, 2], 3)


def test_nested_sequential_matches_torch():
    torch = pytest.importorskip("torch")
    seqs = []
    for M, o in ((L, _ng_opt("adam")), (torch.optim.lr_scheduler, _torch_opt(torch, "adam"))):
        inner = M.SequentialLR(o, [M.LinearLR(o, 0.5, total_iters=10), M.ExponentialLR(o, 0.95)], [10])
        s = M.SequentialLR(o, [inner, M.CosineAnnealingLR(o, 30)], milestones=[60])
        seqs.append(_run(o, s, 200))
    _close(*seqs)


# ---- CosineAnnealingWarmRestarts with fractional epochs -------------------------------
@pytest.mark.parametrize("T_0,T_mult,eta_min", [(10, 1, 0.0), (5, 2, 1e-3), (3, 3, 0.01)])
def test_warm_restarts_fractional_epochs_match_torch(T_0, T_mult, eta_min):
    torch = pytest.importorskip("torch")
    o1, o2 = _ng_opt("sgd"), _torch_opt(torch, "sgd")
    s1 = L.CosineAnnealingWarmRestarts(o1, T_0, T_mult, eta_min)
    s2 = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(o2, T_0, T_mult, eta_min)
    iters = 7
    seq1, seq2 = [], []
    for epoch in range(45):
        for i in range(iters):
            e = epoch + i / iters
            o1.step()
            o2.step()
            s1.step(e)
            s2.step(e)
            seq1.append(_snapshot(o1, s1) + [s1.T_cur, s1.T_i, s1.last_epoch])
            seq2.append(_snapshot(o2, s2) + [s2.T_cur, s2.T_i, s2.last_epoch])
        if epoch % 5 == 4:  # and plain steps in between
            s1.step()
            s2.step()
    _close(seq1, seq2)


def test_warm_restarts_fractional_closed_form():
    """Against SGDR's formula directly: T_cur is the position within the current period."""
    o = _ng_opt("sgd0", [0.2])
    T_0, T_mult, lo = 4, 2, 0.01
    s = L.CosineAnnealingWarmRestarts(o, T_0, T_mult, lo)
    for e in np.arange(0.0, 60.0, 0.37):
        s.step(float(e))
        start, T = 0.0, T_0
        while e >= start + T:
            start, T = start + T, T * T_mult
        want = lo + (0.2 - lo) * (1 + math.cos(math.pi * (e - start) / T)) / 2
        assert o.param_groups[0]["lr"] == pytest.approx(want, rel=1e-9)
    with pytest.raises(ValueError, match="non-negative epoch"):
        s.step(-1)


def test_warm_restarts_validation():
    o = _ng_opt("sgd")
    with pytest.raises(ValueError, match="T_0"):
        L.CosineAnnealingWarmRestarts(o, 0)
    with pytest.raises(ValueError, match="T_mult"):
        L.CosineAnnealingWarmRestarts(o, 5, T_mult=1.5)


# ---- LinearWarmup -----------------------------------------------------------------------
def _warmup_ref(base, W, sf, t):
    return np.where(t < W, base * (sf + (1 - sf) * t / max(W, 1)), base)


@pytest.mark.parametrize("W,sf", [(25, 0.0), (10, 0.1), (1, 0.5), (0, 0.0)])
def test_linear_warmup_alone_closed_form(W, sf):
    o = _ng_opt("sgd")
    s = L.LinearWarmup(o, W, start_factor=sf)
    got = _run(o, s, 80)[:, :3]
    t = np.arange(81, dtype=np.float64)[:, None]
    _close(got, _warmup_ref(np.array(LRS), W, sf, t), rtol=1e-12)


def test_linear_warmup_then_schedulers_closed_form():
    W, sf = 20, 0.05
    base = np.array(LRS)
    t = np.arange(STEPS + 1, dtype=np.float64)[:, None]
    u = np.maximum(t - W, 0)  # the wrapped scheduler's own epoch
    refs = {
        "exp": (lambda o: L.ExponentialLR(o, 0.98), base * 0.98 ** u),
        "step": (lambda o: L.StepLR(o, 15, 0.5), base * 0.5 ** (u // 15)),
        "cos": (lambda o: L.CosineAnnealingLR(o, 90, 1e-3), 1e-3 + (base - 1e-3) * (1 + np.cos(np.pi * u / 90)) / 2),
        "lambda": (lambda o: L.LambdaLR(o, lambda e: 1 / math.sqrt(1 + e)), base / np.sqrt(1 + u)),
        # (torch's SequentialLR cannot restart a ChainedScheduler at a milestone; this can)
        "chained": (lambda o: L.ChainedScheduler([L.ExponentialLR(o, 0.99), L.ConstantLR(o, 0.5, total_iters=25)]),
                    base * 0.99 ** u * np.where(u < 25, 0.5, 1.0)),
        "sequential": (lambda o: L.SequentialLR(o, [L.ConstantLR(o, 0.5, total_iters=25), L.ExponentialLR(o, 0.99)],
                                                [40]),
                       base * np.where(u < 25, 0.5, 1.0) * 0.99 ** np.maximum(u - 40, 0)),
    }
    for name, (make, after_ref) in refs.items():
        o = _ng_opt("sgd")
        s = L.LinearWarmup(o, W, after=make(o), start_factor=sf)
        got = _run(o, s)[:, :3]
        want = np.where(t < W, _warmup_ref(base, W, sf, t), after_ref)
        _close(got, want, rtol=1e-9)
        if name != "chained":
            assert s.after.last_epoch == STEPS - W, name


def test_linear_warmup_equals_torch_sequential_linear():
    """LinearWarmup(W, after, start_factor=sf) == torch SequentialLR([LinearLR(sf, W), after], [W])."""
    torch = pytest.importorskip("torch")
    T = torch.optim.lr_scheduler
    W, sf = 30, 0.2
    for kind, after in [("sgd", lambda M, o: M.CosineAnnealingLR(o, 50, 1e-4)),
                        ("sgd", lambda M, o: M.MultiStepLR(o, [10, 40, 41], 0.5)),
                        ("adam", lambda M, o: M.OneCycleLR(o, 0.1, total_steps=STEPS)),
                        ("sgd", lambda M, o: M.CosineAnnealingWarmRestarts(o, 7, 2, 1e-3)),
                        ("adam", lambda M, o: M.PolynomialLR(o, 100, 0.5))]:
        o1, o2 = _ng_opt(kind), _torch_opt(torch, kind)
        s1 = L.LinearWarmup(o1, W, after(L, o1), start_factor=sf)
        s2 = T.SequentialLR(o2, [T.LinearLR(o2, sf, total_iters=W), after(T, o2)], [W])
        _close(_run(o1, s1), _run(o2, s2))


def test_linear_warmup_validation():
    o = _ng_opt("sgd")
    with pytest.raises(ValueError, match="warmup_steps"):
        L.LinearWarmup(o, -1)
    with pytest.raises(ValueError, match="start_factor"):
        L.LinearWarmup(o, 5, start_factor=1.5)
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        L.LinearWarmup(o, 5, after=L.ReduceLROnPlateau(o))
    with pytest.raises(ValueError, match="same optimizer"):
        L.LinearWarmup(o, 5, after=L.StepLR(_ng_opt("sgd"), 3))


# ---- ScheduleLR / as_lambda -----------------------------------------------------------
def test_schedule_lr_and_as_lambda_follow_the_schedule():
    fn = schedules.join([schedules.linear(0.0, 0.2, 10), schedules.cosine_decay(0.2, 100, alpha=0.1)], [10])
    want = np.array([fn(t) for t in range(STEPS + 1)])
    o = _ng_opt("sgd")
    got = _run(o, L.ScheduleLR(o, fn))[:, :3]
    _close(got, np.repeat(want[:, None], 3, 1), rtol=1e-15)
    o = _ng_opt("sgd", [0.2])
    got = _run(o, L.LambdaLR(o, schedules.as_lambda(fn, 0.2)))[:, 0]
    _close(got, want, rtol=1e-12)
    o = _ng_opt("sgd")  # one schedule per group, and step(epoch)
    fns = [schedules.constant(0.5), fn, schedules.exponential_decay(1.0, 10, 0.5)]
    s = L.ScheduleLR(o, fns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s.step(42)
    assert s.get_last_lr() == [0.5, fn(42), 0.5 ** 4.2]


def test_as_lambda_drives_torch_lambda_lr():
    torch = pytest.importorskip("torch")
    fn = schedules.warmup_cosine(0.0, 0.1, 25, 250, end=1e-3)
    o = _torch_opt(torch, "sgd", [0.1])
    got = _run(o, torch.optim.lr_scheduler.LambdaLR(o, schedules.as_lambda(fn, 0.1)))[:, 0]
    _close(got, [fn(t) for t in range(STEPS + 1)], rtol=1e-12)


# ---- optimizers use the scheduled lr --------------------------------------------------
def test_sgd_step_moves_by_lr_times_grad():
    p = nn.Parameter(ng.tensor(np.array([1.0, -2.0, 0.5])))
    g = np.array([0.3, -0.7, 1.1])
    o = optim.SGD([p], lr=0.4)
    s = L.ScheduleLR(o, schedules.piecewise([2, 4], [0.4, 0.05, 0.001]))
    s2 = L.StepLR(o, 1, 0.5)  # a second scheduler also rewrites group['lr']
    for k in range(7):
        before = p.detach().numpy().copy()
        lr = o.param_groups[0]["lr"]
        p.grad = ng.tensor(g)
        o.step()
        # to the last bit but one: the kernel rounds p - lr*g once (an fma, as torch does)
        np.testing.assert_allclose(p.detach().numpy(), before - lr * g, rtol=1e-15, atol=0)
        (s if k % 2 else s2).step()
        assert o.param_groups[0]["lr"] != lr


@pytest.mark.parametrize("kind,make", [
    ("sgd", lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=4)),
    ("adam", lambda M, o: M.OneCycleLR(o, 0.05, total_steps=30, three_phase=True)),
    ("adam", lambda M, o: M.CyclicLR(o, 0.001, 0.01, step_size_up=3, mode="triangular2")),
    ("sgd", lambda M, o: M.SequentialLR(o, [M.LinearLR(o, 0.1, total_iters=5), M.ExponentialLR(o, 0.9)], [5]))])
def test_training_with_scheduler_matches_torch(kind, make):
    """Parameters after scheduled SGD-momentum / Adam runs equal torch's: the fused steps
    read the lr and momentum/betas the scheduler wrote."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(3) for _ in LRS]
    P = [nn.Parameter(ng.tensor(a.copy())) for a in init]
    T = [torch.nn.Parameter(torch.tensor(a.copy())) for a in init]
    if kind == "sgd":
        o1 = optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(P, LRS)], momentum=0.9)
        o2 = torch.optim.SGD([{"params": [t], "lr": lr} for t, lr in zip(T, LRS)], momentum=0.9)
    else:
        o1 = optim.Adam([{"params": [p], "lr": lr} for p, lr in zip(P, LRS)])
        o2 = torch.optim.Adam([{"params": [t], "lr": lr} for t, lr in zip(T, LRS)])
    s1, s2 = make(L, o1), make(torch.optim.lr_scheduler, o2)
    for _ in range(30):
        gs = [rng.standard_normal(3) for _ in LRS]
        for p, t, g in zip(P, T, gs):
            p.grad = ng.tensor(g)
            t.grad = torch.tensor(g)
        o1.step()
        o2.step()
        s1.step()
        s2.step()
    for p, t in zip(P, T):
        np.testing.assert_allclose(p.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)


# ---- warnings and validation ----------------------------------------------------------
def test_scheduler_step_before_optimizer_step_warns():
    o = _ng_opt("sgd")
    s = L.StepLR(o, 3)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    o2 = _ng_opt("sgd")
    s2 = L.StepLR(o2, 3)
    o2.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s2.step()
        with pytest.warns(UserWarning, match="get_last_lr"):
            s2.get_lr()


def test_constructor_validation():
    o = _ng_opt("sgd")
    with pytest.raises(ValueError, match="factor"):
        L.ConstantLR(o, factor=1.5)
    with pytest.raises(ValueError, match="start_factor"):
        L.LinearLR(o, start_factor=0)
    with pytest.raises(ValueError, match="end_factor"):
        L.LinearLR(o, end_factor=2)
    with pytest.raises(ValueError, match="lr_lambdas"):
        L.LambdaLR(o, [lambda e: 1.0])
    with pytest.raises(TypeError, match="function"):
        L.MultiplicativeLR(o, 3.0)
    with pytest.raises(ValueError, match="scale_fn"):
        L.CyclicLR(o, 0.01, 0.1, mode="sine")
    with pytest.raises(ValueError, match="max_lr"):
        L.CyclicLR(o, 0.01, [0.1, 0.2])
    with pytest.raises(ValueError, match="total_steps OR"):
        L.OneCycleLR(o, 0.1)
    with pytest.raises(ValueError, match="pct_start"):
        L.OneCycleLR(o, 0.1, total_steps=10, pct_start=1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        L.OneCycleLR(o, 0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(ValueError, match="total_steps"):
        L.OneCycleLR(o, 0.1, total_steps=0)
