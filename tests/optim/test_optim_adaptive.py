"""RMSprop / Adagrad / Adadelta: the rounding cases with state against torch, parameters
missing gradients, a plain NumPy per-tensor reference, state_dict layout (Adagrad's state
from the constructor) and constructor validation. Parity for every option, convergence,
state_dict round trips and no recompilation: ``test_optimizers.py``
(``optimkit.OPTIMIZERS``)."""
import copy

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.optim.adadelta import Adadelta
from numbagrad.optim.adagrad import Adagrad
from numbagrad.optim.rmsprop import RMSprop

torch = pytest.importorskip("torch")

import optimkit  # noqa: E402
from optimkit import assert_close, setup  # noqa: E402

CLASSES = {"RMSprop": (RMSprop, torch.optim.RMSprop), "Adagrad": (Adagrad, torch.optim.Adagrad),
           "Adadelta": (Adadelta, torch.optim.Adadelta)}

def _ids(cases):
    return [f"{name}-{kw}" for name, kw in cases]


def _set_grads(P, T, grads_k, skip=()):
    optimkit.set_grads(P, T, grads_k, skip, torch=torch)


# ---- torch parity (the option sets: optimkit.OPTIMIZERS, test_optimizers.py) --------
@pytest.mark.parametrize("name,kw", [("RMSprop", dict(lr=1e-2, momentum=0.9, centered=True)),
                                     ("Adadelta", dict(weight_decay=0.1))], ids=["RMSprop", "Adadelta"])
def test_capturable_is_accepted_and_changes_nothing(name, kw):
    # torch refuses capturable=True for CPU tensors; our step counts live with the arena anyway
    ng_cls, t_cls = CLASSES[name]
    optimkit.run_parity(ng_cls, t_cls, kw, np.float32, torch, ng_kw=dict(kw, capturable=True))


ROUNDING_CASES = optimkit.ADAPTIVE_ROUNDING_CASES  # every rounding branch; shared with test_optim_rounding.py


@pytest.mark.parametrize("name,kw", ROUNDING_CASES, ids=_ids(ROUNDING_CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rounding_cases_match_torch_with_state(name, kw, dtype):
    """The option sets that reach every rounding branch of the kernels, on 20000 elements
    for 3 steps: parameter and every state tensor match torch's to ``optimkit.TOL``.
    Where torch rounds is checked bit for bit, independently of the CPU, against NumPy
    emulations of torch's ops in ``test_optim_rounding.py`` (torch itself fuses
    multiply-adds, and rounds its ``sqrt``, differently from one CPU to another)."""
    ng_cls, t_cls = CLASSES[name]
    P, T, o1, o2 = optimkit.run_parity(ng_cls, t_cls, kw, dtype, torch, steps=3, shapes=[(20000,)])
    optimkit.assert_state_close(o1, o2, P, T, optimkit.TOL[dtype])


SKIP_CASES = [("RMSprop", dict(lr=1e-2, momentum=0.9, centered=True, weight_decay=0.01)),
              ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.2, weight_decay=0.01)),
              ("Adadelta", dict(lr=0.5, weight_decay=0.01, maximize=True))]


@pytest.mark.parametrize("name,kw", SKIP_CASES, ids=_ids(SKIP_CASES))
def test_missing_grads_are_skipped_like_torch(name, kw):
    skips = {0: (1,), 3: (1, 2), 4: (0,), 9: (0, 1, 2, 3, 4), 20: (3,)}
    ng_cls, t_cls = CLASSES[name]
    for dtype in (np.float32, np.float64):
        P, T, o1, o2 = optimkit.run_parity(ng_cls, t_cls, kw, dtype, torch, steps=30, skips=skips)
        optimkit.assert_state_close(o1, o2, P, T, optimkit.TOL[dtype])
        assert o1.state[P[1]]["step"].item() == 27.0 and o1.state[P[0]]["step"].item() == 28.0


