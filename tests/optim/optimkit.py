"""Shared harness of the optimizer tests: the same parameters and gradients fed to a
numbagrad optimizer and to its ``torch.optim`` (or NumPy) counterpart, step for step.

``run_parity`` is the contract of issue 6: 100 steps, float32 equal to 1e-6 relative
(float64 to 1e-10). ``converge`` runs an optimizer on a least-squares quadratic or on
the 2-D Rosenbrock function from a fixed start. ``signature_counts`` snapshots how
many compiled signatures the given kernels have, for "the second step compiles
nothing new" tests (``check_no_recompile``). The ``check_*`` helpers are the checks
every optimizer's tests share: state dict round trips, torch's state dict layout,
loading a torch state dict, constructor validation.
"""
import copy

import numpy as np
import pytest

import numbagrad as ng
from numbagrad import nn
from numbagrad.backend import config

SHAPES = [(5, 3), (3,), (4, 2, 2), (), (7, 1)]
STEPS = 100
# More than config.PARALLEL_THRESHOLD elements (the parallel twins run); the first
# parameter spans several arena blocks.
LARGE_SHAPES = [(300, 300), (300,), (50, 40)]
# Parameters start standard-normal (scale ~1), so atol 1e-6 is 1e-6 relative to the
# tensor's scale; it only matters for elements that wander near zero. The kernels round
# where torch rounds (``kernels/cpu/_fma.py``); what is left against torch is torch's
# float32 sqrt (MKL, not correctly rounded) and which multiply-adds torch's vector code
# fuses on the CPU at hand, a few ulp in some of the elements. Torch parity is checked to
# this tolerance only; the rounding itself is checked bit for bit, independently of the
# CPU, against NumPy emulations of torch's ops (``tests/reference/optim_rounding.py``,
# ``test_optim_rounding.py``).
TOL = {np.float32: dict(rtol=1e-6, atol=1e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}

# Option sets that reach every rounding branch of the kernels (lerp weights on both sides
# of 0.5, L2 and decoupled decay, maximize, RAdam before and after rectification...):
# checked against torch to TOL (test_optim_adamx.py, test_optim_adaptive.py) and bit for
# bit against the NumPy emulations (test_optim_rounding.py).
ADAMX_CASES = {
    "adamax": [dict(), dict(lr=1e-2), dict(lr=1e-2, weight_decay=0.1), dict(lr=1e-2, maximize=True),
               dict(lr=0.05, betas=(0.5, 0.9), eps=1e-3), dict(lr=0.1, betas=(0.3, 0.5)),
               dict(lr=1e-2, weight_decay=0.05, maximize=True, betas=(0.8, 0.99))],
    # betas (0.3, 0.5): rho_inf = 3, never rectified; the others: rectified from step 6 (rho_t <= t)
    "radam": [dict(), dict(lr=1e-2), dict(lr=1e-2, weight_decay=0.1),
              dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True), dict(lr=1e-2, maximize=True),
              dict(lr=0.05, betas=(0.5, 0.9), eps=1e-6), dict(lr=0.1, betas=(0.3, 0.5)),
              dict(lr=1e-2, weight_decay=0.05, decoupled_weight_decay=True, maximize=True, betas=(0.9, 0.99))],
    "nadam": [dict(), dict(lr=1e-2), dict(lr=1e-2, weight_decay=0.1),
              dict(lr=1e-2, weight_decay=0.1, decoupled_weight_decay=True), dict(lr=1e-2, maximize=True),
              dict(lr=1e-2, momentum_decay=0.04), dict(lr=0.05, betas=(0.5, 0.9), eps=1e-6),
              dict(lr=0.1, betas=(0.3, 0.5), momentum_decay=0.0),
              dict(lr=1e-2, weight_decay=0.05, decoupled_weight_decay=True, maximize=True, betas=(0.9, 0.99))],
}
ADAPTIVE_ROUNDING_CASES = [
    ("RMSprop", dict(lr=1e-2, weight_decay=0.1, maximize=True)),
    ("RMSprop", dict(lr=1e-2, alpha=0.9, momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=1e-2, alpha=0.3, centered=True)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.1, initial_accumulator_value=0.1, maximize=True)),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True))]