def test_param_groups_and_lr_changes_match_torch():
    for name, kw in [("RMSprop", dict(lr=1e-2, momentum=0.9)), ("Adagrad", dict(lr=0.1, lr_decay=0.1)),
                     ("Adadelta", dict(lr=1.0))]:
        optimkit.check_param_groups_like_torch(*CLASSES[name], kw, torch, second=dict(lr=0.05, weight_decay=0.01))


def test_large_parameters_use_the_parallel_kernel_and_match_torch():
    for name, kw in [("RMSprop", dict(lr=1e-3, momentum=0.9, centered=True)),
                     ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.1)),
                     ("Adadelta", dict(weight_decay=0.01))]:
        optimkit.run_parity(*CLASSES[name], kw, np.float32, torch, steps=5, skips={2: (1,)},
                            shapes=optimkit.LARGE_SHAPES)


# ---- Adagrad's state from the constructor ------------------------------------------------------
def test_adagrad_state_exists_right_after_construction_like_torch():
    P, T, _ = setup(np.float32, torch=torch)
    o1, o2 = Adagrad(P, lr=0.1, initial_accumulator_value=0.25), torch.optim.Adagrad(T, lr=0.1,
                                                                                      initial_accumulator_value=0.25)
    s1, s2 = o1.state_dict(), o2.state_dict()
    assert list(s1["state"]) == list(s2["state"]) == [0, 1, 2, 3, 4]
    for i, p in enumerate(P):
        assert list(s1["state"][i]) == list(s2["state"][i]) == ["step", "sum"]
        step, sum_ = s1["state"][i]["step"], s1["state"][i]["sum"]
        assert step.shape == () and step.dtype == np.float32 and step.item() == 0.0
        assert sum_.shape == p.shape and sum_.dtype == np.float32
        np.testing.assert_array_equal(sum_.numpy(), s2["state"][i]["sum"].numpy())
    # a fresh optimizer loads that state (before any step) and then steps like torch
    P2, T2, grads = setup(np.float32, steps=5, torch=torch)
    o3 = Adagrad(P2, lr=0.1)
    o3.load_state_dict(o2.state_dict())
    o4 = torch.optim.Adagrad(T2, lr=0.1, initial_accumulator_value=0.25)
    for k in range(5):
        _set_grads(P2, T2, grads[k])
        o3.step()
        o4.step()
    assert_close(P2, T2, np.float32)


def test_adagrad_lazy_state_for_added_groups_and_missing_entries_matches_torch():
    """Parameters without state (added later, or absent from a loaded state dict) start
    ``sum`` at the constructor's ``initial_accumulator_value`` on their first gradient."""
    P, T, grads = setup(np.float64, steps=12, torch=torch)
    kw = dict(lr=0.1, initial_accumulator_value=0.3, lr_decay=0.01)
    o1, o2 = Adagrad(P[:2], **kw), torch.optim.Adagrad(T[:2], **kw)
    for k in range(12):
        if k == 2:
            o1.add_param_group({"params": P[2:], "lr": 0.2})
            o2.add_param_group({"params": T[2:], "lr": 0.2})
        # parameter 4 gets its first gradient at step 6 (its slot sat in the arena unpopulated)
        _set_grads(P, T, grads[k], skip=(4,) if k < 6 else ())
        o1.step()
        o2.step()
    assert_close(P, T, np.float64)
    assert o1.state[P[4]]["step"].item() == 6.0
    assert list(o1.state_dict()["state"]) == list(o2.state_dict()["state"])
    # a state dict with parameter 1's entry removed: it is initialised lazily, as in torch
    sd = o2.state_dict()
    del sd["state"][1]
    sd = copy.deepcopy(sd)
    o3 = Adagrad([{"params": P[:2]}, {"params": P[2:]}], **kw)
    o3.load_state_dict(sd)
    o2.load_state_dict(sd)
    assert 1 not in o3.state_dict()["state"]
    for k in range(4):
        _set_grads(P, T, grads[k])
        o3.step()
        o2.step()
    assert_close(P, T, np.float64)
    np.testing.assert_allclose(o3.state[P[1]]["sum"].numpy(), o2.state[T[1]]["sum"].numpy(), rtol=1e-12)


# ---- NumPy per-tensor references (float64, the documented formulas) ----------------------------
def _numpy_rmsprop(params, grads_seq, skips, lr, alpha, eps, wd, momentum, centered, maximize):
    v = [np.zeros_like(p) for p in params]
    a = [np.zeros_like(p) for p in params]
    b = [np.zeros_like(p) for p in params]
    for i, p, g, _ in optimkit.ref_steps(params, grads_seq, skips):
        g = (-g if maximize else g) + wd * p
        v[i] = alpha * v[i] + (1 - alpha) * g * g
        if centered:
            a[i] = alpha * a[i] + (1 - alpha) * g
            avg = np.sqrt(v[i] - a[i] * a[i]) + eps
        else:
            avg = np.sqrt(v[i]) + eps
        if momentum > 0:
            b[i] = momentum * b[i] + g / avg
            p -= lr * b[i]
        else:
            p -= lr * g / avg
    return params


def _numpy_adagrad(params, grads_seq, skips, lr, lr_decay, wd, iav, eps, maximize):
    s = [np.full_like(p, iav) for p in params]
    for i, p, g, t in optimkit.ref_steps(params, grads_seq, skips):
        g = (-g if maximize else g) + wd * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s[i] = s[i] + g * g
        p -= clr * g / (np.sqrt(s[i]) + eps)
    return params


def _numpy_adadelta(params, grads_seq, skips, lr, rho, eps, wd, maximize):
    v = [np.zeros_like(p) for p in params]
    u = [np.zeros_like(p) for p in params]
    for i, p, g, _ in optimkit.ref_steps(params, grads_seq, skips):
        g = (-g if maximize else g) + wd * p
        v[i] = rho * v[i] + (1 - rho) * g * g
        delta = np.sqrt(u[i] + eps) / np.sqrt(v[i] + eps) * g
        u[i] = rho * u[i] + (1 - rho) * delta * delta
        p -= lr * delta
    return params


REF_CASES = [
    (RMSprop, _numpy_rmsprop, dict(lr=1e-2, alpha=0.9, eps=1e-8, weight_decay=0.05, momentum=0.0, centered=False,
                                   maximize=False)),
    (RMSprop, _numpy_rmsprop, dict(lr=1e-2, alpha=0.95, eps=1e-8, weight_decay=0.05, momentum=0.9, centered=True,
                                   maximize=True)),
    (RMSprop, _numpy_rmsprop, dict(lr=1e-2, alpha=0.3, eps=1e-6, weight_decay=0.0, momentum=0.0, centered=True,
                                   maximize=False)),
    (Adagrad, _numpy_adagrad, dict(lr=0.1, lr_decay=0.1, weight_decay=0.05, initial_accumulator_value=0.2,
                                   eps=1e-10, maximize=True)),
    (Adadelta, _numpy_adadelta, dict(lr=0.7, rho=0.9, eps=1e-6, weight_decay=0.05, maximize=False)),
    (Adadelta, _numpy_adadelta, dict(lr=1.0, rho=0.5, eps=1e-5, weight_decay=0.0, maximize=True)),
]


@pytest.mark.parametrize("cls,ref,kw", REF_CASES, ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(REF_CASES)])
def test_fused_equals_numpy_per_tensor_reference(cls, ref, kw):
    P, _, grads = setup(np.float64, steps=15)
    skips = {1: (2,), 4: (0, 3), 7: (1,)}
    expect = ref([p.detach().numpy().copy() for p in P], grads, skips, *kw.values())
    o = cls(P, **kw)
    for k in range(15):
        optimkit.set_grads(P, None, grads[k], skips.get(k, ()))
        o.step()
    for p, r in zip(P, expect):
        np.testing.assert_allclose(p.detach().numpy(), r, rtol=1e-12, atol=1e-14)