def setup(dtype, seed=0, shapes=SHAPES, steps=STEPS, torch=None):
    """(numbagrad parameters, torch parameters or None, per-step gradient lists)."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(steps)]
    P = [nn.Parameter(ng.tensor(a.copy())) for a in init]
    T = None if torch is None else [torch.nn.Parameter(torch.tensor(a.copy())) for a in init]
    return P, T, grads


def set_grads(P, T, grads_k, skip=(), torch=None):
    """Give parameter i the gradient ``grads_k[i]`` (None for i in ``skip``)."""
    for i, p in enumerate(P):
        p.grad = None if i in skip else ng.tensor(grads_k[i])
        if T is not None:
            T[i].grad = None if i in skip else torch.tensor(grads_k[i])


def assert_close(P, T, dtype, tol=None):
    tol = tol or TOL[np.dtype(dtype).type]
    for i, (p, t) in enumerate(zip(P, T)):
        t = t if isinstance(t, np.ndarray) else t.detach().numpy()
        np.testing.assert_allclose(p.detach().numpy(), t, err_msg=f"parameter {i}", **tol)


def run_parity(ng_cls, t_cls, kw, dtype, torch, steps=STEPS, skips=None, tol=None, ng_kw=None, shapes=SHAPES):
    """Step a numbagrad and a torch optimizer with the same gradients (parameter ``i``
    has none at step ``k`` for ``i in skips[k]``); assert equal."""
    if shapes is LARGE_SHAPES:
        assert sum(int(np.prod(s)) for s in shapes) >= config.PARALLEL_THRESHOLD
    P, T, grads = setup(dtype, shapes=shapes, steps=steps, torch=torch)
    o1, o2 = ng_cls(P, **(ng_kw or kw)), t_cls(T, **kw)
    for k in range(steps):
        set_grads(P, T, grads[k], (skips or {}).get(k, ()), torch=torch)
        o1.step()
        o2.step()
    assert_close(P, T, dtype, tol)
    return P, T, o1, o2


def quadratic(x, A, b):
    return ((A @ x - b) ** 2).mean()


def rosenbrock(xy):
    x, y = xy[0], xy[1]
    return (1 - x) ** 2 + 100 * (y - x * x) ** 2


def converge(make, problem, steps, closure_style=False):
    """Minimise ``problem`` ('quadratic' or 'rosenbrock') with ``make([param])``; returns
    (final parameter as NumPy, the known minimiser)."""
    if problem == "quadratic":
        rng = np.random.default_rng(3)
        A = ng.tensor(rng.standard_normal((20, 5)))
        x_true = rng.standard_normal(5)
        b = ng.tensor(A.numpy() @ x_true)
        x = nn.Parameter(ng.zeros(5, dtype=ng.float64))

        def f():
            return quadratic(x, A, b)
    elif problem == "rosenbrock":
        x_true = np.ones(2)
        x = nn.Parameter(ng.tensor(np.array([-1.5, 2.0])))

        def f():
            return rosenbrock(x)
    else:
        raise ValueError(problem)
    opt = make([x])

    def closure():
        opt.zero_grad()
        loss = f()
        loss.backward()
        return loss

    for _ in range(steps):
        if closure_style:
            opt.step(closure)
        else:
            closure()
            opt.step()
    return x.detach().numpy(), x_true


def signature_counts(*kernels):
    """Number of compiled signatures of each FlatKernel's serial and parallel twin."""
    return tuple((len(k.serial.signatures), len(k.parallel.signatures)) for k in kernels)


# ---- checks shared by the optimizer test files ------------------------------------------
def train(o, P, grads, ks, skip=()):
    """Steps ``ks`` of ``grads`` on optimizer ``o`` (parameters in ``skip`` without a gradient)."""
    for k in ks:
        for i, (p, g) in enumerate(zip(P, grads[k])):
            p.grad = None if i in skip else ng.tensor(g)
        o.step()


def assert_state_close(o1, o2, P, T, tol):
    """Per parameter, ``o1``'s state has ``o2``'s keys in the same order and close values."""
    for p, t in zip(P, T):
        assert list(o1.state[p]) == list(o2.state[t])
        for key, val in o2.state[t].items():
            np.testing.assert_allclose(o1.state[p][key].numpy(), val.numpy(), err_msg=key, **tol)


def check_param_groups_like_torch(ng_cls, t_cls, kw, torch, second=None, steps=10):
    """Two parameter groups (the second with the options ``second``, default lr 0.1 and
    weight decay 0.01) and every lr halved after 5 steps, as a scheduler would: numbagrad
    and torch step alike (float64). Returns the numbagrad optimizer."""
    second = dict(lr=0.1, weight_decay=0.01) if second is None else second
    P, T, grads = setup(np.float64, steps=steps, torch=torch)
    o1 = ng_cls([{"params": P[:2]}, {"params": P[2:], **second}], **kw)
    o2 = t_cls([{"params": T[:2]}, {"params": T[2:], **second}], **kw)
    for k in range(steps):
        set_grads(P, T, grads[k], torch=torch)
        if k == 5:
            for g1, g2 in zip(o1.param_groups, o2.param_groups):
                g1["lr"] *= 0.5  # schedulers change lr between steps
                g2["lr"] *= 0.5
        o1.step()
        o2.step()
    assert_close(P, T, np.float64)
    return o1