# ---- state dict ------------------------------------------------------------------------
LAYOUT_CASES = [("RMSprop", dict(lr=1e-2, momentum=0.9, centered=True), ["step", "square_avg", "momentum_buffer",
                                                                          "grad_avg"]),
                ("RMSprop", dict(lr=1e-2), ["step", "square_avg"]),
                ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.1), ["step", "sum"]),
                ("Adadelta", dict(), ["step", "square_avg", "acc_delta"])]


@pytest.mark.parametrize("name,kw,keys", LAYOUT_CASES, ids=[f"{n}-{kw}" for n, kw, _ in LAYOUT_CASES])
def test_state_dict_layout_matches_torch(name, kw, keys):
    ng_cls, t_cls = CLASSES[name]
    P, T, grads = setup(np.float32, steps=3, torch=torch)
    s1, _ = optimkit.check_state_dict_like_torch(ng_cls(P, **kw), t_cls(T, **kw), P, T, grads, torch)
    assert all(list(st) == keys for st in s1["state"].values())


@pytest.mark.parametrize("name,kw", [("RMSprop", dict(lr=1e-2, momentum=0.9, centered=True)),
                                     ("Adagrad", dict(lr=0.1, lr_decay=0.01)), ("Adadelta", dict(weight_decay=0.1))],
                         ids=["RMSprop", "Adagrad", "Adadelta"])
def test_load_torch_optimizer_state_then_continue_like_torch(name, kw):
    optimkit.check_load_torch_state(*CLASSES[name], kw, np.float64, torch, skips={1: (3,)})


# ---- construction ----------------------------------------------------------------------
def test_constructor_validation_and_defaults():
    p = nn.Parameter(ng.ones(2))
    for cls, bad in [(RMSprop, [("lr", -1, "Invalid learning rate"), ("eps", -1, "Invalid epsilon value"),
                                ("momentum", -0.1, "Invalid momentum value"),
                                ("weight_decay", -1, "Invalid weight_decay value"),
                                ("alpha", -0.5, "Invalid alpha value")]),
                     (Adagrad, [("lr", -1, "Invalid learning rate"), ("lr_decay", -1, "Invalid lr_decay value"),
                                ("weight_decay", -1, "Invalid weight_decay value"),
                                ("initial_accumulator_value", -1, "Invalid initial_accumulator_value value"),
                                ("eps", -1, "Invalid epsilon value")]),
                     (Adadelta, [("lr", -1, "Invalid learning rate"), ("rho", 1.5, "Invalid rho value"),
                                 ("rho", -0.1, "Invalid rho value"), ("eps", -1, "Invalid epsilon value"),
                                 ("weight_decay", -1, "Invalid weight_decay value")])]:
        t_cls = getattr(torch.optim, cls.__name__)
        optimkit.check_constructor_rejects(cls, [({arg: val}, msg) for arg, val, msg in bad], t_cls, torch)
        # defaults and group keys as torch's
        tp = torch.nn.Parameter(torch.ones(2))
        o, to = cls([p]), t_cls([tp])
        g, tg = dict(o.param_groups[0]), dict(to.param_groups[0])
        del g["params"], tg["params"]
        assert g == tg
    with pytest.raises(RuntimeError, match="fused"):
        Adagrad([p], fused=True, foreach=True)
    Adagrad([p], fused=True)  # accepted: every step is one fused kernel anyway
    RMSprop([p], capturable=True, foreach=False)
    Adadelta([p], capturable=True, foreach=True)
    assert repr(RMSprop([p])).startswith("RMSprop (\nParameter Group 0\n    alpha: 0.99")