def check_state_dict_round_trip(make, dtype=np.float64, steps=20, split=10, skips=None):
    """``make(params)`` trained ``split`` steps, its state dict (deep-copied) loaded into a
    fresh optimizer on copied parameters: both continue identically, parameters and
    state bit for bit."""
    P, _, grads = setup(dtype, steps=steps)
    Q = [nn.Parameter(ng.tensor(p.detach().numpy().copy())) for p in P]
    a = make(P)
    for k in range(split):
        train(a, P, grads, [k], skip=(skips or {}).get(k, ()))
    sd = copy.deepcopy(a.state_dict())
    b = make(Q)
    for p, q in zip(P, Q):
        q.array[...] = p.array
    b.load_state_dict(sd)
    train(a, P, grads, range(split, steps))
    train(b, Q, grads, range(split, steps))
    for p, q in zip(P, Q):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
        assert list(a.state[p]) == list(b.state[q])
        for key, val in a.state[p].items():
            np.testing.assert_array_equal(b.state[q][key].numpy(), val.numpy(), err_msg=key)


def check_state_dict_like_torch(o1, o2, P, T, grads, torch, tol=None, group_keys=None):
    """Three steps (parameter 2 without a gradient on the first), then ``o1.state_dict()``
    has the layout of ``o2``'s: the same parameter indices and state keys in the same
    order, values of the same shape and dtype and close, step counts 3 and 2, and the
    same param_groups (only ``group_keys`` of them when given). Returns both dicts."""
    for k in range(3):
        set_grads(P, T, grads[k], skip=(2,) if k == 0 else (), torch=torch)
        o1.step()
        o2.step()
    s1, s2 = o1.state_dict(), o2.state_dict()
    assert list(s1["state"]) == list(s2["state"])
    for i, st in s2["state"].items():
        assert list(s1["state"][i]) == list(st)
        for key, val in st.items():
            mine = s1["state"][i][key]
            assert mine.shape == tuple(val.shape), key
            assert mine.dtype == np.dtype(str(val.dtype).replace("torch.", "")), key
            np.testing.assert_allclose(mine.numpy(), val.numpy(), err_msg=key, **(tol or dict(rtol=1e-5, atol=1e-7)))
    assert s1["state"][2]["step"].item() == 2.0 and s1["state"][0]["step"].item() == 3.0
    g1, g2 = s1["param_groups"][0], s2["param_groups"][0]
    if group_keys is None:
        assert sorted(g1) == sorted(g2)
    for key in group_keys or g2:
        assert g1[key] == (list(g2[key]) if key == "params" else g2[key]), key
    return s1, s2


def check_load_torch_state(ng_cls, t_cls, kw, dtype, torch, steps=12, split=6, skips=None):
    """A torch optimizer runs ``split`` steps; a numbagrad one loads its state dict and
    both continue to ``steps`` in step. Returns (P, T, numbagrad optimizer, torch one)."""
    P, T, grads = setup(dtype, steps=steps, torch=torch)
    o2 = t_cls(T, **kw)
    for k in range(split):
        set_grads(P, T, grads[k], (skips or {}).get(k, ()), torch=torch)
        o2.step()
    for p, t in zip(P, T):
        p.array[...] = t.detach().numpy()
    o1 = ng_cls(P, **kw)
    o1.load_state_dict(o2.state_dict())
    for k in range(split, steps):
        set_grads(P, T, grads[k], torch=torch)
        o1.step()
        o2.step()
    assert_close(P, T, dtype)
    return P, T, o1, o2


def check_no_recompile(make, kernels, bump=("lr",), skip=()):
    """After a first float32 step, more steps (``skip``: parameters without a gradient) and
    ints in the hyperparameters ``bump`` compile no new signature of ``kernels``."""
    P, _, grads = setup(np.float32, steps=3)
    o = make(P)
    train(o, P, grads, [0])
    before = signature_counts(*kernels)
    train(o, P, grads, [1, 2], skip=skip)
    for key in bump:
        o.param_groups[0][key] = 1  # an int must not compile a new signature
    train(o, P, grads, [0])
    assert signature_counts(*kernels) == before


BETAS_BAD = [(dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
             (dict(betas=(0.9, -0.5)), "Invalid beta parameter at index 1: -0.5")]


def check_constructor_rejects(cls, bad, torch_cls=None, torch=None):
    """``cls([p], **kw)`` raises ValueError matching ``msg`` for each ``(kw, msg)`` of ``bad``
    (and so does ``torch_cls`` when given); ``differentiable=True`` and an empty
    parameter list are refused."""
    p = nn.Parameter(ng.ones(2))
    for kw, msg in bad:
        with pytest.raises(ValueError, match=msg):
            cls([p], **kw)
        if torch_cls is not None:
            with pytest.raises(ValueError, match=msg):  # the same check in torch
                torch_cls([torch.nn.Parameter(torch.ones(2))], **kw)
    with pytest.raises(NotImplementedError, match="differentiable"):
        cls([p], differentiable=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        cls([])
